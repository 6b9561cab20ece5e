//! Format benchmarks: materialize throughput per format at a chain of 1,000
//! commits, next to plain byte copying of the same bytes (the physical
//! limit), and translation throughput between formats.
//!
//! Each commit's delta is one turn in the format: a user question, the
//! assistant's thinking (with signature), text and a tool call, the tool's
//! result, and the assistant's answer (~1.5–2.5 KB).
//!
//! Columns:
//! - **materialize**: `Service::materialize` with `stop: root` in the
//!   chain's own format (native tier), not cached, over the memory stores:
//!   the chain walk, fetching and re-hashing every artifact, the codec's
//!   concatenation, storing (hashing) the result.
//! - **codec concat**: the codec's `concat` alone on the same parts.
//! - **byte copy**: copying the same parts into one buffer (`extend_from_slice`).
//! - **translate**: `format::translate::translate` of the same parts into
//!   another format, decoding every part and encoding (and re-reading) the
//!   result.
//! - **summaries/s** (issue 10): the `extractive` summarizer over every
//!   delta of the chain, one commit at a time as the batch does: decoding
//!   the delta through its codec (`SummaryInput::decode`) and writing the
//!   line (`Summarizer::summarize`); and the line alone on decoded input.
//!
//! Run (release, the real numbers; prints a markdown report to stdout):
//!
//! ```text
//! cargo bench -p ctx-core --bench formats
//! ```
//!
//! Smoke run (100 commits, one repetition):
//!
//! ```text
//! cargo bench -p ctx-core --bench formats --profile dev -- --quick
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use ctx_core::CommitType;
use ctx_core::clock::micros_to_time;
use ctx_core::format::canonical::{Block, Conversation, ImageSource, Message, Role};
use ctx_core::format::translate::{Part, translate};
use ctx_core::format::{FormatId, Formats};
use ctx_core::service::{NewCommit, Stop};
use ctx_core::store::Stores;
use ctx_core::store::memory::{MemoryBlobStore, MemoryMetaStore};
use ctx_core::summarize::{Extractive, Summarizer, SummaryInput};
use ctx_core::{CommitId, ManualClock, Service, TenantId};
use serde_json::json;

const EPOCH_MICROS: i64 = 1_790_000_000_000_000;
const FORMATS: [&str; 6] = [
    "claude-code-v1",
    "bureau-agent-v1",
    "bureau-agent-v2",
    "anthropic-messages-v1",
    "openai-chat-v1",
    "openai-responses-v1",
];
const TRANSLATIONS: [(&str, &str); 7] = [
    ("claude-code-v1", "openai-chat-v1"),
    ("claude-code-v1", "anthropic-messages-v1"),
    ("anthropic-messages-v1", "claude-code-v1"),
    ("openai-chat-v1", "bureau-agent-v2"),
    ("bureau-agent-v1", "bureau-agent-v2"),
    ("bureau-agent-v2", "anthropic-messages-v1"),
    ("openai-responses-v1", "anthropic-messages-v1"),
];

fn turn(i: usize) -> Conversation {
    let ts = |s: i64| {
        micros_to_time(EPOCH_MICROS + (i as i64 * 10 + s) * 1_000_000)
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    };
    let msg = |role, content, s| Message {
        role,
        content,
        timestamp: Some(ts(s)),
        origin: 0,
    };
    let id = format!("toolu_{i:06}");
    let mut user = vec![Block::text(format!(
        "Turn {i}: look at src/module_{i}.rs and tell me why the test `case_{i}` fails; \
         the error mentions an index out of bounds near line {}.",
        i % 400
    ))];
    if i.is_multiple_of(50) {
        user.push(Block::Image {
            source: ImageSource::Base64 {
                media_type: "image/png".into(),
                data: base64::engine::general_purpose::STANDARD.encode([7u8; 96]),
            },
        });
    }
    Conversation {
        messages: vec![
            msg(Role::User, user, 0),
            msg(
                Role::Assistant,
                vec![
                    Block::Thinking {
                        thinking: format!(
                            "The failure in case_{i} is probably an off-by-one; read the file first."
                        ),
                        signature: Some(format!("EqQBCkgIBxABGAIiQ{i:08}sig")),
                    },
                    Block::text("Reading the module."),
                    Block::ToolUse {
                        id: id.clone(),
                        name: "Read".into(),
                        input: json!({"file_path": format!("src/module_{i}.rs"), "limit": 40}),
                    },
                ],
                1,
            ),
            msg(
                Role::User,
                vec![Block::ToolResult {
                    tool_use_id: id,
                    content: vec![Block::text(
                        (0..12)
                            .map(|l| {
                                format!(
                                    "{:>6}\tlet x_{l} = buf[i + {l}]; // line {l} of module {i}\n",
                                    l + 30
                                )
                            })
                            .collect::<String>(),
                    )],
                    is_error: i.is_multiple_of(7),
                }],
                2,
            ),
            msg(
                Role::Assistant,
                vec![Block::text(format!(
                    "Line {} reads one past the end of `buf` when `i` is the last index; bound the loop by `len() - 1`.",
                    i % 400
                ))],
                3,
            ),
        ],
    }
}

