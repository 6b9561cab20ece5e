//! The DynamoDB store's commits, their runs and the timelines ([`Commits`](crate::store::Commits)).

use super::retry::{Written, transact};
use super::table::{
    self, batch_get, build, commit_deletes, commit_item, commit_items, key, parse_ids, ref_check,
    ref_put, s,
};
use super::{DynamoMetaStore, sdk_error};
use crate::commit::Commit;
use crate::error::{Error, Result};
use crate::id::{CommitId, Principal, SessionId, TenantId};
use crate::store::commits::{batch_move_settled, continuing, timeline_micros};
use crate::store::{BatchCommit, BatchRefMove, Batched, RefRecord, Refs};
use crate::store::{MetadataPatch, PutCommit, RefMove};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use chrono::{DateTime, Utc};

/// What an item of a batch's transaction is, to read a failed condition.
#[derive(Debug, Clone, Copy)]
enum Role {
    /// A commit by id (condition: it does not exist).
    ById,
    /// Commit `k`'s slot in its run (condition: free).
    Slot(usize),
    /// Ref move `i` (condition: where it expects the ref, or still at its
    /// target when settled).
    Ref(usize),
    /// An unconditional item.
    Index,
}

/// One attempt at a batch: its items, what each is, the commits as they
/// would be stored.
struct Plan {
    items: Vec<TransactWriteItem>,
    roles: Vec<Role>,
    stored: Vec<Commit>,
}

/// The answer of a batch that was written: its commits as stored (those
/// that existed as they were), its refs as they are.
fn batched(
    stored: Vec<Commit>,
    existing: &[Option<Commit>],
    moves: &[BatchRefMove],
    settled: &[Option<RefRecord>],
    now: DateTime<Utc>,
) -> Batched {
    Batched {
        commits: stored
            .into_iter()
            .zip(existing)
            .map(|(c, e)| match e {
                Some(e) => PutCommit::Existing(e.clone()),
                None => PutCommit::Created(c),
            })
            .collect(),
        refs: moves
            .iter()
            .zip(settled)
            .map(|(mv, s)| {
                s.clone().unwrap_or_else(|| RefRecord {
                    name: mv.name.clone(),
                    target: mv.target,
                    updated_at: now,
                })
            })
            .collect(),
    }
}

impl DynamoMetaStore {
    /// The transaction of a batch, given what earlier attempts learned:
    /// the commits that exist, those whose run slot is taken, the refs
    /// that already point at their target.
    #[allow(clippy::too_many_arguments)]
    fn batch_plan(
        &self,
        tenant: &TenantId,
        commits: &[BatchCommit],
        moves: &[BatchRefMove],
        now: DateTime<Utc>,
        existing: &[Option<Commit>],
        own_run: &std::collections::HashSet<usize>,
        settled: &[Option<RefRecord>],
    ) -> Result<Plan> {
        let mut items = Vec::new();
        let mut roles = Vec::new();
        let mut stored: Vec<Commit> = Vec::with_capacity(commits.len());
        let mut slots = std::collections::HashSet::new();
        let mut registry = None;
        let mut index = Vec::new();
        // Per session, the newest new commit's last-activity item.
        let mut lasts: std::collections::HashMap<String, (DateTime<Utc>, TransactWriteItem)> =
            std::collections::HashMap::new();
        for (k, c) in commits.iter().enumerate() {
            if let Some(e) = &existing[k] {
                stored.push(e.clone());
                continue;
            }
            let mut commit = match c.parent_in_batch {
                Some(j) => continuing(c.commit.clone(), &stored[j]),
                None => c.commit.clone(),
            };
            // A fork inside the batch (an earlier commit took the slot), or
            // of a stored run (a failed condition said so): a run of its own.
            if own_run.contains(&k) || slots.contains(&(commit.lineage, commit.depth)) {
                commit.lineage = commit.id;
            }
            slots.insert((commit.lineage, commit.depth));
            let w = commit_items(&self.table, tenant, &commit)?;
            let [by_id, in_run, timeline] = w.own;
            items.extend([by_id, in_run, timeline]);
            roles.extend([Role::ById, Role::Slot(k), Role::Index]);
            registry = registry.or(w.registry);
            index.extend(w.index);
            if let (Some(session), Some(last)) = (&commit.session_id, w.last) {
                let newer = lasts
                    .get(session.as_str())
                    .is_none_or(|(at, _)| *at <= commit.created_at);
                if newer {
                    lasts.insert(session.to_string(), (commit.created_at, last));
                }
            }
            stored.push(commit);
        }
        for (i, mv) in moves.iter().enumerate() {
            let item = match &settled[i] {
                Some(_) => ref_check(&self.table, tenant, &mv.name, &mv.target)?,
                None => ref_put(
                    &self.table,
                    tenant,
                    &RefMove {
                        name: mv.name.clone(),
                        expected: mv.expected,
                    },
                    &mv.target,
                    now,
                    None,
                )?,
            };
            items.push(item);
            roles.push(Role::Ref(i));
        }
        let unconditional: Vec<_> = registry
            .into_iter()
            .chain(index)
            .chain(lasts.into_values().map(|(_, item)| item))
            .collect();
        roles.extend(unconditional.iter().map(|_| Role::Index));
        items.extend(unconditional);
        Ok(Plan {
            items,
            roles,
            stored,
        })
    }
}

