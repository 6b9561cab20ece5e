//! The summary queue in `ctx.db`: commits lacking a summary are the rows
//! `summary IS NULL` (the partial index `commits_missing_summary` on
//! `(tenant, ts, id)`) and not evicted (`evicted_by IS NULL`: their delta
//! is gone, no summarizer can read it; an eviction summarizes the commits
//! it evicts first, so few such rows are left to skip); their queue state is in the columns `lease`,
//! `tries`, `err` and `retry`, and the tags the queue sets are in the
//! commit's body. Each step is one `BEGIN IMMEDIATE` transaction.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};

use super::commits::{CommitRow, Stored, select_commit};
use super::{SqliteMetaStore, sql};
use crate::clock::micros_to_time;
use crate::commit::Commit;
use crate::error::{Error, Result};
use crate::id::{CommitId, TenantId};
use crate::store::{
    Missing, MissingPage, SummaryCursor, SummaryState, TAG_SUMMARIZING, TAG_SUMMARY_BY,
    TAG_SUMMARY_ERROR, claim_tag,
};

/// A row of the queue: the commit, lease, tries, err, retry.
type QueueRow = (CommitRow, Option<i64>, i64, Option<String>, Option<i64>);

/// The commit if it exists and lacks a summary, to have its body
/// rewritten (its inline bytes are not read: they stay as they are).
fn missing_in(conn: &Connection, tenant: &TenantId, id: &CommitId) -> Result<Option<Stored>> {
    let row = conn
        .query_row(
            select_commit!(
                "NULL, NULL FROM commits c WHERE c.tenant = ?1 AND c.id = ?2 AND c.summary IS NULL"
            ),
            params![tenant.as_str(), id.to_string()],
            CommitRow::read,
        )
        .optional()
        .map_err(sql)?;
    Ok(row.map(CommitRow::decode_stored).transpose()?)
}

#[async_trait]
impl crate::store::SummaryQueue for SqliteMetaStore {
    async fn missing_summaries(
        &self,
        tenant: &TenantId,
        after: Option<&SummaryCursor>,
        limit: usize,
    ) -> Result<MissingPage> {
        let tenant = tenant.clone();
        let (after_ts, after_id) =
            after.map_or((i64::MIN, String::new()), |a| (a.micros, a.id.to_string()));
        let rows: Vec<QueueRow> = self
            .db
            .read(move |conn| {
                let mut stmt = conn.prepare_cached(select_commit!(
                    "d.bytes, d.codec, c.lease, c.tries, c.err, c.retry
                     FROM commits c LEFT JOIN deltas d ON d.rowid = c.delta
                     WHERE c.tenant = ?1 AND c.summary IS NULL AND c.evicted_by IS NULL
                       AND (c.ts, c.id) > (?2, ?3)
                     ORDER BY c.ts, c.id LIMIT ?4"
                ))?;
                let rows = stmt.query_map(
                    params![
                        tenant.as_str(),
                        after_ts,
                        after_id,
                        limit.saturating_add(1).min(i64::MAX as usize) as i64
                    ],
                    |r| {
                        Ok((
                            CommitRow::read(r)?,
                            r.get(11)?,
                            r.get(12)?,
                            r.get(13)?,
                            r.get(14)?,
                        ))
                    },
                )?;
                Ok(rows.collect::<Result<_, _>>()?)
            })
            .await?;
        let more = rows.len() > limit;
        let mut items = Vec::with_capacity(rows.len().min(limit));
        for (row, lease, tries, err, retry) in rows.into_iter().take(limit) {
            items.push(Missing {
                commit: row.decode()?,
                state: SummaryState {
                    claimed_until: lease.map(micros_to_time),
                    attempts: u32::try_from(tries).unwrap_or(u32::MAX),
                    last_error: err,
                    retry_at: retry.map(micros_to_time),
                },
            });
        }
        let next = if more {
            items.last().map(|m| SummaryCursor::after(&m.commit))
        } else {
            None
        };
        Ok(MissingPage { items, next })
    }

