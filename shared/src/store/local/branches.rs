//! The SQLite [`BranchStore`] of embedded mode, in the data directory's
//! `ctx.db` (tables `branches`, `branch_sessions`, `branch_windows`, in
//! [`super::schema`]), opened through the same connection setup as the
//! meta store. Every change is one `BEGIN IMMEDIATE` transaction, so the
//! counts a creation checks cannot change under it, across threads or
//! processes.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};

use super::{Database, Durability, LocalError, sql};
use crate::branch::memories::{self, MemoryId, MemoryQuery, MemoryRecord, ScoredMemory};
use crate::branch::{
    ActiveBranch, BranchRecord, BranchStatus, BranchStore, Finish, RateLimits, branch_exists,
    branch_not_found, check_limits, minute_window, not_active,
};
use crate::clock::micros_to_time;
use crate::error::{Error, Result};
use crate::id::{BranchId, CommitId, SessionId, TenantId};

/// Branches in `ctx.db`.
#[derive(Debug, Clone)]
pub struct SqliteBranchStore {
    db: Arc<Database>,
}

fn encode(rec: &BranchRecord) -> Result<String> {
    serde_json::to_string(rec)
        .map_err(|e| Error::internal(format!("cannot encode branch {}: {e}", rec.id)))
}

fn decode(body: &str) -> Result<BranchRecord> {
    serde_json::from_str(body)
        .map_err(|e| Error::internal(format!("a stored branch does not decode: {e}")))
}

fn decode_memory(body: &str) -> Result<MemoryRecord> {
    serde_json::from_str(body)
        .map_err(|e| Error::internal(format!("a stored memory does not decode: {e}")))
}

