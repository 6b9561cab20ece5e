//! The summary queue in `ctx.db`: commits lacking a summary are the rows
//! `summary IS NULL` (the partial index `commits_missing_summary` on
//! `(tenant, ts, id)`); their queue state is in the columns `lease`,
//! `tries`, `err` and `retry`, and the tags the queue sets are in the
//! commit's body. Each step is one `BEGIN IMMEDIATE` transaction.

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};

use super::meta::{NO_DELTA, decode_commit, encode_commit};
use super::{SqliteMetaStore, sql};
use crate::clock::micros_to_time;
use crate::commit::Commit;
use crate::error::{Error, Result};
use crate::id::{CommitId, TenantId};
use crate::store::{
    Missing, MissingPage, SummaryCursor, SummaryState, TAG_SUMMARIZING, TAG_SUMMARY_BY,
    TAG_SUMMARY_ERROR, claim_tag,
};

/// A row of the queue: body, lease, tries, err, retry, inline delta and
/// its codec.
type QueueRow = (
    String,
    Option<i64>,
    i64,
    Option<String>,
    Option<i64>,
    Option<Vec<u8>>,
    Option<i64>,
);

impl SqliteMetaStore {
    pub(super) async fn query_missing(
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
                let mut stmt = conn.prepare_cached(
                    "SELECT body, lease, tries, err, retry, bytes, codec
                     FROM commits LEFT JOIN deltas ON deltas.rowid = commits.delta
                     WHERE tenant = ?1 AND summary IS NULL AND (ts, id) > (?2, ?3)
                     ORDER BY ts, id LIMIT ?4",
                )?;
                let rows = stmt.query_map(
                    params![
                        tenant.as_str(),
                        after_ts,
                        after_id,
                        limit.saturating_add(1).min(i64::MAX as usize) as i64
                    ],
                    |r| {
                        Ok((
                            r.get(0)?,
                            r.get(1)?,
                            r.get(2)?,
                            r.get(3)?,
                            r.get(4)?,
                            r.get(5)?,
                            r.get(6)?,
                        ))
                    },
                )?;
                Ok(rows.collect::<Result<_, _>>()?)
            })
            .await?;
        let more = rows.len() > limit;
        let mut items = Vec::with_capacity(rows.len().min(limit));
        for (body, lease, tries, err, retry, bytes, codec) in rows.into_iter().take(limit) {
            items.push(Missing {
                commit: decode_commit(&body, (bytes, codec))?,
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

    pub(super) async fn claim(
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
                let row: Option<(String, Option<i64>, Option<i64>)> = tx
                    .query_row(
                        "SELECT body, lease, retry FROM commits
                         WHERE tenant = ?1 AND id = ?2 AND summary IS NULL",
                        params![tenant.as_str(), id.to_string()],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                    )
                    .optional()
                    .map_err(sql)?;
                let Some((body, lease, retry)) = row else {
                    return Ok(false);
                };
                if lease.is_some_and(|l| l > now)
                    || (respect_backoff && retry.is_some_and(|r| r > now))
                {
                    return Ok(false);
                }
                // Only the body is rewritten: the inline bytes stay as they are.
                let mut c = decode_commit(&body, NO_DELTA)?;
                c.tags.insert(TAG_SUMMARIZING.to_owned(), claim_tag(until));
                tx.execute(
                    "UPDATE commits SET body = ?3, lease = ?4 WHERE tenant = ?1 AND id = ?2",
                    params![
                        tenant.as_str(),
                        id.to_string(),
                        encode_commit(&c)?,
                        until_us
                    ],
                )
                .map_err(sql)?;
                Ok(true)
            })
            .await
    }

    pub(super) async fn write_machine_summary(
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
                c.summary = Some(summary);
                c.tags.insert(TAG_SUMMARY_BY.to_owned(), by);
                c.tags.remove(TAG_SUMMARY_ERROR);
                c.tags.remove(TAG_SUMMARIZING);
                tx.execute(
                    "UPDATE commits SET body = ?3, summary = ?4, lease = NULL, tries = 0,
                     err = NULL, retry = NULL WHERE tenant = ?1 AND id = ?2",
                    params![
                        tenant.as_str(),
                        id.to_string(),
                        encode_commit(&c)?,
                        c.summary
                    ],
                )
                .map_err(sql)?;
                Ok(true)
            })
            .await
    }

    pub(super) async fn record_failure(
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
                c.tags.insert(TAG_SUMMARY_ERROR.to_owned(), error.clone());
                c.tags.remove(TAG_SUMMARIZING);
                tx.execute(
                    "UPDATE commits SET body = ?3, lease = NULL, tries = tries + 1, err = ?4,
                     retry = ?5 WHERE tenant = ?1 AND id = ?2",
                    params![
                        tenant.as_str(),
                        id.to_string(),
                        encode_commit(&c)?,
                        error,
                        retry_at.timestamp_micros()
                    ],
                )
                .map_err(sql)?;
                Ok(())
            })
            .await
    }

    pub(super) async fn tenants_with_work(&self) -> Result<Vec<TenantId>> {
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

/// The commit if it exists and lacks a summary.
fn missing_in(conn: &Connection, tenant: &TenantId, id: &CommitId) -> Result<Option<Commit>> {
    let body: Option<String> = conn
        .query_row(
            "SELECT body FROM commits WHERE tenant = ?1 AND id = ?2 AND summary IS NULL",
            params![tenant.as_str(), id.to_string()],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql)?;
    // Only its body is rewritten by the callers: the inline bytes stay.
    Ok(body.map(|b| decode_commit(&b, NO_DELTA)).transpose()?)
}
