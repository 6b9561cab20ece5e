//! The hot result cache: recent materializations held in memory, and their
//! storage written behind the answer.
//!
//! A materialize with the cache on answers from memory when the same
//! (commit, stop, format) was built recently, and builds on its parent's
//! result in memory when that is held: the parent's bytes are not read
//! again, not verified again, and when the new result starts with the
//! whole parent (a pure append: raw, Claude Code) not hashed again either,
//! since every entry keeps a BLAKE3 hasher fed every byte of its result.
//! Each new result is answered at once and stored (the file first, then
//! the cache row, then the cache budget) by a background task.
//!
//! # Rules
//! - **Bounded**: the entries' bytes (each result's length plus
//!   [`ENTRY_OVERHEAD`] for its hasher and record) stay within the budget
//!   (`CTX_HOT_CACHE_BYTES`), least recently used dropped first; a result
//!   larger than the budget is not held. A budget of 0 turns the whole
//!   feature off: every result is stored before it is answered.
//! - **Never stale**: whatever deletes cached results or the content they
//!   were built from (session erase, eviction, tenant erase) calls
//!   [`HotCache::purge`] first, which waits for the tenant's writes in
//!   flight, bumps the tenant's generation and drops its entries. A write
//!   still pending then finds the generation changed and writes nothing,
//!   and an insert built before the purge is refused, so no erased content
//!   is served or stored again.
//! - **Readers see a row only after its file**: the background task writes
//!   the file before the row, as a synchronous materialize does; a missing
//!   file is a miss.
//! - **Pending writes are bounded too**: the bytes of results waiting to
//!   be stored behind their answer stay within the same budget. A result
//!   that would pass it is stored before it is answered, so a disk slower
//!   than the materializes slows them down instead of growing memory.
//! - **A lost write loses a cache entry**: a process that stops before its
//!   writes land loses only those (rebuilt on demand); `ctx serve` awaits
//!   them ([`Service::flush_cache_writes`]) before it shuts down.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use super::Service;
use crate::id::{ArtifactRef, TenantId};
use crate::store::{MaterializeKey, Materialized};

/// What an entry costs the budget besides its result's bytes: the hasher
/// (BLAKE3 keeps a stack of chaining values, ~2 KB) and the record.
pub(super) const ENTRY_OVERHEAD: u64 = std::mem::size_of::<Hot>() as u64;

/// The bytes an entry of a `len`-byte result counts against the budget.
fn cost(len: usize) -> u64 {
    len as u64 + ENTRY_OVERHEAD
}

/// A result held in memory.
#[derive(Clone)]
pub(super) struct Hot {
    /// What a cache entry records of it.
    pub(super) m: Materialized,
    /// Its bytes.
    pub(super) bytes: Bytes,
    /// A BLAKE3 hasher fed every byte of `bytes` (not finalized), so that a
    /// result extending these bytes is hashed by feeding it only its tail.
    pub(super) hasher: blake3::Hasher,
}

/// An entry with its place in the LRU order.
struct Slot {
    hot: Arc<Hot>,
    tick: u64,
}

type Key = (TenantId, MaterializeKey);

/// The entries, their LRU order and the tenants' generations.
#[derive(Default)]
struct State {
    entries: HashMap<Key, Slot>,
    /// The keys held per result reference (several keys may name the same
    /// bytes, e.g. `stop: root` and `stop: after` a parentless root).
    by_ref: HashMap<(TenantId, ArtifactRef), Vec<MaterializeKey>>,
    /// Least recently used first.
    lru: BTreeMap<u64, Key>,
    tick: u64,
    bytes: u64,
    /// Bumped by each purge of the tenant; absent is 0.
    generations: HashMap<TenantId, u64>,
}

impl State {
    fn remove(&mut self, key: &Key) -> Option<Slot> {
        let slot = self.entries.remove(key)?;
        self.lru.remove(&slot.tick);
        self.bytes -= cost(slot.hot.bytes.len());
        let r = (key.0.clone(), slot.hot.m.artifact_ref);
        if let Some(keys) = self.by_ref.get_mut(&r) {
            keys.retain(|k| k != &key.1);
            if keys.is_empty() {
                self.by_ref.remove(&r);
            }
        }
        Some(slot)
    }

