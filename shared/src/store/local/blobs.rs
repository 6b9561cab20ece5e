//! Artifacts as files: `cas/<tenant>/<2 hex>/<64 hex>` under the data
//! directory (cached results under `cache/`, the same way), each written
//! to `tmp/`, fsynced, published by a hard link (an atomic create-only
//! step) and its directory fsynced. A file's mtime is when it was last
//! written or put again: the garbage collector's grace period reads it.
//!
//! Cached results (materializations, rebuildable) are written and
//! published the same way but never fsynced: after a power loss one may be
//! missing, empty, short or garbled. Every reader verifies them against
//! their hash and treats a bad one as a miss (see
//! [`BlobStoreExt::get`](crate::store::BlobStoreExt::get) and the
//! materialize cache), and a put over a bad one replaces it.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use bytes::Bytes;

use chrono::{DateTime, Utc};

use tracing::Instrument as _;

use super::{LocalError, blocking, blocking_read};
use crate::error::Result;
use crate::id::{ArtifactRef, TenantId};
use crate::store::{BlobArea, BlobInfo, BlobStore, PutBlob, durable_remove_refused};
use crate::telemetry::store_span;

/// Artifacts as files: `cas/<tenant>/<2 hex>/<64 hex>`.
#[derive(Debug)]
pub struct LocalBlobStore {
    root: PathBuf,
    tmp_seq: AtomicU64,
    /// Puts and touches hold it shared, the collector's sweep exclusively:
    /// an artifact written or touched is never swept on a stale age.
    gate: Arc<RwLock<()>>,
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
            gate: Arc::default(),
        })
    }

    /// Where an artifact lives.
    pub fn path_of(&self, tenant: &TenantId, artifact: &ArtifactRef) -> PathBuf {
        self.path_in(tenant, BlobArea::Durable, artifact)
            .expect("the durable area exists")
    }

    /// The directory of a tenant's `area`; `None` for the staging area,
    /// which the embedded store does not have.
    fn area_dir(&self, tenant: &TenantId, area: BlobArea) -> Option<PathBuf> {
        let top = match area {
            BlobArea::Durable => "cas",
            BlobArea::Cache => "cache",
            BlobArea::Staged => return None,
        };
        Some(self.root.join(top).join(tenant.as_str()))
    }

    /// Where an artifact lives in `area` (`None` for the staging area).
    pub fn path_in(
        &self,
        tenant: &TenantId,
        area: BlobArea,
        artifact: &ArtifactRef,
    ) -> Option<PathBuf> {
        let hex = artifact.hash().to_hex();
        Some(self.area_dir(tenant, area)?.join(&hex[..2]).join(hex))
    }

    /// The paths of `artifact` in `areas` (those this store has), in
    /// order.
    fn find(&self, tenant: &TenantId, areas: &[BlobArea], artifact: &ArtifactRef) -> Vec<PathBuf> {
        areas
            .iter()
            .filter_map(|a| self.path_in(tenant, *a, artifact))
            .collect()
    }

    /// Stores `bytes`, whose reference is `artifact`, in `area`.
    async fn put_in(
        &self,
        tenant: &TenantId,
        area: BlobArea,
        artifact: ArtifactRef,
        bytes: Bytes,
    ) -> Result<PutBlob> {
        let size = bytes.len() as u64;
        let span = store_span("file", "put");
        span.record("bytes", size);
        let path = self
            .path_in(tenant, area, &artifact)
            .expect("puts go to areas the store has");
        let tmp = self.root.join("tmp").join(format!(
            "{}.{}.{}",
            artifact.hash().to_hex(),
            std::process::id(),
            self.tmp_seq.fetch_add(1, Ordering::Relaxed)
        ));
        let gate = self.gate.clone();
        // A cached result need not survive power loss: it is rebuilt when
        // it is missing or does not verify, so it is not fsynced.
        let durable = area == BlobArea::Durable;
        let created = blocking(move || {
            let _shared = gate.read().unwrap_or_else(|e| e.into_inner());
            if !durable {
                match fs::read(&path) {
                    // Written again: younger, so no collection sweeps it now.
                    Ok(old) if old == bytes => {
                        if touch(&path)? {
                            return Ok(false);
                        }
                    }
                    // Left short or garbled by a crash: replaced whole, in
                    // one atomic rename.
                    Ok(_) => {
                        write_file(&tmp, &bytes, false)?;
                        fs::rename(&tmp, &path)?;
                        return Ok(true);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e.into()),
                }
            } else if touch(&path)? {
                // Written again: younger, so no collection sweeps it again.
                return Ok(false);
            }
            let dir = path.parent().expect("artifact paths have a parent");
            fs::create_dir_all(dir)?;
            write_file(&tmp, &bytes, durable)?;
            // A hard link is an atomic create-only publish: of concurrent
            // writers of one artifact exactly one creates it.
            let linked = fs::hard_link(&tmp, &path);
            fs::remove_file(&tmp)?;
            match linked {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
                Err(e) => return Err(e.into()),
            }
            if durable {
                fsync_dir(dir)?;
            }
            Ok(true)
        })
        .instrument(span)
        .await?;
        Ok(PutBlob {
            artifact,
            size,
            created,
        })
    }
}

