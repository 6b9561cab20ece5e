//! The data directory as the CLI guards it: one `ctx serve` at a time holds
//! its lock, and `ctx tokens` refuses a directory that does not exist
//! rather than quietly starting a new, empty store there.

use std::path::Path;

use ctx_core::{Error, Result};

/// Takes an exclusive lock on `<data>/lock` for as long as the returned
/// file lives, so a second `ctx serve` on the same data directory is
/// refused instead of sharing its stores and branch timers.
///
/// # Errors
/// `Conflict` when another process holds it; `Unavailable` when the
/// directory or the file cannot be made.
pub fn lock(data: &Path) -> Result<std::fs::File> {
    let cannot = |e: std::io::Error| {
        Error::unavailable(format!(
            "cannot lock the data directory {}: {e}",
            data.display()
        ))
    };
    std::fs::create_dir_all(data).map_err(cannot)?;
    let path = data.join("lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(cannot)?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::conflict(
            format!(
                "another ctx serve is using the data directory {} (it holds {}): stop it, or give this one another --data",
                data.display(),
                path.display()
            ),
            None,
        )),
        Err(std::fs::TryLockError::Error(e)) => Err(cannot(e)),
    }
}

/// Checks that the data directory `ctx tokens` was pointed at exists.
///
/// # Errors
/// `Invalid` on field `data` when it does not.
pub fn existing(data: &Path) -> Result<()> {
    if data.is_dir() {
        return Ok(());
    }
    Err(Error::invalid(
        "data",
        format!(
            "there is no data directory {}: check --data / {} (`ctx serve --data {}` creates one)",
            data.display(),
            ctx_core::config::CTX_DATA,
            data.display()
        ),
    ))
}

/// The file where `ctx serve` records the URL it listens on, under its data
/// directory: a hook installed with `--server-from-data` reads it at every
/// run, so it follows a server restarted on another port.
pub fn server_file(data: &Path) -> std::path::PathBuf {
    data.join("server")
}

/// Records `url` as where the data directory's server listens.
///
/// # Errors
/// `Unavailable` when the file cannot be written.
pub fn write_server(data: &Path, url: &str) -> Result<()> {
    let path = server_file(data);
    std::fs::write(&path, format!("{url}\n"))
        .map_err(|e| Error::unavailable(format!("cannot write {}: {e}", path.display())))
}

/// The URL the data directory's server last recorded, if any.
pub fn read_server(data: &Path) -> Option<String> {
    std::fs::read_to_string(server_file(data))
        .ok()
        .map(|s| s.trim().trim_end_matches('/').to_owned())
        .filter(|s| !s.is_empty())
}
