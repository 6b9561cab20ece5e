//! `ctx show`, `ctx log` and `ctx update-metadata`: reading a commit, its
//! history, and changing its summary and tags.

use ctx_core::wire::UpdateMetadataRequest;
use ctx_core::{Commit, Result};

use super::rev;
use crate::{Conn, print_json};

/// Runs `ctx show REV`.
///
/// # Errors
/// The server's errors.
pub(crate) async fn show(r: &str, conn: &Conn) -> Result<()> {
    let c = conn.client()?;
    let commit = c.show(&rev(&c, r).await?).await?;
    if conn.json {
        print_json(&commit)
    } else {
        print_commit(&commit);
        Ok(())
    }
}

/// Runs `ctx log REV -n N`.
///
/// # Errors
/// The server's errors.
pub(crate) async fn log(r: &str, max_count: u64, conn: &Conn) -> Result<()> {
    let c = conn.client()?;
    let n = usize::try_from(max_count).unwrap_or(usize::MAX);
    let h = c
        .history(&rev(&c, r).await?, Some(n))
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
    if conn.json {
        return print_json(&h);
    }
    for commit in &h.commits {
        println!("{}", oneline(commit));
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
        println!("{}", oneline(&commit));
        Ok(())
    }
}

/// A commit in one line: id, type, time, the summary's first line.
fn oneline(c: &Commit) -> String {
    format!(
        "{} {:<10} {} {}",
        c.id,
        c.commit_type.as_str(),
        c.created_at.format("%Y-%m-%dT%H:%M:%SZ"),
        c.summary
            .as_deref()
            .unwrap_or("(no summary)")
            .lines()
            .next()
            .unwrap_or("")
    )
}

fn print_commit(c: &Commit) {
    println!("commit     {}", c.id);
    if let Some(p) = &c.parent {
        println!("parent     {p}");
    }
    println!("type       {}", c.commit_type.as_str());
    println!(
        "artifact   {} ({} bytes, {})",
        c.artifact_ref, c.artifact_size, c.format
    );
    println!("principal  {}", c.principal);
    println!("created    {}", c.created_at.to_rfc3339());
    println!("trigger    {}", c.checkpoint.as_str());
    println!("template   {}", c.template);
    for (k, v) in [
        ("machine", &c.machine),
        ("session", &c.session_id),
        ("ticket", &c.ticket_id),
        ("thread", &c.thread_id),
    ] {
        if let Some(v) = v {
            println!("{k:<10} {v}");
        }
    }
    println!(
        "counts     {} messages, {} tokens",
        c.message_count, c.token_count
    );
    println!("depth      {}", c.depth);
    for (k, v) in &c.tags {
        println!("tag        {k}={v}");
    }
    if let Some(s) = &c.summary {
        println!("\n    {}", s.replace('\n', "\n    "));
    }
}
