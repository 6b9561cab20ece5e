//! The SQLite [`MetaStore`] and [`TokenStore`]: commits, lineages,
//! timelines, refs, the materialization cache and token hashes in `ctx.db`
//! (tables in [`super::schema`]). A checkpoint (commit, timeline entry, ref
//! move) is one `BEGIN IMMEDIATE` transaction.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};

use super::row::{self, CommitRow, commit_with_delta};
use super::{Database, Durability, LocalError, SqliteBranchStore, sql};
use crate::agent::{AgentRecord, SaveId, SaveRecord};
use crate::clock::micros_to_time;
use crate::commit::Commit;
use crate::error::{Error, Result};
use crate::id::{ArtifactRef, CommitId, Hash, Principal, RefName, SessionId, TenantId};
use crate::store::packed;
use crate::store::{
    ArtifactUser, MaterializeKey, Materialized, MetaStore, MetadataPatch, MissingPage, Pin,
    PutCommit, RefMove, RefRecord, References, SummaryCursor, TokenRecord, TokenStore,
    ref_conflict,
};

/// Free pages (4 KiB each by default) below which a compaction leaves the
/// file as it is: 1 MiB.
const VACUUM_MIN_PAGES: i64 = 256;

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

fn current_ref(conn: &Connection, tenant: &TenantId, name: &RefName) -> Result<Option<CommitId>> {
    let target: Option<String> = conn
        .query_row(
            "SELECT target FROM refs WHERE tenant = ?1 AND name = ?2",
            params![tenant.as_str(), name.as_str()],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql)?;
    target
        .map(|t| {
            t.parse()
                .map_err(|_| Error::internal(format!("ref {name} holds a malformed target {t:?}")))
        })
        .transpose()
}

fn cas_ref_in(
    conn: &Connection,
    tenant: &TenantId,
    name: &RefName,
    expected: Option<&CommitId>,
    target: &CommitId,
    now: DateTime<Utc>,
) -> Result<RefRecord> {
    let current = current_ref(conn, tenant, name)?;
    if current.as_ref() != expected {
        return Err(ref_conflict(name, expected, current.as_ref()));
    }
    conn.execute(
        "INSERT INTO refs (tenant, name, target, updated_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (tenant, name) DO UPDATE SET target = excluded.target, updated_at = excluded.updated_at",
        params![tenant.as_str(), name.as_str(), target.to_string(), now.timestamp_micros()],
    )
    .map_err(sql)?;
    Ok(RefRecord {
        name: name.clone(),
        target: *target,
        updated_at: now,
    })
}

pub(super) fn get_commit_in(
    conn: &Connection,
    tenant: &TenantId,
    id: &CommitId,
) -> Result<Option<Commit>, LocalError> {
    row_in(conn, tenant, id)?.map(CommitRow::decode).transpose()
}

/// The row of commit `id`, with its inline delta.
fn row_in(
    conn: &Connection,
    tenant: &TenantId,
    id: &CommitId,
) -> Result<Option<CommitRow>, LocalError> {
    Ok(conn
        .prepare_cached(commit_with_delta!("WHERE c.tenant = ?1 AND c.id = ?2"))?
        .query_row(params![tenant.as_str(), id.to_string()], CommitRow::read)
        .optional()?)
}

