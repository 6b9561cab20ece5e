//! The operations of ctx over the store traits: what the HTTP handlers call
//! in every host (`ctx serve`, each Lambda). One file per family:
//!
//! - `agents`: agents' live context: the rolling window, clear, saves and
//!   the working-context cache (docs/http-api.md).
//! - `checkpoint`: recording a commit ([`NewCommit`] → [`Checkpointed`]).
//! - `batch`: the commits, artifacts and ref moves of one framework
//!   operation as one atomic write ([`NewBatch`] → [`BatchDone`]).
//! - `artifacts`: uploads, downloads, presigned direct uploads.
//! - `commits`: show, update-metadata, history, resolve.
//! - `walk`: the lineage walk history and materialize share.
//! - `materialize`: rebuilding the context at a commit from a [`Stop`]
//!   ([`Materialization`]).
//! - `refs`: compare-and-swap pointers to tips.
//! - `hot`: the hot result cache: recent materializations in memory,
//!   stored in the background (`CTX_HOT_CACHE_BYTES`).
//! - `gc`: artifact lifecycle: the cache's LRU budget and garbage
//!   collection ([`GcOptions`] → [`GcReport`]).
//! - `summaries`: filling in missing summaries (the batch, the one-shot
//!   request; [`BatchOptions`] → [`BatchReport`]).
//! - `workspaces`: workspace files (versioned documents) and read_context.
//! - `lifecycle`: erasing sessions, retention with pins ([`Erased`],
//!   [`RetentionReport`]).
//! - `tenant_erase`: the operator's erase of a whole tenant
//!   ([`TenantErased`]).
//! - `branches`: context folding (branches, budgets, deadlines; the
//!   embedded deadline timer [`TokioTimer`]).
//!
//! Every method takes the caller's tenant first; nothing here can reach
//! another tenant's keys. Requests arrive as domain values; the wire types
//! (`crate::wire`) are converted at the API edge.

use std::sync::Arc;

use crate::branch::Branching;
use crate::clock::Clock;
use crate::error::{Error, ErrorKind, Result};
use crate::format::Formats;
use crate::store::Stores;

mod agents;
mod artifacts;
mod batch;
mod branches;
mod checkpoint;
mod commits;
mod compact;
mod evict;
mod gc;
mod hot;
mod lifecycle;
mod materialize;
mod refs;
mod summaries;
mod tenant_erase;
mod trim;
mod walk;
mod workspaces;

pub use crate::commit::Stop;
pub use agents::{
    MAX_DOC_BYTES, MAX_DOC_FILES, MAX_DOCS_BYTES, MAX_SAVES, MAX_STATUS_ITEMS, MAX_WINDOW_COMMITS,
    NewProcess, RESTORED_FROM, WORKING_CONTEXT_SCHEMA, check_snapshot,
};
pub use batch::{BatchDone, BatchEntry, ClaimedArtifact, NewBatch, NewRefMove, OnStale, RefTarget};
pub use branches::{
    BudgetNotice, Expired, MAX_DESCRIPTION, MAX_ERROR, MAX_MESSAGE, MAX_PROMPT, Sweep, TokioTimer,
    WARN_PERCENT, Wake,
};
pub use checkpoint::{Checkpointed, Delta, NewCommit};
pub use compact::{COMPACTED_BY, Compacted};
pub use evict::Evicted;
pub use gc::{GcOptions, GcRemoved, GcReport, LifecycleSettings};
pub use lifecycle::{Erased, RetentionReport};
pub use materialize::{ContextRead, Materialization, ReadOf, ReadTarget};
pub use summaries::{BatchOptions, BatchReport, retry_delay};
pub use tenant_erase::{BLOB_BATCH, META_BATCH, TenantErased};
pub use workspaces::{FileContent, FileEntry, FileVersion, check_jsonl};

/// The error of a request whose `field` names a commit that does not exist
/// (or is another tenant's): `NotFound`, as for any other missing thing,
/// naming the field.
pub(crate) fn missing_commit(field: &str, id: &crate::id::CommitId) -> Error {
    Error::new(ErrorKind::NotFound, format!("{field} {id} does not exist")).with_field(field)
}

/// Size limits the service enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest artifact (delta, summary, snapshot) in bytes.
    pub max_artifact_bytes: usize,
    /// The most commits one history call returns.
    pub max_history: usize,
    /// The most refs one listing returns.
    pub max_ref_list: usize,
    /// The largest direct (presigned) upload.
    pub max_upload_bytes: u64,
    /// The largest delta stored inline with its commit's metadata instead
    /// of in the blob store (`CTX_INLINE_DELTA_BYTES`); 0 stores none inline.
    pub inline_delta_bytes: usize,
    /// The largest artifact a download answers with its bytes where the
    /// blob store hands out URLs (`CTX_DOWNLOAD_URL_BYTES`).
    pub download_url_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_artifact_bytes: crate::commit::limits::DEFAULT_MAX_ARTIFACT,
            max_history: 1000,
            max_ref_list: 1000,
            max_upload_bytes: 5 * 1024 * 1024 * 1024,
            inline_delta_bytes: crate::commit::limits::DEFAULT_INLINE_DELTA,
            download_url_bytes: crate::commit::limits::DEFAULT_DOWNLOAD_URL,
        }
    }
}

