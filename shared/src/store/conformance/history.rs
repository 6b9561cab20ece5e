//! History a page at a time over a backend: a chain that forks, so the walk
//! crosses lineage runs, read through the service with every page size;
//! each page's `next` starts the next page, the pages together are the
//! chain to its root, and a cursor that is no commit or not older than the
//! tip is refused naming `cursor`. Called by each backend's tests beside
//! [`super::run_all`] (a `Service` holds the stores behind `Arc`s).

use std::sync::Arc;

use super::{commit, fresh_tenant, put, t};
use crate::clock::ManualClock;
use crate::error::ErrorKind;
use crate::id::CommitId;
use crate::service::Service;
use crate::store::{BlobStore, MetaStore, Stores};

/// Pages of 1 to 7 commits over `c0 … c4` and a fork `f3 … f5` of `c2`.
pub async fn history_pages_across_lineage_runs(
    blobs: Arc<dyn BlobStore>,
    meta: Arc<dyn MetaStore>,
) {
    let tenant = fresh_tenant("history-pages");
    let mut main = Vec::new();
    for i in 0..5 {
        let c = commit(
            &tenant,
            main.last(),
            t(i),
            "p",
            format!("main {i}").as_bytes(),
        );
        main.push(put(&*meta, &tenant, &c).await);
    }
    // A second child of c2 starts its own run.
    let mut fork = Vec::new();
    for i in 3..6 {
        let parent = fork.last().unwrap_or(&main[2]);
        let mut c = commit(
            &tenant,
            Some(parent),
            t(10 + i),
            "p",
            format!("fork {i}").as_bytes(),
        );
        if fork.is_empty() {
            c.lineage = c.id;
        }
        fork.push(put(&*meta, &tenant, &c).await);
    }
    let tip = fork.last().expect("a fork").id;
    let chain: Vec<CommitId> = fork
        .iter()
        .rev()
        .chain(main[..3].iter().rev())
        .map(|c| c.id)
        .collect();
    let service = Service::new(
        Stores {
            blobs: blobs.clone(),
            meta: meta.clone(),
        },
        Arc::new(ManualClock::new(t(100))),
    );
    for depth in 1..=7 {
        let mut seen = Vec::new();
        let mut cursor = None;
        let mut pages = 0;
        loop {
            let (commits, next) = service
                .history_page(&tenant, &tip, cursor.as_ref(), depth)
                .await
                .expect("a page");
            pages += 1;
            assert!(
                commits.len() <= depth,
                "depth {depth}: {} commits",
                commits.len()
            );
            seen.extend(commits.iter().map(|c| c.id));
            match next {
                Some(n) => {
                    assert_eq!(commits.len(), depth, "only a full page goes on");
                    cursor = Some(n);
                }
                None => break,
            }
        }
        assert_eq!(seen, chain, "pages of {depth}");
        assert_eq!(pages, chain.len().div_ceil(depth), "pages of {depth}");
    }
    // From f4 (depth 4): no commit, one as deep (c4) and one deeper (c5)
    // are no cursors of its history.
    let missing: CommitId = "ctx-00000000000000000000000000000000"
        .parse()
        .expect("an id");
    let deeper = commit(&tenant, Some(&main[4]), t(50), "p", b"main 5");
    let deeper = put(&*meta, &tenant, &deeper).await;
    for bad in [missing, main[4].id, deeper.id] {
        let e = service
            .history_page(&tenant, &fork[1].id, Some(&bad), 2)
            .await
            .expect_err("not a cursor of this history");
        assert_eq!(
            (e.kind, e.field.as_deref()),
            (ErrorKind::Invalid, Some("cursor")),
            "{bad}: {e:?}"
        );
    }
}
