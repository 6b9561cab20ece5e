//! `ctx summarize`: fill in missing summaries now, through the server's
//! summarizer. One commit (`--commit REV`, `--force` to replace a summary),
//! or a backfill: the commits lacking a summary, oldest first, listed page
//! by page and summarized a few at a time, with a progress bar.

use ctx_core::wire::SummarizeRequest;
use ctx_core::{CommitId, Error, ErrorKind, Result};
use futures::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use super::rev;
use crate::{Conn, print_json};

/// Commits asked for per page.
const PAGE: usize = 100;

/// What a backfill did.
#[derive(Debug, Default, Serialize)]
struct Backfill {
    summarized: u64,
    /// Summarized meanwhile by someone else, or held by another run.
    skipped: u64,
    failed: u64,
    errors: Vec<String>,
}

/// Runs `ctx summarize`.
///
/// # Errors
/// The server's errors; `Unavailable` when some commits failed.
pub(crate) async fn run(
    limit: Option<u64>,
    commit: Option<&str>,
    force: bool,
    concurrency: usize,
    conn: &Conn,
) -> Result<()> {
    let c = conn.client()?;
    if let Some(r) = commit {
        let id = rev(&c, r).await?;
        let done = c.summarize(&id, &SummarizeRequest { force }).await?;
        return if conn.json {
            print_json(&done)
        } else {
            outln!("{} {}", done.id, done.summary.as_deref().unwrap_or(""));
            Ok(())
        };
    }
    let limit = limit.map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
    // Drawn on stderr only when it is a terminal.
    let bar = ProgressBar::no_length().with_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}")
            .map_err(|e| Error::internal(format!("progress template: {e}")))?,
    );
    let mut ids: Vec<CommitId> = Vec::new();
    let mut cursor: Option<String> = None;
    while ids.len() < limit {
        let page = c
            .missing_summaries(Some(PAGE.min(limit - ids.len())), cursor.as_deref())
            .await?;
        ids.extend(page.commits.iter().map(|m| m.commit.id));
        bar.set_length(ids.len() as u64);
        match page.next_cursor {
            Some(next) if !page.commits.is_empty() => cursor = Some(next),
            _ => break,
        }
    }
    ids.truncate(limit);
    bar.set_length(ids.len() as u64);
    let req = SummarizeRequest { force };
    let mut results = futures::stream::iter(ids.iter().map(|id| {
        let (c, req) = (&c, &req);
        async move { (id, c.summarize(id, req).await) }
    }))
    .buffer_unordered(concurrency.max(1));
    let mut out = Backfill::default();
    while let Some((id, r)) = results.next().await {
        match r {
            Ok(_) => out.summarized += 1,
            Err(e) if e.kind == ErrorKind::Conflict => out.skipped += 1,
            // Nothing to go on with: no summarizer, or the server is gone.
            Err(e) if out.summarized == 0 && e.message.contains("no summarizer") => {
                bar.finish_and_clear();
                return Err(e);
            }
            Err(e) => {
                out.failed += 1;
                out.errors.push(format!("{id}: {}", e.message));
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    if conn.json {
        print_json(&out)?;
    } else {
        outln!(
            "summarized {}, skipped {}, failed {}",
            out.summarized,
            out.skipped,
            out.failed
        );
        for e in &out.errors {
            eprintln!("failed: {e}");
        }
    }
    if out.failed > 0 {
        return Err(Error::unavailable(format!(
            "{} of {} commits could not be summarized (see summary_error on them)",
            out.failed,
            ids.len()
        )));
    }
    Ok(())
}
