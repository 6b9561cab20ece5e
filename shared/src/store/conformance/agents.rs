//! The behaviours of agents' live context in a [`MetaStore`]: the timeline
//! range the rolling window reads, agent records (patches set only what
//! they name) and saves (newest first, per agent, per tenant).

use super::{commit, fresh_tenant, put, t};
use std::collections::BTreeMap;

use crate::agent::{AgentRecord, ProcessRecord, SaveId, SaveRecord, WorkingContextRef};
use crate::commit::Commit;
use crate::id::{ArtifactRef, Principal, TenantId};
use crate::store::MetaStore;

/// Runs every behaviour.
pub async fn run_all(meta: &dyn MetaStore) {
    timeline_range_reads_one_principals_range(meta).await;
    agent_records_patch_only_what_they_name(meta).await;
    saves_list_newest_first_per_agent(meta).await;
    agent_data_is_removed_piece_by_piece(meta).await;
    prompt_docs_and_processes_patch_on_their_own(meta).await;
}

fn ids(cs: &[Commit]) -> Vec<crate::id::CommitId> {
    cs.iter().map(|c| c.id).collect()
}

/// A range (after, until] of one principal's timeline, oldest or newest
/// first, bounded by `limit`; other principals and tenants are not in it.
pub async fn timeline_range_reads_one_principals_range(meta: &dyn MetaStore) {
    let a = fresh_tenant("tl-a");
    let b = fresh_tenant("tl-b");
    let p: Principal = "agent-p".parse().expect("principal");
    let mut mine = Vec::new();
    let mut parent: Option<Commit> = None;
    for i in 1..=10 {
        let c = put(
            meta,
            &a,
            &commit(
                &a,
                parent.as_ref(),
                t(i),
                "agent-p",
                format!("m{i}").as_bytes(),
            ),
        )
        .await;
        // Another principal at the same times.
        put(
            meta,
            &a,
            &commit(&a, None, t(i), "agent-q", format!("q{i}").as_bytes()),
        )
        .await;
        mine.push(c.clone());
        parent = Some(c);
    }
    let got = meta
        .timeline_range(&a, &p, Some(t(3)), t(7), 100, false)
        .await
        .expect("range");
    assert_eq!(ids(&got), ids(&mine[3..7]), "(t3, t7] oldest first");
    assert_eq!(got[0], mine[3], "whole commits come back");
    let got = meta
        .timeline_range(&a, &p, Some(t(3)), t(7), 2, false)
        .await
        .expect("range");
    assert_eq!(ids(&got), ids(&mine[3..5]), "the oldest two");
    let got = meta
        .timeline_range(&a, &p, Some(t(3)), t(7), 2, true)
        .await
        .expect("range");
    assert_eq!(
        ids(&got),
        vec![mine[6].id, mine[5].id],
        "the newest two, newest first"
    );
    let got = meta
        .timeline_range(&a, &p, None, t(100), 1000, false)
        .await
        .expect("range");
    assert_eq!(ids(&got), ids(&mine), "everything");
    assert!(
        meta.timeline_range(&a, &p, Some(t(7)), t(7), 10, false)
            .await
            .expect("empty")
            .is_empty()
    );
    assert!(
        meta.timeline_range(&a, &p, Some(t(8)), t(2), 10, false)
            .await
            .expect("inverted")
            .is_empty()
    );
    assert!(
        meta.timeline_range(&b, &p, None, t(100), 10, false)
            .await
            .expect("other tenant")
            .is_empty()
    );
    let nobody: Principal = "nobody".parse().expect("principal");
    assert!(
        meta.timeline_range(&a, &nobody, None, t(100), 10, false)
            .await
            .expect("nobody")
            .is_empty()
    );
}

/// An absent agent has no record; a patch creates it and sets only its
/// `Some` fields; other tenants see nothing.
pub async fn agent_records_patch_only_what_they_name(meta: &dyn MetaStore) {
    let a = fresh_tenant("ag-a");
    let b = fresh_tenant("ag-b");
    let p: Principal = "agent-p".parse().expect("principal");
    assert_eq!(meta.get_agent(&a, &p).await.expect("get"), None);
    let first = meta
        .update_agent(
            &a,
            &p,
            &AgentRecord {
                window_seconds: Some(60),
                ..Default::default()
            },
        )
        .await
        .expect("patch");
    assert_eq!(
        first,
        AgentRecord {
            window_seconds: Some(60),
            ..Default::default()
        }
    );
    let wc = WorkingContextRef {
        artifact_ref: ArtifactRef::of(b"wc"),
        epoch_id: 3,
    };
    let second = meta
        .update_agent(
            &a,
            &p,
            &AgentRecord {
                last_clear: Some(t(5)),
                persist_working_context: Some(true),
                working_context: Some(wc),
                windows: Some(vec![ArtifactRef::of(b"w1"), ArtifactRef::of(b"w2")]),
                ..Default::default()
            },
        )
        .await
        .expect("patch");
    let want = AgentRecord {
        window_seconds: Some(60),
        persist_working_context: Some(true),
        last_clear: Some(t(5)),
        working_context: Some(wc),
        windows: Some(vec![ArtifactRef::of(b"w1"), ArtifactRef::of(b"w2")]),
        ..Default::default()
    };
    assert_eq!(second, want);
    assert_eq!(
        meta.get_agent(&a, &p).await.expect("get"),
        Some(want.clone())
    );
    let third = meta
        .update_agent(
            &a,
            &p,
            &AgentRecord {
                persist_working_context: Some(false),
                ..Default::default()
            },
        )
        .await
        .expect("patch");
    assert_eq!(
        third,
        AgentRecord {
            persist_working_context: Some(false),
            ..want
        }
    );
    assert_eq!(meta.get_agent(&b, &p).await.expect("other tenant"), None);
}

