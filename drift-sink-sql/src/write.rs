//! The write side both stores share: the scan row, the drifts of a report, which open drifts a
//! report resolves, the retry loop of `record`, and retention's cutoff.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use drift_core::sink::{DriftFilter, DriftStats, RecordOutcome};
use drift_core::{CoverageEntry, Drift, Resolution, ResourceKey, Result, ScanOutcome, ScanReport, SourceWarning};
use serde::{Deserialize, Serialize};
use sqlx::types::Json;
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool, QueryBuilder, Type};
use tracing::Instrument;

use crate::error::{SqlContext, SqlError};
use crate::{Dialect, Sql};

/// How many times a report is written when the write failed in a way worth retrying (a lost
/// connection, a deadlock, a busy database). The write is one transaction and recording is
/// idempotent per scan id, so a retry is always safe.
pub const ATTEMPTS: usize = 3;

/// What a retention pass deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PruneOutcome {
    /// Resolved drifts deleted.
    pub drifts: u64,
    /// Scan rows deleted.
    pub scans: u64,
}

/// What a SQL store provides to the shared code, which implements [`drift_core::DriftSink`] and
/// [`drift_core::DriftStore`] over it ([`impl_drift_store!`](crate::impl_drift_store)).
#[async_trait::async_trait]
pub trait SqlStore: Send + Sync {
    /// The database.
    type Dialect: Dialect;
    /// The sink's name ([`drift_core::DriftSink::name`]).
    const NAME: &'static str;
    /// The pool the reads go through.
    fn reader(&self) -> &Pool<<Self::Dialect as Dialect>::Db>;
    /// Writes a report in one transaction, once: [`record`] retries it.
    async fn record_once(&self, report: &ScanReport) -> Result<RecordOutcome, SqlError<Self::Dialect>>;
    /// Statistics computed from the rollups; the filter has no `since`.
    async fn stats_from_rollups(
        &self,
        filter: &DriftFilter,
        now: DateTime<Utc>,
    ) -> Result<DriftStats, SqlError<Self::Dialect>>;
    /// Statistics computed from the rows themselves, without the rollups: what
    /// [`DriftStore::stats`](drift_core::DriftStore::stats) answers for a filter with `since`.
    /// Exact, like the rollups, but it aggregates every row the filter keeps (seconds at
    /// millions of rows). Public so that the rollups can be checked against it.
    async fn stats_from_rows(&self, filter: &DriftFilter, now: DateTime<Utc>) -> Result<DriftStats>;
}

