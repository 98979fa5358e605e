//! The write side: one transaction per scan report, multi-row statements, the rollups kept in
//! the same transaction ([`crate::rollup`]).

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use drift_core::sink::RecordOutcome;
use drift_core::{Drift, Resolution, Result, ScanReport};
use drift_sink_sql::{Resolver, SqlContext, SqlStore, distinct_drifts};
use sqlx::sqlite::SqlitePool;
use sqlx::{QueryBuilder, Sqlite, SqliteConnection, Transaction};

use crate::SqliteSink;
use crate::dialect::micros;
use crate::error::SqliteError;
use crate::rollup::{self, Delta, Dims, Rows};

/// Rows per multi-row statement: 20 parameters each stays under SQLite's 32,766 limit.
const CHUNK: usize = 1000;

#[async_trait]
impl SqlStore for SqliteSink {
    const NAME: &'static str = "sqlite";

    fn reader(&self) -> &SqlitePool {
        &self.reader
    }

    fn retention_days(&self) -> Option<u32> {
        self.retention_days
    }

    /// IMMEDIATE: takes the write lock now, so another process cannot make the transaction
    /// fail half-way when it upgrades from reading to writing.
    async fn begin(&self) -> Result<Transaction<'static, Sqlite>, SqliteError> {
        self.writer.begin_with("BEGIN IMMEDIATE").await.ctx("starting the transaction")
    }

    /// Multi-row upserts of 1,000 drifts, then the resolution; the changes to the rollups are
    /// added up on the way and written at the end.
    async fn write_drifts(
        &self,
        conn: &mut SqliteConnection,
        report: &ScanReport,
    ) -> Result<RecordOutcome, SqliteError> {
        let drifts = distinct_drifts(report);
        let seen: HashSet<String> = drifts.iter().map(|(fp, _)| fp.clone()).collect();
        let mut outcome = RecordOutcome::default();
        // The open rows of the scope as they are before the report: the rows it updates (an
        // open row with a drift's fingerprint has the report's cluster and repository) and the
        // candidates for resolution.
        let open = open_rows(conn, report).await?;
        let mut delta = Delta::default();
        follow_upsert(report, &drifts, &open, &mut delta);
        for chunk in drifts.chunks(CHUNK) {
            let occurrences = upsert(conn, report, chunk).await?;
            let opened = occurrences.iter().filter(|o| **o == 1).count();
            outcome.opened += opened;
            outcome.updated += occurrences.len() - opened;
        }
        outcome.resolved = resolve(conn, report, &seen, open, &mut delta).await?;
        delta.write(conn).await?;
        Ok(outcome)
    }

    /// The rows' share of the rollups is subtracted first, then the rows are deleted.
    async fn prune_drifts(&self, conn: &mut SqliteConnection, cutoff: DateTime<Utc>) -> Result<u64, SqliteError> {
        let old: Option<i64> =
            sqlx::query_scalar("SELECT 1 FROM drifts WHERE status = 'resolved' AND resolved_at < ? LIMIT 1")
                .bind(micros(cutoff))
                .fetch_optional(&mut *conn)
                .await
                .ctx("finding old resolved drifts")?;
        if old.is_none() {
            return Ok(0);
        }
        rollup::adjust(&mut *conn, -1, Rows::ResolvedBefore(micros(cutoff))).await?;
        let drifts = sqlx::query("DELETE FROM drifts WHERE status = 'resolved' AND resolved_at < ?")
            .bind(micros(cutoff))
            .execute(&mut *conn)
            .await
            .ctx("deleting old resolved drifts")?
            .rows_affected();
        // Rollup keys of days before the cutoff that no row contributes to any more.
        sqlx::query("DELETE FROM drift_daily WHERE day < ? AND opened = 0 AND resolved = 0")
            .bind(micros(cutoff).div_euclid(rollup::DAY_US))
            .execute(&mut *conn)
            .await
            .ctx("deleting empty rollup days")?;
        Ok(drifts)
    }
}

/// The key of a drift of `report` in the rollups, with this severity and status.
fn dims(report: &ScanReport, d: &Drift, severity: &str, status: &str) -> Dims {
    [
        report.cluster.clone(),
        report.repository.clone(),
        d.resource.namespace.clone().unwrap_or_default(),
        d.resource.kind.clone(),
        d.drift_type.as_str().to_owned(),
        severity.to_owned(),
        status.to_owned(),
    ]
}

/// An open row: id, fingerprint, group, kind, namespace, name, type, severity, detected_at,
/// digest of Git's object when last seen.
type OpenRow = (i64, String, String, String, String, String, String, String, i64, Option<String>);

/// The open rows of the report's cluster and repository (through `drifts_open_scope`).
async fn open_rows(conn: &mut SqliteConnection, report: &ScanReport) -> Result<Vec<OpenRow>, SqliteError> {
    sqlx::query_as(
        "SELECT id, fingerprint, api_group, resource_kind, namespace, resource_name, drift_type, severity, \
         detected_at, desired_digest FROM drifts WHERE status = 'open' AND cluster = ? AND repository = ?",
    )
    .bind(&report.cluster)
    .bind(&report.repository)
    .fetch_all(&mut *conn)
    .await
    .ctx("reading open drifts")
}

