//! The SQLite store's commits, their runs and the timelines
//! ([`Commits`](crate::store::Commits)), and a commit as a row of
//! `commits`.
//!
//! The columns the indexes need (id, parent, lineage, depth, time,
//! session, summary, artifact) hold those fields once, and the JSON `body`
//! holds the rest. Before schema version 9 the body held every field again
//! (~0.35 KB of a ~0.65 KB body); such a body still reads (a field it holds
//! wins over its column), and the version 9 step rewrites each one without
//! the fields its columns reproduce exactly ([`slim_bodies`]).
//!
//! Every query that reads whole commits selects the same columns, in the
//! same order, with [`select_commit!`], and decodes them with
//! [`CommitRow::decode`].

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Deserializer, Serialize};

use super::refs::{cas_ref_in, current_ref, get_ref_in};
use super::{LocalError, SqliteMetaStore, sql};
use crate::clock::micros_to_time;
use crate::commit::{Commit, CommitType, Tags, Trigger};
use crate::error::{Error, Result};
use crate::format::FormatId;
use crate::id::{ArtifactRef, CommitId, Principal, SessionId, TenantId};
use crate::store::commits::{batch_move_settled, continuing, timeline_micros};
use crate::store::packed::{self, Compression};
use crate::store::{BatchCommit, BatchRefMove, Batched, MetadataPatch, PutCommit};

/// `SELECT` of a whole commit from `commits c`: its columns (indexes 0–8,
/// read by [`CommitRow::read`]), then `$rest`, which starts with the two
/// columns of its inline delta (indexes 9 and 10: `d.bytes, d.codec` from
/// a `LEFT JOIN deltas d`, or `NULL, NULL` for a reader that does not want
/// the bytes), then any columns of its own and the `FROM`.
macro_rules! select_commit {
    ($($rest:tt)+) => {
        concat!(
            "SELECT c.body, c.id, c.parent, c.lineage, c.depth, c.ts, c.session, c.summary, c.artifact, ",
            $($rest)+
        )
    };
}
pub(super) use select_commit;

/// The `FROM` of a commit with its inline delta, for [`select_commit!`].
macro_rules! commit_with_delta {
    ($where:literal) => {
        $crate::store::local::commits::select_commit!(concat!(
            "d.bytes, d.codec FROM commits c LEFT JOIN deltas d ON d.rowid = c.delta ",
            $where
        ))
    };
}

/// A commit row's inline delta as selected beside it: `deltas.bytes` and
/// `deltas.codec` (both NULL when its bytes are in the CAS, or not read).
pub(super) type StoredDelta = (Option<Vec<u8>>, Option<i64>);

/// The columns of a commit row as [`select_commit!`] selects them.
#[derive(Debug)]
pub(super) struct CommitRow {
    body: String,
    id: String,
    parent: Option<String>,
    lineage: String,
    depth: i64,
    ts: i64,
    session: Option<String>,
    summary: Option<String>,
    artifact: Option<String>,
    delta: StoredDelta,
}

impl CommitRow {
    /// Reads the columns of [`select_commit!`] (indexes 0–10).
    pub(super) fn read(r: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(CommitRow {
            body: r.get(0)?,
            id: r.get(1)?,
            parent: r.get(2)?,
            lineage: r.get(3)?,
            depth: r.get(4)?,
            ts: r.get(5)?,
            session: r.get(6)?,
            summary: r.get(7)?,
            artifact: r.get(8)?,
            delta: (r.get(9)?, r.get(10)?),
        })
    }

    /// The commit, its inline delta unpacked.
    pub(super) fn decode(self) -> Result<Commit, LocalError> {
        let (body, cols, delta) = self.parts()?;
        let c = build(body, cols)?;
        with_inline(c, delta)
    }

    /// Takes the row's inline delta out, unpacked.
    pub(super) fn take_inline(&mut self) -> Result<Option<bytes::Bytes>, LocalError> {
        unpack(std::mem::take(&mut self.delta))
    }

    /// The commit without its inline bytes, with its columns, for a
    /// caller that rewrites its body ([`Stored::body`]).
    pub(super) fn decode_stored(self) -> Result<Stored, LocalError> {
        let (body, cols, _) = self.parts()?;
        let commit = build(body, cols.clone())?;
        Ok(Stored { commit, cols })
    }

