//! Tests of the branch operations over memory stores and a manual clock.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::*;
use crate::branch::Scrubbed;
use crate::branch::{BranchConfig, BranchTimer, RuleScrubber, Scrubber};
use crate::clock::{ManualClock, SeededIds};
use chrono::{DateTime, Utc};

use crate::auth::Caller;
use crate::branch::{Branching, CreatedBranch, NewBranch, ReturnedBranch};
use crate::commit::{Commit, Trigger};
use crate::error::{ErrorKind, Result};
use crate::format::translate::Tier;
use crate::id::{BranchId, CommitId, RefName, SessionId, TenantId};
use crate::service::{Service, Stop};
use crate::store::memory::MemoryBranchStore;
use crate::store::memory::{MemoryBlobStore, MemoryMetaStore};
use crate::store::{BlobStoreExt, Stores};
use crate::wire::{BranchStatusResponse, CheckpointRequest};

/// Records starts and stops.
#[derive(Default)]
struct RecordingTimer {
    started: Mutex<Vec<BranchId>>,
    stopped: Mutex<Vec<BranchId>>,
}

#[async_trait]
impl BranchTimer for RecordingTimer {
    async fn start(&self, _: &TenantId, b: &BranchId, _: DateTime<Utc>) -> Result<Option<String>> {
        self.started.lock().unwrap().push(*b);
        Ok(Some(format!("timer-{b}")))
    }
    async fn stop(&self, _: &TenantId, b: &BranchId, handle: Option<&str>) -> Result<()> {
        assert_eq!(handle, Some(format!("timer-{b}").as_str()));
        self.stopped.lock().unwrap().push(*b);
        Ok(())
    }
}

struct H {
    svc: Service,
    clock: Arc<ManualClock>,
    timer: Arc<RecordingTimer>,
    alice: Caller,
}

fn caller(tenant: &str, principal: &str) -> Caller {
    Caller {
        tenant: tenant.parse().unwrap(),
        principal: Some(principal.into()),
    }
}

fn harness_with(config: BranchConfig, scrubber: Arc<dyn Scrubber>) -> H {
    let clock = Arc::new(ManualClock::new(crate::store::conformance::t(0)));
    let stores = Stores {
        blobs: Arc::new(MemoryBlobStore::new()),
        meta: Arc::new(MemoryMetaStore::new()),
    };
    let timer = Arc::new(RecordingTimer::default());
    let svc = Service::new(stores, clock.clone()).with_branching(Branching {
        store: Arc::new(MemoryBranchStore::new()),
        timer: timer.clone(),
        scrubber,
        ids: Arc::new(SeededIds::new(5)),
        config,
    });
    H {
        svc,
        clock,
        timer,
        alice: caller("acme", "tok-alice"),
    }
}

fn harness() -> H {
    harness_with(
        BranchConfig::default(),
        Arc::new(RuleScrubber::new().unwrap()),
    )
}

/// A session id.
fn sid(s: &str) -> SessionId {
    s.parse().unwrap()
}

fn create(session: &str, description: &str) -> NewBranch {
    NewBranch {
        session_id: sid(session),
        description: description.into(),
        prompt: None,
        budget: None,
        timeout_seconds: None,
        parent_branch: None,
        inject_memories: false,
    }
}

impl H {
    /// Alice creates a branch of `session`.
    async fn create(&self, session: &str, description: &str) -> CreatedBranch {
        self.svc
            .branch_create(&self.alice, create(session, description))
            .await
            .unwrap()
    }

    /// Alice returns `id` with `message`.
    async fn ret(&self, id: &BranchId, message: &str) -> ReturnedBranch {
        self.svc
            .branch_return(&self.alice, id, message)
            .await
            .unwrap()
    }

    /// Checkpoints `text` onto ref `name` (creating the chain if needed).
    async fn append(&self, name: &str, text: &str) -> Result<(Commit, Option<BudgetNotice>)> {
        let tenant = &self.alice.tenant;
        let name: RefName = name.parse().unwrap();
        let tip = self
            .svc
            .stores()
            .meta
            .get_ref(tenant, &name)
            .await
            .unwrap()
            .map(|r| r.target);
        self.clock.advance_micros(1000);
        let req: CheckpointRequest = serde_json::from_value(serde_json::json!({
            "parent": tip, "commit_type": "delta", "format": "raw", "delta": text,
            "template": "t", "principal": "alice", "checkpoint": "tool_call",
            "ref": {"name": name.as_str(), "expected": tip}
        }))
        .unwrap();
        let done = crate::api::submit_checkpoint(&self.svc, tenant, req).await?;
        Ok((done.commit, done.budget))
    }

