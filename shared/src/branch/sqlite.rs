//! The SQLite [`BranchStore`] of embedded mode, in the data directory's
//! `ctx.db` (tables `branches`, `branch_sessions`, `branch_windows`). Every
//! change is one `BEGIN IMMEDIATE` transaction, so the counts a creation
//! checks cannot change under it, across threads or processes.

use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::{
    ActiveBranch, BranchRecord, BranchStatus, BranchStore, Finish, RateLimits, branch_exists,
    branch_not_found, check_limits, minute_window, not_active,
};
use crate::clock::micros_to_time;
use crate::error::{Error, Result};
use crate::id::{BranchId, CommitId, TenantId};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS branches (
    tenant   TEXT NOT NULL,
    id       TEXT NOT NULL,
    session  TEXT NOT NULL,
    status   TEXT NOT NULL,
    deadline INTEGER NOT NULL,
    body     TEXT NOT NULL,
    PRIMARY KEY (tenant, id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS branches_active ON branches (status, tenant, session);
CREATE TABLE IF NOT EXISTS branch_sessions (
    tenant  TEXT NOT NULL,
    session TEXT NOT NULL,
    owner   TEXT NOT NULL,
    PRIMARY KEY (tenant, session)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS branch_windows (
    tenant  TEXT NOT NULL,
    session TEXT NOT NULL,
    window  INTEGER NOT NULL,
    n       INTEGER NOT NULL,
    PRIMARY KEY (tenant, session, window)
) WITHOUT ROWID;
";

/// Branches in SQLite.
#[derive(Debug, Clone)]
pub struct SqliteBranchStore {
    conn: Arc<Mutex<Connection>>,
}

fn sql(e: rusqlite::Error) -> Error {
    Error::unavailable(format!("the branch database failed: {e}")).with_source(e)
}

fn encode(rec: &BranchRecord) -> Result<String> {
    serde_json::to_string(rec)
        .map_err(|e| Error::internal(format!("cannot encode branch {}: {e}", rec.id)))
}

fn decode(body: &str) -> Result<BranchRecord> {
    serde_json::from_str(body)
        .map_err(|e| Error::internal(format!("a stored branch does not decode: {e}")))
}

fn get_in(conn: &Connection, tenant: &TenantId, id: &BranchId) -> Result<Option<BranchRecord>> {
    conn.query_row(
        "SELECT body FROM branches WHERE tenant = ?1 AND id = ?2",
        params![tenant.as_str(), id.to_string()],
        |r| r.get::<_, String>(0),
    )
    .optional()
    .map_err(sql)?
    .map(|b| decode(&b))
    .transpose()
}

fn put_in(conn: &Connection, tenant: &TenantId, rec: &BranchRecord) -> Result<()> {
    conn.execute(
        "UPDATE branches SET status = ?3, body = ?4 WHERE tenant = ?1 AND id = ?2",
        params![
            tenant.as_str(),
            rec.id.to_string(),
            rec.status.as_str(),
            encode(rec)?
        ],
    )
    .map_err(sql)?;
    Ok(())
}

impl SqliteBranchStore {
    /// Opens (creating if needed) the branch tables in `data_dir/ctx.db`.
    ///
    /// # Errors
    /// `Unavailable` when the database cannot be opened.
    pub fn open(data_dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(data_dir).map_err(|e| {
            Error::unavailable(format!("cannot create {}: {e}", data_dir.display()))
        })?;
        let conn = Connection::open(data_dir.join("ctx.db")).map_err(sql)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(sql)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(sql)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(sql)?;
        conn.execute_batch(SCHEMA).map_err(sql)?;
        Ok(SqliteBranchStore {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            // SQLite leaves the connection consistent if a holder panicked.
            let mut c = conn.lock().unwrap_or_else(|e| e.into_inner());
            f(&mut c)
        })
        .await
        .map_err(|e| Error::internal(format!("a branch database task failed: {e}")))?
    }

    /// Runs `f` on an active branch in one immediate transaction.
    async fn update_active(
        &self,
        tenant: &TenantId,
        id: &BranchId,
        f: impl FnOnce(&mut BranchRecord) + Send + 'static,
    ) -> Result<BranchRecord> {
        let (tenant, id) = (tenant.clone(), *id);
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql)?;
            let mut rec = get_in(&tx, &tenant, &id)?.ok_or_else(|| branch_not_found(&id))?;
            if rec.status != BranchStatus::Active {
                return Err(not_active(&id, rec.status));
            }
            f(&mut rec);
            put_in(&tx, &tenant, &rec)?;
            tx.commit().map_err(sql)?;
            Ok(rec)
        })
        .await
    }
}

