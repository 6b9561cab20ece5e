//! Who is calling: every request carries a credential that maps to a
//! tenant. `ctx serve` uses bearer tokens stored by hash in a
//! [`TokenStore`]; other hosts plug in their own [`Authenticator`].

use std::sync::Arc;

use async_trait::async_trait;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;

use crate::clock::IdSource;
use crate::error::{Error, ErrorKind, Result};
use crate::id::{Hash, TenantId};
use crate::store::TokenStore;

/// The authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The tenant every key of the request is scoped by.
    pub tenant: TenantId,
    /// Who within the tenant, when the credential says (a token's public
    /// id, a JWT's `sub`): what strict session validation compares.
    pub principal: Option<String>,
}

impl Caller {
    /// A caller of `tenant` with no known principal.
    pub fn tenant(tenant: TenantId) -> Self {
        Caller {
            tenant,
            principal: None,
        }
    }
}

/// Turns a request's credentials into a [`Caller`].
#[async_trait]
pub trait Authenticator: Send + Sync + 'static {
    /// Authenticates the request.
    ///
    /// # Errors
    /// `Unauthenticated` when the credential is missing or unknown.
    async fn authenticate(&self, parts: &Parts) -> Result<Caller>;
}

/// Bearer tokens looked up by hash in a [`TokenStore`].
#[derive(Clone)]
pub struct TokenAuth {
    tokens: Arc<dyn TokenStore>,
}

impl TokenAuth {
    /// Authenticates against `tokens`.
    pub fn new(tokens: Arc<dyn TokenStore>) -> Self {
        TokenAuth { tokens }
    }
}

fn unauthenticated(message: &str) -> Error {
    Error::new(ErrorKind::Unauthenticated, message).with_field("authorization")
}

/// The token of an `Authorization: Bearer …` header.
///
/// # Errors
/// `Unauthenticated` when the header is missing or not a bearer token.
pub fn bearer(parts: &Parts) -> Result<&str> {
    let value = parts.headers.get(AUTHORIZATION).ok_or_else(|| {
        unauthenticated("missing bearer token: send Authorization: Bearer <token>")
    })?;
    let value = value
        .to_str()
        .map_err(|_| unauthenticated("the Authorization header is not ASCII"))?;
    let (scheme, token) = value
        .split_once(' ')
        .ok_or_else(|| unauthenticated("the Authorization header is not \"Bearer <token>\""))?;
    if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
        return Err(unauthenticated(
            "the Authorization header is not \"Bearer <token>\"",
        ));
    }
    Ok(token.trim())
}

#[async_trait]
impl Authenticator for TokenAuth {
    async fn authenticate(&self, parts: &Parts) -> Result<Caller> {
        let token = bearer(parts)?;
        let hash = token_hash(token);
        let tenant = self
            .tokens
            .tenant_for(&hash)
            .await?
            .ok_or_else(|| unauthenticated("unknown or revoked token"))?;
        Ok(Caller {
            tenant,
            principal: Some(crate::store::token_id(&hash)),
        })
    }
}

/// The stored form of a token.
pub fn token_hash(token: &str) -> Hash {
    Hash::of(token.as_bytes())
}

/// A new secret token: `ctx_` and 64 hex digits (256 random bits).
pub fn new_token(ids: &dyn IdSource) -> String {
    let mut b = [0u8; 32];
    ids.fill(&mut b);
    format!("ctx_{}", hex::encode(b))
}
