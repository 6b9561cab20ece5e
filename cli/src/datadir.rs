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
