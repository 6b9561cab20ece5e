//! The aws backends against an AWS emulator on 127.0.0.1 (started by
//! tests/run through localstack/emulator). With `CTX_TEST_AWS=1` a missing
//! or unreachable emulator fails; without it and without an endpoint the
//! tests say loudly that they did not run.

use std::sync::Arc;

use crate::store::{BlobArea, Commits, Lifecycle, MaterializationCache, Refs};

use super::*;
use crate::store::conformance::{self, Backend, Capabilities};

use super::report::lambda_service;

pub(crate) fn emulator() -> Option<AwsConfig> {
    crate::config::Config::emulator_from_env().map(|c| {
        c.aws()
            .expect("the emulator's configuration names a bucket and a table")
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn aws_backend_conforms() {
    let Some(config) = emulator() else { return };
    let (blobs, meta) = connect(&config, AwsHooks::default()).await.unwrap();
    conformance::run_all(
        &Backend {
            blobs: &blobs,
            meta: &meta,
            tokens: &meta,
            branches: &meta.branch_store(),
        },
        Capabilities {
            // Deadlines live in Step Functions executions in AWS mode.
            global_branch_listing: false,
            cache_budget: false,
            branches_in_meta: true,
        },
    )
    .await;
}

/// The actions a batch's commit takes, as the aws backend builds them, are
/// the most `BATCH_COMMIT_ACTIONS` counts for every commit (the batch
/// limit every backend enforces is derived from it): a root or a child,
/// each with a session, take exactly that many; without one, fewer.
#[test]
fn a_batch_commit_takes_at_most_the_actions_the_batch_limit_counts() {
    use crate::store::{BATCH_COMMIT_ACTIONS, TRANSACTION_ACTIONS, batch_fits};
    let client = aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
            .build(),
    );
    let meta = DynamoMetaStore::new(client, "t".into());
    let tenant = conformance::fresh_tenant("actions");
    let mut root = conformance::commit(&tenant, None, conformance::t(0), "p", b"r");
    let bare_child = conformance::commit(&tenant, Some(&root), conformance::t(1), "p", b"c");
    let bare_root = root.clone();
    root.session_id = Some("s".parse().expect("a session id"));
    let mut child = conformance::commit(&tenant, Some(&root), conformance::t(1), "p", b"c");
    child.session_id = Some("s".parse().expect("a session id"));
    let actions = |c| table::commit_items(meta.table(), &tenant, c).unwrap().len();
    assert_eq!(actions(&root), BATCH_COMMIT_ACTIONS);
    assert_eq!(actions(&child), BATCH_COMMIT_ACTIONS);
    assert!(actions(&bare_root) < BATCH_COMMIT_ACTIONS);
    assert!(actions(&bare_child) < BATCH_COMMIT_ACTIONS);
    let most = TRANSACTION_ACTIONS / BATCH_COMMIT_ACTIONS;
    assert!(batch_fits(
        most,
        TRANSACTION_ACTIONS - most * BATCH_COMMIT_ACTIONS
    ));
    assert!(!batch_fits(most + 1, 0));
}

#[tokio::test]
async fn aws_history_pages_across_lineage_runs() {
    let Some(config) = emulator() else { return };
    let (blobs, meta) = connect(&config, AwsHooks::default()).await.unwrap();
    conformance::history::history_pages_across_lineage_runs(Arc::new(blobs), Arc::new(meta)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn aws_two_summary_batches_summarize_each_commit_once() {
    let Some(config) = emulator() else { return };
    let (blobs, meta) = connect(&config, AwsHooks::default()).await.unwrap();
    conformance::summary_batch::two_batches_summarize_each_commit_once(
        Arc::new(blobs),
        Arc::new(meta),
    )
    .await;
}

/// A batch over 150 commits costs 2 pages, each a Query per shard of the
/// queue and a BatchGetItem of the commits the keys-only index names, and
/// per commit one GetObject and two TransactWriteItems (the claim and the
/// summary).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_summary_batch_costs_one_page_per_hundred_commits() {
    use crate::service::BatchOptions;
    use crate::store::{BlobStore, MetaStore, Stores};
    let Some(config) = emulator() else { return };
    let counter = RequestCounter::new();
    let hooks = AwsHooks {
        interceptor: Some(SharedInterceptor::new(counter.clone())),
        ..AwsHooks::default()
    };
    let (blobs, meta) = connect(&config, hooks).await.unwrap();
    let tenant = conformance::fresh_tenant("batch-cost");
    for i in 0..150 {
        let body = format!("delta {i}");
        blobs
            .put(&tenant, bytes::Bytes::from(body.clone()))
            .await
            .unwrap();
        let c = conformance::commit(&tenant, None, conformance::t(i), "p", body.as_bytes());
        meta.put_commit(&tenant, &c, None).await.unwrap();
    }
    let service = lambda_service(
        Stores {
            blobs: Arc::new(blobs),
            meta: Arc::new(meta),
        },
        Arc::new(crate::clock::ManualClock::new(conformance::t(1000))),
    )
    .with_summarizer(Arc::new(
        conformance::summary_batch::CountingSummarizer::new(),
    ));
    let before = counter.snapshot();
    let report = service
        .summarize_batch(&BatchOptions {
            tenant: Some(tenant.clone()),
            limit: 1000,
            ..BatchOptions::default()
        })
        .await
        .unwrap();
    assert_eq!(report.summarized, 150, "{report:?}");
    let after = counter.snapshot();
    let delta = |svc: &str, op: &str| {
        let k = (svc.to_owned(), op.to_owned());
        after.get(&k).copied().unwrap_or(0) - before.get(&k).copied().unwrap_or(0)
    };
    assert_eq!(
        delta("dynamodb", "Query"),
        2 * u64::from(table::SUMMARY_SHARDS),
        "{after:?}"
    );
    assert_eq!(delta("dynamodb", "BatchGetItem"), 2, "{after:?}");
    assert_eq!(delta("s3", "GetObject"), 150, "{after:?}");
    assert_eq!(delta("dynamodb", "TransactWriteItems"), 300, "{after:?}");
    assert_eq!(delta("dynamodb", "GetItem"), 0, "{after:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_are_counted_per_operation() {
    let Some(config) = emulator() else { return };
    let counter = RequestCounter::new();
    let hooks = AwsHooks {
        interceptor: Some(SharedInterceptor::new(counter.clone())),
        ..AwsHooks::default()
    };
    let (blobs, meta) = connect(&config, hooks).await.unwrap();
    let tenant = conformance::fresh_tenant("count");
    use crate::store::{BlobStore, MetaStore};
    blobs
        .put(&tenant, bytes::Bytes::from_static(b"x"))
        .await
        .unwrap();
    let c = conformance::commit(&tenant, None, conformance::t(0), "p", b"x");
    meta.put_commit(&tenant, &c, None).await.unwrap();
    let counts = counter.snapshot();
    assert_eq!(
        counts.get(&("s3".into(), "PutObject".into())),
        Some(&1),
        "{counts:?}"
    );
    assert_eq!(
        counts.get(&("dynamodb".into(), "TransactWriteItems".into())),
        Some(&1),
        "{counts:?}"
    );
    assert_eq!(counter.total("s3") + counter.total("dynamodb"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_cost_the_requests_the_design_promises() {
    let Some(config) = emulator() else { return };
    let mut rows = report::request_counts(&config, &[1, 30], 3, true)
        .await
        .unwrap();
    rows.extend(
        report::request_counts(&config, &[1, 30], 3, false)
            .await
            .unwrap(),
    );
    for r in &rows {
        let forks = r.forks as u64;
        // A delta in S3 costs a PUT to write and a GET to read; an inline
        // one neither (it comes with its commit's item).
        let s3_delta = u64::from(!r.inline);
        let ctx = format!(
            "{} at depth {} with {} forks, inline {}: {:?}",
            r.op, r.depth, r.forks, r.inline, r.counts
        );
        match r.op.as_str() {
            "checkpoint" => {
                assert_eq!(r.count("PutObject"), s3_delta, "{ctx}");
                assert_eq!(r.total("s3"), s3_delta, "{ctx}");
                assert_eq!(r.count("TransactWriteItems"), 1, "{ctx}");
                // The parent, and the agent's record (whether it keeps a
                // working-context cache, refreshed at turn ends).
                assert_eq!(r.count("GetItem"), 2, "the parent and the agent: {ctx}");
                assert_eq!(r.total("s3") + r.total("dynamodb"), 3 + s3_delta, "{ctx}");
            }
            "resolve" => assert_eq!((r.count("Query"), r.total("dynamodb")), (1, 1), "{ctx}"),
            "show" => assert_eq!((r.count("GetItem"), r.total("dynamodb")), (1, 1), "{ctx}"),
            "history(50)" => {
                assert_eq!(r.count("GetItem"), 1, "{ctx}");
                assert!(r.count("Query") <= 1 + forks, "{ctx}");
            }
            "materialize root (cold)" => {
                assert!(r.count("Query") <= 1 + forks, "one query per run: {ctx}");
                assert_eq!(
                    r.count("GetObject"),
                    (r.depth + 1) * s3_delta,
                    "one GET per delta in S3, none for inline ones: {ctx}"
                );
                // Incremental materialize probes the parent's cache, then
                // the ancestors at distances 2, 4, 8, ... on the path.
                let probes = (1..)
                    .map(|k| 1u64 << k)
                    .take_while(|&d| d < r.depth + 1)
                    .take(12)
                    .count() as u64;
                assert_eq!(
                    r.count("GetItem"),
                    3 + probes,
                    "tip, cache, the parent's cache and {probes} probes: {ctx}"
                );
                // The cache entry and its artifact-user item: one
                // TransactWriteItems.
                assert_eq!(
                    (r.count("PutObject"), r.count("TransactWriteItems")),
                    (1, 1),
                    "{ctx}"
                );
            }
            "materialize root (next turn)" => {
                // Extends the tip's cached context: the same at any depth.
                assert_eq!(r.count("Query"), 0, "no walk: {ctx}");
                assert_eq!(r.count("GetItem"), 3, "tip, cache, parent's cache: {ctx}");
                assert_eq!(
                    r.count("GetObject"),
                    1 + s3_delta,
                    "parent's context, the delta if in S3: {ctx}"
                );
                // The cache entry and its artifact-user item: one
                // TransactWriteItems.
                assert_eq!(
                    (r.count("PutObject"), r.count("TransactWriteItems")),
                    (1, 1),
                    "{ctx}"
                );
            }
            "materialize root (warm)" => {
                // The tip, the cache entry, and a HEAD that its cached
                // artifact has not expired (else it is rebuilt).
                assert_eq!(r.count("HeadObject"), 1, "{ctx}");
                assert_eq!(r.total("s3") + r.total("dynamodb"), 3, "{ctx}")
            }
            other => panic!("unexpected row {other}"),
        }
    }
    assert_eq!(
        rows.iter().filter(|r| r.forks == 3).count(),
        14,
        "the deep chain has 3 forks (inline and not)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erasing_a_session_costs_a_bounded_number_of_requests_per_commit() {
    let Some(config) = emulator() else { return };
    let mut rows = report::erase_request_counts(&config, &[1, 20], true)
        .await
        .unwrap();
    rows.extend(
        report::erase_request_counts(&config, &[1, 20], false)
            .await
            .unwrap(),
    );
    for r in rows {
        let commits = r.depth + 1;
        let ctx = format!("{} at depth {}: {:?}", r.op, r.depth, r.counts);
        eprintln!(
            "| {} | {} | {} | {} | {} |",
            r.op,
            commits,
            r.describe("s3"),
            r.describe("dynamodb"),
            r.total("s3") + r.total("dynamodb")
        );
        // Per commit: its cache entries listed (Query), its artifact's
        // users (Query), the artifact deleted (its versions listed, each
        // deleted), the commit
        // read and deleted with its index items (GetItem + one
        // TransactWriteItems).
        assert_eq!(
            r.count("TransactWriteItems"),
            commits + 1,
            "and the cache entry: {ctx}"
        );
        // Inline deltas go with their commits' items.
        let s3_deltas = if r.inline { 0 } else { commits };
        assert_eq!(
            r.count("DeleteObject"),
            s3_deltas + 1,
            "deltas in S3 and the cached result: {ctx}"
        );
        // The bucket is versioned: each deleted object's versions are
        // listed, then each deleted (one version each here). The counts
        // are of attempts: moto's listing sometimes answers 500 while
        // another key is deleted (a race in its model), which the SDK
        // retries, so a few more listings than deletes are seen.
        assert!(
            r.count("ListObjectVersions") >= r.count("DeleteObject"),
            "one listing per deleted object: {ctx}"
        );
        assert!(
            r.total("s3") + r.total("dynamodb")
                <= 10 * commits + 10 + r.count("ListObjectVersions"),
            "{ctx}"
        );
    }
}

/// 10% of S3 and DynamoDB calls fail (500s, throttling, timeouts before
/// sending, responses lost after the write landed) while a wrapper streams
/// checkpoints with ref moves and materializes, retrying what comes back
/// retryable. Every operation ends in success or a retryable 503; afterwards
/// nothing dangles.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_leave_nothing_dangling() {
    let Some(config) = emulator() else { return };
    // 10%: the SDK's retries absorb them.
    run_with_faults(&config, 10, 40).await;
    // Every other call: some operations exhaust their retries and must come
    // back as retryable 503s, never as anything else.
    let surfaced = run_with_faults(&config, 2, 12).await;
    assert!(surfaced > 0, "at 50% faults some errors reach the caller");
}

/// Streams `ops` checkpoints (and a materialize every fifth) with one call
/// in `one_in` failing; returns how many retryable errors reached the caller.
async fn run_with_faults(config: &AwsConfig, one_in: u64, ops: u32) -> usize {
    use crate::ErrorKind;
    use crate::service::{NewCommit, Stop};
    use crate::store::{BlobStore, RefMove, Stores};

    let plan = Arc::new(FaultPlan::new(one_in, 0x5EED + one_in));
    let hooks = AwsHooks {
        faults: Some(plan.clone()),
        initial_backoff: Some(std::time::Duration::from_millis(5)),
        ..AwsHooks::default()
    };
    let (blobs, meta) = connect(config, hooks).await.unwrap();
    let clock = Arc::new(crate::ManualClock::new(conformance::t(0)));
    let service = lambda_service(
        Stores {
            blobs: Arc::new(blobs),
            meta: Arc::new(meta),
        },
        clock,
    );
    let tenant = conformance::fresh_tenant("faults");
    let head: crate::RefName = "faults/head".parse().unwrap();
    let (mut tip, mut acked, mut retryable_errors) = (None, Vec::new(), 0usize);
    for i in 0..ops {
        let req = NewCommit {
            parent: tip,
            created_at: Some(conformance::t(i64::from(i))),
            ref_move: Some(RefMove {
                name: head.clone(),
                expected: tip,
            }),
            ..NewCommit::new(
                "faulty".parse().unwrap(),
                "faults",
                crate::format::FormatId::raw(),
                format!("turn {i}\n"),
            )
        };
        // A wrapper retries a retryable failure with the same request.
        let commit = loop {
            match service.checkpoint(&tenant, req.clone()).await {
                Ok(done) => break done.commit,
                Err(e) if e.kind == ErrorKind::Unavailable => retryable_errors += 1,
                Err(e) => panic!("checkpoint {i} failed for good: {e}"),
            }
        };
        tip = Some(commit.id);
        acked.push((commit.id, i));
        if i % 5 == 4 {
            let want: String = (0..=i).map(|k| format!("turn {k}\n")).collect();
            let m = loop {
                match service
                    .materialize(&tenant, &commit.id, Stop::Root, None)
                    .await
                {
                    Ok(m) => break m.result,
                    Err(e) if e.kind == ErrorKind::Unavailable => retryable_errors += 1,
                    Err(e) => panic!("materialize at {i} failed for good: {e}"),
                }
            };
            let bytes = loop {
                match service.download_artifact(&tenant, &m.artifact_ref).await {
                    Ok(b) => break b,
                    Err(e) if e.kind == ErrorKind::Unavailable => retryable_errors += 1,
                    Err(e) => panic!("download failed for good: {e}"),
                }
            };
            assert_eq!(bytes, want.as_bytes());
        }
    }
    let injected = plan.injected();
    eprintln!("faults injected: {injected:?}; retryable errors surfaced: {retryable_errors}");
    assert!(
        injected.values().sum::<u64>() >= 10,
        "the plan injected too little: {injected:?}"
    );

    // Check with a clean client: nothing dangles.
    let (blobs, meta) = connect(config, AwsHooks::default()).await.unwrap();
    let r = meta
        .get_ref(&tenant, &head)
        .await
        .unwrap()
        .expect("the ref exists");
    assert_eq!(
        Some(r.target),
        tip,
        "the ref points at the last acknowledged commit"
    );
    let principal: crate::Principal = "faulty".parse().unwrap();
    for (id, i) in &acked {
        let c = meta
            .get_commit(&tenant, id)
            .await
            .unwrap()
            .expect("acknowledged commit exists");
        match &c.inline {
            Some(bytes) => crate::store::verify(&c.artifact_ref, bytes).unwrap(),
            None => assert!(
                blobs
                    .stat(&tenant, BlobArea::READABLE, &c.artifact_ref)
                    .await
                    .unwrap()
                    .map(|i| i.size)
                    .is_some(),
                "commit {i} has its artifact"
            ),
        }
        assert_eq!(
            meta.resolve(&tenant, &principal, c.created_at)
                .await
                .unwrap(),
            Some(*id),
            "commit {i} is on the timeline"
        );
    }
    // Every timeline entry has its commit (a raw query of the partition).
    let out = meta
        .client()
        .query()
        .table_name(&config.table)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(
            ":pk",
            aws_sdk_dynamodb::types::AttributeValue::S(table::timeline_pk(&tenant, &principal)),
        )
        .send()
        .await
        .unwrap();
    let entries = out.items.unwrap_or_default();
    assert_eq!(
        entries.len(),
        acked.len(),
        "one timeline entry per commit, no orphans"
    );
    for e in entries {
        let Some(aws_sdk_dynamodb::types::AttributeValue::S(sk)) = e.get("sk") else {
            panic!("timeline item without a sort key")
        };
        let (_, id) = table::parse_timeline_sk(sk).expect("well-formed");
        assert!(
            meta.get_commit(&tenant, &id).await.unwrap().is_some(),
            "timeline entry {id} has its commit"
        );
    }
    retryable_errors
}

/// GC on S3 + DynamoDB: old orphans in every area go (a staged upload
/// nobody promoted, an unnamed durable artifact, an unnamed cached one);
/// what a commit or cache entry names stays; an expired cached result is
/// rebuilt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_sweeps_every_area_of_a_tenant_on_s3() {
    use crate::clock::{Clock, ManualClock, SystemClock};
    use crate::commit::Stop;
    use crate::service::NewCommit;
    use crate::store::{BlobArea, BlobStore, Stores};
    use bytes::Bytes;
    let Some(config) = emulator() else { return };
    let (blobs, meta) = connect(&config, AwsHooks::default()).await.unwrap();
    let tenant = conformance::fresh_tenant("gc-s3");
    let stores = Stores {
        blobs: Arc::new(blobs.clone()),
        meta: Arc::new(meta),
    };
    let now = lambda_service(stores.clone(), Arc::new(SystemClock));
    let new = |parent, body: &'static str| NewCommit {
        parent,
        ..NewCommit::new(
            "agent".parse().unwrap(),
            "tpl",
            crate::format::FormatId::raw(),
            Bytes::from_static(body.as_bytes()),
        )
    };
    let root = now
        .checkpoint(&tenant, new(None, "one\n"))
        .await
        .unwrap()
        .commit
        .id;
    let tip = now
        .checkpoint(&tenant, new(Some(root), "two\n"))
        .await
        .unwrap()
        .commit
        .id;
    let m = now
        .materialize(&tenant, &tip, Stop::Root, None)
        .await
        .unwrap();
    let orphan = blobs
        .put(&tenant, Bytes::from_static(b"orphan"))
        .await
        .unwrap()
        .artifact;
    let cached_orphan = blobs
        .put_cached(&tenant, Bytes::from_static(b"cached orphan"))
        .await
        .unwrap()
        .artifact;
    let staged = crate::id::ArtifactRef::of(b"staged");
    blobs
        .client()
        .put_object()
        .bucket(blobs.bucket())
        .key(table::upload_key(&tenant, &staged))
        .body(Bytes::from_static(b"staged").into())
        .send()
        .await
        .unwrap();

    let later = lambda_service(
        stores,
        Arc::new(ManualClock::new(
            SystemClock.now() + chrono::Duration::hours(48),
        )),
    );
    let report = later.gc_all(&tenant, false).await.unwrap();
    let mut removed: Vec<_> = report
        .removed
        .iter()
        .map(|r| (r.area, r.artifact))
        .collect();
    removed.sort();
    let mut want = vec![
        (BlobArea::Durable, orphan),
        (BlobArea::Cache, cached_orphan),
        (BlobArea::Staged, staged),
    ];
    want.sort();
    assert_eq!(removed, want, "{report:?}");
    assert_eq!(
        report.referenced, 1,
        "the materialization (the two deltas are inline, not in S3)"
    );
    assert!(
        blobs
            .stat(&tenant, &[BlobArea::Staged], &staged)
            .await
            .unwrap()
            .is_none()
    );

    // The lifecycle rule expires a cached result: the next materialize
    // rebuilds it.
    assert!(
        blobs
            .remove(&tenant, BlobArea::Cache, &m.result.artifact_ref)
            .await
            .unwrap()
    );
    let again = later
        .materialize(&tenant, &tip, Stop::Root, None)
        .await
        .unwrap();
    assert!(!again.cached);
    assert_eq!(
        later
            .download_artifact(&tenant, &again.result.artifact_ref)
            .await
            .unwrap(),
        Bytes::from_static(b"one\ntwo\n")
    );
}

/// Erasing a session (with a fork, cascaded) while every third S3 and
/// DynamoDB call fails: the caller re-runs the erase on each retryable
/// error until it answers 404; afterwards nothing of either session is
/// left, not a commit, an artifact, a cache entry, an index item or a ref.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erase_under_faults_finishes_when_re_run_and_leaves_nothing() {
    use crate::ErrorKind;
    use crate::id::ArtifactRef;
    use crate::service::{NewCommit, Stop};
    use crate::store::{BlobStore, RefMove, Stores};

    let Some(config) = emulator() else { return };
    let (blobs, meta) = connect(&config, AwsHooks::default()).await.unwrap();
    let (blobs, meta) = (Arc::new(blobs), Arc::new(meta));
    let clock = Arc::new(crate::ManualClock::new(conformance::t(0)));
    let clean = lambda_service(
        Stores {
            blobs: blobs.clone(),
            meta: meta.clone(),
        },
        clock.clone(),
    );
    let tenant = conformance::fresh_tenant("erase-faults");
    let mut tip = None;
    let mut commits = Vec::new();
    for i in 0..12u8 {
        let session = if i < 9 { "doomed" } else { "fork" };
        let name: crate::RefName = format!("sessions/{session}").parse().unwrap();
        let expected = if i == 9 { None } else { tip };
        let c = clean
            .checkpoint(
                &tenant,
                NewCommit {
                    parent: tip,
                    session_id: Some(session.parse().expect("a session id")),
                    created_at: Some(conformance::t(i64::from(i))),
                    ref_move: Some(RefMove { name, expected }),
                    ..NewCommit::new(
                        "p".parse().unwrap(),
                        "t",
                        crate::format::FormatId::raw(),
                        format!("secret turn {i}\n"),
                    )
                },
            )
            .await
            .unwrap()
            .commit;
        tip = Some(c.id);
        commits.push(c);
    }
    let mut artifacts: Vec<ArtifactRef> = commits.iter().map(|c| c.artifact_ref).collect();
    for at in [8, 11] {
        let m = clean
            .materialize(&tenant, &commits[at].id, Stop::Root, None)
            .await
            .unwrap();
        artifacts.push(m.result.artifact_ref);
    }

    let plan = Arc::new(FaultPlan::new(3, 0xE4A5E));
    let hooks = AwsHooks {
        faults: Some(plan.clone()),
        initial_backoff: Some(std::time::Duration::from_millis(5)),
        ..AwsHooks::default()
    };
    let (fblobs, fmeta) = connect(&config, hooks).await.unwrap();
    let faulty = lambda_service(
        Stores {
            blobs: Arc::new(fblobs),
            meta: Arc::new(fmeta),
        },
        clock,
    );
    let session: crate::SessionId = "doomed".parse().unwrap();
    let mut runs = 0;
    loop {
        runs += 1;
        assert!(runs < 200, "the erase never finished");
        match faulty.erase_session(&tenant, &session, true).await {
            Ok(_) => {}
            Err(e) if e.kind == ErrorKind::Unavailable => {}
            Err(e) if e.kind == ErrorKind::NotFound => break,
            Err(e) => panic!("the erase failed for good: {e}"),
        }
    }
    assert!(!plan.injected().is_empty(), "faults were injected");
    for c in &commits {
        assert_eq!(meta.get_commit(&tenant, &c.id).await.unwrap(), None);
        assert!(
            meta.materialized_of(&tenant, &c.id)
                .await
                .unwrap()
                .is_empty()
        );
        assert!(meta.child_commits(&tenant, &c.id).await.unwrap().is_empty());
    }
    for s in ["doomed", "fork"] {
        let s: crate::SessionId = s.parse().unwrap();
        assert!(meta.session_commits(&tenant, &s).await.unwrap().is_empty());
    }
    for a in &artifacts {
        assert_eq!(
            blobs
                .stat(&tenant, BlobArea::READABLE, a)
                .await
                .unwrap()
                .map(|i| i.size),
            None,
            "{a} deleted"
        );
        assert!(
            meta.artifact_users(&tenant, a, 10)
                .await
                .unwrap()
                .is_empty(),
            "{a} has no users left"
        );
    }
    assert!(
        meta.list_refs(&tenant, "", None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    eprintln!(
        "erase finished after {runs} runs, faults {:?}",
        plan.injected()
    );
}

/// No byte left behind on AWS: a canary in one session's deltas and a
/// summary, materialized, translated and forked by a second session, then
/// erased with cascade, is in no S3 object of the bucket and no item of the
/// table (without cascade: a conflict, and nothing removed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erased_session_leaves_no_byte_in_s3_or_dynamodb() {
    use crate::ErrorKind;
    use crate::service::{NewCommit, Stop};
    use crate::store::{MetadataPatch, Stores};

    let Some(config) = emulator() else { return };
    let (blobs, meta) = connect(&config, AwsHooks::default()).await.unwrap();
    let (s3, ddb) = (blobs.client().clone(), meta.client().clone());
    let (bucket, table) = (blobs.bucket().to_owned(), config.table.clone());
    let meta = Arc::new(meta);
    let svc = lambda_service(
        Stores {
            blobs: Arc::new(blobs),
            meta: meta.clone(),
        },
        Arc::new(crate::ManualClock::new(conformance::t(0))),
    );
    let mut nonce = [0u8; 8];
    crate::clock::IdSource::fill(&crate::clock::OsRandom, &mut nonce);
    let canary = format!("CANARY-{}", hex::encode(nonce));
    let tenant = conformance::fresh_tenant("canary");
    let mut tip = None;
    for (i, (session, text)) in [
        ("canary", format!("user: remember {canary}\n")),
        ("canary", "assistant: noted\n".to_owned()),
        ("fork", "user: and then?\n".to_owned()),
    ]
    .into_iter()
    .enumerate()
    {
        let c = svc
            .checkpoint(
                &tenant,
                NewCommit {
                    parent: tip,
                    session_id: Some(session.parse().expect("a session id")),
                    created_at: Some(conformance::t(i as i64)),
                    ..NewCommit::new(
                        "p".parse().unwrap(),
                        "t",
                        crate::format::FormatId::raw(),
                        text,
                    )
                },
            )
            .await
            .unwrap()
            .commit;
        tip = Some(c.id);
        if i == 1 {
            meta.update_metadata(
                &tenant,
                &c.id,
                &MetadataPatch {
                    summary: Some(Some(format!("said {canary}"))),
                    tags: None,
                },
            )
            .await
            .unwrap();
            svc.materialize(&tenant, &c.id, Stop::Root, None)
                .await
                .unwrap();
            svc.materialize(
                &tenant,
                &c.id,
                Stop::Root,
                Some("openai-chat-v1".parse().unwrap()),
            )
            .await
            .unwrap();
        }
    }
    svc.materialize(&tenant, &tip.unwrap(), Stop::Root, None)
        .await
        .unwrap();

    // Every S3 object version and every DynamoDB item holding the canary
    // (the bucket is versioned, as template.yaml's: a noncurrent version
    // holding it counts), and every delete marker left on our keys.
    let holding = || async {
        let mut found = Vec::new();
        let (mut key_marker, mut version_marker) = (None, None);
        loop {
            let page = s3
                .list_object_versions()
                .bucket(&bucket)
                .set_key_marker(key_marker.take())
                .set_version_id_marker(version_marker.take())
                .send()
                .await
                .unwrap();
            // Other tenants' artifacts (of tests sharing the emulator)
            // cannot hold this run's random canary; everything else,
            // whatever its prefix, is read.
            let ours = tenant.to_string();
            let skip = |key: &str| {
                (key.starts_with("cas/") || key.starts_with("uploads/"))
                    && key.split('/').nth(1) != Some(ours.as_str())
            };
            for m in page.delete_markers() {
                let key = m.key().unwrap();
                if !skip(key) && key.contains(&ours) {
                    found.push(format!("s3 delete marker {key}"));
                }
            }
            for o in page.versions() {
                let key = o.key().unwrap().to_owned();
                if skip(&key) {
                    continue;
                }
                let body = s3
                    .get_object()
                    .bucket(&bucket)
                    .key(&key)
                    .set_version_id(o.version_id().map(str::to_owned))
                    .send()
                    .await
                    .unwrap();
                let bytes = body.body.collect().await.unwrap().into_bytes();
                if bytes.windows(canary.len()).any(|w| w == canary.as_bytes()) {
                    found.push(format!("s3 {key} version {:?}", o.version_id()));
                }
            }
            if page.is_truncated() != Some(true) {
                break;
            }
            key_marker = page.next_key_marker().map(str::to_owned);
            version_marker = page.next_version_id_marker().map(str::to_owned);
        }
        let mut items = ddb
            .scan()
            .table_name(&table)
            .into_paginator()
            .items()
            .send();
        while let Some(item) = items.try_next().await.unwrap() {
            if format!("{item:?}").contains(&canary) {
                found.push(format!("dynamodb {:?}", item.get("pk")));
            }
        }
        found
    };
    let before = holding().await;
    assert!(before.len() >= 4, "the canary is stored: {before:?}");
    let session: crate::SessionId = "canary".parse().unwrap();
    let e = svc
        .erase_session(&tenant, &session, false)
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert_eq!(holding().await.len(), before.len(), "nothing removed");
    let erased = svc.erase_session(&tenant, &session, true).await.unwrap();
    assert_eq!((erased.commits, erased.cascaded), (3, 1), "{erased:?}");
    let left = holding().await;
    assert!(left.is_empty(), "the canary survives in {left:?}");
}

/// A ref write's nonce (`w`, which tells a retry that its lost first
/// attempt landed) comes from the store's `IdSource`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ref_writes_nonce_comes_from_the_stores_id_source() {
    use crate::clock::{IdSource, SeededIds};
    let Some(config) = emulator() else { return };
    let (_, meta) = connect(&config, AwsHooks::default()).await.unwrap();
    let meta = meta.with_ids(Arc::new(SeededIds::new(23)));
    let tenant = conformance::fresh_tenant("nonce");
    let name: crate::RefName = "sessions/nonce".parse().unwrap();
    let target = conformance::commit(&tenant, None, conformance::t(0), "p", b"x").id;
    meta.cas_ref(&tenant, &name, None, &target, conformance::t(0))
        .await
        .unwrap();
    let item = super::table::consistent_get(
        meta.client(),
        &config.table,
        table::ref_pk(&tenant, &name),
        table::REF_SK,
    )
    .await
    .unwrap()
    .expect("the ref was written");
    let mut expected = [0u8; 16];
    SeededIds::new(23).fill(&mut expected);
    assert_eq!(
        item.get("w"),
        Some(&aws_sdk_dynamodb::types::AttributeValue::S(hex::encode(
            expected
        )))
    );
}

/// Commits written before the lifecycle index items existed are invisible
/// to an erase until `backfill_index` writes their items; after it the
/// erase finds every one and leaves none of the tenant's items. A second
/// pass changes nothing, and the session's last write keeps the newest
/// time whatever order the scan reads the commits in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_makes_commits_older_than_the_index_erasable() {
    use super::table::{IndexItems, index_items};
    use crate::service::NewCommit;
    use crate::store::Stores;

    let Some(config) = emulator() else { return };
    let (blobs, meta) = connect(&config, AwsHooks::default()).await.unwrap();
    let ddb = meta.client().clone();
    let table = config.table.clone();
    let meta = Arc::new(meta);
    let branches = meta.branch_store();
    let limits = crate::branch::RateLimits {
        active_per_session: 10,
        active_per_tenant: 10,
        creations_per_minute: 10,
    };
    let svc = lambda_service(
        Stores {
            blobs: Arc::new(blobs),
            meta: meta.clone(),
        },
        Arc::new(crate::ManualClock::new(conformance::t(0))),
    )
    .with_branching(crate::branch::Branching {
        store: Arc::new(meta.branch_store()),
        timer: Arc::new(crate::branch::NoTimer),
        scrubber: Arc::new(crate::branch::RuleScrubber::new().unwrap()),
        ids: Arc::new(crate::clock::OsRandom),
        config: crate::branch::BranchConfig {
            limits,
            ..crate::branch::BranchConfig::default()
        },
    });
    let tenant = conformance::fresh_tenant("backfill");
    let mut commits = Vec::new();
    for i in 0..3 {
        let c = svc
            .checkpoint(
                &tenant,
                NewCommit {
                    parent: commits.last().map(|c: &crate::commit::Commit| c.id),
                    session_id: Some("old".parse().expect("a session id")),
                    created_at: Some(conformance::t(i)),
                    ..NewCommit::new(
                        "p".parse().unwrap(),
                        "t",
                        crate::format::FormatId::raw(),
                        format!("turn {i}\n"),
                    )
                },
            )
            .await
            .unwrap()
            .commit;
        commits.push(c);
    }
    // As before issue 11: no index items, no registry entry.
    let delete = |item: super::table::Item| {
        let (ddb, table) = (ddb.clone(), table.clone());
        async move {
            ddb.delete_item()
                .table_name(table)
                .key("pk", item["pk"].clone())
                .key("sk", item["sk"].clone())
                .send()
                .await
                .unwrap();
        }
    };
    for c in &commits {
        let IndexItems {
            keys: entries,
            last,
        } = index_items(&tenant, c);
        for item in entries.into_iter().chain(last) {
            delete(item).await;
        }
    }
    delete(super::table::key(
        table::TENANTS_PK.to_owned(),
        table::tenant_sk(&tenant),
    ))
    .await;
    // A branch of the session, from before its member item existed.
    let rec = conformance::branches::record("old", 0);
    crate::branch::BranchStore::create_branch(&branches, &tenant, &rec, &limits)
        .await
        .unwrap();
    delete(super::table::key(
        table::session_pk(&tenant, "old"),
        table::member_sk(&rec.id),
    ))
    .await;
    let listed = crate::branch::BranchStore::session_branches(&branches, &tenant, "old");
    assert!(listed.await.unwrap().is_empty(), "unseen before");

    let session: crate::SessionId = "old".parse().unwrap();
    let unseen = svc
        .erase_session(&tenant, &session, true)
        .await
        .unwrap_err();
    assert_eq!(unseen.kind, crate::ErrorKind::NotFound, "{unseen}");

    for pass in 0..2 {
        let b = meta.backfill_index(Some(&tenant)).await.unwrap();
        // Per commit its session entry and artifact user, a child entry
        // for two of them, the registry, the branch's member item; the
        // last write moves 1 to 3
        // times on the first pass (by scan order), never on the second.
        assert_eq!((b.commits, b.branches, b.gone), (3, 1, 0), "pass {pass}");
        let keys_only = 3 * 2 + 2 + 1 + 1;
        if pass == 0 {
            assert!(
                (keys_only + 1..=keys_only + 3).contains(&b.entries),
                "{b:?}"
            );
        } else {
            assert_eq!(b.entries, keys_only, "{b:?}");
        }
    }
    let last = ddb
        .get_item()
        .table_name(&table)
        .set_key(Some(super::table::key(
            table::session_commits_pk(&tenant, "old"),
            table::SESSION_LAST_SK,
        )))
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    assert_eq!(
        last.item().and_then(|i| i.get("last")),
        Some(&super::table::n(conformance::t(2).timestamp_micros())),
        "the newest commit's time"
    );
    assert!(meta.commit_tenants().await.unwrap().contains(&tenant));
    let listed = crate::branch::BranchStore::session_branches(&branches, &tenant, "old");
    assert_eq!(listed.await.unwrap(), vec![rec.id], "found after");

    let erased = svc.erase_session(&tenant, &session, true).await.unwrap();
    assert_eq!((erased.commits, erased.branches), (3, 1), "{erased:?}");
    // The erase itself removes the session's last write: nothing waits
    // for retention's next pass.
    let mut left = meta
        .tenant_keys(&format!("T#{tenant}#"), usize::MAX)
        .await
        .unwrap();
    // The tenant's count of active branches (a number, not the session's)
    // stays with the tenant.
    left.retain(|(pk, sk)| {
        (pk.as_str(), sk.as_str()) != (&table::tenant_branches_pk(&tenant), table::TENANT_ACTIVE_SK)
    });
    assert!(left.is_empty(), "items left: {left:?}");
    let idle = meta
        .idle_sessions(&tenant, conformance::t(1_000_000), None, 100)
        .await
        .unwrap();
    assert!(idle.is_empty(), "{idle:?}");
}

/// Records the write units each index takes per TransactWriteItems (it
/// asks DynamoDB for `ReturnConsumedCapacity = INDEXES` on every one).
#[derive(Debug, Default, Clone)]
struct IndexUnits {
    /// Per transaction, in order: index name → units.
    seen: Arc<std::sync::Mutex<Vec<std::collections::BTreeMap<String, f64>>>>,
}

impl aws_smithy_runtime_api::client::interceptors::Intercept for IndexUnits {
    fn name(&self) -> &'static str {
        "ctx-test-index-units"
    }

    fn modify_before_serialization(
        &self,
        context: &mut aws_smithy_runtime_api::client::interceptors::context::BeforeSerializationInterceptorContextMut<'_>,
        _components: &aws_smithy_runtime_api::client::runtime_components::RuntimeComponents,
        _cfg: &mut aws_smithy_types::config_bag::ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsInput;
        if let Some(input) = context
            .input_mut()
            .downcast_mut::<TransactWriteItemsInput>()
        {
            input.return_consumed_capacity =
                Some(aws_sdk_dynamodb::types::ReturnConsumedCapacity::Indexes);
        }
        Ok(())
    }

    fn read_after_deserialization(
        &self,
        context: &aws_smithy_runtime_api::client::interceptors::context::AfterDeserializationInterceptorContextRef<'_>,
        _components: &aws_smithy_runtime_api::client::runtime_components::RuntimeComponents,
        _cfg: &mut aws_smithy_types::config_bag::ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsOutput;
        let Ok(output) = context.output_or_error() else {
            return Ok(());
        };
        if let Some(out) = output.downcast_ref::<TransactWriteItemsOutput>() {
            let mut units = std::collections::BTreeMap::new();
            for c in out.consumed_capacity() {
                for (index, cap) in c.global_secondary_indexes().into_iter().flatten() {
                    *units.entry(index.clone()).or_insert(0.0) +=
                        cap.capacity_units().unwrap_or(0.0);
                }
            }
            self.seen.lock().unwrap().push(units);
        }
        Ok(())
    }
}

/// The hot keys moved (issue 24 item 5), read from the write units
/// DynamoDB Local reports per index: a session's first checkpoint, which
/// creates its head ref and its last-write item, writes the `listing`
/// index twice; the next ones, which move the ref and rewrite the last
/// write, write it not at all. Each writes one `missing_summary` entry,
/// and the same units for a 4 KB inline delta as for a tiny one (keys
/// only: no copy of the delta).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_writes_no_listing_entry_once_its_ref_and_session_exist() {
    use crate::store::{MetaStore, RefMove};
    let Some(config) = emulator() else { return };
    let recorder = IndexUnits::default();
    let hooks = AwsHooks {
        interceptor: Some(SharedInterceptor::new(recorder.clone())),
        ..AwsHooks::default()
    };
    let (_, meta) = connect(&config, hooks).await.unwrap();
    let tenant = conformance::fresh_tenant("hot-keys");
    let name: crate::RefName = "sessions/s-hot/head".parse().unwrap();
    let mut parent: Option<crate::commit::Commit> = None;
    for (i, size) in [(0u8, 4096usize), (1, 4096), (2, 8)].into_iter() {
        let body = vec![b'a' + i; size];
        let mut c = conformance::commit(
            &tenant,
            parent.as_ref(),
            conformance::t(i64::from(i)),
            "p",
            &body,
        );
        c.session_id = Some("s-hot".parse().expect("a session id"));
        c.inline = Some(bytes::Bytes::from(body));
        let mv = RefMove {
            name: name.clone(),
            expected: parent.as_ref().map(|p| p.id),
        };
        meta.put_commit(&tenant, &c, Some(&mv)).await.unwrap();
        parent = Some(c);
    }
    let seen = recorder.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3, "one transaction per checkpoint: {seen:?}");
    let units = |i: usize, index: &str| seen[i].get(index).copied().unwrap_or(0.0);
    // The first: the ref's and the session's listing entries.
    assert!(units(0, table::LISTING_INDEX) > 0.0, "{seen:?}");
    for i in 1..3 {
        assert_eq!(
            units(i, table::LISTING_INDEX),
            0.0,
            "checkpoint {i}: {seen:?}"
        );
    }
    // One queue entry each, whatever the delta's size.
    assert!(units(1, table::SUMMARY_INDEX) > 0.0, "{seen:?}");
    assert_eq!(
        units(1, table::SUMMARY_INDEX),
        units(2, table::SUMMARY_INDEX),
        "a 4 KB and an 8-byte delta: {seen:?}"
    );
    // The listings still answer.
    let refs = meta
        .list_refs(&tenant, "sessions/", None, 10)
        .await
        .unwrap();
    assert_eq!(
        (refs.len(), refs[0].target),
        (1, parent.as_ref().unwrap().id)
    );
    let idle = meta
        .idle_sessions(&tenant, conformance::t(100), None, 10)
        .await
        .unwrap();
    assert_eq!(idle, vec!["s-hot".parse().unwrap()]);
}

