//! Materialize: rebuild the context at a commit by walking to its [`Stop`]
//! and joining the deltas in order (translated when another format is
//! asked for), stored as an artifact and cached per (commit, stop, format).
//! Results are ephemeral: stored in the cache area of the blob store, kept
//! within the embedded store's byte budget (least recently used evicted,
//! see `gc`), and rebuilt when their artifact is gone.

use std::sync::Arc;

use bytes::Bytes;
use futures::stream::{self, StreamExt, TryStreamExt};

use super::Service;
use super::hot::Hot;
use crate::commit::{Commit, CommitType, Stop};
use crate::error::{Error, ErrorKind, Result};
use crate::format::FormatId;
use crate::format::translate::{self, Fidelity, Part, Tier};
use crate::id::{ArtifactRef, CommitId, Hash, RefName, TenantId};
use crate::store::{BlobArea, Fetched, MaterializeKey, Materialized};

/// Artifact reads in flight at once during materialize.
const FETCH_CONCURRENCY: usize = 16;

/// Joined (or translated) commits, not stored.
pub(crate) struct Joined {
    /// The bytes.
    pub(crate) bytes: Bytes,
    /// Messages in them.
    pub(crate) message_count: u64,
    /// Tokens in them.
    pub(crate) token_count: u64,
    /// How faithful a translation was (`Native` when none was needed).
    pub(crate) tier: Tier,
    /// What a translation did not carry as it was.
    pub(crate) fidelity: Option<Fidelity>,
}

/// A materialized context and whether it came from the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Materialization {
    /// The result.
    pub result: Materialized,
    /// Whether it came from the cache.
    pub cached: bool,
}

/// What [`Service::read`] reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadTarget {
    /// The tip of a ref.
    Ref(RefName),
    /// A commit.
    Commit(CommitId),
    /// No context at all (seed 000's `materialize(null)`, a fresh start):
    /// a context read answers the empty context.
    Fresh,
}

/// What [`Service::read`] answers for its target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadOf {
    /// The context materialized up to it, from `stop`, in `format`.
    Context {
        /// Where the walk stops.
        stop: Stop,
        /// The format wanted; the commit's when absent.
        format: Option<FormatId>,
    },
    /// The commit's own delta (`stop` absent), or the deltas from `stop`
    /// to it, every commit's as stored, joined in its format: nothing
    /// cached, and stored only when too large to answer inline.
    Delta {
        /// Where the join starts; `None`: the commit alone.
        stop: Option<Stop>,
        /// At most this many commits joined, the newest (`None`: all).
        depth: Option<usize>,
    },
}

/// A context read in one step: [`Service::read`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextRead {
    /// The commit read (the ref's tip); `None` for the empty context of a
    /// fresh start or of a ref that has no commit yet.
    pub commit: Option<CommitId>,
    /// On a delta read, the parent of the first commit joined (the
    /// commit's own parent without a stop); `None` for a root, and for a
    /// context read, which does not look it up.
    pub parent: Option<CommitId>,
    /// Its materialization.
    pub materialization: Materialization,
    /// Its bytes, when they are at most the limit asked for.
    pub bytes: Option<Bytes>,
}

