//! `ctx show`, `ctx log` and `ctx update-metadata`: reading a commit, its
//! history, and changing its summary and tags.

use chrono::{DateTime, Utc};
use ctx_core::store::{TAG_SUMMARIZING, TAG_SUMMARY_ERROR};
use ctx_core::wire::UpdateMetadataRequest;
use ctx_core::wire::{Commit, HistoryResponse};
use ctx_core::{Clock, Result, SystemClock};

use super::rev;
use crate::{Conn, print_json};

/// Runs `ctx show REV`.
///
/// # Errors
/// The server's errors.
pub(crate) async fn show(r: &str, conn: &Conn) -> Result<()> {
    let c = conn.client()?;
    let commit = c.get_commit(&rev(&c, r).await?).await?;
    if conn.json {
        print_json(&commit)
    } else {
        print_commit(&commit);
        Ok(())
    }
}

/// Runs `ctx log REV -n N [--all]`: one page of `-n` commits, saying on
/// stderr where the next starts when the root is not reached; with
/// `all`, page after page to the root.
///
/// # Errors
/// The server's errors.
pub(crate) async fn log(r: &str, max_count: u64, all: bool, conn: &Conn) -> Result<()> {
    let c = conn.client()?;
    let n = usize::try_from(max_count).unwrap_or(usize::MAX);
    let tip = rev(&c, r).await?;
    let mut cursor = None;
    let mut listed = HistoryResponse {
        commits: Vec::new(),
        next: None,
    };
    loop {
        let h = c
            .history_page(&tip, Some(n), cursor.as_ref())
            .await
            .map_err(|e| match e.field.as_deref() {
                // The server calls -n `depth`.
                Some("depth") => {
                    let mut e = e;
                    e.message = e.message.replacen("depth is", "-n is", 1);
                    e.with_field("-n")
                }
                _ => e,
            })?;
        if !conn.json {
            for commit in &h.commits {
                outln!("{}", oneline(commit));
            }
        }
        listed.commits.extend(h.commits);
        listed.next = h.next;
        match listed.next {
            Some(next) if all => cursor = Some(next),
            _ => break,
        }
    }
    if let Some(next) = &listed.next {
        eprintln!("ctx: stopped after {n} commits, before the root; more: ctx log {next} -n {n}");
    }
    if conn.json {
        return print_json(&listed);
    }
    Ok(())
}

/// Runs `ctx update-metadata REV`: a new summary (or none with
/// `clear_summary`), and the tags replaced when any are given.
///
/// # Errors
/// The server's errors.
pub(crate) async fn update_metadata(
    r: &str,
    summary: Option<String>,
    clear_summary: bool,
    tags: Vec<(String, String)>,
    conn: &Conn,
) -> Result<()> {
    let c = conn.client()?;
    let id = rev(&c, r).await?;
    let req = UpdateMetadataRequest {
        summary: match summary {
            Some(s) => Some(Some(s)),
            None if clear_summary => Some(None),
            None => None,
        },
        tags: (!tags.is_empty()).then(|| tags.into_iter().collect()),
    };
    let commit = c.update_metadata(&id, &req).await?;
    if conn.json {
        print_json(&commit)
    } else {
        outln!("{}", oneline(&commit));
        Ok(())
    }
}

/// A commit in one line: id, type, time, the summary's first line (or
/// where its summary stands: being written, failed, or none yet).
fn oneline(c: &Commit) -> String {
    format!(
        "{} {:<10} {} {}",
        c.id,
        c.commit_type.as_str(),
        c.created_at.format("%Y-%m-%dT%H:%M:%SZ"),
        summary_line(c, SystemClock.now())
    )
}

/// The summary's first line, or `(summarizing…)` while a summarizer's claim
/// holds, `(failed)` after a failure, `(no summary)` otherwise.
pub(crate) fn summary_line(c: &Commit, now: DateTime<Utc>) -> &str {
    if let Some(s) = &c.summary {
        return s.lines().next().unwrap_or("");
    }
    let claimed = c
        .tags
        .get(TAG_SUMMARIZING)
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .is_some_and(|until| until > now);
    if claimed {
        "(summarizing…)"
    } else if c.tags.contains_key(TAG_SUMMARY_ERROR) {
        "(failed)"
    } else {
        "(no summary)"
    }
}

fn print_commit(c: &Commit) {
    outln!("commit     {}", c.id);
    if let Some(p) = &c.parent {
        outln!("parent     {p}");
    }
    outln!("type       {}", c.commit_type.as_str());
    outln!(
        "artifact   {} ({} bytes, {})",
        c.artifact_ref,
        c.artifact_size,
        c.format
    );
    outln!("principal  {}", c.principal);
    outln!("created    {}", c.created_at.to_rfc3339());
    outln!("trigger    {}", c.checkpoint.as_str());
    outln!("template   {}", c.template);
    let session = c.session_id.as_ref().map(ToString::to_string);
    for (k, v) in [
        ("machine", &c.machine),
        ("session", &session),
        ("ticket", &c.ticket_id),
        ("thread", &c.thread_id),
    ] {
        if let Some(v) = v {
            outln!("{k:<10} {v}");
        }
    }
    outln!(
        "counts     {} messages, {} tokens",
        c.message_count,
        c.token_count
    );
    outln!("depth      {}", c.depth);
    for (k, v) in &c.tags {
        outln!("tag        {k}={v}");
    }
    if let Some(s) = &c.summary {
        outln!("\n    {}", s.replace('\n', "\n    "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_show_the_summary_or_where_it_stands() {
        let mut c: Commit = serde_json::from_value(serde_json::json!({
            "id": "ctx-0123456789abcdef0123456789abcdef",
            "parent": null, "commit_type": "delta",
            "artifact_ref": format!("art-{}", "ab".repeat(32)), "artifact_size": 1,
            "format": "raw", "template": "t", "principal": "p", "machine": null,
            "session_id": null, "checkpoint": "explicit", "ticket_id": null,
            "thread_id": null, "summary": null, "message_count": 1, "token_count": 1,
            "created_at": "2026-11-22T10:00:00Z", "tags": {}, "depth": 0,
            "lineage": "ctx-0123456789abcdef0123456789abcdef", "parent_lineage": null
        }))
        .unwrap();
        let now: DateTime<Utc> = "2026-11-22T12:00:00Z".parse().unwrap();
        assert_eq!(summary_line(&c, now), "(no summary)");
        c.tags
            .insert(TAG_SUMMARY_ERROR.into(), "429 from the model".into());
        assert_eq!(summary_line(&c, now), "(failed)");
        c.tags
            .insert(TAG_SUMMARIZING.into(), "2026-11-22T12:10:00.000000Z".into());
        assert_eq!(summary_line(&c, now), "(summarizing…)");
        // A claim that ran out (its summarizer crashed) no longer shows.
        let later: DateTime<Utc> = "2026-11-22T12:11:00Z".parse().unwrap();
        assert_eq!(summary_line(&c, later), "(failed)");
        c.summary = Some("Fixed the parser.\nDetails.".into());
        assert_eq!(summary_line(&c, now), "Fixed the parser.");
    }
}
