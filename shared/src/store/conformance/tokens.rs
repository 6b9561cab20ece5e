//! The behaviours of a [`TokenStore`].

use super::{fresh_tenant, t};
use crate::clock::{IdSource, OsRandom};
use crate::id::Hash;
use crate::store::TokenStore;

/// Runs every behaviour.
pub async fn run_all(tokens: &dyn TokenStore) {
    tokens_add_resolve_list_revoke(tokens).await;
}

/// Tokens: stored by hash, listed without secrets, revocable.
pub async fn tokens_add_resolve_list_revoke(tokens: &dyn TokenStore) {
    let a = fresh_tenant("tok");
    let mut secret = [0u8; 16];
    OsRandom.fill(&mut secret);
    let h = Hash::of(&secret);
    let rec = tokens.add_token(&h, &a, t(0)).await.expect("add");
    assert_eq!(rec.id, crate::store::token_id(&h));
    assert_eq!(
        tokens.tenant_for(&h).await.expect("lookup"),
        Some(a.clone())
    );
    assert!(tokens.list_tokens().await.expect("list").contains(&rec));
    assert!(tokens.revoke_token(&rec.id).await.expect("revoke"));
    assert!(!tokens.revoke_token(&rec.id).await.expect("revoke twice"));
    assert_eq!(tokens.tenant_for(&h).await.expect("lookup"), None);
}
