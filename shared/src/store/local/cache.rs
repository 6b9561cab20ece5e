//! The SQLite store's the materialization cache ([`MaterializationCache`](crate::store::MaterializationCache)).

use super::{SqliteMetaStore, sql};
use crate::error::{Error, Result};
use crate::id::{ArtifactRef, CommitId, TenantId};
use crate::store::{MaterializeKey, Materialized};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, params};

pub(super) fn parse_cache_key(commit: &str, stop: &str, format: &str) -> Result<MaterializeKey> {
    let bad = || {
        Error::internal(format!(
            "cache entry ({commit}, {stop}, {format}) is malformed"
        ))
    };
    Ok(MaterializeKey {
        commit: commit.parse().map_err(|_| bad())?,
        stop: stop.parse().map_err(|_| bad())?,
        format: format.parse().map_err(|_| bad())?,
    })
}

#[async_trait]
impl crate::store::MaterializationCache for SqliteMetaStore {
    async fn get_materialized(
        &self,
        tenant: &TenantId,
        key: &MaterializeKey,
    ) -> Result<Option<Materialized>> {
        let (tenant, key) = (tenant.clone(), key.clone());
        self.db
            .read(move |conn| {
                let body: Option<String> = conn
                    .prepare_cached(
                        "SELECT body FROM materialized
                     WHERE tenant = ?1 AND commit_id = ?2 AND stop = ?3 AND format = ?4",
                    )?
                    .query_row(
                        params![
                            tenant.as_str(),
                            key.commit.to_string(),
                            key.stop.to_string(),
                            key.format.as_str()
                        ],
                        |r| r.get(0),
                    )
                    .optional()?;
                Ok(body.map(|b| serde_json::from_str(&b)).transpose()?)
            })
            .await
    }

    async fn put_materialized(
        &self,
        tenant: &TenantId,
        key: &MaterializeKey,
        value: &Materialized,
    ) -> Result<()> {
        let (tenant, key) = (tenant.clone(), key.clone());
        let body = serde_json::to_string(value)
            .map_err(|e| Error::internal(format!("cannot encode cache entry: {e}")))?;
        let (size, artifact) = (value.size, value.artifact_ref.to_string());
        // A cache row need not be durable (nor is its cached file).
        self.db
            .transaction_relaxed(move |conn| {
                // A new entry counts as the most recently used one; none
                // is written for a commit that is gone.
                let written = conn
                    .execute(
                        "INSERT OR REPLACE INTO materialized
                            (tenant, commit_id, stop, format, body, size, artifact, accessed)
                         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7,
                            (SELECT COALESCE(MAX(accessed), 0) FROM materialized)
                         WHERE EXISTS (SELECT 1 FROM commits WHERE tenant = ?1 AND id = ?2)",
                        params![
                            tenant.as_str(),
                            key.commit.to_string(),
                            key.stop.to_string(),
                            key.format.as_str(),
                            body,
                            i64::try_from(size).unwrap_or(i64::MAX),
                            artifact,
                        ],
                    )
                    .map_err(sql)?;
                if written == 0 {
                    return Err(crate::store::gone_commit(&key.commit).into());
                }
                Ok(())
            })
            .await
    }

