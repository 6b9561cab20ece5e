//! Materialize: rebuild the context at a commit by walking to its [`Stop`]
//! and joining the deltas in order (translated when another format is
//! asked for), stored as an artifact and cached per (commit, stop, format).

use bytes::Bytes;
use futures::stream::{self, StreamExt, TryStreamExt};

use super::Service;
use crate::commit::{Commit, CommitType, Stop};
use crate::error::{Error, Result};
use crate::format::FormatId;
use crate::format::translate::{self, Part, Tier};
use crate::id::{CommitId, TenantId};
use crate::store::{MaterializeKey, Materialized};

/// Artifact reads in flight at once during materialize.
const FETCH_CONCURRENCY: usize = 16;

/// A materialized context and whether it came from the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Materialization {
    /// The result.
    pub result: Materialized,
    /// Whether it came from the cache.
    pub cached: bool,
}

impl Service {
    /// Rebuilds the context at `id` from `stop` in `format` (the tip's when
    /// absent): walks to the stop point, joins the deltas in order, stores
    /// the result as an artifact and caches it per (commit, stop, format).
    ///
    /// # Errors
    /// `NotFound` for the commit; `Invalid` for a stop that is not an
    /// ancestor, or a format the chain cannot be turned into.
    pub async fn materialize(
        &self,
        tenant: &TenantId,
        id: &CommitId,
        stop: Stop,
        format: Option<FormatId>,
    ) -> Result<Materialization> {
        let tip = self.show(tenant, id).await?;
        let format = format.unwrap_or_else(|| tip.format.clone());
        let key = MaterializeKey {
            commit: *id,
            stop,
            format: format.clone(),
        };
        if let Some(m) = self.stores.meta.get_materialized(tenant, &key).await? {
            return Ok(Materialization {
                result: m,
                cached: true,
            });
        }
        let parts = self.contributing_commits(tenant, tip, stop).await?;
        let wanted: Vec<_> = parts.iter().map(|c| (c.id, c.artifact_ref)).collect();
        let bytes: Vec<Bytes> = stream::iter(wanted)
            .map(|(id, art)| self.artifact_at(tenant, id, art))
            .buffered(FETCH_CONCURRENCY)
            .try_collect()
            .await?;
        let codec = self.formats.codec(&format).clone();
        let m = if parts.iter().all(|c| c.format == format) {
            let joined = codec.concat(&bytes)?;
            let put = self.stores.blobs.put(tenant, joined).await?;
            Materialized {
                artifact_ref: put.artifact,
                size: put.size,
                message_count: parts.iter().map(|c| c.message_count).sum(),
                token_count: parts.iter().map(|c| c.token_count).sum(),
                tier: Tier::Native,
            }
        } else {
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
            let out = tokio::task::spawn_blocking(move || {
                translate::translate(&formats, &translate_parts, &target)
            })
            .await
            .map_err(|e| Error::internal(format!("translation panicked: {e}")))??;
            let counts = codec.count(&out.bytes);
            let put = self.stores.blobs.put(tenant, out.bytes).await?;
            Materialized {
                artifact_ref: put.artifact,
                size: put.size,
                message_count: counts
                    .messages
                    .unwrap_or_else(|| parts.iter().map(|c| c.message_count).sum()),
                token_count: counts.tokens,
                tier: out.tier,
            }
        };
        self.stores.meta.put_materialized(tenant, &key, &m).await?;
        Ok(Materialization {
            result: m,
            cached: false,
        })
    }

    /// The commits whose artifacts make up the context at `tip` for `stop`,
    /// oldest first.
    async fn contributing_commits(
        &self,
        tenant: &TenantId,
        tip: Commit,
        stop: Stop,
    ) -> Result<Vec<Commit>> {
        let mut path = match stop {
            Stop::Compaction => {
                self.walk(tenant, tip, None, |c| {
                    matches!(c.commit_type, CommitType::Compaction | CommitType::Snapshot)
                })
                .await?
            }
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
                    .ok_or_else(|| {
                        Error::invalid("stop", format!("stop {ancestor} does not exist"))
                    })?;
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
        Ok(path)
    }
}

fn not_an_ancestor(stop: &CommitId, tip: &CommitId) -> Error {
    Error::invalid("stop", format!("stop {stop} is not an ancestor of {tip}"))
}
