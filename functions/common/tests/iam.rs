//! IAM as AWS enforces it: every function, built as its Lambda builds it
//! (its own backends, `Function::needs`, no hot cache), is driven through
//! every route it serves with API Gateway v2 events, and the two invoked
//! functions through their events (a branch deadline, the summary
//! schedule with retention). Every AWS call each one makes is recorded
//! ([`CallLog`]) as the IAM action and resource it needs, then evaluated
//! against that function's policy in template.yaml by a maintained IAM
//! evaluator (tests/iam/evaluate.mjs, @cloud-copilot/iam-simulate). A
//! denied call fails the test, naming the function, the action and the
//! resource; docs/iam.md is the run's least-privilege report.
//!
//! Needs the emulator (`CTX_TEST_AWS=1`) and Node with tests/iam's packages
//! (tests/iam/setup; `CTX_TEST_IAM=1` makes their absence a failure).

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::sync::Arc;

use axum::Router;
use chrono::{DateTime, Duration, Utc};
use ctx_core::api::testing::Call;
use ctx_core::bootstrap::Backends;
use ctx_core::config::{Config, Retention, harness_flag};
use ctx_core::service::Limits;
use ctx_core::store::aws::calls::{self, CallLog, IamCall};
use ctx_core::store::conformance::fresh_tenant;
use ctx_core::{Clock, ManualClock, OsRandom, Service};
use ctx_lambda::{Function, JwtClaimsAuth, app};
use serde_json::{Value, json};

#[path = "support/apigw.rs"]
mod apigw;
#[path = "support/table.rs"]
mod table;

const SCHEDULED: &str = include_str!("../../../tests/data/eventbridge/scheduled-event.json");
/// The Bedrock model the stack is given (parameter `SummarizerModel`).
const MODEL: &str = "anthropic.claude-3-haiku-20240307-v1:0";
/// The customer-managed key the stack is given (parameter `KmsKeyArn`).
const KMS_KEY: &str = "arn:aws:kms:us-east-1:123456789012:key/0b6a2d53-4f7e-4c2a-9d1e-8c5f3a7b9e10";
const ASL: &str = include_str!("../../../infra/statemachines/branch-timer.asl.json");

/// The functions, each over its own service, as API Gateway routes to them.
struct Fleet {
    functions: Vec<(Function, Arc<Service>, Router)>,
    tenant: String,
    /// Every route a request reached with a 2xx, as `METHOD /template`.
    covered: BTreeSet<String>,
}

impl Fleet {
    fn service(&self, f: Function) -> Arc<Service> {
        self.functions
            .iter()
            .find(|(g, ..)| *g == f)
            .map(|(_, s, _)| s.clone())
            .expect("every function is built")
    }

