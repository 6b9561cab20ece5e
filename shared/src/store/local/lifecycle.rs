//! The lifecycle queries of the SQLite [`MetaStore`](crate::store::MetaStore):
//! a session's commits, a commit's children, an artifact's users, cache
//! entries by commit, idle sessions, pins, and the deletes of erasure.
//! Every one is a single statement or one transaction over the indexes of
//! the `LIFECYCLE` schema step.

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};

use super::LocalError;
use super::meta::SqliteMetaStore;
use super::row::{CommitRow, commit_with_delta, select_commit};
use crate::commit::Commit;
use crate::error::{Error, Result};
use crate::id::{ArtifactRef, CommitId, SessionId, TenantId};
use crate::store::{ArtifactUser, MaterializeKey, Materialized, Pin, TenantRecords};

/// A session's commits (`?1` tenant, `?2` session). Named index, as in
/// [`CHILDREN`]: the planner chose a scan of the tenant's rows.
const SESSION: &str = select_commit!(
    "d.bytes, d.codec FROM commits c INDEXED BY commits_by_session
     LEFT JOIN deltas d ON d.rowid = c.delta
     WHERE c.tenant = ?1 AND c.session = ?2"
);

/// A commit's children (`?1` tenant, `?2` parent, `?3` and `?4` the
/// parent's lineage and depth + 1): the next row of the parent's run,
/// then the forks. Named index: without statistics SQLite's planner
/// prefers a scan of the tenant's rows to the partial `commits_forks`.
const CHILDREN: &str = concat!(
    commit_with_delta!("WHERE c.tenant = ?1 AND c.lineage = ?3 AND c.depth = ?4 AND c.parent = ?2"),
    " UNION ALL ",
    select_commit!(
        "d.bytes, d.codec FROM commits c INDEXED BY commits_forks
         LEFT JOIN deltas d ON d.rowid = c.delta
         WHERE c.tenant = ?1 AND c.parent = ?2 AND c.lineage = c.id"
    )
);

fn commits_where(
    conn: &Connection,
    sql_text: &str,
    args: impl rusqlite::Params,
) -> Result<Vec<Commit>, LocalError> {
    let mut stmt = conn.prepare_cached(sql_text)?;
    let rows = stmt.query_map(args, CommitRow::read)?;
    rows.map(|r| r?.decode()).collect()
}

fn parse_cache_key(commit: &str, stop: &str, format: &str) -> Result<MaterializeKey> {
    let bad = || {
        Error::internal(format!(
            "cache entry ({commit}, {stop}, {format}) is malformed"
        ))
    };
    Ok(MaterializeKey {
        commit: commit.parse().map_err(|_| bad())?,
        stop: stop.parse().map_err(|_| bad())?,
        format: format.parse().map_err(|_| bad())?,
    })
}

/// What [`TenantRecords`] counts a table's rows as.
fn count_in(r: &mut TenantRecords, table: &str, n: u64) {
    match table {
        "commits" => r.commits += n,
        "refs" => r.refs += n,
        "materialized" => r.cache += n,
        "agents" | "agent_saves" => r.agents += n,
        t if t.starts_with("branch") => r.branches += n,
        _ => r.other += n,
    }
}

/// Every table with a `tenant` column except `tokens` (the token store
/// revokes those): found in the schema itself, so that a table a later
/// schema step adds is erased without being listed here.
fn tenant_tables(conn: &Connection) -> Result<Vec<String>, LocalError> {
    let mut stmt = conn.prepare(
        "SELECT m.name FROM sqlite_master m, pragma_table_info(m.name) c
         WHERE m.type = 'table' AND c.name = 'tenant' AND m.name <> 'tokens'
         ORDER BY m.name",
    )?;
    let names = stmt.query_map([], |r| r.get::<_, String>(0))?;
    Ok(names.collect::<Result<_, _>>()?)
}

