//! The SQLite store's commits, their runs and the timelines ([`Commits`](crate::store::Commits)).

use super::refs::{cas_ref_in, current_ref, get_ref_in};
use super::row::{self, CommitRow, commit_with_delta, select_commit};
use super::{LocalError, SqliteMetaStore, sql};
use crate::commit::Commit;
use crate::error::{Error, Result};
use crate::id::{CommitId, Principal, SessionId, TenantId};
use crate::store::commits::{batch_move_settled, continuing, timeline_micros};
use crate::store::{BatchCommit, BatchRefMove, Batched, MetadataPatch, PutCommit, packed};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};

pub(super) fn get_commit_in(
    conn: &Connection,
    tenant: &TenantId,
    id: &CommitId,
) -> Result<Option<Commit>, LocalError> {
    row_in(conn, tenant, id)?.map(CommitRow::decode).transpose()
}

/// The row of commit `id`, with its inline delta.
pub(super) fn row_in(
    conn: &Connection,
    tenant: &TenantId,
    id: &CommitId,
) -> Result<Option<CommitRow>, LocalError> {
    Ok(conn
        .prepare_cached(commit_with_delta!("WHERE c.tenant = ?1 AND c.id = ?2"))?
        .query_row(params![tenant.as_str(), id.to_string()], CommitRow::read)
        .optional()?)
}

/// A session's commits (`?1` tenant, `?2` session). Named index, as in
/// [`CHILDREN`]: the planner chose a scan of the tenant's rows.
pub(super) const SESSION: &str = select_commit!(
    "d.bytes, d.codec FROM commits c INDEXED BY commits_by_session
     LEFT JOIN deltas d ON d.rowid = c.delta
     WHERE c.tenant = ?1 AND c.session = ?2"
);

/// A commit's children (`?1` tenant, `?2` parent, `?3` and `?4` the
/// parent's lineage and depth + 1): the next row of the parent's run,
/// then the forks. Named index: without statistics SQLite's planner
/// prefers a scan of the tenant's rows to the partial `commits_forks`.
pub(super) const CHILDREN: &str = concat!(
    commit_with_delta!("WHERE c.tenant = ?1 AND c.lineage = ?3 AND c.depth = ?4 AND c.parent = ?2"),
    " UNION ALL ",
    select_commit!(
        "d.bytes, d.codec FROM commits c INDEXED BY commits_forks
         LEFT JOIN deltas d ON d.rowid = c.delta
         WHERE c.tenant = ?1 AND c.parent = ?2 AND c.lineage = c.id"
    )
);

pub(super) fn commits_where(
    conn: &Connection,
    sql_text: &str,
    args: impl rusqlite::Params,
) -> Result<Vec<Commit>, LocalError> {
    let mut stmt = conn.prepare_cached(sql_text)?;
    let rows = stmt.query_map(args, CommitRow::read)?;
    rows.map(|r| r?.decode()).collect()
}

/// Writes a new commit (checked absent) with its delta row and timeline
/// entry, starting a run of its own when its parent's next slot is taken
/// (a fork); returns it as stored.
fn insert_commit_in(
    tx: &Connection,
    tenant: &TenantId,
    commit: Commit,
) -> Result<Commit, LocalError> {
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
    // zstd-packed when that saves an eighth.
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
            stored.session_id.as_ref().map(SessionId::as_str),
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
    Ok(stored)
}

