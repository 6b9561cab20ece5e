//! Re-compaction through the service on the memory store: the new tip
//! materializes from the summary, `stop: root` still reaches the original
//! history, a Claude Code chain stays a transcript Claude Code resumes, and
//! a failing summarizer writes nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use serde_json::Value;

use super::COMPACTED_BY;
use crate::clock::ManualClock;
use crate::commit::{CommitType, Stop};
use crate::error::ErrorKind;
use crate::format::{COMPACTION_PREAMBLE, FormatId, SegmentKind, segments};
use crate::id::{CommitId, TenantId};
use crate::service::{NewCommit, Service};
use crate::store::conformance::t;
use crate::store::memory::{MemoryBlobStore, MemoryMetaStore};
use crate::store::{RefMove, Stores};
use crate::summarize::{Content, Failure, Summarizer, Summary, SummaryInput};

const TRANSCRIPT: &[u8] = include_bytes!("../../../../tests/data/claude-code-session.jsonl");
const SUMMARY: &str = "Fixed the config parser; the data.bin question is still open.";

/// A summarizer that answers with a fixed text (or fails) and counts calls;
/// it records the number of messages it was shown.
struct Fixed {
    fail: bool,
    calls: AtomicUsize,
    seen_messages: AtomicUsize,
}

impl Fixed {
    fn new(fail: bool) -> Self {
        Fixed {
            fail,
            calls: AtomicUsize::new(0),
            seen_messages: AtomicUsize::new(0),
        }
    }
}

#[async_trait]
impl Summarizer for Fixed {
    fn id(&self) -> String {
        "fixed:test".into()
    }

    async fn summarize(&self, input: &SummaryInput) -> Result<Summary, Failure> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Content::Conversation(c) = &input.content {
            self.seen_messages.store(c.messages.len(), Ordering::SeqCst);
        }
        if self.fail {
            return Err(Failure::Permanent {
                reason: "the model answered nonsense".into(),
            });
        }
        Ok(Summary {
            text: SUMMARY.into(),
            input_tokens: 0,
            output_tokens: 0,
        })
    }
}

fn service() -> (Service, TenantId) {
    let stores = Stores {
        blobs: Arc::new(MemoryBlobStore::new()),
        meta: Arc::new(MemoryMetaStore::new()),
    };
    let clock = Arc::new(ManualClock::new(t(10_000)));
    (Service::new(stores, clock), "acme".parse().unwrap())
}

fn fid(s: &str) -> FormatId {
    s.parse().unwrap()
}

/// Checkpoints `parts` as one chain; returns the ids, oldest first.
async fn chain(
    svc: &Service,
    tenant: &TenantId,
    format: &str,
    parts: &[(CommitType, &[u8])],
) -> Vec<CommitId> {
    let mut ids: Vec<CommitId> = Vec::new();
    for (i, (kind, bytes)) in parts.iter().enumerate() {
        let new = NewCommit {
            parent: ids.last().copied(),
            commit_type: *kind,
            created_at: Some(t(i as i64)),
            ..NewCommit::new(
                "agent".parse().unwrap(),
                "tpl",
                fid(format),
                Bytes::copy_from_slice(bytes),
            )
        };
        ids.push(svc.checkpoint(tenant, new).await.unwrap().commit.id);
    }
    ids
}

async fn bytes_at(svc: &Service, tenant: &TenantId, id: &CommitId, stop: Stop) -> Bytes {
    let m = svc
        .materialize(tenant, id, stop, None)
        .await
        .unwrap()
        .result;
    svc.download_artifact(tenant, &m.artifact_ref)
        .await
        .unwrap()
}

