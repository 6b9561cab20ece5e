//! Every S3 key and DynamoDB key of the aws backends, built and parsed here
//! and nowhere else. Numbers are zero-padded so that string order is
//! numeric order; times are shifted so that negative ones sort too.
//!
//! Table layout (one table, string `pk` / `sk`; see docs/adr/0004):
//!
//! | item | pk | sk |
//! |---|---|---|
//! | commit by id | `T#<tenant>#C#<ctx id>` | `C` |
//! | commit in its run | `T#<tenant>#L#<lineage id>` | `D#<depth, 20 digits>` |
//! | timeline entry | `T#<tenant>#P#<principal>` | `TS#<µs, 20 digits>#<ctx id>` |
//! | ref (`lk` = `T#<tenant>#REF`, `ls` = `<name>`: the `listing` index) | `T#<tenant>#REF#<name>` | `R` |
//! | materialization | `T#<tenant>#M#<ctx id>` | `<stop>#<format>` |
//! | branch record | `T#<tenant>#BR#<br id>` | `B` |
//! | session's branch meta (active count, owner) | `T#<tenant>#SS#<session>` | `META` |
//! | session's active branch | `T#<tenant>#SS#<session>` | `A#<br id>` |
//! | session's branch, any status (what an erase lists; older branches get theirs from `ctx tenants backfill-index`) | `T#<tenant>#SS#<session>` | `M#<br id>` |
//! | session's creation window | `T#<tenant>#SS#<session>` | `W#<minute start s, 20 digits>` |
//! | tenant's active branch count | `T#<tenant>#BRANCHES` | `ACTIVE` |
//! | memory of an ended branch (record in `r`) | `T#<tenant>#MEM` | `<µs, 20 digits>#<mem id>` |
//! | bearer token (hash → tenant) | `TOKENS` | `<64 hex of its hash>` |
//! | agent record (settings, clear, working-context pointer) | `T#<tenant>#AG#<agent>` | `A` |
//! | agent save | `T#<tenant>#AG#<agent>` | `S#<sav id>` (ids sort by time) |
//! | commit of a session | `T#<tenant>#S#<session>` | `<ctx id>` |
//! | session's last write (µs in `last`; `lk` = `T#<tenant>#SL`, `ls` = `<session>`: the `listing` index) | `T#<tenant>#S#<session>` | `LAST` |
//! | child of a commit | `T#<tenant>#K#<parent id>` | `<ctx id>` |
//! | user of an artifact | `T#<tenant>#A#<64 hex>` | `C#<ctx id>` or `M#<ctx id>#<stop>#<format>` |
//! | pin | `T#<tenant>#PIN` | `<session\|ref>#<name>` |
//!
//! Tokens are the one item kind not under a tenant's prefix: a token is
//! what finds the tenant. `TOKENS` cannot collide with a `T#` partition.
//!
//! Global secondary indexes (both keys-only):
//!
//! | index | partition key | sort key | items |
//! |---|---|---|---|
//! | `missing_summary` | `nosum` = `<tenant>#<shard, 2 digits>` | `ts` (created µs) | commits by id lacking a summary |
//! | `listing` | `lk` = `T#<tenant>#REF` or `T#<tenant>#SL` | `ls` = ref name or session | refs, sessions' last writes |
//!
//! No key takes every write of a tenant: a commit's by-id item is on its
//! own partition and lands in one of [`SUMMARY_SHARDS`] index partitions
//! of its tenant ([`summary_shard`], from its id's hash); a ref move and a
//! session's last write are on the ref's and the session's own partitions,
//! and leave the `listing` index alone, whose keys they never change (a
//! keys-only index is written only when an item's key attributes change:
//! when a ref or a session first appears, or goes).

use crate::agent::SaveId;
use crate::format::FormatId;
use crate::id::{ArtifactRef, BranchId, CommitId, Hash, Principal, RefName, TenantId};
use crate::store::BlobArea;

