//! Agents' live context as docs/http-api.md describes it (window, clear,
//! saves, and the working-context contracts), through the service on the memory store (and SQLite for the
//! restart cases), with a driven clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use bytes::Bytes;

use crate::agent::{
    AgentPatch, AgentRecord, DEFAULT_WINDOW_SECONDS, RestoreOptions, RestoreSource, WindowReason,
    WorkingContextRef, WorkingContextSnapshot, WorkingMessage,
};
use crate::clock::{Clock, ManualClock};
use crate::commit::{CommitType, Stop, Trigger};
use crate::error::ErrorKind;
use crate::format::FormatId;
use crate::id::{ArtifactRef, CommitId, Principal, TenantId};
use crate::service::{NewCommit, RESTORED_FROM, Service};
use crate::store::conformance::t;
use crate::store::memory::{MemoryBlobStore, MemoryMetaStore};
use crate::store::{BlobStore, Stores};
use crate::summarize::{FAILED_MARKER, Failure, Summarizer, Summary, SummaryInput};

const DAY: i64 = 86_400;

type Counting = crate::store::counting::CountingBlobs<MemoryBlobStore>;

struct H {
    svc: Service,
    clock: Arc<ManualClock>,
    counting: Arc<Counting>,
    tenant: TenantId,
    agent: Principal,
    tip: std::sync::Mutex<Option<CommitId>>,
}

fn harness() -> H {
    let counting = Arc::new(Counting::new(MemoryBlobStore::new()));
    let stores = Stores {
        blobs: counting.clone(),
        meta: Arc::new(MemoryMetaStore::new()),
    };
    let clock = Arc::new(ManualClock::new(t(1_000_000)));
    H {
        svc: Service::new(stores, clock.clone()),
        clock,
        counting,
        tenant: "acme".parse().unwrap(),
        agent: "agent-a".parse().unwrap(),
        tip: std::sync::Mutex::new(None),
    }
}

fn openai() -> FormatId {
    "openai-chat-v1".parse().unwrap()
}

fn msg(role: &str, text: &str) -> Bytes {
    Bytes::from(serde_json::json!([{ "role": role, "content": text }]).to_string())
}

impl H {
    /// The agent says `text` in `thread` now (a turn-boundary checkpoint on
    /// its chain), then a second passes.
    async fn say(&self, thread: &str, text: &str) -> crate::Commit {
        self.checkpoint(thread, text, Trigger::TurnBoundary, None)
            .await
    }

    async fn checkpoint(
        &self,
        thread: &str,
        text: &str,
        trigger: Trigger,
        summary: Option<&str>,
    ) -> crate::Commit {
        let parent = *self.tip.lock().unwrap();
        let new = NewCommit {
            parent,
            thread_id: Some(thread.to_owned()),
            checkpoint: trigger,
            summary: summary.map(str::to_owned),
            ..NewCommit::new(self.agent.clone(), "tpl", openai(), msg("user", text))
        };
        let c = self.svc.checkpoint(&self.tenant, new).await.unwrap().commit;
        *self.tip.lock().unwrap() = Some(c.id);
        self.clock.advance_micros(1_000_000);
        c
    }

    fn advance(&self, secs: i64) {
        self.clock.advance_micros(secs * 1_000_000);
    }

    async fn window_texts(&self, thread: Option<&str>) -> Vec<String> {
        let w = self
            .svc
            .context_window(&self.tenant, &self.agent, thread, None)
            .await
            .unwrap();
        let Some(art) = w.artifact_ref else {
            return Vec::new();
        };
        let bytes = self
            .svc
            .download_artifact(&self.tenant, &art)
            .await
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|m| m["content"].as_str().unwrap().to_owned())
            .collect()
    }
}

// --- Message persistence ---

#[tokio::test]
async fn messages_persist_with_agent_thread_and_timestamp_and_are_queryable_by_agent() {
    let h = harness();
    let at = h.clock.now();
    let c = h.say("th-1", "hello").await;
    // Another agent's message is not this agent's.
    let other = NewCommit {
        thread_id: Some("th-1".into()),
        ..NewCommit::new(
            "agent-b".parse().unwrap(),
            "tpl",
            openai(),
            msg("user", "not mine"),
        )
    };
    h.svc.checkpoint(&h.tenant, other).await.unwrap();
    let w = h
        .svc
        .context_window(&h.tenant, &h.agent, None, None)
        .await
        .unwrap();
    assert_eq!(w.commits.len(), 1);
    assert_eq!(w.commits[0].id, c.id);
    assert_eq!(w.commits[0].principal, h.agent);
    assert_eq!(w.commits[0].thread_id.as_deref(), Some("th-1"));
    assert_eq!(w.commits[0].created_at, at);
    assert_eq!(w.message_count, 1);
    assert_eq!(h.window_texts(None).await, ["hello"]);
}

// --- Rolling window ---

