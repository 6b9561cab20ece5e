//! How branches end: deadlines, the start-up sweep, session end.

use super::*;

#[tokio::test]
async fn a_branch_expires_at_its_deadline_once() {
    let h = harness();
    let mut r = create("s", "slow");
    r.timeout_seconds = Some(5);
    let b = h.svc.branch_create(&h.alice, r).await.unwrap();
    let t = &h.alice.tenant;
    assert_eq!(
        h.svc.branch_expire(t, &b.branch_id).await.unwrap(),
        Expired::NotDue
    );
    h.clock.advance_micros(5_000_000);
    assert_eq!(
        h.svc.branch_expire(t, &b.branch_id).await.unwrap(),
        Expired::TimedOut
    );
    assert_eq!(
        h.svc.branch_expire(t, &b.branch_id).await.unwrap(),
        Expired::AlreadyEnded
    );
    let s = h.status(&b.branch_id).await;
    assert_eq!(s.status, "timeout");
    assert!(h.text_of("sessions/s").await.contains("timeout"));
    let e = h
        .svc
        .branch_return(&h.alice, &b.branch_id, "late")
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
    // A returned branch is not expired later (its timer was stopped, and a
    // late firing does nothing).
    let b2 = h.create("s", "quick").await;
    h.ret(&b2.branch_id, "ok").await;
    assert!(h.timer.stopped.lock().unwrap().contains(&b2.branch_id));
    h.clock.advance_micros(3_600_000_000);
    assert_eq!(
        h.svc.branch_expire(t, &b2.branch_id).await.unwrap(),
        Expired::AlreadyEnded
    );
    assert_eq!(h.status(&b2.branch_id).await.status, "completed");
}

#[tokio::test]
async fn the_sweep_expires_overdue_branches_and_rearms_the_rest() {
    let h = harness();
    let mut r = create("s", "short");
    r.timeout_seconds = Some(10);
    let short = h.svc.branch_create(&h.alice, r).await.unwrap();
    let long = h.create("s", "long").await;
    h.clock.advance_micros(60_000_000);
    let sweep = h.svc.branch_sweep().await.unwrap();
    assert_eq!(
        sweep,
        Sweep {
            expired: 1,
            rearmed: 1
        }
    );
    assert_eq!(h.status(&short.branch_id).await.status, "timeout");
    assert_eq!(h.status(&long.branch_id).await.status, "active");
    assert_eq!(
        h.timer
            .started
            .lock()
            .unwrap()
            .iter()
            .filter(|b| **b == long.branch_id)
            .count(),
        2
    );
}

#[tokio::test]
async fn session_end_returns_every_active_branch() {
    let h = harness();
    let b1 = h.create("s", "one").await;
    let mut r = create("s", "two");
    r.parent_branch = Some(b1.branch_id);
    let b2 = h.svc.branch_create(&h.alice, r).await.unwrap();
    let end = h.svc.session_end(&h.alice, &sid("s")).await.unwrap();
    assert_eq!(end.returned, vec![b2.branch_id, b1.branch_id]);
    assert!(end.failed.is_empty());
    assert_eq!(
        h.status(&b1.branch_id).await.reason.as_deref(),
        Some("session ended")
    );
    let none = BranchStatusResponse::of_session(
        &sid("s"),
        h.svc
            .branch_status_of_session(&h.alice, &sid("s"))
            .await
            .unwrap(),
    );
    assert_eq!(
        (none.branch_id, none.status.as_str()),
        (None, "No active branch found")
    );
}

#[tokio::test]
async fn what_session_end_cannot_finish_in_time_is_marked_failed() {
    let h = harness_with(
        BranchConfig {
            session_end_timeout: std::time::Duration::ZERO,
            ..BranchConfig::default()
        },
        Arc::new(RuleScrubber::new().unwrap()),
    );
    let b = h.create("s", "stuck").await;
    let end = h.svc.session_end(&h.alice, &sid("s")).await.unwrap();
    assert_eq!(end.failed, vec![b.branch_id]);
    let s = h.status(&b.branch_id).await;
    assert_eq!(s.status, "failed");
    // Error context reached the parent, and the branch stays stored.
    let parent = h.text_of("sessions/s").await;
    assert!(
        parent.contains("failed") && parent.contains("stuck"),
        "{parent}"
    );
    assert_eq!(h.text_of(&b.chain_ref).await, "stuck\n");
}

