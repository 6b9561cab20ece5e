//! `ctx gc`: garbage collection through the server, page by page
//! (`POST /v1/gc`), with a progress indicator of the artifacts looked at.

use ctx_core::wire::{BlobArea, GcReport, GcRequest};
use ctx_core::{Error, Result};
use indicatif::{ProgressBar, ProgressStyle};

use crate::{Conn, print_json};

/// Runs `ctx gc`.
///
/// # Errors
/// The server's errors.
pub(crate) async fn run(dry_run: bool, conn: &Conn) -> Result<()> {
    let c = conn.client()?;
    // Drawn on stderr only when it is a terminal. The total is not known
    // ahead (S3 cannot count a prefix without listing it), so it counts up.
    let bar = ProgressBar::no_length().with_style(
        ProgressStyle::with_template("{spinner} {pos} artifacts looked at {msg}")
            .map_err(|e| Error::internal(format!("progress template: {e}")))?,
    );
    let mut total = GcReport {
        dry_run,
        ..GcReport::default()
    };
    let mut req = GcRequest {
        dry_run,
        ..GcRequest::default()
    };
    loop {
        let page = c.gc(&req).await?;
        bar.inc(page.scanned);
        let next = page.next.clone();
        absorb(&mut total, page);
        bar.set_message(format!("({} to remove)", total.removed.len()));
        match next {
            Some(n) => req.cursor = Some(n),
            None => break,
        }
    }
    bar.finish_and_clear();
    if conn.json {
        return print_json(&total);
    }
    let verb = if dry_run { "would remove" } else { "removed" };
    for r in &total.removed {
        let area = match r.area {
            BlobArea::Durable => "durable",
            BlobArea::Cache => "cache",
            BlobArea::Staged => "staged upload",
        };
        outln!("{verb} {} ({area}, {} bytes)", r.artifact, r.size);
    }
    outln!(
        "{verb} {} artifacts ({} bytes) of {} looked at; kept {} referenced, {} younger than the grace period{}",
        total.removed.len(),
        total.removed_bytes,
        total.scanned,
        total.referenced,
        total.young,
        if total.reclaimed_bytes > 0 {
            format!("; the database gave back {} bytes", total.reclaimed_bytes)
        } else {
            String::new()
        }
    );
    Ok(())
}

/// Adds a later page's counts to `total`.
fn absorb(total: &mut GcReport, page: GcReport) {
    total.scanned += page.scanned;
    total.referenced += page.referenced;
    total.young += page.young;
    total.removed.extend(page.removed);
    total.removed_bytes += page.removed_bytes;
    total.reclaimed_bytes += page.reclaimed_bytes;
    total.next = page.next;
}