    /// The body, the typed columns and the stored delta of the row, each
    /// parsed once.
    fn parts(self) -> Result<(Body, Columns, StoredDelta), LocalError> {
        let body: Body = serde_json::from_str(&self.body)?;
        let cols = Columns {
            id: parse_id("id", &self.id)?,
            parent: self
                .parent
                .as_deref()
                .map(|p| parse_id("parent", p))
                .transpose()?,
            lineage: parse_id("lineage", &self.lineage)?,
            depth: u64::try_from(self.depth).map_err(|_| malformed("depth", self.depth))?,
            created_at: micros_to_time(self.ts),
            session: self
                .session
                .as_deref()
                .map(|s| s.parse().map_err(|_| malformed("session", s)))
                .transpose()?,
            summary: self.summary,
            artifact: self
                .artifact
                .as_deref()
                .map(|a| {
                    a.parse::<ArtifactRef>()
                        .map_err(|_| malformed("artifact", a))
                })
                .transpose()?,
        };
        Ok((body, cols, self.delta))
    }
}

/// The commit of a row's body and columns: a field the body holds wins
/// over its column (a body written before version 9).
fn build(b: Body, cols: Columns) -> Result<Commit> {
    {
        let parent = b.parent.or(cols.parent);
        let lineage = b.lineage.unwrap_or(cols.lineage);
        let c = Commit {
            id: b.id.unwrap_or(cols.id),
            parent,
            commit_type: b.commit_type,
            artifact_ref: match b.artifact_ref.or(cols.artifact) {
                Some(a) => a,
                None => return Err(malformed("artifact", "none")),
            },
            artifact_size: b.artifact_size,
            format: b.format,
            template: b.template,
            principal: b.principal,
            machine: b.machine,
            session_id: b.session_id.or(cols.session),
            checkpoint: b.checkpoint,
            ticket_id: b.ticket_id,
            thread_id: b.thread_id,
            summary: b.summary.or(cols.summary),
            message_count: b.message_count,
            token_count: b.token_count,
            created_at: b.created_at.unwrap_or(cols.created_at),
            tags: b.tags,
            depth: b.depth.unwrap_or(cols.depth),
            lineage,
            parent_lineage: match b.parent_lineage {
                Some(pl) => pl,
                None => parent.map(|_| lineage),
            },
            inline: None,
        };
        Ok(c)
    }
}

/// A commit read to be rewritten: its body must leave out only what the
/// row's columns reproduce, which for a row of an earlier version is not
/// everything (see [`Body`]).
pub(super) struct Stored {
    /// The commit (without its inline bytes).
    pub(super) commit: Commit,
    cols: Columns,
}

impl Stored {
    /// Sets the summary, which the caller writes to the `summary` column
    /// too.
    pub(super) fn set_summary(&mut self, summary: Option<String>) {
        self.cols.summary.clone_from(&summary);
        self.commit.summary = summary;
    }

    /// The body for the row as it stands (with the summary column as set).
    pub(super) fn body(&self) -> Result<String> {
        encode_against(&self.commit, Some(&self.cols))
    }
}

/// A commit with the inline bytes of its row, unpacked (verified against
/// its reference by the reader that uses them).
fn with_inline(mut c: Commit, delta: StoredDelta) -> Result<Commit, LocalError> {
    c.inline = unpack(delta)?;
    Ok(c)
}

/// The bytes of a stored inline delta, unpacked.
fn unpack(delta: StoredDelta) -> Result<Option<bytes::Bytes>, LocalError> {
    Ok(match delta {
        (Some(bytes), codec) => Some(packed::unpack(
            Compression::from_code(codec.unwrap_or(0))?,
            bytes::Bytes::from(bytes),
        )?),
        (None, _) => None,
    })
}

/// The typed columns of a row.
#[derive(Clone)]
struct Columns {
    id: CommitId,
    parent: Option<CommitId>,
    lineage: CommitId,
    depth: u64,
    created_at: DateTime<Utc>,
    session: Option<SessionId>,
    summary: Option<String>,
    artifact: Option<ArtifactRef>,
}

