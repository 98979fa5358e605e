//! The read side: listing with filters and keyset pagination, one drift, statistics, scans.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use drift_core::sink::{DriftFilter, DriftPage, DriftStats, DriftStore, PageRequest, ScanRecord, StoredDrift};
use drift_core::{Error, Result};
use serde::de::DeserializeOwned;
use serde_json::Value;
use sqlx::sqlite::SqliteRow;
use sqlx::{QueryBuilder, Row, Sqlite};

use crate::error::{SqlContext, SqliteError};
use crate::{SqliteSink, micros};

/// The columns of a [`StoredDrift`].
const COLUMNS: &str = "id, fingerprint, detected_at, last_seen, occurrences, cluster, repository, api_group, \
     resource_kind, namespace, resource_name, path, drift_type, severity, git_value, cluster_value, status, \
     resolved_at, resolution, changed_by, changed_at, classification, decision_source, recommended_action";

/// Appends ` WHERE ...` for a filter; every value is a bind parameter.
pub(crate) fn push_filter(q: &mut QueryBuilder<Sqlite>, filter: &DriftFilter) {
    push_dimensions(q, filter);
    if let Some(t) = filter.since {
        q.push(" AND last_seen >= ").push_bind(micros(t));
    }
}

/// Appends ` WHERE ...` for every field of a filter but `since`: the dimensions the rollups
/// (`drift_counts`, `drift_daily`) are keyed by, under the same column names as in `drifts`.
pub(crate) fn push_dimensions(q: &mut QueryBuilder<Sqlite>, filter: &DriftFilter) {
    q.push(" WHERE 1");
    if let Some(s) = filter.status {
        q.push(" AND status = ").push_bind(s.as_str());
    }
    if let Some(s) = filter.severity {
        q.push(" AND severity = ").push_bind(s.as_str());
    }
    if let Some(t) = filter.drift_type {
        q.push(" AND drift_type = ").push_bind(t.as_str());
    }
    if let Some(n) = &filter.namespace {
        q.push(" AND namespace = ").push_bind(n.clone());
    }
    if let Some(r) = &filter.repository {
        q.push(" AND repository = ").push_bind(r.clone());
    }
    if let Some(c) = &filter.cluster {
        q.push(" AND cluster = ").push_bind(c.clone());
    }
    if let Some(k) = &filter.kind {
        q.push(" AND resource_kind = ").push_bind(k.clone());
    }
}

pub(crate) fn corrupt(id: i64, column: &str, message: impl std::fmt::Display) -> SqliteError {
    SqliteError::Corrupt { id, message: format!("column {column}: {message}") }
}

fn parse<T: DeserializeOwned>(id: i64, column: &str, value: String) -> Result<T, SqliteError> {
    serde_json::from_value(Value::String(value)).map_err(|e| corrupt(id, column, e))
}

fn time(id: i64, column: &str, v: i64) -> Result<DateTime<Utc>, SqliteError> {
    DateTime::from_timestamp_micros(v).ok_or_else(|| corrupt(id, column, format!("{v} is out of range")))
}

fn decode(row: &SqliteRow) -> Result<StoredDrift, SqliteError> {
    let get = |e| SqliteError::Sql { context: "reading a drift row", source: e };
    let id: i64 = row.try_get("id").map_err(get)?;
    let at =
        |column: &str| -> Result<DateTime<Utc>, SqliteError> { time(id, column, row.try_get(column).map_err(get)?) };
    let opt_at = |column: &str| -> Result<Option<DateTime<Utc>>, SqliteError> {
        row.try_get::<Option<i64>, _>(column).map_err(get)?.map(|v| time(id, column, v)).transpose()
    };
    let json = |column: &str| -> Result<Option<Value>, SqliteError> {
        row.try_get::<Option<String>, _>(column)
            .map_err(get)?
            .map(|s| serde_json::from_str(&s).map_err(|e| corrupt(id, column, e)))
            .transpose()
    };
    Ok(StoredDrift {
        id,
        fingerprint: row.try_get("fingerprint").map_err(get)?,
        detected_at: at("detected_at")?,
        last_seen: at("last_seen")?,
        occurrences: row.try_get("occurrences").map_err(get)?,
        cluster: row.try_get("cluster").map_err(get)?,
        repository: row.try_get("repository").map_err(get)?,
        api_group: row.try_get("api_group").map_err(get)?,
        resource_kind: row.try_get("resource_kind").map_err(get)?,
        namespace: row.try_get("namespace").map_err(get)?,
        resource_name: row.try_get("resource_name").map_err(get)?,
        path: row.try_get("path").map_err(get)?,
        drift_type: parse(id, "drift_type", row.try_get("drift_type").map_err(get)?)?,
        severity: parse(id, "severity", row.try_get("severity").map_err(get)?)?,
        git_value: json("git_value")?,
        cluster_value: json("cluster_value")?,
        status: parse(id, "status", row.try_get("status").map_err(get)?)?,
        resolved_at: opt_at("resolved_at")?,
        resolution: row
            .try_get::<Option<String>, _>("resolution")
            .map_err(get)?
            .map(|r| parse(id, "resolution", r))
            .transpose()?,
        changed_by: row.try_get("changed_by").map_err(get)?,
        changed_at: opt_at("changed_at")?,
        classification: parse(id, "classification", row.try_get("classification").map_err(get)?)?,
        decision_source: parse(id, "decision_source", row.try_get("decision_source").map_err(get)?)?,
        recommended_action: parse(id, "recommended_action", row.try_get("recommended_action").map_err(get)?)?,
    })
}

