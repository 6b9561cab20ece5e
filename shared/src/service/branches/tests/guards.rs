//! Who may touch a branch, failing closed, limits, and folding turned off.

use super::*;

#[tokio::test]
async fn strict_validation_hides_branches_from_other_principals_and_tenants() {
    let h = harness();
    let b = h.create("s", "mine").await;
    for other in [caller("acme", "tok-bob"), caller("evil", "tok-alice")] {
        let e = h.svc.branch_status(&other, &b.branch_id).await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotFound);
        let e = h
            .svc
            .branch_return(&other, &b.branch_id, "x")
            .await
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotFound);
        let mut r = create("s", "nested");
        r.parent_branch = Some(b.branch_id);
        let e = h.svc.branch_create(&other, r).await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotFound);
    }
    let bob = caller("acme", "tok-bob");
    let e = h
        .svc
        .branch_create(&bob, create("s", "intrude"))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound);
    let e = h.svc.session_end(&bob, &sid("s")).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound);
    let e = h
        .svc
        .branch_status_of_session(&bob, &sid("s"))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound);
    // Another tenant's session of the same name is its own.
    let eve = caller("evil", "tok-eve");
    assert!(
        h.svc
            .branch_create(&eve, create("s", "theirs"))
            .await
            .is_ok()
    );
    assert_eq!(h.status(&b.branch_id).await.status, "active");
}

#[tokio::test]
async fn permissive_validation_checks_only_the_tenant() {
    let h = harness_with(
        BranchConfig {
            validation: Validation::Permissive,
            ..BranchConfig::default()
        },
        Arc::new(RuleScrubber::new().unwrap()),
    );
    let b = h.create("s", "mine").await;
    let bob = caller("acme", "tok-bob");
    assert_eq!(
        h.svc
            .branch_status(&bob, &b.branch_id)
            .await
            .unwrap()
            .record
            .status
            .as_str(),
        "active"
    );
    let e = h
        .svc
        .branch_status(&caller("evil", "tok-alice"), &b.branch_id)
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound);
    h.svc.branch_return(&bob, &b.branch_id, "ok").await.unwrap();
}

#[tokio::test]
async fn scrubbing_fails_closed() {
    let h = harness_with(BranchConfig::default(), Arc::new(FailingScrubber));
    h.append("sessions/s", "user: hi\n").await.unwrap();
    let b = h.create("s", "x").await;
    let e = h
        .svc
        .branch_return(&h.alice, &b.branch_id, "password=hunter2hunter2")
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unavailable);
    assert_eq!(h.text_of("sessions/s").await, "user: hi\n");
    assert_eq!(h.status(&b.branch_id).await.status, "active");
    // A forced end without a scrubber returns no content either.
    h.clock.advance_micros(301_000_000);
    h.append(&b.chain_ref, "token=Zx81kd92LmQ0pA7s")
        .await
        .unwrap();
    h.svc
        .branch_expire(&h.alice.tenant, &b.branch_id)
        .await
        .unwrap();
    let parent = h.text_of("sessions/s").await;
    assert!(!parent.contains("Zx81kd92LmQ0pA7s"), "{parent}");
    assert!(parent.contains("details withheld"), "{parent}");
}

#[tokio::test]
async fn creation_limits_answer_rate_limited_with_retry_after() {
    let h = harness_with(
        BranchConfig {
            limits: crate::branch::RateLimits {
                active_per_session: 10,
                active_per_tenant: 100,
                creations_per_minute: 2,
            },
            ..BranchConfig::default()
        },
        Arc::new(RuleScrubber::new().unwrap()),
    );
    h.create("s", "1").await;
    h.create("s", "2").await;
    let e = h
        .svc
        .branch_create(&h.alice, create("s", "3"))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::RateLimited);
    assert_eq!(e.retry_after, Some(40), "t(0) is 20 s into its minute");
}

#[tokio::test]
async fn without_branching_the_operations_are_unavailable() {
    let svc = Service::new(
        Stores {
            blobs: Arc::new(MemoryBlobStore::new()),
            meta: Arc::new(MemoryMetaStore::new()),
        },
        Arc::new(ManualClock::new(crate::store::conformance::t(0))),
    );
    let e = svc
        .branch_create(&caller("a", "p"), create("s", "d"))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unavailable);
}

#[tokio::test]
async fn a_return_into_a_structured_chain_still_materializes() {
    let h = harness();
    let tenant = &h.alice.tenant;
    let msg = r#"[{"role":"user","content":"find the bug"}]"#;
    let req: CheckpointRequest = serde_json::from_value(serde_json::json!({
        "commit_type": "delta", "format": "anthropic-messages-v1", "delta": msg,
        "template": "t", "principal": "alice", "checkpoint": "turn_boundary",
        "ref": {"name": "sessions/s"}
    }))
    .unwrap();
    crate::api::submit_checkpoint(&h.svc, tenant, req)
        .await
        .unwrap();
    let b = h.create("s", "x").await;
    let r = h
        .svc
        .branch_return(&h.alice, &b.branch_id, "found it")
        .await
        .unwrap();
    for format in ["anthropic-messages-v1", "raw"] {
        let (text, tier) = h.materialized(&r.commit, Some(format)).await;
        eprintln!("{format} ({tier}): {text}");
        assert!(
            text.contains("found it") && text.contains("find the bug"),
            "{format}: {text}"
        );
        if format == "anthropic-messages-v1" {
            assert_eq!(
                tier,
                Tier::Native,
                "the return was appended in the chain's format"
            );
        }
    }
    let c = h.svc.show(tenant, &r.commit).await.unwrap();
    assert_eq!(c.format.as_str(), "anthropic-messages-v1");
}