/// The S3 key of an artifact: `cas/<tenant>/<2 hex>/<64 hex>`.
pub fn blob_key(tenant: &TenantId, artifact: &ArtifactRef) -> String {
    let hex = artifact.hash().to_hex();
    format!("cas/{tenant}/{}/{hex}", &hex[..2])
}

/// The S3 key where a direct upload of `artifact` is staged until it is
/// verified: `uploads/<tenant>/<64 hex>`.
pub fn upload_key(tenant: &TenantId, artifact: &ArtifactRef) -> String {
    format!("uploads/{tenant}/{}", artifact.hash().to_hex())
}

/// Parses [`blob_key`].
pub fn parse_blob_key(key: &str) -> Option<(TenantId, ArtifactRef)> {
    let mut parts = key.strip_prefix("cas/")?.split('/');
    let (tenant, shard, hex) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || hex.get(..2) != Some(shard) {
        return None;
    }
    Some((tenant.parse().ok()?, format!("art-{hex}").parse().ok()?))
}

/// Where cached (ephemeral) artifacts live: a lifecycle rule in
/// template.yaml expires objects under it.
pub const CACHE_PREFIX: &str = "cache/";
/// Where direct uploads are staged: a lifecycle rule in template.yaml
/// expires objects under it.
pub const UPLOADS_PREFIX: &str = "uploads/";

/// The S3 key of an artifact in `area`: [`blob_key`] for durable ones,
/// `cache/<tenant>/<2 hex>/<64 hex>` for cached ones, [`upload_key`] for
/// staged ones.
pub fn area_key(tenant: &TenantId, area: BlobArea, artifact: &ArtifactRef) -> String {
    match area {
        BlobArea::Durable => blob_key(tenant, artifact),
        BlobArea::Cache => {
            let hex = artifact.hash().to_hex();
            format!("{CACHE_PREFIX}{tenant}/{}/{hex}", &hex[..2])
        }
        BlobArea::Staged => upload_key(tenant, artifact),
    }
}

/// The prefix of every key of `tenant`'s `area` (what a listing asks
/// for); keys under it sort in hash order.
pub fn area_prefix(tenant: &TenantId, area: BlobArea) -> String {
    match area {
        BlobArea::Durable => format!("cas/{tenant}/"),
        BlobArea::Cache => format!("{CACHE_PREFIX}{tenant}/"),
        BlobArea::Staged => format!("{UPLOADS_PREFIX}{tenant}/"),
    }
}

/// Parses [`area_key`] of `tenant`'s `area`.
pub fn parse_area_key(tenant: &TenantId, area: BlobArea, key: &str) -> Option<ArtifactRef> {
    let rest = key.strip_prefix(&area_prefix(tenant, area))?;
    let hex = match area {
        BlobArea::Staged => rest,
        BlobArea::Durable | BlobArea::Cache => {
            let (shard, hex) = rest.split_once('/')?;
            if hex.get(..2) != Some(shard) {
                return None;
            }
            hex
        }
    };
    let artifact: ArtifactRef = format!("art-{hex}").parse().ok()?;
    (area_key(tenant, area, &artifact) == key).then_some(artifact)
}

/// The start of every commit by-id partition of `tenant` (the collector's
/// scan filters on it).
pub fn commit_pk_prefix(tenant: &TenantId) -> String {
    format!("T#{tenant}#C#")
}

/// The start of every materialization partition of `tenant`.
pub fn materialized_pk_prefix(tenant: &TenantId) -> String {
    format!("T#{tenant}#M#")
}

/// The partition of a commit's by-id item.
pub fn commit_pk(tenant: &TenantId, id: &CommitId) -> String {
    format!("T#{tenant}#C#{id}")
}

/// Parses [`commit_pk`]: the tenant and the commit.
pub fn parse_commit_pk(pk: &str) -> Option<(TenantId, CommitId)> {
    let (tenant, id) = pk.strip_prefix("T#")?.split_once("#C#")?;
    let parsed = (tenant.parse().ok()?, id.parse().ok()?);
    (commit_pk(&parsed.0, &parsed.1) == pk).then_some(parsed)
}