#[async_trait]
impl crate::store::Commits for SqliteMetaStore {
    async fn create_batch(
        &self,
        tenant: &TenantId,
        commits: &[BatchCommit],
        moves: &[BatchRefMove],
        now: DateTime<Utc>,
    ) -> Result<Batched> {
        let tenant = tenant.clone();
        let commits = commits.to_vec();
        let moves = moves.to_vec();
        // One transaction (its own savepoint in a group commit): a stale
        // move's error undoes every commit written before it.
        self.db
            .transaction(move |tx| {
                let mut out: Vec<PutCommit> = Vec::with_capacity(commits.len());
                for c in commits {
                    if let Some(existing) = get_commit_in(tx, &tenant, &c.commit.id)? {
                        out.push(PutCommit::Existing(existing));
                        continue;
                    }
                    let commit = match c.parent_in_batch {
                        Some(j) => continuing(c.commit, out[j].commit()),
                        None => c.commit,
                    };
                    out.push(PutCommit::Created(insert_commit_in(tx, &tenant, commit)?));
                }
                let mut refs = Vec::with_capacity(moves.len());
                for (i, mv) in moves.iter().enumerate() {
                    let current = current_ref(tx, &tenant, &mv.name)?;
                    refs.push(if batch_move_settled(i, mv, current.as_ref())? {
                        get_ref_in(tx, &tenant, &mv.name)?.ok_or_else(|| {
                            Error::internal(format!(
                                "ref {} vanished inside a transaction",
                                mv.name
                            ))
                        })?
                    } else {
                        cas_ref_in(tx, &tenant, &mv.name, mv.expected.as_ref(), &mv.target, now)?
                    });
                }
                Ok(Batched { commits: out, refs })
            })
            .await
    }

    async fn get_commit(&self, tenant: &TenantId, id: &CommitId) -> Result<Option<Commit>> {
        let (tenant, id) = (tenant.clone(), *id);
        self.db
            .lookup(move |conn| get_commit_in(conn, &tenant, &id))
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
            .lookup(move |conn| {
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

    async fn timeline_range(
        &self,
        tenant: &TenantId,
        principal: &Principal,
        after: Option<DateTime<Utc>>,
        until: DateTime<Utc>,
        limit: usize,
        newest_first: bool,
    ) -> Result<Vec<Commit>> {
        let Some(micros) = timeline_micros(after, until, limit) else {
            return Ok(Vec::new());
        };
        let (lower, upper) = micros.into_inner();
        let (tenant, principal) = (tenant.clone(), principal.clone());
        let sql_text = if newest_first {
            select_commit!(
                "d.bytes, d.codec FROM timeline t JOIN commits c ON c.tenant = t.tenant AND c.id = t.id
                 LEFT JOIN deltas d ON d.rowid = c.delta
                 WHERE t.tenant = ?1 AND t.principal = ?2 AND t.ts >= ?3 AND t.ts <= ?4
                 ORDER BY t.ts DESC, t.id DESC LIMIT ?5"
            )
        } else {
            select_commit!(
                "d.bytes, d.codec FROM timeline t JOIN commits c ON c.tenant = t.tenant AND c.id = t.id
                 LEFT JOIN deltas d ON d.rowid = c.delta
                 WHERE t.tenant = ?1 AND t.principal = ?2 AND t.ts >= ?3 AND t.ts <= ?4
                 ORDER BY t.ts ASC, t.id ASC LIMIT ?5"
            )
        };
        self.db
            .read(move |conn| {
                let mut stmt = conn.prepare_cached(sql_text)?;
                let rows = stmt.query_map(
                    params![
                        tenant.as_str(),
                        principal.as_str(),
                        lower,
                        upper,
                        limit.min(i64::MAX as usize) as i64
                    ],
                    CommitRow::read,
                )?;
                rows.map(|r| r?.decode()).collect()
            })
            .await
    }

    async fn session_commits(&self, tenant: &TenantId, session: &SessionId) -> Result<Vec<Commit>> {
        let (tenant, session) = (tenant.clone(), session.clone());
        self.db
            .read(move |conn| {
                commits_where(conn, SESSION, params![tenant.as_str(), session.as_str()])
            })
            .await
    }

    async fn child_commits(&self, tenant: &TenantId, parent: &CommitId) -> Result<Vec<Commit>> {
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

    async fn delete_commit(&self, tenant: &TenantId, commit: &Commit) -> Result<bool> {
        let (tenant, id) = (tenant.clone(), commit.id);
        self.db
            .transaction(move |tx| {
                let Some(stored) = get_commit_in(tx, &tenant, &id)? else {
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
}
