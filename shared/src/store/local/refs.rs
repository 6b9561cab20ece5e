//! The SQLite store's refs ([`Refs`](crate::store::Refs)).

use super::{SqliteMetaStore, sql};
use crate::clock::micros_to_time;
use crate::error::{Error, Result};
use crate::id::{CommitId, RefName, TenantId};
use crate::store::{RefRecord, ref_conflict};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};

pub(super) fn current_ref(
    conn: &Connection,
    tenant: &TenantId,
    name: &RefName,
) -> Result<Option<CommitId>> {
    let target: Option<String> = conn
        .query_row(
            "SELECT target FROM refs WHERE tenant = ?1 AND name = ?2",
            params![tenant.as_str(), name.as_str()],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql)?;
    target
        .map(|t| {
            t.parse()
                .map_err(|_| Error::internal(format!("ref {name} holds a malformed target {t:?}")))
        })
        .transpose()
}

pub(super) fn cas_ref_in(
    conn: &Connection,
    tenant: &TenantId,
    name: &RefName,
    expected: Option<&CommitId>,
    target: &CommitId,
    now: DateTime<Utc>,
) -> Result<RefRecord> {
    let current = current_ref(conn, tenant, name)?;
    if current.as_ref() != expected {
        return Err(ref_conflict(name, expected, current.as_ref()));
    }
    conn.execute(
        "INSERT INTO refs (tenant, name, target, updated_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (tenant, name) DO UPDATE SET target = excluded.target, updated_at = excluded.updated_at",
        params![tenant.as_str(), name.as_str(), target.to_string(), now.timestamp_micros()],
    )
    .map_err(sql)?;
    Ok(RefRecord {
        name: name.clone(),
        target: *target,
        updated_at: now,
    })
}

/// A ref, read inside a transaction.
pub(super) fn get_ref_in(
    conn: &Connection,
    tenant: &TenantId,
    name: &RefName,
) -> Result<Option<RefRecord>> {
    let row: Option<(String, i64)> = conn
        .query_row(
            "SELECT target, updated_at FROM refs WHERE tenant = ?1 AND name = ?2",
            params![tenant.as_str(), name.as_str()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(sql)?;
    row.map(|(t, at)| ref_record(name.clone(), &t, at))
        .transpose()
}

pub(super) fn ref_record(name: RefName, target: &str, updated_at: i64) -> Result<RefRecord> {
    Ok(RefRecord {
        target: target.parse().map_err(|_| {
            Error::internal(format!("ref {name} holds a malformed target {target:?}"))
        })?,
        name,
        updated_at: micros_to_time(updated_at),
    })
}

#[async_trait]
impl crate::store::Refs for SqliteMetaStore {
    async fn get_ref(&self, tenant: &TenantId, name: &RefName) -> Result<Option<RefRecord>> {
        let (tenant, name) = (tenant.clone(), name.clone());
        let row: Option<(String, i64)> = self
            .db
            .lookup({
                let name = name.clone();
                move |conn| {
                    Ok(conn
                        .prepare_cached(
                            "SELECT target, updated_at FROM refs WHERE tenant = ?1 AND name = ?2",
                        )?
                        .query_row(params![tenant.as_str(), name.as_str()], |r| {
                            Ok((r.get(0)?, r.get(1)?))
                        })
                        .optional()?)
                }
            })
            .await?;
        row.map(|(t, at)| ref_record(name, &t, at)).transpose()
    }

    async fn cas_ref(
        &self,
        tenant: &TenantId,
        name: &RefName,
        expected: Option<&CommitId>,
        target: &CommitId,
        now: DateTime<Utc>,
    ) -> Result<RefRecord> {
        let (tenant, name, expected, target) =
            (tenant.clone(), name.clone(), expected.copied(), *target);
        self.db
            .transaction(move |tx| {
                Ok(cas_ref_in(
                    tx,
                    &tenant,
                    &name,
                    expected.as_ref(),
                    &target,
                    now,
                )?)
            })
            .await
    }

    async fn delete_ref(
        &self,
        tenant: &TenantId,
        name: &RefName,
        expected: &CommitId,
    ) -> Result<()> {
        let (tenant, name, expected) = (tenant.clone(), name.clone(), *expected);
        self.db
            .transaction(move |tx| {
                let current = current_ref(tx, &tenant, &name)?;
                if current.as_ref() != Some(&expected) {
                    return Err(ref_conflict(&name, Some(&expected), current.as_ref()).into());
                }
                tx.execute(
                    "DELETE FROM refs WHERE tenant = ?1 AND name = ?2",
                    params![tenant.as_str(), name.as_str()],
                )?;
                Ok(())
            })
            .await
    }

    async fn list_refs(
        &self,
        tenant: &TenantId,
        prefix: &str,
        after: Option<&RefName>,
        limit: usize,
    ) -> Result<Vec<RefRecord>> {
        let (tenant, prefix) = (tenant.clone(), prefix.to_owned());
        let after = after.map(|a| a.as_str().to_owned());
        let rows: Vec<(String, String, i64)> = self
            .db
            .read(move |conn| {
                // A case-sensitive prefix match that can still use the key's order.
                let mut stmt = conn.prepare_cached(
                    "SELECT name, target, updated_at FROM refs
                     WHERE tenant = ?1 AND name >= ?2 AND substr(name, 1, length(?2)) = ?2
                       AND (?4 IS NULL OR name > ?4)
                     ORDER BY name LIMIT ?3",
                )?;
                let rows = stmt.query_map(
                    params![
                        tenant.as_str(),
                        prefix,
                        limit.min(i64::MAX as usize) as i64,
                        after
                    ],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )?;
                Ok(rows.collect::<Result<_, _>>()?)
            })
            .await?;
        rows.into_iter()
            .map(|(n, t, at)| {
                let name = n
                    .parse()
                    .map_err(|_| Error::internal(format!("stored ref name {n:?} is malformed")))?;
                ref_record(name, &t, at)
            })
            .collect()
    }
}