/// Adds to `delta` what upserting `drifts` will change in the rollups: a drift without an open
/// row is a new open row detected now; an open row seen again with another severity moves
/// between keys.
fn follow_upsert(report: &ScanReport, drifts: &[(String, &Drift)], open: &[OpenRow], delta: &mut Delta) {
    let open: HashMap<&str, (&str, i64)> = open.iter().map(|r| (r.1.as_str(), (r.7.as_str(), r.8))).collect();
    let now = micros(report.finished_at);
    for (fp, d) in drifts {
        let severity = d.severity.as_str();
        match open.get(fp.as_str()) {
            None => delta.row(dims(report, d, severity, "open"), now, None, 1),
            Some((old, detected)) if *old != severity => {
                delta.row(dims(report, d, old, "open"), *detected, None, -1);
                delta.row(dims(report, d, severity, "open"), *detected, None, 1);
            }
            Some(_) => {}
        }
    }
}

/// Inserts new drifts and updates open ones, one multi-row statement per chunk. `RETURNING
/// occurrences` tells them apart: a new row has 1, an updated row at least 2.
async fn upsert(
    conn: &mut SqliteConnection,
    report: &ScanReport,
    chunk: &[(String, &Drift)],
) -> Result<Vec<i64>, SqliteError> {
    let mut q = QueryBuilder::<Sqlite>::new(
        "INSERT INTO drifts (fingerprint, api_group, resource_kind, namespace, resource_name, path, drift_type, \
         severity, git_value, cluster_value, changed_by, changed_at, classification, decision_source, \
         recommended_action, desired_digest, detected_at, last_seen, cluster, repository) ",
    );
    let at = micros(report.finished_at);
    q.push_values(chunk, |mut row, (fp, d)| {
        row.push_bind(fp.clone())
            .push_bind(d.api_group.clone())
            .push_bind(d.resource.kind.clone())
            .push_bind(d.resource.namespace.clone().unwrap_or_default())
            .push_bind(d.resource.name.clone())
            .push_bind(d.path.clone())
            .push_bind(d.drift_type.as_str())
            .push_bind(d.severity.as_str())
            .push_bind(d.git_value.as_ref().map(serde_json::Value::to_string))
            .push_bind(d.cluster_value.as_ref().map(serde_json::Value::to_string))
            .push_bind(d.changed_by.clone())
            .push_bind(d.changed_at.map(micros))
            .push_bind(d.classification.as_str())
            .push_bind(d.decision_source.as_str())
            .push_bind(d.recommended_action.as_str())
            .push_bind(report.desired_digest(&d.key()).map(str::to_owned))
            .push_bind(at)
            .push_bind(at)
            .push_bind(report.cluster.clone())
            .push_bind(report.repository.clone());
    });
    q.push(
        " ON CONFLICT (fingerprint) WHERE status = 'open' DO UPDATE SET \
         last_seen = excluded.last_seen, occurrences = drifts.occurrences + 1, git_value = excluded.git_value, \
         cluster_value = excluded.cluster_value, severity = excluded.severity, changed_by = excluded.changed_by, \
         changed_at = excluded.changed_at, classification = excluded.classification, \
         recommended_action = excluded.recommended_action, desired_digest = excluded.desired_digest \
         RETURNING occurrences",
    );
    q.build_query_scalar().fetch_all(conn).await.ctx("upserting drifts")
}

/// Resolves the open drifts of the report's cluster and repository (`open`, read before the
/// upsert) that it does not list, where the report may resolve them, and adds the moves to
/// `delta`.
async fn resolve(
    conn: &mut SqliteConnection,
    report: &ScanReport,
    seen: &HashSet<String>,
    open: Vec<OpenRow>,
    delta: &mut Delta,
) -> Result<usize, SqliteError> {
    let Some(mut resolver) = Resolver::of(report) else { return Ok(0) };
    let mut ids: HashMap<Resolution, Vec<i64>> = HashMap::new();
    let now = micros(report.finished_at);
    for (id, fp, group, kind, namespace, name, drift_type, severity, detected, digest) in open {
        if seen.contains(&fp) {
            continue;
        }
        if let Some((key, resolution)) = resolver.resolve(group, kind, namespace, name, digest.as_deref()) {
            ids.entry(resolution).or_default().push(id);
            let dims = |status: &str| -> Dims {
                [
                    report.cluster.clone(),
                    report.repository.clone(),
                    key.namespace.clone().unwrap_or_default(),
                    key.kind.clone(),
                    drift_type.clone(),
                    severity.clone(),
                    status.to_owned(),
                ]
            };
            delta.row(dims("open"), detected, None, -1);
            delta.row(dims("resolved"), detected, Some(now), 1);
        }
    }
    let mut resolved = 0;
    for (resolution, ids) in ids {
        resolved += sqlx::query(
            "UPDATE drifts SET status = 'resolved', resolved_at = ?, resolution = ? \
             WHERE status = 'open' AND id IN (SELECT value FROM json_each(?))",
        )
        .bind(micros(report.finished_at))
        .bind(resolution.as_str())
        .bind(sqlx::types::Json(&ids))
        .execute(&mut *conn)
        .await
        .ctx("resolving drifts")?
        .rows_affected();
    }
    Ok(resolved as usize)
}