#[tokio::test]
async fn rolling_window_default_is_one_day_and_excludes_old_messages() {
    let h = harness();
    let s = h.svc.agent_settings(&h.tenant, &h.agent).await.unwrap();
    assert_eq!(s.window_seconds, DEFAULT_WINDOW_SECONDS);
    assert_eq!(DEFAULT_WINDOW_SECONDS, DAY);
    assert!(!s.persist_working_context);
    assert_eq!(s.last_clear, None);
    h.say("th", "old").await; // at T, clock now T+1
    h.advance(DAY - 3); // now T+DAY-2
    h.say("th", "new").await; // now T+DAY-1: "old" is DAY-1 s old
    assert_eq!(
        h.window_texts(None).await,
        ["old", "new"],
        "within the window"
    );
    h.advance(2); // now T+DAY+1: "old" is DAY+1 s old
    let w = h
        .svc
        .context_window(&h.tenant, &h.agent, None, None)
        .await
        .unwrap();
    assert_eq!(w.reason, WindowReason::Window);
    assert_eq!(w.since, h.clock.now() - chrono::Duration::seconds(DAY));
    assert_eq!(
        h.window_texts(None).await,
        ["new"],
        "older than a day is out"
    );
}

#[tokio::test]
async fn rolling_window_is_configurable_and_refuses_bad_lengths() {
    let h = harness();
    let s = h
        .svc
        .patch_agent(
            &h.tenant,
            &h.agent,
            &AgentPatch {
                window_seconds: Some(60),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(s.window_seconds, 60);
    h.say("th", "a").await;
    h.advance(30);
    h.say("th", "b").await;
    h.advance(29); // "a" is 61 s old, "b" 30 s
    assert_eq!(h.window_texts(None).await, ["b"]);
    for bad in [0, -5, 11 * 366 * DAY] {
        let e = h
            .svc
            .patch_agent(
                &h.tenant,
                &h.agent,
                &AgentPatch {
                    window_seconds: Some(bad),
                    persist_working_context: Some(true),
                    ..AgentPatch::default()
                },
            )
            .await
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Invalid);
        assert_eq!(e.field.as_deref(), Some("window_seconds"));
    }
    let s = h.svc.agent_settings(&h.tenant, &h.agent).await.unwrap();
    assert_eq!(
        (s.window_seconds, s.persist_working_context),
        (60, false),
        "nothing written"
    );
}

#[tokio::test]
async fn the_window_is_per_thread_or_every_thread() {
    let h = harness();
    h.say("t1", "one").await;
    h.say("t2", "two").await;
    h.say("t1", "three").await;
    assert_eq!(h.window_texts(Some("t1")).await, ["one", "three"]);
    assert_eq!(h.window_texts(Some("t2")).await, ["two"]);
    assert_eq!(h.window_texts(None).await, ["one", "two", "three"]);
    assert!(h.window_texts(Some("t3")).await.is_empty());
}

#[tokio::test]
async fn the_window_translates_into_a_requested_format() {
    let h = harness();
    h.say("t", "hello").await;
    let w = h
        .svc
        .context_window(
            &h.tenant,
            &h.agent,
            None,
            Some("anthropic-messages-v1".parse().unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(
        w.format.as_ref().map(FormatId::as_str),
        Some("anthropic-messages-v1")
    );
    let bytes = h
        .svc
        .download_artifact(&h.tenant, &w.artifact_ref.unwrap())
        .await
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v[0]["role"], "user");
}

// --- Clear ---

#[tokio::test]
async fn clear_advances_the_marker_and_excludes_earlier_messages_without_deleting_them() {
    let h = harness();
    let before = h.say("t1", "before-1").await;
    h.say("t2", "before-2").await;
    let cleared = h.svc.clear_context(&h.tenant, &h.agent).await.unwrap();
    assert_eq!(cleared, h.clock.now());
    let s = h.svc.agent_settings(&h.tenant, &h.agent).await.unwrap();
    assert_eq!(s.last_clear, Some(cleared));
    h.advance(1);
    h.say("t1", "after").await;
    let w = h
        .svc
        .context_window(&h.tenant, &h.agent, None, None)
        .await
        .unwrap();
    assert_eq!(w.reason, WindowReason::Clear);
    assert_eq!(w.since, cleared);
    assert_eq!(
        h.window_texts(None).await,
        ["after"],
        "clear affects every thread"
    );
    assert!(h.window_texts(Some("t2")).await.is_empty());
    // Still stored and reachable.
    assert_eq!(h.svc.show(&h.tenant, &before.id).await.unwrap(), before);
    let tip = h.tip.lock().unwrap().unwrap();
    let m = h
        .svc
        .materialize(&h.tenant, &tip, Stop::Root, None)
        .await
        .unwrap();
    assert_eq!(m.result.message_count, 3);
}

#[tokio::test]
async fn multiple_clears_use_the_most_recent() {
    let h = harness();
    h.say("t", "a").await;
    h.svc.clear_context(&h.tenant, &h.agent).await.unwrap();
    h.advance(5);
    h.say("t", "b").await;
    let second = h.svc.clear_context(&h.tenant, &h.agent).await.unwrap();
    h.advance(5);
    h.say("t", "c").await;
    assert_eq!(h.window_texts(None).await, ["c"]);
    let w = h
        .svc
        .context_window(&h.tenant, &h.agent, None, None)
        .await
        .unwrap();
    assert_eq!(w.since, second);
    // A clear older than the window gives way to the window.
    h.advance(2 * DAY);
    let w = h
        .svc
        .context_window(&h.tenant, &h.agent, None, None)
        .await
        .unwrap();
    assert_eq!(w.reason, WindowReason::Window);
    assert!(w.commits.is_empty());
}

// --- Save, history, restore ---

struct FixedSummarizer {
    fail: bool,
    calls: AtomicUsize,
}

#[async_trait]
impl Summarizer for FixedSummarizer {
    fn id(&self) -> String {
        "fixed:test".into()
    }
    async fn summarize(&self, _input: &SummaryInput) -> Result<Summary, Failure> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.fail {
            return Err(Failure::Transient {
                reason: "the model is down".into(),
                retry_after: None,
            });
        }
        Ok(Summary {
            text: "Worked on the parser; tests pending.".into(),
            input_tokens: 1,
            output_tokens: 1,
        })
    }
}

#[tokio::test]
async fn save_snapshots_every_thread_with_a_summary_and_does_not_clear() {
    let mut h = harness();
    let summarizer = Arc::new(FixedSummarizer {
        fail: false,
        calls: AtomicUsize::new(0),
    });
    h.svc = h.svc.clone().with_summarizer(summarizer.clone());
    h.say("t1", "one").await;
    h.say("t2", "two").await;
    let rec = h
        .svc
        .save_context(&h.tenant, &h.agent, Some("auth refactor".into()))
        .await
        .unwrap();
    assert_eq!(
        summarizer.calls.load(Ordering::SeqCst),
        1,
        "the summary calls the summarizer"
    );
    assert_eq!(rec.summary, "Worked on the parser; tests pending.");
    assert_eq!(rec.description.as_deref(), Some("auth refactor"));
    assert_eq!(rec.message_count, 2);
    assert_eq!(rec.window_end, h.clock.now());
    assert_eq!(
        rec.window_start,
        h.clock.now() - chrono::Duration::seconds(DAY)
    );
    assert!(
        rec.save_id.to_string().starts_with("sav-"),
        "the session id format"
    );
    // The session file is an artifact in the documented shape, messages included.
    let file = h
        .svc
        .context_save_file(&h.tenant, &h.agent, &rec.save_id)
        .await
        .unwrap();
    assert_eq!(file.session_id, rec.save_id);
    assert_eq!(file.summary, rec.summary);
    let texts: Vec<(Option<&str>, &str)> = file
        .messages
        .iter()
        .map(|m| (m.thread_id.as_deref(), m.content.as_str()))
        .collect();
    assert_eq!(texts, [(Some("t1"), "one"), (Some("t2"), "two")]);
    let raw = h
        .svc
        .download_artifact(&h.tenant, &rec.artifact_ref)
        .await
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&raw).unwrap();
    for k in [
        "session_id",
        "timestamp",
        "description",
        "summary",
        "message_count",
        "window_start",
        "window_end",
        "messages",
    ] {
        assert!(v.get(k).is_some(), "session file lacks {k}");
    }
    // The metadata is stored; the window is untouched.
    assert_eq!(
        h.svc.context_history(&h.tenant, &h.agent).await.unwrap(),
        vec![rec]
    );
    assert_eq!(h.window_texts(None).await, ["one", "two"]);
}