fn parse_id(column: &str, s: &str) -> Result<CommitId> {
    s.parse().map_err(|_| malformed(column, s))
}

fn malformed(column: &str, value: impl std::fmt::Debug) -> Error {
    Error::internal(format!(
        "commits.{column} holds a malformed value {value:?}"
    ))
}

/// The JSON `body` of a commit row: every field the columns do not hold.
/// A column-held field appears only in a body written before version 9
/// whose column does not reproduce it exactly (a `ts` column filled at
/// millisecond precision by the version 2 step, say); `parent_lineage`
/// appears only when it is not the commit's own lineage (the start of a
/// fork, a row of an earlier version without one).
#[derive(Serialize, Deserialize)]
struct Body {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<CommitId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    parent: Option<CommitId>,
    commit_type: CommitType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    artifact_ref: Option<ArtifactRef>,
    artifact_size: u64,
    format: FormatId,
    template: String,
    principal: Principal,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    machine: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    session_id: Option<SessionId>,
    checkpoint: Trigger,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ticket_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    thread_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    summary: Option<String>,
    message_count: u64,
    token_count: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    created_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Tags::is_empty")]
    tags: Tags,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    depth: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lineage: Option<CommitId>,
    /// Absent: the commit's lineage when it has a parent, else none.
    /// Present (`null` included): as given.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    parent_lineage: Option<Option<CommitId>>,
}

/// A field that is present, even as `null`: `Some(value)`.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<CommitId>>, D::Error> {
    Option::<CommitId>::deserialize(d).map(Some)
}

/// The body of `c` for a row whose columns are written from `c` itself.
pub(super) fn encode(c: &Commit) -> Result<String> {
    encode_against(c, None)
}

/// The body of `c` leaving out what `cols` reproduces exactly (all the
/// column-held fields when `cols` is `None`: the row is written from `c`).
fn encode_against(c: &Commit, col: Option<&Columns>) -> Result<String> {
    let keep = |same: bool| col.is_some() && !same;
    let b = Body {
        id: keep(col.is_some_and(|k| k.id == c.id)).then_some(c.id),
        parent: keep(col.is_some_and(|k| k.parent == c.parent))
            .then_some(c.parent)
            .flatten(),
        commit_type: c.commit_type,
        artifact_ref: keep(col.is_some_and(|k| k.artifact == Some(c.artifact_ref)))
            .then_some(c.artifact_ref),
        artifact_size: c.artifact_size,
        format: c.format.clone(),
        template: c.template.clone(),
        principal: c.principal.clone(),
        machine: c.machine.clone(),
        session_id: keep(col.is_some_and(|k| k.session == c.session_id))
            .then(|| c.session_id.clone())
            .flatten(),
        checkpoint: c.checkpoint,
        ticket_id: c.ticket_id.clone(),
        thread_id: c.thread_id.clone(),
        summary: keep(col.is_some_and(|k| k.summary == c.summary))
            .then(|| c.summary.clone())
            .flatten(),
        message_count: c.message_count,
        token_count: c.token_count,
        created_at: keep(col.is_some_and(|k| k.created_at == c.created_at)).then_some(c.created_at),
        tags: c.tags.clone(),
        depth: keep(col.is_some_and(|k| k.depth == c.depth)).then_some(c.depth),
        lineage: keep(col.is_some_and(|k| k.lineage == c.lineage)).then_some(c.lineage),
        parent_lineage: (c.parent_lineage != c.parent.map(|_| c.lineage))
            .then_some(c.parent_lineage),
    };
    serde_json::to_string(&b).map_err(|e| Error::internal(format!("cannot encode commit: {e}")))
}

/// Rows rewritten per statement batch by [`slim_bodies`].
const SLIM_BATCH: i64 = 1_000;