impl SqliteMetaStore {
    /// Deletes every record of `tenant` in one transaction.
    pub(super) async fn erase_tenant_rows(&self, tenant: &TenantId) -> Result<TenantRecords> {
        let tenant = tenant.clone();
        self.db
            .transaction(move |tx| {
                let mut r = TenantRecords::default();
                // Inline deltas are rows of `deltas` (no tenant column)
                // named by the tenant's commits: before the commits.
                r.other += tx.execute(
                    "DELETE FROM deltas WHERE rowid IN
                     (SELECT delta FROM commits WHERE tenant = ?1 AND delta IS NOT NULL)",
                    [tenant.as_str()],
                )? as u64;
                for table in tenant_tables(tx)? {
                    // The name comes from the schema, not from input.
                    let n = tx.execute(
                        &format!("DELETE FROM \"{table}\" WHERE tenant = ?1"),
                        [tenant.as_str()],
                    )? as u64;
                    count_in(&mut r, &table, n);
                }
                Ok(r)
            })
            .await
    }

    pub(super) async fn commits_of_session(
        &self,
        tenant: &TenantId,
        session: &SessionId,
    ) -> Result<Vec<Commit>> {
        let (tenant, session) = (tenant.clone(), session.clone());
        self.db
            .read(move |conn| {
                commits_where(conn, SESSION, params![tenant.as_str(), session.as_str()])
            })
            .await
    }

    pub(super) async fn children_of(
        &self,
        tenant: &TenantId,
        parent: &CommitId,
    ) -> Result<Vec<Commit>> {
        let (tenant, parent) = (tenant.clone(), parent.to_string());
        self.db
            .read(move |conn| {
                // A child continues its parent's run (the row after the
                // parent's, found by `commits_by_lineage`) or starts its
                // own, a fork (`commits_forks`, which holds only those):
                // there is no index of every commit by parent.
                let at: Option<(String, i64)> = conn
                    .prepare_cached(
                        "SELECT lineage, depth FROM commits WHERE tenant = ?1 AND id = ?2",
                    )?
                    .query_row(params![tenant.as_str(), parent], |r| {
                        Ok((r.get(0)?, r.get(1)?))
                    })
                    .optional()?;
                match at {
                    Some((lineage, depth)) => commits_where(
                        conn,
                        CHILDREN,
                        params![tenant.as_str(), parent, lineage, depth.saturating_add(1)],
                    ),
                    // The parent is gone (erased): its children are found
                    // by a scan of the tenant's commits.
                    None => commits_where(
                        conn,
                        commit_with_delta!("WHERE c.tenant = ?1 AND c.parent = ?2"),
                        params![tenant.as_str(), parent],
                    ),
                }
            })
            .await
    }