/// Records a report: [`SqlStore::record_once`], written again up to [`ATTEMPTS`] times while it
/// fails in a way worth retrying.
pub async fn record<S: SqlStore>(store: &S, report: &ScanReport) -> Result<RecordOutcome> {
    let span = tracing::info_span!(
        "record",
        scan_id = %report.scan_id,
        cluster = %report.cluster,
        repository = %report.repository
    );
    async {
        let mut attempt = 1;
        loop {
            match store.record_once(report).await {
                Ok(outcome) => {
                    tracing::debug!(
                        opened = outcome.opened,
                        updated = outcome.updated,
                        resolved = outcome.resolved,
                        replayed = outcome.replayed,
                        "scan report recorded"
                    );
                    return Ok(outcome);
                }
                Err(e) if e.retryable() && attempt < ATTEMPTS => {
                    tracing::warn!(error = %e, attempt, "recording the scan report failed; writing it again");
                    attempt += 1;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    .instrument(span)
    .await
}

/// Statistics: from the rollups, or from the rows when the filter names `since` (the rollups do
/// not keep `last_seen`).
pub async fn stats<S: SqlStore>(store: &S, filter: &DriftFilter, now: DateTime<Utc>) -> Result<DriftStats> {
    if filter.since.is_some() {
        return store.stats_from_rows(filter, now).await;
    }
    Ok(store.stats_from_rollups(filter, now).await?)
}

/// The drifts of a report with their fingerprints, one per fingerprint, in report order: a
/// fingerprint listed twice counts once, the first wins (as in the reference store).
pub fn distinct_drifts(report: &ScanReport) -> Vec<(String, &Drift)> {
    let mut seen = HashSet::new();
    report
        .drifts
        .iter()
        .filter_map(|d| {
            let fp = d.fingerprint(&report.cluster, &report.repository);
            seen.insert(fp.clone()).then_some((fp, d))
        })
        .collect()
}

/// Decides which open drifts of its cluster and repository a report resolves, and how
/// ([`ScanReport::may_resolve`], [`ScanReport::resolution`]), asking once per object.
#[derive(Debug)]
pub struct Resolver<'r> {
    report: &'r ScanReport,
    decided: HashMap<ResourceKey, bool>,
}

impl<'r> Resolver<'r> {
    /// The resolver of a report; `None` when the scan failed as a whole, which resolves nothing.
    pub fn of(report: &'r ScanReport) -> Option<Self> {
        (report.outcome != ScanOutcome::Failed).then(|| Resolver { report, decided: HashMap::new() })
    }

    /// How the report resolves an open drift of the object (`namespace` empty for a
    /// cluster-scoped one) whose last sighting had the desired digest `digest`; `None` when
    /// the drift stays open.
    pub fn resolve(
        &mut self,
        group: String,
        kind: String,
        namespace: String,
        name: String,
        digest: Option<&str>,
    ) -> Option<(ResourceKey, Resolution)> {
        let key = ResourceKey { group, kind, namespace: (!namespace.is_empty()).then_some(namespace), name };
        let report = self.report;
        let may = *self.decided.entry(key.clone()).or_insert_with(|| report.may_resolve(&key));
        may.then(|| {
            let resolution = report.resolution(&key, digest);
            (key, resolution)
        })
    }
}

/// Where retention cuts, relative to `now`: resolved drifts and scans older than that go.
pub fn cutoff(retention_days: Option<u32>, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    retention_days.map(|days| now - chrono::Duration::days(i64::from(days)))
}

impl<D: Dialect> Sql<D>
where
    for<'c> &'c mut <D::Db as Database>::Connection: Executor<'c, Database = D::Db>,
    for<'a> &'a str: ColumnIndex<<D::Db as Database>::Row>,
    String: for<'q> Encode<'q, D::Db> + for<'r> Decode<'r, D::Db> + Type<D::Db>,
    i64: for<'q> Encode<'q, D::Db> + for<'r> Decode<'r, D::Db> + Type<D::Db>,
    Option<String>: for<'q> Encode<'q, D::Db>,
    <D::Db as Database>::Arguments: IntoArguments<D::Db>,
    for<'a> Json<&'a [SourceWarning]>: Encode<'a, D::Db> + Type<D::Db>,
    for<'a> Json<&'a [&'a CoverageEntry]>: Encode<'a, D::Db> + Type<D::Db>,
{
    /// Inserts the scan row of a report; `false` when its scan id is recorded already (a
    /// replay: a concurrent writer of the same scan id waits on the primary key and lands here).
    pub async fn insert_scan(
        conn: &mut <D::Db as Database>::Connection,
        report: &ScanReport,
    ) -> Result<bool, SqlError<D>> {
        let uncovered: Vec<_> = report.coverage.incomplete().collect();
        let mut q = QueryBuilder::<D::Db>::new(
            "INSERT INTO scans (scan_id, cluster, repository, revision, started_at, finished_at, outcome, drifts, \
             warnings, errors, coverage) ",
        );
        q.push_values([()], |mut row, ()| {
            row.push_bind(report.scan_id.clone())
                .push_bind(report.cluster.clone())
                .push_bind(report.repository.clone())
                .push_bind(report.revision.clone())
                .push_bind(D::time(report.started_at))
                .push_bind(D::time(report.finished_at))
                .push_bind(report.outcome.as_str().to_owned())
                .push_bind(report.drifts.len() as i64)
                .push_bind(report.warnings.len() as i64)
                .push_bind(Json(report.warnings.as_slice()))
                .push_bind(Json(uncovered.as_slice()));
        });
        q.push(" ON CONFLICT (scan_id) DO NOTHING");
        let inserted = q.build().execute(&mut *conn).await.ctx("recording the scan")?;
        Ok(D::rows_affected(&inserted) > 0)
    }

    /// Writes what recording the report changed into its scan row.
    pub async fn count_scan(
        conn: &mut <D::Db as Database>::Connection,
        report: &ScanReport,
        outcome: &RecordOutcome,
    ) -> Result<(), SqlError<D>> {
        let mut q = QueryBuilder::<D::Db>::new("UPDATE scans SET opened = ");
        q.push_bind(outcome.opened as i64);
        q.push(", updated = ").push_bind(outcome.updated as i64);
        q.push(", resolved = ").push_bind(outcome.resolved as i64);
        q.push(" WHERE scan_id = ").push_bind(report.scan_id.clone());
        q.build().execute(&mut *conn).await.ctx("counting the scan")?;
        Ok(())
    }

    /// Deletes the scans that finished before `cutoff`, the last step of a retention pass, and
    /// logs what the pass deleted (`drifts` resolved drifts before it).
    pub async fn prune_scans(
        conn: &mut <D::Db as Database>::Connection,
        cutoff: DateTime<Utc>,
        drifts: u64,
    ) -> Result<PruneOutcome, SqlError<D>> {
        let mut q = QueryBuilder::<D::Db>::new("DELETE FROM scans WHERE finished_at < ");
        q.push_bind(D::time(cutoff));
        let scans = D::rows_affected(&q.build().execute(&mut *conn).await.ctx("deleting old scans")?);
        if drifts + scans > 0 {
            tracing::info!(drifts, scans, %cutoff, "retention: deleted old history");
        }
        Ok(PruneOutcome { drifts, scans })
    }
}