/// The version 9 step: every body rewritten without the fields its
/// columns reproduce exactly (a body whose nullable field is `null` while
/// its column holds a value keeps nothing it did not have). Runs inside the
/// migration's transaction, a batch of rows at a time in key order.
pub(super) fn slim_bodies(conn: &Connection) -> Result<()> {
    let mut after: (String, String) = (String::new(), String::new());
    loop {
        let rows: Vec<(String, CommitRow)> = conn
            .prepare(select_commit!(
                "NULL, NULL, c.tenant FROM commits c
                 WHERE (c.tenant, c.id) > (?1, ?2) ORDER BY c.tenant, c.id LIMIT ?3"
            ))
            .and_then(|mut s| {
                s.query_map(params![after.0, after.1, SLIM_BATCH], |r| {
                    Ok((r.get(11)?, CommitRow::read(r)?))
                })?
                .collect()
            })
            .map_err(sql)?;
        let Some((tenant, last)) = rows.last() else {
            return Ok(());
        };
        after = (tenant.clone(), last.id.clone());
        let mut update = conn
            .prepare("UPDATE commits SET body = ?3 WHERE tenant = ?1 AND id = ?2")
            .map_err(sql)?;
        for (tenant, row) in rows {
            let id = row.id.clone();
            let body = row.decode_stored().map_err(Error::from)?.body()?;
            update.execute(params![tenant, id, body]).map_err(sql)?;
        }
    }
}

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
    let body = encode(&stored)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::conformance::{self, t};

    fn row_of(c: &Commit, body: String) -> CommitRow {
        CommitRow {
            body,
            id: c.id.to_string(),
            parent: c.parent.map(|p| p.to_string()),
            lineage: c.lineage.to_string(),
            depth: c.depth as i64,
            ts: c.created_at.timestamp_micros(),
            session: c.session_id.as_ref().map(ToString::to_string),
            summary: c.summary.clone(),
            artifact: Some(c.artifact_ref.to_string()),
            delta: (None, None),
        }
    }

    #[test]
    fn a_body_holds_only_what_the_columns_do_not() {
        let tenant = "t".parse().unwrap();
        let root = conformance::commit(&tenant, None, t(0), "p", b"one");
        let mut child = conformance::commit(&tenant, Some(&root), t(1), "p", b"two");
        child.summary = Some("a summary".into());
        child.session_id = Some("s-1".parse().expect("a session id"));
        for c in [&root, &child] {
            let body = encode(c).unwrap();
            for field in [
                "\"id\"",
                "\"parent\"",
                "artifact_ref",
                "created_at",
                "\"depth\"",
                "\"lineage\"",
                "parent_lineage",
                "session_id",
                "summary",
                "null",
            ] {
                assert!(!body.contains(field), "{field} in {body}");
            }
            assert!(body.len() < 200, "{} bytes: {body}", body.len());
            assert_eq!(&row_of(c, body).decode().unwrap(), c);
        }
    }

    #[test]
    fn a_fork_and_a_rootless_lineage_keep_their_parent_lineage() {
        let tenant = "t".parse().unwrap();
        let root = conformance::commit(&tenant, None, t(0), "p", b"one");
        let mut fork = conformance::commit(&tenant, Some(&root), t(1), "p", b"two");
        fork.lineage = fork.id;
        let mut unknown = fork.clone();
        unknown.parent_lineage = None;
        for c in [&fork, &unknown] {
            let body = encode(c).unwrap();
            assert!(body.contains("parent_lineage"), "{body}");
            assert_eq!(&row_of(c, body).decode().unwrap(), c);
        }
    }

    #[test]
    fn a_full_body_of_an_earlier_version_reads_and_slims_to_what_its_columns_miss() {
        let tenant = "t".parse().unwrap();
        let root = conformance::commit(&tenant, None, t(0), "p", b"one");
        let mut c = conformance::commit(&tenant, Some(&root), t(1), "p", b"two");
        // A time the version 2 step could only copy to the millisecond.
        c.created_at += chrono::Duration::microseconds(123);
        let full = serde_json::to_string(&c).unwrap();
        let mut row = row_of(&c, full);
        row.ts = c.created_at.timestamp_millis() * 1000;
        let stored = row.decode_stored().unwrap();
        assert_eq!(stored.commit, c, "the full body wins over a column");
        let mut stale = row_of(&c, String::new());
        stale.ts = c.created_at.timestamp_millis() * 1000;
        let slim = stored.body().unwrap();
        assert!(slim.contains("created_at"), "{slim}");
        assert!(!slim.contains("artifact_ref"), "{slim}");
        stale.body = slim;
        assert_eq!(stale.decode().unwrap(), c);
    }
}
