//! The DynamoDB [`MetaStore`]: commits, timelines, refs and the
//! materialization cache in one table (layout in [`super::table`] and
//! docs/adr/0004). Every access pattern is one request; a checkpoint is one
//! `TransactWriteItems` (commit by id + commit in its run + timeline entry +
//! optional ref move), so no reader sees half of one.

use std::sync::Arc;

use super::DynamoBranchStore;
use crate::clock::{IdSource, OsRandom};
use crate::error::Result;
use crate::id::{CommitId, RefName, TenantId};
use crate::store::Refs;

/// The DynamoDB [`MetaStore`](crate::store::MetaStore) (and [`TokenStore`](crate::store::TokenStore),
/// in `super::tokens`).
#[derive(Clone)]
pub struct DynamoMetaStore {
    pub(super) client: aws_sdk_dynamodb::Client,
    pub(super) table: String,
    /// Randomness: ref-write nonces, retry jitter.
    pub(super) ids: Arc<dyn IdSource>,
}

impl std::fmt::Debug for DynamoMetaStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamoMetaStore")
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

impl DynamoMetaStore {
    /// A store over `table`, its randomness from the OS ([`OsRandom`]).
    pub fn new(client: aws_sdk_dynamodb::Client, table: String) -> Self {
        DynamoMetaStore {
            client,
            table,
            ids: Arc::new(OsRandom),
        }
    }

    /// The same store drawing its randomness (ref-write nonces, retry
    /// jitter) from `ids`; its branch store too.
    #[must_use]
    pub fn with_ids(self, ids: Arc<dyn IdSource>) -> Self {
        DynamoMetaStore { ids, ..self }
    }

    /// The store's source of randomness.
    pub fn ids(&self) -> &Arc<dyn IdSource> {
        &self.ids
    }

    /// The SDK client.
    pub fn client(&self) -> &aws_sdk_dynamodb::Client {
        &self.client
    }

    /// The table.
    pub(super) fn table(&self) -> &str {
        &self.table
    }

    /// The branch store of the same table, on the same client.
    pub fn branch_store(&self) -> DynamoBranchStore {
        DynamoBranchStore::new(self.client.clone(), self.table.clone(), self.ids.clone())
    }

    pub(super) async fn current_ref(
        &self,
        tenant: &TenantId,
        name: &RefName,
    ) -> Result<Option<CommitId>> {
        Ok(self.get_ref(tenant, name).await?.map(|r| r.target))
    }
}