    async fn text_of(&self, name: &str) -> String {
        let tenant = &self.alice.tenant;
        let tip = self
            .svc
            .get_ref(tenant, &name.parse().unwrap())
            .await
            .unwrap()
            .target;
        let (text, _) = self.materialized(&tip, None).await;
        text
    }

    /// The context at `tip` from the root, in `format`, as text, and how it
    /// was produced.
    async fn materialized(&self, tip: &CommitId, format: Option<&str>) -> (String, Tier) {
        let tenant = &self.alice.tenant;
        let m = self
            .svc
            .materialize(tenant, tip, Stop::Root, format.map(|f| f.parse().unwrap()))
            .await
            .unwrap()
            .result;
        self.svc.flush_cache_writes().await;
        let bytes = self
            .svc
            .stores()
            .blobs
            .get(tenant, &m.artifact_ref)
            .await
            .unwrap()
            .unwrap();
        (String::from_utf8_lossy(&bytes).into_owned(), m.tier)
    }

    /// The deltas of the chain at ref `name` as stored, joined from `stop`
    /// (its tip's own delta without one): `POST /v1/read {delta: true}`.
    async fn deltas(&self, name: &str, stop: Option<Stop>) -> String {
        let r = self
            .svc
            .read(
                &self.alice.tenant,
                crate::service::ReadTarget::Ref(name.parse().unwrap()),
                crate::service::ReadOf::Delta { stop, depth: None },
                1 << 20,
            )
            .await
            .unwrap();
        String::from_utf8_lossy(&r.bytes.expect("small enough to answer inline")).into_owned()
    }

    /// A branch's status as `GET /v1/branches/{br}` answers it.
    async fn status(&self, id: &BranchId) -> BranchStatusResponse {
        self.svc
            .branch_status(&self.alice, id)
            .await
            .unwrap()
            .into()
    }
}

#[tokio::test]
async fn a_branch_sees_only_its_description_and_prompt() {
    let h = harness();
    h.append("sessions/s1", "user: the parent's private context\n")
        .await
        .unwrap();
    let mut req = create("s1", "explore\u{7} the parser");
    req.prompt = Some("read src/parser.rs\u{0}\nand report".into());
    let b = h.svc.branch_create(&h.alice, req).await.unwrap();
    assert_eq!(
        (b.depth, b.budget_allocated, b.timeout_seconds),
        (1, 8192, 300)
    );
    assert_eq!(b.chain_ref, format!("branches/{}", b.branch_id));
    assert_eq!(
        h.text_of(&b.chain_ref).await,
        "explore the parser\n\nread src/parser.rs\nand report\n"
    );
    let s = h.status(&b.branch_id).await;
    assert_eq!(s.status, "active");
    assert_eq!(s.description.as_deref(), Some("explore the parser"));
    assert_eq!((s.budget_used, s.budget_total), (Some(0), Some(8192)));
    assert_eq!(*h.timer.started.lock().unwrap(), vec![b.branch_id]);
}