impl Limits {
    /// What a 413 from the body limit of a route says: the limit in bytes
    /// and the setting that raises it. `json` for the JSON routes, else the
    /// raw upload of an artifact.
    pub fn body_limit_note(&self, json: bool) -> String {
        if json {
            format!(
                "a JSON body may have at most {} bytes (an artifact of \
                 {var} = {} in base64, plus 1 MiB; \
                 {var} raises the limit)",
                self.max_json_bytes(),
                self.max_artifact_bytes,
                var = crate::config::CTX_MAX_ARTIFACT_BYTES,
            )
        } else {
            format!(
                "an artifact may have at most {} bytes ({} \
                 raises the limit)",
                self.max_artifact_bytes,
                crate::config::CTX_MAX_ARTIFACT_BYTES,
            )
        }
    }

    /// The largest JSON body: an artifact in base64 plus room for fields.
    pub fn max_json_bytes(&self) -> usize {
        self.max_artifact_bytes / 3 * 4 + 1024 * 1024
    }

    /// Refuses an artifact of `len` bytes in `field` over the limit.
    ///
    /// # Errors
    /// `TooLarge` naming the field and the limit.
    pub fn check_artifact_size(&self, field: &str, len: usize) -> Result<()> {
        if len > self.max_artifact_bytes {
            return Err(Error::new(
                ErrorKind::TooLarge,
                format!(
                    "{field} is {len} bytes; an artifact may have at most {} \
                     ({} raises the limit)",
                    self.max_artifact_bytes,
                    crate::config::CTX_MAX_ARTIFACT_BYTES,
                ),
            )
            .with_field(field));
        }
        Ok(())
    }
}

/// Commits an erase works on at once, each with its own requests (a
/// session's thousand commits are about 9,000 requests on AWS: one after
/// the other they would not finish within an API Gateway request).
const ERASE_CONCURRENCY: usize = 16;

/// The service: every operation of ctx.
#[derive(Clone)]
pub struct Service {
    stores: Stores,
    formats: Formats,
    clock: Arc<dyn Clock>,
    limits: Limits,
    branching: Option<Arc<Branching>>,
    summarizer: Option<Arc<dyn crate::summarize::Summarizer>>,
    lifecycle: LifecycleSettings,
    cache_stamps: Arc<gc::CacheStamps>,
    hot: Arc<hot::HotCache>,
    /// Commits an erase works on at once.
    erase_concurrency: usize,
}

impl Service {
    /// A service over `stores`, with the built-in formats.
    pub fn new(stores: Stores, clock: Arc<dyn Clock>) -> Self {
        Service {
            stores,
            formats: Formats::default(),
            clock,
            limits: Limits::default(),
            branching: None,
            summarizer: None,
            lifecycle: LifecycleSettings::default(),
            cache_stamps: Arc::default(),
            hot: Arc::new(hot::HotCache::new(crate::config::DEFAULT_HOT_CACHE_BYTES)),
            erase_concurrency: ERASE_CONCURRENCY,
        }
    }

    /// Sets how many commits an erase works on at once (at least 1; 1 is
    /// one after the other, as before: the erase bench's alternative).
    pub fn with_erase_concurrency(mut self, n: usize) -> Self {
        self.erase_concurrency = n.max(1);
        self
    }

    /// Enables context folding (`branch_*`, session end) over `branching`.
    pub fn with_branching(mut self, branching: Branching) -> Self {
        self.branching = Some(Arc::new(branching));
        self
    }

    /// Replaces the cache budget and the garbage collector's grace period.
    pub fn with_lifecycle(mut self, lifecycle: LifecycleSettings) -> Self {
        self.lifecycle = lifecycle;
        self
    }

    /// Replaces the hot result cache with one of `bytes` (0: none; every
    /// result is stored before it is answered). The default is
    /// `CTX_HOT_CACHE_BYTES`'s.
    pub fn with_hot_cache(mut self, bytes: u64) -> Self {
        self.hot = Arc::new(hot::HotCache::new(bytes));
        self
    }

    /// Replaces the size limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The context-folding setup, if enabled.
    pub fn branching(&self) -> Option<&Branching> {
        self.branching.as_deref()
    }

    /// The codecs the service knows.
    pub fn formats(&self) -> &Formats {
        &self.formats
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The clock the service reads.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The stores the service runs on.
    pub fn stores(&self) -> &Stores {
        &self.stores
    }
}
