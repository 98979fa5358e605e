//! The write side: one transaction per scan report, multi-row statements, the rollups kept in
//! the same transaction ([`crate::rollup`]).

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use drift_model::act::EventKind;
use drift_model::sink::DriftStatus;
use drift_model::{Drift, Resolution, Result, ScanReport};
use drift_sql::{
    Before, Change, Resolver, SqlContext, SqlStore, Written, distinct_drifts, resolvable_only, upsert_change,
};
use sqlx::sqlite::SqlitePool;
use sqlx::{QueryBuilder, Sqlite, SqliteConnection, Transaction};

use crate::SqliteStore;
use crate::dialect::micros;
use crate::error::SqliteError;
use crate::rollup::{self, Delta, Dims, Rows};

/// Rows per multi-row statement: 20 parameters each stays under SQLite's 32,766 limit.
const CHUNK: usize = 1000;

#[async_trait]
impl SqlStore for SqliteStore {
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
    async fn write_drifts(&self, conn: &mut SqliteConnection, report: &ScanReport) -> Result<Written, SqliteError> {
        let drifts = distinct_drifts(report);
        let seen: HashSet<String> = drifts.iter().map(|(fp, _)| fp.clone()).collect();
        let mut written = Written::default();
        // The live rows of the scope as they are before the report: the rows it updates (a
        // live row with a drift's fingerprint has the report's cluster and repository) and the
        // candidates for resolution.
        let open = open_rows(conn, report, &seen).await?;
        // Each drift's cluster value as stored, serialised once: bound by the upsert, compared
        // with the stored one.
        let values: HashMap<&str, Option<String>> = drifts
            .iter()
            .map(|(fp, d)| (fp.as_str(), d.cluster_value.as_ref().map(serde_json::Value::to_string)))
            .collect();
        let mut delta = Delta::default();
        follow_upsert(report, &drifts, &open, &values, &mut delta);
        let before: HashMap<&str, &OpenRow> = open.iter().map(|r| (r.1.as_str(), r)).collect();
        let severity_of: HashMap<&str, drift_model::Severity> =
            drifts.iter().map(|(fp, d)| (fp.as_str(), d.severity)).collect();
        let mut inserted = Vec::new();
        for chunk in drifts.chunks(CHUNK) {
            for (id, fingerprint, occurrences, status) in upsert(conn, report, chunk, &values).await? {
                let status: DriftStatus = parse(id, "status", &status)?;
                written.outcome.waived += usize::from(status == DriftStatus::Waived);
                let Some(row) = before.get(fingerprint.as_str()) else {
                    written.outcome.opened += 1;
                    inserted.push((id, fingerprint));
                    continue;
                };
                written.outcome.updated += 1;
                debug_assert!(occurrences > 1);
                let (old_status, old_severity) = (parse(id, "status", &row.10)?, parse(id, "severity", &row.7)?);
                let severity = severity_of.get(fingerprint.as_str()).copied().unwrap_or(drift_model::Severity::Low);
                let changed = values.get(fingerprint.as_str()).is_some_and(|v| *v != row.11);
                if !changed && old_severity == severity && old_status == status {
                    continue; // seen again as it was: no event (the common case, kept cheap)
                }
                let old = Before {
                    status: old_status,
                    severity: old_severity,
                    cluster_value: row
                        .11
                        .as_deref()
                        .map(serde_json::from_str)
                        .transpose()
                        .map_err(|e| SqliteError::corrupt(id, "cluster_value", e))?,
                };
                written.changes.extend(upsert_change(id, Some(old), false, status, changed, severity));
            }
        }
        let reopened = seen_before(conn, inserted.iter().map(|(_, fp)| fp.as_str())).await?;
        for (id, fp) in inserted {
            let kind = if reopened.contains(&fp) { EventKind::Reopened } else { EventKind::Opened };
            written.changes.push(Change::of(id, kind));
        }
        resolve(conn, report, &seen, open, &mut delta, &mut written).await?;
        delta.write(conn).await?;
        Ok(written)
    }

