//! read_context: the first-turn context (docs/workspaces.md; the decision
//! is docs/adr/0006-workspaces-and-read-context.md), assembled in its
//! loading order from a [`FileSource`]: tastes, brief, notes, recent log,
//! recent gaps.
//!
//! The assembly is pure code over the source, so the server (files in the
//! store) and `ctx read-context --dir` (files on disk) give the same JSON.
//! Every missing or unreadable (not UTF-8) file gives its empty struct; a
//! malformed JSONL line is skipped, never an error.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::FilePath;
use crate::error::Result;

/// Lines of long notes kept from the start.
pub const NOTES_HEAD_LINES: usize = 10;
/// Lines of long notes kept from the end.
pub const NOTES_TAIL_LINES: usize = 30;
/// Notes of at most this many lines are returned whole.
pub const NOTES_TRUNCATION_THRESHOLD: usize = NOTES_HEAD_LINES + NOTES_TAIL_LINES;
/// Entries of `log.jsonl` returned, newest first.
pub const RECENT_LOG_LIMIT: usize = 10;
/// Records of `vocabulary_gaps.jsonl` returned, newest first.
pub const RECENT_GAPS_LIMIT: usize = 10;

/// The tastes file every workspace gets.
pub const DEFAULT_TASTES: &str = "_default.md";
/// The brief of a workspace.
pub const BRIEF: &str = "brief.md";
/// The notes of a workspace.
pub const NOTES: &str = "notes.md";
/// The operation log of a workspace (JSONL).
pub const LOG: &str = "log.jsonl";
/// The vocabulary gaps of a workspace (JSONL).
pub const GAPS: &str = "vocabulary_gaps.jsonl";

/// Which lines of a JSONL file [`FileSource::last_lines`] keeps.
pub type Keep = dyn for<'l> Fn(&'l str) -> bool + Send + Sync;

/// Where the assembly reads files from.
#[async_trait]
pub trait FileSource: Send + Sync {
    /// A file of the workspace as text; `None` when it is missing or not
    /// UTF-8.
    ///
    /// # Errors
    /// Only when the source itself fails (a store that is unavailable).
    async fn workspace_text(&self, path: &FilePath) -> Result<Option<String>>;

    /// A file of the tastes directory (workspace `tastes`) as text; `None`
    /// when it is missing or not UTF-8.
    ///
    /// # Errors
    /// As [`FileSource::workspace_text`].
    async fn taste_text(&self, path: &FilePath) -> Result<Option<String>>;

    /// At most `n` of the last lines of a workspace file that `keep`
    /// accepts, newest first. A source should read no more of the file than
    /// it needs to find them.
    ///
    /// # Errors
    /// As [`FileSource::workspace_text`].
    async fn last_lines(&self, path: &FilePath, n: usize, keep: &Keep) -> Result<Vec<String>>;
}

/// The whole first-turn context, in loading order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Context {
    /// `_default.md` and the genres the brief names.
    pub tastes: Tastes,
    /// The workspace's brief.
    pub brief: Brief,
    /// The workspace's notes, truncated head + tail when long.
    pub notes: Notes,
    /// The last entries of `log.jsonl`, newest first.
    pub recent_log: Vec<LogEntry>,
    /// The last records of `vocabulary_gaps.jsonl`, newest first.
    pub recent_gaps: Vec<GapRecord>,
}

/// Tastes: the default file, the genre files the brief declares, and lines
/// two or more genre files share.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tastes {
    /// `_default.md` (empty when missing).
    pub default: String,
    /// Each declared genre whose `<genre>.md` exists, by name.
    pub genres: BTreeMap<String, String>,
    /// Lines present in two or more genre files.
    pub conflicts: Vec<Conflict>,
}

/// A line present in two or more genre files, for the agent to mediate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conflict {
    /// The line (trimmed).
    pub point: String,
    /// The genres whose files hold it, in the brief's order.
    pub files: Vec<String>,
}