#[tokio::test]
async fn fields_are_checked_and_capped() {
    let h = harness();
    let over = |field: &str, n: usize| {
        let mut r = create("s", "d");
        match field {
            "description" => r.description = "x".repeat(n),
            "prompt" => r.prompt = Some("x".repeat(n)),
            _ => unreachable!(),
        }
        r
    };
    for (field, n) in [("description", 501), ("prompt", 10_001)] {
        let e = h
            .svc
            .branch_create(&h.alice, over(field, n))
            .await
            .unwrap_err();
        assert_eq!(
            (e.kind, e.field.as_deref()),
            (ErrorKind::Invalid, Some(field))
        );
    }
    assert!(
        h.svc
            .branch_create(&h.alice, over("description", 500))
            .await
            .is_ok()
    );
    // A session id that cannot name its ref never reaches the service: the
    // SessionId type refuses it (over HTTP: api::branches's tests).
    for bad in ["", "a b", "../x", "a@b", "a\0b"] {
        let e = bad.parse::<SessionId>().unwrap_err();
        assert_eq!(e.kind, ErrorKind::Invalid, "{bad:?}");
        assert_eq!(e.field.as_deref(), Some("session_id"), "{bad:?}");
        // The message lists only characters a session id may have.
        assert!(!e.message.contains("'@'"), "{bad:?}: {}", e.message);
    }
    let mut r = create("s", "d");
    r.budget = Some(1_000_000);
    r.timeout_seconds = Some(600);
    let b = h.svc.branch_create(&h.alice, r).await.unwrap();
    assert_eq!((b.budget_allocated, b.timeout_seconds), (32768, 600));
    // A timeout past the limit is refused, not clamped (the budget is
    // capped, as seed 004 says: `budget_allocated` tells what was given).
    let mut r = create("s", "d");
    r.timeout_seconds = Some(601);
    let e = h.svc.branch_create(&h.alice, r).await.unwrap_err();
    assert_eq!(
        (e.kind, e.field.as_deref()),
        (ErrorKind::Invalid, Some("timeout_seconds"))
    );
    let e = h
        .svc
        .branch_return(&h.alice, &b.branch_id, &"x".repeat(50_001))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid);
}

#[tokio::test]
async fn a_return_appends_only_the_scrubbed_summary_to_the_parent() {
    let h = harness();
    h.append("sessions/s1", "user: find the bug\n")
        .await
        .unwrap();
    let b = h.create("s1", "explore").await;
    h.append(&b.chain_ref, &"tool: a long file listing\n".repeat(50))
        .await
        .unwrap();
    let r = h
        .svc
        .branch_return(
            &h.alice,
            &b.branch_id,
            "the bug is in parser.rs:42; key AKIAIOSFODNN7EXAMPLQ",
        )
        .await
        .unwrap();
    assert!(r.success);
    assert_eq!(
        r.message,
        "the bug is in parser.rs:42; key [REDACTED:aws-access-key-id]"
    );
    assert_eq!(r.redactions.get("aws-access-key-id"), Some(&1));
    assert!(r.tokens_used > 300, "{}", r.tokens_used);
    // The return ends its line: the parent's next turn starts on its own.
    h.append("sessions/s1", "user: next turn\n").await.unwrap();
    assert_eq!(
        h.text_of("sessions/s1").await,
        format!("user: find the bug\n{}\nuser: next turn\n", r.message)
    );
    let c = h.svc.show(&h.alice.tenant, &r.commit).await.unwrap();
    assert_eq!(c.checkpoint, Trigger::BranchReturn);
    assert_eq!(c.tags.get("branch"), Some(&b.branch_id.to_string()));
    let s = h.status(&b.branch_id).await;
    assert_eq!(s.status, "completed");
    assert_eq!(s.return_commit, Some(r.commit));
    assert!(s.completed_at.is_some());
    assert_eq!(*h.timer.stopped.lock().unwrap(), vec![b.branch_id]);
    let again = h
        .svc
        .branch_return(&h.alice, &b.branch_id, "again")
        .await
        .unwrap_err();
    assert_eq!(again.kind, ErrorKind::Conflict);
    // A session without a chain yet gets one.
    let b2 = h.create("fresh", "x").await;
    h.ret(&b2.branch_id, "done").await;
    assert_eq!(h.text_of("sessions/fresh").await, "done\n");
    // A parent whose content does not end its line gets a line break first.
    h.append("sessions/open", "user: no newline").await.unwrap();
    let b3 = h.create("open", "x").await;
    h.ret(&b3.branch_id, "found it").await;
    assert_eq!(
        h.text_of("sessions/open").await,
        "user: no newline\nfound it\n"
    );
}