    fn touch(&mut self, key: &Key) -> Option<Arc<Hot>> {
        self.tick += 1;
        let tick = self.tick;
        let slot = self.entries.get_mut(key)?;
        self.lru.remove(&slot.tick);
        slot.tick = tick;
        self.lru.insert(tick, key.clone());
        Some(slot.hot.clone())
    }
}

/// The hot result cache of one process (see the module documentation).
pub(crate) struct HotCache {
    budget: u64,
    state: Mutex<State>,
    /// Held shared by each background write while it checks its
    /// generation and writes; held exclusively by a purge while it bumps.
    writes: tokio::sync::RwLock<()>,
    /// Background writes not finished yet.
    pending: tokio::sync::watch::Sender<usize>,
    /// The bytes of the results those writes hold (within `budget`).
    pending_bytes: std::sync::atomic::AtomicU64,
    /// Tests hold this exclusively to keep background writes from
    /// starting (a write waits for it before anything else).
    #[cfg(test)]
    pub(super) gate: tokio::sync::RwLock<()>,
}

impl HotCache {
    /// A cache holding at most `budget` bytes of results; 0 for none.
    pub(crate) fn new(budget: u64) -> Self {
        HotCache {
            budget,
            state: Mutex::default(),
            writes: tokio::sync::RwLock::new(()),
            pending: tokio::sync::watch::Sender::new(0),
            pending_bytes: std::sync::atomic::AtomicU64::new(0),
            #[cfg(test)]
            gate: tokio::sync::RwLock::new(()),
        }
    }

    /// Whether the cache is on (a budget above 0).
    pub(super) fn enabled(&self) -> bool {
        self.budget > 0
    }

