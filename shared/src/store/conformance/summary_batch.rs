//! The summary batch over a backend: two batches at once over 200 commits
//! summarize every commit exactly once (the model calls are counted) and
//! keep a summary a person wrote while the batch held the commit. Called by
//! each backend's tests beside [`super::run_all`] (it needs the stores
//! behind `Arc`s, as a `Service` holds them).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;

use super::{commit, fresh_tenant, put, t};
use crate::clock::ManualClock;
use crate::id::{CommitId, TenantId};
use crate::service::{BatchOptions, Service};
use crate::store::{BlobStore, MetaStore, MetadataPatch, Stores, TAG_SUMMARY_BY};
use crate::summarize::{Content, Failure, Summarizer, Summary, SummaryInput};

/// A summarizer that counts its calls per input and, on one input, writes a
/// person's summary on that commit before answering (as if someone ran
/// update-metadata while the batch held it).
pub struct CountingSummarizer {
    calls: Mutex<HashMap<String, u64>>,
    interfere: Option<(Arc<dyn MetaStore>, TenantId, CommitId, String)>,
}

impl CountingSummarizer {
    /// A summarizer that only counts.
    pub fn new() -> Self {
        CountingSummarizer {
            calls: Mutex::new(HashMap::new()),
            interfere: None,
        }
    }

    /// Calls per input text.
    pub fn calls(&self) -> HashMap<String, u64> {
        self.calls.lock().expect("not poisoned").clone()
    }
}

impl Default for CountingSummarizer {
    fn default() -> Self {
        Self::new()
    }
}

fn text_of(input: &SummaryInput) -> String {
    match &input.content {
        Content::Text(t) => t.clone(),
        Content::Conversation(c) => format!("{c:?}"),
    }
}

#[async_trait]
impl Summarizer for CountingSummarizer {
    fn id(&self) -> String {
        "counting:v1".into()
    }

    async fn summarize(&self, input: &SummaryInput) -> Result<Summary, Failure> {
        let text = text_of(input);
        *self
            .calls
            .lock()
            .expect("not poisoned")
            .entry(text.clone())
            .or_default() += 1;
        // Let the other batch run between the claim and the write.
        tokio::task::yield_now().await;
        if let Some((meta, tenant, id, body)) = &self.interfere
            && *body == text
        {
            let patch = MetadataPatch {
                summary: Some(Some("written by a person".into())),
                tags: None,
            };
            meta.update_metadata(tenant, id, &patch)
                .await
                .map_err(|e| Failure::Permanent {
                    reason: e.to_string(),
                })?;
        }
        Ok(Summary {
            text: format!("summary of {text}"),
            input_tokens: 3,
            output_tokens: 2,
        })
    }
}

/// Two batches at once over 200 commits of one tenant: every commit is
/// summarized exactly once, by one model call, and the summary a person
/// wrote while the batch held commit 100 is kept.
pub async fn two_batches_summarize_each_commit_once(
    blobs: Arc<dyn BlobStore>,
    meta: Arc<dyn MetaStore>,
) {
    const N: usize = 200;
    let tenant = fresh_tenant("batch-race");
    let mut commits = Vec::with_capacity(N);
    let mut parent = None;
    for i in 0..N {
        let body = format!("delta {i}");
        blobs
            .put(&tenant, Bytes::from(body.clone()))
            .await
            .expect("put artifact");
        let c = put(
            &*meta,
            &tenant,
            &commit(&tenant, parent.as_ref(), t(i as i64), "p", body.as_bytes()),
        )
        .await;
        parent = Some(c.clone());
        commits.push(c);
    }
    let human = &commits[100];
    let summarizer = Arc::new(CountingSummarizer {
        calls: Mutex::new(HashMap::new()),
        interfere: Some((
            meta.clone(),
            tenant.clone(),
            human.id,
            "delta 100".to_owned(),
        )),
    });
    let service = Service::new(
        Stores {
            blobs: blobs.clone(),
            meta: meta.clone(),
        },
        Arc::new(ManualClock::new(t(10_000))),
    )
    .with_summarizer(summarizer.clone());
    let opts = BatchOptions {
        tenant: Some(tenant.clone()),
        limit: N,
        concurrency: 8,
        ..BatchOptions::default()
    };
    let (a, b) = tokio::join!(service.summarize_batch(&opts), {
        let service = service.clone();
        let opts = opts.clone();
        async move { service.summarize_batch(&opts).await }
    });
    let (a, b) = (a.expect("batch a"), b.expect("batch b"));
    let calls = summarizer.calls();
    assert_eq!(calls.len(), N, "every commit was summarized");
    assert!(
        calls.values().all(|n| *n == 1),
        "no commit was summarized twice: {:?}",
        calls.iter().filter(|(_, n)| **n > 1).collect::<Vec<_>>()
    );
    assert_eq!(a.calls + b.calls, N as u64, "{a:?} {b:?}");
    assert_eq!(a.summarized + b.summarized, N as u64 - 1, "{a:?} {b:?}");
    assert_eq!(a.skipped_human + b.skipped_human, 1, "{a:?} {b:?}");
    assert_eq!(a.tokens + b.tokens, 5 * N as u64);
    for c in &commits {
        let got = meta
            .get_commit(&tenant, &c.id)
            .await
            .expect("get")
            .expect("commit");
        if c.id == human.id {
            assert_eq!(got.summary.as_deref(), Some("written by a person"));
            assert!(!got.tags.contains_key(TAG_SUMMARY_BY));
        } else {
            let n = commits.iter().position(|x| x.id == c.id).expect("listed");
            assert_eq!(
                got.summary.as_deref(),
                Some(format!("summary of delta {n}").as_str())
            );
            assert_eq!(
                got.tags.get(TAG_SUMMARY_BY).map(String::as_str),
                Some("counting:v1")
            );
        }
    }
    let left = meta
        .missing_summaries(&tenant, None, 10)
        .await
        .expect("list");
    assert!(left.items.is_empty(), "{:?}", left.items);
    // A third run finds nothing to do and calls nothing.
    let c = service.summarize_batch(&opts).await.expect("batch c");
    assert_eq!((c.calls, c.summarized), (0, 0), "{c:?}");
}