#[tokio::test]
async fn returning_a_parent_force_returns_its_children_deepest_first() {
    let h = harness();
    let b1 = h.create("s", "one").await;
    let mut r = create("s", "two");
    r.parent_branch = Some(b1.branch_id);
    let b2 = h.svc.branch_create(&h.alice, r).await.unwrap();
    let mut r = create("s", "three");
    r.parent_branch = Some(b2.branch_id);
    let b3 = h.svc.branch_create(&h.alice, r).await.unwrap();
    let other = h.create("s", "sibling").await;
    assert_eq!((b2.depth, b3.depth), (2, 3));
    let st = BranchStatusResponse::of_session(
        &sid("s"),
        h.svc
            .branch_status_of_session(&h.alice, &sid("s"))
            .await
            .unwrap(),
    );
    assert_eq!(
        st.branch_id,
        Some(b3.branch_id),
        "the deepest active branch"
    );
    let mut level_one = [b1.branch_id, other.branch_id];
    level_one.sort();
    assert_eq!(
        st.active_branches
            .iter()
            .flatten()
            .map(|b| b.branch_id.unwrap())
            .collect::<Vec<_>>(),
        [b3.branch_id, b2.branch_id, level_one[0], level_one[1]],
        "every active branch, deepest first"
    );
    assert!(
        st.active_branches
            .iter()
            .flatten()
            .all(|b| b.status == "active")
    );
    assert!(
        st.active_branches
            .iter()
            .flatten()
            .all(|b| b.active_branches.is_none())
    );
    assert!(
        h.status(&b3.branch_id).await.active_branches.is_none(),
        "by id: the one branch"
    );
    let r = h
        .svc
        .branch_return(&h.alice, &b1.branch_id, "sum")
        .await
        .unwrap();
    assert_eq!(r.force_returned, vec![b3.branch_id, b2.branch_id]);
    for b in [&b2, &b3] {
        let s = h.status(&b.branch_id).await;
        assert_eq!(s.status, "completed");
        assert_eq!(s.reason.as_deref(), Some("parent returning"));
    }
    // b3's forced return went into b2's chain, b2's into b1's, b1's into the session.
    assert!(
        h.text_of(&b2.chain_ref)
            .await
            .contains(&b3.branch_id.to_string())
    );
    assert!(
        h.text_of(&b1.chain_ref)
            .await
            .contains(&b2.branch_id.to_string())
    );
    assert_eq!(h.text_of("sessions/s").await, "sum\n");
    assert_eq!(h.status(&other.branch_id).await.status, "active");
}

#[tokio::test]
async fn depth_is_limited() {
    let h = harness();
    let mut parent = None;
    for depth in 1..=3 {
        let mut r = create("s", "d");
        r.parent_branch = parent;
        let b = h.svc.branch_create(&h.alice, r).await.unwrap();
        assert_eq!(b.depth, depth);
        parent = Some(b.branch_id);
    }
    let mut r = create("s", "d");
    r.parent_branch = parent;
    let e = h.svc.branch_create(&h.alice, r).await.unwrap_err();
    assert_eq!(
        (e.kind, e.field.as_deref()),
        (ErrorKind::Invalid, Some("parent_branch"))
    );
    assert!(e.message.contains("maximum depth 3"), "{}", e.message);
}

#[tokio::test]
async fn the_budget_warns_at_80_percent_and_force_returns_at_100() {
    let h = harness();
    h.append("sessions/s", "user: go\n").await.unwrap();
    let mut r = create("s", "explore");
    r.budget = Some(100);
    let b = h.svc.branch_create(&h.alice, r).await.unwrap();
    // raw tokens are chars/4 rounded up: 280 bytes = 70 tokens.
    let (_, n) = h.append(&b.chain_ref, &"x".repeat(280)).await.unwrap();
    assert_eq!(n, None);
    let (_, n) = h.append(&b.chain_ref, &"y".repeat(40)).await.unwrap();
    let n = n.expect("a warning at 80%");
    assert_eq!((n.used, n.budget), (80, 100));
    assert!(n.message.contains("80%"), "{}", n.message);
    assert!(h.status(&b.branch_id).await.warning.is_some());
    let (_, n) = h.append(&b.chain_ref, &"z".repeat(80)).await.unwrap();
    assert!(n.unwrap().message.contains("force-returned"));
    let s = h.status(&b.branch_id).await;
    assert_eq!(s.status, "completed");
    assert_eq!(s.budget_used, Some(100));
    assert!(s.reason.unwrap().contains("budget exhausted"));
    let e = h.append(&b.chain_ref, "more").await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
    // What it had went to the parent.
    let parent = h.text_of("sessions/s").await;
    assert!(
        parent.contains("budget exhausted") && parent.contains("zzzz"),
        "{parent}"
    );
}