#[tokio::test]
async fn a_failing_summarizer_still_saves_with_the_marker() {
    let mut h = harness();
    h.svc = h.svc.clone().with_summarizer(Arc::new(FixedSummarizer {
        fail: true,
        calls: AtomicUsize::new(0),
    }));
    h.say("t", "x").await;
    let rec = h.svc.save_context(&h.tenant, &h.agent, None).await.unwrap();
    assert_eq!(rec.summary, FAILED_MARKER);
    assert_eq!(rec.description, None);
}

#[tokio::test]
async fn the_extractive_summary_is_short_text() {
    let h = harness();
    h.say("t", &"a long line of work ".repeat(200)).await;
    let rec = h.svc.save_context(&h.tenant, &h.agent, None).await.unwrap();
    assert!(
        !rec.summary.is_empty() && rec.summary.len() < 1000,
        "{}",
        rec.summary
    );
    assert_ne!(rec.summary, FAILED_MARKER);
}

#[tokio::test]
async fn history_lists_every_save_newest_first() {
    let h = harness();
    h.say("t", "a").await;
    let s1 = h
        .svc
        .save_context(&h.tenant, &h.agent, Some("first".into()))
        .await
        .unwrap();
    h.advance(10);
    h.say("t", "b").await;
    let s2 = h
        .svc
        .save_context(&h.tenant, &h.agent, Some("second".into()))
        .await
        .unwrap();
    let list = h.svc.context_history(&h.tenant, &h.agent).await.unwrap();
    assert_eq!(list, vec![s2, s1]);
    let other: TenantId = "other".parse().unwrap();
    assert!(
        h.svc
            .context_history(&other, &h.agent)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn restore_loads_saved_messages_back_into_the_window() {
    let h = harness();
    h.say("t1", "one").await;
    h.say("t2", "two").await;
    let rec = h.svc.save_context(&h.tenant, &h.agent, None).await.unwrap();
    h.svc.clear_context(&h.tenant, &h.agent).await.unwrap();
    assert!(h.window_texts(None).await.is_empty());
    let restored = h
        .svc
        .restore_save(&h.tenant, &h.agent, &rec.save_id)
        .await
        .unwrap();
    assert_eq!(restored.len(), 2, "one commit per thread");
    for c in &restored {
        assert_eq!(c.tags.get(RESTORED_FROM), Some(&rec.save_id.to_string()));
        assert_eq!(c.principal, h.agent);
    }
    assert_eq!(h.window_texts(None).await, ["one", "two"]);
    assert_eq!(h.window_texts(Some("t2")).await, ["two"]);
}

#[tokio::test]
async fn restoring_or_reading_an_unknown_save_is_not_found() {
    let h = harness();
    h.say("t", "a").await;
    let rec = h.svc.save_context(&h.tenant, &h.agent, None).await.unwrap();
    let other_agent: Principal = "agent-z".parse().unwrap();
    let other_tenant: TenantId = "other".parse().unwrap();
    for (tenant, agent) in [(&h.tenant, &other_agent), (&other_tenant, &h.agent)] {
        let e = h
            .svc
            .restore_save(tenant, agent, &rec.save_id)
            .await
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotFound);
        let e = h
            .svc
            .context_save_file(tenant, agent, &rec.save_id)
            .await
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotFound);
    }
}

