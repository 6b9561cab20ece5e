//! Agents' live context in the DynamoDB table: the timeline range the
//! rolling window reads (one Query of the principal's timeline partition,
//! then one `BatchGetItem` per 100 commits in the range), the agent record
//! (one item; a patch is one `UpdateItem` that sets only the given
//! attributes) and saves (items in the agent's partition, sort keys by
//! time).

use async_trait::async_trait;
use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use serde::{Deserialize, Serialize};

use super::table::{self, Item, consistent_get, from_item, key, n, s, to_item};
use super::{DynamoMetaStore, conditional, sdk_error};
use crate::agent::{AgentRecord, ProcessRecord, SaveId, SaveRecord, WorkingContextRef};
use crate::clock::micros_to_time;
use crate::error::{Error, Result};
use crate::id::{ArtifactRef, Principal, TenantId};

/// An agent record item.
#[derive(Debug, Serialize, Deserialize)]
struct AgentItem {
    pk: String,
    sk: String,
    /// `window_seconds`.
    #[serde(default)]
    ws: Option<i64>,
    /// `persist_working_context`.
    #[serde(default)]
    pwc: Option<bool>,
    /// `last_clear` in µs.
    #[serde(default)]
    lc: Option<i64>,
    /// The working-context cache pointer.
    #[serde(default)]
    wc: Option<WorkingContextRef>,
    /// The newest joined windows.
    #[serde(default)]
    win: Option<Vec<ArtifactRef>>,
    /// `system_prompt`.
    #[serde(default)]
    sp: Option<String>,
    /// `docs_workspace`.
    #[serde(default)]
    dw: Option<String>,
    /// The registered processes, a map by id (each entry set and removed
    /// on its own, so two writers of different processes both land).
    #[serde(default)]
    pr: Option<BTreeMap<String, ProcessRecord>>,
}

/// A save item.
#[derive(Debug, Serialize, Deserialize)]
struct SaveItem {
    pk: String,
    sk: String,
    s: SaveRecord,
}

impl From<AgentItem> for AgentRecord {
    fn from(i: AgentItem) -> Self {
        AgentRecord {
            window_seconds: i.ws,
            persist_working_context: i.pwc,
            last_clear: i.lc.map(micros_to_time),
            working_context: i.wc,
            windows: i.win,
            system_prompt: i.sp,
            docs_workspace: i.dw,
            processes: i
                .pr
                .map(|m| m.into_iter().map(|(k, v)| (k, Some(v))).collect()),
        }
    }
}

impl DynamoMetaStore {
    /// One `UpdateItem` of an agent's record, answering the item as
    /// stored.
    async fn update_agent_item(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        expr: String,
        values: HashMap<String, AttributeValue>,
        names: Option<HashMap<String, String>>,
    ) -> Result<Item> {
        let out = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(key(table::agent_pk(tenant, agent), table::AGENT_SK)))
            .update_expression(expr)
            .set_expression_attribute_values((!values.is_empty()).then_some(values))
            .set_expression_attribute_names(names)
            .return_values(ReturnValue::AllNew)
            .send()
            .await
            .map_err(|e| sdk_error("DynamoDB UpdateItem", e))?;
        out.attributes
            .ok_or_else(|| Error::internal("UpdateItem returned no attributes"))
    }

    /// Deletes the item at key `k`; true when it existed.
    pub(super) async fn delete_key(&self, k: Item) -> Result<bool> {
        let out = self
            .client()
            .delete_item()
            .table_name(self.table())
            .set_key(Some(k))
            .return_values(ReturnValue::AllOld)
            .send()
            .await
            .map_err(|e| sdk_error("DynamoDB DeleteItem", e))?;
        Ok(out.attributes.is_some_and(|a| !a.is_empty()))
    }
}

#[async_trait]
impl crate::store::Agents for DynamoMetaStore {
    async fn get_agent(&self, tenant: &TenantId, agent: &Principal) -> Result<Option<AgentRecord>> {
        let item = consistent_get(
            self.client(),
            self.table(),
            table::agent_pk(tenant, agent),
            table::AGENT_SK,
        )
        .await?;
        item.map(|i| from_item::<AgentItem>(i).map(AgentRecord::from))
            .transpose()
    }