/// Creates `path` holding `bytes`, fsynced when `sync`.
fn write_file(path: &Path, bytes: &[u8], sync: bool) -> std::io::Result<()> {
    let mut f = File::create(path)?;
    f.write_all(bytes)?;
    if sync {
        f.sync_all()?;
    }
    Ok(())
}

/// Sets a file's mtime to now, as writing it would (the filesystem stamps
/// writes with the wall clock, so this reads it too); false when there is
/// no file.
#[allow(clippy::disallowed_methods)]
fn touch(path: &Path) -> std::io::Result<bool> {
    match File::options().write(true).open(path) {
        Ok(f) => {
            f.set_modified(std::time::SystemTime::now())?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// The listing entry of the file at `path` holding `artifact`.
fn info_of(artifact: ArtifactRef, meta: &fs::Metadata) -> std::io::Result<BlobInfo> {
    Ok(BlobInfo {
        artifact,
        size: meta.len(),
        modified: DateTime::<Utc>::from(meta.modified()?),
    })
}

/// The names in `dir`, sorted; none when it does not exist.
fn sorted_names(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut names = match fs::read_dir(dir) {
        Ok(rd) => rd
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<std::io::Result<Vec<_>>>()?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    names.sort();
    Ok(names)
}

fn fsync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Removes up to `limit` files under `dir` (a tenant's area: shard
/// directories of artifact files), then `dir` itself once it holds none;
/// how many files it removed. A missing `dir` removes nothing.
fn erase_dir(dir: &Path, limit: u64) -> std::io::Result<u64> {
    let shards = match fs::read_dir(dir) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let mut removed = 0u64;
    let mut left = false;
    for shard in shards {
        let shard = shard?.path();
        if !shard.is_dir() {
            if removed < limit {
                fs::remove_file(&shard)?;
                removed += 1;
            } else {
                left = true;
            }
            continue;
        }
        for file in fs::read_dir(&shard)? {
            if removed == limit {
                left = true;
                break;
            }
            match fs::remove_file(file?.path()) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        if !left {
            fs::remove_dir(&shard)?;
        }
    }
    if !left {
        fs::remove_dir(dir)?;
        if let Some(parent) = dir.parent() {
            fsync_dir(parent)?;
        }
    }
    Ok(removed)
}

#[async_trait]
impl BlobStore for LocalBlobStore {
    async fn put(&self, tenant: &TenantId, bytes: Bytes) -> Result<PutBlob> {
        self.put_in(tenant, BlobArea::Durable, ArtifactRef::of(&bytes), bytes)
            .await
    }

    async fn read(
        &self,
        tenant: &TenantId,
        areas: &[BlobArea],
        artifact: &ArtifactRef,
    ) -> Result<Option<Bytes>> {
        let paths = self.find(tenant, areas, artifact);
        let span = store_span("file", "read");
        let read = blocking_read(move || {
            for path in paths {
                match fs::read(&path) {
                    Ok(b) => return Ok(Some(Bytes::from(b))),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Ok(None)
        })
        .instrument(span.clone())
        .await;
        if let Ok(Some(b)) = &read {
            span.record("bytes", b.len() as u64);
        }
        read
    }

    async fn stat(
        &self,
        tenant: &TenantId,
        areas: &[BlobArea],
        artifact: &ArtifactRef,
    ) -> Result<Option<BlobInfo>> {
        let paths = self.find(tenant, areas, artifact);
        let artifact = *artifact;
        blocking_read(move || {
            for path in paths {
                match fs::metadata(&path) {
                    Ok(m) => return Ok(Some(info_of(artifact, &m)?)),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Ok(None)
        })
        .await
    }

    async fn put_cached_hashed(
        &self,
        tenant: &TenantId,
        artifact: ArtifactRef,
        bytes: Bytes,
    ) -> Result<PutBlob> {
        self.put_in(tenant, BlobArea::Cache, artifact, bytes).await
    }

    async fn list(
        &self,
        tenant: &TenantId,
        area: BlobArea,
        after: Option<&ArtifactRef>,
        limit: usize,
    ) -> Result<Vec<BlobInfo>> {
        let Some(dir) = self.area_dir(tenant, area) else {
            return Ok(Vec::new());
        };
        let after = after.map(|a| a.hash().to_hex());
        blocking(move || {
            let mut out = Vec::new();
            let first_shard = after.as_deref().map(|h| &h[..2]);
            for shard in sorted_names(&dir)? {
                if first_shard.is_some_and(|f| shard.as_str() < f) {
                    continue;
                }
                for name in sorted_names(&dir.join(&shard))? {
                    if after.as_deref().is_some_and(|a| name.as_str() <= a) {
                        continue;
                    }
                    // Anything that is not an artifact's name is not ours.
                    let Ok(artifact) = format!("art-{name}").parse::<ArtifactRef>() else {
                        continue;
                    };
                    match fs::metadata(dir.join(&shard).join(&name)) {
                        Ok(m) => out.push(info_of(artifact, &m)?),
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                        Err(e) => return Err(e.into()),
                    }
                    if out.len() >= limit {
                        return Ok(out);
                    }
                }
            }
            Ok(out)
        })
        .await
    }

    async fn touch(&self, tenant: &TenantId, artifact: &ArtifactRef) -> Result<Option<u64>> {
        let path = self.path_of(tenant, artifact);
        let gate = self.gate.clone();
        blocking(move || {
            let _shared = gate.read().unwrap_or_else(|e| e.into_inner());
            if !touch(&path)? {
                return Ok(None);
            }
            Ok(Some(fs::metadata(&path)?.len()))
        })
        .await
    }

    async fn sweep(
        &self,
        tenant: &TenantId,
        area: BlobArea,
        artifact: &ArtifactRef,
        cutoff: DateTime<Utc>,
    ) -> Result<bool> {
        let Some(path) = self.path_in(tenant, area, artifact) else {
            return Ok(false);
        };
        let gate = self.gate.clone();
        blocking(move || {
            let _exclusive = gate.write().unwrap_or_else(|e| e.into_inner());
            let modified = match fs::metadata(&path) {
                Ok(m) => DateTime::<Utc>::from(m.modified()?),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
                Err(e) => return Err(e.into()),
            };
            if modified >= cutoff {
                return Ok(false);
            }
            fs::remove_file(&path)?;
            fsync_dir(path.parent().expect("artifact paths have a parent"))?;
            Ok(true)
        })
        .await
    }

    async fn remove(
        &self,
        tenant: &TenantId,
        area: BlobArea,
        artifact: &ArtifactRef,
    ) -> Result<bool> {
        if area == BlobArea::Durable {
            return Err(durable_remove_refused());
        }
        let Some(path) = self.path_in(tenant, area, artifact) else {
            return Ok(false);
        };
        blocking(move || match fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e.into()),
        })
        .await
    }

    async fn erase_tenant(&self, tenant: &TenantId, limit: usize) -> Result<u64> {
        let dirs: Vec<PathBuf> = [BlobArea::Durable, BlobArea::Cache]
            .into_iter()
            .filter_map(|area| self.area_dir(tenant, area))
            .collect();
        let gate = self.gate.clone();
        blocking(move || {
            // No put or touch of this process runs meanwhile.
            let _exclusive = gate.write().unwrap_or_else(|e| e.into_inner());
            let mut removed = 0u64;
            for dir in dirs {
                let left = (limit as u64).saturating_sub(removed);
                if left == 0 {
                    break;
                }
                removed += erase_dir(&dir, left)?;
            }
            Ok(removed)
        })
        .await
    }

    async fn delete(&self, tenant: &TenantId, artifact: &ArtifactRef) -> Result<bool> {
        // Every area reads look in: a cached copy of the same bytes goes too.
        let paths = self.find(tenant, BlobArea::READABLE, artifact);
        blocking(move || {
            let mut removed = false;
            for path in paths {
                match fs::remove_file(&path) {
                    Ok(()) => {
                        // The removal is durable once its directory entry is.
                        fsync_dir(path.parent().expect("artifact paths have a parent"))?;
                        removed = true;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Ok(removed)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::BlobStoreExt;

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
    async fn a_short_or_garbled_cached_file_is_a_miss_and_the_next_put_replaces_it() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = LocalBlobStore::open(dir.path()).unwrap();
        let t: TenantId = "t".parse().unwrap();
        let bytes = Bytes::from_static(b"a materialized context\n");
        let put = blobs.put_cached(&t, bytes.clone()).await.unwrap();
        assert!(put.created);
        let path = blobs.path_in(&t, BlobArea::Cache, &put.artifact).unwrap();
        // As a crash can leave an unsynced file: short, then garbled.
        for bad in [&b"a materi"[..], &b"A materialized context\n"[..]] {
            fs::write(&path, bad).unwrap();
            assert_eq!(blobs.get_cached(&t, &put.artifact).await.unwrap(), None);
            assert!(!path.exists(), "the bad copy is removed");
            fs::write(&path, bad).unwrap();
            assert_eq!(blobs.get(&t, &put.artifact).await.unwrap(), None);
            assert!(!path.exists(), "the bad copy is removed");
            fs::write(&path, bad).unwrap();
            let again = blobs.put_cached(&t, bytes.clone()).await.unwrap();
            assert!(again.created, "a bad copy is written again, not kept");
            assert_eq!(fs::read(&path).unwrap(), bytes);
            assert_eq!(
                blobs.get_cached(&t, &put.artifact).await.unwrap(),
                Some(bytes.clone())
            );
        }
        // A good copy is kept as it is.
        assert!(!blobs.put_cached(&t, bytes.clone()).await.unwrap().created);
        // A garbled cached copy beside a good durable one: the durable one.
        blobs.put(&t, bytes.clone()).await.unwrap();
        fs::write(&path, b"A materialized context\n").unwrap();
        assert_eq!(blobs.get(&t, &put.artifact).await.unwrap(), Some(bytes));
    }
}