    /// Subtracts (`-1`) or adds (`+1`) the rows' share of the rollups.
    async fn rollup_rows(&self, conn: &mut SqliteConnection, ids: &[i64], sign: i64) -> Result<(), SqliteError> {
        rollup::adjust(conn, sign, Rows::Ids(ids.to_vec())).await
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

/// A live row (open or waived): id, fingerprint, group, kind, namespace, name, type, severity,
/// detected_at, digest of Git's object when last seen, status, cluster value (JSON text).
type OpenRow =
    (i64, String, String, String, String, String, String, String, i64, Option<String>, String, Option<String>);

/// The live rows of the report's cluster and repository that it may update or resolve: all of
/// them (through `drifts_live_scope`), or, when it may resolve the drifts of its own objects
/// only ([`resolvable_only`]: a watch's batch), the live rows of the fingerprints it lists
/// (through `drifts_live_fingerprint`) and of its objects (one probe of `drifts_live_object`
/// per object; `CROSS JOIN` keeps the objects the outer loop), whatever the number of open
/// drifts of the scope.
async fn open_rows(
    conn: &mut SqliteConnection,
    report: &ScanReport,
    seen: &HashSet<String>,
) -> Result<Vec<OpenRow>, SqliteError> {
    let Some(keys) = resolvable_only(report) else {
        return sqlx::query_as(
            "SELECT id, fingerprint, api_group, resource_kind, namespace, resource_name, drift_type, severity, \
             detected_at, desired_digest, status, cluster_value FROM drifts \
             WHERE status <> 'resolved' AND cluster = ? AND repository = ?",
        )
        .bind(&report.cluster)
        .bind(&report.repository)
        .fetch_all(&mut *conn)
        .await
        .ctx("reading open drifts");
    };
    let objects: Vec<[&str; 4]> = keys
        .iter()
        .map(|k| [k.group.as_str(), k.kind.as_str(), k.namespace.as_deref().unwrap_or_default(), k.name.as_str()])
        .collect();
    let fingerprints: Vec<&str> = seen.iter().map(String::as_str).collect();
    sqlx::query_as(
        "SELECT id, fingerprint, api_group, resource_kind, namespace, resource_name, drift_type, severity, \
         detected_at, desired_digest, status, cluster_value FROM drifts \
         WHERE status <> 'resolved' AND cluster = ?1 AND repository = ?2 \
             AND fingerprint IN (SELECT value FROM json_each(?3)) \
         UNION \
         SELECT d.id, d.fingerprint, d.api_group, d.resource_kind, d.namespace, d.resource_name, d.drift_type, \
             d.severity, d.detected_at, d.desired_digest, d.status, d.cluster_value \
         FROM json_each(?4) AS k CROSS JOIN drifts AS d \
         WHERE d.status <> 'resolved' AND d.cluster = ?1 AND d.repository = ?2 \
             AND d.namespace = k.value ->> 2 AND d.resource_name = k.value ->> 3 \
             AND d.resource_kind = k.value ->> 1 AND d.api_group = k.value ->> 0",
    )
    .bind(&report.cluster)
    .bind(&report.repository)
    .bind(sqlx::types::Json(fingerprints))
    .bind(sqlx::types::Json(objects))
    .fetch_all(&mut *conn)
    .await
    .ctx("reading the open drifts of the report's objects")
}

/// Adds to `delta` what upserting `drifts` will change in the rollups: a drift without a live
/// row is a new open row detected now; a live row seen again with another severity, or a
/// waived row whose cluster value changed (open again), moves between keys.
fn follow_upsert(
    report: &ScanReport,
    drifts: &[(String, &Drift)],
    open: &[OpenRow],
    values: &HashMap<&str, Option<String>>,
    delta: &mut Delta,
) {
    let open: HashMap<&str, &OpenRow> = open.iter().map(|r| (r.1.as_str(), r)).collect();
    let now = micros(report.finished_at);
    for (fp, d) in drifts {
        let severity = d.severity.as_str();
        let Some(row) = open.get(fp.as_str()) else {
            delta.row(dims(report, d, severity, "open"), now, None, 1);
            continue;
        };
        let (old_severity, detected, old_status) = (row.7.as_str(), row.8, row.10.as_str());
        let value = values.get(fp.as_str()).and_then(Option::as_deref);
        let status = status_after(old_status, row.11.as_deref(), value);
        if old_severity != severity || old_status != status {
            delta.row(dims(report, d, old_severity, old_status), detected, None, -1);
            delta.row(dims(report, d, severity, status), detected, None, 1);
        }
    }
}

/// The status of a live row after the upsert, as its `CASE` decides: a waived row whose
/// cluster value changed is open again.
fn status_after<'s>(status: &'s str, old_value: Option<&str>, new_value: Option<&str>) -> &'s str {
    if status == "waived" && old_value != new_value { "open" } else { status }
}

/// The fingerprints among these that a resolved row has (drifts seen before).
async fn seen_before<'a>(
    conn: &mut SqliteConnection,
    fingerprints: impl Iterator<Item = &'a str>,
) -> Result<HashSet<String>, SqliteError> {
    let fps: Vec<&str> = fingerprints.collect();
    let mut found = HashSet::new();
    for chunk in fps.chunks(CHUNK * 10) {
        let rows: Vec<String> = sqlx::query_scalar(
            "SELECT DISTINCT fingerprint FROM drifts WHERE status = 'resolved' \
             AND fingerprint IN (SELECT value FROM json_each(?))",
        )
        .bind(sqlx::types::Json(chunk))
        .fetch_all(&mut *conn)
        .await
        .ctx("finding drifts seen before")?;
        found.extend(rows);
    }
    Ok(found)
}