    /// Whether a result of `len` bytes is held (the cache is on and it
    /// fits the budget); one that is not is stored before it is answered.
    pub(super) fn holds(&self, len: usize) -> bool {
        self.enabled() && cost(len) <= self.budget
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The tenant's generation: read before building a result, handed to
    /// [`HotCache::insert`] and [`HotCache::write_behind`].
    pub(super) fn generation(&self, tenant: &TenantId) -> u64 {
        self.state().generations.get(tenant).copied().unwrap_or(0)
    }

    /// The result held for `key`, made most recently used.
    pub(super) fn get(&self, tenant: &TenantId, key: &MaterializeKey) -> Option<Arc<Hot>> {
        if !self.enabled() {
            return None;
        }
        self.state().touch(&(tenant.clone(), key.clone()))
    }

    /// The bytes of a held result by their reference.
    pub(super) fn bytes_of(&self, tenant: &TenantId, artifact: &ArtifactRef) -> Option<Bytes> {
        if !self.enabled() {
            return None;
        }
        let mut state = self.state();
        let key = state
            .by_ref
            .get(&(tenant.clone(), *artifact))?
            .first()?
            .clone();
        state.touch(&(tenant.clone(), key)).map(|h| h.bytes.clone())
    }

    /// Holds `hot` for `key`, built while the tenant's generation was
    /// `generation`: refused (false) when a purge came since, or when it is
    /// larger than the whole budget; otherwise the least recently used
    /// entries are dropped until it fits.
    pub(super) fn insert(
        &self,
        tenant: &TenantId,
        key: &MaterializeKey,
        hot: Arc<Hot>,
        generation: u64,
    ) -> bool {
        if !self.holds(hot.bytes.len()) {
            return false;
        }
        let size = cost(hot.bytes.len());
        let mut state = self.state();
        if state.generations.get(tenant).copied().unwrap_or(0) != generation {
            return false;
        }
        let k = (tenant.clone(), key.clone());
        state.remove(&k);
        while state.bytes + size > self.budget {
            let Some(oldest) = state.lru.values().next().cloned() else {
                break;
            };
            state.remove(&oldest);
        }
        state.tick += 1;
        let tick = state.tick;
        state
            .by_ref
            .entry((tenant.clone(), hot.m.artifact_ref))
            .or_default()
            .push(key.clone());
        state.bytes += size;
        state.lru.insert(tick, k.clone());
        state.entries.insert(k, Slot { hot, tick });
        true
    }

    /// Drops every entry of `tenant` and stops its pending writes: waits
    /// for its writes in flight to finish, then bumps its generation, so a
    /// write not yet started writes nothing and a result built before now
    /// is not held. Call it before deleting cached results or what they
    /// were built from.
    pub(super) async fn purge(&self, tenant: &TenantId) {
        let _writes = self.writes.write().await;
        let mut state = self.state();
        *state.generations.entry(tenant.clone()).or_insert(0) += 1;
        let keys: Vec<Key> = state
            .entries
            .keys()
            .filter(|(t, _)| t == tenant)
            .cloned()
            .collect();
        for k in keys {
            state.remove(&k);
        }
    }

    /// Runs `work` (an erase or eviction of `tenant`'s content) between
    /// two purges of the tenant: nothing built on the content before it
    /// starts is held or stored behind, and nothing a materialize built
    /// while it ran, whether it succeeded or failed partway.
    pub(super) async fn purging<T>(
        &self,
        tenant: &TenantId,
        work: impl Future<Output = crate::error::Result<T>>,
    ) -> crate::error::Result<T> {
        self.purge(tenant).await;
        let result = work.await;
        self.purge(tenant).await;
        result
    }

    /// Runs `write` (the storing of a `len`-byte result) in a background
    /// task unless a purge of `tenant` comes first (the generation is no
    /// longer `generation` when it starts); a purge waits for a write in
    /// flight. A failed write is logged: it loses a cache entry, nothing
    /// else. Refused when the pending writes' bytes would pass the budget:
    /// then `write` is handed back, for the caller to run before it
    /// answers.
    #[must_use]
    pub(super) fn write_behind<F>(
        self: &Arc<Self>,
        tenant: TenantId,
        generation: u64,
        len: usize,
        write: F,
    ) -> Option<F>
    where
        F: Future<Output = crate::error::Result<()>> + Send + 'static,
    {
        use std::sync::atomic::Ordering;
        let len = len as u64;
        let reserved = self
            .pending_bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(len).filter(|&n| n <= self.budget)
            })
            .is_ok();
        if !reserved {
            return Some(write);
        }
        self.pending.send_modify(|n| *n += 1);
        let done = Pending(self.clone(), len);
        let this = self.clone();
        tokio::spawn(async move {
            let _done = done;
            #[cfg(test)]
            let _gate = this.gate.read().await;
            let _writes = this.writes.read().await;
            if this.generation(&tenant) != generation {
                return;
            }
            if let Err(e) = write.await {
                tracing::warn!(%tenant, error = %e, "storing a materialization in the background failed");
            }
        });
        None
    }

    /// Waits until no background write is pending.
    pub(super) async fn flush(&self) {
        let mut rx = self.pending.subscribe();
        // The sender lives in `self`: the channel cannot close meanwhile.
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    /// Bytes held (with [`ENTRY_OVERHEAD`] per entry).
    #[cfg(test)]
    pub(super) fn held_bytes(&self) -> u64 {
        self.state().bytes
    }

    /// Entries held for `tenant`.
    #[cfg(test)]
    pub(super) fn held(&self, tenant: &TenantId) -> usize {
        self.state()
            .entries
            .keys()
            .filter(|(t, _)| t == tenant)
            .count()
    }
}

/// Counts a background write (of a result of `.1` bytes) as finished when
/// dropped (also when its task is cancelled by a runtime shutting down).
struct Pending(Arc<HotCache>, u64);

impl Drop for Pending {
    fn drop(&mut self) {
        self.0
            .pending_bytes
            .fetch_sub(self.1, std::sync::atomic::Ordering::AcqRel);
        self.0.pending.send_modify(|n| *n -= 1);
    }
}

impl Service {
    /// Waits for the materializations being stored in the background (the
    /// hot result cache's writes) to land. `ctx serve` calls it before it
    /// shuts down; a test that looks at cached files or rows right after a
    /// materialize calls it first.
    pub async fn flush_cache_writes(&self) {
        self.hot.flush().await;
    }
}

#[cfg(test)]
mod tests;