    async fn materialized_of(
        &self,
        tenant: &TenantId,
        commit: &CommitId,
    ) -> Result<Vec<(MaterializeKey, Materialized)>> {
        let (tenant, commit) = (tenant.clone(), *commit);
        let rows: Vec<(String, String, String)> = self
            .db
            .read(move |conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT stop, format, body FROM materialized
                     WHERE tenant = ?1 AND commit_id = ?2",
                )?;
                let rows = stmt.query_map(params![tenant.as_str(), commit.to_string()], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })?;
                Ok(rows.collect::<Result<_, _>>()?)
            })
            .await?;
        rows.into_iter()
            .map(|(stop, format, body)| {
                let key = parse_cache_key(&commit.to_string(), &stop, &format)?;
                let value: Materialized = serde_json::from_str(&body).map_err(|e| {
                    Error::internal(format!("cache entry of {commit} is malformed: {e}"))
                })?;
                Ok((key, value))
            })
            .collect()
    }

    async fn delete_materialized(&self, tenant: &TenantId, key: &MaterializeKey) -> Result<bool> {
        let (tenant, key) = (tenant.clone(), key.clone());
        self.db
            .transaction(move |conn| {
                Ok(conn.execute(
                    "DELETE FROM materialized
                     WHERE tenant = ?1 AND commit_id = ?2 AND stop = ?3 AND format = ?4",
                    params![
                        tenant.as_str(),
                        key.commit.to_string(),
                        key.stop.to_string(),
                        key.format.as_str()
                    ],
                )? > 0)
            })
            .await
    }

    async fn touch_materialized(
        &self,
        tenant: &TenantId,
        key: &MaterializeKey,
        at: DateTime<Utc>,
    ) -> Result<()> {
        let (tenant, key) = (tenant.clone(), key.clone());
        // A cache-use stamp need not be durable.
        self.db
            .transaction_relaxed(move |conn| {
                conn.prepare_cached(
                    "UPDATE materialized SET accessed = ?5
                     WHERE tenant = ?1 AND commit_id = ?2 AND stop = ?3 AND format = ?4
                       AND accessed < ?5",
                )?
                .execute(params![
                    tenant.as_str(),
                    key.commit.to_string(),
                    key.stop.to_string(),
                    key.format.as_str(),
                    at.timestamp_micros()
                ])?;
                Ok(())
            })
            .await
    }

    async fn evict_materialized(
        &self,
        budget: u64,
        keep: (&TenantId, &MaterializeKey),
    ) -> Result<Vec<(TenantId, ArtifactRef)>> {
        let budget = i64::try_from(budget).unwrap_or(i64::MAX);
        let keep = (
            keep.0.to_string(),
            keep.1.commit.to_string(),
            keep.1.stop.to_string(),
            keep.1.format.as_str().to_owned(),
        );
        // Removing cache rows need not be durable: a row back after a
        // power loss names a removed file, which is a miss.
        self.db
            .transaction_relaxed(move |tx| {
                let mut total: i64 =
                    tx.query_row("SELECT COALESCE(SUM(size), 0) FROM materialized", [], |r| {
                        r.get(0)
                    })?;
                if total <= budget {
                    return Ok(Vec::new());
                }
                let mut victims: Vec<(String, String, String, String, String)> = Vec::new();
                {
                    let mut stmt = tx.prepare(
                        "SELECT tenant, commit_id, stop, format, artifact, size FROM materialized
                         ORDER BY accessed, tenant, commit_id, stop, format",
                    )?;
                    let mut rows = stmt.query([])?;
                    while total > budget {
                        let Some(r) = rows.next()? else { break };
                        let row: (String, String, String, String, String) =
                            (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?);
                        if (&row.0, &row.1, &row.2, &row.3) == (&keep.0, &keep.1, &keep.2, &keep.3) {
                            continue;
                        }
                        total -= r.get::<_, i64>(5)?;
                        victims.push(row);
                    }
                }
                let mut orphans = Vec::new();
                for (tenant, commit, stop, format, artifact) in victims {
                    tx.execute(
                        "DELETE FROM materialized
                         WHERE tenant = ?1 AND commit_id = ?2 AND stop = ?3 AND format = ?4",
                        params![tenant, commit, stop, format],
                    )?;
                    orphans.push((tenant, artifact));
                }
                orphans.sort();
                orphans.dedup();
                let mut out = Vec::new();
                for (tenant, artifact) in orphans {
                    let named: bool = tx.query_row(
                        "SELECT EXISTS (SELECT 1 FROM materialized WHERE tenant = ?1 AND artifact = ?2)",
                        params![tenant, artifact],
                        |r| r.get(0),
                    )?;
                    if !named {
                        let bad = || Error::internal(format!("stored cache entry {tenant}/{artifact} is malformed"));
                        out.push((
                            tenant.parse().map_err(|_| bad())?,
                            artifact.parse().map_err(|_| bad())?,
                        ));
                    }
                }
                Ok(out)
            })
            .await
    }
}