pub(super) fn save(tenant: &TenantId, agent: &Principal, at: i64, description: &str) -> SaveRecord {
    let artifact = ArtifactRef::of(description.as_bytes());
    SaveRecord {
        save_id: SaveId::derive(tenant, agent, t(at), &artifact),
        timestamp: t(at),
        description: Some(description.to_owned()),
        summary: format!("summary of {description}"),
        message_count: 3,
        window_start: t(at - 100),
        window_end: t(at),
        artifact_ref: artifact,
        thread_artifacts: vec![ArtifactRef::of(
            format!("thread of {description}").as_bytes(),
        )],
    }
}

/// Saves come back by id and newest first, at most `limit`; a second put of
/// one id keeps the first; other agents and tenants see none.
pub async fn saves_list_newest_first_per_agent(meta: &dyn MetaStore) {
    let a = fresh_tenant("sv-a");
    let b = fresh_tenant("sv-b");
    let p: Principal = "agent-p".parse().expect("principal");
    let q: Principal = "agent-q".parse().expect("principal");
    let saves: Vec<SaveRecord> = (1..=4)
        .map(|i| save(&a, &p, i * 10, &format!("s{i}")))
        .collect();
    for s in [&saves[2], &saves[0], &saves[3], &saves[1]] {
        meta.put_save(&a, &p, s).await.expect("put");
    }
    let mut again = saves[0].clone();
    again.summary = "changed".into();
    meta.put_save(&a, &p, &again).await.expect("put again");
    let listed = meta.list_saves(&a, &p, 100).await.expect("list");
    let want: Vec<SaveRecord> = saves.iter().rev().cloned().collect();
    assert_eq!(listed, want, "newest first, the first write kept");
    assert_eq!(
        meta.list_saves(&a, &p, 2).await.expect("list"),
        want[..2].to_vec()
    );
    assert_eq!(
        meta.get_save(&a, &p, &saves[1].save_id).await.expect("get"),
        Some(saves[1].clone())
    );
    assert_eq!(
        meta.get_save(&a, &q, &saves[1].save_id)
            .await
            .expect("other agent"),
        None
    );
    assert_eq!(
        meta.get_save(&b, &p, &saves[1].save_id)
            .await
            .expect("other tenant"),
        None
    );
    assert!(
        meta.list_saves(&a, &q, 10)
            .await
            .expect("other agent")
            .is_empty()
    );
    assert!(
        meta.list_saves(&b, &p, 10)
            .await
            .expect("other tenant")
            .is_empty()
    );
}

/// A save's record, a working-context pointer (only while it names the
/// artifact given) and an agent's record are removed one at a time; each
/// removal says whether there was anything; other agents and tenants keep
/// theirs.
pub async fn agent_data_is_removed_piece_by_piece(meta: &dyn MetaStore) {
    let a = fresh_tenant("agent-erase-a");
    let b = fresh_tenant("agent-erase-b");
    let p: Principal = "agent-p".parse().expect("principal");
    let q: Principal = "agent-q".parse().expect("principal");
    let wc = |bytes: &[u8]| AgentRecord {
        window_seconds: Some(60),
        working_context: Some(WorkingContextRef {
            artifact_ref: ArtifactRef::of(bytes),
            epoch_id: 3,
        }),
        ..AgentRecord::default()
    };
    for (tenant, agent) in [(&a, &p), (&a, &q), (&b, &p)] {
        meta.update_agent(tenant, agent, &wc(b"snapshot"))
            .await
            .expect("update_agent");
        for (at, d) in [(100, "one"), (200, "two")] {
            meta.put_save(tenant, agent, &save(tenant, agent, at, d))
                .await
                .expect("put_save");
        }
    }
    let one = save(&a, &p, 100, "one");
    assert!(
        meta.delete_save(&a, &p, &one.save_id)
            .await
            .expect("delete")
    );
    assert!(
        !meta.delete_save(&a, &p, &one.save_id).await.expect("again"),
        "a second delete finds nothing"
    );
    assert_eq!(
        meta.get_save(&a, &p, &one.save_id).await.expect("get"),
        None
    );
    assert_eq!(meta.list_saves(&a, &p, 10).await.expect("list").len(), 1);
    assert_eq!(meta.list_saves(&a, &q, 10).await.expect("q's").len(), 2);
    assert_eq!(meta.list_saves(&b, &p, 10).await.expect("b's").len(), 2);

    assert!(
        !meta
            .clear_working_context(&a, &p, &ArtifactRef::of(b"another snapshot"))
            .await
            .expect("clear another"),
        "a pointer to another snapshot is kept"
    );
    assert!(
        meta.clear_working_context(&a, &p, &ArtifactRef::of(b"snapshot"))
            .await
            .expect("clear")
    );
    let rec = meta.get_agent(&a, &p).await.expect("get").expect("kept");
    assert_eq!(rec.working_context, None);
    assert_eq!(rec.window_seconds, Some(60), "settings stay");
    assert!(
        !meta
            .clear_working_context(&a, &p, &ArtifactRef::of(b"snapshot"))
            .await
            .expect("clear again")
    );
    assert_eq!(
        meta.get_agent(&a, &q).await.expect("q"),
        Some(wc(b"snapshot"))
    );

    assert!(meta.delete_agent(&a, &p).await.expect("delete_agent"));
    assert!(!meta.delete_agent(&a, &p).await.expect("again"));
    assert_eq!(meta.get_agent(&a, &p).await.expect("gone"), None);
    assert_eq!(
        meta.get_agent(&b, &p).await.expect("b"),
        Some(wc(b"snapshot"))
    );
    assert!(
        !meta
            .clear_working_context(&a, &p, &ArtifactRef::of(b"snapshot"))
            .await
            .expect("no record")
    );
}