/// The brief, parsed for its `Tastes:` line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Brief {
    /// The whole file.
    pub raw: String,
    /// Everything but the `Tastes:` line (trimmed).
    pub intent: String,
    /// The genres the `Tastes:` line names, in order.
    pub tastes: Vec<String>,
}

/// The notes, or their head and tail with an elision marker.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notes {
    /// The notes when at most [`NOTES_TRUNCATION_THRESHOLD`] lines; else
    /// the first [`NOTES_HEAD_LINES`], `\n\n... [N lines elided] ...\n\n`
    /// and the last [`NOTES_TAIL_LINES`].
    pub summary: String,
    /// Whether lines were elided.
    pub truncated: bool,
}

/// An entry of `log.jsonl`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LogEntry {
    /// When (as written).
    #[serde(default)]
    pub timestamp: String,
    /// The operation.
    #[serde(default)]
    pub op: String,
    /// Its details.
    #[serde(default = "empty_object")]
    pub details: serde_json::Map<String, serde_json::Value>,
}

pub(crate) fn empty_object() -> serde_json::Map<String, serde_json::Value> {
    serde_json::Map::new()
}

pub(crate) fn uncategorized() -> String {
    "uncategorized".to_owned()
}

/// A record of `vocabulary_gaps.jsonl`: every field present, defaulted when
/// the line lacks it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GapRecord {
    /// When (as written).
    #[serde(default)]
    pub timestamp: String,
    /// The image (workspace) it was recorded on.
    #[serde(default)]
    pub image_id: String,
    /// What was missing.
    #[serde(default)]
    pub description: String,
    /// The session it was recorded in.
    #[serde(default)]
    pub session_id: Option<String>,
    /// The snapshot it was recorded at.
    #[serde(default)]
    pub snapshot_hash: Option<String>,
    /// What the photographer wanted.
    #[serde(default)]
    pub intent: Option<String>,
    /// Its category.
    #[serde(default = "uncategorized")]
    pub intent_category: String,
    /// The capability that was missing.
    #[serde(default)]
    pub missing_capability: Option<String>,
    /// Operations involved.
    #[serde(default)]
    pub operations_involved: Vec<String>,
    /// Vocabulary used.
    #[serde(default)]
    pub vocabulary_used: Vec<String>,
    /// How satisfied (a number as written, or null).
    #[serde(default)]
    pub satisfaction: Option<serde_json::Number>,
    /// Free notes.
    #[serde(default)]
    pub notes: String,
}

/// Assembles the context from `src` in read_context's loading order.
///
/// # Errors
/// Only the source's own failures; missing files and malformed lines are
/// not errors.
pub async fn assemble(src: &dyn FileSource) -> Result<Context> {
    let brief = parse_brief(&src.workspace_text(&path(BRIEF)).await?.unwrap_or_default());
    let tastes = load_tastes(src, &brief.tastes).await?;
    let notes = summarize_notes(&src.workspace_text(&path(NOTES)).await?.unwrap_or_default());
    let recent_log = src
        .last_lines(&path(LOG), RECENT_LOG_LIMIT, &|l| {
            parse_line::<LogEntry>(l).is_some()
        })
        .await?
        .iter()
        .filter_map(|l| parse_line(l))
        .collect();
    let recent_gaps = src
        .last_lines(&path(GAPS), RECENT_GAPS_LIMIT, &|l| {
            parse_line::<GapRecord>(l).is_some()
        })
        .await?
        .iter()
        .filter_map(|l| parse_line(l))
        .collect();
    Ok(Context {
        tastes,
        brief,
        notes,
        recent_log,
        recent_gaps,
    })
}

fn path(p: &str) -> FilePath {
    p.parse()
        .expect("read_context's file names are valid paths")
}