#[async_trait]
impl DriftStore for SqliteSink {
    async fn list(&self, filter: &DriftFilter, page: PageRequest) -> Result<DriftPage> {
        page.validate()?;
        let mut q = QueryBuilder::<Sqlite>::new("SELECT ");
        q.push(COLUMNS).push(" FROM drifts");
        push_filter(&mut q, filter);
        if let Some(after) = page.after {
            q.push(" AND id < ").push_bind(after);
        }
        q.push(" ORDER BY id DESC LIMIT ").push_bind(page.fetch_limit() as i64);
        let rows = q.build().fetch_all(&self.reader).await.ctx("listing drifts")?;
        let items = rows.iter().map(decode).collect::<Result<Vec<_>, _>>()?;
        Ok(DriftPage::from_rows(items, page))
    }

    async fn get(&self, id: i64) -> Result<StoredDrift> {
        let mut q = QueryBuilder::<Sqlite>::new("SELECT ");
        q.push(COLUMNS).push(" FROM drifts WHERE id = ").push_bind(id);
        match q.build().fetch_optional(&self.reader).await.ctx("reading a drift")? {
            Some(row) => Ok(decode(&row)?),
            None => Err(Error::not_found(format!("no drift with id {id}"))),
        }
    }

    async fn stats(&self, filter: &DriftFilter, now: DateTime<Utc>) -> Result<DriftStats> {
        if filter.since.is_some() {
            // `since` is about last_seen, which the rollups do not keep: count the rows.
            return self.stats_from_rows(filter, now).await;
        }
        Ok(self.stats_from_rollups(filter, now).await?)
    }

    async fn recent_scans(&self, limit: u32) -> Result<Vec<ScanRecord>> {
        let rows = sqlx::query(
            "SELECT scan_id, cluster, repository, revision, started_at, finished_at, outcome, drifts, warnings \
             FROM scans ORDER BY started_at DESC, scan_id DESC LIMIT ?",
        )
        .bind(i64::from(limit))
        .fetch_all(&self.reader)
        .await
        .ctx("listing scans")?;
        rows.iter()
            .map(|row| {
                let get = |e| SqliteError::Sql { context: "reading a scan row", source: e };
                Ok(ScanRecord {
                    scan_id: row.try_get("scan_id").map_err(get)?,
                    cluster: row.try_get("cluster").map_err(get)?,
                    repository: row.try_get("repository").map_err(get)?,
                    revision: row.try_get("revision").map_err(get)?,
                    started_at: time(0, "started_at", row.try_get("started_at").map_err(get)?)?,
                    finished_at: time(0, "finished_at", row.try_get("finished_at").map_err(get)?)?,
                    outcome: parse(0, "outcome", row.try_get("outcome").map_err(get)?)?,
                    drifts: row.try_get("drifts").map_err(get)?,
                    warnings: row.try_get("warnings").map_err(get)?,
                })
            })
            .collect::<Result<Vec<_>, SqliteError>>()
            .map_err(Error::from)
    }

    async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.reader).await.ctx("ping")?;
        Ok(())
    }
}
