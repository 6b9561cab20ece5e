//! The typed client against the real router (memory stores, in process):
//! every method once, URL encoding of odd names, and errors read from the
//! body.

use std::sync::Arc;

use ctx_cli::client::Client;
use ctx_core::api::{AppState, Group, router};
use ctx_core::auth::{TokenAuth, token_hash};
use ctx_core::branch::{BranchConfig, Branching, NoTimer, RuleScrubber};
use ctx_core::format::FormatId;
use ctx_core::store::memory::MemoryBranchStore;
use ctx_core::store::memory::{MemoryBlobStore, MemoryMetaStore};
use ctx_core::store::{Stores, TokenStore};
use ctx_core::wire::{
    BatchRequest, BranchCreateRequest, BranchReturnRequest, CheckpointRequest, MaterializeRequest,
    SetRefRequest, UpdateMetadataRequest, UploadRequest,
};
use ctx_core::wire::{CommitType, RefMove};
use ctx_core::{
    Clock as _, ErrorKind, ManualClock, OsRandom, Principal, RefName, Service, SessionId,
};

const TOKEN: &str = "token-alice";

/// A summarizer for the test: the first line of the delta, uppercased.
struct Upper;

#[async_trait::async_trait]
impl ctx_core::summarize::Summarizer for Upper {
    fn id(&self) -> String {
        "upper:v1".into()
    }

    async fn summarize(
        &self,
        input: &ctx_core::summarize::SummaryInput,
    ) -> Result<ctx_core::summarize::Summary, ctx_core::summarize::Failure> {
        let text = match &input.content {
            ctx_core::summarize::Content::Text(t) => t.lines().next().unwrap_or("").to_uppercase(),
            ctx_core::summarize::Content::Conversation(_) => "A CONVERSATION".into(),
        };
        Ok(ctx_core::summarize::Summary {
            text,
            input_tokens: 1,
            output_tokens: 1,
        })
    }
}

