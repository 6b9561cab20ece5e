//! Artifact lifecycle: the materialization cache's LRU budget (embedded
//! stores) and garbage collection.
//!
//! Collection is a mark-and-sweep per tenant, one page of one
//! [`BlobArea`] at a time: list the page, then mark (every artifact a
//! commit or cache entry names, read *after* the listing, so whatever was
//! committed before the page was listed is seen), and sweep what is
//! unmarked and older than the grace period: durable artifacts no commit
//! names, cached ones no cache entry names, staged uploads nobody
//! promoted. Before removing anything the sweep marks again, and each
//! removal ([`BlobStore::sweep`](crate::store::BlobStore::sweep)) re-checks
//! the age atomically with the store's puts and touches. A checkpoint
//! makes its artifact young before it writes its commit (an inline delta
//! is put, and a put of existing bytes refreshes the time; a named
//! artifact is touched), so an artifact a checkpoint in flight needs is
//! never older than the grace period while that checkpoint runs.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::Service;
use crate::error::{Error, ErrorKind, Result};
use crate::id::{ArtifactRef, TenantId};
use crate::store::{BlobArea, BlobInfo, MaterializeKey, References};

/// The cache budget and the collector's grace period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LifecycleSettings {
    /// Bytes of cached materializations the store keeps (least recently
    /// used evicted past it); `None` for no budget (the aws store, whose
    /// cached artifacts expire by an S3 lifecycle rule).
    pub cache_budget: Option<u64>,
    /// Nothing younger is collected.
    pub gc_grace: Duration,
    /// How long the deployment's backups keep what an erase removed
    /// (`CTX_BACKUP_RETENTION_DAYS`: DynamoDB point-in-time recovery on
    /// AWS); `None` where nothing keeps a backup.
    pub backup_retention: Option<Duration>,
}

impl Default for LifecycleSettings {
    fn default() -> Self {
        LifecycleSettings {
            cache_budget: None,
            gc_grace: Duration::from_secs(crate::config::DEFAULT_GC_GRACE_SECS),
            backup_retention: None,
        }
    }
}

/// How often one cache entry's last use is written: coarse stamps, so a
/// hot entry costs one write a minute, not one per read.
const STAMP_EVERY_SECS: i64 = 60;

/// Entries whose stamps are remembered before the memory is cleared.
const STAMPS_KEPT: usize = 10_000;

/// The last time this process stamped each cache entry.
#[derive(Debug, Default)]
pub(super) struct CacheStamps(Mutex<HashMap<(TenantId, MaterializeKey), DateTime<Utc>>>);

impl CacheStamps {
    /// Whether the entry's use at `now` should be written (none written in
    /// the last minute by this process); records it if so.
    fn due(&self, tenant: &TenantId, key: &MaterializeKey, now: DateTime<Utc>) -> bool {
        let mut stamps = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let k = (tenant.clone(), key.clone());
        if stamps
            .get(&k)
            .is_some_and(|t| (now - *t).num_seconds() < STAMP_EVERY_SECS)
        {
            return false;
        }
        if stamps.len() >= STAMPS_KEPT {
            stamps.clear();
        }
        stamps.insert(k, now);
        true
    }
}

/// Artifacts listed per page of a collection when the caller names no
/// limit.
pub const GC_PAGE: usize = 1000;
/// The largest page a caller may ask for.
pub const GC_MAX_PAGE: usize = 10_000;

/// What one collection call is asked to do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcOptions {
    /// Report what would be removed; remove nothing.
    pub dry_run: bool,
    /// Where to continue (a report's `next`); the start when absent.
    pub cursor: Option<String>,
    /// Artifacts to look at in this call (default `GC_PAGE`, 1000).
    pub limit: Option<usize>,
}

/// One artifact a collection removed (or would remove).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcRemoved {
    /// The artifact.
    pub artifact: ArtifactRef,
    /// Where it was.
    pub area: BlobArea,
    /// Its size in bytes.
    pub size: u64,
}

