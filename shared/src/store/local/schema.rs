//! The tables of `ctx.db`: the meta store's (commits, lineages,
//! timelines, refs, the materialization cache, tokens) and the branch
//! store's (branches, their sessions and creation windows), created by
//! whichever store opens the database first.

/// Every table, created if missing.
pub(super) const SCHEMA: &str = "
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
