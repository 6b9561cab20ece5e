//! Workspace files and read_context on the memory store: the assembly
//! table (pinned, and equal to the local-directory assembly), concurrent
//! appends, compare-and-swap, deletion, and a log tail that reads only the
//! commits it returns.

use bytes::Bytes;
use std::sync::Arc;

use crate::clock::ManualClock;
use crate::error::ErrorKind;
use crate::id::TenantId;
use crate::service::Service;
use crate::store::Stores;
use crate::store::conformance::t;
use crate::store::memory::{MemoryBlobStore, MemoryMetaStore};
use crate::workspace::cases::{Case, Op, cases, write_dirs};
use crate::workspace::context::assemble;
use crate::workspace::dir::DirSource;
use crate::workspace::{FilePath, WorkspaceId};

type Counting = crate::store::counting::CountingBlobs<MemoryBlobStore>;

fn service() -> (Service, TenantId, Arc<Counting>) {
    let blobs = Arc::new(Counting::new(MemoryBlobStore::new()));
    let stores = Stores {
        blobs: blobs.clone(),
        meta: Arc::new(MemoryMetaStore::new()),
    };
    let clock = Arc::new(ManualClock::new(t(10_000)));
    (
        // Deltas in the blob store, so that the counted reads are the
        // deltas read (inline ones are covered in service::artifacts).
        Service::new(stores, clock).with_limits(crate::service::Limits {
            inline_delta_bytes: 0,
            ..Default::default()
        }),
        "acme".parse().expect("valid"),
        blobs,
    )
}

fn ws(s: &str) -> WorkspaceId {
    s.parse().expect("valid workspace")
}

fn p(s: &str) -> FilePath {
    s.parse().expect("valid path")
}

/// Applies `case` to workspace `w` of `tenant` through the service.
async fn apply(s: &Service, tenant: &TenantId, w: &WorkspaceId, case: &Case) {
    for op in &case.ops {
        match op {
            Op::Put {
                tastes,
                path,
                content,
            } => {
                let target = if *tastes {
                    WorkspaceId::tastes()
                } else {
                    w.clone()
                };
                s.put_file(
                    tenant,
                    &target,
                    &p(path),
                    Bytes::from(content.clone()),
                    None,
                )
                .await
                .expect("put");
            }
            Op::Append { path, lines } => {
                s.append_file(tenant, w, &p(path), lines.as_bytes())
                    .await
                    .expect("append");
            }
        }
    }
}

#[tokio::test]
async fn read_context_table_is_pinned_and_equal_to_the_directory_assembly() {
    for case in cases() {
        let (s, tenant, _) = service();
        let w = ws("img-1");
        apply(&s, &tenant, &w, &case).await;
        let from_store = s.read_context(&tenant, &w).await.expect("read_context");
        let dir = tempfile::tempdir().expect("tempdir");
        let (wdir, tdir) = (dir.path().join("ws"), dir.path().join("tastes"));
        std::fs::create_dir_all(&wdir).expect("mkdir");
        write_dirs(&case, &wdir, &tdir);
        let from_dir = assemble(&DirSource::new(&wdir, Some(tdir)))
            .await
            .expect("assemble");
        assert_eq!(from_store, from_dir, "case {}", case.name);
        insta::assert_json_snapshot!(case.name, from_store);
    }
}

#[tokio::test]
async fn another_workspace_and_another_tenant_see_nothing() {
    let (s, tenant, _) = service();
    let case = cases()
        .into_iter()
        .find(|c| c.name == "populated")
        .expect("case");
    apply(&s, &tenant, &ws("img-1"), &case).await;
    let other: TenantId = "other".parse().expect("valid");
    let e = s
        .read_file(&other, &ws("img-1"), &p("brief.md"))
        .await
        .expect_err("another tenant");
    assert_eq!(e.kind, ErrorKind::NotFound);
    assert!(
        s.list_files(&other, &ws("img-1"), "")
            .await
            .expect("list")
            .is_empty()
    );
    let ctx = s.read_context(&other, &ws("img-1")).await.expect("ctx");
    assert_eq!(ctx, Default::default());
    // Another workspace of the same tenant shares only the tastes.
    let ctx = s.read_context(&tenant, &ws("img-2")).await.expect("ctx");
    assert!(ctx.brief.raw.is_empty() && ctx.recent_log.is_empty());
    assert_eq!(ctx.tastes.default, "# Default\nPrefer natural colour.\n");
}