/// The sort key of a by-id item.
pub const COMMIT_SK: &str = "C";

/// The partition holding a lineage run.
pub fn lineage_pk(tenant: &TenantId, lineage: &CommitId) -> String {
    format!("T#{tenant}#L#{lineage}")
}

/// The sort key of the commit at `depth` in its run.
pub fn depth_sk(depth: u64) -> String {
    format!("D#{depth:020}")
}

/// Parses [`depth_sk`].
pub fn parse_depth_sk(sk: &str) -> Option<u64> {
    let digits = sk.strip_prefix("D#")?;
    (digits.len() == 20).then(|| digits.parse().ok()).flatten()
}

/// The partition of a principal's timeline.
pub fn timeline_pk(tenant: &TenantId, principal: &Principal) -> String {
    format!("T#{tenant}#P#{principal}")
}

/// Maps µs since the epoch to an unsigned value with the same order.
fn order_preserving(micros: i64) -> u64 {
    (micros as u64) ^ (1 << 63)
}

/// The sort key of a timeline entry.
pub fn timeline_sk(micros: i64, id: &CommitId) -> String {
    format!("TS#{:020}#{id}", order_preserving(micros))
}

/// The largest sort key of any entry at or before `micros`.
pub fn timeline_upper_bound(micros: i64) -> String {
    // '~' sorts after every character of a ctx id.
    format!("TS#{:020}#~", order_preserving(micros))
}

/// Parses [`timeline_sk`].
pub fn parse_timeline_sk(sk: &str) -> Option<(i64, CommitId)> {
    let rest = sk.strip_prefix("TS#")?;
    let (digits, id) = rest.split_once('#')?;
    if digits.len() != 20 {
        return None;
    }
    let shifted: u64 = digits.parse().ok()?;
    Some(((shifted ^ (1 << 63)) as i64, id.parse().ok()?))
}

/// The partition of a ref: its own, so that ref moves spread (the name is
/// the last component, so `#` in it is harmless).
pub fn ref_pk(tenant: &TenantId, name: &RefName) -> String {
    format!("T#{tenant}#REF#{name}")
}

/// The sort key of a ref item.
pub const REF_SK: &str = "R";

/// The keys-only index listing a tenant's refs and sessions: partition
/// key `lk` ([`refs_list_key`], [`sessions_list_key`]), sort key `ls`
/// (the ref's name, the session). Eventually consistent, as every index.
pub const LISTING_INDEX: &str = "listing";

/// The `lk` of every ref of `tenant` (listing by prefix is a range of `ls`).
pub fn refs_list_key(tenant: &TenantId) -> String {
    format!("T#{tenant}#REF")
}

/// The `ls` of a ref.
pub fn ref_list_sk(name: &RefName) -> String {
    name.as_str().to_owned()
}

/// The sparse, keys-only index of commits lacking a summary: partition
/// key `nosum` ([`summary_queue_key`]), sort key `ts` (created µs).
pub const SUMMARY_INDEX: &str = "missing_summary";

/// How many partitions a tenant's summary queue (the `missing_summary`
/// index) is split over.
pub const SUMMARY_SHARDS: u8 = 16;

/// The shard of commit `id` in its tenant's summary queue, below
/// [`SUMMARY_SHARDS`]: a stable function of the id (the first byte of the
/// BLAKE3 hash of its bytes), so it spreads whatever the ids look like.
pub fn summary_shard(id: &CommitId) -> u8 {
    blake3::hash(id.as_bytes()).as_bytes()[0] % SUMMARY_SHARDS
}

/// The `missing_summary` partition key (`nosum`) of `tenant`'s shard
/// `shard`: `<tenant>#<shard, 2 digits>`.
pub fn summary_queue_key(tenant: &TenantId, shard: u8) -> String {
    format!("{tenant}#{shard:02}")
}

/// The `nosum` of commit `id` of `tenant` while it lacks a summary.
pub fn summary_queue_key_of(tenant: &TenantId, id: &CommitId) -> String {
    summary_queue_key(tenant, summary_shard(id))
}