#[tokio::test]
async fn a_childs_budget_is_independent_of_its_parents() {
    let h = harness();
    let mut r = create("s", "outer");
    r.budget = Some(1000);
    let outer = h.svc.branch_create(&h.alice, r).await.unwrap();
    let mut r = create("s", "inner");
    r.budget = Some(2000);
    r.parent_branch = Some(outer.branch_id);
    let inner = h.svc.branch_create(&h.alice, r).await.unwrap();
    h.append(&inner.chain_ref, &"x".repeat(6000)).await.unwrap();
    assert_eq!(h.status(&inner.branch_id).await.budget_used, Some(1500));
    assert_eq!(h.status(&outer.branch_id).await.budget_used, Some(0));
    // Only the returned summary counts against the parent.
    h.svc
        .branch_return(&h.alice, &inner.branch_id, &"s".repeat(40))
        .await
        .unwrap();
    // 40 bytes ending their line: 41 bytes, 11 tokens.
    assert_eq!(h.status(&outer.branch_id).await.budget_used, Some(11));
}

/// A scrubber that always fails: what tests use to show failing closed.
#[derive(Debug, Default, Clone, Copy)]
struct FailingScrubber;

impl Scrubber for FailingScrubber {
    fn scrub(&self, _text: &str) -> Result<Scrubbed> {
        Err(Error::unavailable(
            "the secret scrubber is unavailable; nothing was returned",
        ))
    }
}

mod endings;
mod guards;

#[tokio::test]
async fn erasing_a_session_erases_its_branches_chains_and_records() {
    let h = harness();
    let tenant = &h.alice.tenant;
    let req: CheckpointRequest = serde_json::from_value(serde_json::json!({
        "commit_type": "delta", "format": "raw", "delta": "user: the session\n",
        "template": "t", "principal": "alice", "checkpoint": "tool_call",
        "session_id": "s1", "ref": {"name": "sessions/s1", "expected": null}
    }))
    .unwrap();
    crate::api::submit_checkpoint(&h.svc, tenant, req)
        .await
        .unwrap();
    let done = h.create("s1", "finished subtask").await;
    h.append(&done.chain_ref, "branch work\n").await.unwrap();
    h.ret(&done.branch_id, "the result").await;
    let running = h.create("s1", "running subtask").await;
    let mut r = create("s1", "nested subtask");
    r.parent_branch = Some(running.branch_id);
    let nested = h.svc.branch_create(&h.alice, r).await.unwrap();
    let other = h.create("s2", "another session's subtask").await;

    let erased = h
        .svc
        .erase_session(tenant, &sid("s1"), false)
        .await
        .unwrap();
    assert_eq!(erased.branches, 3, "{erased:?}");
    // The session's commit, the return, three branch roots, one branch turn.
    assert_eq!(erased.commits, 6, "{erased:?}");
    let store = &h.svc.branching().unwrap().store;
    for b in [&done, &running, &nested] {
        assert_eq!(store.get_branch(tenant, &b.branch_id).await.unwrap(), None);
        let root = h.svc.stores().meta.get_commit(tenant, &b.root_commit).await;
        assert_eq!(root.unwrap(), None);
    }
    let stopped = h.timer.stopped.lock().unwrap().clone();
    assert!(stopped.contains(&running.branch_id) && stopped.contains(&nested.branch_id));
    assert_eq!(store.session_owner(tenant, "s1").await.unwrap(), None);
    assert!(
        store
            .get_branch(tenant, &other.branch_id)
            .await
            .unwrap()
            .is_some()
    );
    let again = h
        .svc
        .erase_session(tenant, &sid("s1"), false)
        .await
        .unwrap_err();
    assert_eq!(again.kind, ErrorKind::NotFound);
    // The session can fold again.
    h.create("s1", "a fresh start").await;
}

mod memories;