#[async_trait]
impl MetaStore for SqliteMetaStore {
    async fn create_commit(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        ref_move: Option<&RefMove>,
    ) -> Result<PutCommit> {
        let tenant = tenant.clone();
        let commit = commit.clone();
        let ref_move = ref_move.cloned();
        self.db.transaction(move |tx| {
            if let Some(existing) = get_commit_in(tx, &tenant, &commit.id)? {
                return Ok(PutCommit::Existing(existing));
            }
            if let Some(mv) = &ref_move {
                cas_ref_in(tx, &tenant, &mv.name, mv.expected.as_ref(), &commit.id, commit.created_at)?;
            }
            let mut stored = commit;
            let taken: bool = tx
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM commits WHERE tenant = ?1 AND lineage = ?2 AND depth = ?3)",
                    params![tenant.as_str(), stored.lineage.to_string(), stored.depth as i64],
                    |r| r.get(0),
                )
                .map_err(sql)?;
            if taken {
                stored.lineage = stored.id;
            }
            let body = row::encode(&stored)?;
            // Inline bytes go to their own rowid table: its rows keep what
            // does not fill an overflow page on the leaf, where the commits
            // table (WITHOUT ROWID) would spill it into a mostly empty page.
            // LZ4-packed when that saves an eighth.
            let delta: Option<i64> = match &stored.inline {
                Some(bytes) => {
                    let (codec, at_rest) = packed::pack(bytes);
                    tx.prepare_cached("INSERT INTO deltas (bytes, codec) VALUES (?1, ?2)")
                        .and_then(|mut s| s.execute(params![&at_rest[..], codec.code()]))
                        .map_err(sql)?;
                    Some(tx.last_insert_rowid())
                }
                None => None,
            };
            tx.execute(
                "INSERT INTO commits (tenant, id, lineage, depth, body, ts, summary, session, parent, artifact, delta)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                params![
                    tenant.as_str(),
                    stored.id.to_string(),
                    stored.lineage.to_string(),
                    stored.depth as i64,
                    body,
                    stored.created_at.timestamp_micros(),
                    stored.summary,
                    stored.session_id,
                    stored.parent.map(|p| p.to_string()),
                    stored.artifact_ref.to_string(),
                    delta
                ],
            )
            .map_err(sql)?;
            tx.execute(
                "INSERT INTO timeline (tenant, principal, ts, id) VALUES (?1, ?2, ?3, ?4)",
                params![
                    tenant.as_str(),
                    stored.principal.as_str(),
                    stored.created_at.timestamp_micros(),
                    stored.id.to_string()
                ],
            )
            .map_err(sql)?;
            Ok(PutCommit::Created(stored))
        })
        .await
    }

    async fn get_commit(&self, tenant: &TenantId, id: &CommitId) -> Result<Option<Commit>> {
        let (tenant, id) = (tenant.clone(), *id);
        self.db
            .read(move |conn| get_commit_in(conn, &tenant, &id))
            .await
    }

    async fn lineage_run(
        &self,
        tenant: &TenantId,
        lineage: &CommitId,
        max_depth: u64,
        limit: usize,
    ) -> Result<Vec<Commit>> {
        let (tenant, lineage) = (tenant.clone(), *lineage);
        self.db
            .read(move |conn| {
                let mut stmt = conn.prepare_cached(commit_with_delta!(
                    "WHERE c.tenant = ?1 AND c.lineage = ?2 AND c.depth <= ?3
                     ORDER BY c.depth DESC LIMIT ?4"
                ))?;
                let rows = stmt.query_map(
                    params![
                        tenant.as_str(),
                        lineage.to_string(),
                        max_depth.min(i64::MAX as u64) as i64,
                        limit.min(i64::MAX as usize) as i64
                    ],
                    CommitRow::read,
                )?;
                rows.map(|r| r?.decode()).collect()
            })
            .await
    }

    async fn resolve(
        &self,
        tenant: &TenantId,
        principal: &Principal,
        at: DateTime<Utc>,
    ) -> Result<Option<CommitId>> {
        let (tenant, principal) = (tenant.clone(), principal.clone());
        let id: Option<String> = self
            .db
            .read(move |conn| {
                Ok(conn
                    .prepare_cached(
                        "SELECT id FROM timeline WHERE tenant = ?1 AND principal = ?2 AND ts <= ?3
                         ORDER BY ts DESC, id DESC LIMIT 1",
                    )?
                    .query_row(
                        params![tenant.as_str(), principal.as_str(), at.timestamp_micros()],
                        |r| r.get(0),
                    )
                    .optional()?)
            })
            .await?;
        id.map(|s| {
            s.parse()
                .map_err(|_| Error::internal(format!("timeline holds a malformed id {s:?}")))
        })
        .transpose()
    }

    async fn update_metadata(
        &self,
        tenant: &TenantId,
        id: &CommitId,
        patch: &MetadataPatch,
    ) -> Result<Option<Commit>> {
        let (tenant, id, patch) = (tenant.clone(), *id, patch.clone());
        self.db
            .transaction(move |tx| {
                let Some(mut row) = row_in(tx, &tenant, &id)? else {
                    return Ok(None);
                };
                let inline = row.take_inline()?;
                let mut stored = row.decode_stored()?;
                if let Some(s) = patch.summary {
                    stored.set_summary(s);
                }
                if let Some(t) = patch.tags {
                    stored.commit.tags = t;
                }
                tx.execute(
                    "UPDATE commits SET body = ?3, summary = ?4 WHERE tenant = ?1 AND id = ?2",
                    params![
                        tenant.as_str(),
                        id.to_string(),
                        stored.body()?,
                        stored.commit.summary
                    ],
                )
                .map_err(sql)?;
                let mut c = stored.commit;
                c.inline = inline;
                Ok(Some(c))
            })
            .await
    }

    async fn get_ref(&self, tenant: &TenantId, name: &RefName) -> Result<Option<RefRecord>> {
        let (tenant, name) = (tenant.clone(), name.clone());
        let row: Option<(String, i64)> = self
            .db
            .read({
                let name = name.clone();
                move |conn| {
                    Ok(conn
                        .prepare_cached(
                            "SELECT target, updated_at FROM refs WHERE tenant = ?1 AND name = ?2",
                        )?
                        .query_row(params![tenant.as_str(), name.as_str()], |r| {
                            Ok((r.get(0)?, r.get(1)?))
                        })
                        .optional()?)
                }
            })
            .await?;
        row.map(|(t, at)| ref_record(name, &t, at)).transpose()
    }

    async fn cas_ref(
        &self,
        tenant: &TenantId,
        name: &RefName,
        expected: Option<&CommitId>,
        target: &CommitId,
        now: DateTime<Utc>,
    ) -> Result<RefRecord> {
        let (tenant, name, expected, target) =
            (tenant.clone(), name.clone(), expected.copied(), *target);
        self.db
            .transaction(move |tx| {
                Ok(cas_ref_in(
                    tx,
                    &tenant,
                    &name,
                    expected.as_ref(),
                    &target,
                    now,
                )?)
            })
            .await
    }

    async fn delete_ref(
        &self,
        tenant: &TenantId,
        name: &RefName,
        expected: &CommitId,
    ) -> Result<()> {
        let (tenant, name, expected) = (tenant.clone(), name.clone(), *expected);
        self.db
            .transaction(move |tx| {
                let current = current_ref(tx, &tenant, &name)?;
                if current.as_ref() != Some(&expected) {
                    return Err(ref_conflict(&name, Some(&expected), current.as_ref()).into());
                }
                tx.execute(
                    "DELETE FROM refs WHERE tenant = ?1 AND name = ?2",
                    params![tenant.as_str(), name.as_str()],
                )?;
                Ok(())
            })
            .await
    }

    async fn list_refs(
        &self,
        tenant: &TenantId,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<RefRecord>> {
        let (tenant, prefix) = (tenant.clone(), prefix.to_owned());
        let rows: Vec<(String, String, i64)> = self
            .db
            .read(move |conn| {
                // A case-sensitive prefix match that can still use the key's order.
                let mut stmt = conn.prepare_cached(
                    "SELECT name, target, updated_at FROM refs
                     WHERE tenant = ?1 AND name >= ?2 AND substr(name, 1, length(?2)) = ?2
                     ORDER BY name LIMIT ?3",
                )?;
                let rows = stmt.query_map(
                    params![tenant.as_str(), prefix, limit.min(i64::MAX as usize) as i64],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )?;
                Ok(rows.collect::<Result<_, _>>()?)
            })
            .await?;
        rows.into_iter()
            .map(|(n, t, at)| {
                let name = n
                    .parse()
                    .map_err(|_| Error::internal(format!("stored ref name {n:?} is malformed")))?;
                ref_record(name, &t, at)
            })
            .collect()
    }

    async fn get_materialized(
        &self,
        tenant: &TenantId,
        key: &MaterializeKey,
    ) -> Result<Option<Materialized>> {
        let (tenant, key) = (tenant.clone(), key.clone());
        self.db
            .read(move |conn| {
                let body: Option<String> = conn
                    .prepare_cached(
                        "SELECT body FROM materialized
                     WHERE tenant = ?1 AND commit_id = ?2 AND stop = ?3 AND format = ?4",
                    )?
                    .query_row(
                        params![
                            tenant.as_str(),
                            key.commit.to_string(),
                            key.stop.to_string(),
                            key.format.as_str()
                        ],
                        |r| r.get(0),
                    )
                    .optional()?;
                Ok(body.map(|b| serde_json::from_str(&b)).transpose()?)
            })
            .await
    }

    async fn put_materialized(
        &self,
        tenant: &TenantId,
        key: &MaterializeKey,
        value: &Materialized,
    ) -> Result<()> {
        let (tenant, key) = (tenant.clone(), key.clone());
        let body = serde_json::to_string(value)
            .map_err(|e| Error::internal(format!("cannot encode cache entry: {e}")))?;
        let (size, artifact) = (value.size, value.artifact_ref.to_string());
        // A cache row need not be durable (nor is its cached file).
        self.db
            .transaction_relaxed(move |conn| {
                // A new entry counts as the most recently used one; none
                // is written for a commit that is gone.
                let written = conn
                    .execute(
                        "INSERT OR REPLACE INTO materialized
                            (tenant, commit_id, stop, format, body, size, artifact, accessed)
                         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7,
                            (SELECT COALESCE(MAX(accessed), 0) FROM materialized)
                         WHERE EXISTS (SELECT 1 FROM commits WHERE tenant = ?1 AND id = ?2)",
                        params![
                            tenant.as_str(),
                            key.commit.to_string(),
                            key.stop.to_string(),
                            key.format.as_str(),
                            body,
                            i64::try_from(size).unwrap_or(i64::MAX),
                            artifact,
                        ],
                    )
                    .map_err(sql)?;
                if written == 0 {
                    return Err(crate::store::gone_commit(&key.commit).into());
                }
                Ok(())
            })
            .await
    }

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

    async fn touch_materialized(
        &self,
        tenant: &TenantId,
        key: &MaterializeKey,
        at: DateTime<Utc>,
    ) -> Result<()> {
        let (tenant, key) = (tenant.clone(), key.clone());
        // A cache-use stamp need not be durable.
        self.db
            .transaction_relaxed(move |conn| {
                conn.prepare_cached(
                    "UPDATE materialized SET accessed = ?5
                     WHERE tenant = ?1 AND commit_id = ?2 AND stop = ?3 AND format = ?4
                       AND accessed < ?5",
                )?
                .execute(params![
                    tenant.as_str(),
                    key.commit.to_string(),
                    key.stop.to_string(),
                    key.format.as_str(),
                    at.timestamp_micros()
                ])?;
                Ok(())
            })
            .await
    }

    async fn evict_materialized(
        &self,
        budget: u64,
        keep: (&TenantId, &MaterializeKey),
    ) -> Result<Vec<(TenantId, ArtifactRef)>> {
        let budget = i64::try_from(budget).unwrap_or(i64::MAX);
        let keep = (
            keep.0.to_string(),
            keep.1.commit.to_string(),
            keep.1.stop.to_string(),
            keep.1.format.as_str().to_owned(),
        );
        // Removing cache rows need not be durable: a row back after a
        // power loss names a removed file, which is a miss.
        self.db
            .transaction_relaxed(move |tx| {
                let mut total: i64 =
                    tx.query_row("SELECT COALESCE(SUM(size), 0) FROM materialized", [], |r| {
                        r.get(0)
                    })?;
                if total <= budget {
                    return Ok(Vec::new());
                }
                let mut victims: Vec<(String, String, String, String, String)> = Vec::new();
                {
                    let mut stmt = tx.prepare(
                        "SELECT tenant, commit_id, stop, format, artifact, size FROM materialized
                         ORDER BY accessed, tenant, commit_id, stop, format",
                    )?;
                    let mut rows = stmt.query([])?;
                    while total > budget {
                        let Some(r) = rows.next()? else { break };
                        let row: (String, String, String, String, String) =
                            (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?);
                        if (&row.0, &row.1, &row.2, &row.3) == (&keep.0, &keep.1, &keep.2, &keep.3) {
                            continue;
                        }
                        total -= r.get::<_, i64>(5)?;
                        victims.push(row);
                    }
                }
                let mut orphans = Vec::new();
                for (tenant, commit, stop, format, artifact) in victims {
                    tx.execute(
                        "DELETE FROM materialized
                         WHERE tenant = ?1 AND commit_id = ?2 AND stop = ?3 AND format = ?4",
                        params![tenant, commit, stop, format],
                    )?;
                    orphans.push((tenant, artifact));
                }
                orphans.sort();
                orphans.dedup();
                let mut out = Vec::new();
                for (tenant, artifact) in orphans {
                    let named: bool = tx.query_row(
                        "SELECT EXISTS (SELECT 1 FROM materialized WHERE tenant = ?1 AND artifact = ?2)",
                        params![tenant, artifact],
                        |r| r.get(0),
                    )?;
                    if !named {
                        let bad = || Error::internal(format!("stored cache entry {tenant}/{artifact} is malformed"));
                        out.push((
                            tenant.parse().map_err(|_| bad())?,
                            artifact.parse().map_err(|_| bad())?,
                        ));
                    }
                }
                Ok(out)
            })
            .await
    }

    async fn compact(&self) -> Result<u64> {
        self.db
            .write(|conn| {
                let given_back = super::vacuum_if_worth(conn, VACUUM_MIN_PAGES)?;
                super::truncate_wal(conn)?;
                Ok(given_back)
            })
            .await
    }

    async fn missing_summaries(
        &self,
        tenant: &TenantId,
        after: Option<&SummaryCursor>,
        limit: usize,
    ) -> Result<MissingPage> {
        self.query_missing(tenant, after, limit).await
    }

    async fn claim_summary(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        respect_backoff: bool,
    ) -> Result<bool> {
        self.claim(tenant, commit, now, until, respect_backoff)
            .await
    }

    async fn write_summary(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        summary: &str,
        by: &str,
    ) -> Result<bool> {
        self.write_machine_summary(tenant, commit, summary, by)
            .await
    }

    async fn fail_summary(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        error: &str,
        retry_at: DateTime<Utc>,
    ) -> Result<()> {
        self.record_failure(tenant, commit, error, retry_at).await
    }

    async fn summary_tenants(&self) -> Result<Vec<TenantId>> {
        self.tenants_with_work().await
    }

    async fn timeline_range(
        &self,
        tenant: &TenantId,
        principal: &Principal,
        after: Option<DateTime<Utc>>,
        until: DateTime<Utc>,
        limit: usize,
        newest_first: bool,
    ) -> Result<Vec<Commit>> {
        self.query_timeline_range(tenant, principal, after, until, limit, newest_first)
            .await
    }

    async fn get_agent(&self, tenant: &TenantId, agent: &Principal) -> Result<Option<AgentRecord>> {
        self.read_agent(tenant, agent).await
    }

    async fn update_agent(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        patch: &AgentRecord,
    ) -> Result<AgentRecord> {
        self.patch_agent(tenant, agent, patch).await
    }

    async fn put_save(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        save: &SaveRecord,
    ) -> Result<()> {
        self.insert_save(tenant, agent, save).await
    }

    async fn list_saves(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        limit: usize,
    ) -> Result<Vec<SaveRecord>> {
        self.query_saves(tenant, agent, limit).await
    }

    async fn get_save(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        id: &SaveId,
    ) -> Result<Option<SaveRecord>> {
        self.read_save(tenant, agent, id).await
    }

    async fn session_commits(&self, tenant: &TenantId, session: &SessionId) -> Result<Vec<Commit>> {
        self.commits_of_session(tenant, session).await
    }

    async fn child_commits(&self, tenant: &TenantId, parent: &CommitId) -> Result<Vec<Commit>> {
        self.children_of(tenant, parent).await
    }

    async fn materialized_of(
        &self,
        tenant: &TenantId,
        commit: &CommitId,
    ) -> Result<Vec<(MaterializeKey, Materialized)>> {
        self.cache_entries_of(tenant, commit).await
    }

    async fn delete_materialized(&self, tenant: &TenantId, key: &MaterializeKey) -> Result<bool> {
        self.remove_cache_entry(tenant, key).await
    }

    async fn delete_commit(&self, tenant: &TenantId, commit: &Commit) -> Result<bool> {
        self.remove_commit(tenant, commit).await
    }

    async fn artifact_users(
        &self,
        tenant: &TenantId,
        artifact: &ArtifactRef,
        limit: usize,
    ) -> Result<Vec<ArtifactUser>> {
        self.users_of(tenant, artifact, limit).await
    }

    async fn delete_save(&self, tenant: &TenantId, agent: &Principal, id: &SaveId) -> Result<bool> {
        self.remove_save(tenant, agent, id).await
    }

    async fn clear_working_context(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        artifact: &ArtifactRef,
    ) -> Result<bool> {
        self.drop_working_context(tenant, agent, artifact).await
    }

    async fn delete_agent(&self, tenant: &TenantId, agent: &Principal) -> Result<bool> {
        self.remove_agent(tenant, agent).await
    }

    async fn idle_sessions(
        &self,
        tenant: &TenantId,
        before: DateTime<Utc>,
        after: Option<&SessionId>,
        limit: usize,
    ) -> Result<Vec<SessionId>> {
        self.sessions_idle_since(tenant, before, after, limit).await
    }

    async fn set_pin(&self, tenant: &TenantId, pin: &Pin, pinned: bool) -> Result<bool> {
        self.write_pin(tenant, pin, pinned).await
    }

    async fn pins(&self, tenant: &TenantId) -> Result<Vec<Pin>> {
        self.read_pins(tenant).await
    }

    async fn commit_tenants(&self) -> Result<Vec<TenantId>> {
        self.tenants_with_commits().await
    }

    async fn erase_tenant(
        &self,
        tenant: &TenantId,
        _limit: usize,
    ) -> Result<crate::store::TenantRecords> {
        self.erase_tenant_rows(tenant).await
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
        self.set_evicted(tenant, before, commits).await
    }

    async fn evicted_by(&self, tenant: &TenantId, commit: &CommitId) -> Result<Option<CommitId>> {
        self.eviction_of(tenant, commit).await
    }
}