#[async_trait]
impl crate::store::Commits for DynamoMetaStore {
    /// One `TransactWriteItems`: each new commit's items
    /// ([`commit_items`]; the tenant registry and a
    /// session's last-activity item once per batch, DynamoDB refusing two
    /// actions on one item), each ref move's conditional put (or, when the
    /// ref already points at its target, a condition check that it still
    /// does). A failed condition says what to learn before trying again:
    /// which commits exist (one BatchGetItem), a run slot taken (that
    /// commit starts its own run), where a ref points.
    async fn create_batch(
        &self,
        tenant: &TenantId,
        commits: &[BatchCommit],
        moves: &[BatchRefMove],
        now: DateTime<Utc>,
    ) -> Result<Batched> {
        let mut existing: Vec<Option<Commit>> = vec![None; commits.len()];
        let mut own_run = std::collections::HashSet::new();
        let mut settled: Vec<Option<RefRecord>> = vec![None; moves.len()];
        // A move expecting its own target would pass its condition and
        // rewrite the ref (its `updated_at`) instead of leaving it alone:
        // where it stands is read first.
        for (i, mv) in moves.iter().enumerate() {
            if mv.expected == Some(mv.target) {
                let current = self.get_ref(tenant, &mv.name).await?;
                if batch_move_settled(i, mv, current.as_ref().map(|r| &r.target))? {
                    settled[i] = current;
                }
            }
        }
        // Each failed attempt learns one thing at least.
        for _ in 0..commits.len() + moves.len() + 3 {
            let plan =
                self.batch_plan(tenant, commits, moves, now, &existing, &own_run, &settled)?;
            let Plan {
                items,
                roles,
                stored,
            } = plan;
            if items.is_empty() {
                return Ok(batched(stored, &existing, moves, &settled, now));
            }
            let failed = match transact(&self.client, &*self.ids, "writing a batch", items).await? {
                Written::Done => return Ok(batched(stored, &existing, moves, &settled, now)),
                Written::ConditionFailed { index } => {
                    roles.get(index).copied().unwrap_or(Role::Index)
                }
            };
            match failed {
                Role::ById => {
                    let wanted: Vec<_> = commits
                        .iter()
                        .zip(&existing)
                        .filter(|(_, e)| e.is_none())
                        .map(|(c, _)| key(table::commit_pk(tenant, &c.commit.id), table::COMMIT_SK))
                        .collect();
                    for item in batch_get(&self.client, &self.table, wanted).await? {
                        let found = commit_item(item)?.c;
                        if let Some(k) = commits.iter().position(|c| c.commit.id == found.id) {
                            existing[k] = Some(found);
                        }
                    }
                }
                Role::Slot(k) => {
                    if !own_run.insert(k) {
                        return Err(Error::internal("a commit's own run slot was taken"));
                    }
                }
                Role::Ref(i) => {
                    let mv = &moves[i];
                    let current = self.get_ref(tenant, &mv.name).await?;
                    settled[i] =
                        match batch_move_settled(i, mv, current.as_ref().map(|r| &r.target))? {
                            true => current,
                            false => None,
                        };
                }
                Role::Index => {
                    return Err(Error::internal(
                        "an unconditional item of a batch failed its condition",
                    ));
                }
            }
        }
        Err(Error::unavailable(
            "the batch kept meeting concurrent writes; retry",
        ))
    }

