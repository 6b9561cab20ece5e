//! `ctx materialize`: the context at a commit, to stdout or a file.

use std::path::PathBuf;

use ctx_core::wire::{MaterializeRequest, MaterializeResponse, ReadRequest};
use ctx_core::{Error, Result};
use serde::Serialize;

use super::{ref_name, wire_value};
use crate::{Conn, print_json};

/// The request for `--stop` and `--format` as given on the command line.
///
/// # Errors
/// `Invalid` naming `stop` or `format`.
pub(crate) fn request(stop: Option<&str>, format: Option<&str>) -> Result<MaterializeRequest> {
    Ok(MaterializeRequest {
        stop: stop.map(|s| wire_value("stop", s)).transpose()?,
        format: format.map(|f| wire_value("format", f)).transpose()?,
    })
}

/// Runs `ctx materialize`: see [`emit`] for where the context and the
/// line about it go.
///
/// # Errors
/// The server's errors; `Unavailable` when the output cannot be written.
pub(crate) async fn run(
    r: &str,
    stop: Option<&str>,
    format: Option<&str>,
    output: Option<&PathBuf>,
    conn: &Conn,
) -> Result<()> {
    let c = conn.client()?;
    let req = request(stop, format)?;
    let read = ReadRequest {
        stop: req.stop,
        format: req.format,
        ..read_target(r)?
    };
    let (got, bytes) = c.read_bytes(&read).await?;
    if got.commit.is_none() && !conn.json {
        eprintln!("{r} has no commit yet: the empty context");
    }
    let m = MaterializeResponse {
        result: got.result,
        cached: got.cached,
    };
    emit(&m, &bytes, output, conn.json)
}

/// The read of REV: a `ctx-…` commit, else a ref's tip (the empty context
/// while the ref has no commit, as the server answers it).
///
/// # Errors
/// `Invalid` naming `name` for a malformed ref name (as the server's).
fn read_target(r: &str) -> Result<ReadRequest> {
    Ok(if r.starts_with("ctx-") {
        ReadRequest {
            commit: Some(Some(r.parse()?)),
            ..ReadRequest::default()
        }
    } else {
        ReadRequest {
            ref_name: Some(ref_name(r)?),
            ..ReadRequest::default()
        }
    })
}

/// What `--json` prints: the materialize response, and the context itself
/// (`content` when it is UTF-8 text, else `content_base64`) unless it was
/// written to `output`, whose path is then given instead.
#[derive(Serialize)]
struct Emitted<'a> {
    #[serde(flatten)]
    response: &'a MaterializeResponse,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content_base64: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<String>,
}

/// The one output rule of `ctx materialize` and `ctx export`. Without
/// `json`: the context to `output` or stdout, and one line about it
/// (artifact, size, counts, tier) on stderr. With `json`: one JSON object on
/// stdout holding both (see [`Emitted`]), the context going to `output`
/// instead when one is given; nothing on stderr.
///
/// # Errors
/// `Unavailable` when the output cannot be written.
pub(crate) fn emit(
    m: &MaterializeResponse,
    bytes: &[u8],
    output: Option<&PathBuf>,
    json: bool,
) -> Result<()> {
    if let Some(path) = output {
        std::fs::write(path, bytes)
            .map_err(|e| Error::unavailable(format!("cannot write {}: {e}", path.display())))?;
    }
    if json {
        let (content, content_base64) = match (output, std::str::from_utf8(bytes)) {
            (Some(_), _) => (None, None),
            (None, Ok(text)) => (Some(text), None),
            (None, Err(_)) => {
                use base64::Engine as _;
                (
                    None,
                    Some(base64::engine::general_purpose::STANDARD.encode(bytes)),
                )
            }
        };
        return print_json(&Emitted {
            response: m,
            content,
            content_base64,
            output: output.map(|p| p.display().to_string()),
        });
    }
    if output.is_none() {
        crate::out::write(bytes)?;
    }
    eprintln!(
        "{}: {} bytes, {} messages, {} tokens ({}{})",
        m.result.artifact_ref,
        m.result.size,
        m.result.message_count,
        m.result.token_count,
        m.result.tier,
        if m.cached { ", cached" } else { "" }
    );
    if let Some(f) = &m.result.fidelity {
        eprintln!(
            "{} messages kept, {} converted, {} dropped{}",
            f.kept,
            f.converted,
            f.dropped,
            if f.note.is_empty() {
                String::new()
            } else {
                format!(": {}", f.note)
            }
        );
        for c in &f.changes {
            eprintln!(
                "  {} message {} ({}): {}",
                c.kind, c.message, c.at, c.reason
            );
        }
        if f.unlisted > 0 {
            eprintln!("  and {} more", f.unlisted);
        }
    }
    Ok(())
}