    pub(super) async fn cache_entries_of(
        &self,
        tenant: &TenantId,
        commit: &CommitId,
    ) -> Result<Vec<(MaterializeKey, Materialized)>> {
        let (tenant, commit) = (tenant.clone(), *commit);
        let rows: Vec<(String, String, String)> = self
            .db
            .read(move |conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT stop, format, body FROM materialized
                     WHERE tenant = ?1 AND commit_id = ?2",
                )?;
                let rows = stmt.query_map(params![tenant.as_str(), commit.to_string()], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })?;
                Ok(rows.collect::<Result<_, _>>()?)
            })
            .await?;
        rows.into_iter()
            .map(|(stop, format, body)| {
                let key = parse_cache_key(&commit.to_string(), &stop, &format)?;
                let value: Materialized = serde_json::from_str(&body).map_err(|e| {
                    Error::internal(format!("cache entry of {commit} is malformed: {e}"))
                })?;
                Ok((key, value))
            })
            .collect()
    }

    pub(super) async fn remove_cache_entry(
        &self,
        tenant: &TenantId,
        key: &MaterializeKey,
    ) -> Result<bool> {
        let (tenant, key) = (tenant.clone(), key.clone());
        self.db
            .transaction(move |conn| {
                Ok(conn.execute(
                    "DELETE FROM materialized
                     WHERE tenant = ?1 AND commit_id = ?2 AND stop = ?3 AND format = ?4",
                    params![
                        tenant.as_str(),
                        key.commit.to_string(),
                        key.stop.to_string(),
                        key.format.as_str()
                    ],
                )? > 0)
            })
            .await
    }

    pub(super) async fn remove_commit(&self, tenant: &TenantId, commit: &Commit) -> Result<bool> {
        let (tenant, id) = (tenant.clone(), commit.id);
        self.db
            .transaction(move |tx| {
                let Some(stored) = super::meta::get_commit_in(tx, &tenant, &id)? else {
                    return Ok(false);
                };
                tx.execute(
                    "DELETE FROM timeline WHERE tenant = ?1 AND principal = ?2 AND ts = ?3 AND id = ?4",
                    params![
                        tenant.as_str(),
                        stored.principal.as_str(),
                        stored.created_at.timestamp_micros(),
                        id.to_string()
                    ],
                )?;
                tx.execute(
                    "DELETE FROM deltas WHERE rowid =
                     (SELECT delta FROM commits WHERE tenant = ?1 AND id = ?2)",
                    params![tenant.as_str(), id.to_string()],
                )?;
                tx.execute(
                    "DELETE FROM commits WHERE tenant = ?1 AND id = ?2",
                    params![tenant.as_str(), id.to_string()],
                )?;
                Ok(true)
            })
            .await
    }

    pub(super) async fn users_of(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
        limit: usize,
    ) -> Result<Vec<ArtifactUser>> {
        let (tenant, artifact) = (tenant.clone(), artifact.to_string());
        let limit = limit.min(i64::MAX as usize) as i64;
        let rows: Vec<(String, Option<String>, Option<String>)> = self
            .db
            .read(move |conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT id, NULL, NULL FROM commits WHERE tenant = ?1 AND artifact = ?2
                     UNION ALL
                     SELECT commit_id, stop, format FROM materialized WHERE tenant = ?1 AND artifact = ?2
                     LIMIT ?3",
                )?;
                let rows = stmt.query_map(params![tenant.as_str(), artifact, limit], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })?;
                Ok(rows.collect::<Result<_, _>>()?)
            })
            .await?;
        rows.into_iter()
            .map(|row| match row {
                (id, Some(stop), Some(format)) => {
                    Ok(ArtifactUser::Cached(parse_cache_key(&id, &stop, &format)?))
                }
                (id, _, _) => Ok(ArtifactUser::Commit(id.parse().map_err(|_| {
                    Error::internal(format!("commits hold a malformed id {id:?}"))
                })?)),
            })
            .collect()
    }

    pub(super) async fn sessions_idle_since(
        &self,
        tenant: &TenantId,
        before: DateTime<Utc>,
        after: Option<&SessionId>,
        limit: usize,
    ) -> Result<Vec<SessionId>> {
        let tenant = tenant.clone();
        let after = after.map(|s| s.as_str().to_owned());
        let limit = limit.min(i64::MAX as usize) as i64;
        let rows: Vec<String> = self
            .db
            .read(move |conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT session FROM commits WHERE tenant = ?1 AND session IS NOT NULL
                     AND (?3 IS NULL OR session > ?3)
                     GROUP BY session HAVING max(ts) < ?2 ORDER BY session LIMIT ?4",
                )?;
                let rows = stmt.query_map(
                    params![tenant.as_str(), before.timestamp_micros(), after, limit],
                    |r| r.get(0),
                )?;
                Ok(rows.collect::<Result<_, _>>()?)
            })
            .await?;
        rows.into_iter().map(|s| s.parse()).collect()
    }

    pub(super) async fn write_pin(
        &self,
        tenant: &TenantId,
        pin: &Pin,
        pinned: bool,
    ) -> Result<bool> {
        let (tenant, kind, name) = (tenant.clone(), pin.kind(), pin.name().to_owned());
        self.db
            .transaction(move |conn| {
                let n = if pinned {
                    conn.execute(
                        "INSERT OR IGNORE INTO pins (tenant, kind, name) VALUES (?1, ?2, ?3)",
                        params![tenant.as_str(), kind, name],
                    )?
                } else {
                    conn.execute(
                        "DELETE FROM pins WHERE tenant = ?1 AND kind = ?2 AND name = ?3",
                        params![tenant.as_str(), kind, name],
                    )?
                };
                Ok(n > 0)
            })
            .await
    }

    pub(super) async fn read_pins(&self, tenant: &TenantId) -> Result<Vec<Pin>> {
        let tenant = tenant.clone();
        let rows: Vec<(String, String)> = self
            .db
            .read(move |conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT kind, name FROM pins WHERE tenant = ?1 ORDER BY kind, name",
                )?;
                let rows =
                    stmt.query_map(params![tenant.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))?;
                Ok(rows.collect::<Result<_, _>>()?)
            })
            .await?;
        let mut pins: Vec<Pin> = rows
            .into_iter()
            .map(|(k, n)| Pin::parse(&k, &n))
            .collect::<Result<_>>()?;
        pins.sort();
        Ok(pins)
    }

    pub(super) async fn tenants_with_commits(&self) -> Result<Vec<TenantId>> {
        let rows: Vec<String> = self
            .db
            .read(|conn| {
                let mut stmt =
                    conn.prepare_cached("SELECT DISTINCT tenant FROM commits ORDER BY tenant")?;
                let rows = stmt.query_map([], |r| r.get(0))?;
                Ok(rows.collect::<Result<_, _>>()?)
            })
            .await?;
        rows.into_iter()
            .map(|t| {
                t.parse()
                    .map_err(|_| Error::internal(format!("commits hold a malformed tenant {t:?}")))
            })
            .collect()
    }

    pub(super) async fn set_evicted(
        &self,
        tenant: &TenantId,
        before: &CommitId,
        commits: &[CommitId],
    ) -> Result<u64> {
        let (tenant, before) = (tenant.clone(), before.to_string());
        let ids: Vec<String> = commits.iter().map(ToString::to_string).collect();
        self.db
            .transaction(move |tx| {
                let mut stmt = tx.prepare_cached(
                    "UPDATE commits SET evicted_by = ?3
                     WHERE tenant = ?1 AND id = ?2 AND evicted_by IS NOT ?3",
                )?;
                let mut changed = 0u64;
                for id in &ids {
                    changed += stmt.execute(params![tenant.as_str(), id, before])? as u64;
                }
                Ok(changed)
            })
            .await
    }

    pub(super) async fn eviction_of(
        &self,
        tenant: &TenantId,
        commit: &CommitId,
    ) -> Result<Option<CommitId>> {
        let (tenant, id) = (tenant.clone(), commit.to_string());
        let before: Option<String> = self
            .db
            .read(move |conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT evicted_by FROM commits WHERE tenant = ?1 AND id = ?2",
                )?;
                let mut rows = stmt.query(params![tenant.as_str(), id])?;
                Ok(match rows.next()? {
                    Some(r) => r.get(0)?,
                    None => None,
                })
            })
            .await?;
        before
            .map(|b| {
                b.parse().map_err(|_| {
                    Error::internal(format!(
                        "commit {commit} holds a malformed evicted_by {b:?}"
                    ))
                })
            })
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plan of `query` on a new database, one line per step.
    fn plan(query: &str) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        SqliteMetaStore::open(dir.path()).unwrap();
        let conn = Connection::open(dir.path().join("ctx.db")).unwrap();
        let mut stmt = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {query}"))
            .unwrap();
        let args: Vec<String> = (0..stmt.parameter_count())
            .map(|i| format!("v{i}"))
            .collect();
        stmt.query_map(rusqlite::params_from_iter(args), |r| r.get(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[test]
    fn children_and_sessions_are_found_through_indexes_not_a_scan() {
        let children = plan(CHILDREN);
        let searches: Vec<&String> = children
            .iter()
            .filter(|p| p.starts_with("SEARCH c"))
            .collect();
        assert_eq!(searches.len(), 2, "{children:?}");
        assert!(
            searches[0].contains("commits_by_lineage (tenant=? AND lineage=? AND depth=?)"),
            "{children:?}"
        );
        assert!(
            searches[1].contains("commits_forks (tenant=? AND parent=?)"),
            "{children:?}"
        );
        let session = plan(SESSION);
        assert!(
            session[0].contains("commits_by_session (tenant=? AND session=?)"),
            "{session:?}"
        );
    }
}