/// The partition of a commit's cached materializations.
pub fn materialized_pk(tenant: &TenantId, commit: &CommitId) -> String {
    format!("T#{tenant}#M#{commit}")
}

/// The sort key of one cached materialization.
pub fn materialized_sk(stop: &str, format: &FormatId) -> String {
    format!("{stop}#{format}")
}

/// The partition of an agent's record and saves (the agent, a principal,
/// is the last component).
pub fn agent_pk(tenant: &TenantId, agent: &Principal) -> String {
    format!("T#{tenant}#AG#{agent}")
}

/// The start of every agent partition of `tenant`.
pub fn agent_pk_prefix(tenant: &TenantId) -> String {
    format!("T#{tenant}#AG#")
}

/// The sort key of an agent's record.
pub const AGENT_SK: &str = "A";

/// The sort-key prefix of an agent's saves.
pub const SAVE_SK_PREFIX: &str = "S#";

/// The sort key of a save.
pub fn save_sk(id: &SaveId) -> String {
    format!("{SAVE_SK_PREFIX}{id}")
}

/// Parses [`save_sk`].
pub fn parse_save_sk(sk: &str) -> Option<SaveId> {
    sk.strip_prefix(SAVE_SK_PREFIX)?.parse().ok()
}

/// The partition of a branch record.
pub fn branch_pk(tenant: &TenantId, id: &BranchId) -> String {
    format!("T#{tenant}#BR#{id}")
}

/// Parses [`branch_pk`]: the tenant and the branch.
pub fn parse_branch_pk(pk: &str) -> Option<(TenantId, BranchId)> {
    let (tenant, id) = pk.strip_prefix("T#")?.split_once("#BR#")?;
    let parsed = (tenant.parse().ok()?, id.parse().ok()?);
    (branch_pk(&parsed.0, &parsed.1) == pk).then_some(parsed)
}

/// The sort key of a branch record.
pub const BRANCH_SK: &str = "B";

/// The partition of a tenant's memories (`branch::memories`).
pub fn memory_pk(tenant: &TenantId) -> String {
    format!("T#{tenant}#MEM")
}

/// The sort key of a memory: its extraction time (µs, order-preserving,
/// 20 digits, so a query newest first is a reverse scan) and its id.
pub fn memory_sk(micros: i64, id: &crate::id::MemoryId) -> String {
    format!("{:020}#{id}", order_preserving(micros))
}

/// The partition of a session's branch bookkeeping (the session id is free
/// text; `#` in it is harmless since it is the last component).
pub fn session_pk(tenant: &TenantId, session: &str) -> String {
    format!("T#{tenant}#SS#{session}")
}

/// The sort key of a session's meta item (active count, owner).
pub const SESSION_META_SK: &str = "META";

/// The sort-key prefix of a session's active-branch items.
pub const ACTIVE_PREFIX: &str = "A#";

/// The sort key of one active branch of a session.
pub fn active_sk(id: &BranchId) -> String {
    format!("{ACTIVE_PREFIX}{id}")
}

/// The sort-key prefix of a session's member items: one per branch it
/// ever had, in any status (what an erase lists).
pub const MEMBER_PREFIX: &str = "M#";

/// The sort key of one branch of a session.
pub fn member_sk(id: &BranchId) -> String {
    format!("{MEMBER_PREFIX}{id}")
}

/// Parses [`active_sk`].
pub fn parse_active_sk(sk: &str) -> Option<BranchId> {
    sk.strip_prefix(ACTIVE_PREFIX)?.parse().ok()
}

/// The sort key of a session's creation count in the minute starting at
/// `window` (seconds since the epoch).
pub fn window_sk(window: i64) -> String {
    format!("W#{:020}", order_preserving(window))
}

/// The partition of a tenant's active-branch count.
pub fn tenant_branches_pk(tenant: &TenantId) -> String {
    format!("T#{tenant}#BRANCHES")
}

/// The sort key of that count.
pub const TENANT_ACTIVE_SK: &str = "ACTIVE";