fn process(description: &str, at: i64) -> ProcessRecord {
    ProcessRecord {
        description: description.to_owned(),
        started_at: t(at),
        thread_id: Some("t1".to_owned()),
        expires_at: Some(t(at + 3600)),
        updated_at: t(at),
    }
}

/// The system prompt, the docs workspace and the registered processes
/// are kept like the other settings; each process entry is set and
/// removed on its own, so two writers of different processes at once
/// both land; other settings are left alone; other tenants see nothing.
pub async fn prompt_docs_and_processes_patch_on_their_own(meta: &dyn MetaStore) {
    let a = fresh_tenant("agp-a");
    let b = fresh_tenant("agp-b");
    let p: Principal = "agent-p".parse().expect("principal");
    let got = meta
        .update_agent(
            &a,
            &p,
            &AgentRecord {
                window_seconds: Some(60),
                system_prompt: Some("You are careful.\nBe brief.".to_owned()),
                docs_workspace: Some("docs-ws".to_owned()),
                ..Default::default()
            },
        )
        .await
        .expect("patch");
    assert_eq!(
        got.system_prompt.as_deref(),
        Some("You are careful.\nBe brief.")
    );
    assert_eq!(got.docs_workspace.as_deref(), Some("docs-ws"));
    assert_eq!(got.processes, None);
    // Two processes registered at once, by two writers.
    let one = AgentRecord {
        processes: Some(BTreeMap::from([(
            "build".to_owned(),
            Some(process("cargo build", 1)),
        )])),
        ..Default::default()
    };
    let two = AgentRecord {
        processes: Some(BTreeMap::from([(
            "tests:1".to_owned(),
            Some(process("tests", 2)),
        )])),
        ..Default::default()
    };
    let (r1, r2) = tokio::join!(
        meta.update_agent(&a, &p, &one),
        meta.update_agent(&a, &p, &two)
    );
    r1.expect("first writer");
    r2.expect("second writer");
    let rec = meta
        .get_agent(&a, &p)
        .await
        .expect("get")
        .expect("a record");
    assert_eq!(
        rec.processes,
        Some(BTreeMap::from([
            ("build".to_owned(), Some(process("cargo build", 1))),
            ("tests:1".to_owned(), Some(process("tests", 2))),
        ]))
    );
    assert_eq!(rec.window_seconds, Some(60), "other settings are kept");
    assert_eq!(
        rec.system_prompt.as_deref(),
        Some("You are careful.\nBe brief.")
    );
    // A replacement and a removal in one patch; a cleared prompt.
    let got = meta
        .update_agent(
            &a,
            &p,
            &AgentRecord {
                system_prompt: Some(String::new()),
                processes: Some(BTreeMap::from([
                    ("build".to_owned(), None),
                    ("tests:1".to_owned(), Some(process("tests again", 3))),
                ])),
                ..Default::default()
            },
        )
        .await
        .expect("patch");
    assert_eq!(
        got.processes,
        Some(BTreeMap::from([(
            "tests:1".to_owned(),
            Some(process("tests again", 3))
        )]))
    );
    assert_eq!(got.system_prompt.as_deref(), Some(""));
    assert_eq!(got.docs_workspace.as_deref(), Some("docs-ws"));
    assert_eq!(meta.get_agent(&a, &p).await.expect("get"), Some(got));
    // Removing the last leaves an empty map; removing an absent one is no error.
    let got = meta
        .update_agent(
            &a,
            &p,
            &AgentRecord {
                processes: Some(BTreeMap::from([
                    ("tests:1".to_owned(), None),
                    ("never".to_owned(), None),
                ])),
                ..Default::default()
            },
        )
        .await
        .expect("patch");
    assert_eq!(got.processes, Some(BTreeMap::new()));
    assert_eq!(meta.get_agent(&b, &p).await.expect("other tenant"), None);
}