fn deltas(formats: &Formats, format: &str, n: usize) -> Vec<Bytes> {
    let codec = formats.codec(&format.parse().expect("a format id"));
    (0..n)
        .map(|i| {
            codec
                .encode_canonical(&turn(i))
                .expect("a structured format")
                .bytes
        })
        .collect()
}

async fn chain(format: &str, parts: &[Bytes]) -> (Service, TenantId, CommitId) {
    let stores = Stores {
        blobs: Arc::new(MemoryBlobStore::new()),
        meta: Arc::new(MemoryMetaStore::new()),
    };
    let svc = Service::new(
        stores,
        Arc::new(ManualClock::new(micros_to_time(EPOCH_MICROS))),
    );
    let tenant: TenantId = "bench".parse().expect("a tenant");
    let mut parent = None;
    for (i, p) in parts.iter().enumerate() {
        let req = NewCommit {
            parent,
            created_at: Some(micros_to_time(EPOCH_MICROS + i as i64)),
            ..NewCommit::new(
                "bench".parse().expect("a principal"),
                "bench",
                format.parse().expect("a format id"),
                p.clone(),
            )
        };
        let done = svc
            .checkpoint(&tenant, req)
            .await
            .expect("a valid checkpoint");
        parent = Some(done.commit.id);
    }
    (svc, tenant, parent.expect("at least one commit"))
}

fn best(reps: usize, mut f: impl FnMut() -> Duration) -> Duration {
    (0..reps).map(|_| f()).min().unwrap_or_default()
}