/// A JSONL line as `T`; `None` for a blank or malformed line (or one that
/// is JSON but not an object of `T`'s shape).
pub fn parse_line<T: serde::de::DeserializeOwned>(line: &str) -> Option<T> {
    let line = line.trim();
    if !line.starts_with('{') {
        return None;
    }
    serde_json::from_str(line).ok()
}

/// The brief: the first line starting `Tastes:` (any case) names genres,
/// comma-separated (brackets allowed); the intent is every other line.
pub fn parse_brief(raw: &str) -> Brief {
    let mut tastes = Vec::new();
    let mut found = false;
    let mut intent = Vec::new();
    for line in raw.lines() {
        let t = line.trim();
        if !found && t.len() >= 7 && t[..7].eq_ignore_ascii_case("tastes:") {
            found = true;
            let list = t[7..].trim().trim_start_matches('[').trim_end_matches(']');
            for g in list.split(',') {
                let g = g.trim().trim_matches(|c| c == '"' || c == '\'' || c == '`');
                if !g.is_empty() && !tastes.iter().any(|x| x == g) {
                    tastes.push(g.to_owned());
                }
            }
            continue;
        }
        intent.push(line);
    }
    Brief {
        raw: raw.to_owned(),
        intent: intent.join("\n").trim().to_owned(),
        tastes,
    }
}

/// The default tastes, each declared genre's file (genres that cannot name
/// a file, or whose file is missing, are left out) and their conflicts.
async fn load_tastes(src: &dyn FileSource, declared: &[String]) -> Result<Tastes> {
    let default = src
        .taste_text(&path(DEFAULT_TASTES))
        .await?
        .unwrap_or_default();
    let mut loaded: Vec<(String, String)> = Vec::new();
    for genre in declared {
        let Ok(file) = format!("{genre}.md").parse::<FilePath>() else {
            continue;
        };
        if genre.contains('/') || file.as_str() == DEFAULT_TASTES {
            continue;
        }
        if let Some(text) = src.taste_text(&file).await? {
            loaded.push((genre.clone(), text));
        }
    }
    let conflicts = find_conflicts(&loaded);
    Ok(Tastes {
        default,
        genres: loaded.into_iter().collect(),
        conflicts,
    })
}

/// A line that counts as a taste: not blank, not a comment (`#` or
/// `<!--`), trimmed.
fn taste_point(line: &str) -> Option<&str> {
    let t = line.trim();
    (!t.is_empty() && !t.starts_with('#') && !t.starts_with("<!--")).then_some(t)
}

/// Lines present in two or more of `genres` (name, text), in order of
/// first appearance; each conflict's files in the given order.
pub fn find_conflicts(genres: &[(String, String)]) -> Vec<Conflict> {
    let mut order: Vec<&str> = Vec::new();
    let mut files: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (name, text) in genres {
        for point in text.lines().filter_map(taste_point) {
            let holders = files.entry(point).or_insert_with(|| {
                order.push(point);
                Vec::new()
            });
            if !holders.contains(name) {
                holders.push(name.clone());
            }
        }
    }
    order
        .into_iter()
        .filter_map(|p| {
            let f = &files[p];
            (f.len() >= 2).then(|| Conflict {
                point: p.to_owned(),
                files: f.clone(),
            })
        })
        .collect()
}

/// The notes, whole when at most [`NOTES_TRUNCATION_THRESHOLD`] lines;
/// otherwise head, elision marker, tail.
pub fn summarize_notes(text: &str) -> Notes {
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= NOTES_TRUNCATION_THRESHOLD {
        return Notes {
            summary: text.to_owned(),
            truncated: false,
        };
    }
    let elided = lines.len() - NOTES_TRUNCATION_THRESHOLD;
    Notes {
        summary: format!(
            "{}\n\n... [{elided} lines elided] ...\n\n{}",
            lines[..NOTES_HEAD_LINES].join("\n"),
            lines[lines.len() - NOTES_TAIL_LINES..].join("\n")
        ),
        truncated: true,
    }
}

#[cfg(test)]
mod tests;
