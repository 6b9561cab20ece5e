//! `ctx snapshot`: snapshot commits as optimization points (seed 000,
//! "Compaction and Chain Depth"). The context at a commit (from its
//! nearest compaction or snapshot) is stored whole as the artifact of a
//! `snapshot` commit whose parent is that commit, so a later materialize
//! starts there instead of joining the chain; a walk to the root still
//! reads the original deltas. `--ref` moves a ref onto it by
//! compare-and-swap. The batch form snapshots every ref under a prefix
//! whose chain has grown past a depth or a cost since its last compaction
//! or snapshot.

use base64::Engine as _;
use ctx_core::wire::{CheckpointRequest, MaterializeRequest};
use ctx_core::wire::{Commit, CommitType, RefMove, Trigger};
use ctx_core::{CommitId, Error, ErrorKind, RefName, Result};
use serde::Serialize;

use super::{ref_name, rev};
use crate::client::Client;
use crate::{Conn, print_json};

/// How far back the batch looks for the last compaction or snapshot (the
/// history route's page limit).
const MAX_LOOK: u64 = 1000;

/// What was made of one chain.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Snapshotted {
    /// The ref moved, if any.
    #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
    pub(crate) ref_name: Option<String>,
    /// The commit snapshotted.
    pub(crate) from: CommitId,
    /// The snapshot commit (absent on a dry run or when skipped).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) snapshot: Option<CommitId>,
    /// Commits since the last compaction or snapshot (or the root).
    pub(crate) depth: u64,
    /// Their artifacts' bytes: what a materialize joins without it.
    pub(crate) bytes: u64,
    /// Why it was not made (the ref moved meanwhile: its writer is active).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) skipped: Option<String>,
}

/// The commit `tip` and what a materialize of it joins today: the commits
/// from it back to its nearest compaction or snapshot (or the root), at
/// most [`MAX_LOOK`]; their number and bytes. One history read: its first
/// commit is the tip.
async fn chain_cost(c: &Client, tip: &CommitId) -> Result<(Commit, u64, u64)> {
    let h = c.history(tip, Some(MAX_LOOK as usize)).await?;
    let mut depth = 0;
    let mut bytes = 0;
    for commit in &h.commits {
        depth += 1;
        bytes += commit.artifact_size;
        if matches!(
            commit.commit_type,
            CommitType::Compaction | CommitType::Snapshot
        ) {
            break;
        }
    }
    let first = h
        .commits
        .into_iter()
        .next()
        .ok_or_else(|| Error::internal(format!("the history of {tip} holds no commit")))?;
    Ok((first, depth, bytes))
}

/// Snapshots `from` (its context in its own format, as one artifact),
/// moving `name` from `from` to the snapshot when given.
async fn snapshot(c: &Client, from: &Commit, name: Option<&RefName>) -> Result<CommitId> {
    let (_, bytes) = c
        .materialize_and_download(&from.id, &MaterializeRequest::default())
        .await?;
    let delta_base64 = Some(
        base64::engine::general_purpose::STANDARD
            .encode(&bytes)
            .into(),
    );
    let req = CheckpointRequest {
        parent: Some(from.id),
        commit_type: CommitType::Snapshot,
        checkpoint: Trigger::Explicit,
        delta: None,
        delta_base64,
        session_id: from.session_id.clone(),
        thread_id: from.thread_id.clone(),
        ticket_id: from.ticket_id.clone(),
        machine: from.machine.clone(),
        ref_move: name.map(|n| RefMove {
            name: n.clone(),
            expected: Some(from.id),
        }),
        ..CheckpointRequest::new(
            from.principal.clone(),
            from.template.clone(),
            from.format.clone(),
            String::new(),
        )
    };
    Ok(c.checkpoint(&req).await?.commit.id)
}

/// Runs `ctx snapshot REV [--ref NAME]`.
///
/// # Errors
/// The server's: `NotFound`, `Conflict` (the ref moved), `Gone` (an
/// evicted delta).
pub(crate) async fn run_one(r: &str, name: Option<RefName>, conn: &Conn) -> Result<()> {
    let c = conn.client()?;
    let id = rev(&c, r).await?;
    let (from, depth, bytes) = chain_cost(&c, &id).await?;
    let made = snapshot(&c, &from, name.as_ref()).await?;
    let out = Snapshotted {
        ref_name: name.map(|n| n.to_string()),
        from: id,
        snapshot: Some(made),
        depth,
        bytes,
        skipped: None,
    };
    if conn.json {
        return print_json(&out);
    }
    outln!("{made}");
    Ok(())
}

/// What the batch form snapshots.
pub(crate) struct Batch {
    /// Refs whose names start with this.
    pub(crate) prefix: String,
    /// Chains with at least this many commits since their last compaction
    /// or snapshot.
    pub(crate) min_depth: u64,
    /// Or whose commits since then hold at least this many bytes.
    pub(crate) min_bytes: Option<u64>,
    /// Only say what would be made.
    pub(crate) dry_run: bool,
}

/// Runs `ctx snapshot --all`: every ref under the prefix past the depth
/// or the cost gets a snapshot, its ref moved onto it by compare-and-swap
/// (a ref that moved meanwhile is skipped: its writer is active, and the
/// next run takes it). One line per chain snapshotted; with `--json`, the
/// list.
///
/// # Errors
/// The server's; a ref that moved is not an error.
pub(crate) async fn run_batch(b: Batch, conn: &Conn) -> Result<()> {
    let c = conn.client()?;
    let mut after: Option<String> = None;
    let mut out = Vec::new();
    loop {
        let page = c.list_refs_after(&b.prefix, None, after.as_deref()).await?;
        for r in &page.refs {
            let (from, depth, bytes) = chain_cost(&c, &r.target).await?;
            let due = depth >= b.min_depth || b.min_bytes.is_some_and(|m| bytes >= m);
            // A chain whose tip is already a snapshot has nothing to gain.
            if !due || depth <= 1 {
                continue;
            }
            let mut s = Snapshotted {
                ref_name: Some(r.name.to_string()),
                from: r.target,
                snapshot: None,
                depth,
                bytes,
                skipped: None,
            };
            if !b.dry_run {
                match snapshot(&c, &from, Some(&ref_name(r.name.as_str())?)).await {
                    Ok(id) => s.snapshot = Some(id),
                    Err(e) if e.kind == ErrorKind::Conflict => {
                        s.skipped = Some(format!("the ref moved: {}", e.message));
                    }
                    Err(e) => return Err(e),
                }
            }
            if !conn.json {
                match (&s.snapshot, &s.skipped) {
                    (Some(id), _) => outln!(
                        "{} {} <- {} ({depth} commits, {bytes} bytes)",
                        r.name,
                        id,
                        r.target
                    ),
                    (None, Some(why)) => eprintln!("{}: skipped: {why}", r.name),
                    (None, None) => outln!(
                        "{} would be snapshotted at {} ({depth} commits, {bytes} bytes)",
                        r.name,
                        r.target
                    ),
                }
            }
            out.push(s);
        }
        match page.next {
            Some(n) => after = Some(n.to_string()),
            None => break,
        }
    }
    if conn.json {
        return print_json(&out);
    }
    if out.is_empty() {
        eprintln!("no chain under {:?} is past the depth or cost", b.prefix);
    }
    Ok(())
}