#[tokio::test]
async fn a_fresh_agent_has_an_empty_window_history_and_working_context() {
    let h = harness();
    let w = h
        .svc
        .context_window(&h.tenant, &h.agent, None, None)
        .await
        .unwrap();
    assert!(w.commits.is_empty());
    assert_eq!((w.message_count, w.artifact_ref), (0, None));
    assert!(
        h.svc
            .context_history(&h.tenant, &h.agent)
            .await
            .unwrap()
            .is_empty()
    );
    let r = h
        .svc
        .restore_working_context(&h.tenant, &h.agent, &RestoreOptions::default())
        .await
        .unwrap();
    assert_eq!(r.source, RestoreSource::Rebuilt);
    assert!(r.reason.unwrap().contains("no working-context cache"));
    assert!(r.snapshot.messages.is_empty());
    assert_eq!(r.snapshot.epoch_id, 1);
    assert_eq!(r.snapshot.agent_id, "agent-a");
    let rec = h.svc.save_context(&h.tenant, &h.agent, None).await.unwrap();
    assert_eq!(rec.message_count, 0);
}

#[cfg(feature = "local")]
#[tokio::test]
async fn context_settings_and_clear_time_survive_a_restart() {
    use crate::store::local::{LocalBlobStore, SqliteMetaStore};
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(t(1_000_000)));
    let open = || {
        Service::new(
            Stores {
                blobs: Arc::new(LocalBlobStore::open(dir.path()).unwrap()),
                meta: Arc::new(SqliteMetaStore::open(dir.path()).unwrap()),
            },
            clock.clone(),
        )
    };
    let tenant: TenantId = "acme".parse().unwrap();
    let agent: Principal = "agent-a".parse().unwrap();
    let (cleared, save) = {
        let svc = open();
        let say = |text: &str| NewCommit {
            thread_id: Some("t".into()),
            ..NewCommit::new(agent.clone(), "tpl", openai(), msg("user", text))
        };
        svc.checkpoint(&tenant, say("before")).await.unwrap();
        clock.advance_micros(1_000_000);
        let cleared = svc.clear_context(&tenant, &agent).await.unwrap();
        clock.advance_micros(1_000_000);
        svc.checkpoint(&tenant, say("after")).await.unwrap();
        svc.patch_agent(
            &tenant,
            &agent,
            &AgentPatch {
                window_seconds: Some(3600),
                ..Default::default()
            },
        )
        .await
        .unwrap();
        let save = svc.save_context(&tenant, &agent, None).await.unwrap();
        (cleared, save)
    };
    clock.advance_micros(1_000_000);
    let svc = open();
    let s = svc.agent_settings(&tenant, &agent).await.unwrap();
    assert_eq!(s.last_clear, Some(cleared));
    assert_eq!(s.window_seconds, 3600);
    let w = svc
        .context_window(&tenant, &agent, None, None)
        .await
        .unwrap();
    assert_eq!(w.commits.len(), 1, "rebuilt from the persisted messages");
    assert_eq!(
        svc.context_history(&tenant, &agent).await.unwrap(),
        vec![save]
    );
}

// --- Working context ---

fn snapshot(agent: &str, epoch: u64, messages: Vec<WorkingMessage>) -> WorkingContextSnapshot {
    WorkingContextSnapshot {
        schema_version: 1,
        agent_id: agent.to_owned(),
        epoch_id: epoch,
        last_compaction_ts: Some(1_738_100_000.0),
        messages,
    }
}

