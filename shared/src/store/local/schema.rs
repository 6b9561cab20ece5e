//! The tables of `ctx.db` and their version.
//!
//! The database records its schema version in `PRAGMA user_version`.
//! Migration step `n` (`MIGRATIONS[n]`) takes a database from version `n`
//! to `n + 1`; opening runs the steps a database lacks, in one
//! transaction. Version 0
//! is a database that records no version: an empty file, or one written
//! before the schema was versioned (whose tables are exactly those of
//! version 1, so the first step creates only what is missing). A database
//! of a version newer than [`VERSION`] is refused: this build cannot know
//! what it holds.
//!
//! To change the schema, append a step and bump [`VERSION`]; never edit a
//! step that has shipped.

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};

use super::sql;
use crate::error::{Error, Result};

/// The schema version this build writes and reads.
pub const VERSION: u32 = 11;

/// Version 0 → 1: commits, lineages, timelines, refs, the materialization
/// cache, tokens (the meta store) and branches, their sessions and their
/// creation windows (the branch store).
const V1: &str = "
CREATE TABLE IF NOT EXISTS commits (
    tenant  TEXT NOT NULL,
    id      TEXT NOT NULL,
    lineage TEXT NOT NULL,
    depth   INTEGER NOT NULL,
    body    TEXT NOT NULL,
    PRIMARY KEY (tenant, id)
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS commits_by_lineage ON commits (tenant, lineage, depth);
CREATE TABLE IF NOT EXISTS timeline (
    tenant    TEXT NOT NULL,
    principal TEXT NOT NULL,
    ts        INTEGER NOT NULL,
    id        TEXT NOT NULL,
    PRIMARY KEY (tenant, principal, ts, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS refs (
    tenant     TEXT NOT NULL,
    name       TEXT NOT NULL,
    target     TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS materialized (
    tenant    TEXT NOT NULL,
    commit_id TEXT NOT NULL,
    stop      TEXT NOT NULL,
    format    TEXT NOT NULL,
    body      TEXT NOT NULL,
    PRIMARY KEY (tenant, commit_id, stop, format)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tokens (
    hash       TEXT PRIMARY KEY,
    id         TEXT NOT NULL UNIQUE,
    tenant     TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
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

/// Version 1 → 2: the summary queue. Commits gain `ts` (`created_at` in
/// µs), `summary` (a copy of the body's, so that a partial index can find
/// the commits lacking one) and the queue state (`lease`: claimed until,
/// µs; `tries`; `err`: the last failure; `retry`: not before, µs). Existing
/// rows take `ts` and `summary` from their body (`ts` at the millisecond
/// precision of SQLite's date functions).
const V2: &str = "
ALTER TABLE commits ADD COLUMN ts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE commits ADD COLUMN summary TEXT;
ALTER TABLE commits ADD COLUMN lease INTEGER;
ALTER TABLE commits ADD COLUMN tries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE commits ADD COLUMN err TEXT;
ALTER TABLE commits ADD COLUMN retry INTEGER;
UPDATE commits SET
    summary = json_extract(body, '$.summary'),
    ts = CAST(round(unixepoch(json_extract(body, '$.created_at'), 'subsec') * 1000000) AS INTEGER);
CREATE INDEX commits_missing_summary ON commits (tenant, ts, id) WHERE summary IS NULL;
";

/// Agents' live context: per agent its record (settings, clear marker,
/// working-context cache pointer; JSON in `body`) and its saves (save ids
/// sort by time, so newest first is `save_id DESC`).
const AGENTS: &str = "
CREATE TABLE IF NOT EXISTS agents (
    tenant TEXT NOT NULL,
    agent  TEXT NOT NULL,
    body   TEXT NOT NULL,
    PRIMARY KEY (tenant, agent)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS agent_saves (
    tenant  TEXT NOT NULL,
    agent   TEXT NOT NULL,
    save_id TEXT NOT NULL,
    body    TEXT NOT NULL,
    PRIMARY KEY (tenant, agent, save_id)
) WITHOUT ROWID;
";

/// The materialization cache's LRU budget: each entry's size, cached
/// artifact and last use (µs) as columns, so eviction is one ordered scan.
const CACHE: &str = "
ALTER TABLE materialized ADD COLUMN size INTEGER NOT NULL DEFAULT 0;
ALTER TABLE materialized ADD COLUMN artifact TEXT NOT NULL DEFAULT '';
ALTER TABLE materialized ADD COLUMN accessed INTEGER NOT NULL DEFAULT 0;
UPDATE materialized SET
    size = json_extract(body, '$.size'),
    artifact = json_extract(body, '$.artifact_ref');
CREATE INDEX materialized_lru ON materialized (accessed);
CREATE INDEX materialized_by_artifact ON materialized (tenant, artifact);
";

/// Lifecycle (erasure, retention, pins): commits gain copies of their
/// body's `session_id`, `parent` and `artifact_ref` with indexes (a
/// session's commits, a commit's children, an artifact's users), and pins
/// get a table. Existing rows take the copies from their bodies. (Cache
/// entries already carry their artifact, indexed, since `CACHE`.)
const LIFECYCLE: &str = "
ALTER TABLE commits ADD COLUMN session TEXT;
ALTER TABLE commits ADD COLUMN parent TEXT;
ALTER TABLE commits ADD COLUMN artifact TEXT;
UPDATE commits SET
    session = json_extract(body, '$.session_id'),
    parent = json_extract(body, '$.parent'),
    artifact = json_extract(body, '$.artifact_ref');
CREATE INDEX commits_by_session ON commits (tenant, session, ts) WHERE session IS NOT NULL;
CREATE INDEX commits_by_parent ON commits (tenant, parent) WHERE parent IS NOT NULL;
CREATE INDEX commits_by_artifact ON commits (tenant, artifact);
CREATE TABLE pins (
    tenant TEXT NOT NULL,
    kind   TEXT NOT NULL,
    name   TEXT NOT NULL,
    PRIMARY KEY (tenant, kind, name)
) WITHOUT ROWID;
";

/// Small deltas inline: a commit's artifact bytes may be stored in the
/// database (a row of `deltas`, whose rowid the commit's `delta` names;
/// NULL when they are in the CAS), so that a checkpoint of a small delta is
/// one transaction and no file. A rowid table, not a column of `commits`:
/// `commits` is WITHOUT ROWID, whose rows keep at most ~1 KB on the leaf
/// and spill the rest into overflow pages, the last one mostly empty; a
/// rowid table keeps that remainder on the leaf (3.08 MB instead of 3.9 MB
/// for 500 deltas of 5.5 KB).
const INLINE: &str = "
CREATE TABLE deltas (bytes BLOB NOT NULL);
ALTER TABLE commits ADD COLUMN delta INTEGER;
";

/// Eviction with metadata kept: a commit whose delta artifact an eviction
/// dropped records the compaction or snapshot to materialize from instead.
const EVICTED: &str = "
ALTER TABLE commits ADD COLUMN evicted_by TEXT;
";

/// Inline deltas packed: `codec` says how a row's `bytes` are stored
/// (`store::packed`: 0 raw, 1 LZ4 with the length before it, 2 zstd with
/// the length before it, written since issue 25). Rows written before are
/// raw.
const PACKED: &str = "
ALTER TABLE deltas ADD COLUMN codec INTEGER NOT NULL DEFAULT 0;
";

/// Slim bodies: a commit row's JSON `body` no longer repeats what its
/// columns hold (id, parent, lineage, depth, time, session, summary,
/// artifact: ~0.35 KB of ~0.65), see `row`; each existing body is
/// rewritten without the fields its columns reproduce exactly.
const SLIM: Step = Step::Code(super::commits::slim_bodies);

/// A commit's children without an index of every commit by parent: a
/// child that continues its parent's run is the row after it in
/// `commits_by_lineage`; only the starts of forks (a run of their own,
/// `lineage = id`) are indexed by parent. One random-keyed index entry
/// less per checkpoint: ~0.1 KB at rest and a B-tree page less to write.
const FORKS: &str = "
DROP INDEX commits_by_parent;
CREATE INDEX commits_forks ON commits (tenant, parent) WHERE lineage = id AND parent IS NOT NULL;
";

/// Memories of folded branches (`branch::memories`): the record (JSON in
/// `body`; kind and confidence as columns for the search's filters, the
/// extraction time for the newest-first listing) and an FTS5 index of its
/// title, description and content under the same rowid, with the tenant
/// beside them so that a search and a tenant's erase can filter by it.
const MEMORIES: &str = "
CREATE TABLE memories (
    tenant     TEXT NOT NULL,
    id         TEXT NOT NULL,
    created    INTEGER NOT NULL,
    confidence REAL NOT NULL,
    kind       TEXT NOT NULL,
    body       TEXT NOT NULL,
    UNIQUE (tenant, id)
);
CREATE INDEX memories_recent ON memories (tenant, created);
CREATE VIRTUAL TABLE memories_fts USING fts5(
    title, description, content, tenant UNINDEXED, tokenize = 'unicode61'
);
";

/// One migration step: SQL, or code for what SQL cannot say.
enum Step {
    Sql(&'static str),
    Code(fn(&Connection) -> Result<()>),
}

impl Step {
    fn run(&self, conn: &Connection) -> Result<()> {
        match self {
            Step::Sql(sql_text) => conn.execute_batch(sql_text).map_err(sql),
            Step::Code(f) => f(conn),
        }
    }
}

/// The migration steps, in order: step `n` goes from version `n` to `n + 1`.
const MIGRATIONS: &[Step] = &[
    Step::Sql(V1),
    Step::Sql(V2),
    Step::Sql(CACHE),
    Step::Sql(AGENTS),
    Step::Sql(LIFECYCLE),
    Step::Sql(INLINE),
    Step::Sql(EVICTED),
    Step::Sql(PACKED),
    SLIM,
    Step::Sql(FORKS),
    Step::Sql(MEMORIES),
];

const _: () = assert!(MIGRATIONS.len() == VERSION as usize);

/// The version `conn`'s database records.
///
/// # Errors
/// `Unavailable` when it cannot be read.
pub fn version(conn: &Connection) -> Result<u32> {
    let v: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(sql)?;
    // user_version is a signed 32-bit value; a negative one is as foreign
    // as a too-large one.
    Ok(u32::try_from(v).unwrap_or(u32::MAX))
}

/// Brings the database of `conn` (the file `path`, named in errors) to
/// [`VERSION`], in one `BEGIN IMMEDIATE` transaction so that processes
/// opening it at once migrate it once.
///
/// # Errors
/// `Invalid` (field `data_dir`) when the database is of a newer version
/// than this build knows; `Unavailable` when SQLite fails.
pub fn migrate(conn: &mut Connection, path: &Path) -> Result<()> {
    if version(conn)? == VERSION {
        return Ok(());
    }
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql)?;
    let from = version(&tx)?;
    if from > VERSION {
        return Err(Error::invalid(
            "data_dir",
            format!(
                "{} has schema version {from}, newer than this build of ctx knows \
                 (up to {VERSION}): run a newer ctx on it, or use another data directory",
                path.display()
            ),
        ));
    }
    for step in &MIGRATIONS[from as usize..] {
        step.run(&tx)?;
    }
    tx.pragma_update(None, "user_version", VERSION)
        .map_err(sql)?;
    tx.commit().map_err(sql)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::branch::BranchStore;
    use crate::id::{Hash, TenantId};
    use crate::store::Commits;
    use crate::store::Lifecycle;
    use crate::store::conformance::{self, t};
    use crate::store::local::{SqliteBranchStore, SqliteMetaStore};
    use crate::store::{MetaStore, SummaryQueue, TokenStore};

    /// The tables as the stores created them before the schema carried a
    /// version (the meta store's, then the branch store's), frozen here:
    /// databases like this exist and must keep opening.
    const UNVERSIONED: &str = "
    CREATE TABLE IF NOT EXISTS commits (tenant TEXT NOT NULL, id TEXT NOT NULL, lineage TEXT NOT NULL,
        depth INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (tenant, id)) WITHOUT ROWID;
    CREATE UNIQUE INDEX IF NOT EXISTS commits_by_lineage ON commits (tenant, lineage, depth);
    CREATE TABLE IF NOT EXISTS timeline (tenant TEXT NOT NULL, principal TEXT NOT NULL,
        ts INTEGER NOT NULL, id TEXT NOT NULL, PRIMARY KEY (tenant, principal, ts, id)) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS refs (tenant TEXT NOT NULL, name TEXT NOT NULL, target TEXT NOT NULL,
        updated_at INTEGER NOT NULL, PRIMARY KEY (tenant, name)) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS materialized (tenant TEXT NOT NULL, commit_id TEXT NOT NULL,
        stop TEXT NOT NULL, format TEXT NOT NULL, body TEXT NOT NULL,
        PRIMARY KEY (tenant, commit_id, stop, format)) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS tokens (hash TEXT PRIMARY KEY, id TEXT NOT NULL UNIQUE,
        tenant TEXT NOT NULL, created_at INTEGER NOT NULL);
    CREATE TABLE IF NOT EXISTS branches (tenant TEXT NOT NULL, id TEXT NOT NULL, session TEXT NOT NULL,
        status TEXT NOT NULL, deadline INTEGER NOT NULL, body TEXT NOT NULL,
        PRIMARY KEY (tenant, id)) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS branches_active ON branches (status, tenant, session);
    CREATE TABLE IF NOT EXISTS branch_sessions (tenant TEXT NOT NULL, session TEXT NOT NULL,
        owner TEXT NOT NULL, PRIMARY KEY (tenant, session)) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS branch_windows (tenant TEXT NOT NULL, session TEXT NOT NULL,
        window INTEGER NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (tenant, session, window)) WITHOUT ROWID;
    ";

    /// Every table and index of the database, by name, as SQL.
    fn dump(path: &Path) -> Vec<(String, String)> {
        let conn = Connection::open(path).unwrap();
        let mut stmt = conn
            .prepare("SELECT name, type FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name")
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    fn version_of(path: &Path) -> u32 {
        version(&Connection::open(path).unwrap()).unwrap()
    }

    #[tokio::test]
    async fn a_new_database_is_created_at_the_current_version() {
        let dir = tempfile::tempdir().unwrap();
        SqliteMetaStore::open(dir.path()).unwrap();
        let path = dir.path().join("ctx.db");
        assert_eq!(version_of(&path), VERSION);
        let names: Vec<String> = dump(&path).into_iter().map(|(n, _)| n).collect();
        assert_eq!(
            names,
            [
                "agent_saves",
                "agents",
                "branch_sessions",
                "branch_windows",
                "branches",
                "branches_active",
                "commits",
                "commits_by_artifact",
                "commits_by_lineage",
                "commits_by_session",
                "commits_forks",
                "commits_missing_summary",
                "deltas",
                "materialized",
                "materialized_by_artifact",
                "materialized_lru",
                "memories",
                "memories_fts",
                "memories_fts_config",
                "memories_fts_content",
                "memories_fts_data",
                "memories_fts_docsize",
                "memories_fts_idx",
                "memories_recent",
                "pins",
                "refs",
                "timeline",
                "tokens"
            ]
        );
        // The branch store on the same file finds it current.
        SqliteBranchStore::open(dir.path()).unwrap();
        assert_eq!(version_of(&path), VERSION);
        let vacuum: i64 = Connection::open(&path)
            .unwrap()
            .pragma_query_value(None, "auto_vacuum", |r| r.get(0))
            .unwrap();
        assert_eq!(vacuum, 2, "incremental auto-vacuum from the start");
    }

    #[tokio::test]
    async fn an_unversioned_database_is_migrated_with_its_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ctx.db");
        let tenant: TenantId = "t".parse().unwrap();
        let c = conformance::commit(&tenant, None, t(0), "p", b"old");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(UNVERSIONED).unwrap();
            conn.execute(
                "INSERT INTO commits (tenant, id, lineage, depth, body) VALUES (?1, ?2, ?3, 0, ?4)",
                rusqlite::params![
                    "t",
                    c.id.to_string(),
                    c.id.to_string(),
                    serde_json::to_string(&c).unwrap()
                ],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO materialized (tenant, commit_id, stop, format, body)
                 VALUES ('t', ?1, 'root', 'raw', ?2)",
                rusqlite::params![
                    c.id.to_string(),
                    format!(
                        r#"{{"artifact_ref":"{}","size":3,"message_count":1,"token_count":1,"tier":"native"}}"#,
                        c.artifact_ref
                    )
                ],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO tokens (hash, id, tenant, created_at) VALUES (?1, 'tok-1', 't', 0)",
                [Hash::of(b"secret").to_hex()],
            )
            .unwrap();
        }
        let before = dump(&path);
        assert_eq!(version_of(&path), 0);
        let meta = SqliteMetaStore::open(dir.path()).unwrap();
        assert_eq!(version_of(&path), VERSION);
        let after = dump(&path);
        assert!(
            before.iter().all(|t| after.contains(t)),
            "no table dropped: {after:?}"
        );
        assert_eq!(
            after.len(),
            before.len() + 18,
            "the summary index, the cache's two indexes, the two agent tables, the three lifecycle indexes, pins, deltas, and the memories' table, index, FTS5 table and its five shadow tables added"
        );
        // The lifecycle columns were filled from the body.
        assert_eq!(
            meta.artifact_users(&tenant, &c.artifact_ref, 10)
                .await
                .unwrap(),
            vec![
                crate::store::ArtifactUser::Commit(c.id),
                crate::store::ArtifactUser::Cached(crate::store::MaterializeKey {
                    commit: c.id,
                    stop: crate::commit::Stop::Root,
                    format: crate::format::FormatId::raw(),
                }),
            ],
            "the commit and its cache entry, found by the columns the migrations filled"
        );
        assert_eq!(
            meta.get_commit(&tenant, &c.id).await.unwrap(),
            Some(c.clone())
        );
        // The migrated commit lacks a summary: it is in the queue, at its time.
        let (size, artifact, vacuum): (i64, String, i64) = {
            let conn = Connection::open(&path).unwrap();
            let (size, artifact) = conn
                .query_row("SELECT size, artifact FROM materialized", [], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .unwrap();
            let vacuum = conn
                .pragma_query_value(None, "auto_vacuum", |r| r.get(0))
                .unwrap();
            (size, artifact, vacuum)
        };
        assert_eq!(
            (size, artifact),
            (3, c.artifact_ref.to_string()),
            "cache columns filled"
        );
        assert_eq!(vacuum, 2, "rewritten once into incremental auto-vacuum");
        assert_eq!(
            meta.references(&tenant).await.unwrap().cached,
            [c.artifact_ref].into()
        );
        let page = meta.missing_summaries(&tenant, None, 10).await.unwrap();
        assert_eq!(page.items.len(), 1);
        assert_eq!(page.items[0].commit, c);
        let ts: i64 = Connection::open(&path)
            .unwrap()
            .query_row("SELECT ts FROM commits", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ts, c.created_at.timestamp_micros());
        assert_eq!(
            meta.tenant_for(&Hash::of(b"secret")).await.unwrap(),
            Some(tenant.clone())
        );
        let branches = SqliteBranchStore::open(dir.path()).unwrap();
        assert!(
            branches
                .active_branches(&tenant, "s")
                .await
                .unwrap()
                .is_empty()
        );
    }

    #[tokio::test]
    async fn a_database_holding_only_the_meta_tables_gains_the_branch_tables() {
        // Before branches existed, only the meta store wrote ctx.db.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ctx.db");
        let meta_only = &UNVERSIONED[..UNVERSIONED
            .find("CREATE TABLE IF NOT EXISTS branches")
            .unwrap()];
        Connection::open(&path)
            .unwrap()
            .execute_batch(meta_only)
            .unwrap();
        SqliteBranchStore::open(dir.path()).unwrap();
        assert_eq!(version_of(&path), VERSION);
        assert_eq!(dump(&path).len(), 28);
    }

    #[tokio::test]
    async fn inline_deltas_written_before_packing_read_as_raw() {
        // A version 7 database (before `deltas.codec`) holding an inline
        // delta that would compress: after the migration it reads back as
        // it was stored, and a new one is packed beside it.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ctx.db");
        let tenant: TenantId = "t".parse().unwrap();
        let old = b"an old turn, an old turn, an old turn, an old turn. ".repeat(40);
        let c = conformance::commit(&tenant, None, t(0), "p", &old);
        {
            let mut conn = Connection::open(&path).unwrap();
            let tx = conn.transaction().unwrap();
            for step in &MIGRATIONS[..7] {
                step.run(&tx).unwrap();
            }
            tx.pragma_update(None, "user_version", 7).unwrap();
            tx.execute("INSERT INTO deltas (bytes) VALUES (?1)", [&old[..]])
                .unwrap();
            tx.execute(
                "INSERT INTO commits (tenant, id, lineage, depth, body, artifact, delta)
                 VALUES ('t', ?1, ?1, 0, ?2, ?3, 1)",
                rusqlite::params![
                    c.id.to_string(),
                    serde_json::to_string(&c).unwrap(),
                    c.artifact_ref.to_string()
                ],
            )
            .unwrap();
            tx.commit().unwrap();
        }
        let meta = SqliteMetaStore::open(dir.path()).unwrap();
        assert_eq!(version_of(&path), VERSION);
        let got = meta.get_commit(&tenant, &c.id).await.unwrap().unwrap();
        assert_eq!(got.inline.as_deref(), Some(&old[..]), "read as raw");
        let mut expected = c.clone();
        expected.inline = got.inline.clone();
        assert_eq!(got, expected, "every field as it was");
        // The body was slimmed to what its columns do not reproduce: this
        // row was written without `ts`, so its time stays in the body.
        let body: String = Connection::open(&path)
            .unwrap()
            .query_row("SELECT body FROM commits", [], |r| r.get(0))
            .unwrap();
        assert!(body.contains("created_at"), "{body}");
        for gone in ["\"id\"", "artifact_ref", "\"lineage\"", "\"depth\""] {
            assert!(!body.contains(gone), "{gone} in {body}");
        }
        let mut new = conformance::commit(&tenant, Some(&c), t(1), "p", &old);
        new.inline = Some(old.clone().into());
        meta.put_commit(&tenant, &new, None).await.unwrap();
        let rows: Vec<(i64, i64)> = Connection::open(&path)
            .unwrap()
            .prepare("SELECT length(bytes), codec FROM deltas ORDER BY rowid")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(rows[0], (old.len() as i64, 0), "the old row as it was");
        assert_eq!(
            rows[1].1,
            i64::from(crate::store::packed::Compression::Zstd.code()),
            "the new row packed"
        );
        assert!(rows[1].0 < old.len() as i64 / 4, "{rows:?}");
        let run = meta.lineage_run(&tenant, &c.lineage, 1, 10).await.unwrap();
        assert_eq!(run.len(), 2);
        assert!(run.iter().all(|c| c.inline.as_deref() == Some(&old[..])));
    }

    #[tokio::test]
    async fn every_body_of_a_version_8_database_is_slimmed_and_reads_as_it_was() {
        // 2,500 commits over two tenants (the step rewrites 1,000 rows a
        // batch), with every field a column could hold, one fork.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ctx.db");
        let mut all: Vec<(TenantId, crate::commit::Commit)> = Vec::new();
        for (tenant, n) in [("a", 1_300), ("b", 1_200)] {
            let tenant: TenantId = tenant.parse().unwrap();
            let mut prev: Option<crate::commit::Commit> = None;
            for i in 0..n {
                let mut c = conformance::commit(
                    &tenant,
                    prev.as_ref(),
                    t(i),
                    "p",
                    format!("turn {i}").as_bytes(),
                );
                c.session_id = Some(format!("s{}", i / 100).parse().expect("a session id"));
                if i % 7 == 0 {
                    c.summary = Some(format!("summary {i}"));
                }
                if i == 5 {
                    c.lineage = c.id;
                }
                all.push((tenant.clone(), c.clone()));
                prev = Some(c);
            }
        }
        {
            let mut conn = Connection::open(&path).unwrap();
            let tx = conn.transaction().unwrap();
            for step in &MIGRATIONS[..8] {
                step.run(&tx).unwrap();
            }
            tx.pragma_update(None, "user_version", 8).unwrap();
            for (tenant, c) in &all {
                tx.execute(
                    "INSERT INTO commits (tenant, id, lineage, depth, body, ts, summary, session, parent, artifact)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                    rusqlite::params![
                        tenant.as_str(),
                        c.id.to_string(),
                        c.lineage.to_string(),
                        c.depth as i64,
                        serde_json::to_string(c).unwrap(),
                        c.created_at.timestamp_micros(),
                        c.summary,
                        c.session_id.as_ref().map(|s| s.as_str()),
                        c.parent.map(|p| p.to_string()),
                        c.artifact_ref.to_string()
                    ],
                )
                .unwrap();
            }
            tx.commit().unwrap();
        }
        let meta = SqliteMetaStore::open(dir.path()).unwrap();
        assert_eq!(version_of(&path), VERSION);
        for (tenant, c) in &all {
            assert_eq!(
                meta.get_commit(tenant, &c.id).await.unwrap().as_ref(),
                Some(c)
            );
        }
        let longest: i64 = Connection::open(&path)
            .unwrap()
            .query_row("SELECT max(length(body)) FROM commits", [], |r| r.get(0))
            .unwrap();
        assert!(
            longest < 250,
            "every body slimmed: the longest is {longest} bytes"
        );
        // The fork keeps its parent's lineage; its child is found.
        let (tenant, fork) = &all[5];
        assert!(fork.parent_lineage.is_some_and(|pl| pl != fork.lineage));
        let children = meta.child_commits(tenant, &fork.id).await.unwrap();
        assert_eq!(
            children.iter().map(|c| c.id).collect::<Vec<_>>(),
            vec![all[6].1.id]
        );
    }

    #[test]
    fn a_newer_database_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ctx.db");
        Connection::open(&path)
            .unwrap()
            .pragma_update(None, "user_version", VERSION + 1)
            .unwrap();
        for e in [
            SqliteMetaStore::open(dir.path()).unwrap_err(),
            SqliteBranchStore::open(dir.path()).unwrap_err(),
        ] {
            assert_eq!(e.kind, crate::ErrorKind::Invalid, "{e}");
            assert_eq!(e.field.as_deref(), Some("data_dir"));
            assert!(
                e.message
                    .contains(&format!("schema version {}", VERSION + 1)),
                "{}",
                e.message
            );
            assert!(e.message.contains("ctx.db"), "{}", e.message);
        }
        assert_eq!(version_of(&path), VERSION + 1, "left untouched");
    }

    #[test]
    fn the_schema_of_this_version_is_pinned() {
        // A change to the tables must come with a new migration step and
        // version; this snapshot changing is the reminder.
        let dir = tempfile::tempdir().unwrap();
        SqliteMetaStore::open(dir.path()).unwrap();
        let conn = Connection::open(dir.path().join("ctx.db")).unwrap();
        let mut stmt = conn
            .prepare("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name")
            .unwrap();
        let sql: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        insta::assert_snapshot!(format!("sqlite_schema_v{VERSION}"), sql.join(";\n"));
    }
}
