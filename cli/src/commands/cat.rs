//! `ctx cat`: an artifact's bytes, to stdout.

use ctx_core::{ArtifactRef, Error, Result};

use crate::Remote;

/// Runs `ctx cat ART`: downloads the artifact and writes its bytes to
/// stdout as they are.
///
/// # Errors
/// `Invalid` for a malformed artifact ref (field `art`); `NotFound`; the
/// server's errors; `Unavailable` when stdout cannot be written.
pub(crate) async fn run(art: &str, remote: &Remote) -> Result<()> {
    let art: ArtifactRef = art.parse().map_err(|e: Error| e.with_field("art"))?;
    let bytes = remote.client()?.download_artifact(&art).await?;
    crate::out::write(&bytes)
}