fn wm(role: &str, content: &str) -> WorkingMessage {
    WorkingMessage {
        role: role.to_owned(),
        content: Some(content.to_owned()),
        reasoning_content: None,
        tool_payload: None,
        media_urls: None,
    }
}

fn rich_messages() -> Vec<WorkingMessage> {
    vec![
        wm("system", "You are careful."),
        wm("user", "look at this"),
        WorkingMessage {
            role: "assistant".into(),
            content: Some("calling a tool".into()),
            reasoning_content: Some("I should read the file".into()),
            tool_payload: Some(serde_json::json!({"tool_calls": [{"id": "c1", "name": "read"}]})),
            media_urls: None,
        },
        WorkingMessage {
            role: "tool".into(),
            content: None,
            reasoning_content: None,
            tool_payload: Some(serde_json::json!({"tool_results": [{"tool_use_id": "c1"}]})),
            media_urls: Some(vec!["https://example.invalid/a.png".into()]),
        },
    ]
}

#[tokio::test]
async fn a_valid_cache_is_used_for_the_same_agent() {
    let h = harness();
    let snap = snapshot("agent-a", 4, rich_messages());
    let stored = h
        .svc
        .put_working_context(&h.tenant, &h.agent, &snap)
        .await
        .unwrap();
    let r = h
        .svc
        .restore_working_context(&h.tenant, &h.agent, &RestoreOptions::default())
        .await
        .unwrap();
    assert_eq!(r.source, RestoreSource::Cache);
    assert_eq!(r.reason, None);
    assert_eq!(
        r.snapshot, snap,
        "tool payloads, media and reasoning round-trip"
    );
    assert_eq!(r.artifact_ref, stored);
    // Another agent does not get it.
    let other: Principal = "agent-b".parse().unwrap();
    let r = h
        .svc
        .restore_working_context(&h.tenant, &other, &RestoreOptions::default())
        .await
        .unwrap();
    assert_eq!(r.source, RestoreSource::Rebuilt);
}

#[tokio::test]
async fn a_bad_snapshot_is_refused_by_field_and_nothing_is_written() {
    let h = harness();
    let mut wrong_version = snapshot("agent-a", 1, vec![wm("user", "x")]);
    wrong_version.schema_version = 2;
    let mut bad_role = snapshot("agent-a", 1, vec![wm("user", "x"), wm("wizard", "y")]);
    bad_role.messages[1].role = "wizard".into();
    let mut empty_msg = snapshot("agent-a", 1, vec![wm("user", "x")]);
    empty_msg.messages[0].content = None;
    let mut bad_payload = snapshot("agent-a", 1, vec![wm("user", "x")]);
    bad_payload.messages[0].tool_payload = Some(serde_json::json!([1]));
    for (snap, field) in [
        (wrong_version, "schema_version"),
        (snapshot("agent-b", 1, vec![]), "agent_id"),
        (bad_role, "messages[1].role"),
        (empty_msg, "messages[0]"),
        (bad_payload, "messages[0].tool_payload"),
    ] {
        let e = h
            .svc
            .put_working_context(&h.tenant, &h.agent, &snap)
            .await
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Invalid);
        assert_eq!(e.field.as_deref(), Some(field));
    }
    assert_eq!(h.counting.puts(), 0, "no artifact written");
    let s = h.svc.agent_settings(&h.tenant, &h.agent).await.unwrap();
    assert_eq!(s.working_context_epoch, None);
}