fn ref_record(name: RefName, target: &str, updated_at: i64) -> Result<RefRecord> {
    Ok(RefRecord {
        target: target.parse().map_err(|_| {
            Error::internal(format!("ref {name} holds a malformed target {target:?}"))
        })?,
        name,
        updated_at: micros_to_time(updated_at),
    })
}

#[async_trait]
impl TokenStore for SqliteMetaStore {
    async fn add_token(
        &self,
        hash: &Hash,
        tenant: &TenantId,
        now: DateTime<Utc>,
    ) -> Result<TokenRecord> {
        let rec = TokenRecord::new(hash, tenant, now);
        let (hash, r) = (*hash, rec.clone());
        self.db
            .transaction(move |conn| {
                conn.execute(
                    "INSERT INTO tokens (hash, id, tenant, created_at) VALUES (?1, ?2, ?3, ?4)",
                    params![
                        hash.to_hex(),
                        r.id,
                        r.tenant.as_str(),
                        r.created_at.timestamp_micros()
                    ],
                )
                .map_err(sql)?;
                Ok(())
            })
            .await?;
        Ok(rec)
    }

    async fn tenant_for(&self, hash: &Hash) -> Result<Option<TenantId>> {
        let hash = *hash;
        let tenant: Option<String> = self
            .db
            .read(move |conn| {
                Ok(conn
                    .prepare_cached("SELECT tenant FROM tokens WHERE hash = ?1")?
                    .query_row(params![hash.to_hex()], |r| r.get(0))
                    .optional()?)
            })
            .await?;
        tenant
            .map(|t| {
                t.parse().map_err(|_| {
                    Error::internal(format!("token table holds a malformed tenant {t:?}"))
                })
            })
            .transpose()
    }