#[tokio::test]
async fn concurrent_appends_lose_no_line() {
    let (s, tenant, _) = service();
    let s = Arc::new(s);
    let w = ws("img-1");
    s.put_file(
        &tenant,
        &w,
        &p("log.jsonl"),
        Bytes::from_static(b"{\"op\":\"start\"}"),
        None,
    )
    .await
    .expect("put");
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let (s, tenant, w) = (s.clone(), tenant.clone(), w.clone());
            tokio::spawn(async move {
                for j in 0..10 {
                    // Half the appenders send the same line at the same
                    // (frozen) instant: identical commits must not merge.
                    let line = if i % 2 == 0 {
                        "{\"op\":\"same\"}".to_owned()
                    } else {
                        format!("{{\"op\":\"a\",\"details\":{{\"i\":{i},\"j\":{j}}}}}")
                    };
                    s.append_file(&tenant, &w, &p("log.jsonl"), line.as_bytes())
                        .await
                        .expect("append");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    let file = s
        .read_file(&tenant, &w, &p("log.jsonl"))
        .await
        .expect("read");
    let text = String::from_utf8(file.bytes.to_vec()).expect("utf-8");
    assert_eq!(text.lines().count(), 1 + 160, "{text}");
    assert_eq!(text.lines().filter(|l| l.contains("same")).count(), 80);
    assert!(text.starts_with("{\"op\":\"start\"}\n"));
    for l in text.lines() {
        serde_json::from_str::<serde_json::Value>(l).expect("every line whole");
    }
}

#[tokio::test]
async fn writes_compare_and_swap_on_the_version() {
    let (s, tenant, _) = service();
    let w = ws("img-1");
    let v1 = s
        .put_file(
            &tenant,
            &w,
            &p("notes.md"),
            Bytes::from_static(b"one"),
            None,
        )
        .await
        .expect("put");
    assert_eq!(v1.size, 3);
    let v2 = s
        .put_file(
            &tenant,
            &w,
            &p("notes.md"),
            Bytes::from_static(b"two!"),
            Some(v1.version),
        )
        .await
        .expect("cas");
    let e = s
        .put_file(
            &tenant,
            &w,
            &p("notes.md"),
            Bytes::from_static(b"three"),
            Some(v1.version),
        )
        .await
        .expect_err("stale");
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert_eq!(e.field.as_deref(), Some("If-Match"));
    assert_eq!(e.current, Some(v2.version.to_string()));
    let e = s
        .put_file(
            &tenant,
            &w,
            &p("new.md"),
            Bytes::from_static(b"x"),
            Some(v1.version),
        )
        .await
        .expect_err("If-Match on an absent file");
    assert_eq!((e.kind, e.current), (ErrorKind::Conflict, None));
    let f = s
        .read_file(&tenant, &w, &p("notes.md"))
        .await
        .expect("read");
    assert_eq!((f.bytes.as_ref(), f.version), (&b"two!"[..], v2.version));
    // Every version is a commit in the file's history.
    let h = s.history(&tenant, &v2.version, 10).await.expect("history");
    assert_eq!(
        h.iter().map(|c| c.id).collect::<Vec<_>>(),
        vec![v2.version, v1.version]
    );
    // Delete: stale If-Match refused, then removed; versions stay.
    let e = s
        .delete_file(&tenant, &w, &p("notes.md"), Some(v1.version))
        .await
        .expect_err("stale delete");
    assert_eq!(e.kind, ErrorKind::Conflict);
    s.delete_file(&tenant, &w, &p("notes.md"), Some(v2.version))
        .await
        .expect("delete");
    let e = s
        .read_file(&tenant, &w, &p("notes.md"))
        .await
        .expect_err("deleted");
    assert_eq!(e.kind, ErrorKind::NotFound);
    let e = s
        .delete_file(&tenant, &w, &p("notes.md"), None)
        .await
        .expect_err("deleted twice");
    assert_eq!(e.kind, ErrorKind::NotFound);
    assert!(s.show(&tenant, &v2.version).await.is_ok());
}

#[tokio::test]
async fn appends_are_whole_json_lines_after_any_content() {
    let (s, tenant, _) = service();
    let w = ws("img-1");
    s.put_file(
        &tenant,
        &w,
        &p("log.jsonl"),
        Bytes::from_static(b"{\"a\":1}"),
        None,
    )
    .await
    .expect("put");
    let v = s
        .append_file(&tenant, &w, &p("log.jsonl"), b"{\"b\":2}\r\n")
        .await
        .expect("append");
    assert_eq!(
        v.size, 9,
        "the line break the snapshot lacked, then the line"
    );
    s.append_file(&tenant, &w, &p("log.jsonl"), b"[3]\n\"four\"")
        .await
        .expect("append");
    let f = s
        .read_file(&tenant, &w, &p("log.jsonl"))
        .await
        .expect("read");
    assert_eq!(f.bytes.as_ref(), b"{\"a\":1}\n{\"b\":2}\n[3]\n\"four\"\n");
    for bad in [
        &b""[..],
        b"\n",
        b"{\"a\":1}\n\n{\"b\":2}",
        b"nope",
        b"{\"a\":1} {\"b\":2}",
        b"\xff",
    ] {
        let e = s
            .append_file(&tenant, &w, &p("log.jsonl"), bad)
            .await
            .expect_err("refused");
        assert_eq!(
            (e.kind, e.field.as_deref()),
            (ErrorKind::Invalid, Some("body")),
            "{bad:?}"
        );
    }
    let after = s
        .read_file(&tenant, &w, &p("log.jsonl"))
        .await
        .expect("read");
    assert_eq!(after.version, f.version, "nothing written");
    let listed = s.list_files(&tenant, &w, "").await.expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].path.as_str(), listed[0].version),
        ("log.jsonl", f.version)
    );
}