impl Service {
    /// The context at `target` (a ref's tip or a commit) materialized as
    /// [`Service::materialize`] does, or the commit's own delta, with its
    /// bytes when they are at most `content_limit`: what a reader otherwise
    /// gets in three requests (the ref, the materialize or show, the
    /// download).
    ///
    /// A context read of [`ReadTarget::Fresh`], or of a ref that does not
    /// exist (a session that has no commit yet), answers the empty context
    /// in the format asked (`raw` when none), with no commit and its bytes
    /// always inline: a wrapper written to seed 000 reads, checkpoints and
    /// reads again with no special first call. A wrong commit id is still
    /// `NotFound`, and so is a delta read of a ref with no commit (there is
    /// no delta to answer).
    ///
    /// # Errors
    /// `NotFound` naming `ref` or `commit`; `Invalid` naming `commit` for
    /// a delta read of no target, naming `stop` for an ancestor stop on the
    /// empty context, or naming `format` for an unknown one; else as
    /// [`Service::materialize`].
    pub async fn read(
        &self,
        tenant: &TenantId,
        target: ReadTarget,
        of: ReadOf,
        content_limit: u64,
    ) -> Result<ContextRead> {
        let (commit, field) = match target {
            ReadTarget::Commit(id) => (id, "commit"),
            ReadTarget::Ref(name) => match self.get_ref(tenant, &name).await {
                Ok(r) => (r.target, "ref"),
                Err(e) if e.kind == ErrorKind::NotFound && matches!(of, ReadOf::Context { .. }) => {
                    return self.empty_read(&of);
                }
                Err(e) => return Err(e.with_field("ref")),
            },
            ReadTarget::Fresh => return self.empty_read(&of),
        };
        let named = |e: Error| match e.kind {
            ErrorKind::NotFound if e.field.is_none() => e.with_field(field),
            _ => e,
        };
        // A cached result can be superseded or evicted between its entry
        // and its file being read: then it is built again, once.
        let mut again = false;
        loop {
            let mut parent = None;
            let (materialization, joined) = match &of {
                ReadOf::Context { stop, format } => self
                    .materialize_bytes(tenant, &commit, *stop, format.clone())
                    .await
                    .map_err(named)?,
                ReadOf::Delta { stop: None, .. } => {
                    let c = self.show(tenant, &commit).await.map_err(named)?;
                    // Bytes to be downloaded are not fetched here: an
                    // evicted delta's 410 must not wait for the download.
                    if c.inline.is_none()
                        && c.artifact_size > content_limit
                        && self
                            .stores
                            .meta
                            .evicted_by(tenant, &commit)
                            .await?
                            .is_some()
                    {
                        return Err(self.missing_artifact(tenant, commit, c.artifact_ref).await);
                    }
                    parent = c.parent;
                    let m = Materialization {
                        result: Materialized {
                            artifact_ref: c.artifact_ref,
                            size: c.artifact_size,
                            message_count: c.message_count,
                            token_count: c.token_count,
                            tier: Tier::Native,
                            fidelity: None,
                        },
                        cached: false,
                    };
                    (m, c.inline)
                }
                ReadOf::Delta {
                    stop: Some(stop),
                    depth,
                } => {
                    let tip = self.show(tenant, &commit).await.map_err(named)?;
                    let format = tip.format.clone();
                    let mut parts = self.delta_path(tenant, tip, *stop, *depth).await?;
                    parts.reverse();
                    parent = parts.first().and_then(|c| c.parent);
                    let joined = self.join_parts(tenant, &parts, &format).await?;
                    let size = joined.bytes.len() as u64;
                    // Answered inline when it fits; stored when it must be
                    // downloaded, in the cache area with no entry (as a
                    // window's join is), which `ctx gc` and S3's lifecycle
                    // rule reclaim.
                    let artifact_ref = if size > content_limit {
                        let put = self
                            .stores
                            .blobs
                            .put_cached(tenant, joined.bytes.clone())
                            .await?;
                        put.artifact
                    } else {
                        ArtifactRef::of(&joined.bytes)
                    };
                    let m = Materialization {
                        result: Materialized {
                            artifact_ref,
                            size,
                            message_count: joined.message_count,
                            token_count: joined.token_count,
                            tier: joined.tier,
                            fidelity: joined.fidelity.clone(),
                        },
                        cached: false,
                    };
                    (m, Some(joined.bytes))
                }
            };
            let art = &materialization.result.artifact_ref;
            let bytes = if materialization.result.size > content_limit {
                None
            } else if let Some(b) = joined {
                Some(b)
            } else {
                match self.fetch_within(tenant, art, content_limit).await {
                    Ok(Fetched::Bytes(b)) => Some(b),
                    Ok(Fetched::Url(_)) => None,
                    Err(e) if e.kind == ErrorKind::NotFound && !again && materialization.cached => {
                        again = true;
                        continue;
                    }
                    // A commit's own delta that is not stored: evicted (410
                    // naming what to read instead), or lost.
                    Err(e)
                        if e.kind == ErrorKind::NotFound
                            && matches!(of, ReadOf::Delta { stop: None, .. }) =>
                    {
                        return Err(self.missing_artifact(tenant, commit, *art).await);
                    }
                    Err(e) => return Err(e),
                }
            };
            return Ok(ContextRead {
                commit: Some(commit),
                parent,
                materialization,
                bytes,
            });
        }
    }