fn mbps(bytes: usize, d: Duration) -> String {
    format!("{:.0}", bytes as f64 / 1e6 / d.as_secs_f64().max(1e-9))
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick")
        || ctx_core::config::harness_flag("CTX_BENCH_QUICK");
    let (commits, reps) = if quick { (100, 1) } else { (1000, 5) };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime can be built");
    let formats = Formats::default();
    let profile = if cfg!(debug_assertions) {
        "debug (numbers are not meaningful)"
    } else {
        "release"
    };
    println!("# ctx format benchmarks\n");
    println!(
        "- CPUs: {}; build profile: {profile}; {commits} commits per chain; best of {reps}\n",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!("## Materialize (native, stop root, not cached) vs byte copy\n");
    println!("| format | MB | materialize MB/s | codec concat MB/s | byte copy MB/s |");
    println!("|---|---:|---:|---:|---:|");
    for format in FORMATS {
        let parts = deltas(&formats, format, commits);
        let total: usize = parts.iter().map(Bytes::len).sum();
        let materialize = best(reps, || {
            rt.block_on(async {
                let (svc, tenant, tip) = chain(format, &parts).await;
                let start = Instant::now();
                let m = svc
                    .materialize(&tenant, &tip, Stop::Root, None)
                    .await
                    .expect("materialize");
                let d = start.elapsed();
                assert!(!m.cached && m.result.tier == ctx_core::format::translate::Tier::Native);
                d
            })
        });
        let codec = formats.codec(&format.parse().expect("a format id"));
        let concat = best(reps * 3, || {
            let start = Instant::now();
            let out = codec.concat(&parts).expect("concat");
            let d = start.elapsed();
            assert!(out.len() >= total - 9 * commits);
            d
        });
        let copy = best(reps * 3, || {
            let start = Instant::now();
            let mut out = Vec::with_capacity(total);
            for p in &parts {
                out.extend_from_slice(p);
            }
            let d = start.elapsed();
            assert_eq!(std::hint::black_box(out).len(), total);
            d
        });
        println!(
            "| {format} | {:.2} | {} | {} | {} |",
            total as f64 / 1e6,
            mbps(total, materialize),
            mbps(total, concat),
            mbps(total, copy)
        );
    }
    println!("\n## Translate ({commits} parts)\n");
    println!("| from | to | tier | MB in | MB/s (input) |");
    println!("|---|---|---|---:|---:|");
    for (from, to) in TRANSLATIONS {
        let parts: Vec<Part> = deltas(&formats, from, commits)
            .into_iter()
            .enumerate()
            .map(|(i, bytes)| Part {
                origin: format!("commit {i}"),
                format: from.parse().expect("a format id"),
                bytes,
            })
            .collect();
        let total: usize = parts.iter().map(|p| p.bytes.len()).sum();
        let target: FormatId = to.parse().expect("a format id");
        let mut tier = "";
        let d = best(reps, || {
            let parts = parts.clone(); // the bytes are shared, not copied
            let start = Instant::now();
            let out = translate(&formats, parts, &target).expect("translate");
            let d = start.elapsed();
            tier = out.tier.as_str();
            d
        });
        println!(
            "| {from} | {to} | {tier} | {:.2} | {} |",
            total as f64 / 1e6,
            mbps(total, d)
        );
    }
    println!("\n## Summaries (issue 10): extractive, {commits} deltas\n");
    println!(
        "| format | KB per delta | decode + summarize /s | summarize alone /s | µs per commit |"
    );
    println!("|---|---:|---:|---:|---:|");
    let summarizer = Extractive;
    let mut summary_formats: Vec<&str> = FORMATS.to_vec();
    summary_formats.push("raw");
    for format in summary_formats {
        let id: FormatId = format.parse().expect("a format id");
        let parts = if format == "raw" {
            // Opaque text: each turn as the excerpt a model would read.
            (0..commits)
                .map(|i| {
                    let input = SummaryInput {
                        commit_type: CommitType::Delta,
                        format: FormatId::raw(),
                        content: ctx_core::summarize::Content::Conversation(turn(i)),
                    };
                    Bytes::from(ctx_core::summarize::excerpt::render(&input))
                })
                .collect()
        } else {
            deltas(&formats, format, commits)
        };
        let total: usize = parts.iter().map(Bytes::len).sum();
        let mut lines = 0usize;
        let full = best(reps, || {
            rt.block_on(async {
                let start = Instant::now();
                for p in &parts {
                    let input = SummaryInput::decode(&formats, CommitType::Delta, &id, p);
                    let s = summarizer
                        .summarize(&input)
                        .await
                        .expect("extractive never fails");
                    lines += s.text.len();
                }
                start.elapsed()
            })
        });
        let inputs: Vec<SummaryInput> = parts
            .iter()
            .map(|p| SummaryInput::decode(&formats, CommitType::Delta, &id, p))
            .collect();
        let alone = best(reps, || {
            rt.block_on(async {
                let start = Instant::now();
                for input in &inputs {
                    let s = summarizer
                        .summarize(input)
                        .await
                        .expect("extractive never fails");
                    lines += s.text.len();
                }
                start.elapsed()
            })
        });
        assert!(std::hint::black_box(lines) > 0);
        let per_s = |d: Duration| commits as f64 / d.as_secs_f64().max(1e-9);
        println!(
            "| {format} | {:.1} | {:.0} | {:.0} | {:.1} |",
            total as f64 / commits as f64 / 1e3,
            per_s(full),
            per_s(alone),
            full.as_secs_f64() * 1e6 / commits as f64
        );
    }
}