#[tokio::test]
async fn the_log_tail_reads_only_the_commits_it_returns() {
    let (s, tenant, blobs) = service();
    let w = ws("img-1");
    for batch in 0..200 {
        let lines: Vec<String> = (0..5)
            .map(|i| format!("{{\"op\":\"op{}\"}}", batch * 5 + i))
            .collect();
        s.append_file(&tenant, &w, &p("log.jsonl"), lines.join("\n").as_bytes())
            .await
            .expect("append");
    }
    let before = blobs.reads() as usize;
    let ctx = s.read_context(&tenant, &w).await.expect("ctx");
    let reads = blobs.reads() as usize - before;
    assert_eq!(ctx.recent_log.len(), 10);
    assert_eq!(ctx.recent_log[0].op, "op999");
    assert_eq!(ctx.recent_log[9].op, "op990");
    // The two newest deltas of the log's 200 (5 lines each); nothing else
    // exists.
    assert_eq!(reads, 2, "artifact reads");
    // A line the tail skips is made up for from older deltas.
    s.append_file(&tenant, &w, &p("log.jsonl"), b"[\"not a record\"]")
        .await
        .expect("append");
    let before = blobs.reads() as usize;
    let ctx = s.read_context(&tenant, &w).await.expect("ctx");
    assert_eq!(blobs.reads() as usize - before, 3);
    assert_eq!(
        (ctx.recent_log[0].op.as_str(), ctx.recent_log[9].op.as_str()),
        ("op999", "op990")
    );
}

#[tokio::test]
async fn unreadable_files_give_empty_parts_in_both_sources() {
    let (s, tenant, _) = service();
    let w = ws("img-1");
    let bad = Bytes::from_static(b"\xff\xfe not UTF-8\n");
    for path in ["notes.md", "brief.md", "log.jsonl"] {
        s.put_file(&tenant, &w, &p(path), bad.clone(), None)
            .await
            .expect("put");
    }
    s.put_file(
        &tenant,
        &WorkspaceId::tastes(),
        &p("_default.md"),
        bad.clone(),
        None,
    )
    .await
    .expect("put");
    let from_store = s.read_context(&tenant, &w).await.expect("ctx");
    assert_eq!(from_store, Default::default());
    let dir = tempfile::tempdir().expect("tempdir");
    for path in ["notes.md", "brief.md", "log.jsonl"] {
        std::fs::write(dir.path().join(path), &bad).expect("write");
    }
    // A directory where a file is expected is unreadable too.
    std::fs::create_dir(dir.path().join("vocabulary_gaps.jsonl")).expect("mkdir");
    let from_dir = assemble(&DirSource::new(dir.path(), Some(dir.path().join("none"))))
        .await
        .expect("assemble");
    assert_eq!(from_dir, from_store);
}
