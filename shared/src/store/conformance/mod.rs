//! The conformance suite: every behaviour a backend must have, written once
//! as functions over the store traits and run in full by every backend's
//! tests (memory, local, and the aws backend against an emulator) through
//! the one entry point, [`run_all`].
//!
//! Each run starts in fresh tenants, so it can run against a store that
//! already holds data. Functions panic with a message on a violation.
//!
//! # Layout
//! - this file: [`Backend`], [`Capabilities`], [`run_all`] and the helpers
//!   the behaviours (and other tests) build data with.
//! - [`agents`]: agents' live context: timeline ranges, agent records,
//!   saves.
//! - [`batch`]: several commits and ref moves as one atomic write.
//! - [`blobs`]: the `BlobStore` behaviours.
//! - [`meta`]: commits, lineages, resolve, metadata and the cache.
//! - [`erase`]: sessions, children, artifact users, deletes, idle
//!   sessions and pins (lifecycle).
//! - [`history`]: history a page at a time across lineage runs, through
//!   the service.
//! - [`evict`]: eviction markers (a commit's delta dropped, its metadata
//!   kept).
//! - [`refs`]: refs, checkpoint ref moves and the retry rule.
//! - [`summaries`]: the summary queue (listing, claims, conditional
//!   writes, failures).
//! - [`summary_batch`]: two summary batches at once over one backend.
//! - [`tokens`]: the `TokenStore` behaviours.
//! - [`tenant_erase`]: the operator's erase of a whole tenant, over the
//!   meta, blob, token and branch stores together.
//! - [`branches`]: the `BranchStore` behaviours.
//! - [`inline`]: artifact bytes stored inline with a commit.
//! - [`gc`]: blob areas, listings, sweeps, references and LRU eviction
//!   (garbage collection and the cache budget).

use chrono::{DateTime, Utc};

use super::{BlobStore, MetaStore, PutCommit, TokenStore};
use crate::branch::BranchStore;
use crate::clock::{IdSource, OsRandom, micros_to_time};
use crate::commit::{Commit, CommitType, Tags, Trigger};
use crate::format::FormatId;
use crate::id::{ArtifactRef, CommitId, RefName, TenantId};

pub mod agents;
pub mod batch;
pub mod blobs;
pub mod branches;
pub mod erase;
pub mod evict;
pub mod gc;
pub mod history;
pub mod inline;
pub mod meta;
pub mod refs;
pub mod summaries;
pub mod summary_batch;
pub mod tenant_erase;
pub mod tokens;

/// Every store a backend offers, as the suite sees them. One value may fill
/// several places (a meta store that is the token store too).
#[derive(Clone, Copy)]
pub struct Backend<'a> {
    /// Artifacts.
    pub blobs: &'a dyn BlobStore,
    /// Commits, timelines, refs and the cache.
    pub meta: &'a dyn MetaStore,
    /// Bearer tokens.
    pub tokens: &'a dyn TokenStore,
    /// Branches of context folding.
    pub branches: &'a dyn BranchStore,
}

/// What a backend can do beyond what every backend must.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// The branch store answers [`BranchStore::all_active`] (embedded
    /// stores do; DynamoDB leaves deadlines to Step Functions).
    pub global_branch_listing: bool,
    /// The meta store evicts cache entries by an LRU byte budget
    /// ([`MaterializationCache::evict_materialized`](
    /// crate::store::MaterializationCache::evict_materialized); embedded
    /// stores do, DynamoDB leaves cached artifacts to an S3 lifecycle
    /// rule).
    pub cache_budget: bool,
    /// The meta store's database holds the branch store's records too, so
    /// [`Lifecycle::erase_tenant`](crate::store::Lifecycle::erase_tenant)
    /// removes them (SQLite, DynamoDB).
    pub branches_in_meta: bool,
}

/// Runs every behaviour of every store of `backend`.
pub async fn run_all(backend: &Backend<'_>, caps: Capabilities) {
    blobs::run_all(backend.blobs).await;
    meta::run_all(backend.meta).await;
    refs::run_all(backend.meta).await;
    batch::run_all(backend.meta).await;
    erase::run_all(backend.meta).await;
    evict::run_all(backend.meta).await;
    summaries::run_all(backend.meta).await;
    agents::run_all(backend.meta).await;
    tokens::run_all(backend.tokens).await;
    branches::run_all(backend.branches, caps).await;
    gc::run_all_blobs(backend.blobs).await;
    gc::run_all_meta(backend.meta, caps.cache_budget).await;
    tenant_erase::run_all(backend, caps).await;
    inline::run_all(backend.meta).await;
}

/// A tenant no earlier run used.
pub fn fresh_tenant(label: &str) -> TenantId {
    let mut b = [0u8; 6];
    OsRandom.fill(&mut b);
    format!("conf-{label}-{}", hex::encode(b))
        .parse()
        .expect("conformance tenant names are valid")
}

/// Time `n` seconds after a fixed epoch.
pub fn t(n: i64) -> DateTime<Utc> {
    micros_to_time(1_790_000_000_000_000 + n * 1_000_000)
}

/// A commit as the service would build it: a child continues its parent's
/// lineage, a root starts its own.
pub fn commit(
    tenant: &TenantId,
    parent: Option<&Commit>,
    at: DateTime<Utc>,
    principal: &str,
    body: &[u8],
) -> Commit {
    let artifact = ArtifactRef::of(body);
    let id = CommitId::derive(
        tenant,
        parent.map(|p| &p.id),
        &artifact,
        at.timestamp_micros(),
        "tpl",
    );
    Commit {
        id,
        parent: parent.map(|p| p.id),
        commit_type: CommitType::Delta,
        artifact_ref: artifact,
        artifact_size: body.len() as u64,
        format: FormatId::raw(),
        template: "tpl".into(),
        principal: principal.parse().expect("valid principal"),
        machine: None,
        session_id: None,
        checkpoint: Trigger::Explicit,
        ticket_id: None,
        thread_id: None,
        summary: None,
        message_count: 1,
        token_count: 2,
        created_at: at,
        tags: Tags::new(),
        depth: parent.map_or(0, |p| p.depth + 1),
        lineage: parent.map_or(id, |p| p.lineage),
        parent_lineage: parent.map(|p| p.lineage),
        inline: None,
    }
}

/// Creates `c`, which must be new, and returns it as stored.
pub(super) async fn put(meta: &dyn MetaStore, tenant: &TenantId, c: &Commit) -> Commit {
    match meta.put_commit(tenant, c, None).await.expect("put_commit") {
        PutCommit::Created(c) => c,
        PutCommit::Existing(c) => panic!("{} already existed", c.id),
    }
}

/// A ref name.
pub(super) fn name(s: &str) -> RefName {
    s.parse().expect("valid ref name")
}
