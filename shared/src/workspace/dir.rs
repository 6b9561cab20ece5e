//! A [`FileSource`] over local directories: a workspace directory and a
//! tastes directory, for `ctx read-context --dir PATH --tastes DIR` (the
//! same assembly as the server's, with no server).

use std::path::{Path, PathBuf};

use async_trait::async_trait;

use super::FilePath;
use super::context::{FileSource, Keep};
use crate::error::{Error, Result};

/// Files under a workspace directory and an optional tastes directory.
#[derive(Debug, Clone)]
pub struct DirSource {
    workspace: PathBuf,
    tastes: Option<PathBuf>,
}

impl DirSource {
    /// Reads workspace files under `workspace`, tastes under `tastes`
    /// (none when absent).
    pub fn new(workspace: impl Into<PathBuf>, tastes: Option<PathBuf>) -> Self {
        DirSource {
            workspace: workspace.into(),
            tastes,
        }
    }
}

/// A file's text; `None` when missing, unreadable or not UTF-8.
async fn text_of(dir: &Path, path: &FilePath) -> Result<Option<String>> {
    match tokio::fs::read(dir.join(path.as_str())).await {
        Ok(bytes) => Ok(String::from_utf8(bytes).ok()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        // A directory where a file was expected, no permission, ...: an
        // unreadable file is a missing one, as on the server.
        Err(_) => Ok(None),
    }
}

#[async_trait]
impl FileSource for DirSource {
    async fn workspace_text(&self, path: &FilePath) -> Result<Option<String>> {
        text_of(&self.workspace, path).await
    }

    async fn taste_text(&self, path: &FilePath) -> Result<Option<String>> {
        match &self.tastes {
            Some(dir) => text_of(dir, path).await,
            None => Ok(None),
        }
    }

    /// Reads the whole file: a local file is cheap to scan, and the server
    /// is where the log tail has to be found without reading the log.
    async fn last_lines(&self, path: &FilePath, n: usize, keep: &Keep) -> Result<Vec<String>> {
        let Some(text) = text_of(&self.workspace, path).await? else {
            return Ok(Vec::new());
        };
        Ok(text
            .lines()
            .rev()
            .filter(|l| keep(l))
            .take(n)
            .map(str::to_owned)
            .collect())
    }
}

/// The files of a directory: (path in the workspace, file) for each file
/// that can be one, and (file, why not) for each that cannot.
pub type Listing = (Vec<(FilePath, PathBuf)>, Vec<(PathBuf, Error)>);

/// Every file under `dir` whose relative path is a valid [`FilePath`],
/// sorted, with the paths that are not (and why), for `ctx workspace push`.
///
/// # Errors
/// `Invalid` (field `dir`) when `dir` cannot be listed.
pub fn list_files(dir: &Path) -> Result<Listing> {
    let mut good = Vec::new();
    let mut bad = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d)
            .map_err(|e| Error::invalid("dir", format!("cannot list {}: {e}", d.display())))?;
        for entry in entries {
            let entry = entry
                .map_err(|e| Error::invalid("dir", format!("cannot list {}: {e}", d.display())))?;
            let p = entry.path();
            let ft = entry
                .file_type()
                .map_err(|e| Error::invalid("dir", format!("cannot stat {}: {e}", p.display())))?;
            if ft.is_dir() {
                stack.push(p);
                continue;
            }
            if !ft.is_file() {
                continue;
            }
            let rel = p.strip_prefix(dir).unwrap_or(&p);
            let text = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            match text.parse::<FilePath>() {
                Ok(fp) => good.push((fp, p)),
                Err(e) => bad.push((p, e)),
            }
        }
    }
    good.sort_by(|a, b| a.0.cmp(&b.0));
    bad.sort_by(|a, b| a.0.cmp(&b.0));
    Ok((good, bad))
}
