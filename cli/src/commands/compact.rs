//! `ctx compact REV`: re-compaction through the server's summarizer. The
//! context at REV (from its nearest compaction) is summarized into a
//! compaction commit whose parent is REV; `--ref` moves a ref from REV to
//! it by compare-and-swap.

use ctx_core::wire::CompactRequest;
use ctx_core::wire::RefMove;
use ctx_core::{RefName, Result};

use super::rev;
use crate::{Conn, print_json};

/// Runs `ctx compact`.
///
/// # Errors
/// The server's errors: `NotFound`, `Invalid` (an unknown summarizer),
/// `Conflict` (the ref moved), `Unavailable` (the summarizer failed).
pub(crate) async fn run(
    r: &str,
    summarizer: Option<String>,
    ref_name: Option<RefName>,
    conn: &Conn,
) -> Result<()> {
    let c = conn.client()?;
    let id = rev(&c, r).await?;
    let req = CompactRequest {
        summarizer,
        ref_move: ref_name.map(|name| RefMove {
            name,
            expected: Some(id),
        }),
    };
    let done = c.compact(&id, &req).await?;
    if conn.json {
        return print_json(&done);
    }
    let commit = &done.commit;
    outln!(
        "{} compacts {} ({} messages, {} tokens) by {}",
        commit.id,
        id,
        done.replaced_messages,
        done.replaced_tokens,
        commit
            .tags
            .get(ctx_core::service::COMPACTED_BY)
            .map_or("?", String::as_str)
    );
    if let Some(s) = &commit.summary {
        outln!("{s}");
    }
    Ok(())
}
