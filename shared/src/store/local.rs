//! The embedded backends: artifacts as files in a content-addressed tree,
//! metadata in SQLite (WAL mode, `synchronous=FULL`).
//!
//! Layout under the data directory:
//! - `cas/<tenant>/<2 hex>/<64 hex>`: artifacts, written to `tmp/` first,
//!   fsynced, renamed into place, and the directory fsynced;
//! - `ctx.db`: commits, lineages, timelines, refs, the materialization cache
//!   and token hashes.
//!
//! An artifact is durable before the commit that names it, and a commit,
//! its timeline entry and its ref move are one SQLite transaction, so a
//! crash at any point leaves no commit without its artifact and no ref to a
//! missing commit.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::{
    BlobStore, MaterializeKey, Materialized, MetaStore, MetadataPatch, PutBlob, PutCommit, RefMove,
    RefRecord, TokenRecord, TokenStore, ref_conflict, token_id,
};
use crate::clock::micros_to_time;
use crate::commit::Commit;
use crate::error::{Error, Result};
use crate::id::{ArtifactRef, CommitId, Hash, Principal, RefName, TenantId};

/// Private errors of the local backends, converted into [`Error`].
#[derive(Debug, thiserror::Error)]
enum LocalError {
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("filesystem: {0}")]
    Io(#[from] std::io::Error),
    #[error("stored commit is not valid JSON: {0}")]
    Decode(#[from] serde_json::Error),
    #[error("blocking task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

impl From<LocalError> for Error {
    fn from(e: LocalError) -> Self {
        match &e {
            LocalError::Decode(_) => Error::internal(e.to_string()).with_source(e),
            _ => Error::unavailable(format!("local storage failed: {e}")).with_source(e),
        }
    }
}

/// Runs blocking storage work off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, LocalError> + Send + 'static,
) -> Result<T> {
    Ok(tokio::task::spawn_blocking(f)
        .await
        .map_err(LocalError::from)??)
}

/// Artifacts as files: `cas/<tenant>/<2 hex>/<64 hex>`.
#[derive(Debug)]
pub struct LocalBlobStore {
    root: PathBuf,
    tmp_seq: AtomicU64,
}

impl LocalBlobStore {
    /// A store under `data_dir`, creating its directories.
    ///
    /// # Errors
    /// `Unavailable` when the directories cannot be created.
    pub fn open(data_dir: &Path) -> Result<Self> {
        fs::create_dir_all(data_dir.join("cas")).map_err(LocalError::from)?;
        fs::create_dir_all(data_dir.join("tmp")).map_err(LocalError::from)?;
        Ok(LocalBlobStore {
            root: data_dir.to_owned(),
            tmp_seq: AtomicU64::new(0),
        })
    }

    /// Where an artifact lives.
    pub fn path_of(&self, tenant: &TenantId, artifact: &ArtifactRef) -> PathBuf {
        let hex = artifact.hash().to_hex();
        self.root
            .join("cas")
            .join(tenant.as_str())
            .join(&hex[..2])
            .join(hex)
    }
}

fn fsync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

#[async_trait]
impl BlobStore for LocalBlobStore {
    async fn put(&self, tenant: &TenantId, bytes: Bytes) -> Result<PutBlob> {
        let artifact = ArtifactRef::of(&bytes);
        let size = bytes.len() as u64;
        let path = self.path_of(tenant, &artifact);
        let tmp = self.root.join("tmp").join(format!(
            "{}.{}.{}",
            artifact.hash().to_hex(),
            std::process::id(),
            self.tmp_seq.fetch_add(1, Ordering::Relaxed)
        ));
        let created = blocking(move || {
            if path.exists() {
                return Ok(false);
            }
            let dir = path.parent().expect("artifact paths have a parent");
            fs::create_dir_all(dir)?;
            let mut f = File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            drop(f);
            // A hard link is an atomic create-only publish: of concurrent
            // writers of one artifact exactly one creates it.
            let linked = fs::hard_link(&tmp, &path);
            fs::remove_file(&tmp)?;
            match linked {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
                Err(e) => return Err(e.into()),
            }
            fsync_dir(dir)?;
            Ok(true)
        })
        .await?;
        Ok(PutBlob {
            artifact,
            size,
            created,
        })
    }

    async fn read(&self, tenant: &TenantId, artifact: &ArtifactRef) -> Result<Option<Bytes>> {
        let path = self.path_of(tenant, artifact);
        blocking(move || match fs::read(&path) {
            Ok(b) => Ok(Some(Bytes::from(b))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        })
        .await
    }

    async fn size(&self, tenant: &TenantId, artifact: &ArtifactRef) -> Result<Option<u64>> {
        let path = self.path_of(tenant, artifact);
        blocking(move || match fs::metadata(&path) {
            Ok(m) => Ok(Some(m.len())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        })
        .await
    }
}

const SCHEMA: &str = "
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
";

/// How hard commits are pushed to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous=FULL`: an acknowledged write survives power loss.
    Full,
    /// `synchronous=OFF`: for bulk loads in benchmarks only.
    Off,
}

const READERS: usize = 4;

/// Metadata in SQLite: one writer connection and a few readers (WAL lets
/// them read while it writes).
#[derive(Debug, Clone)]
pub struct SqliteMetaStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    writer: Mutex<Connection>,
    readers: Vec<Mutex<Connection>>,
    next_reader: AtomicUsize,
}

fn open_conn(path: &Path, durability: Durability) -> Result<Connection, LocalError> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(
        None,
        "synchronous",
        match durability {
            Durability::Full => "FULL",
            Durability::Off => "OFF",
        },
    )?;
    Ok(conn)
}