#[tokio::test]
async fn the_new_tip_starts_at_the_summary_and_root_still_reaches_the_original() {
    let (svc, tenant) = service();
    let turns: [&[u8]; 3] = [
        br#"[{"role":"user","content":"Parse config.toml"}]"#,
        br#"[{"role":"assistant","content":"It has three sections."}]"#,
        br#"[{"role":"user","content":"Now data.bin"}]"#,
    ];
    let parts: Vec<_> = turns.iter().map(|b| (CommitType::Delta, *b)).collect();
    let ids = chain(&svc, &tenant, "openai-chat-v1", &parts).await;
    let tip = *ids.last().unwrap();
    let before = bytes_at(&svc, &tenant, &tip, Stop::Root).await;

    let summarizer = Fixed::new(false);
    let done = svc.compact(&tenant, &tip, &summarizer, None).await.unwrap();
    assert!(done.created);
    assert_eq!(summarizer.seen_messages.load(Ordering::SeqCst), 3);
    assert_eq!(done.replaced_messages, 3);
    let c = &done.commit;
    assert_eq!(
        (c.parent, c.commit_type, c.format.as_str()),
        (Some(tip), CommitType::Compaction, "openai-chat-v1")
    );
    assert_eq!(c.summary.as_deref(), Some(SUMMARY));
    assert_eq!(
        c.tags.get(COMPACTED_BY).map(String::as_str),
        Some("fixed:test")
    );

    // Materialize of the new tip: one message, the summary.
    let latest = bytes_at(&svc, &tenant, &c.id, Stop::Compaction).await;
    let msgs: Vec<Value> = serde_json::from_slice(&latest).unwrap();
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    let text = msgs[0]["content"].as_str().unwrap();
    assert!(text.starts_with(COMPACTION_PREAMBLE) && text.ends_with(SUMMARY));
    // stop: root still yields the original bytes.
    assert_eq!(bytes_at(&svc, &tenant, &c.id, Stop::Root).await, before);
}

#[tokio::test]
async fn a_claude_code_chain_recompacted_still_exports_as_a_transcript() {
    let (svc, tenant) = service();
    let segs = segments(TRANSCRIPT).unwrap();
    let parts: Vec<_> = segs
        .iter()
        .map(|s| {
            let kind = match s.kind {
                SegmentKind::Compaction => CommitType::Compaction,
                SegmentKind::Delta => CommitType::Delta,
            };
            (kind, &TRANSCRIPT[s.range.clone()])
        })
        .collect();
    let ids = chain(&svc, &tenant, "claude-code-v1", &parts).await;
    let tip = *ids.last().unwrap();

    let done = svc
        .compact(&tenant, &tip, &Fixed::new(false), None)
        .await
        .unwrap();
    let new_tip = done.commit.id;
    let codec = svc.formats().codec(&fid("claude-code-v1")).clone();

    // From the new summary on: the boundary, then the summary entry.
    let latest = bytes_at(&svc, &tenant, &new_tip, Stop::Compaction).await;
    codec.validate(&latest).unwrap();
    codec.check_compaction(&latest).unwrap();
    let lines: Vec<Value> = latest
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["subtype"], "compact_boundary");
    assert!(lines[0]["parentUuid"].is_null());
    assert_eq!(lines[1]["parentUuid"], lines[0]["uuid"]);
    assert_eq!(lines[1]["isCompactSummary"], true);
    // The same session as the transcript it continues.
    let last: Value =
        serde_json::from_slice(TRANSCRIPT.split(|&b| b == b'\n').rev().nth(1).unwrap()).unwrap();
    assert_eq!(lines[0]["sessionId"], last["sessionId"]);
    assert_eq!(lines[0]["logicalParentUuid"], last["uuid"]);

    // The whole history: the original transcript, then the new compaction;
    // it still cuts into the same segments plus one compaction.
    let root = bytes_at(&svc, &tenant, &new_tip, Stop::Root).await;
    assert!(root.starts_with(TRANSCRIPT));
    assert_eq!(&root[TRANSCRIPT.len()..], &latest[..]);
    codec.validate(&root).unwrap();
    let again = segments(&root).unwrap();
    assert_eq!(again.len(), segs.len() + 1);
    assert_eq!(again.last().unwrap().kind, SegmentKind::Compaction);
}