    async fn get_commit(&self, tenant: &TenantId, id: &CommitId) -> Result<Option<Commit>> {
        let item = self
            .get_item(table::commit_pk(tenant, id), table::COMMIT_SK.to_owned())
            .await?;
        item.map(|i| commit_item(i).map(|c| c.c)).transpose()
    }

    async fn lineage_run(
        &self,
        tenant: &TenantId,
        lineage: &CommitId,
        max_depth: u64,
        limit: usize,
    ) -> Result<Vec<Commit>> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND sk BETWEEN :lo AND :hi")
            .expression_attribute_values(":pk", s(table::lineage_pk(tenant, lineage)))
            .expression_attribute_values(":lo", s(table::depth_sk(0)))
            .expression_attribute_values(":hi", s(table::depth_sk(max_depth)))
            .scan_index_forward(false)
            .consistent_read(true);
        table::first_items(query, limit)
            .await?
            .into_iter()
            .map(|item| Ok(commit_item(item)?.c))
            .collect()
    }

    async fn resolve(
        &self,
        tenant: &TenantId,
        principal: &Principal,
        at: DateTime<Utc>,
    ) -> Result<Option<CommitId>> {
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND sk <= :hi")
            .expression_attribute_values(":pk", s(table::timeline_pk(tenant, principal)))
            .expression_attribute_values(
                ":hi",
                s(table::timeline_upper_bound(at.timestamp_micros())),
            )
            .scan_index_forward(false)
            .consistent_read(true)
            .limit(1)
            .send()
            .await
            .map_err(|e| sdk_error("DynamoDB Query", e))?;
        let Some(item) = out.items.unwrap_or_default().into_iter().next() else {
            return Ok(None);
        };
        let sk = match item.get("sk") {
            Some(AttributeValue::S(sk)) => sk.clone(),
            _ => return Err(Error::internal("a timeline item has no string sort key")),
        };
        table::parse_timeline_sk(&sk)
            .map(|(_, id)| Some(id))
            .ok_or_else(|| Error::internal(format!("timeline sort key {sk:?} is malformed")))
    }

    async fn update_metadata(
        &self,
        tenant: &TenantId,
        id: &CommitId,
        patch: &MetadataPatch,
    ) -> Result<Option<Commit>> {
        let Some(mut commit) = self.get_commit(tenant, id).await? else {
            return Ok(None);
        };
        if let Some(summary) = &patch.summary {
            commit.summary = summary.clone();
        }
        if let Some(tags) = &patch.tags {
            commit.tags = tags.clone();
        }
        let summary: AttributeValue = serde_dynamo::to_attribute_value(&commit.summary)
            .map_err(|e| Error::internal(format!("cannot encode a summary: {e}")))?;
        let tags: AttributeValue = serde_dynamo::to_attribute_value(&commit.tags)
            .map_err(|e| Error::internal(format!("cannot encode tags: {e}")))?;
        let update = |pk: String, sk: String, by_id: bool| -> Result<TransactWriteItem> {
            let mut expr = "SET #c.#summary = :summary, #c.#tags = :tags".to_owned();
            let mut u = Update::builder()
                .table_name(&self.table)
                .set_key(Some(key(pk, sk)))
                .condition_expression("attribute_exists(pk)")
                .expression_attribute_names("#c", "c")
                .expression_attribute_names("#summary", "summary")
                .expression_attribute_names("#tags", "tags")
                .expression_attribute_values(":summary", summary.clone())
                .expression_attribute_values(":tags", tags.clone());
            if by_id {
                if commit.summary.is_some() {
                    expr.push_str(" REMOVE nosum");
                } else {
                    expr.push_str(", nosum = :tenant");
                    u = u.expression_attribute_values(
                        ":tenant",
                        s(table::summary_queue_key_of(tenant, id)),
                    );
                }
            }
            Ok(TransactWriteItem::builder()
                .update(build(u.update_expression(expr).build())?)
                .build())
        };
        let items = vec![
            update(
                table::commit_pk(tenant, id),
                table::COMMIT_SK.to_owned(),
                true,
            )?,
            update(
                table::lineage_pk(tenant, &commit.lineage),
                table::depth_sk(commit.depth),
                false,
            )?,
        ];
        let what = format!("updating the metadata of commit {id}");
        match transact(&self.client, &*self.ids, &what, items).await? {
            Written::Done => Ok(Some(commit)),
            // Deleted since it was read.
            Written::ConditionFailed { .. } => Ok(None),
        }
    }

    async fn timeline_range(
        &self,
        tenant: &TenantId,
        principal: &Principal,
        after: Option<DateTime<Utc>>,
        until: DateTime<Utc>,
        limit: usize,
        newest_first: bool,
    ) -> Result<Vec<Commit>> {
        let Some(micros) = timeline_micros(after, until, limit) else {
            return Ok(Vec::new());
        };
        let lo = table::timeline_lower_bound(*micros.start());
        let hi = table::timeline_upper_bound(*micros.end());
        // A lazy paginated Query: no page is asked for once `limit` are read.
        let query = self
            .client()
            .query()
            .table_name(self.table())
            .key_condition_expression("pk = :pk AND sk BETWEEN :lo AND :hi")
            .expression_attribute_values(":pk", s(table::timeline_pk(tenant, principal)))
            .expression_attribute_values(":lo", s(lo))
            .expression_attribute_values(":hi", s(hi))
            .scan_index_forward(!newest_first)
            .consistent_read(true);
        let ids = table::first_items(query, limit)
            .await?
            .iter()
            .map(|item| {
                let sk = match item.get("sk") {
                    Some(AttributeValue::S(sk)) => sk,
                    _ => return Err(Error::internal("a timeline item has no string sort key")),
                };
                table::parse_timeline_sk(sk)
                    .map(|(_, id)| id)
                    .ok_or_else(|| {
                        Error::internal(format!("timeline sort key {sk:?} is malformed"))
                    })
            })
            .collect::<Result<Vec<CommitId>>>()?;
        self.commits_by_id(tenant, &ids).await
    }

    async fn session_commits(&self, tenant: &TenantId, session: &SessionId) -> Result<Vec<Commit>> {
        let rows: Vec<_> = self
            .sort_keys(
                table::session_commits_pk(tenant, session.as_str()),
                usize::MAX,
            )
            .await?
            .into_iter()
            // The session's last-write item shares its partition.
            .filter(|(sk, _)| sk != table::SESSION_LAST_SK)
            .collect();
        self.commits_by_id(tenant, &parse_ids(rows)?).await
    }

    async fn child_commits(&self, tenant: &TenantId, parent: &CommitId) -> Result<Vec<Commit>> {
        let rows = self
            .sort_keys(table::children_pk(tenant, parent), usize::MAX)
            .await?;
        self.commits_by_id(tenant, &parse_ids(rows)?).await
    }

    async fn delete_commit(&self, tenant: &TenantId, commit: &Commit) -> Result<bool> {
        // The stored commit says where its items are (its run may differ
        // from the caller's copy after a fork).
        let Some(c) = crate::store::Commits::get_commit(self, tenant, &commit.id).await? else {
            return Ok(false);
        };
        let items = commit_deletes(&self.table, tenant, &c)?;
        let what = format!("deleting commit {}", c.id);
        match transact(&self.client, &*self.ids, &what, items).await? {
            Written::Done => Ok(true),
            Written::ConditionFailed { .. } => Ok(false),
        }
    }
}