    async fn list_tokens(&self) -> Result<Vec<TokenRecord>> {
        let rows: Vec<(String, String, i64)> = self
            .db
            .read(|conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT id, tenant, created_at FROM tokens ORDER BY created_at, id",
                )?;
                let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
                Ok(rows.collect::<Result<_, _>>()?)
            })
            .await?;
        rows.into_iter()
            .map(|(id, t, at)| {
                Ok(TokenRecord {
                    id,
                    tenant: t.parse().map_err(|_| {
                        Error::internal(format!("token table holds a malformed tenant {t:?}"))
                    })?,
                    created_at: micros_to_time(at),
                })
            })
            .collect()
    }

    async fn revoke_token(&self, id: &str) -> Result<bool> {
        let id = id.to_owned();
        self.db
            .transaction(move |conn| {
                Ok(conn
                    .execute("DELETE FROM tokens WHERE id = ?1", params![id])
                    .map_err(sql)?
                    > 0)
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn data_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let t: TenantId = "t".parse().unwrap();
        let hash = Hash::of(b"tok");
        {
            let meta = SqliteMetaStore::open(dir.path()).unwrap();
            meta.add_token(&hash, &t, micros_to_time(0)).await.unwrap();
        }
        let meta = SqliteMetaStore::open(dir.path()).unwrap();
        assert_eq!(meta.tenant_for(&hash).await.unwrap(), Some(t));
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
        assert_eq!(meta.compact().await.unwrap(), 0, "nothing free yet");
        let evicted = meta.evict_materialized(0, (&t, &key(0))).await.unwrap();
        assert_eq!(evicted.len(), 2999);
        let (_, free) = pages(&Connection::open(&path).unwrap());
        assert!(free >= VACUUM_MIN_PAGES, "the deletes freed pages: {free}");
        let given_back = meta.compact().await.unwrap();
        assert!(given_back > 0);
        let (after, free) = pages(&Connection::open(&path).unwrap());
        assert_eq!(free, 0, "every free page given back");
        assert!(after < before, "{after} pages, were {before}");
    }
}