/// SC-002 (branch create and return add < 100 ms) as counts on the aws
/// backends: each costs a fixed handful of DynamoDB requests and no S3
/// one beyond its own artifacts, however long the branch or however many
/// memories there are to search; the timings are the bench's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn branch_create_and_return_cost_a_fixed_number_of_requests() {
    let Some(config) = emulator() else { return };
    let rows = report::branch_request_counts(&config, &[1, 20])
        .await
        .unwrap();
    assert_eq!(rows.len(), 6, "{rows:?}");
    for r in &rows {
        let ctx = format!(
            "{} with {} commits or memories: {:?}",
            r.op, r.depth, r.counts
        );
        assert_eq!(
            r.total("s3"),
            0,
            "small roots and summaries go inline: {ctx}"
        );
        let want = match r.op.as_str() {
            // The parent's record, the branch's record, its root commit
            // and its chain's ref (two transactions).
            "branch create" => {
                [("GetItem", 1), ("PutItem", 1), ("TransactWriteItems", 2)].as_slice()
            }
            // The same and one memory search.
            "branch create (inject_memories)" => &[
                ("GetItem", 1),
                ("PutItem", 1),
                ("Query", 1),
                ("TransactWriteItems", 2),
            ],
            // The branch, its chain's tip and the parent's, the summary's
            // commit, the status, and the memory (one query for the
            // branch's chain: none per commit).
            "branch return" => &[
                ("GetItem", 9),
                ("PutItem", 1),
                ("Query", 1),
                ("TransactWriteItems", 2),
                ("UpdateItem", 1),
            ],
            other => panic!("unexpected row {other}"),
        };
        let got: Vec<(&str, u64)> = r
            .counts
            .iter()
            .map(|((_, op), n)| (op.as_str(), *n))
            .collect();
        assert_eq!(got, want, "{ctx}");
    }
    // Independent of the branch's length and of the memories to search.
    for op in [
        "branch create",
        "branch create (inject_memories)",
        "branch return",
    ] {
        let of = |d| {
            rows.iter()
                .find(|r| r.op == op && r.depth == d)
                .map(|r| &r.counts)
        };
        assert_eq!(of(1), of(20), "{op}");
    }
}