#[async_trait]
impl BranchStore for SqliteBranchStore {
    async fn create_branch(
        &self,
        tenant: &TenantId,
        rec: &BranchRecord,
        limits: &RateLimits,
    ) -> Result<()> {
        let (tenant, rec, limits) = (tenant.clone(), rec.clone(), *limits);
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql)?;
            if get_in(&tx, &tenant, &rec.id)?.is_some() {
                return Err(branch_exists(&rec.id));
            }
            let count = |q: &str, p: &[&dyn rusqlite::ToSql]| -> Result<u64> {
                tx.query_row(q, p, |r| r.get::<_, i64>(0))
                    .map(|n| n as u64)
                    .map_err(sql)
            };
            let session_active = count(
                "SELECT COUNT(*) FROM branches WHERE status = 'active' AND tenant = ?1 AND session = ?2",
                &[&tenant.as_str(), &rec.session_id],
            )?;
            let tenant_active = count(
                "SELECT COUNT(*) FROM branches WHERE status = 'active' AND tenant = ?1",
                &[&tenant.as_str()],
            )?;
            let window = minute_window(rec.created_at);
            let in_window = count(
                "SELECT COALESCE(MAX(n), 0) FROM branch_windows WHERE tenant = ?1 AND session = ?2 AND window = ?3",
                &[&tenant.as_str(), &rec.session_id, &window],
            )?;
            check_limits(&rec, &limits, session_active, tenant_active, in_window)?;
            tx.execute(
                "INSERT INTO branch_windows (tenant, session, window, n) VALUES (?1, ?2, ?3, 1)
                 ON CONFLICT (tenant, session, window) DO UPDATE SET n = n + 1",
                params![tenant.as_str(), rec.session_id, window],
            )
            .map_err(sql)?;
            tx.execute(
                "INSERT OR IGNORE INTO branch_sessions (tenant, session, owner) VALUES (?1, ?2, ?3)",
                params![tenant.as_str(), rec.session_id, rec.owner],
            )
            .map_err(sql)?;
            tx.execute(
                "INSERT INTO branches (tenant, id, session, status, deadline, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    tenant.as_str(),
                    rec.id.to_string(),
                    rec.session_id,
                    rec.status.as_str(),
                    rec.deadline.timestamp_micros(),
                    encode(&rec)?
                ],
            )
            .map_err(sql)?;
            tx.commit().map_err(sql)
        })
        .await
    }

    async fn get_branch(&self, tenant: &TenantId, id: &BranchId) -> Result<Option<BranchRecord>> {
        let (tenant, id) = (tenant.clone(), *id);
        self.with(move |conn| get_in(conn, &tenant, &id)).await
    }

    async fn active_branches(&self, tenant: &TenantId, session: &str) -> Result<Vec<ActiveBranch>> {
        let (tenant, session) = (tenant.clone(), session.to_owned());
        self.with(move |conn| {
            let mut stmt = conn
                .prepare(
                    "SELECT body FROM branches WHERE status = 'active' AND tenant = ?1 AND session = ?2",
                )
                .map_err(sql)?;
            let bodies = stmt
                .query_map(params![tenant.as_str(), session], |r| r.get::<_, String>(0))
                .map_err(sql)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(sql)?;
            bodies
                .iter()
                .map(|b| {
                    decode(b).map(|r| ActiveBranch {
                        id: r.id,
                        depth: r.depth,
                        parent_branch: r.parent_branch,
                    })
                })
                .collect()
        })
        .await
    }

    async fn session_owner(&self, tenant: &TenantId, session: &str) -> Result<Option<String>> {
        let (tenant, session) = (tenant.clone(), session.to_owned());
        self.with(move |conn| {
            conn.query_row(
                "SELECT owner FROM branch_sessions WHERE tenant = ?1 AND session = ?2",
                params![tenant.as_str(), session],
                |r| r.get::<_, String>(0),
            )
            .optional()
            .map_err(sql)
        })
        .await
    }

    async fn add_tokens(
        &self,
        tenant: &TenantId,
        id: &BranchId,
        tokens: u64,
    ) -> Result<BranchRecord> {
        self.update_active(tenant, id, move |r| {
            r.tokens_used = r.tokens_used.saturating_add(tokens)
        })
        .await
    }

    async fn finish_branch(
        &self,
        tenant: &TenantId,
        id: &BranchId,
        finish: &Finish,
    ) -> Result<BranchRecord> {
        let finish = finish.clone();
        self.update_active(tenant, id, move |r| {
            r.status = finish.status;
            r.completed_at = Some(finish.at);
            r.reason = finish.reason;
        })
        .await
    }

    async fn annotate(
        &self,
        tenant: &TenantId,
        id: &BranchId,
        timer: Option<&str>,
        return_commit: Option<&CommitId>,
    ) -> Result<()> {
        let (tenant, id) = (tenant.clone(), *id);
        let (timer, ret) = (timer.map(str::to_owned), return_commit.copied());
        self.with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql)?;
            let mut rec = get_in(&tx, &tenant, &id)?.ok_or_else(|| branch_not_found(&id))?;
            if timer.is_some() {
                rec.timer = timer;
            }
            if ret.is_some() {
                rec.return_commit = ret;
            }
            put_in(&tx, &tenant, &rec)?;
            tx.commit().map_err(sql)
        })
        .await
    }

    async fn all_active(&self) -> Result<Option<Vec<(TenantId, BranchId, DateTime<Utc>)>>> {
        self.with(|conn| {
            let mut stmt = conn
                .prepare("SELECT tenant, id, deadline FROM branches WHERE status = 'active'")
                .map_err(sql)?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, i64>(2)?,
                    ))
                })
                .map_err(sql)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(sql)?;
            rows.into_iter()
                .map(|(t, id, d)| {
                    Ok((
                        t.parse()
                            .map_err(|_| Error::internal(format!("stored tenant {t:?} is bad")))?,
                        id.parse()
                            .map_err(|_| Error::internal(format!("stored branch {id:?} is bad")))?,
                        micros_to_time(d),
                    ))
                })
                .collect::<Result<Vec<_>>>()
                .map(Some)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sqlite_branch_store_conforms() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteBranchStore::open(dir.path()).unwrap();
        super::super::conformance::run_all(&store, true).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn two_handles_on_one_database_share_the_limits() {
        // Two stores on one file (as two processes would be) still count
        // exactly: the transaction is IMMEDIATE.
        let dir = tempfile::tempdir().unwrap();
        let a = SqliteBranchStore::open(dir.path()).unwrap();
        let b = SqliteBranchStore::open(dir.path()).unwrap();
        let tenant: TenantId = "t".parse().unwrap();
        let limits = RateLimits {
            active_per_session: 3,
            active_per_tenant: 100,
            creations_per_minute: 100,
        };
        let recs: Vec<_> = (0..10)
            .map(|_| super::super::conformance::record("s", 0))
            .collect();
        let results = futures::future::join_all(recs.iter().enumerate().map(|(i, r)| {
            let store: &dyn BranchStore = if i % 2 == 0 { &a } else { &b };
            store.create_branch(&tenant, r, &limits)
        }))
        .await;
        assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 3);
    }
}