    /// The empty context a context read of no commit answers (see
    /// [`Service::read`]): nothing stored, so `artifact_ref` names bytes
    /// that are always inline and never downloaded.
    fn empty_read(&self, of: &ReadOf) -> Result<ContextRead> {
        let format = match of {
            ReadOf::Delta { .. } => {
                return Err(Error::invalid(
                    "commit",
                    "a delta read needs a commit or a ref that has one",
                ));
            }
            ReadOf::Context {
                stop: Stop::After(_),
                ..
            } => {
                return Err(Error::invalid(
                    "stop",
                    "there is no commit, so no ancestor to stop after",
                ));
            }
            ReadOf::Context { format, .. } => format.clone().unwrap_or_else(FormatId::raw),
        };
        if !self.formats.is_known(&format) {
            return Err(self.formats.unknown(&format));
        }
        let bytes = self.formats.empty(&format)?;
        Ok(ContextRead {
            commit: None,
            parent: None,
            materialization: Materialization {
                result: Materialized {
                    artifact_ref: ArtifactRef::of(&bytes),
                    size: bytes.len() as u64,
                    message_count: 0,
                    token_count: 0,
                    tier: Tier::Native,
                    fidelity: None,
                },
                cached: false,
            },
            bytes: Some(bytes),
        })
    }

    /// Rebuilds the context at `id` from `stop` in `format` (the tip's when
    /// absent): walks to the stop point, joins the deltas in order, stores
    /// the result as an artifact and caches it per (commit, stop, format).
    ///
    /// # Errors
    /// `NotFound` for the commit, or naming `stop` when that commit does
    /// not exist; `Invalid` for a stop that is not an ancestor, or a format
    /// the chain cannot be turned into.
    pub async fn materialize(
        &self,
        tenant: &TenantId,
        id: &CommitId,
        stop: Stop,
        format: Option<FormatId>,
    ) -> Result<Materialization> {
        Ok(self.materialize_bytes(tenant, id, stop, format).await?.0)
    }

    /// [`Service::materialize`], also handing back the bytes it joined and
    /// stored (`None` on a cache hit from the store), so a caller that
    /// reads the context next does not download what was just written.
    ///
    /// With the hot result cache on (see `hot`), a result held in memory
    /// answers at once, and a new result is held and answered before it is
    /// stored, by a background task.
    pub(crate) async fn materialize_bytes(
        &self,
        tenant: &TenantId,
        id: &CommitId,
        stop: Stop,
        format: Option<FormatId>,
    ) -> Result<(Materialization, Option<Bytes>)> {
        let done = self.materialize_uncounted(tenant, id, stop, format).await?;
        crate::telemetry::materialized(done.0.result.size, done.0.cached);
        Ok(done)
    }

    /// [`Service::materialize_bytes`] without its metric.
    async fn materialize_uncounted(
        &self,
        tenant: &TenantId,
        id: &CommitId,
        stop: Stop,
        format: Option<FormatId>,
    ) -> Result<(Materialization, Option<Bytes>)> {
        let tip = self.show(tenant, id).await?;
        let format = format.unwrap_or_else(|| tip.format.clone());
        let key = MaterializeKey {
            commit: *id,
            stop,
            format: format.clone(),
        };
        // Read before anything is built: a purge (an erase) after this
        // point keeps what is built from being held or stored.
        let generation = self.hot.generation(tenant);
        if let Some(hot) = self.hot.get(tenant, &key) {
            self.cache_used(tenant, &key).await?;
            return Ok((
                Materialization {
                    result: hot.m.clone(),
                    cached: true,
                },
                Some(hot.bytes.clone()),
            ));
        }
        if let Some(m) = self.stores.meta.get_materialized(tenant, &key).await? {
            // A cached artifact may have been evicted (the LRU budget, an
            // S3 lifecycle rule) or, not being written durably, left short
            // by a crash: then the entry is rebuilt, transparently (and
            // replaced below). A garbled file of the right size is caught
            // by the verified download, which rebuilds it too.
            let blobs = &self.stores.blobs;
            match blobs
                .stat(tenant, &[BlobArea::Cache], &m.artifact_ref)
                .await?
            {
                Some(stored) if stored.size == m.size => {
                    self.cache_used(tenant, &key).await?;
                    return Ok((
                        Materialization {
                            result: m,
                            cached: true,
                        },
                        None,
                    ));
                }
                Some(_) => {
                    blobs
                        .remove(tenant, BlobArea::Cache, &m.artifact_ref)
                        .await?;
                }
                None => {}
            }
        }
        let mut superseded = None;
        let built = match self
            .materialize_incremental(tenant, &tip, stop, &format)
            .await?
        {
            Incremental::Done(built, on) => {
                superseded = on;
                *built
            }
            Incremental::Path(path) => self.materialize_full(tenant, path, stop, &format).await?,
        };
        let (m, bytes) = (built.m.clone(), built.bytes.clone());
        if self.hot.holds(bytes.len()) {
            let hot = Arc::new(built);
            if self.hot.insert(tenant, &key, hot, generation) {
                let svc = self.clone();
                let (t, b) = (tenant.clone(), bytes.clone());
                let stored = m.clone();
                let write = async move {
                    svc.store_materialized(&t, &key, &stored, b).await?;
                    svc.supersede(&t, superseded.as_ref()).await
                };
                // Refused when the writes already pending hold the
                // budget's worth of bytes: stored before the answer.
                if let Some(write) =
                    self.hot
                        .write_behind(tenant.clone(), generation, bytes.len(), write)
                {
                    write.await?;
                }
            }
            // Not held: a purge of the tenant came while it was built;
            // neither held nor stored, as if built before the erase.
        } else {
            self.store_materialized(tenant, &key, &m, bytes.clone())
                .await?;
            self.supersede(tenant, superseded.as_ref()).await?;
        }
        Ok((
            Materialization {
                result: m,
                cached: false,
            },
            Some(bytes),
        ))
    }

