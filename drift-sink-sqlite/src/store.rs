//! The read side: listing with filters and keyset pagination, one drift, statistics, scans.

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Duration, NaiveDate, Utc};
use drift_core::sink::{
    DriftFilter, DriftPage, DriftStats, DriftStore, PageRequest, ScanRecord, StoredDrift, TrendDay,
};
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
     resolved_at, changed_by, changed_at, classification, decision_source, recommended_action";

/// Time to resolve in whole milliseconds, truncated (as the reference store computes it).
const TTR_MS: &str = "((resolved_at - detected_at) / 1000)";

/// Appends ` WHERE ...` for a filter; every value is a bind parameter.
fn push_filter(q: &mut QueryBuilder<Sqlite>, filter: &DriftFilter) {
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
    if let Some(t) = filter.since {
        q.push(" AND last_seen >= ").push_bind(micros(t));
    }
}

fn corrupt(id: i64, column: &str, message: impl std::fmt::Display) -> SqliteError {
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
        if page.limit == 0 || page.limit > 1000 {
            return Err(Error::invalid_input("limit must be between 1 and 1000"));
        }
        let mut q = QueryBuilder::<Sqlite>::new("SELECT ");
        q.push(COLUMNS).push(" FROM drifts");
        push_filter(&mut q, filter);
        if let Some(after) = page.after {
            q.push(" AND id < ").push_bind(after);
        }
        q.push(" ORDER BY id DESC LIMIT ").push_bind(i64::from(page.limit) + 1);
        let rows = q.build().fetch_all(&self.reader).await.ctx("listing drifts")?;
        let mut items = rows.iter().map(decode).collect::<Result<Vec<_>, _>>()?;
        let more = items.len() > page.limit as usize;
        items.truncate(page.limit as usize);
        let next = if more { items.last().map(|r| r.id) } else { None };
        Ok(DriftPage { items, next })
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
        let mut stats = DriftStats::default();
        // One read transaction, so every figure comes from the same snapshot.
        let mut conn = self.reader.begin().await.ctx("starting a read")?;

        let mut q = QueryBuilder::<Sqlite>::new("SELECT status, count(*) FROM drifts");
        push_filter(&mut q, filter);
        q.push(" GROUP BY status");
        let rows: Vec<(String, i64)> = q.build_query_as().fetch_all(&mut *conn).await.ctx("counting by status")?;
        stats.by_status = rows.into_iter().collect();

        // Open rows by severity, type, namespace and repository.
        let mut q = QueryBuilder::<Sqlite>::new("");
        for (i, (tag, column)) in
            [(0, "severity"), (1, "drift_type"), (2, "namespace"), (3, "repository")].into_iter().enumerate()
        {
            if i > 0 {
                q.push(" UNION ALL ");
            }
            q.push(format!("SELECT {tag}, {column}, count(*) FROM drifts"));
            push_filter(&mut q, filter);
            q.push(format!(" AND status = 'open' GROUP BY {column}"));
        }
        let rows: Vec<(i64, String, i64)> =
            q.build_query_as().fetch_all(&mut *conn).await.ctx("counting open drifts")?;
        for (tag, value, n) in rows {
            let target = match tag {
                0 => &mut stats.by_severity,
                1 => &mut stats.by_type,
                2 => &mut stats.by_namespace,
                _ => &mut stats.by_repository,
            };
            target.insert(value, n);
        }

        // The 7-day trend ending on now's UTC day.
        let first = now.date_naive() - Duration::days(6);
        let start = first.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc();
        let (start, end) = (micros(start), micros(start + Duration::days(7)));
        let mut trend: BTreeMap<NaiveDate, (i64, i64)> = (0..7).map(|i| (first + Duration::days(i), (0, 0))).collect();
        for (column, new) in [("detected_at", true), ("resolved_at", false)] {
            let mut q = QueryBuilder::<Sqlite>::new(format!(
                "SELECT date({column} / 1000000, 'unixepoch') AS day, count(*) FROM drifts"
            ));
            push_filter(&mut q, filter);
            q.push(format!(" AND {column} >= ")).push_bind(start);
            q.push(format!(" AND {column} < ")).push_bind(end);
            q.push(" GROUP BY day");
            let rows: Vec<(String, i64)> = q.build_query_as().fetch_all(&mut *conn).await.ctx("trend")?;
            for (day, n) in rows {
                let day = NaiveDate::parse_from_str(&day, "%Y-%m-%d").map_err(|e| corrupt(0, column, e))?;
                if let Some(e) = trend.get_mut(&day) {
                    if new { e.0 += n } else { e.1 += n }
                }
            }
        }
        stats.trend = trend.into_iter().map(|(day, (new, resolved))| TrendDay { day, new, resolved }).collect();

        // Mean and 95th percentile (continuous) of the time to resolve.
        let mut q = QueryBuilder::<Sqlite>::new(format!("SELECT count(*), COALESCE(sum({TTR_MS}), 0) FROM drifts"));
        push_filter(&mut q, filter);
        q.push(" AND resolved_at IS NOT NULL");
        let (n, sum_ms): (i64, i64) = q.build_query_as().fetch_one(&mut *conn).await.ctx("time to resolve")?;
        if n > 0 {
            stats.mean_time_to_resolve_seconds = Some(sum_ms as f64 / 1000.0 / n as f64);
            let rank = 0.95 * (n - 1) as f64;
            let (lo, hi) = (rank.floor() as i64, rank.ceil() as i64);
            let mut q = QueryBuilder::<Sqlite>::new(format!("SELECT {TTR_MS} AS ms FROM drifts"));
            push_filter(&mut q, filter);
            q.push(" AND resolved_at IS NOT NULL ORDER BY ms DESC LIMIT ").push_bind(hi - lo + 1);
            q.push(" OFFSET ").push_bind(n - 1 - hi);
            let top: Vec<i64> = q.build_query_scalar().fetch_all(&mut *conn).await.ctx("time to resolve")?;
            if let (Some(v_hi), Some(v_lo)) = (top.first(), top.last()) {
                let (v_lo, v_hi) = (*v_lo as f64 / 1000.0, *v_hi as f64 / 1000.0);
                stats.p95_time_to_resolve_seconds = Some(v_lo + (v_hi - v_lo) * (rank - lo as f64));
            }
        }
        conn.rollback().await.ctx("ending a read")?;
        Ok(stats)
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
