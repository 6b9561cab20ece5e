//! [`SqliteMetaStore`]: the SQLite [`MetaStore`](crate::store::MetaStore)
//! and [`TokenStore`](crate::store::TokenStore): commits, lineages,
//! timelines, refs, the materialization cache and token hashes in `ctx.db`
//! (tables in [`super::schema`]). Each concern is implemented in its own
//! file (`commits`, `refs`, `cache`, `summaries`, `agents`, `lifecycle`,
//! `tokens`). A checkpoint (commit, timeline entry, ref move) is one
//! `BEGIN IMMEDIATE` transaction.

use std::path::Path;
use std::sync::Arc;

use super::{Database, Durability, SqliteBranchStore};
use crate::error::Result;

/// Commits, refs, the cache and tokens in `ctx.db`.
#[derive(Debug, Clone)]
pub struct SqliteMetaStore {
    pub(super) db: Arc<Database>,
}

impl SqliteMetaStore {
    /// Opens (creating or migrating if needed) `data_dir/ctx.db` with full
    /// durability.
    ///
    /// # Errors
    /// `Unavailable` when the database cannot be opened; `Invalid` when it
    /// is of a newer schema version than this build knows.
    pub fn open(data_dir: &Path) -> Result<Self> {
        Self::open_with(data_dir, Durability::Full)
    }

    /// Opens with the given durability.
    ///
    /// # Errors
    /// As [`SqliteMetaStore::open`].
    pub fn open_with(data_dir: &Path, durability: Durability) -> Result<Self> {
        Ok(SqliteMetaStore {
            db: Database::open(data_dir, durability)?,
        })
    }

    /// The branch store of the same database, on the same connections.
    pub fn branch_store(&self) -> SqliteBranchStore {
        SqliteBranchStore::on(self.db.clone())
    }

    /// Write transactions answered so far, and the `COMMIT`s (WAL fsyncs)
    /// that carried them: concurrent writers share commits (group commit),
    /// so the ratio is the mean group size.
    pub fn write_groups(&self) -> (u64, u64) {
        self.db.group.counts()
    }

    /// Caps how many write transactions one commit carries (64 unless
    /// set; 1 commits each on its own, as before group commit): for
    /// measuring what the grouping buys.
    pub fn set_group_limit(&self, limit: usize) {
        self.db.group.set_limit(limit);
    }
}