/// What a collection call did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcReport {
    /// Nothing was removed: `removed` is what would have been.
    pub dry_run: bool,
    /// Artifacts looked at.
    pub scanned: u64,
    /// Kept because a commit or cache entry names them.
    pub referenced: u64,
    /// Kept because they are younger than the grace period.
    pub young: u64,
    /// Removed (or, in a dry run, to be removed).
    pub removed: Vec<GcRemoved>,
    /// Their bytes.
    pub removed_bytes: u64,
    /// Bytes the metadata store gave back to the filesystem afterwards
    /// (SQLite's incremental vacuum, after the last page).
    pub reclaimed_bytes: u64,
    /// Where the next call continues; absent after the last page.
    pub next: Option<String>,
}

impl GcReport {
    /// Adds a later page's counts to these.
    pub fn absorb(&mut self, page: GcReport) {
        self.scanned += page.scanned;
        self.referenced += page.referenced;
        self.young += page.young;
        self.removed.extend(page.removed);
        self.removed_bytes += page.removed_bytes;
        self.reclaimed_bytes += page.reclaimed_bytes;
        self.next = page.next;
    }
}

/// A position in a collection: an area and the last artifact looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cursor {
    area: BlobArea,
    after: Option<ArtifactRef>,
}

impl Cursor {
    const START: Cursor = Cursor {
        area: BlobArea::Durable,
        after: None,
    };

    fn parse(s: &str) -> Result<Cursor> {
        let bad = || Error::invalid("cursor", format!("cursor {s:?} is not one gc handed out"));
        let (area, after) = s.split_once('.').ok_or_else(bad)?;
        let area = match area {
            "durable" => BlobArea::Durable,
            "cache" => BlobArea::Cache,
            "staged" => BlobArea::Staged,
            _ => return Err(bad()),
        };
        let after = match after {
            "" => None,
            a => Some(a.parse().map_err(|_| bad())?),
        };
        Ok(Cursor { area, after })
    }

    fn render(self) -> String {
        let area = match self.area {
            BlobArea::Durable => "durable",
            BlobArea::Cache => "cache",
            BlobArea::Staged => "staged",
        };
        let after = self.after.map(|a| a.to_string()).unwrap_or_default();
        format!("{area}.{after}")
    }

    /// The start of the area after this one, if any.
    fn next_area(self) -> Option<Cursor> {
        let i = BlobArea::ALL.iter().position(|a| *a == self.area)?;
        BlobArea::ALL
            .get(i + 1)
            .map(|&area| Cursor { area, after: None })
    }
}

/// Whether `info` is named by `refs` in its area (staged uploads are named
/// by nothing: they wait only out their grace).
fn named(refs: &References, area: BlobArea, artifact: &ArtifactRef) -> bool {
    match area {
        BlobArea::Durable => refs.durable.contains(artifact),
        BlobArea::Cache => refs.cached.contains(artifact),
        BlobArea::Staged => false,
    }
}