    /// Drops the cache entry `key` (a parent's, which its child's new
    /// entry extends) and its file unless something else names the bytes:
    /// on a store with a byte budget (embedded), where a session read after
    /// every append would otherwise keep one whole copy of the context per
    /// turn until the budget evicts it. A reader of the parent rebuilds it
    /// (from an older entry or the chain). Stores whose cached artifacts
    /// expire by lifecycle rule (S3) keep theirs.
    async fn supersede(
        &self,
        tenant: &TenantId,
        parent: Option<&(MaterializeKey, ArtifactRef)>,
    ) -> Result<()> {
        let (Some((key, art)), Some(_)) = (parent, self.lifecycle.cache_budget) else {
            return Ok(());
        };
        if self.stores.meta.delete_materialized(tenant, key).await? {
            self.remove_cached_unless_used(tenant, art).await?;
        }
        Ok(())
    }

    /// Stores a built result: its file (under the reference it was built
    /// with), then its cache entry, then the cache budget.
    ///
    /// The store refuses the entry when the commit is gone: erased after
    /// the result was read, which the answer (or the answer already
    /// given) reflects as a read from before the erase. Then the file
    /// goes too, unless an entry or commit still names the same bytes,
    /// so that the erase leaves none of them behind.
    async fn store_materialized(
        &self,
        tenant: &TenantId,
        key: &MaterializeKey,
        m: &Materialized,
        bytes: Bytes,
    ) -> Result<()> {
        let (blobs, meta) = (&self.stores.blobs, &self.stores.meta);
        blobs
            .put_cached_hashed(tenant, m.artifact_ref, bytes)
            .await?;
        match meta.put_materialized(tenant, key, m).await {
            Err(e) if e.kind == ErrorKind::NotFound => {
                self.remove_cached_unless_used(tenant, &m.artifact_ref)
                    .await?;
                Ok(())
            }
            Err(e) => Err(e),
            Ok(()) => self.enforce_cache_budget(tenant, key).await,
        }
    }

    /// Joins (or translates) the whole contributing path, newest first,
    /// and hashes the result (not stored).
    async fn materialize_full(
        &self,
        tenant: &TenantId,
        path: Vec<Commit>,
        stop: Stop,
        format: &FormatId,
    ) -> Result<Hot> {
        let parts = self.contributing(path, stop);
        let joined = self.join_parts(tenant, &parts, format).await?;
        let mut hasher = blake3::Hasher::new();
        hasher.update(&joined.bytes);
        Ok(Hot {
            m: Materialized {
                artifact_ref: ref_of(&hasher),
                size: joined.bytes.len() as u64,
                message_count: joined.message_count,
                token_count: joined.token_count,
                tier: joined.tier,
                fidelity: joined.fidelity.clone(),
            },
            bytes: joined.bytes,
            hasher,
        })
    }