fn lock(m: &Mutex<Connection>) -> std::sync::MutexGuard<'_, Connection> {
    // A connection is left consistent by SQLite even if a holder panicked.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl SqliteMetaStore {
    /// Opens (creating if needed) `data_dir/ctx.db` with full durability.
    ///
    /// # Errors
    /// `Unavailable` when the database cannot be opened.
    pub fn open(data_dir: &Path) -> Result<Self> {
        Self::open_with(data_dir, Durability::Full)
    }

    /// Opens with the given durability.
    ///
    /// # Errors
    /// `Unavailable` when the database cannot be opened.
    pub fn open_with(data_dir: &Path, durability: Durability) -> Result<Self> {
        fs::create_dir_all(data_dir).map_err(LocalError::from)?;
        let path = data_dir.join("ctx.db");
        let writer = open_conn(&path, durability)?;
        writer.execute_batch(SCHEMA).map_err(LocalError::from)?;
        let readers = (0..READERS)
            .map(|_| open_conn(&path, durability).map(Mutex::new))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SqliteMetaStore {
            inner: Arc::new(Inner {
                writer: Mutex::new(writer),
                readers,
                next_reader: AtomicUsize::new(0),
            }),
        })
    }

    async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || f(&mut lock(&inner.writer)))
            .await
            .map_err(LocalError::from)?
    }

    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, LocalError> + Send + 'static,
    ) -> Result<T> {
        let inner = self.inner.clone();
        blocking(move || {
            let i = inner.next_reader.fetch_add(1, Ordering::Relaxed) % inner.readers.len();
            f(&lock(&inner.readers[i]))
        })
        .await
    }
}

fn sql(e: rusqlite::Error) -> Error {
    LocalError::from(e).into()
}