/// Removes memory `id` and its full-text row.
fn delete_memory_in(conn: &Connection, tenant: &TenantId, id: &str) -> rusqlite::Result<()> {
    let rowid: Option<i64> = conn
        .prepare_cached("SELECT rowid FROM memories WHERE tenant = ?1 AND id = ?2")?
        .query_row(params![tenant.as_str(), id], |r| r.get(0))
        .optional()?;
    if let Some(rowid) = rowid {
        conn.prepare_cached("DELETE FROM memories_fts WHERE rowid = ?1")?
            .execute([rowid])?;
        conn.prepare_cached("DELETE FROM memories WHERE rowid = ?1")?
            .execute([rowid])?;
    }
    Ok(())
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
    /// Opens (creating or migrating if needed) `data_dir/ctx.db` with full
    /// durability. [`SqliteMetaStore::branch_store`](super::SqliteMetaStore::branch_store)
    /// gives one on the meta store's connections instead.
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
    /// As [`SqliteBranchStore::open`].
    pub fn open_with(data_dir: &Path, durability: Durability) -> Result<Self> {
        Ok(Self::on(Database::open(data_dir, durability)?))
    }

    /// A store on an open database.
    pub(super) fn on(db: Arc<Database>) -> Self {
        SqliteBranchStore { db }
    }

    /// Runs `f` on an active branch in one immediate transaction.
    async fn update_active(
        &self,
        tenant: &TenantId,
        id: &BranchId,
        f: impl FnOnce(&mut BranchRecord) + Send + 'static,
    ) -> Result<BranchRecord> {
        let (tenant, id) = (tenant.clone(), *id);
        self.db
            .transaction(move |tx| {
                let mut rec = get_in(tx, &tenant, &id)?.ok_or_else(|| branch_not_found(&id))?;
                if rec.status != BranchStatus::Active {
                    return Err(not_active(&id, rec.status).into());
                }
                f(&mut rec);
                put_in(tx, &tenant, &rec)?;
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
        self.db.transaction(move |tx| {
            if get_in(tx, &tenant, &rec.id)?.is_some() {
                return Err(branch_exists(&rec.id).into());
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
            Ok(())
        })
        .await
    }

    async fn get_branch(&self, tenant: &TenantId, id: &BranchId) -> Result<Option<BranchRecord>> {
        let (tenant, id) = (tenant.clone(), *id);
        self.db
            .lookup(move |conn| Ok(get_in(conn, &tenant, &id)?))
            .await
    }

    async fn active_branches(&self, tenant: &TenantId, session: &str) -> Result<Vec<ActiveBranch>> {
        let (tenant, session) = (tenant.clone(), session.to_owned());
        self.db.read(move |conn| {
            let mut stmt = conn
                .prepare(
                    "SELECT body FROM branches WHERE status = 'active' AND tenant = ?1 AND session = ?2",
                )
                .map_err(sql)?;
            let bodies = stmt
                .query_map(params![tenant.as_str(), session.as_str()], |r| r.get::<_, String>(0))
                .map_err(sql)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(sql)?;
            let active = bodies
                .iter()
                .map(|b| {
                    decode(b).map(|r| ActiveBranch {
                        id: r.id,
                        depth: r.depth,
                        parent_branch: r.parent_branch,
                    })
                })
                .collect::<Result<_>>()?;
            Ok(active)
        })
        .await
    }

    async fn session_owner(&self, tenant: &TenantId, session: &str) -> Result<Option<String>> {
        let (tenant, session) = (tenant.clone(), session.to_owned());
        self.db
            .read(move |conn| {
                conn.query_row(
                    "SELECT owner FROM branch_sessions WHERE tenant = ?1 AND session = ?2",
                    params![tenant.as_str(), session.as_str()],
                    |r| r.get::<_, String>(0),
                )
                .optional()
                .map_err(LocalError::from)
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
        self.db
            .transaction(move |tx| {
                let mut rec = get_in(tx, &tenant, &id)?.ok_or_else(|| branch_not_found(&id))?;
                if timer.is_some() {
                    rec.timer = timer;
                }
                if ret.is_some() {
                    rec.return_commit = ret;
                }
                put_in(tx, &tenant, &rec)?;
                Ok(())
            })
            .await
    }

    async fn all_active(&self) -> Result<Option<Vec<(TenantId, BranchId, DateTime<Utc>)>>> {
        self.db
            .read(|conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT tenant, id, deadline FROM branches WHERE status = 'active'",
                    )
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
                            t.parse().map_err(|_| {
                                Error::internal(format!("stored tenant {t:?} is bad"))
                            })?,
                            id.parse().map_err(|_| {
                                Error::internal(format!("stored branch {id:?} is bad"))
                            })?,
                            micros_to_time(d),
                        ))
                    })
                    .collect::<Result<Vec<_>>>()
                    .map(Some)
                    .map_err(LocalError::from)
            })
            .await
    }

    async fn session_branches(&self, tenant: &TenantId, session: &str) -> Result<Vec<BranchId>> {
        let (tenant, session) = (tenant.clone(), session.to_owned());
        let ids: Vec<String> = self
            .db
            .read(move |conn| {
                let mut stmt = conn
                    .prepare_cached("SELECT id FROM branches WHERE tenant = ?1 AND session = ?2")?;
                let rows =
                    stmt.query_map(params![tenant.as_str(), session.as_str()], |r| r.get(0))?;
                Ok::<_, LocalError>(rows.collect::<Result<_, _>>()?)
            })
            .await?;
        ids.iter()
            .map(|id| {
                id.parse()
                    .map_err(|_| Error::internal(format!("a stored branch id {id:?} is malformed")))
            })
            .collect()
    }

    async fn delete_branch(&self, tenant: &TenantId, id: &BranchId) -> Result<bool> {
        let memory = MemoryId::of_branch(tenant, id).to_string();
        let (tenant, id) = (tenant.clone(), id.to_string());
        self.db
            .transaction(move |conn| {
                delete_memory_in(conn, &tenant, &memory)?;
                Ok(conn.execute(
                    "DELETE FROM branches WHERE tenant = ?1 AND id = ?2",
                    params![tenant.as_str(), id],
                )? > 0)
            })
            .await
    }

    async fn put_memory(&self, tenant: &TenantId, memory: &MemoryRecord) -> Result<()> {
        let body = serde_json::to_string(memory)
            .map_err(|e| Error::internal(format!("cannot encode memory {}: {e}", memory.id)))?;
        let (tenant, m) = (tenant.clone(), memory.clone());
        self.db
            .transaction(move |tx| {
                let id = m.id.to_string();
                delete_memory_in(tx, &tenant, &id)?;
                tx.prepare_cached(
                    "INSERT INTO memories (tenant, id, created, confidence, kind, body)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )?
                .execute(params![
                    tenant.as_str(),
                    id,
                    m.created_at.timestamp_micros(),
                    m.confidence,
                    m.kind.as_str(),
                    body
                ])?;
                tx.prepare_cached(
                    "INSERT INTO memories_fts (rowid, title, description, content, tenant)
                     VALUES (last_insert_rowid(), ?1, ?2, ?3, ?4)",
                )?
                .execute(params![
                    m.title,
                    m.description,
                    m.content,
                    tenant.as_str()
                ])?;
                Ok::<_, LocalError>(())
            })
            .await
    }

    async fn recent_memories(&self, tenant: &TenantId, max: usize) -> Result<Vec<MemoryRecord>> {
        let tenant = tenant.clone();
        let max = i64::try_from(max).unwrap_or(i64::MAX);
        self.db
            .read(move |conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT body FROM memories WHERE tenant = ?1
                         ORDER BY created DESC, id DESC LIMIT ?2",
                    )
                    .map_err(sql)?;
                let bodies = stmt
                    .query_map(params![tenant.as_str(), max], |r| r.get::<_, String>(0))
                    .map_err(sql)?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(sql)?;
                Ok(bodies
                    .iter()
                    .map(|b| decode_memory(b))
                    .collect::<Result<Vec<_>>>()?)
            })
            .await
    }

    /// FTS5: any of the query's terms, ranked by `bm25()` over title,
    /// description and content with [`memories::WEIGHTS`].
    async fn search_memories(
        &self,
        tenant: &TenantId,
        q: &MemoryQuery,
    ) -> Result<Vec<ScoredMemory>> {
        let words = memories::terms(&q.text);
        if words.is_empty() || q.limit == 0 {
            return Ok(Vec::new());
        }
        // Terms are letters and digits only: quoted, none is an operator.
        let query = words
            .iter()
            .map(|w| format!("\"{w}\""))
            .collect::<Vec<_>>()
            .join(" OR ");
        let (tenant, q) = (tenant.clone(), q.clone());
        self.db
            .read(move |conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT m.body, -bm25(memories_fts, ?6, ?7, ?8, 0.0) AS score
                         FROM memories_fts JOIN memories m ON m.rowid = memories_fts.rowid
                         WHERE memories_fts MATCH ?1 AND memories_fts.tenant = ?2
                           AND m.confidence >= ?3 AND (?4 IS NULL OR m.kind = ?4)
                         ORDER BY score DESC, m.created DESC LIMIT ?5",
                    )
                    .map_err(sql)?;
                let rows = stmt
                    .query_map(
                        params![
                            query,
                            tenant.as_str(),
                            q.min_confidence,
                            q.kind.map(|k| k.as_str()),
                            i64::try_from(q.limit).unwrap_or(i64::MAX),
                            memories::WEIGHTS[0],
                            memories::WEIGHTS[1],
                            memories::WEIGHTS[2]
                        ],
                        |r| Ok((r.get::<_, String>(0)?, r.get::<_, f64>(1)?)),
                    )
                    .map_err(sql)?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(sql)?;
                Ok(rows
                    .into_iter()
                    .map(|(b, score)| {
                        decode_memory(&b).map(|memory| ScoredMemory { score, memory })
                    })
                    .collect::<Result<Vec<_>>>()?)
            })
            .await
    }

    async fn forget_session(&self, tenant: &TenantId, session: &SessionId) -> Result<bool> {
        let (tenant, session) = (tenant.clone(), session.to_owned());
        self.db
            .transaction(move |tx| {
                let n = tx.execute(
                    "DELETE FROM branch_sessions WHERE tenant = ?1 AND session = ?2",
                    params![tenant.as_str(), session.as_str()],
                )? + tx.execute(
                    "DELETE FROM branch_windows WHERE tenant = ?1 AND session = ?2",
                    params![tenant.as_str(), session.as_str()],
                )?;
                Ok::<_, LocalError>(n > 0)
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            .map(|_| crate::store::conformance::branches::record("s", 0))
            .collect();
        let results = futures::future::join_all(recs.iter().enumerate().map(|(i, r)| {
            let store: &dyn BranchStore = if i % 2 == 0 { &a } else { &b };
            store.create_branch(&tenant, r, &limits)
        }))
        .await;
        assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 3);
    }
}