    /// Joins the artifacts of `parts` (oldest first) in `format`: natively
    /// when they all have it, else translated; stores the result in the
    /// cache area.
    pub(crate) async fn join_commits(
        &self,
        tenant: &TenantId,
        parts: &[Commit],
        format: &FormatId,
    ) -> Result<(Materialized, Bytes)> {
        let joined = self.join_parts(tenant, parts, format).await?;
        let put = self
            .stores
            .blobs
            .put_cached(tenant, joined.bytes.clone())
            .await?;
        let m = Materialized {
            artifact_ref: put.artifact,
            size: put.size,
            message_count: joined.message_count,
            token_count: joined.token_count,
            tier: joined.tier,
            fidelity: joined.fidelity.clone(),
        };
        Ok((m, joined.bytes))
    }

    /// [`Service::join_commits`] without storing the result.
    pub(crate) async fn join_parts(
        &self,
        tenant: &TenantId,
        parts: &[Commit],
        format: &FormatId,
    ) -> Result<Joined> {
        let format = format.clone();
        let bytes = self.fetch_parts(tenant, parts).await?;
        let codec = self.formats.codec(&format).clone();
        if parts.iter().all(|c| c.format == format) {
            return Ok(Joined {
                bytes: codec.concat(&bytes)?,
                message_count: parts.iter().map(|c| c.message_count).sum(),
                token_count: parts.iter().map(|c| c.token_count).sum(),
                tier: Tier::Native,
                fidelity: None,
            });
        }
        let translate_parts: Vec<Part> = parts
            .iter()
            .zip(bytes)
            .map(|(c, b)| Part {
                origin: format!("commit {}", c.id),
                format: c.format.clone(),
                bytes: b,
            })
            .collect();
        let formats = self.formats.clone();
        let target = format.clone();
        // Translating and counting the result both decode it whole: off
        // the async threads, then the allocator trimmed of what they freed.
        let (out, counts) = tokio::task::spawn_blocking(move || {
            let input = translate_parts.iter().map(|p| p.bytes.len()).sum();
            let out = translate::translate(&formats, translate_parts, &target).map(|out| {
                let counts = codec.count(&out.bytes);
                (out, counts)
            });
            super::trim::after_decoding(input);
            out
        })
        .await
        .map_err(|e| Error::internal(format!("translation panicked: {e}")))??;
        Ok(Joined {
            message_count: counts
                .messages
                .unwrap_or_else(|| parts.iter().map(|c| c.message_count).sum()),
            token_count: counts.tokens,
            tier: out.tier,
            fidelity: out.fidelity,
            bytes: out.bytes,
        })
    }