/// A server on 127.0.0.1 with one token; its base URL.
async fn serve() -> String {
    let meta = Arc::new(MemoryMetaStore::new());
    let clock = Arc::new(ManualClock::new(
        chrono::DateTime::parse_from_rfc3339("2026-01-02T00:00:00Z")
            .unwrap()
            .into(),
    ));
    meta.add_token(&token_hash(TOKEN), &"acme".parse().unwrap(), clock.now())
        .await
        .unwrap();
    let stores = Stores {
        blobs: Arc::new(MemoryBlobStore::new()),
        meta: meta.clone(),
    };
    let service = Service::new(stores, clock)
        .with_branching(Branching {
            store: Arc::new(MemoryBranchStore::new()),
            timer: Arc::new(NoTimer),
            scrubber: Arc::new(RuleScrubber::new().unwrap()),
            ids: Arc::new(OsRandom),
            config: BranchConfig::default(),
        })
        .with_summarizer(Arc::new(Upper));
    let app = router(
        AppState {
            service: Arc::new(service),
            auth: Arc::new(TokenAuth::new(meta)),
        },
        Group::ALL,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

/// `POST /v1/batch` through the typed client: two commits (the second's
/// parent in the batch) and a ref moved to the second, then a stale move
/// refused with the ref's current tip.
#[tokio::test]
async fn a_batch_through_the_client() {
    use ctx_core::wire::{BatchCommitRequest, BatchRefRequest};
    let base = serve().await;
    let c = Client::new(&format!("{base}/"), Some(TOKEN.to_owned()));
    let alice: Principal = "alice".parse().unwrap();
    let name: RefName = "sessions/batch".parse().unwrap();
    let turn = |delta: &str, at: &str| CheckpointRequest {
        created_at: Some(at.parse().unwrap()),
        ..CheckpointRequest::new(alice.clone(), "tpl", FormatId::raw(), delta)
    };
    let req = BatchRequest {
        commits: vec![
            BatchCommitRequest::of(turn("user: one\n", "2026-01-01T00:00:00Z"), None),
            BatchCommitRequest::of(turn("user: two\n", "2026-01-01T00:00:01Z"), Some(0)),
        ],
        refs: vec![BatchRefRequest {
            name: name.clone(),
            expected: None,
            target: None,
            target_in_batch: Some(1),
            on_stale: Default::default(),
        }],
        ..BatchRequest::default()
    };
    let done = c.batch(&req).await.unwrap();
    assert_eq!(done.commits[1].parent, Some(done.commits[0].id));
    let moved = done.refs[0].clone().expect("a moved ref exists");
    assert_eq!(moved.target, done.commits[1].id);
    assert_eq!(c.get_ref(&name).await.unwrap(), moved);
    assert_eq!(
        c.batch(&req).await.unwrap(),
        done,
        "a retry: the same answer"
    );
    let e = c
        .batch(&BatchRequest {
            refs: vec![BatchRefRequest {
                name,
                expected: Some(done.commits[0].id),
                target: Some(done.commits[0].id),
                target_in_batch: None,
                on_stale: Default::default(),
            }],
            ..BatchRequest::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        (e.kind, e.field.as_deref(), e.current),
        (
            ErrorKind::Conflict,
            Some("refs[0].expected"),
            Some(done.commits[1].id.to_string())
        )
    );
}

#[tokio::test]
async fn every_method_against_the_real_router() {
    let base = serve().await;
    let c = Client::new(&format!("{base}/"), Some(TOKEN.to_owned()));

    assert_eq!(c.healthz().await.unwrap(), "ok");
    assert_eq!(c.openapi_json().await.unwrap()["openapi"], "3.1.0");

    let up = c.upload_artifact(b"user: hi\n".to_vec()).await.unwrap();
    assert!(up.created);
    assert_eq!(up.artifact.size, 9);
    let again = c.upload_artifact(b"user: hi\n".to_vec()).await.unwrap();
    assert_eq!((again.created, &again.artifact), (false, &up.artifact));
    assert_eq!(
        c.download_artifact(&up.artifact.artifact_ref)
            .await
            .unwrap(),
        b"user: hi\n"
    );
    // Memory storage takes no direct uploads: the server's kind and field.
    let e = c
        .upload_url(&UploadRequest {
            artifact_ref: up.artifact.artifact_ref,
            size: 9,
        })
        .await
        .unwrap_err();
    assert_eq!(
        (e.kind, e.field.as_deref()),
        (ErrorKind::Invalid, Some("body"))
    );

    // A root from the uploaded artifact, moving a ref whose name has '/'.
    let alice: Principal = "alice".parse().unwrap();
    let name: RefName = "sessions/a/b".parse().unwrap();
    let root_req = CheckpointRequest {
        delta: None,
        artifact_ref: Some(up.artifact.artifact_ref),
        created_at: Some("2026-01-01T00:00:00Z".parse().unwrap()),
        ref_move: Some(RefMove {
            name: name.clone(),
            expected: None,
        }),
        ..CheckpointRequest::new(alice.clone(), "tpl", FormatId::raw(), "")
    };
    let root = c.checkpoint(&root_req).await.unwrap();
    assert!(root.created);
    assert_eq!(root.budget_warning, None);
    let same = c
        .checkpoint(&CheckpointRequest {
            ref_move: None,
            ..root_req
        })
        .await
        .unwrap();
    assert_eq!((same.created, &same.commit), (false, &root.commit));
    let root = root.commit;
    let child = c
        .checkpoint(&CheckpointRequest {
            parent: Some(root.id),
            created_at: Some("2026-01-01T00:00:01Z".parse().unwrap()),
            ..CheckpointRequest::new(alice.clone(), "tpl", FormatId::raw(), "user: more\n")
        })
        .await
        .unwrap()
        .commit;

    assert_eq!(c.get_commit(&root.id).await.unwrap(), root);
    let updated = c
        .update_metadata(
            &root.id,
            &UpdateMetadataRequest {
                summary: Some(Some("the start".to_owned())),
                tags: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(updated.summary.as_deref(), Some("the start"));
    let h = c.history(&child.id, Some(5)).await.unwrap();
    let ids: Vec<_> = h.commits.iter().map(|c| c.id).collect();
    assert_eq!(ids, [child.id, root.id]);
    assert_eq!(c.history(&child.id, None).await.unwrap().commits.len(), 2);

    let req = MaterializeRequest {
        stop: Some("root".parse().unwrap()),
        format: None,
    };
    let m = c.materialize(&child.id, &req).await.unwrap();
    let (m2, bytes) = c.materialize_and_download(&child.id, &req).await.unwrap();
    assert_eq!(m2.result, m.result);
    assert_eq!(bytes, b"user: hi\nuser: more\n");

    assert_eq!(c.resolve(&alice, None).await.unwrap().id, child.id);
    let at = "2026-01-01T02:00:00.5+02:00"
        .parse::<chrono::DateTime<chrono::FixedOffset>>()
        .unwrap()
        .with_timezone(&chrono::Utc);
    assert_eq!(c.resolve(&alice, Some(at)).await.unwrap().id, root.id);
    // Characters a query string must encode: + (a space unencoded), / @ :.
    let nobody: Principal = "bob+eve@x:y/z".parse().unwrap();
    let e = c.resolve(&nobody, None).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    assert!(e.message.contains("bob+eve@x:y/z"), "{e}");

    assert_eq!(c.get_ref(&name).await.unwrap().target, root.id);
    let moved = c
        .set_ref(
            &name,
            &SetRefRequest {
                target: child.id,
                expected: Some(root.id),
            },
        )
        .await
        .unwrap();
    assert_eq!(moved.target, child.id);
    let stale = c
        .set_ref(
            &name,
            &SetRefRequest {
                target: root.id,
                expected: Some(root.id),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(stale.kind, ErrorKind::Conflict);
    assert_eq!(stale.current, Some(child.id.to_string()));
    let list = c.list_refs("sessions/a/", Some(10)).await.unwrap();
    assert_eq!(list.refs, [moved]);
    assert!(c.list_refs("", None).await.unwrap().refs.len() == 1);
    // Evicting before a delta: the server's kind and field come back.
    let e = c
        .evict_ref(
            &name,
            &ctx_core::wire::EvictRequest {
                before: root.id,
                force: false,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(
        (e.kind, e.field.as_deref()),
        (ErrorKind::Invalid, Some("before")),
        "{e}"
    );

    // A session id with a '/' needs encoding in a path; it comes back as
    // sent. (Ids that cannot name their ref are refused: SessionId.)
    let odd: SessionId = "team-a/s1".parse().unwrap();
    let none = c.branch_status_of_session(&odd).await.unwrap();
    assert_eq!(
        (none.branch_id, none.session_id.as_deref()),
        (None, Some(odd.as_str()))
    );
    assert_eq!(c.session_end(&odd).await.unwrap().session_id, odd.as_str());
    let session: SessionId = "s1.a_b-c".parse().unwrap();
    let b = c
        .branch_create(&BranchCreateRequest {
            session_id: session.clone(),
            description: "explore".to_owned(),
            prompt: Some("read it".to_owned()),
            budget: Some(100),
            timeout_seconds: None,
            parent_branch: None,
            inject_memories: false,
        })
        .await
        .unwrap();
    assert_eq!(b.budget_allocated, 100);
    let st = c.branch_status(&b.branch_id).await.unwrap();
    assert_eq!(st.status, "active");
    let of_session = c.branch_status_of_session(&session).await.unwrap();
    assert_eq!(of_session.branch_id.as_ref(), Some(&b.branch_id));
    let into_branch = c
        .checkpoint(&CheckpointRequest {
            ref_move: Some(RefMove {
                name: b.chain_ref.parse().unwrap(),
                expected: Some(b.root_commit),
            }),
            parent: Some(b.root_commit),
            commit_type: CommitType::Delta,
            ..CheckpointRequest::new(alice.clone(), "tpl", FormatId::raw(), "x".repeat(340))
        })
        .await
        .unwrap();
    assert!(into_branch.budget_warning.is_some(), "85 of 100 tokens");
    let r = c
        .branch_return(&b.branch_id, &BranchReturnRequest::completed("found it"))
        .await
        .unwrap();
    assert!(r.success);
    let e = c
        .branch_return(&b.branch_id, &BranchReturnRequest::completed("again"))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
    let ended = c.session_end(&session).await.unwrap();
    assert_eq!(ended.session_id, session.as_str());

    // Errors carry the body's kind.
    let missing = "ctx-0123456789abcdef0123456789abcdef".parse().unwrap();
    assert_eq!(
        c.get_commit(&missing).await.unwrap_err().kind,
        ErrorKind::NotFound
    );
    let stranger = Client::new(&base, Some("nope".to_owned()));
    assert_eq!(
        stranger.get_commit(&root.id).await.unwrap_err().kind,
        ErrorKind::Unauthenticated
    );
    let unreachable = Client::new("http://127.0.0.1:9", None);
    assert_eq!(
        unreachable.healthz().await.unwrap_err().kind,
        ErrorKind::Unavailable
    );
}

/// Runs the `ctx` binary in `dir` with no token or server in its
/// environment; (exit code, stderr).
async fn ctx_in(dir: &std::path::Path, args: &[&str]) -> (i32, String) {
    let out = ctx_output(dir, args).await;
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// As [`ctx_in`], the whole output.
async fn ctx_output(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    let (dir, args): (std::path::PathBuf, Vec<String>) = (
        dir.to_owned(),
        args.iter().map(|a| (*a).to_owned()).collect(),
    );
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_ctx"))
            .args(&args)
            .current_dir(&dir)
            .env_remove("CTX_TOKEN")
            .env_remove("CTX_SERVER")
            .env_remove("CTX_DATA")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("ctx runs")
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_say_where_the_token_was_looked_for_and_what_the_url_lacks() {
    let base = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let id = "ctx-0123456789abcdef0123456789abcdef";
    // No token anywhere: where it looked, and how to get one.
    let (code, err) = ctx_in(dir.path(), &["show", id, "--server", &base]).await;
    assert_eq!(code, 5, "{err}");
    assert!(
        err.contains(".ctx/token")
            && err.contains("current directory")
            && err.contains("ctx tokens add"),
        "{err}"
    );
    // A base path the server does not have.
    let wrong = format!("{base}/prod");
    let (code, err) = ctx_in(
        dir.path(),
        &["show", id, "--server", &wrong, "--token", TOKEN],
    )
    .await;
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("base path"), "{err}");
    // No scheme.
    let bare = base.trim_start_matches("http://");
    let (code, err) = ctx_in(
        dir.path(),
        &["show", id, "--server", bare, "--token", TOKEN],
    )
    .await;
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("no scheme") && err.contains("http://"),
        "{err}"
    );
    // Nothing listening.
    let (code, err) = ctx_in(
        dir.path(),
        &[
            "show",
            id,
            "--server",
            "http://127.0.0.1:9",
            "--token",
            TOKEN,
        ],
    )
    .await;
    assert_eq!(code, 6, "{err}");
    assert!(err.contains("connection refused"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_name_the_flag_or_file_the_user_gave() {
    let base = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.jsonl");
    // A Messages API array refuses bytes that are not UTF-8 (a log format
    // keeps them as written); they go as delta_base64.
    std::fs::write(&bad, b"[{\"role\":\"user\",\"content\":\"\xff\"}]").unwrap();
    let conn = ["--server", base.as_str(), "--token", TOKEN];
    let mut args = vec!["checkpoint", bad.to_str().unwrap(), "--principal", "a"];
    args.extend(["--format", "anthropic-messages-v1"]);
    args.extend(conn);
    let (code, err) = ctx_in(dir.path(), &args).await;
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("[file]") && !err.contains("delta_base64"),
        "{err}"
    );
    let good = dir.path().join("good.txt");
    std::fs::write(&good, "user: hi\n").unwrap();
    let mut args = vec!["checkpoint", good.to_str().unwrap(), "--principal", "a"];
    args.extend(conn);
    let (code, err) = ctx_in(dir.path(), &args).await;
    assert_eq!(code, 0, "{err}");
    let c = Client::new(&base, Some(TOKEN.into()));
    let tip = c.resolve(&"a".parse().unwrap(), None).await.unwrap().id;
    let tip = tip.to_string();
    let mut args = vec!["log", tip.as_str(), "-n", "100000"];
    args.extend(conn);
    let (code, err) = ctx_in(dir.path(), &args).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("[-n]") && !err.contains("depth"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_names_the_current_tip_once() {
    let base = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let delta = dir.path().join("d.txt");
    std::fs::write(&delta, "user: hi\n").unwrap();
    let conn = ["--server", base.as_str(), "--token", TOKEN];
    let mut args = vec!["checkpoint", delta.to_str().unwrap(), "--principal", "a"];
    args.extend(["--ref", "r"]);
    args.extend(conn);
    for _ in 0..2 {
        let (code, err) = ctx_in(dir.path(), &args).await;
        assert_eq!(code, 0, "{err}");
    }
    let c = Client::new(&base, Some(TOKEN.into()));
    let tip = c.get_ref(&"r".parse().unwrap()).await.unwrap().target;
    let stale = c.get_commit(&tip).await.unwrap().parent;
    let stale = stale.expect("the second commit has a parent").to_string();
    let tip = tip.to_string();
    // Other bytes: the same ones would be an idempotent retry of the tip.
    std::fs::write(&delta, "user: bye\n").unwrap();
    args.extend(["--expected", stale.as_str()]);
    let (code, err) = ctx_in(dir.path(), &args).await;
    assert_eq!(code, 4, "{err}");
    assert_eq!(err.matches(tip.as_str()).count(), 1, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cat_writes_an_artifact_to_stdout() {
    let base = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let bytes = b"user: hi\n\xff not utf-8\n";
    let delta = dir.path().join("d.bin");
    std::fs::write(&delta, bytes).unwrap();
    let conn = ["--server", base.as_str(), "--token", TOKEN];
    let mut args = vec!["checkpoint", delta.to_str().unwrap(), "--principal", "a"];
    args.extend(conn);
    let (code, err) = ctx_in(dir.path(), &args).await;
    assert_eq!(code, 0, "{err}");
    let c = Client::new(&base, Some(TOKEN.into()));
    let tip = c.resolve(&"a".parse().unwrap(), None).await.unwrap().id;
    let art = c.get_commit(&tip).await.unwrap().artifact_ref.to_string();
    let mut args = vec!["cat", art.as_str()];
    args.extend(conn);
    let out = ctx_output(dir.path(), &args).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, bytes);
    // Malformed, and unknown.
    let unknown = format!("art-{}", "0".repeat(64));
    for (art, want) in [("art-x", 2), (unknown.as_str(), 3)] {
        let mut args = vec!["cat", art];
        args.extend(conn);
        let (code, err) = ctx_in(dir.path(), &args).await;
        assert_eq!(code, want, "{art}: {err}");
    }
}

#[tokio::test]
async fn summaries_are_listed_and_written_through_the_client() {
    let base = serve().await;
    let c = Client::new(&base, Some(TOKEN.to_owned()));
    let mut ids = Vec::new();
    for (i, delta) in [
        "user: fix the parser\n",
        "user: add tests\n",
        "user: ship it\n",
    ]
    .into_iter()
    .enumerate()
    {
        let req = CheckpointRequest {
            parent: ids.last().copied(),
            created_at: Some(format!("2026-01-01T00:00:0{i}Z").parse().unwrap()),
            ..CheckpointRequest::new(
                "alice".parse::<Principal>().unwrap(),
                "tpl",
                FormatId::raw(),
                delta,
            )
        };
        ids.push(c.checkpoint(&req).await.unwrap().commit.id);
    }
    let page = c.missing_summaries(Some(2), None).await.unwrap();
    let listed: Vec<_> = page.commits.iter().map(|m| m.commit.id).collect();
    assert_eq!(listed, ids[..2]);
    let next = page.next_cursor.expect("a second page");
    let page = c.missing_summaries(Some(2), Some(&next)).await.unwrap();
    assert_eq!(page.commits[0].commit.id, ids[2]);
    let req = ctx_core::wire::SummarizeRequest { force: false };
    let done = c.summarize(&ids[0], &req).await.unwrap();
    assert_eq!(done.summary.as_deref(), Some("USER: FIX THE PARSER"));
    assert_eq!(done.tags["summary_by"], "upper:v1");
    let e = c.summarize(&ids[0], &req).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert_eq!(e.field.as_deref(), Some("force"));
    let e = c
        .missing_summaries(Some(2), Some("nope"))
        .await
        .unwrap_err();
    assert_eq!(
        (e.kind, e.field.as_deref()),
        (ErrorKind::Invalid, Some("cursor"))
    );
    let left = c.missing_summaries(None, None).await.unwrap();
    assert_eq!(left.commits.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_prints_what_it_would_remove_then_removes_it() {
    // A server whose artifacts age on the same driven clock.
    let meta = Arc::new(MemoryMetaStore::new());
    let clock = Arc::new(ManualClock::new(
        chrono::DateTime::parse_from_rfc3339("2026-01-02T00:00:00Z")
            .unwrap()
            .into(),
    ));
    meta.add_token(&token_hash(TOKEN), &"acme".parse().unwrap(), clock.now())
        .await
        .unwrap();
    let stores = Stores {
        blobs: Arc::new(MemoryBlobStore::with_clock(clock.clone())),
        meta: meta.clone(),
    };
    let app = router(
        AppState {
            // Deltas in the blob store, so the checkpoint's is a blob the
            // collection keeps (inline ones are never blobs).
            service: Arc::new(Service::new(stores, clock.clone()).with_limits(
                ctx_core::service::Limits {
                    inline_delta_bytes: 0,
                    ..Default::default()
                },
            )),
            auth: Arc::new(TokenAuth::new(meta)),
        },
        Group::ALL,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let c = Client::new(&base, Some(TOKEN.into()));
    let orphan = c
        .upload_artifact(b"nobody names me".to_vec())
        .await
        .unwrap()
        .artifact
        .artifact_ref;
    let dir = tempfile::tempdir().unwrap();
    let delta = dir.path().join("d.txt");
    std::fs::write(&delta, "user: kept\n").unwrap();
    let conn = ["--server", base.as_str(), "--token", TOKEN];
    let mut args = vec!["checkpoint", delta.to_str().unwrap(), "--principal", "a"];
    args.extend(conn);
    let (code, err) = ctx_in(dir.path(), &args).await;
    assert_eq!(code, 0, "{err}");
    // Past the default 24 h grace period.
    clock.advance_micros(25 * 3_600_000_000);

    let mut args = vec!["gc", "--dry-run"];
    args.extend(conn);
    let out = ctx_output(dir.path(), &args).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains(&format!("would remove {orphan} (durable, 15 bytes)")),
        "{stdout}"
    );
    assert!(stdout.contains("kept 1 referenced"), "{stdout}");
    assert!(
        c.download_artifact(&orphan).await.is_ok(),
        "a dry run removes nothing"
    );

    let mut args = vec!["gc"];
    args.extend(conn);
    let out = ctx_output(dir.path(), &args).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains(&format!("removed {orphan}")), "{stdout}");
    assert!(
        stdout.contains("removed 1 artifacts (15 bytes)"),
        "{stdout}"
    );
    assert_eq!(
        c.download_artifact(&orphan).await.unwrap_err().kind,
        ErrorKind::NotFound
    );
    let tip = c.resolve(&"a".parse().unwrap(), None).await.unwrap().id;
    let m = c
        .materialize(&tip, &MaterializeRequest::default())
        .await
        .unwrap();
    assert!(
        c.download_artifact(&m.result.artifact_ref).await.is_ok(),
        "the commit's bytes stay"
    );
}

/// A chain of `n` raw commits on ref `r`, written by `ctx checkpoint`;
/// their ids, newest first.
async fn chain_on_ref(base: &str, dir: &std::path::Path, r: &str, n: usize) -> Vec<String> {
    let conn = ["--server", base, "--token", TOKEN];
    let delta = dir.join("turn.txt");
    for i in 0..n {
        std::fs::write(&delta, format!("user: turn {i}\n")).unwrap();
        let mut args = vec!["checkpoint", delta.to_str().unwrap(), "--principal", "a"];
        args.extend(["--ref", r]);
        args.extend(conn);
        let (code, err) = ctx_in(dir, &args).await;
        assert_eq!(code, 0, "{err}");
    }
    let c = Client::new(base, Some(TOKEN.into()));
    let tip = c.get_ref(&r.parse().unwrap()).await.unwrap().target;
    let h = c.history(&tip, None).await.unwrap();
    assert_eq!(h.commits.len(), n);
    h.commits.iter().map(|c| c.id.to_string()).collect()
}

/// `ctx log` says on stderr where it stopped before the root, `--json`
/// carries `next`, and `--all` pages on to the root.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_says_where_it_stopped_and_all_pages_to_the_root() {
    let base = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let ids = chain_on_ref(&base, dir.path(), "sessions/paged", 4).await;
    let conn = ["--server", base.as_str(), "--token", TOKEN];
    let log = |extra: &[&str]| {
        let mut args = vec!["log", "sessions/paged"];
        args.extend(extra);
        args.extend(conn);
        let args: Vec<String> = args.into_iter().map(str::to_owned).collect();
        let dir = dir.path().to_owned();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = ctx_output(&dir, &args).await;
            assert!(out.status.success(), "{args:?}: {out:?}");
            (
                String::from_utf8(out.stdout).unwrap(),
                String::from_utf8(out.stderr).unwrap(),
            )
        }
    };
    let first = |out: &str| -> Vec<String> {
        out.lines()
            .map(|l| l.split(' ').next().unwrap().to_owned())
            .collect()
    };
    let (out, err) = log(&["-n", "3"]).await;
    assert_eq!(first(&out), ids[..3]);
    assert!(
        err.contains(&format!("ctx log {} -n 3", ids[3])),
        "says how to go on: {err}"
    );
    let (out, err) = log(&["-n", "4"]).await;
    assert_eq!(first(&out), ids);
    assert!(err.is_empty(), "at the root, nothing to add: {err}");
    let (out, _) = log(&["-n", "3", "--json"]).await;
    let page: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(page["next"], ids[3].as_str(), "{page}");
    let (out, err) = log(&["--all", "-n", "3"]).await;
    assert_eq!(first(&out), ids);
    assert!(err.is_empty(), "{err}");
    let (out, _) = log(&["--all", "-n", "3", "--json"]).await;
    let all: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(all["commits"].as_array().unwrap().len(), 4, "{all}");
    assert!(all.get("next").is_none(), "{all}");
}

/// The MCP tools as a client calls them: `log` pages with `next` and
/// `cursor`; `show`, `log` and `materialize` take a ref name as the CLI
/// does; `checkpoint` writes a delta onto a ref.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_tools_page_take_ref_names_and_checkpoint() {
    use ctx_cli::mcp::call_tool;
    use serde_json::json;
    let base = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let ids = chain_on_ref(&base, dir.path(), "sessions/mcp", 3).await;
    let c = Client::new(&base, Some(TOKEN.into()));
    let call = |name: &'static str, args: serde_json::Value| {
        let c = &c;
        async move { call_tool(c, None, name, &args).await }
    };
    let page = call("log", json!({"ctx": "sessions/mcp", "depth": 2}))
        .await
        .unwrap();
    assert_eq!(page["commits"][0]["id"], ids[0].as_str(), "{page}");
    assert_eq!(page["next"], ids[2].as_str(), "{page}");
    let rest = call(
        "log",
        json!({"ctx": "sessions/mcp", "depth": 2, "cursor": page["next"]}),
    )
    .await
    .unwrap();
    assert_eq!(rest["commits"].as_array().unwrap().len(), 1, "{rest}");
    assert_eq!(rest["commits"][0]["id"], ids[2].as_str());
    assert!(rest.get("next").is_none(), "{rest}");
    let bad = call("log", json!({"ctx": "sessions/mcp", "cursor": "nope"}))
        .await
        .unwrap_err();
    assert_eq!(bad.field.as_deref(), Some("cursor"), "{bad:?}");

    let shown = call("show", json!({"ctx": "sessions/mcp"})).await.unwrap();
    assert_eq!(shown["id"], ids[0].as_str(), "{shown}");
    let m = call(
        "materialize",
        json!({"ctx": "sessions/mcp", "stop": "root"}),
    )
    .await
    .unwrap();
    assert_eq!(m["commit"], ids[0].as_str(), "{m}");
    assert_eq!(
        m["excerpt"], "user: turn 0\nuser: turn 1\nuser: turn 2\n",
        "{m}"
    );
    let missing = call("show", json!({"ctx": "sessions/none"}))
        .await
        .unwrap_err();
    assert_eq!(
        (missing.kind, missing.field.as_deref()),
        (ErrorKind::NotFound, Some("ctx")),
        "{missing:?}"
    );

    // A checkpoint onto the ref continues its tip and moves it.
    let made = call(
        "checkpoint",
        json!({"ref": {"name": "sessions/mcp"}, "delta": "user: turn 3\n",
               "principal": "a", "commit_type": "delta", "format": "raw",
               "template": "t", "checkpoint": "turn_boundary"}),
    )
    .await
    .unwrap();
    assert_eq!(made["parent"], ids[0].as_str(), "{made}");
    let tip = c.get_ref(&"sessions/mcp".parse().unwrap()).await.unwrap();
    assert_eq!(json!(tip.target), made["id"]);
    // Onto a new ref: a root commit.
    let root = call(
        "checkpoint",
        json!({"ref": {"name": "sessions/mcp-new"}, "delta": "user: hi\n",
               "principal": "a", "commit_type": "delta", "format": "raw",
               "template": "t", "checkpoint": "turn_boundary"}),
    )
    .await
    .unwrap();
    assert!(root["parent"].is_null(), "{root}");
    // The server's validation, naming the field; nothing written.
    let bad = call(
        "checkpoint",
        json!({"ref": {"name": "sessions/mcp"}, "delta": "x\n", "principal": "a b",
               "commit_type": "delta", "format": "raw", "template": "t",
               "checkpoint": "turn_boundary"}),
    )
    .await
    .unwrap_err();
    assert_eq!(bad.field.as_deref(), Some("principal"), "{bad:?}");
    let still = c.get_ref(&"sessions/mcp".parse().unwrap()).await.unwrap();
    assert_eq!(still.target, tip.target);
}