/// docs/folding.md's example (issue 46): the branch's root, the checkpoint
/// after it and the return each on lines of their own, read as the branch's
/// deltas from its root and as the session's context.
#[tokio::test]
async fn the_folding_example_keeps_each_turn_on_its_own_line() {
    let h = harness();
    h.append("sessions/demo", "user: find the bug in parser.rs\n")
        .await
        .unwrap();
    let mut req = create("demo", "find the off-by-one");
    req.prompt = Some("read parser.rs".into());
    let b = h.svc.branch_create(&h.alice, req).await.unwrap();
    h.append(
        &b.chain_ref,
        "tool: parser.rs:42 indexes one past the end\n",
    )
    .await
    .unwrap();
    assert_eq!(
        h.deltas(&b.chain_ref, Some(Stop::Root)).await,
        "find the off-by-one\n\nread parser.rs\ntool: parser.rs:42 indexes one past the end\n"
    );
    h.ret(&b.branch_id, "off-by-one at parser.rs:42").await;
    h.append("sessions/demo", "user: and now the tests\n")
        .await
        .unwrap();
    assert_eq!(
        h.text_of("sessions/demo").await,
        "user: find the bug in parser.rs\noff-by-one at parser.rs:42\nuser: and now the tests\n"
    );
}

/// Every delta ctx composes itself in a chain of lines ends its line, so
/// the turn after it starts on its own (issue 46): a branch's root (its
/// description; with a prompt; with memories), a return, a failed return,
/// a forced end, and a compaction.
#[tokio::test]
async fn every_delta_ctx_writes_ends_its_line() {
    let h = harness();
    let tenant = h.alice.tenant.clone();
    let mut refs: Vec<(&str, String)> = Vec::new();
    // A failed return (onto sessions/m), which leaves a memory to inject.
    h.append("sessions/m", "user: go\n").await.unwrap();
    let failed = h.create("m", "fix the flaky parser test").await;
    h.append(&failed.chain_ref, "tool: raised the timeout")
        .await
        .unwrap();
    h.svc
        .branch_fail(&h.alice, &failed.branch_id, "it still times out", "")
        .await
        .unwrap();
    refs.push(("a failed return", "sessions/m".into()));
    let plain = h.create("a", "explore").await;
    refs.push(("a root", plain.chain_ref.clone()));
    let mut req = create("b", "find the off-by-one");
    req.prompt = Some("read parser.rs".into());
    let prompted = h.svc.branch_create(&h.alice, req).await.unwrap();
    refs.push(("a root with a prompt", prompted.chain_ref.clone()));
    let mut req = create("c", "fix the flaky parser test again");
    req.inject_memories = true;
    let injected = h.svc.branch_create(&h.alice, req).await.unwrap();
    assert!(!injected.memories.is_empty(), "a memory is injected");
    refs.push(("a root with memories", injected.chain_ref.clone()));
    // A return onto a session, then that session compacted.
    h.append("sessions/d", "user: go\n").await.unwrap();
    let returned = h.create("d", "look around").await;
    h.ret(&returned.branch_id, "found it").await;
    refs.push(("a return", "sessions/d".into()));
    // A forced end whose latest checkpoint does not end its line.
    h.append("sessions/e", "user: go\n").await.unwrap();
    let forced = h.create("e", "keep going").await;
    h.append(&forced.chain_ref, "tool: half a line")
        .await
        .unwrap();
    let ended = h.svc.session_end(&h.alice, &sid("e")).await.unwrap();
    assert_eq!(ended.returned, vec![forced.branch_id]);
    refs.push(("a forced end", "sessions/e".into()));
    h.append("sessions/f", "user: go\nassistant: done\n")
        .await
        .unwrap();
    let name: RefName = "sessions/f".parse().unwrap();
    let tip = h.svc.get_ref(&tenant, &name).await.unwrap().target;
    h.svc
        .compact(
            &tenant,
            &tip,
            &crate::summarize::Extractive,
            Some(crate::store::RefMove {
                name,
                expected: Some(tip),
            }),
        )
        .await
        .unwrap();
    refs.push(("a compaction", "sessions/f".into()));

    for (what, name) in refs {
        let own = h.deltas(&name, None).await;
        assert!(own.ends_with('\n'), "{what} does not end its line: {own:?}");
        h.append(&name, "user: next turn\n").await.unwrap();
        let all = h.deltas(&name, Some(Stop::Root)).await;
        assert_eq!(
            all.lines()
                .filter(|l| l.contains("next turn"))
                .collect::<Vec<_>>(),
            ["user: next turn"],
            "{what}: {all:?}"
        );
    }
}