    async fn claim_summary(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        respect_backoff: bool,
    ) -> Result<bool> {
        let (tenant, id) = (tenant.clone(), commit.id);
        let (now, until_us) = (now.timestamp_micros(), until.timestamp_micros());
        self.db
            .transaction(move |tx| {
                let row: Option<(CommitRow, Option<i64>, Option<i64>)> = tx
                    .query_row(
                        select_commit!(
                            "NULL, NULL, c.lease, c.retry FROM commits c
                             WHERE c.tenant = ?1 AND c.id = ?2 AND c.summary IS NULL
                               AND c.evicted_by IS NULL"
                        ),
                        params![tenant.as_str(), id.to_string()],
                        |r| Ok((CommitRow::read(r)?, r.get(11)?, r.get(12)?)),
                    )
                    .optional()
                    .map_err(sql)?;
                let Some((row, lease, retry)) = row else {
                    return Ok(false);
                };
                if lease.is_some_and(|l| l > now)
                    || (respect_backoff && retry.is_some_and(|r| r > now))
                {
                    return Ok(false);
                }
                // Only the body is rewritten: the inline bytes stay as they are.
                let mut c = row.decode_stored()?;
                c.commit
                    .tags
                    .insert(TAG_SUMMARIZING.to_owned(), claim_tag(until));
                tx.execute(
                    "UPDATE commits SET body = ?3, lease = ?4 WHERE tenant = ?1 AND id = ?2",
                    params![tenant.as_str(), id.to_string(), c.body()?, until_us],
                )
                .map_err(sql)?;
                Ok(true)
            })
            .await
    }

    async fn write_summary(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        summary: &str,
        by: &str,
    ) -> Result<bool> {
        let (tenant, id) = (tenant.clone(), commit.id);
        let (summary, by) = (summary.to_owned(), by.to_owned());
        self.db
            .transaction(move |tx| {
                let Some(mut c) = missing_in(tx, &tenant, &id)? else {
                    return Ok(false);
                };
                c.set_summary(Some(summary));
                let tags = &mut c.commit.tags;
                tags.insert(TAG_SUMMARY_BY.to_owned(), by);
                tags.remove(TAG_SUMMARY_ERROR);
                tags.remove(TAG_SUMMARIZING);
                tx.execute(
                    "UPDATE commits SET body = ?3, summary = ?4, lease = NULL, tries = 0,
                     err = NULL, retry = NULL WHERE tenant = ?1 AND id = ?2",
                    params![tenant.as_str(), id.to_string(), c.body()?, c.commit.summary],
                )
                .map_err(sql)?;
                Ok(true)
            })
            .await
    }

    async fn fail_summary(
        &self,
        tenant: &TenantId,
        commit: &Commit,
        error: &str,
        retry_at: DateTime<Utc>,
    ) -> Result<()> {
        let (tenant, id, error) = (tenant.clone(), commit.id, error.to_owned());
        self.db
            .transaction(move |tx| {
                let Some(mut c) = missing_in(tx, &tenant, &id)? else {
                    return Ok(());
                };
                let tags = &mut c.commit.tags;
                tags.insert(TAG_SUMMARY_ERROR.to_owned(), error.clone());
                tags.remove(TAG_SUMMARIZING);
                tx.execute(
                    "UPDATE commits SET body = ?3, lease = NULL, tries = tries + 1, err = ?4,
                     retry = ?5 WHERE tenant = ?1 AND id = ?2",
                    params![
                        tenant.as_str(),
                        id.to_string(),
                        c.body()?,
                        error,
                        retry_at.timestamp_micros()
                    ],
                )
                .map_err(sql)?;
                Ok(())
            })
            .await
    }

    async fn summary_tenants(&self) -> Result<Vec<TenantId>> {
        let rows: Vec<String> = self
            .db
            .read(|conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT DISTINCT tenant FROM commits WHERE summary IS NULL ORDER BY tenant",
                )?;
                let rows = stmt.query_map([], |r| r.get(0))?;
                Ok(rows.collect::<Result<_, _>>()?)
            })
            .await?;
        rows.into_iter()
            .map(|t| {
                t.parse()
                    .map_err(|_| Error::internal(format!("commits hold a malformed tenant {t:?}")))
            })
            .collect()
    }
}
