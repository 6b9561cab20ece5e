//! Tokens: the first one made (or reused) at start-up, and `ctx tokens
//! add|list|revoke` on the data directory's token table.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use ctx_core::auth::{new_token, token_hash};
use ctx_core::store::local::SqliteMetaStore;
use ctx_core::store::{TokenRecord, TokenStore};
use ctx_core::{Clock, Error, OsRandom, Result, SystemClock, TenantId};

/// The tenant the first token is made for.
pub const DEFAULT_TENANT: &str = "default";

/// The file holding the first token, under the data directory.
pub fn token_file(data: &Path) -> PathBuf {
    data.join("token")
}

fn open_tokens(data: &Path) -> Result<SqliteMetaStore> {
    SqliteMetaStore::open(data)
}

/// What start-up did about the first token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum FirstToken {
    /// Made a new one (saved in `<data>/token`).
    Created(String),
    /// Registered the one on file again.
    Reused,
}

/// Makes a token for the default tenant when no token exists yet, and
/// writes it to `<data>/token` with mode 0600; a store that starts empty
/// (memory) registers the token on file again instead.
pub(super) async fn ensure_first_token(
    data: &Path,
    tokens: &dyn TokenStore,
    clock: &dyn Clock,
) -> Result<Option<FirstToken>> {
    let file = token_file(data);
    if !tokens.list_tokens().await?.is_empty() {
        return Ok(None);
    }
    // A memory store starts empty every time: reuse the token on file so
    // clients keep working across restarts.
    let (token, reused) = match std::fs::read_to_string(&file) {
        Ok(t) if !t.trim().is_empty() => (t.trim().to_owned(), true),
        _ => (new_token(&OsRandom), false),
    };
    let tenant: TenantId = DEFAULT_TENANT.parse()?;
    tokens
        .add_token(&token_hash(&token), &tenant, clock.now())
        .await?;
    if reused {
        return Ok(Some(FirstToken::Reused));
    }
    write_secret(&file, &token)
        .map_err(|e| Error::unavailable(format!("cannot write {}: {e}", file.display())))?;
    Ok(Some(FirstToken::Created(token)))
}

fn write_secret(path: &Path, secret: &str) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(format!("{secret}\n").as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// `ctx tokens add`: a new token for `tenant`, returned once.
///
/// # Errors
/// When the token table cannot be written.
pub async fn add_token(data: &Path, tenant: &TenantId) -> Result<(String, TokenRecord)> {
    let store = open_tokens(data)?;
    let token = new_token(&OsRandom);
    let rec = store
        .add_token(&token_hash(&token), tenant, SystemClock.now())
        .await?;
    Ok((token, rec))
}

/// `ctx tokens list`.
///
/// # Errors
/// When the token table cannot be read.
pub async fn list_tokens(data: &Path) -> Result<Vec<TokenRecord>> {
    open_tokens(data)?.list_tokens().await
}

/// `ctx tokens revoke`: false when no token had that id.
///
/// # Errors
/// When the token table cannot be written.
pub async fn revoke_token(data: &Path, id: &str) -> Result<bool> {
    open_tokens(data)?.revoke_token(id).await
}
