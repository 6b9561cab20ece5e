//! `ctx checkpoint`: a delta from a file or stdin as a new commit, with an
//! optional ref move in the same write.

use std::io::Read;

use base64::Engine as _;
use ctx_core::store::RefRecord;
use ctx_core::{Commit, Error, Result};
use reqwest::Method;
use serde_json::{Value, json};

use super::rev;
use crate::client::encode;
use crate::{CheckpointArgs, print_json};

/// Runs `ctx checkpoint`.
///
/// # Errors
/// `Invalid` for an unreadable file; the server's errors.
pub(crate) async fn run(a: CheckpointArgs) -> Result<()> {
    let c = a.conn.client()?;
    let mut delta = Vec::new();
    if a.file == "-" {
        std::io::stdin()
            .read_to_end(&mut delta)
            .map_err(|e| Error::invalid("file", format!("cannot read stdin: {e}")))?;
    } else {
        delta = std::fs::read(&a.file)
            .map_err(|e| Error::invalid("file", format!("cannot read {}: {e}", a.file)))?;
    }
    let mut parent = match &a.parent {
        Some(p) => Some(rev(&c, p).await?),
        None => None,
    };
    let mut body = json!({
        "commit_type": a.commit_type,
        "format": a.format,
        "template": a.template,
        "principal": a.principal,
        "checkpoint": a.trigger,
        "delta_base64": base64::engine::general_purpose::STANDARD.encode(&delta),
    });
    if let Some(name) = &a.ref_name {
        let expected = if a.new_ref {
            None
        } else if let Some(e) = &a.expected {
            Some(rev(&c, e).await?)
        } else if parent.is_some() {
            parent.clone()
        } else {
            // Continue the ref's tip, or start it with a root commit.
            match c
                .json::<RefRecord>(Method::GET, &format!("/v1/refs/{}", encode(name)), None)
                .await
            {
                Ok((_, r)) => Some(r.target.to_string()),
                Err(e) if e.kind == ctx_core::ErrorKind::NotFound => None,
                Err(e) => return Err(e),
            }
        };
        if parent.is_none() && !a.new_ref {
            parent = expected.clone();
        }
        body["ref"] = json!({ "name": name, "expected": expected });
    }
    let opt = [
        ("parent", parent),
        ("summary", a.summary),
        ("session_id", a.session),
        ("machine", a.machine),
        ("ticket_id", a.ticket),
        ("thread_id", a.thread),
        ("created_at", a.created_at),
    ];
    for (k, v) in opt {
        if let Some(v) = v {
            body[k] = Value::String(v);
        }
    }
    if let Some(n) = a.message_count {
        body["message_count"] = json!(n);
    }
    if let Some(n) = a.token_count {
        body["token_count"] = json!(n);
    }
    if !a.tags.is_empty() {
        body["tags"] = json!(
            a.tags
                .into_iter()
                .collect::<std::collections::BTreeMap<_, _>>()
        );
    }
    let (status, commit): (_, Commit) = c.json(Method::POST, "/v1/commits", Some(&body)).await?;
    if a.conn.json {
        print_json(&commit)
    } else {
        let note = if status == reqwest::StatusCode::CREATED {
            ""
        } else {
            " (already recorded)"
        };
        println!("{}{note}", commit.id);
        Ok(())
    }
}