    /// Reads the artifacts of `parts`, in order, 16 at a time.
    pub(crate) async fn fetch_parts<'c>(
        &self,
        tenant: &TenantId,
        parts: impl IntoIterator<Item = &'c Commit>,
    ) -> Result<Vec<Bytes>> {
        let wanted: Vec<_> = parts
            .into_iter()
            .map(|c| (c.id, c.artifact_ref, c.inline.clone()))
            .collect();
        stream::iter(wanted)
            .map(|(id, art, inline)| self.artifact_at(tenant, id, art, inline))
            .buffered(FETCH_CONCURRENCY)
            .try_collect()
            .await
    }

    /// Incremental materialize: extends the cached materialization of the
    /// nearest ancestor on the path to the stop (same stop, same format,
    /// joined natively) with the newer deltas.
    ///
    /// The parent is probed first, before any walk: in the resume loop
    /// (checkpoint a turn, materialize the tip) that is one cache read and
    /// one artifact read whatever the depth. Otherwise the path is walked
    /// (one store query per lineage run) and at most [`MAX_PROBES`] more
    /// ancestors are probed, concurrently, at distances 2, 4, 8, ... from
    /// the tip; the nearest hit is used, so the deltas read are at most
    /// twice the fewest possible. That bounds the cache reads at
    /// 1 + log2(depth), never one per ancestor (on DynamoDB each is a
    /// GetItem). Returns the walked path when nothing can be reused.
    async fn materialize_incremental(
        &self,
        tenant: &TenantId,
        tip: &Commit,
        stop: Stop,
        format: &FormatId,
    ) -> Result<Incremental> {
        let codec = self.formats.codec(format).clone();
        let tip_stops = stop == Stop::Compaction && starts_context(tip);
        // A cached After(x) at the parent implies x is an ancestor of the
        // parent (an uncached one is refused before it is stored), so the
        // parent-first probe needs no check of x.
        if let (Some(parent), false) = (tip.parent, tip_stops) {
            let parent_key = MaterializeKey {
                commit: parent,
                stop,
                format: format.clone(),
            };
            let newer = self.contributing(vec![tip.clone()], stop);
            // A result held in memory is the store's entry too (or will
            // be): what it cannot extend, the stored copy cannot either.
            if let Some(hot) = self.hot.get(tenant, &parent_key) {
                if let Some(built) = self
                    .append_to_hot(tenant, &codec, format, &hot, &newer)
                    .await?
                {
                    let art = hot.m.artifact_ref;
                    return Ok(Incremental::Done(Box::new(built), Some((parent_key, art))));
                }
            } else if let Some(cached) = self
                .stores
                .meta
                .get_materialized(tenant, &parent_key)
                .await?
                && let Some(m) = self
                    .append_to(tenant, &codec, &parent_key, &cached, &newer)
                    .await?
            {
                let art = cached.artifact_ref;
                return Ok(Incremental::Done(Box::new(m), Some((parent_key, art))));
            }
        }
        let path = self.walk_to_stop(tenant, tip.clone(), stop).await?;
        // Index 1 (the parent) was probed above.
        let probes: Vec<usize> = std::iter::successors(Some(2usize), |d| d.checked_mul(2))
            .take_while(|&d| d < path.len())
            .take(MAX_PROBES)
            .collect();
        let keys: Vec<MaterializeKey> = probes
            .iter()
            .map(|&i| MaterializeKey {
                commit: path[i].id,
                stop,
                format: format.clone(),
            })
            .collect();
        let meta = &self.stores.meta;
        let found: Vec<Option<Materialized>> = stream::iter(keys.clone())
            .map(|key| async move { meta.get_materialized(tenant, &key).await })
            .buffered(MAX_PROBES)
            .try_collect()
            .await?;
        let hit = probes
            .iter()
            .zip(keys)
            .zip(found)
            .find_map(|((&i, key), m)| m.map(|m| (i, key, m)));
        if let Some((i, key, cached)) = hit {
            let newer = self.contributing(path[..i].to_vec(), stop);
            if let Some(m) = self
                .append_to(tenant, &codec, &key, &cached, &newer)
                .await?
            {
                return Ok(Incremental::Done(Box::new(m), None));
            }
        }
        Ok(Incremental::Path(path))
    }

    /// `cached` (the entry of `key`) followed by the artifacts of `newer`
    /// (oldest first), when both are native to the key's format and the
    /// codec can append; `None` otherwise, or when the cached artifact has
    /// been evicted or does not verify (a cached result is not written
    /// durably: a crash can leave it short or garbled; then the file and
    /// the entry are removed).
    ///
    /// Translation is never extended: a translated prefix is not a prefix
    /// of the translation in general (tool calls are paired across parts,
    /// the tier is the whole chain's, a narrative is rendered whole), so a
    /// chain that needs translating is joined in full.
    async fn append_to(
        &self,
        tenant: &TenantId,
        codec: &Arc<dyn crate::format::Codec>,
        key: &MaterializeKey,
        cached: &Materialized,
        newer: &[Commit],
    ) -> Result<Option<Hot>> {
        if !extendable(cached, &key.format, newer) {
            return Ok(None);
        }
        let blobs = &self.stores.blobs;
        let Some(prefix) = blobs
            .read(tenant, &[BlobArea::Cache], &cached.artifact_ref)
            .await?
        else {
            return Ok(None);
        };
        // Joined before the prefix is verified, so that one pass over the
        // bytes they share hashes both; nothing is stored or returned
        // before the check.
        let Some(joined) = self.join_onto(tenant, codec, &prefix, newer).await? else {
            return Ok(None);
        };
        let (prefix_hash, joined) = match joined {
            Ok(joined) => {
                let (prefix_hash, hasher) = hash_both(&prefix, &joined);
                (prefix_hash, Ok((hasher, joined)))
            }
            Err(e) => (Hash::of(&prefix), Err(e)),
        };
        if &prefix_hash != cached.artifact_ref.hash() {
            blobs
                .remove(tenant, BlobArea::Cache, &cached.artifact_ref)
                .await?;
            self.stores.meta.delete_materialized(tenant, key).await?;
            return Ok(None);
        }
        let (hasher, joined) = joined?;
        Ok(Some(appended(cached, newer, joined, hasher)))
    }

    /// [`Service::append_to`] onto a result held in memory (see `hot`):
    /// not read, not verified, and, when the codec appends the new parts
    /// after the whole of it (raw, Claude Code), not hashed again either:
    /// its hasher is cloned and fed only the tail. When the join rewrites
    /// part of it (the JSON-array and CBOR formats) the result is hashed
    /// whole.
    async fn append_to_hot(
        &self,
        tenant: &TenantId,
        codec: &Arc<dyn crate::format::Codec>,
        format: &FormatId,
        hot: &Hot,
        newer: &[Commit],
    ) -> Result<Option<Hot>> {
        if !extendable(&hot.m, format, newer) {
            return Ok(None);
        }
        let Some(joined) = self.join_onto(tenant, codec, &hot.bytes, newer).await? else {
            return Ok(None);
        };
        let joined = joined?;
        let prefix = &hot.bytes[..];
        let hasher = if joined.starts_with(prefix) {
            let mut hasher = hot.hasher.clone();
            hasher.update(&joined[prefix.len()..]);
            hasher
        } else {
            let mut hasher = blake3::Hasher::new();
            hasher.update(&joined);
            hasher
        };
        Ok(Some(appended(&hot.m, newer, joined, hasher)))
    }

    /// The artifacts of `newer` joined onto `prefix` by `codec`
    /// ([`Codec::concat_onto`](crate::format::Codec::concat_onto)); `None`
    /// when the codec cannot append.
    async fn join_onto(
        &self,
        tenant: &TenantId,
        codec: &Arc<dyn crate::format::Codec>,
        prefix: &Bytes,
        newer: &[Commit],
    ) -> Result<Option<Result<Bytes>>> {
        let bytes = self.fetch_parts(tenant, newer).await?;
        Ok(codec.concat_onto(prefix, &bytes))
    }

    /// The commits from `tip` back to where `stop` ends the walk, newest
    /// first (a compaction or snapshot for [`Stop::Compaction`], included;
    /// the root for [`Stop::Root`]; for [`Stop::After`] the commit after
    /// the stop). Every one of them but the tip is an ancestor whose own
    /// materialization for the same stop is a prefix of the tip's.
    async fn walk_to_stop(
        &self,
        tenant: &TenantId,
        tip: Commit,
        stop: Stop,
    ) -> Result<Vec<Commit>> {
        let path = match stop {
            Stop::Compaction => self.walk(tenant, tip, None, starts_context).await?,
            Stop::Root => {
                let wanted = usize::try_from(tip.depth).ok().map(|d| d.saturating_add(1));
                self.walk(tenant, tip, wanted, |_| false).await?
            }
            Stop::After(ancestor) => {
                let a = self
                    .stores
                    .meta
                    .get_commit(tenant, &ancestor)
                    .await?
                    .ok_or_else(|| super::missing_commit("stop", &ancestor))?;
                if a.depth > tip.depth {
                    return Err(not_an_ancestor(&ancestor, &tip.id));
                }
                let tip_id = tip.id;
                let wanted = usize::try_from(tip.depth - a.depth)
                    .ok()
                    .map(|d| d.saturating_add(1));
                let mut path = self
                    .walk(tenant, tip, wanted, |c| c.depth <= a.depth)
                    .await?;
                match path.pop() {
                    Some(last) if last.id == ancestor => path,
                    _ => return Err(not_an_ancestor(&ancestor, &tip_id)),
                }
            }
        };
        Ok(path)
    }

    /// The commits from `tip` back to `stop` (as [`Service::walk_to_stop`]
    /// walks), newest first, at most `depth` of them: a capped walk to a
    /// compaction or the root reads no further than it answers.
    async fn delta_path(
        &self,
        tenant: &TenantId,
        tip: Commit,
        stop: Stop,
        depth: Option<usize>,
    ) -> Result<Vec<Commit>> {
        let Some(depth) = depth else {
            return self.walk_to_stop(tenant, tip, stop).await;
        };
        let mut seen = 0;
        let mut capped = |stops: bool| {
            seen += 1;
            stops || seen >= depth
        };
        match stop {
            Stop::Compaction => {
                self.walk(tenant, tip, Some(depth), |c| capped(starts_context(c)))
                    .await
            }
            Stop::Root => self.walk(tenant, tip, Some(depth), |_| capped(false)).await,
            Stop::After(_) => {
                let mut path = self.walk_to_stop(tenant, tip, stop).await?;
                path.truncate(depth);
                Ok(path)
            }
        }
    }

    /// The commits of a walked `path` (newest first) whose artifacts make up
    /// the context for `stop`, oldest first.
    fn contributing(&self, mut path: Vec<Commit>, stop: Stop) -> Vec<Commit> {
        path.reverse();
        if stop != Stop::Compaction {
            // The original conversation: summaries and snapshots that stand
            // in for earlier history are skipped; a parentless snapshot
            // (an imported context) is where the history starts. A
            // compaction in a format whose own log records it (a Claude Code
            // transcript holds its compact_boundary and summary lines) is
            // part of that history and stays (docs/adr/0003).
            path.retain(|c| {
                c.commit_type == CommitType::Delta
                    || c.parent.is_none()
                    || (c.commit_type == CommitType::Compaction
                        && self.formats.codec(&c.format).compaction_in_history())
            });
        }
        path
    }
}