/// The partition holding every bearer token.
pub const TOKENS_PK: &str = "TOKENS";

/// The partition of the tenant registry: one item per tenant that has a
/// root commit, written with it, so a scheduled job can find every
/// tenant's summary queue (a GSI's partitions cannot be listed). Like
/// `TOKENS`, it cannot collide with a `T#` partition.
pub const TENANTS_PK: &str = "TENANTS";

/// The sort key of a tenant in the registry: its name.
pub fn tenant_sk(tenant: &TenantId) -> String {
    tenant.to_string()
}

/// The sort key of a token: its hash in hex.
pub fn token_sk(hash: &Hash) -> String {
    hash.to_hex()
}

/// Parses [`token_sk`].
pub fn parse_token_sk(sk: &str) -> Option<Hash> {
    sk.parse().ok()
}

/// The sort-key prefix of the tokens whose public id is `id`
/// (`tok-` + the first 12 hex digits of the hash, see
/// [`token_id`](crate::store::token_id)); `None` for anything else.
pub fn token_id_prefix(id: &str) -> Option<&str> {
    let hex = id.strip_prefix("tok-")?;
    (hex.len() == 12 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))).then_some(hex)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tenant() -> impl Strategy<Value = TenantId> {
        "[a-z0-9][a-z0-9_-]{0,20}".prop_map(|s| s.parse().unwrap())
    }

    proptest! {
        #[test]
        fn save_keys_round_trip_and_sort_by_time(a in -8_000_000_000_000_000_000i64..8_000_000_000_000_000_000, b in -8_000_000_000_000_000_000i64..8_000_000_000_000_000_000) {
            let (t, p): (TenantId, Principal) = ("t".parse().unwrap(), "p".parse().unwrap());
            let art = ArtifactRef::of(b"s");
            let ia = SaveId::derive(&t, &p, crate::clock::micros_to_time(a), &art);
            let ib = SaveId::derive(&t, &p, crate::clock::micros_to_time(b), &art);
            prop_assert_eq!(parse_save_sk(&save_sk(&ia)), Some(ia));
            if a < b {
                prop_assert!(save_sk(&ia) < save_sk(&ib));
            }
        }

        #[test]
        fn blob_keys_round_trip(t in tenant(), bytes in any::<[u8; 32]>()) {
            let art = ArtifactRef::from_hash(crate::Hash::from_bytes(bytes));
            let key = blob_key(&t, &art);
            prop_assert_eq!(parse_blob_key(&key), Some((t, art)));
        }

        #[test]
        fn area_keys_round_trip_and_sort_by_hash(t in tenant(), x in any::<[u8; 32]>(), y in any::<[u8; 32]>()) {
            let (a, b) = (
                ArtifactRef::from_hash(crate::Hash::from_bytes(x)),
                ArtifactRef::from_hash(crate::Hash::from_bytes(y)),
            );
            for area in BlobArea::ALL {
                let key = area_key(&t, area, &a);
                prop_assert!(key.starts_with(&area_prefix(&t, area)));
                prop_assert_eq!(parse_area_key(&t, area, &key), Some(a));
                prop_assert_eq!(key.cmp(&area_key(&t, area, &b)), a.cmp(&b));
            }
            prop_assert_eq!(area_key(&t, BlobArea::Durable, &a), blob_key(&t, &a));
        }

        #[test]
        fn depth_keys_round_trip_and_sort_numerically(a in any::<u64>(), b in any::<u64>()) {
            prop_assert_eq!(parse_depth_sk(&depth_sk(a)), Some(a));
            prop_assert_eq!(depth_sk(a).cmp(&depth_sk(b)), a.cmp(&b));
        }

        #[test]
        fn timeline_keys_round_trip_and_sort_by_time(a in any::<i64>(), b in any::<i64>(), x in any::<[u8; 16]>(), y in any::<[u8; 16]>()) {
            let (ix, iy) = (CommitId::from_bytes(x), CommitId::from_bytes(y));
            prop_assert_eq!(parse_timeline_sk(&timeline_sk(a, &ix)), Some((a, ix)));
            prop_assert_eq!(timeline_sk(a, &ix).cmp(&timeline_sk(b, &iy)), (a, ix).cmp(&(b, iy)));
            prop_assert!(timeline_sk(a, &ix) <= timeline_upper_bound(a));
            if a < b {
                prop_assert!(timeline_upper_bound(a) < timeline_sk(b, &iy));
            }
        }

        #[test]
        fn token_keys_round_trip_and_ids_find_their_prefix(bytes in any::<[u8; 32]>()) {
            let hash = crate::Hash::from_bytes(bytes);
            prop_assert_eq!(parse_token_sk(&token_sk(&hash)), Some(hash));
            let id = crate::store::token_id(&hash);
            let prefix = token_id_prefix(&id).expect("a token id");
            prop_assert!(token_sk(&hash).starts_with(prefix));
        }

        #[test]
        fn branch_keys_round_trip_and_windows_sort_by_time(x in any::<[u8; 16]>(), a in any::<i64>(), b in any::<i64>()) {
            let id = BranchId::from_bytes(x);
            prop_assert_eq!(parse_active_sk(&active_sk(&id)), Some(id));
            prop_assert_eq!(window_sk(a).cmp(&window_sk(b)), a.cmp(&b));
        }
    }

    #[test]
    fn branch_keys_are_pinned() {
        let t: TenantId = "acme".parse().unwrap();
        let id = BranchId::from_bytes([0xcd; 16]);
        assert_eq!(
            branch_pk(&t, &id),
            "T#acme#BR#br-cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd"
        );
        assert_eq!(session_pk(&t, "s-1"), "T#acme#SS#s-1");
        assert_eq!(active_sk(&id), "A#br-cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd");
        assert_eq!(window_sk(60), "W#09223372036854775868");
        assert_eq!(tenant_branches_pk(&t), "T#acme#BRANCHES");
        assert_eq!(parse_active_sk("A#br-1"), None);
    }

    #[test]
    fn token_keys_are_pinned() {
        let hash = crate::Hash::of(b"secret");
        assert_eq!(TOKENS_PK, "TOKENS");
        assert_eq!(token_sk(&hash), hash.to_hex());
        assert_eq!(token_id_prefix("tok-0123456789ab"), Some("0123456789ab"));
        for bad in [
            "tok-",
            "tok-0123456789aB",
            "tok-0123456789abc",
            "0123456789ab",
            "",
        ] {
            assert_eq!(token_id_prefix(bad), None, "{bad:?}");
        }
    }

    /// The hot keys of issue 24 item 5 spread: 16,000 commits of one
    /// tenant fill every summary-queue shard within 10% of the mean (the
    /// binomial standard deviation is 31 of 1,000, so 10% is over 3σ),
    /// whether the ids are derived (as checkpoints make them) or
    /// sequential; and one tenant's refs and sessions each get a partition
    /// of their own, while the listing index's keys are the tenant's.
    #[test]
    fn one_tenants_hot_keys_spread_over_partitions() {
        const N: usize = 16_000;
        let t: TenantId = "acme".parse().unwrap();
        let mean = N / usize::from(SUMMARY_SHARDS);
        let tolerance = mean / 10;
        let derived: Vec<CommitId> = (0..N as i64)
            .map(|i| {
                let art = ArtifactRef::of(&i.to_le_bytes());
                CommitId::derive(&t, None, &art, 1_795_702_020_000_000 + i, "claude-code")
            })
            .collect();
        let sequential: Vec<CommitId> = (0..N as u128)
            .map(|i| CommitId::from_bytes(i.to_be_bytes()))
            .collect();
        for (what, ids) in [("derived", &derived), ("sequential", &sequential)] {
            let mut per_shard = vec![0usize; usize::from(SUMMARY_SHARDS)];
            let mut keys = std::collections::BTreeSet::new();
            for id in ids {
                per_shard[usize::from(summary_shard(id))] += 1;
                keys.insert(summary_queue_key_of(&t, id));
            }
            assert_eq!(keys.len(), usize::from(SUMMARY_SHARDS), "{what}: {keys:?}");
            for (shard, n) in per_shard.iter().enumerate() {
                assert!(
                    n.abs_diff(mean) <= tolerance,
                    "{what}: shard {shard} has {n} of {N} commits, mean {mean} ± {tolerance}: {per_shard:?}"
                );
            }
        }
        // Refs: one partition each; one listing partition key per tenant.
        let refs: Vec<RefName> = (0..N)
            .map(|i| format!("sessions/s-{i}/head").parse().unwrap())
            .collect();
        let ref_pks: std::collections::BTreeSet<String> =
            refs.iter().map(|r| ref_pk(&t, r)).collect();
        assert_eq!(ref_pks.len(), N);
        assert!(ref_pks.iter().all(|pk| pk.starts_with("T#acme#REF#")));
        // A session's hot keys (its last write, its commit entries, its
        // head ref): N sessions of one tenant, N distinct partitions each.
        let sessions: Vec<String> = (0..64).map(|i| format!("s-{i}")).collect();
        let last: std::collections::BTreeSet<String> =
            sessions.iter().map(|s| session_commits_pk(&t, s)).collect();
        assert_eq!(last.len(), sessions.len());
        let heads: std::collections::BTreeSet<String> = sessions
            .iter()
            .map(|s| ref_pk(&t, &format!("sessions/{s}").parse().unwrap()))
            .collect();
        assert_eq!(heads.len(), sessions.len());
        assert!(last.is_disjoint(&heads));
        // No per-tenant partition is left in the table's keys a checkpoint
        // writes; the listing index's keys are per tenant, written only
        // when a ref or session first appears.
        assert_eq!(refs_list_key(&t), "T#acme#REF");
        assert_eq!(sessions_list_key(&t), "T#acme#SL");
        assert!(!last.contains(&refs_list_key(&t)) && !last.contains(&sessions_list_key(&t)));
    }

    #[test]
    fn sharded_and_moved_keys_are_pinned() {
        let t: TenantId = "acme".parse().unwrap();
        let id = CommitId::from_bytes([0xab; 16]);
        let shard = summary_shard(&id);
        assert!(shard < SUMMARY_SHARDS);
        assert_eq!(
            shard,
            blake3::hash(&[0xab; 16]).as_bytes()[0] % SUMMARY_SHARDS
        );
        assert_eq!(summary_queue_key(&t, 7), "acme#07");
        assert_eq!(summary_queue_key_of(&t, &id), format!("acme#{shard:02}"));
        let name: RefName = "sessions/s-1/head".parse().unwrap();
        assert_eq!(ref_pk(&t, &name), "T#acme#REF#sessions/s-1/head");
        assert_eq!(
            (REF_SK, ref_list_sk(&name).as_str()),
            ("R", "sessions/s-1/head")
        );
        // A session's last write shares the session's partition with its
        // commit entries, under a sort key that is no ctx id.
        assert_eq!(session_commits_pk(&t, "s-1"), "T#acme#S#s-1");
        assert_eq!(SESSION_LAST_SK, "LAST");
        assert!(SESSION_LAST_SK.parse::<CommitId>().is_err());
    }

    #[test]
    fn keys_are_pinned() {
        let t: TenantId = "acme".parse().unwrap();
        let id = CommitId::from_bytes([0xab; 16]);
        assert_eq!(
            commit_pk(&t, &id),
            "T#acme#C#ctx-abababababababababababababababab"
        );
        assert_eq!(depth_sk(42), "D#00000000000000000042");
        assert_eq!((TENANTS_PK, tenant_sk(&t).as_str()), ("TENANTS", "acme"));
        assert_eq!(
            timeline_sk(0, &id),
            "TS#09223372036854775808#ctx-abababababababababababababababab"
        );
        assert_eq!(
            blob_key(&t, &ArtifactRef::of(b"hello")),
            "cas/acme/ea/ea8f163db38682925e4491c5e58d4bb3506ef8c14eb78a86e908c5624a67200f"
        );
        assert_eq!(
            area_key(&t, BlobArea::Cache, &ArtifactRef::of(b"hello")),
            "cache/acme/ea/ea8f163db38682925e4491c5e58d4bb3506ef8c14eb78a86e908c5624a67200f"
        );
        assert_eq!(
            area_key(&t, BlobArea::Staged, &ArtifactRef::of(b"hello")),
            "uploads/acme/ea8f163db38682925e4491c5e58d4bb3506ef8c14eb78a86e908c5624a67200f"
        );
        let other: TenantId = "acme2".parse().unwrap();
        assert!(
            !area_key(&other, BlobArea::Cache, &ArtifactRef::of(b"hello"))
                .starts_with(&area_prefix(&t, BlobArea::Cache))
        );
        assert!(commit_pk(&t, &id).starts_with(&commit_pk_prefix(&t)));
        assert!(
            materialized_pk(&t, &id).starts_with(&materialized_pk_prefix(&t)),
            "{}",
            materialized_pk(&t, &id)
        );
        assert_eq!(parse_depth_sk("D#42"), None);
        assert_eq!(
            parse_blob_key(
                "cas/acme/00/ea8f163db38682925e4491c5e58d4bb3506ef8c14eb78a86e908c5624a67200f"
            ),
            None
        );
    }
}

