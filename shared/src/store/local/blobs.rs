//! Artifacts as files: `cas/<tenant>/<2 hex>/<64 hex>` under the data
//! directory, each written to `tmp/`, fsynced, published by a hard link
//! (an atomic create-only step) and its directory fsynced.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;

use super::{LocalError, blocking};
use crate::error::Result;
use crate::id::{ArtifactRef, TenantId};
use crate::store::{BlobStore, PutBlob};

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

    async fn delete(&self, tenant: &TenantId, artifact: &ArtifactRef) -> Result<bool> {
        let path = self.path_of(tenant, artifact);
        blocking(move || match fs::remove_file(&path) {
            Ok(()) => {
                // The removal is durable once its directory entry is.
                fsync_dir(path.parent().expect("artifact paths have a parent"))?;
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e.into()),
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
}