#[tokio::test]
async fn a_raw_chain_compacts_to_the_summary_text() {
    let (svc, tenant) = service();
    let ids = chain(
        &svc,
        &tenant,
        "raw",
        &[
            (CommitType::Delta, b"line one\n"),
            (CommitType::Delta, b"line two\n"),
        ],
    )
    .await;
    let done = svc
        .compact(&tenant, &ids[1], &Fixed::new(false), None)
        .await
        .unwrap();
    let latest = bytes_at(&svc, &tenant, &done.commit.id, Stop::Compaction).await;
    assert_eq!(&latest[..], format!("{SUMMARY}\n").as_bytes());
    let root = bytes_at(&svc, &tenant, &done.commit.id, Stop::Root).await;
    assert_eq!(&root[..], b"line one\nline two\n");
}

#[tokio::test]
async fn a_failing_summarizer_writes_nothing_and_a_stale_ref_is_a_conflict() {
    let (svc, tenant) = service();
    let ids = chain(
        &svc,
        &tenant,
        "raw",
        &[(CommitType::Delta, b"a\n"), (CommitType::Delta, b"b\n")],
    )
    .await;
    let name: crate::RefName = "main".parse().unwrap();
    svc.set_ref(&tenant, &name, &ids[1], None).await.unwrap();

    let failing = Fixed::new(true);
    let mv = RefMove {
        name: name.clone(),
        expected: Some(ids[1]),
    };
    let err = svc
        .compact(&tenant, &ids[1], &failing, Some(mv.clone()))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("fixed:test"), "{err}");
    assert_eq!(failing.calls.load(Ordering::SeqCst), 1);
    assert_eq!(svc.get_ref(&tenant, &name).await.unwrap().target, ids[1]);

    // The ref moved meanwhile: the compaction is refused as a conflict.
    let stale = RefMove {
        name: name.clone(),
        expected: Some(ids[0]),
    };
    let err = svc
        .compact(&tenant, &ids[1], &Fixed::new(false), Some(stale))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Conflict, "{err}");
    assert_eq!(svc.get_ref(&tenant, &name).await.unwrap().target, ids[1]);

    // With the right tip, the ref moves to the compaction.
    let done = svc
        .compact(&tenant, &ids[1], &Fixed::new(false), Some(mv))
        .await
        .unwrap();
    assert_eq!(
        svc.get_ref(&tenant, &name).await.unwrap().target,
        done.commit.id
    );
}

#[test]
fn every_format_writes_a_valid_compaction_holding_the_summary() {
    let (svc, _) = service();
    for id in svc.formats().ids() {
        let codec = svc.formats().codec(id);
        let context: &[u8] = if id.as_str() == "claude-code-v1" {
            TRANSCRIPT
        } else {
            b""
        };
        let delta = codec.compaction_delta(SUMMARY, context, t(1)).unwrap();
        codec
            .validate(&delta)
            .unwrap_or_else(|e| panic!("{id}: {e}"));
        codec
            .check_compaction(&delta)
            .unwrap_or_else(|e| panic!("{id}: {e}"));
        let input = SummaryInput::decode(svc.formats(), CommitType::Compaction, id, &delta);
        let text = match input.content {
            Content::Conversation(c) => serde_json::to_string(&c).unwrap(),
            Content::Text(t) => t,
        };
        assert!(text.contains(SUMMARY), "{id}: {text}");
    }
}