/// The partition listing a session's commits (the session id is the last
/// component, so `#` in it is harmless).
pub fn session_commits_pk(tenant: &TenantId, session: &str) -> String {
    format!("T#{tenant}#S#{session}")
}

/// The sort key of a session's last-write item, on the session's own
/// partition ([`session_commits_pk`]): not a ctx id, so it cannot collide
/// with the session's commit entries (which begin `ctx-`).
pub const SESSION_LAST_SK: &str = "LAST";

/// The `lk` of every session's last-write item of `tenant` in the
/// [`LISTING_INDEX`] (its `ls` is the session).
pub fn sessions_list_key(tenant: &TenantId) -> String {
    format!("T#{tenant}#SL")
}

/// The partition listing a commit's children.
pub fn children_pk(tenant: &TenantId, parent: &CommitId) -> String {
    format!("T#{tenant}#K#{parent}")
}

/// The partition listing an artifact's users.
pub fn artifact_users_pk(tenant: &TenantId, artifact: &ArtifactRef) -> String {
    format!("T#{tenant}#A#{}", artifact.hash().to_hex())
}

/// The sort key of a commit using an artifact.
pub fn user_commit_sk(id: &CommitId) -> String {
    format!("C#{id}")
}

/// The sort key of a cache entry using an artifact.
pub fn user_cached_sk(commit: &CommitId, stop: &str, format: &FormatId) -> String {
    format!("M#{commit}#{stop}#{format}")
}

/// A parsed artifact-user sort key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserSk {
    /// A commit.
    Commit(CommitId),
    /// A cache entry: commit, stop, format.
    Cached(CommitId, String, String),
}

/// Parses [`user_commit_sk`] and [`user_cached_sk`].
pub fn parse_user_sk(sk: &str) -> Option<UserSk> {
    if let Some(id) = sk.strip_prefix("C#") {
        return Some(UserSk::Commit(id.parse().ok()?));
    }
    let mut parts = sk.strip_prefix("M#")?.splitn(3, '#');
    let (id, stop, format) = (parts.next()?, parts.next()?, parts.next()?);
    Some(UserSk::Cached(
        id.parse().ok()?,
        stop.to_owned(),
        format.to_owned(),
    ))
}

/// The partition of a tenant's pins.
pub fn pins_pk(tenant: &TenantId) -> String {
    format!("T#{tenant}#PIN")
}

/// The sort key of a pin: `<kind>#<name>`.
pub fn pin_sk(kind: &str, name: &str) -> String {
    format!("{kind}#{name}")
}

/// Parses a materialization sort key (`<stop>#<format>`).
pub fn parse_materialized_sk(sk: &str) -> Option<(&str, &str)> {
    sk.split_once('#')
}