    async fn update_agent(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        patch: &AgentRecord,
    ) -> Result<AgentRecord> {
        let mut sets = Vec::new();
        let mut values: HashMap<String, AttributeValue> = HashMap::new();
        if let Some(v) = patch.window_seconds {
            sets.push("ws = :ws");
            values.insert(":ws".to_owned(), n(v));
        }
        if let Some(v) = patch.persist_working_context {
            sets.push("pwc = :pwc");
            values.insert(":pwc".to_owned(), AttributeValue::Bool(v));
        }
        if let Some(v) = patch.last_clear {
            sets.push("lc = :lc");
            values.insert(":lc".to_owned(), n(v.timestamp_micros()));
        }
        if let Some(v) = &patch.working_context {
            sets.push("wc = :wc");
            let av = serde_dynamo::to_attribute_value(v)
                .map_err(|e| Error::internal(format!("cannot encode a cache pointer: {e}")))?;
            values.insert(":wc".to_owned(), av);
        }
        if let Some(v) = &patch.windows {
            sets.push("win = :win");
            let av = serde_dynamo::to_attribute_value(v)
                .map_err(|e| Error::internal(format!("cannot encode a window list: {e}")))?;
            values.insert(":win".to_owned(), av);
        }
        if let Some(v) = &patch.system_prompt {
            sets.push("sp = :sp");
            values.insert(":sp".to_owned(), s(v.as_str()));
        }
        if let Some(v) = &patch.docs_workspace {
            sets.push("dw = :dw");
            values.insert(":dw".to_owned(), s(v.as_str()));
        }
        let changes = patch.processes.as_ref().filter(|c| !c.is_empty());
        if changes.is_some() {
            // The map must exist before one of its entries is set or
            // removed; `if_not_exists` keeps one that does.
            sets.push("pr = if_not_exists(pr, :empty)");
            values.insert(":empty".to_owned(), AttributeValue::M(HashMap::new()));
        }
        if sets.is_empty() {
            return Ok(self.get_agent(tenant, agent).await?.unwrap_or_default());
        }
        let mut item = self
            .update_agent_item(
                tenant,
                agent,
                format!("SET {}", sets.join(", ")),
                values,
                None,
            )
            .await?;
        if let Some(changes) = changes {
            let (mut set, mut remove) = (Vec::new(), Vec::new());
            let mut values: HashMap<String, AttributeValue> = HashMap::new();
            let mut names: HashMap<String, String> = HashMap::new();
            for (i, (id, p)) in changes.iter().enumerate() {
                names.insert(format!("#p{i}"), id.clone());
                match p {
                    Some(p) => {
                        set.push(format!("pr.#p{i} = :p{i}"));
                        let av = serde_dynamo::to_attribute_value(p).map_err(|e| {
                            Error::internal(format!("cannot encode a process: {e}"))
                        })?;
                        values.insert(format!(":p{i}"), av);
                    }
                    None => remove.push(format!("pr.#p{i}")),
                }
            }
            let mut expr = String::new();
            if !set.is_empty() {
                expr.push_str(&format!("SET {}", set.join(", ")));
            }
            if !remove.is_empty() {
                expr.push_str(&format!(" REMOVE {}", remove.join(", ")));
            }
            item = self
                .update_agent_item(
                    tenant,
                    agent,
                    expr.trim_start().to_owned(),
                    values,
                    Some(names),
                )
                .await?;
        }
        Ok(from_item::<AgentItem>(item)?.into())
    }

    async fn put_save(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        save: &SaveRecord,
    ) -> Result<()> {
        let item = to_item(&SaveItem {
            pk: table::agent_pk(tenant, agent),
            sk: table::save_sk(&save.save_id),
            s: save.clone(),
        })?;
        // A save already stored under its id is left as it is.
        conditional(
            self.client()
                .put_item()
                .table_name(self.table())
                .set_item(Some(item))
                .condition_expression("attribute_not_exists(pk)")
                .send()
                .await,
            "DynamoDB PutItem",
        )?;
        Ok(())
    }

    async fn list_saves(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        limit: usize,
    ) -> Result<Vec<SaveRecord>> {
        let query = self
            .client()
            .query()
            .table_name(self.table())
            .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
            .expression_attribute_values(":pk", s(table::agent_pk(tenant, agent)))
            .expression_attribute_values(":prefix", s(table::SAVE_SK_PREFIX))
            .scan_index_forward(false)
            .consistent_read(true);
        table::first_items(query, limit)
            .await?
            .into_iter()
            .map(|item| Ok(from_item::<SaveItem>(item)?.s))
            .collect()
    }

    async fn get_save(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        id: &SaveId,
    ) -> Result<Option<SaveRecord>> {
        let item = consistent_get(
            self.client(),
            self.table(),
            table::agent_pk(tenant, agent),
            table::save_sk(id),
        )
        .await?;
        item.map(|i| from_item::<SaveItem>(i).map(|s| s.s))
            .transpose()
    }

    async fn delete_save(&self, tenant: &TenantId, agent: &Principal, id: &SaveId) -> Result<bool> {
        self.delete_key(key(table::agent_pk(tenant, agent), table::save_sk(id)))
            .await
    }

    async fn clear_working_context(
        &self,
        tenant: &TenantId,
        agent: &Principal,
        artifact: &ArtifactRef,
    ) -> Result<bool> {
        let out = self
            .client()
            .update_item()
            .table_name(self.table())
            .set_key(Some(key(table::agent_pk(tenant, agent), table::AGENT_SK)))
            .update_expression("REMOVE wc")
            .condition_expression("wc.artifact_ref = :a")
            .expression_attribute_values(":a", s(artifact.to_string()))
            .send()
            .await;
        Ok(conditional(out, "DynamoDB UpdateItem")?.is_some())
    }

    async fn delete_agent(&self, tenant: &TenantId, agent: &Principal) -> Result<bool> {
        self.delete_key(key(table::agent_pk(tenant, agent), table::AGENT_SK))
            .await
    }
}