    /// Sends `method uri` (matching the route `route`) to the function
    /// serving it, as that function; answers the status and JSON body
    /// (`Value::Null` for a body that is not JSON).
    async fn call(&mut self, route: &str, uri: &str, body: Body) -> (u16, Value) {
        let (method, template) = route.split_once(' ').expect("METHOD /path");
        assert!(
            matches_template(template, uri.split('?').next().unwrap_or(uri)),
            "{uri} is not a path of {route}"
        );
        let (content_type, bytes) = match body {
            Body::None => (None, Vec::new()),
            Body::Json(v) => (Some("application/json"), v.to_string().into_bytes()),
            Body::Bytes(b) => (Some("application/octet-stream"), b),
            Body::Text(t) => (Some("text/plain"), t.into_bytes()),
        };
        let event = event(
            &Call {
                method: method.to_owned(),
                uri: uri.to_owned(),
                tenant: Some(self.tenant.clone()),
                body: bytes,
            },
            content_type,
        );
        // API Gateway routes by method and path to the one function
        // whose events name the route.
        let group = ctx_core::api::routes(&Limits::default())
            .iter()
            .find(|r| format!("{} {}", r.method, apigw::api_gateway_path(r.path)) == route)
            .unwrap_or_else(|| panic!("{route} is no route"))
            .group;
        let (f, _, router) = self
            .functions
            .iter()
            .find(|(f, ..)| f.groups().contains(&group))
            .unwrap_or_else(|| panic!("no function serves {route}"));
        let resp = calls::as_function(f.name(), apigw::invoke(router, &event))
            .await
            .answered();
        let status = resp.status().as_u16();
        let body = resp.into_body();
        assert!(
            (200..300).contains(&status),
            "{route} ({uri}) on {f}: {status} {}",
            String::from_utf8_lossy(&body)
        );
        self.covered.insert(route.to_owned());
        (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
    }
}

enum Body {
    None,
    Json(Value),
    Bytes(Vec<u8>),
    Text(String),
}

/// Whether `path` is an instance of the API Gateway route `template`
/// (`{x}` one segment, `{x+}` the rest).
fn matches_template(template: &str, path: &str) -> bool {
    let t: Vec<&str> = template.split('/').collect();
    let p: Vec<&str> = path.split('/').collect();
    for (i, seg) in t.iter().enumerate() {
        if seg.ends_with("+}") {
            return p.len() > i;
        }
        let Some(got) = p.get(i) else { return false };
        if !(seg.starts_with('{') || seg == got) {
            return false;
        }
    }
    t.len() == p.len()
}

/// An API Gateway v2 event for `call` as `alice` of `call.tenant`, with
/// its body's content type.
fn event(call: &Call, content_type: Option<&str>) -> String {
    let mut e = apigw::event(call);
    match content_type {
        Some(ct) => e["headers"]["content-type"] = json!(ct),
        None => {
            e["headers"]
                .as_object_mut()
                .expect("headers")
                .remove("content-type");
        }
    }
    e["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = json!("alice");
    e.to_string()
}

/// The string `key` of a JSON answer.
fn field(v: &Value, key: &str) -> String {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("no string {key:?} in {v}"))
        .to_owned()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn start() -> DateTime<Utc> {
    "2026-11-20T10:00:00Z".parse().unwrap()
}

fn checkpoint(session: &str, delta: &str, parent: Option<&str>, at: DateTime<Utc>) -> Value {
    let mut b = ctx_core::api::testing::checkpoint_body(delta, parent);
    b["session_id"] = json!(session);
    b["created_at"] = json!(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    b
}

/// Drives every route and event; answers the calls recorded.
async fn drive(fleet: &mut Fleet, clock: &ManualClock) {
    let mut b = [0u8; 4];
    ctx_core::IdSource::fill(&OsRandom, &mut b);
    let s = format!("s-iam-{}", hex(&b));
    let old = format!("s-old-{}", hex(&b));

    // A session idle long enough for retention, written first.
    let (_, c) = fleet
        .call(
            "POST /v1/commits",
            "/v1/commits",
            // Above the inline threshold: its delta is an S3 object.
            Body::Json(checkpoint(
                &old,
                &"user: an old session\n".repeat(4096),
                None,
                start(),
            )),
        )
        .await;
    let old_root = field(&c, "id");
    // With a branch, which retention must erase with it.
    let (_, br) = fleet
        .call(
            "POST /v1/branches",
            "/v1/branches",
            Body::Json(
                json!({"session_id": old, "description": "left open", "timeout_seconds": 600}),
            ),
        )
        .await;
    let old_branch = field(&br, "branch_id");
    clock.set(start() + Duration::days(3));
    let now = Clock::now(clock);

    fleet.call("GET /healthz", "/healthz", Body::None).await;
    fleet
        .call("GET /v1/openapi.json", "/v1/openapi.json", Body::None)
        .await;

    // Artifacts: upload, download, a presigned upload promoted by a commit.
    let (_, a) = fleet
        .call(
            "POST /v1/artifacts",
            "/v1/artifacts",
            Body::Bytes(b"user: an artifact\n".to_vec()),
        )
        .await;
    let art = field(&a, "ref");
    fleet
        .call(
            "GET /v1/artifacts/{art}",
            &format!("/v1/artifacts/{art}"),
            Body::None,
        )
        .await;
    let staged_bytes = format!("user: staged upload {}\n", hex(&b)).into_bytes();
    let staged = format!("art-{}", blake3::hash(&staged_bytes).to_hex());
    let (_, up) = fleet
        .call(
            "POST /v1/uploads",
            "/v1/uploads",
            Body::Json(json!({"artifact_ref": staged, "size": staged_bytes.len()})),
        )
        .await;
    let url = field(&up, "url");
    let mut put = reqwest::Client::new().put(&url);
    for (k, v) in up["headers"].as_object().into_iter().flatten() {
        put = put.header(k, v.as_str().unwrap_or_default());
    }
    let put = put
        .body(staged_bytes.clone())
        .send()
        .await
        .expect("PUT to the presigned URL");
    assert!(put.status().is_success(), "presigned PUT: {}", put.status());

    // Commits.
    let (_, c) = fleet
        .call(
            "POST /v1/commits",
            "/v1/commits",
            Body::Json(checkpoint(&s, "user: hello\n", None, now)),
        )
        .await;
    let root = field(&c, "id");
    let (_, c) = fleet
        .call(
            "POST /v1/commits",
            "/v1/commits",
            // Above the inline threshold: summarize and materialize read
            // it from S3.
            Body::Json(checkpoint(
                &s,
                &"assistant: hi\n".repeat(4096),
                Some(&root),
                now,
            )),
        )
        .await;
    let child = field(&c, "id");
    let mut promoted = checkpoint(&s, "", Some(&child), now);
    promoted.as_object_mut().unwrap().remove("delta");
    promoted["artifact_ref"] = json!(staged);
    let (_, c) = fleet
        .call("POST /v1/commits", "/v1/commits", Body::Json(promoted))
        .await;
    let tip = field(&c, "id");

    // A batch on top of the tip: an artifact above the inline threshold
    // (its commit's delta goes to S3), one no commit names (stored as an
    // upload is), an in-batch parent, two ref moves; then the same batch
    // again (every commit exists: the by-id read, the condition checks).
    let big = "assistant: batched\n".repeat(4096);
    let big_art = ctx_core::ArtifactRef::of(big.as_bytes()).to_string();
    let loose = format!("loose bytes of {s}");
    let mut first = checkpoint(&s, "", Some(&tip), now);
    first.as_object_mut().unwrap().remove("delta");
    first["artifact_ref"] = json!(big_art);
    let mut second = checkpoint(&s, "user: and in the batch\n", None, now);
    second["parent_in_batch"] = json!(0);
    let batch = json!({
        "artifacts": [
            {"ref": big_art, "text": big},
            {"ref": ctx_core::ArtifactRef::of(loose.as_bytes()).to_string(), "text": loose},
        ],
        "commits": [first, second],
        "refs": [
            {"name": format!("batch/{s}/a"), "target_in_batch": 0},
            {"name": format!("batch/{s}/b"), "target_in_batch": 1},
        ],
    });
    let (status, done) = fleet
        .call("POST /v1/batch", "/v1/batch", Body::Json(batch.clone()))
        .await;
    assert_eq!(status, 201, "{done}");
    let (status, again) = fleet
        .call("POST /v1/batch", "/v1/batch", Body::Json(batch))
        .await;
    assert_eq!((status, &again), (200, &done));

    fleet
        .call(
            "GET /v1/commits/{ctx}",
            &format!("/v1/commits/{tip}"),
            Body::None,
        )
        .await;
    fleet
        .call(
            "PATCH /v1/commits/{ctx}",
            &format!("/v1/commits/{root}"),
            Body::Json(json!({"summary": "the greeting"})),
        )
        .await;
    fleet
        .call(
            "GET /v1/commits/{ctx}/history",
            &format!("/v1/commits/{tip}/history"),
            Body::None,
        )
        .await;
    fleet
        .call(
            "GET /v1/commits",
            "/v1/commits?missing_summary=true",
            Body::None,
        )
        .await;
    fleet
        .call(
            "POST /v1/commits/{ctx}/summarize",
            &format!("/v1/commits/{child}/summarize"),
            Body::Json(json!({})),
        )
        .await;
    // Cold (writes the cache entry), then cached.
    for _ in 0..2 {
        fleet
            .call(
                "POST /v1/commits/{ctx}/materialize",
                &format!("/v1/commits/{tip}/materialize"),
                Body::Json(json!({"format": "raw", "stop": "root"})),
            )
            .await;
    }
    // A read of a ref's tip (the batch's second commit, cold: it writes
    // the cache entry, and its bytes come inline), then of the tip above
    // (cached: its bytes are read back from cache/).
    for body in [
        json!({"ref": format!("batch/{s}/b")}),
        json!({"commit": tip, "format": "raw", "stop": "root"}),
    ] {
        let (status, read) = fleet
            .call("POST /v1/read", "/v1/read", Body::Json(body))
            .await;
        assert_eq!(status, 200, "{read}");
        assert!(read.get("content").is_some(), "{read}");
    }
    fleet
        .call(
            "GET /v1/resolve",
            &format!(
                "/v1/resolve?principal=alice&at={}",
                now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ),
            Body::None,
        )
        .await;

    // Agents (alice wrote the commits above).
    fleet
        .call("GET /v1/agents/{agent}", "/v1/agents/alice", Body::None)
        .await;
    fleet
        .call(
            "PATCH /v1/agents/{agent}",
            "/v1/agents/alice",
            Body::Json(json!({"window_seconds": 86400, "persist_working_context": true})),
        )
        .await;
    fleet
        .call(
            "GET /v1/agents/{agent}/window",
            &format!("/v1/agents/alice/window?thread_id={s}"),
            Body::None,
        )
        .await;
    let (_, save) = fleet
        .call(
            "POST /v1/agents/{agent}/saves",
            "/v1/agents/alice/saves",
            Body::Json(json!({"description": "before the review"})),
        )
        .await;
    let save_id = save["save_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a save_id in {save}"))
        .to_owned();
    fleet
        .call(
            "GET /v1/agents/{agent}/saves",
            "/v1/agents/alice/saves",
            Body::None,
        )
        .await;
    fleet
        .call(
            "GET /v1/agents/{agent}/saves/{save_id}",
            &format!("/v1/agents/alice/saves/{save_id}"),
            Body::None,
        )
        .await;
    fleet
        .call(
            "POST /v1/agents/{agent}/saves/{save_id}/restore",
            &format!("/v1/agents/alice/saves/{save_id}/restore"),
            Body::None,
        )
        .await;
    fleet
        .call(
            "PUT /v1/agents/{agent}/working-context",
            "/v1/agents/alice/working-context",
            Body::Json(json!({
                "schema_version": 1, "agent_id": "alice", "epoch_id": 1,
                "messages": [{"role": "user", "content": "hello"}],
            })),
        )
        .await;
    fleet
        .call(
            "POST /v1/agents/{agent}/working-context/restore",
            "/v1/agents/alice/working-context/restore",
            Body::Json(json!({})),
        )
        .await;
    fleet
        .call(
            "PUT /v1/agents/{agent}/processes/{process_id}",
            "/v1/agents/alice/processes/build-1",
            Body::Json(json!({"description": "building the docs", "thread_id": "t1"})),
        )
        .await;
    fleet
        .call(
            "GET /v1/agents/{agent}/processes",
            "/v1/agents/alice/processes",
            Body::None,
        )
        .await;
    fleet
        .call(
            "GET /v1/agents/{agent}/context",
            "/v1/agents/alice/context?thread_id=t1",
            Body::None,
        )
        .await;
    fleet
        .call(
            "DELETE /v1/agents/{agent}/processes/{process_id}",
            "/v1/agents/alice/processes/build-1",
            Body::None,
        )
        .await;
    fleet
        .call(
            "POST /v1/agents/{agent}/clear",
            "/v1/agents/alice/clear",
            Body::None,
        )
        .await;

    // Pins.
    fleet
        .call(
            "PUT /v1/pins/{kind}/{name+}",
            &format!("/v1/pins/session/{s}"),
            Body::None,
        )
        .await;
    fleet.call("GET /v1/pins", "/v1/pins", Body::None).await;
    fleet
        .call(
            "DELETE /v1/pins/{kind}/{name+}",
            &format!("/v1/pins/session/{s}"),
            Body::None,
        )
        .await;

    // Workspaces.
    let ws = format!("ws-{}", hex(&b));
    fleet
        .call(
            "PUT /v1/workspaces/{ws}/files/{path+}",
            &format!("/v1/workspaces/{ws}/files/notes.md"),
            Body::Bytes(b"# notes\n".to_vec()),
        )
        .await;
    fleet
        .call(
            "POST /v1/workspaces/{ws}/append/{path+}",
            &format!("/v1/workspaces/{ws}/append/log.jsonl"),
            Body::Text("{\"event\": \"started\"}\n".into()),
        )
        .await;
    fleet
        .call(
            "GET /v1/workspaces/{ws}/files",
            &format!("/v1/workspaces/{ws}/files"),
            Body::None,
        )
        .await;
    fleet
        .call(
            "GET /v1/workspaces/{ws}/files/{path+}",
            &format!("/v1/workspaces/{ws}/files/notes.md"),
            Body::None,
        )
        .await;
    fleet
        .call(
            "GET /v1/workspaces/{ws}/context",
            &format!("/v1/workspaces/{ws}/context"),
            Body::None,
        )
        .await;
    fleet
        .call(
            "DELETE /v1/workspaces/{ws}/files/{path+}",
            &format!("/v1/workspaces/{ws}/files/notes.md"),
            Body::None,
        )
        .await;

    // Refs: set, read, compact on it, evict before the compaction, delete.
    let r = format!("iam/{}", hex(&b));
    fleet
        .call(
            "PUT /v1/refs/{name+}",
            &format!("/v1/refs/{r}"),
            Body::Json(json!({"target": tip})),
        )
        .await;
    fleet.call("GET /v1/refs", "/v1/refs", Body::None).await;
    fleet
        .call("GET /v1/refs/{name+}", &format!("/v1/refs/{r}"), Body::None)
        .await;
    let (_, comp) = fleet
        .call(
            "POST /v1/commits/{ctx}/compact",
            &format!("/v1/commits/{tip}/compact"),
            Body::Json(json!({"ref": {"name": r, "expected": tip}})),
        )
        .await;
    let compaction = comp["commit"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a compaction id in {comp}"))
        .to_owned();
    fleet
        .call(
            "POST /v1/refs/{name+}",
            &format!("/v1/refs/{r}/evict"),
            Body::Json(json!({"before": compaction})),
        )
        .await;
    fleet
        .call(
            "DELETE /v1/refs/{name+}",
            &format!("/v1/refs/{r}"),
            Body::None,
        )
        .await;

    // Branches: one returned, one left to its deadline (branch-expire),
    // then the session ended.
    let branch = |d: &str, timeout: u64| {
        Body::Json(json!({"session_id": s, "description": d, "timeout_seconds": timeout}))
    };
    let (_, br) = fleet
        .call("POST /v1/branches", "/v1/branches", branch("returns", 600))
        .await;
    let returned = field(&br, "branch_id");
    let (_, br) = fleet
        .call("POST /v1/branches", "/v1/branches", branch("times out", 1))
        .await;
    let expiring = field(&br, "branch_id");
    fleet
        .call(
            "GET /v1/branches",
            &format!("/v1/branches?session_id={s}"),
            Body::None,
        )
        .await;
    fleet
        .call(
            "GET /v1/branches/{br}",
            &format!("/v1/branches/{returned}"),
            Body::None,
        )
        .await;
    fleet
        .call(
            "POST /v1/branches/{br}/return",
            &format!("/v1/branches/{returned}/return"),
            Body::Json(json!({"message": "done"})),
        )
        .await;
    clock.set(now + Duration::seconds(5));
    let expire = fleet.service(Function::BranchExpire);
    let input = serde_json::to_value(ctx_core::store::aws::sfn::TimerInput::new(
        &fleet.tenant.parse().unwrap(),
        &expiring.parse().unwrap(),
        now + Duration::seconds(1),
    ))
    .unwrap();
    let out = calls::as_function(
        Function::BranchExpire.name(),
        ctx_lambda::expire(&expire, input),
    )
    .await
    .expect("branch-expire");
    assert_eq!(out["outcome"], "timed_out", "{out}");
    // A creation that searches the memories the return above left.
    let (_, injected) = fleet
        .call(
            "POST /v1/branches",
            "/v1/branches",
            Body::Json(json!({"session_id": s, "description": "returns again",
                              "inject_memories": true})),
        )
        .await;
    assert_eq!(
        injected["memories"].as_array().map(Vec::len),
        Some(1),
        "{injected}"
    );
    fleet
        .call(
            "GET /v1/memories",
            "/v1/memories?q=returns&min_confidence=0.5",
            Body::None,
        )
        .await;
    fleet
        .call(
            "POST /v1/sessions/{id}/end",
            &format!("/v1/sessions/{s}/end"),
            Body::None,
        )
        .await;

    // Collection and erasure (of this session, and of bob's work).
    let mut by_bob = checkpoint(&format!("{s}-bob"), "user: bob's turn\n", None, now);
    by_bob["principal"] = json!("bob");
    fleet
        .call("POST /v1/commits", "/v1/commits", Body::Json(by_bob))
        .await;
    fleet
        .call(
            "POST /v1/gc",
            "/v1/gc",
            Body::Json(json!({"dry_run": true})),
        )
        .await;
    fleet
        .call(
            "DELETE /v1/sessions/{id}",
            &format!("/v1/sessions/{s}?cascade=true"),
            Body::None,
        )
        .await;
    fleet
        .call(
            "DELETE /v1/principals/{principal}",
            "/v1/principals/bob?cascade=true",
            Body::None,
        )
        .await;

    // The schedule: summaries, then retention (the old session is idle
    // for three days).
    let summarizer = fleet.service(Function::Summarizer);
    let scheduled: Value = serde_json::from_str(SCHEDULED).unwrap();
    let deadline = Clock::now(clock) + Duration::minutes(5);
    let report = calls::as_function(
        Function::Summarizer.name(),
        ctx_lambda::summarize(&summarizer, scheduled, deadline),
    )
    .await
    .expect("the summary batch");
    assert!(report["summarized"].as_u64().unwrap() > 0, "{report}");
    let retention = Retention {
        keep_days: 1,
        ..Retention::default()
    };
    let kept = calls::as_function(
        Function::Summarizer.name(),
        ctx_lambda::retain(&summarizer, &retention),
    )
    .await
    .expect("retention");
    let erased = kept[&fleet.tenant]["erased"].to_string();
    assert!(
        erased.contains(&old),
        "retention erased {erased}, not {old} ({old_root})"
    );
    let caller = ctx_core::auth::Caller {
        tenant: fleet.tenant.parse().unwrap(),
        principal: Some("alice".into()),
    };
    let branches = fleet.service(Function::Branch);
    let gone = calls::as_function(
        Function::Branch.name(),
        branches.branch_status(&caller, &old_branch.parse().unwrap()),
    )
    .await
    .expect_err("retention erased the session's branch");
    assert_eq!(gone.kind, ctx_core::ErrorKind::NotFound, "{gone}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_aws_call_of_every_function_is_allowed_by_its_policy() {
    let Some(config) = Config::emulator_from_env() else {
        return;
    };
    let required = harness_flag("CTX_TEST_IAM");
    let evaluator = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/iam");
    if !std::path::Path::new(evaluator)
        .join("node_modules/.ctx-installed")
        .exists()
    {
        assert!(
            !required,
            "CTX_TEST_IAM=1 but tests/iam has no packages: run tests/iam/setup"
        );
        eprintln!("NOT RUN: the IAM evaluator is not installed (tests/iam/setup)");
        return;
    }
    // Everything the harness itself does on AWS (its table, its state
    // machine) before the log is installed: only the functions' calls are
    // recorded.
    let config = table::own_table(&config).await;
    let sfn = ctx_core::store::aws::sfn::SfnTimer::sdk_client().await;
    let mut b = [0u8; 6];
    ctx_core::IdSource::fill(&OsRandom, &mut b);
    let machine = format!("branch-timer-{}", hex(&b));
    let arn = sfn
        .create_state_machine()
        .name(&machine)
        .definition(ASL.replace(
            "${BranchExpireFunctionArn}",
            "arn:aws:lambda:us-east-1:123456789012:function:branch-expire",
        ))
        .role_arn("arn:aws:iam::123456789012:role/branch-timer")
        .send()
        .await
        .expect("create the state machine on the emulator")
        .state_machine_arn;
    let log = CallLog::install();

    let config = Config {
        branch_timer_arn: Some(arn.clone()),
        hot_cache_bytes: 0,
        ..config
    };
    let bedrock = fake_bedrock().await;
    let clock = Arc::new(ManualClock::new(start()));
    let auth = Arc::new(JwtClaimsAuth::new("tenant"));
    let mut functions = Vec::new();
    for f in Function::ALL {
        // Summaries by Bedrock (`Summarizer=bedrock`), its endpoint a fake
        // on 127.0.0.1: the client is the real SDK's, with the call log.
        // Only the functions that summarize have it (template.rs checks
        // the list against the template); the others are extractive.
        let service = Backends::build(&config, f.needs())
            .await
            .unwrap_or_else(|e| panic!("{f}'s backends: {e}"))
            .into_service(clock.clone());
        let service = Arc::new(if f.summarizes() {
            service.with_summarizer(bedrock.clone())
        } else {
            service
        });
        let router = app(*f, service.clone(), auth.clone());
        functions.push((*f, service, router));
    }
    let mut fleet = Fleet {
        functions,
        tenant: fresh_tenant("iam").to_string(),
        covered: BTreeSet::new(),
    };
    drive(&mut fleet, &clock).await;

    // Every route of every function was reached.
    let routes: BTreeSet<String> = ctx_core::api::routes(&Limits::default())
        .iter()
        .map(|r| format!("{} {}", r.method, apigw::api_gateway_path(r.path)))
        .collect();
    let missing: Vec<&String> = routes.difference(&fleet.covered).collect();
    assert!(
        missing.is_empty(),
        "routes the test never reached: {missing:?}"
    );

    let recorded = log.calls();

    let result = evaluate(&config, &machine, &recorded, evaluator);
    let denied = result["denied"].as_array().expect("denied");
    let evaluated: BTreeMap<String, u64> =
        serde_json::from_value(result["evaluated"].clone()).expect("evaluated");
    eprintln!(
        "IAM: {} calls evaluated ({}), {} denied",
        evaluated.values().sum::<u64>(),
        evaluated
            .iter()
            .map(|(f, n)| format!("{f} {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        denied.len()
    );
    let report = result["report"].as_str().expect("report");
    let doc = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/iam.md");
    let on_disk = std::fs::read_to_string(doc).unwrap_or_default();
    let listing: Vec<String> = denied
        .iter()
        .map(|d| {
            format!(
                "  {} may not {} on {} ({}; {})",
                d["function"].as_str().unwrap_or("?"),
                d["action"].as_str().unwrap_or("?"),
                d["resource"].as_str().unwrap_or("?"),
                d["operations"],
                d["why"].as_str().unwrap_or("?")
            )
        })
        .collect();
    assert!(
        denied.is_empty(),
        "{} AWS calls are denied by template.yaml:\n{}",
        denied.len(),
        listing.join("\n")
    );
    for f in Function::ALL {
        assert!(
            evaluated.get(f.name()).copied().unwrap_or(0) > 0,
            "{f} made no AWS call the evaluation saw"
        );
    }
    // The page is this run's: rewritten whenever it differs. Whether a
    // grant is used can differ between runs where the work depends on
    // timing (an erase finds a materialized result in cache/ or not), so
    // it is a report, not a snapshot.
    if on_disk != report {
        std::fs::write(doc, report).expect("write docs/iam.md");
    }
}

/// A Bedrock summarizer whose endpoint is a fake Converse API on
/// 127.0.0.1 answering every call with a summary.
#[allow(clippy::disallowed_methods)] // a fake model API, not ctx's
async fn fake_bedrock() -> Arc<dyn ctx_core::summarize::Summarizer> {
    use aws_sdk_bedrockruntime::config::{BehaviorVersion, Credentials, Region};
    use ctx_core::config::{SummarizerConfig, SummarizerKind};
    use ctx_core::summarize::bedrock::Bedrock;
    let app = axum::Router::new().route(
        "/model/{model}/converse",
        axum::routing::post(|| async {
            axum::Json(json!({
                "output": {"message": {"role": "assistant", "content": [{"text": "a summary"}]}},
                "stopReason": "end_turn",
                "usage": {"inputTokens": 20, "outputTokens": 3, "totalTokens": 23},
                "metrics": {"latencyMs": 1},
            }))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let cfg = SummarizerConfig {
        kind: SummarizerKind::Bedrock,
        model: MODEL.into(),
        ..SummarizerConfig::default()
    };
    let mut sdk = aws_sdk_bedrockruntime::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(calls::REGION))
        .endpoint_url(url)
        .credentials_provider(Credentials::new("AKIDTEST", "secret", None, None, "test"))
        .http_client(ctx_core::store::aws::https_client())
        .retry_config(Bedrock::sdk_policy(&cfg).retry_config())
        .timeout_config(Bedrock::sdk_policy(&cfg).timeout_config());
    sdk.push_interceptor(CallLog::interceptor().expect("the call log is installed"));
    Arc::new(Bedrock::with_client(
        aws_sdk_bedrockruntime::Client::from_conf(sdk.build()),
        &cfg,
    ))
}

/// Runs tests/iam/evaluate.mjs over the recorded calls.
fn evaluate(config: &Config, machine: &str, recorded: &[IamCall], dir: &str) -> Value {
    let aws = config.aws().expect("the aws config");
    let input = json!({
        "region": calls::REGION,
        "account": calls::ACCOUNT,
        "stack": "ctx",
        "table": aws.table,
        "bucket": aws.bucket,
        "state_machine": machine,
        // Bedrock summaries and a customer-managed key: the template's
        // conditional grants are evaluated too.
        "parameters": {
            "Summarizer": "bedrock",
            "SummarizerModel": MODEL,
            "KmsKeyArn": KMS_KEY,
        },
        "calls": recorded,
    });
    let mut child = Command::new("node")
        .arg(format!("{dir}/evaluate.mjs"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("node runs (Node 20+ on PATH)");
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(input.to_string().as_bytes())
            .expect("write the calls");
    }
    let out = child.wait_with_output().expect("the evaluator finishes");
    assert!(out.status.success(), "tests/iam/evaluate.mjs failed");
    serde_json::from_slice(&out.stdout).expect("the evaluator answers JSON")
}