/// Whether the result `base` in `format` can be extended by `newer`: it
/// was joined natively and every newer part is in the same format
/// (translation is never extended, see [`Service::append_to`]).
fn extendable(base: &Materialized, format: &FormatId, newer: &[Commit]) -> bool {
    base.tier == Tier::Native && newer.iter().all(|c| &c.format == format)
}

/// The hash of `prefix` and a hasher fed all of `joined` (which extends
/// it), in one pass over the bytes they share: BLAKE3's hasher is fed
/// their common start once and cloned, then each is finished with its own
/// rest. In the resume loop that is one hash of the context instead of two.
fn hash_both(prefix: &[u8], joined: &[u8]) -> (Hash, blake3::Hasher) {
    let shared = common_prefix_len(prefix, joined);
    let mut hasher = blake3::Hasher::new();
    hasher.update(&prefix[..shared]);
    let mut rest = hasher.clone();
    rest.update(&prefix[shared..]);
    hasher.update(&joined[shared..]);
    (Hash::from_bytes(*rest.finalize().as_bytes()), hasher)
}

/// The reference of the bytes `hasher` was fed.
fn ref_of(hasher: &blake3::Hasher) -> ArtifactRef {
    ArtifactRef::from_hash(Hash::from_bytes(*hasher.finalize().as_bytes()))
}