/// With `CTX_SESSION_IDLE_SECS`, a branch's timer first wakes when its
/// session could have been idle that long; activity (a checkpoint into a
/// branch's chain or the session's) moves the next look later; a session idle past it has
/// every active branch force-returned, not timed out. It is on by default;
/// off, the timer only wakes at the deadline.
#[tokio::test]
async fn an_idle_session_ends_its_branches_by_itself() {
    let h = harness_with(
        BranchConfig {
            session_idle: Some(std::time::Duration::from_secs(60)),
            ..BranchConfig::default()
        },
        Arc::new(RuleScrubber::new().unwrap()),
    );
    let t = &h.alice.tenant;
    let start = crate::clock::Clock::now(h.clock.as_ref());
    let a = h.create("idle", "one").await;
    let b = h.create("idle", "two").await;
    let at = |s: i64| start + chrono::Duration::seconds(s);
    assert_eq!(
        h.svc.branch_wake(t, &a.branch_id).await.unwrap(),
        Wake::Later(at(60)),
        "first look: a minute after the newest activity"
    );
    h.clock.advance_micros(50_000_000);
    h.append(&b.chain_ref, "still working").await.unwrap();
    h.clock.advance_micros(11_000_000);
    let Wake::Later(next) = h.svc.branch_wake(t, &a.branch_id).await.unwrap() else {
        panic!("the checkpoint at 50 s keeps the session busy");
    };
    assert!(
        next >= at(110) && next < at(111),
        "the checkpoint at 50 s moved it to 110 s: {next}"
    );
    // The session's own chain moving counts too (its agent is at work).
    h.clock.advance_micros(30_000_000);
    h.append("sessions/idle", "user: go on").await.unwrap();
    let Wake::Later(next) = h.svc.branch_wake(t, &a.branch_id).await.unwrap() else {
        panic!("the session's chain moved at 91 s");
    };
    assert!(next >= at(151) && next < at(152), "{next}");
    h.clock.advance_micros(61_000_000);
    let Wake::Idle(ended) = h.svc.branch_wake(t, &a.branch_id).await.unwrap() else {
        panic!("the session is idle");
    };
    assert_eq!(ended.returned.len(), 2, "{ended:?}");
    for id in [&a.branch_id, &b.branch_id] {
        let s = h.status(id).await;
        assert_eq!(s.status, "completed");
        assert!(
            s.reason
                .as_deref()
                .unwrap_or("")
                .contains("session idle for 60 s"),
            "{s:?}"
        );
    }
    assert_eq!(
        h.svc.branch_wake(t, &b.branch_id).await.unwrap(),
        Wake::Expired(Expired::AlreadyEnded)
    );

    // On by default (120 s, under the default 300 s timeout): the first
    // look comes before the deadline.
    let plain = harness();
    let c = plain.create("busy", "x").await;
    let created = crate::clock::Clock::now(plain.clock.as_ref());
    let Wake::Later(when) = plain
        .svc
        .branch_wake(&plain.alice.tenant, &c.branch_id)
        .await
        .unwrap()
    else {
        panic!("not due");
    };
    assert_eq!(when, created + chrono::Duration::seconds(120));
    assert!(when < c.deadline, "{when} {}", c.deadline);

    // Off (`CTX_SESSION_IDLE_SECS=0`): the deadline only.
    let off = harness_with(
        BranchConfig {
            session_idle: None,
            ..BranchConfig::default()
        },
        Arc::new(RuleScrubber::new().unwrap()),
    );
    let c = off.create("busy", "x").await;
    let Wake::Later(when) = off
        .svc
        .branch_wake(&off.alice.tenant, &c.branch_id)
        .await
        .unwrap()
    else {
        panic!("not due");
    };
    assert_eq!(when, c.deadline);
}

#[tokio::test]
async fn an_agent_returns_its_branch_as_failed_and_the_parent_gets_the_error() {
    let h = harness();
    h.append("sessions/f", "user: fix the test\n")
        .await
        .unwrap();
    let b = h.create("f", "try a fix in the lexer").await;
    h.append(&b.chain_ref, "tool: cargo test\n").await.unwrap();
    let r = h
        .svc
        .branch_fail(
            &h.alice,
            &b.branch_id,
            "the build broke: token ghp_0123456789abcdefghijklmnopqrstuvwxyz leaked",
            "tried renaming the enum",
        )
        .await
        .unwrap();
    assert!(!r.success);
    assert!(
        r.message
            .starts_with(&format!("[branch {} failed: the build broke", b.branch_id)),
        "{}",
        r.message
    );
    assert!(
        r.message.contains("try a fix in the lexer"),
        "{}",
        r.message
    );
    assert!(
        r.message.contains("tried renaming the enum"),
        "{}",
        r.message
    );
    assert!(!r.message.contains("ghp_0123"), "scrubbed: {}", r.message);
    assert_eq!(r.redactions.values().sum::<usize>(), 1);
    assert_eq!(
        h.text_of("sessions/f").await,
        format!("user: fix the test\n{}\n", r.message)
    );
    let s = h.status(&b.branch_id).await;
    assert_eq!(s.status, "failed");
    let reason = s.reason.unwrap();
    assert!(
        reason.starts_with("the build broke") && !reason.contains("ghp_0123"),
        "{reason}"
    );
    let c = h.svc.show(&h.alice.tenant, &r.commit).await.unwrap();
    assert_eq!(
        c.tags.get("branch_status").map(String::as_str),
        Some("failed")
    );
    // Once ended, neither a return nor a failure ends it again.
    let e = h
        .svc
        .branch_fail(&h.alice, &b.branch_id, "again", "")
        .await
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
    // The error is required, not blank, and bounded; nothing is written.
    let b2 = h.create("f", "another").await;
    for (error, field) in [
        ("", "error"),
        ("  \n", "error"),
        (&*"e".repeat(5001), "error"),
    ] {
        let e = h
            .svc
            .branch_fail(&h.alice, &b2.branch_id, error, "")
            .await
            .unwrap_err();
        assert_eq!(
            (e.kind, e.field.as_deref()),
            (ErrorKind::Invalid, Some(field))
        );
    }
    assert_eq!(h.status(&b2.branch_id).await.status, "active");
}