/// The README's step 6 (issue 46): after `ctx compact`, the next turn
/// checkpointed on the session starts on a line of its own.
#[tokio::test]
async fn the_turn_after_a_raw_compaction_starts_its_own_line() {
    let (svc, tenant) = service();
    let ids = chain(
        &svc,
        &tenant,
        "raw",
        &[
            (CommitType::Delta, b"user: find the bug in parser.rs\n"),
            (
                CommitType::Compaction,
                b"summary: off-by-one at parser.rs:42\n",
            ),
            (CommitType::Delta, b"user: fix it\n"),
        ],
    )
    .await;
    let done = svc
        .compact(&tenant, &ids[2], &crate::summarize::Extractive, None)
        .await
        .unwrap();
    let next = NewCommit {
        parent: Some(done.commit.id),
        created_at: Some(t(20_000)),
        ..NewCommit::new(
            "alice".parse().unwrap(),
            "tpl",
            fid("raw"),
            Bytes::from_static(b"user: and now the tests\n"),
        )
    };
    let next = svc.checkpoint(&tenant, next).await.unwrap().commit.id;
    let text = bytes_at(&svc, &tenant, &next, Stop::Compaction).await;
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.last(), Some(&"user: and now the tests"), "{text:?}");
    assert!(lines.len() >= 2, "{text:?}");
    assert!(lines[0].starts_with("summary: off-by-one"), "{text:?}");
}

/// Every format whose context is lines (raw, a format no codec claims,
/// the runtime logs) writes a compaction that ends its line, so the delta
/// after it is not glued to the summary; the others are whole values their
/// `concat` joins.
#[test]
fn a_compaction_in_a_format_of_lines_ends_its_line() {
    let (svc, _) = service();
    let mut ids: Vec<FormatId> = svc.formats().ids().cloned().collect();
    ids.push(fid("somebody-elses-v1"));
    let mut line_based = Vec::new();
    for id in &ids {
        let codec = svc.formats().codec(id);
        // A log's empty context is no bytes; an array's is `[]`.
        if !svc.formats().empty(id).unwrap().is_empty() {
            continue;
        }
        line_based.push(id.as_str().to_owned());
        let context: &[u8] = if id.as_str() == "claude-code-v1" {
            TRANSCRIPT
        } else {
            b""
        };
        let delta = codec.compaction_delta(SUMMARY, context, t(1)).unwrap();
        assert_eq!(delta.last(), Some(&b'\n'), "{id}: {delta:?}");
    }
    assert_eq!(
        line_based,
        [
            "claude-code-v1",
            "codex-rollout-v1",
            "gemini-cli-v1",
            "raw",
            "somebody-elses-v1"
        ],
        "the formats of lines"
    );
}

/// Issue 46, item 2: on a raw chain the default (extractive) compaction
/// stands for every turn it replaces, and keeps the last turns verbatim
/// after its summary (seed 003's raw tail); it records that it covers
/// the context at its parent.
#[tokio::test]
async fn an_extractive_compaction_stands_for_every_turn_and_keeps_the_tail() {
    let (svc, tenant) = service();
    let texts: Vec<String> = (1..=5)
        .map(|i| format!("user: turn {i}\nassistant: answer {i}\n"))
        .collect();
    let parts: Vec<(CommitType, &[u8])> = texts
        .iter()
        .map(|t| (CommitType::Delta, t.as_bytes()))
        .collect();
    let ids = chain(&svc, &tenant, "raw", &parts).await;
    let tip = *ids.last().unwrap();
    let done = svc
        .compact(&tenant, &tip, &crate::summarize::Extractive, None)
        .await
        .unwrap();
    let c = done.commit;
    assert_eq!(
        c.tags.get(super::COVERS).map(String::as_str),
        Some(tip.to_string().as_str()),
        "{c:?}"
    );
    let text = String::from_utf8(
        bytes_at(&svc, &tenant, &c.id, Stop::Compaction)
            .await
            .to_vec(),
    )
    .unwrap();
    for i in 1..=3 {
        assert!(
            text.contains(&format!("user: turn {i}")) && text.contains(&format!("answer {i}")),
            "turn {i} is summarized: {text:?}"
        );
    }
    assert!(
        text.ends_with("\nuser: turn 4\nassistant: answer 4\nuser: turn 5\nassistant: answer 5\n"),
        "the last two turns verbatim after the summary: {text:?}"
    );
    let summary = c.summary.as_deref().unwrap();
    assert!(
        summary.contains("turn 1") && summary.contains("turn 3"),
        "{summary:?}"
    );
}