fn decode_commit(body: &str) -> Result<Commit, LocalError> {
    Ok(serde_json::from_str(body)?)
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

fn get_commit_in(
    conn: &Connection,
    tenant: &TenantId,
    id: &CommitId,
) -> Result<Option<Commit>, LocalError> {
    let body: Option<String> = conn
        .prepare_cached("SELECT body FROM commits WHERE tenant = ?1 AND id = ?2")?
        .query_row(params![tenant.as_str(), id.to_string()], |r| r.get(0))
        .optional()?;
    body.map(|b| decode_commit(&b)).transpose()
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
        self.write(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql)?;
            if let Some(existing) = get_commit_in(&tx, &tenant, &commit.id)? {
                return Ok(PutCommit::Existing(existing));
            }
            if let Some(mv) = &ref_move {
                cas_ref_in(&tx, &tenant, &mv.name, mv.expected.as_ref(), &commit.id, commit.created_at)?;
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
            let body = serde_json::to_string(&stored)
                .map_err(|e| Error::internal(format!("cannot encode commit: {e}")))?;
            tx.execute(
                "INSERT INTO commits (tenant, id, lineage, depth, body) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    tenant.as_str(),
                    stored.id.to_string(),
                    stored.lineage.to_string(),
                    stored.depth as i64,
                    body
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
            tx.commit().map_err(sql)?;
            Ok(PutCommit::Created(stored))
        })
        .await
    }

    async fn get_commit(&self, tenant: &TenantId, id: &CommitId) -> Result<Option<Commit>> {
        let (tenant, id) = (tenant.clone(), *id);
        self.read(move |conn| get_commit_in(conn, &tenant, &id))
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
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT body FROM commits WHERE tenant = ?1 AND lineage = ?2 AND depth <= ?3
                 ORDER BY depth DESC LIMIT ?4",
            )?;
            let rows = stmt.query_map(
                params![
                    tenant.as_str(),
                    lineage.to_string(),
                    max_depth.min(i64::MAX as u64) as i64,
                    limit.min(i64::MAX as usize) as i64
                ],
                |r| r.get::<_, String>(0),
            )?;
            rows.map(|b| decode_commit(&b?)).collect()
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
        self.write(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql)?;
            let Some(mut c) = get_commit_in(&tx, &tenant, &id)? else {
                return Ok(None);
            };
            if let Some(s) = patch.summary {
                c.summary = s;
            }
            if let Some(t) = patch.tags {
                c.tags = t;
            }
            let body = serde_json::to_string(&c)
                .map_err(|e| Error::internal(format!("cannot encode commit: {e}")))?;
            tx.execute(
                "UPDATE commits SET body = ?3 WHERE tenant = ?1 AND id = ?2",
                params![tenant.as_str(), id.to_string(), body],
            )
            .map_err(sql)?;
            tx.commit().map_err(sql)?;
            Ok(Some(c))
        })
        .await
    }

    async fn get_ref(&self, tenant: &TenantId, name: &RefName) -> Result<Option<RefRecord>> {
        let (tenant, name) = (tenant.clone(), name.clone());
        let row: Option<(String, i64)> = self
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
        self.write(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql)?;
            let rec = cas_ref_in(&tx, &tenant, &name, expected.as_ref(), &target, now)?;
            tx.commit().map_err(sql)?;
            Ok(rec)
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
        self.read(move |conn| {
            let body: Option<String> = conn
                .prepare_cached(
                    "SELECT body FROM materialized
                     WHERE tenant = ?1 AND commit_id = ?2 AND stop = ?3 AND format = ?4",
                )?
                .query_row(
                    params![
                        tenant.as_str(),
                        key.commit.to_string(),
                        key.stop,
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
        self.write(move |conn| {
            conn.execute(
                "INSERT OR REPLACE INTO materialized (tenant, commit_id, stop, format, body)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    tenant.as_str(),
                    key.commit.to_string(),
                    key.stop,
                    key.format.as_str(),
                    body
                ],
            )
            .map_err(sql)?;
            Ok(())
        })
        .await
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
        let rec = TokenRecord {
            id: token_id(hash),
            tenant: tenant.clone(),
            created_at: now,
        };
        let (hash, r) = (*hash, rec.clone());
        self.write(move |conn| {
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
        self.write(move |conn| {
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
    use crate::store::BlobStoreExt;
    use crate::store::conformance;

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn local_backends_conform() {
        let dir = tempfile::tempdir().unwrap();
        let meta = SqliteMetaStore::open(dir.path()).unwrap();
        conformance::run_all(&LocalBlobStore::open(dir.path()).unwrap(), &meta, &meta).await;
    }

    #[tokio::test]
    async fn a_corrupted_artifact_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = LocalBlobStore::open(dir.path()).unwrap();
        let t: TenantId = "t".parse().unwrap();
        let put = blobs.put(&t, Bytes::from_static(b"hello")).await.unwrap();
        fs::write(blobs.path_of(&t, &put.artifact), b"hellO").unwrap();
        let e = blobs.get(&t, &put.artifact).await.unwrap_err();
        assert_eq!(e.kind, crate::ErrorKind::Internal);
        assert!(e.message.contains("failed verification"), "{}", e.message);
    }

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
}