/// Points the agent's cache at `bytes` as stored.
async fn cache_bytes(h: &H, bytes: &[u8], epoch: u64) -> ArtifactRef {
    let put = h
        .counting
        .inner
        .put(&h.tenant, Bytes::copy_from_slice(bytes))
        .await
        .unwrap();
    h.svc
        .stores()
        .meta
        .update_agent(
            &h.tenant,
            &h.agent,
            &AgentRecord {
                working_context: Some(WorkingContextRef {
                    artifact_ref: put.artifact,
                    epoch_id: epoch,
                }),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    put.artifact
}

#[tokio::test]
async fn each_invalid_cache_is_rebuilt_with_its_reason() {
    let h = harness();
    h.say("t", "remember me").await;
    let good = serde_json::to_vec(&snapshot(
        "agent-a",
        7,
        vec![wm("system", "Be brief."), wm("user", "x")],
    ))
    .unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&good).unwrap();
    v["schema_version"] = 9.into();
    let wrong_version = serde_json::to_vec(&v).unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&good).unwrap();
    v["agent_id"] = "agent-b".into();
    let wrong_agent = serde_json::to_vec(&v).unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&good).unwrap();
    v["messages"][1] = serde_json::json!({"role": "user", "content": 5});
    let malformed = serde_json::to_vec(&v).unwrap();
    let cases: Vec<(&str, Vec<u8>, bool)> = vec![
        ("schema_version mismatch", wrong_version, false),
        ("agent_id mismatch", wrong_agent, false),
        ("malformed messages", malformed, false),
        ("not JSON", b"{not json".to_vec(), false),
        ("failed verification", good.clone(), true),
    ];
    for (reason, bytes, corrupt) in cases {
        let art = cache_bytes(&h, &bytes, 7).await;
        if corrupt {
            h.counting.inner.corrupt(
                &h.tenant,
                &art,
                Bytes::from_static(b"{\"schema_version\":1}"),
            );
        }
        let r = h
            .svc
            .restore_working_context(&h.tenant, &h.agent, &RestoreOptions::default())
            .await
            .unwrap();
        assert_eq!(r.source, RestoreSource::Rebuilt, "{reason}");
        let why = r.reason.unwrap();
        assert!(why.contains(reason), "{reason}: {why}");
        assert_eq!(r.snapshot.epoch_id, 8, "epoch + 1");
        assert_eq!(r.snapshot.agent_id, "agent-a");
        let texts: Vec<_> = r
            .snapshot
            .messages
            .iter()
            .filter_map(|m| m.content.as_deref())
            .collect();
        assert!(texts.contains(&"remember me"), "{reason}: {texts:?}");
        // The rebuild is the cache now.
        let again = h
            .svc
            .restore_working_context(&h.tenant, &h.agent, &RestoreOptions::default())
            .await
            .unwrap();
        assert_eq!(again.source, RestoreSource::Cache);
        assert_eq!(again.snapshot, r.snapshot);
    }
    // A readable cache's system prompt carries into the rebuild.
    cache_bytes(&h, &wrong_agent_with_prompt(), 1).await;
    let r = h
        .svc
        .restore_working_context(&h.tenant, &h.agent, &RestoreOptions::default())
        .await
        .unwrap();
    assert_eq!(r.snapshot.messages[0], wm("system", "Be brief."));
    // A missing artifact.
    h.svc
        .stores()
        .meta
        .update_agent(
            &h.tenant,
            &h.agent,
            &AgentRecord {
                working_context: Some(WorkingContextRef {
                    artifact_ref: ArtifactRef::of(b"never stored"),
                    epoch_id: 2,
                }),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let r = h
        .svc
        .restore_working_context(&h.tenant, &h.agent, &RestoreOptions::default())
        .await
        .unwrap();
    assert!(r.reason.unwrap().contains("missing"));
}

fn wrong_agent_with_prompt() -> Vec<u8> {
    serde_json::to_vec(&snapshot("agent-z", 1, vec![wm("system", "Be brief.")])).unwrap()
}

#[tokio::test]
async fn a_rebuild_orders_system_episodic_semantic_then_the_raw_tail() {
    let h = harness();
    h.checkpoint("t", "first", Trigger::TurnBoundary, Some("set up the repo"))
        .await;
    h.checkpoint(
        "t",
        "second",
        Trigger::TurnBoundary,
        Some("fixed the parser"),
    )
    .await;
    // A compaction on the chain.
    let parent = *h.tip.lock().unwrap();
    let new = NewCommit {
        parent,
        commit_type: CommitType::Compaction,
        checkpoint: Trigger::Compaction,
        summary: Some("we fixed the parser".into()),
        thread_id: Some("t".into()),
        ..NewCommit::new(
            h.agent.clone(),
            "tpl",
            openai(),
            msg("user", "summary of before"),
        )
    };
    let compaction = h.svc.checkpoint(&h.tenant, new).await.unwrap().commit;
    *h.tip.lock().unwrap() = Some(compaction.id);
    h.clock.advance_micros(1_000_000);
    h.say("t", "third").await;
    // A folded subtask's result lands on the chain (by the branch principal).
    let parent = *h.tip.lock().unwrap();
    let ret = NewCommit {
        parent,
        checkpoint: Trigger::BranchReturn,
        ..NewCommit::new(
            "ctx-branch".parse().unwrap(),
            "tpl",
            openai(),
            msg("user", "subtask: tests pass"),
        )
    };
    let ret = h.svc.checkpoint(&h.tenant, ret).await.unwrap().commit;
    *h.tip.lock().unwrap() = Some(ret.id);
    h.clock.advance_micros(1_000_000);
    h.say("t", "fourth").await;
    let r = h
        .svc
        .restore_working_context(
            &h.tenant,
            &h.agent,
            &RestoreOptions {
                system_prompt: Some("You are the agent.".into()),
                max_episodic: Some(5),
                max_semantic: Some(5),
                raw_tail_turns: Some(10),
                rebuild: false,
            },
        )
        .await
        .unwrap();
    assert_eq!(r.source, RestoreSource::Rebuilt);
    let m = &r.snapshot.messages;
    let texts: Vec<&str> = m.iter().filter_map(|m| m.content.as_deref()).collect();
    // Seed 003's shape: [system prompt, one user message carrying the
    // memory, the raw tail]; one system message only (the Anthropic
    // Messages API takes no second one).
    assert_eq!(texts.len(), 4, "{texts:?}");
    assert_eq!(texts[0], "You are the agent.");
    let roles: Vec<&str> = m.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles, ["system", "user", "user", "user"], "{texts:?}");
    let memory = texts[1];
    let (episodic, semantic) = memory
        .strip_prefix("[MEMORY:EPISODIC]\n")
        .and_then(|m| m.split_once("\n\n[MEMORY:SEMANTIC]\n"))
        .unwrap_or_else(|| panic!("{memory}"));
    let lines: Vec<&str> = episodic.lines().collect();
    assert_eq!(lines.len(), 3, "{episodic}");
    assert!(
        lines[0].starts_with("1) Compaction summary (")
            && lines[0].ends_with("we fixed the parser"),
        "{episodic}"
    );
    assert!(
        lines[1].starts_with("2) ") && lines[1].ends_with(": set up the repo"),
        "{episodic}"
    );
    assert!(
        lines[2].starts_with("3) ") && lines[2].ends_with(": fixed the parser"),
        "{episodic}"
    );
    assert_eq!(semantic, "- subtask: tests pass");
    assert_eq!(
        &texts[2..],
        ["third", "fourth"],
        "the raw tail since the compaction, in order"
    );
    assert_eq!(
        r.snapshot.last_compaction_ts,
        Some(compaction.created_at.timestamp_micros() as f64 / 1e6)
    );
    // A smaller tail and no episodic memory.
    let r = h
        .svc
        .restore_working_context(
            &h.tenant,
            &h.agent,
            &RestoreOptions {
                raw_tail_turns: Some(1),
                max_episodic: Some(0),
                max_semantic: Some(0),
                system_prompt: None,
                rebuild: false,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        r.source,
        RestoreSource::Cache,
        "the rebuild above is the cache"
    );
    // A rebuild on request (seed 003's open question), though the cache is
    // valid: the cache's system prompt is kept, the epoch moves on.
    let forced = h
        .svc
        .restore_working_context(
            &h.tenant,
            &h.agent,
            &RestoreOptions {
                rebuild: true,
                raw_tail_turns: Some(1),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(forced.source, RestoreSource::Rebuilt);
    assert_eq!(forced.reason.as_deref(), Some("a rebuild was asked for"));
    assert_eq!(
        forced.snapshot.messages[0].content.as_deref(),
        Some("You are the agent.")
    );
    assert_eq!(forced.snapshot.epoch_id, r.snapshot.epoch_id + 1);
    assert_eq!(
        forced.snapshot.messages.last().unwrap().content.as_deref(),
        Some("fourth")
    );
    let e = h
        .svc
        .restore_working_context(
            &h.tenant,
            &h.agent,
            &RestoreOptions {
                raw_tail_turns: Some(100_000),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("raw_tail_turns"));
}

#[tokio::test]
async fn persist_refreshes_the_cache_at_turn_ends_and_compactions_with_one_artifact_write() {
    let h = harness();
    // Off: a turn writes only its delta, inline with its commit (no blob).
    let before = h.counting.puts();
    h.say("t", "one").await;
    assert_eq!(h.counting.puts() - before, 0);
    assert_eq!(
        h.svc
            .agent_settings(&h.tenant, &h.agent)
            .await
            .unwrap()
            .working_context_epoch,
        None
    );
    h.svc
        .patch_agent(
            &h.tenant,
            &h.agent,
            &AgentPatch {
                persist_working_context: Some(true),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    // On: the first turn rebuilds (no cache yet), later turns append.
    for (i, text) in ["two", "three"].iter().enumerate() {
        let before = h.counting.puts();
        h.say("t", text).await;
        assert_eq!(
            h.counting.puts() - before,
            1,
            "one cache write; the delta is inline (turn {i})"
        );
    }
    let r = h
        .svc
        .restore_working_context(&h.tenant, &h.agent, &RestoreOptions::default())
        .await
        .unwrap();
    assert_eq!(r.source, RestoreSource::Cache);
    let texts: Vec<_> = r
        .snapshot
        .messages
        .iter()
        .filter_map(|m| m.content.as_deref())
        .collect();
    assert_eq!(texts, ["one", "two", "three"]);
    assert_eq!(r.snapshot.epoch_id, 1);
    // A tool-call checkpoint is not a safe boundary.
    let before = h.counting.puts();
    h.checkpoint("t", "tool", Trigger::ToolCall, None).await;
    assert_eq!(h.counting.puts() - before, 0);
    // A compaction rebuilds from the summary.
    let parent = *h.tip.lock().unwrap();
    let new = NewCommit {
        parent,
        commit_type: CommitType::Compaction,
        checkpoint: Trigger::Compaction,
        summary: Some("counted to three".into()),
        ..NewCommit::new(
            h.agent.clone(),
            "tpl",
            openai(),
            msg("user", "counted to three"),
        )
    };
    let before = h.counting.puts();
    h.svc.checkpoint(&h.tenant, new).await.unwrap();
    assert_eq!(h.counting.puts() - before, 1);
    let r = h
        .svc
        .restore_working_context(&h.tenant, &h.agent, &RestoreOptions::default())
        .await
        .unwrap();
    assert_eq!(r.source, RestoreSource::Cache);
    assert_eq!(r.snapshot.epoch_id, 2);
    assert!(
        r.snapshot.messages[0]
            .content
            .as_deref()
            .unwrap()
            .contains("counted to three")
    );
}

// --- The assembled context's limits (seed 001: docs and the answer) ---

impl H {
    /// Names workspace `docs` as the agent's docs, holding `files`.
    async fn docs(&self, files: &[(String, Bytes)]) {
        let ws: crate::workspace::WorkspaceId = "docs".parse().unwrap();
        for (path, bytes) in files {
            self.svc
                .put_file(
                    &self.tenant,
                    &ws,
                    &path.parse().unwrap(),
                    bytes.clone(),
                    None,
                )
                .await
                .unwrap();
        }
        let patch = AgentPatch {
            docs_workspace: Some("docs".into()),
            ..AgentPatch::default()
        };
        self.svc
            .patch_agent(&self.tenant, &self.agent, &patch)
            .await
            .unwrap();
    }

    async fn assembled(&self) -> crate::agent::AssembledContext {
        self.svc
            .assemble_context(&self.tenant, &self.agent, "t1", None)
            .await
            .unwrap()
    }
}

fn paths(files: &[crate::agent::DocFile]) -> Vec<String> {
    files.iter().map(|f| f.path.to_string()).collect()
}

#[tokio::test]
async fn docs_hold_the_first_50_files_by_path_and_name_the_rest() {
    use crate::service::MAX_DOC_FILES;
    let h = harness();
    let files: Vec<(String, Bytes)> = (0..MAX_DOC_FILES + 2)
        .map(|i| (format!("f{i:03}.md"), Bytes::from(format!("doc {i}"))))
        .collect();
    h.docs(&files).await;
    h.say("t1", "hello").await;
    let docs = h.assembled().await.docs;
    assert_eq!(docs.files.len(), MAX_DOC_FILES);
    assert_eq!(docs.files[0].text, "doc 0");
    assert_eq!(paths(&docs.files).last().unwrap(), "f049.md");
    let left: Vec<_> = docs.omitted.iter().map(|o| o.path.to_string()).collect();
    assert_eq!(left, ["f050.md", "f051.md"]);
    assert!(
        docs.omitted[0].reason.contains("50 files"),
        "{}",
        docs.omitted[0].reason
    );
    assert!(docs.truncated);
}

#[tokio::test]
async fn a_long_doc_is_cut_to_its_head_at_a_character_boundary() {
    use crate::service::MAX_DOC_BYTES;
    let h = harness();
    // 'é' is two bytes: the limit falls inside one.
    let text = format!("a{}", "é".repeat(MAX_DOC_BYTES));
    h.docs(&[("long.md".into(), Bytes::from(text.clone()))])
        .await;
    let docs = h.assembled().await.docs;
    let f = &docs.files[0];
    assert!(f.truncated && docs.truncated);
    assert_eq!(f.size, text.len() as u64, "the whole size is said");
    assert_eq!(
        f.text.len(),
        MAX_DOC_BYTES - 1,
        "cut before the split character"
    );
    assert!(text.starts_with(&f.text));
}

#[tokio::test]
async fn docs_stop_at_their_budget_and_leave_out_what_is_not_text() {
    use crate::service::{MAX_DOC_BYTES, MAX_DOCS_BYTES};
    let h = harness();
    let n = MAX_DOCS_BYTES / MAX_DOC_BYTES; // files that fill the budget
    let mut files: Vec<(String, Bytes)> = vec![(
        "a-binary.bin".into(),
        Bytes::from_static(&[0xff, 0xfe, 0x00]),
    )];
    files.extend((0..n + 1).map(|i| {
        (
            format!("b{i}.md"),
            Bytes::from("x".repeat(MAX_DOC_BYTES + 10)),
        )
    }));
    files.push(("c-small.md".into(), Bytes::from_static(b"small")));
    h.docs(&files).await;
    let docs = h.assembled().await.docs;
    assert_eq!(docs.files.len(), n, "{:?}", paths(&docs.files));
    let kept: usize = docs.files.iter().map(|f| f.text.len()).sum();
    assert_eq!(kept, MAX_DOCS_BYTES);
    let left: Vec<(String, &str)> = docs
        .omitted
        .iter()
        .map(|o| (o.path.to_string(), o.reason.as_str()))
        .collect();
    assert_eq!(left[0], ("a-binary.bin".to_owned(), "not UTF-8 text"));
    assert_eq!(left[1].0, format!("b{n}.md"));
    assert_eq!(left[2].0, "c-small.md");
    assert!(left[1].1.contains("bytes of docs") && left[2].1.contains("bytes of docs"));
}

#[tokio::test]
async fn a_context_over_4_mib_is_refused_as_too_large() {
    let h = harness();
    for i in 0..5 {
        h.say("t1", &format!("{i}{}", "w".repeat(1024 * 1024)))
            .await;
    }
    let e = h
        .svc
        .assemble_context(&h.tenant, &h.agent, "t1", None)
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::TooLarge, "{e}");
    assert!(
        e.message.contains("window"),
        "it says what to read instead: {e}"
    );
}