/// The result of appending `newer` to the result `base`: `joined`, hashed
/// by `hasher`.
fn appended(base: &Materialized, newer: &[Commit], joined: Bytes, hasher: blake3::Hasher) -> Hot {
    Hot {
        m: Materialized {
            artifact_ref: ref_of(&hasher),
            size: joined.len() as u64,
            message_count: base.message_count + newer.iter().map(|c| c.message_count).sum::<u64>(),
            token_count: base.token_count + newer.iter().map(|c| c.token_count).sum::<u64>(),
            tier: Tier::Native,
            fidelity: None,
        },
        bytes: joined,
        hasher,
    }
}

/// How many bytes `a` and `b` start with alike (compared a block at a
/// time, so the common case is a few `memcmp`s).
fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 4096;
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + BLOCK <= n && a[i..i + BLOCK] == b[i..i + BLOCK] {
        i += BLOCK;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// Cache probes beyond the parent during an incremental materialize
/// (ancestors at distance 2, 4, ..., 2^MAX_PROBES).
const MAX_PROBES: usize = 12;

/// Whether a walk to [`Stop::Compaction`] ends at `c`: a compaction or a
/// snapshot holds the context up to it.
fn starts_context(c: &Commit) -> bool {
    matches!(c.commit_type, CommitType::Compaction | CommitType::Snapshot)
}

/// What the incremental attempt gave.
enum Incremental {
    /// The materialization, built on a cached ancestor; with the key and
    /// artifact of the parent's entry when it was built on that one (which
    /// the new entry then supersedes).
    Done(Box<Hot>, Option<(MaterializeKey, ArtifactRef)>),
    /// Nothing to reuse: the walked path, newest first.
    Path(Vec<Commit>),
}

fn not_an_ancestor(stop: &CommitId, tip: &CommitId) -> Error {
    Error::invalid("stop", format!("stop {stop} is not an ancestor of {tip}"))
}

#[cfg(test)]
mod tests;
