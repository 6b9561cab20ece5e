//! The lifecycle queries of the SQLite [`MetaStore`](crate::store::MetaStore):
//! a session's commits, a commit's children, an artifact's users, cache
//! entries by commit, idle sessions, pins, and the deletes of erasure.
//! Every one is a single statement or one transaction over the indexes of
//! the `LIFECYCLE` schema step.

use super::cache::parse_cache_key;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{Connection, params};
use std::collections::HashSet;

use super::meta::SqliteMetaStore;
use super::{LocalError, sql};
use crate::error::{Error, Result};
use crate::id::{ArtifactRef, CommitId, SessionId, TenantId};
use crate::store::{ArtifactUser, Pin, References, TenantRecords};

/// What [`TenantRecords`] counts a table's rows as.
fn count_in(r: &mut TenantRecords, table: &str, n: u64) {
    match table {
        "commits" => r.commits += n,
        "refs" => r.refs += n,
        "materialized" => r.cache += n,
        "agents" | "agent_saves" => r.agents += n,
        t if t.starts_with("branch") => r.branches += n,
        "memories" => r.branches += n,
        // The memories' full-text index: the same memories again.
        "memories_fts" => {}
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

/// Free pages (4 KiB each by default) below which a compaction leaves the
/// file as it is: 1 MiB.
pub(super) const VACUUM_MIN_PAGES: i64 = 256;

#[async_trait]
impl crate::store::Lifecycle for SqliteMetaStore {
    async fn references(&self, tenant: &TenantId) -> Result<References> {
        let tenant = tenant.clone();
        self.db
            .read(move |conn| {
                let arts = |q: &str| -> Result<HashSet<ArtifactRef>, LocalError> {
                    let mut stmt = conn.prepare(q)?;
                    let names = stmt
                        .query_map([tenant.as_str()], |r| r.get::<_, String>(0))?
                        .collect::<Result<Vec<_>, _>>()?;
                    names
                        .into_iter()
                        .map(|n| {
                            n.parse().map_err(|_| {
                                Error::internal(format!("stored artifact ref {n:?} is malformed"))
                                    .into()
                            })
                        })
                        .collect()
                };
                Ok(References {
                    durable: arts(
                        "SELECT artifact FROM commits WHERE tenant = ?1
                         UNION SELECT json_extract(body, '$.artifact_ref') FROM agent_saves
                           WHERE tenant = ?1
                         UNION SELECT j.value FROM agent_saves s,
                           json_each(s.body, '$.thread_artifacts') j WHERE s.tenant = ?1
                         UNION SELECT json_extract(body, '$.working_context.artifact_ref')
                           FROM agents WHERE tenant = ?1
                           AND json_extract(body, '$.working_context.artifact_ref') IS NOT NULL",
                    )?,
                    cached: arts("SELECT DISTINCT artifact FROM materialized WHERE tenant = ?1")?,
                })
            })
            .await
    }

    async fn artifact_users(
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

    async fn idle_sessions(
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

    async fn set_pin(&self, tenant: &TenantId, pin: &Pin, pinned: bool) -> Result<bool> {
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

    async fn pins(&self, tenant: &TenantId) -> Result<Vec<Pin>> {
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

    async fn commit_tenants(&self) -> Result<Vec<TenantId>> {
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

    /// Deletes every record of `tenant` in one transaction.
    async fn erase_tenant(&self, tenant: &TenantId, _limit: usize) -> Result<TenantRecords> {
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

    async fn clear_inline(&self, tenant: &TenantId, commit: &CommitId) -> Result<bool> {
        let (tenant, id) = (tenant.clone(), *commit);
        self.db
            .transaction(move |tx| {
                tx.execute(
                    "DELETE FROM deltas WHERE rowid =
                     (SELECT delta FROM commits WHERE tenant = ?1 AND id = ?2)",
                    params![tenant.as_str(), id.to_string()],
                )
                .map_err(sql)?;
                let n = tx
                    .execute(
                        "UPDATE commits SET delta = NULL
                         WHERE tenant = ?1 AND id = ?2 AND delta IS NOT NULL",
                        params![tenant.as_str(), id.to_string()],
                    )
                    .map_err(sql)?;
                Ok(n > 0)
            })
            .await
    }

    async fn mark_evicted(
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

    async fn evicted_by(&self, tenant: &TenantId, commit: &CommitId) -> Result<Option<CommitId>> {
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

    async fn reclaim_space(&self) -> Result<u64> {
        self.db
            .write(|conn| {
                let given_back = super::vacuum_if_worth(conn, VACUUM_MIN_PAGES)?;
                super::truncate_wal(conn)?;
                Ok(given_back)
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Lifecycle;
    use crate::store::Materialized;
    use crate::store::local::commits::{CHILDREN, SESSION};
    use crate::store::{MaterializationCache, MaterializeKey};

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

    #[tokio::test]
    async fn the_file_shrinks_when_compacted_after_large_deletes() {
        use crate::commit::Stop;
        use crate::format::FormatId;
        use crate::format::translate::Tier;
        let dir = tempfile::tempdir().unwrap();
        let meta = SqliteMetaStore::open(dir.path()).unwrap();
        let t: TenantId = "t".parse().unwrap();
        let key = |i: u32| MaterializeKey {
            commit: CommitId::from_bytes([
                (i % 251) as u8,
                (i / 251) as u8,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                1,
            ]),
            stop: Stop::Root,
            format: FormatId::raw(),
        };
        // Cache entries are taken only for commits that exist: rows that
        // say so much (the entries are what this test measures).
        {
            let conn = Connection::open(dir.path().join("ctx.db")).unwrap();
            let mut add = conn
                .prepare("INSERT INTO commits (tenant, id, lineage, depth, body) VALUES ('t', ?1, ?1, 0, '{}')")
                .unwrap();
            for i in 0..3000u32 {
                add.execute([key(i).commit.to_string()]).unwrap();
            }
        }
        for i in 0..3000u32 {
            let m = Materialized {
                artifact_ref: ArtifactRef::of(&i.to_le_bytes()),
                size: 1,
                message_count: 1,
                token_count: 1,
                tier: Tier::Native,
                fidelity: None,
            };
            meta.put_materialized(&t, &key(i), &m).await.unwrap();
        }
        let pages = |conn: &Connection| -> (i64, i64) {
            (
                conn.pragma_query_value(None, "page_count", |r| r.get(0))
                    .unwrap(),
                conn.pragma_query_value(None, "freelist_count", |r| r.get(0))
                    .unwrap(),
            )
        };
        let path = dir.path().join("ctx.db");
        let (before, _) = pages(&Connection::open(&path).unwrap());
        assert_eq!(meta.reclaim_space().await.unwrap(), 0, "nothing free yet");
        let evicted = meta.evict_materialized(0, (&t, &key(0))).await.unwrap();
        assert_eq!(evicted.len(), 2999);
        let (_, free) = pages(&Connection::open(&path).unwrap());
        assert!(free >= VACUUM_MIN_PAGES, "the deletes freed pages: {free}");
        let given_back = meta.reclaim_space().await.unwrap();
        assert!(given_back > 0);
        let (after, free) = pages(&Connection::open(&path).unwrap());
        assert_eq!(free, 0, "every free page given back");
        assert!(after < before, "{after} pages, were {before}");
    }
}
