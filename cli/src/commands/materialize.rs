//! `ctx materialize`: the context at a commit, to stdout or a file.

use std::io::Write;
use std::path::PathBuf;

use ctx_core::wire::MaterializeRequest;
use ctx_core::{Error, Result};

use super::{rev, wire_value};
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

/// Runs `ctx materialize`: the bytes to `output` or stdout (not with
/// `--json`, which prints the response), and a line about them on stderr
/// when they went to a file or were translated.
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
    let id = rev(&c, r).await?;
    let (m, bytes) = c
        .materialize_and_download(&id, &request(stop, format)?)
        .await?;
    match output {
        Some(path) => std::fs::write(path, &bytes)
            .map_err(|e| Error::unavailable(format!("cannot write {}: {e}", path.display())))?,
        None if !conn.json => std::io::stdout()
            .write_all(&bytes)
            .map_err(|e| Error::unavailable(format!("cannot write to stdout: {e}")))?,
        None => {}
    }
    if conn.json {
        print_json(&m)?;
    } else if output.is_some() || m.result.tier != ctx_core::format::translate::Tier::Native {
        eprintln!(
            "{}: {} bytes, {} messages, {} tokens ({}{})",
            m.result.artifact_ref,
            m.result.size,
            m.result.message_count,
            m.result.token_count,
            m.result.tier,
            if m.cached { ", cached" } else { "" }
        );
    }
    Ok(())
}