impl Service {
    /// The grace period as a chrono duration.
    fn grace(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.lifecycle.gc_grace).unwrap_or(chrono::Duration::MAX)
    }

    /// Whether `info` is older than the grace period at `now`.
    fn past_grace(&self, info: &BlobInfo, now: DateTime<Utc>) -> bool {
        now.signed_duration_since(info.modified) >= self.grace()
    }

    /// One page of garbage collection of `tenant`'s artifacts (see the
    /// module's documentation); call again with the report's `next` until
    /// it is absent. After the last page the metadata store is compacted
    /// (not in a dry run).
    ///
    /// # Errors
    /// `Invalid` (field `cursor` or `limit`) for a cursor no call handed
    /// out or a limit of 0 or over `GC_MAX_PAGE`; `Unavailable`.
    pub async fn gc(&self, tenant: &TenantId, opts: &GcOptions) -> Result<GcReport> {
        let limit = opts.limit.unwrap_or(GC_PAGE);
        if limit == 0 || limit > GC_MAX_PAGE {
            return Err(Error::invalid(
                "limit",
                format!("limit is {limit}; give 1 to {GC_MAX_PAGE}"),
            ));
        }
        let cursor = match &opts.cursor {
            Some(c) => Cursor::parse(c)?,
            None => Cursor::START,
        };
        let blobs = &self.stores.blobs;
        let page = blobs
            .list(tenant, cursor.area, cursor.after.as_ref(), limit)
            .await?;
        let now = self.clock.now();
        let mut report = GcReport {
            dry_run: opts.dry_run,
            scanned: page.len() as u64,
            ..GcReport::default()
        };
        let old: Vec<_> = page
            .iter()
            .filter(|info| self.past_grace(info, now))
            .copied()
            .collect();
        report.young = (page.len() - old.len()) as u64;
        // One mark per page, taken only when something is old enough to
        // go, and as late as possible. A commit or cache entry written
        // after it is safe without a second mark: each sweep re-checks the
        // age atomically with the store's puts and touches, and a commit
        // naming an artifact touches it first, so an artifact named after
        // the mark is young by the time it could be swept.
        let refs = if old.is_empty() {
            Default::default()
        } else {
            self.stores.meta.references(tenant).await?
        };
        let cutoff = self.clock.now() - self.grace();
        for info in old {
            if named(&refs, cursor.area, &info.artifact) {
                report.referenced += 1;
                continue;
            }
            let removed = GcRemoved {
                artifact: info.artifact,
                area: cursor.area,
                size: info.size,
            };
            // A sweep that finds it young again (touched since) keeps it.
            let gone = opts.dry_run
                || blobs
                    .sweep(tenant, cursor.area, &info.artifact, cutoff)
                    .await?;
            if gone {
                report.removed.push(removed);
            } else {
                report.young += 1;
            }
        }
        report.removed_bytes = report.removed.iter().map(|r| r.size).sum();
        let next = if page.len() == limit {
            Some(Cursor {
                area: cursor.area,
                after: page.last().map(|i| i.artifact),
            })
        } else {
            cursor.next_area()
        };
        report.next = next.map(Cursor::render);
        if report.next.is_none() && !opts.dry_run {
            report.reclaimed_bytes = self.stores.meta.reclaim_space().await?;
        }
        Ok(report)
    }

    /// Collects every page of `tenant` (what `ctx gc` does page by page).
    ///
    /// # Errors
    /// As [`Service::gc`].
    pub async fn gc_all(&self, tenant: &TenantId, dry_run: bool) -> Result<GcReport> {
        let mut opts = GcOptions {
            dry_run,
            ..GcOptions::default()
        };
        let mut total = GcReport {
            dry_run,
            ..GcReport::default()
        };
        loop {
            let page = self.gc(tenant, &opts).await?;
            let next = page.next.clone();
            total.absorb(page);
            match next {
                Some(n) => opts.cursor = Some(n),
                None => return Ok(total),
            }
        }
    }

    /// Notes a cache hit on `key` for the LRU order (coarsely: at most one
    /// write a minute per entry from this process). Only with a budget.
    pub(super) async fn cache_used(&self, tenant: &TenantId, key: &MaterializeKey) -> Result<()> {
        if self.lifecycle.cache_budget.is_none() {
            return Ok(());
        }
        let now = self.clock.now();
        if self.cache_stamps.due(tenant, key, now) {
            self.stores
                .meta
                .touch_materialized(tenant, key, now)
                .await?;
        }
        Ok(())
    }

    /// Brings the cache within its budget after an entry was added: evicts
    /// the least recently used entries and removes their cached artifacts
    /// (an artifact left behind by a crash here is collected by gc later).
    pub(super) async fn enforce_cache_budget(
        &self,
        tenant: &TenantId,
        added: &MaterializeKey,
    ) -> Result<()> {
        let Some(budget) = self.lifecycle.cache_budget else {
            return Ok(());
        };
        let orphans = self
            .stores
            .meta
            .evict_materialized(budget, (tenant, added))
            .await
            // A store without a budget refuses one: the setting is wrong.
            .map_err(|e| match e.kind {
                ErrorKind::Invalid => e.with_field(crate::config::CTX_CACHE_BYTES.var),
                _ => e,
            })?;
        for (tenant, artifact) in orphans {
            self.stores
                .blobs
                .remove(&tenant, BlobArea::Cache, &artifact)
                .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
