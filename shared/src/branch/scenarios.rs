//! Context-folding scenarios written once, run by the tests (which assert
//! their counts) and by `benches/folding.rs` (which prints them beside its
//! timings): SC-003's memories of completed branches and the later
//! searches that must find them.

use crate::api::submit_checkpoint;
use crate::auth::Caller;
use crate::branch::memories::{MemoryId, MemoryQuery};
use crate::branch::{BranchConfig, NewBranch, RateLimits};
use crate::service::Service;
use crate::wire::CheckpointRequest;

/// A tool's read of one ~40-line source file: ~1,400 bytes (~350 tokens).
pub fn file(i: usize) -> String {
    let mut s = format!("tool: read src/module_{i}.rs\n");
    for line in 0..40 {
        s.push_str(&format!(
            "{line:>4} | let value_{line} = compute(input, {i}, {line}); // ...\n"
        ));
    }
    s.truncate(1400);
    s.push('\n');
    s
}

/// Appends `text` as a raw `tool_call` delta on ref `name`'s tip (a root
/// when it has none); answers the commit's token count.
///
/// # Panics
/// When the checkpoint fails: a scenario's steps must all succeed.
pub async fn append(svc: &Service, caller: &Caller, name: &str, text: &str) -> u64 {
    let tip = svc
        .stores()
        .meta
        .get_ref(&caller.tenant, &name.parse().expect("ref"))
        .await
        .expect("ref read")
        .map(|r| r.target);
    let req: CheckpointRequest = serde_json::from_value(serde_json::json!({
        "parent": tip, "commit_type": "delta", "format": "raw", "delta": text,
        "template": "bench", "principal": "agent", "checkpoint": "tool_call",
        "ref": {"name": name, "expected": tip}
    }))
    .expect("a valid checkpoint request");
    submit_checkpoint(svc, &caller.tenant, req)
        .await
        .expect("checkpoint")
        .commit
        .token_count
}

/// The default branch settings with the creation limits out of the way: a
/// scenario creates its branches as fast as it can, at one instant of a
/// driven clock.
pub fn unthrottled() -> BranchConfig {
    BranchConfig {
        limits: RateLimits {
            active_per_session: 1000,
            active_per_tenant: 100_000,
            creations_per_minute: 1_000_000,
        },
        ..BranchConfig::default()
    }
}

/// A first-level branch of `session` with the default budget and timeout.
///
/// # Panics
/// When `session` is not a session id.
pub fn new_branch(
    session: &str,
    description: String,
    prompt: Option<&str>,
    inject: bool,
) -> NewBranch {
    NewBranch {
        session_id: session.parse().expect("a session id"),
        description,
        prompt: prompt.map(str::to_owned),
        budget: None,
        timeout_seconds: None,
        parent_branch: None,
        inject_memories: inject,
    }
}

const TASKS: &[&str] = &["fix", "profile", "document", "refactor", "test"];
const THINGS: &[&str] = &[
    "upload",
    "parser",
    "scheduler",
    "billing",
    "search",
    "cache",
    "login",
    "export",
    "webhook",
    "importer",
];
const AREAS: &[&str] = &["endpoint", "module", "worker"];

/// The task of branch `i`: one of [`TASKS`] on one of [`THINGS`] in one of
/// [`AREAS`].
pub fn task(i: usize) -> String {
    format!(
        "{} the {} {}",
        TASKS[i % TASKS.len()],
        THINGS[(i / TASKS.len()) % THINGS.len()],
        AREAS[i % AREAS.len()]
    )
}

/// What [`extraction`] counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extraction {
    /// Branches completed.
    pub completed: usize,
    /// Of them, those that yielded a memory.
    pub extracted: usize,
    /// Of those, the ones injectable at the default confidence (0.7).
    pub injectable: usize,
    /// Later searches whose task's memory was in the top 3.
    pub hits: usize,
    /// Later searches made (one per distinct task that had a result).
    pub searches: usize,
}

/// SC-003: `n` completed branches over seven sessions, one in ten returned
/// with nothing and no work (nothing to learn), the rest with a result and
/// every third with some work; then, per distinct task, a later search in
/// other words and order.
///
/// # Panics
/// When a step of the scenario fails.
pub async fn extraction(svc: &Service, caller: &Caller, n: usize) -> Extraction {
    let tenant = &caller.tenant;
    let mut ids = Vec::new();
    for i in 0..n {
        let b = svc
            .branch_create(
                caller,
                new_branch(&format!("sc3-{}", i % 7), task(i), None, false),
            )
            .await
            .expect("create");
        let message = if i % 10 == 9 {
            String::new()
        } else {
            if i % 3 == 0 {
                append(svc, caller, &b.chain_ref, &file(i)).await;
            }
            format!(
                "{}: done by splitting the work into batches of {}",
                task(i),
                10 + i
            )
        };
        svc.branch_return(caller, &b.branch_id, &message)
            .await
            .expect("return");
        ids.push(MemoryId::of_branch(tenant, &b.branch_id));
    }
    let all = svc
        .branching()
        .expect("branching")
        .store
        .recent_memories(tenant, usize::MAX)
        .await
        .expect("memories");
    let extracted = all.iter().filter(|m| ids.contains(&m.id)).count();
    let injectable = all
        .iter()
        .filter(|m| ids.contains(&m.id) && m.confidence >= 0.7)
        .count();
    let distinct = n.min(TASKS.len() * THINGS.len() * AREAS.len());
    let mut hits = 0;
    let mut searches = 0;
    for i in (0..distinct).filter(|i| i % 10 != 9) {
        let words = format!(
            "{} {} again, {}",
            AREAS[i % AREAS.len()],
            THINGS[(i / TASKS.len()) % THINGS.len()],
            TASKS[i % TASKS.len()]
        );
        let found = svc
            .memory_search(
                caller,
                MemoryQuery {
                    text: words,
                    limit: 3,
                    min_confidence: 0.0,
                    kind: None,
                },
            )
            .await
            .expect("search");
        searches += 1;
        if found.iter().any(|f| f.memory.title == task(i)) {
            hits += 1;
        }
    }
    Extraction {
        completed: n,
        extracted,
        injectable,
        hits,
        searches,
    }
}