/// A stored enumeration name read back.
fn parse<T: std::str::FromStr>(id: i64, column: &str, value: &str) -> Result<T, SqliteError> {
    value.parse().map_err(|_| SqliteError::corrupt(id, column, format!("unknown value {value:?}")))
}

/// A row the upsert returns: id, fingerprint, occurrences, status.
type Upserted = (i64, String, i64, String);

/// Inserts new drifts and updates live ones, one multi-row statement per chunk (a waived row
/// whose cluster value changed is open again). Rows come back in any order, with their
/// fingerprint.
async fn upsert(
    conn: &mut SqliteConnection,
    report: &ScanReport,
    chunk: &[(String, &Drift)],
    values: &HashMap<&str, Option<String>>,
) -> Result<Vec<Upserted>, SqliteError> {
    let mut q = QueryBuilder::<Sqlite>::new(
        "INSERT INTO drifts (fingerprint, api_group, resource_kind, namespace, resource_name, path, drift_type, \
         severity, git_value, cluster_value, changed_by, changed_at, classification, decision_source, \
         recommended_action, desired_digest, detected_at, last_seen, cluster, repository, revert) ",
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
            .push_bind(values.get(fp.as_str()).cloned().flatten())
            .push_bind(d.changed_by.clone())
            .push_bind(d.changed_at.map(micros))
            .push_bind(d.classification.as_str())
            .push_bind(d.decision_source.as_str())
            .push_bind(d.recommended_action.as_str())
            .push_bind(report.desired_digest(&d.key()).map(str::to_owned))
            .push_bind(at)
            .push_bind(at)
            .push_bind(report.cluster.clone())
            .push_bind(report.repository.clone())
            .push_bind(d.revert.as_ref().and_then(|r| serde_json::to_string(r).ok()));
    });
    q.push(
        " ON CONFLICT (fingerprint) WHERE status <> 'resolved' DO UPDATE SET \
         last_seen = excluded.last_seen, occurrences = drifts.occurrences + 1, git_value = excluded.git_value, \
         cluster_value = excluded.cluster_value, severity = excluded.severity, changed_by = excluded.changed_by, \
         changed_at = excluded.changed_at, classification = excluded.classification, \
         recommended_action = CASE WHEN drifts.decision_source = 'human' THEN drifts.recommended_action \
             ELSE excluded.recommended_action END, \
         desired_digest = excluded.desired_digest, revert = excluded.revert, \
         status = CASE WHEN drifts.status = 'waived' AND drifts.cluster_value IS NOT excluded.cluster_value \
             THEN 'open' ELSE drifts.status END, \
         waived_until = CASE WHEN drifts.status = 'waived' AND drifts.cluster_value IS NOT excluded.cluster_value \
             THEN NULL ELSE drifts.waived_until END, \
         waived_by = CASE WHEN drifts.status = 'waived' AND drifts.cluster_value IS NOT excluded.cluster_value \
             THEN NULL ELSE drifts.waived_by END \
         RETURNING id, fingerprint, occurrences, status",
    );
    q.build_query_as().fetch_all(conn).await.ctx("upserting drifts")
}

/// Resolves the live drifts of the report's cluster and repository (`open`, read before the
/// upsert) that it does not list, where the report may resolve them, and adds the moves to
/// `delta`.
async fn resolve(
    conn: &mut SqliteConnection,
    report: &ScanReport,
    seen: &HashSet<String>,
    open: Vec<OpenRow>,
    delta: &mut Delta,
    written: &mut Written,
) -> Result<(), SqliteError> {
    let Some(mut resolver) = Resolver::of(report) else { return Ok(()) };
    let mut ids: HashMap<Resolution, Vec<i64>> = HashMap::new();
    let now = micros(report.finished_at);
    for (id, fp, group, kind, namespace, name, drift_type, severity, detected, digest, status, _) in open {
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
            delta.row(dims(&status), detected, None, -1);
            delta.row(dims("resolved"), detected, Some(now), 1);
        }
    }
    for (resolution, ids) in ids {
        let resolved: Vec<i64> = sqlx::query_scalar(
            "UPDATE drifts SET status = 'resolved', resolved_at = ?, resolution = ?, waived_until = NULL, waived_by = NULL \
             WHERE status <> 'resolved' AND id IN (SELECT value FROM json_each(?)) RETURNING id",
        )
        .bind(micros(report.finished_at))
        .bind(resolution.as_str())
        .bind(sqlx::types::Json(&ids))
        .fetch_all(&mut *conn)
        .await
        .ctx("resolving drifts")?;
        written.outcome.resolved += resolved.len();
        written.changes.extend(resolved.into_iter().map(|id| Change::of(id, EventKind::Resolved)));
    }
    Ok(())
}
