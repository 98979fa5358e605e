//! The statements both stores share: filters, keyset pagination, row decoding, scans, the
//! frame of a write (scan row, replay, counts, retention) around the store's own part.

use std::marker::PhantomData;

use chrono::{DateTime, NaiveDate, Utc};
use drift_model::sink::{
    DriftFilter, DriftPage, DriftStats, PageRequest, RecordOutcome, ScanRecord, StoredDrift, TopPercentile, TrendDay,
};
use drift_model::{CoverageEntry, Result, ScanReport, SourceWarning};
use serde::de::DeserializeOwned;
use serde_json::Value;
use sqlx::types::Json;
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool, QueryBuilder, Row, Type};

use crate::error::{SqlContext, SqlError};
use crate::{Dialect, PruneOutcome, SqlStats, SqlStore, cutoff, mean_seconds};

/// The columns of a [`StoredDrift`] in table `drifts`, in the order [`Sql::decode`] reads them.
pub const COLUMNS: &str = "id, fingerprint, detected_at, last_seen, occurrences, cluster, repository, api_group, \
     resource_kind, namespace, resource_name, path, drift_type, severity, git_value, cluster_value, status, \
     resolved_at, resolution, changed_by, changed_at, changed_by_user, classification, decision_source, recommended_action, waived_until, waived_by, acknowledged_at, revert";

/// The dimensions of the rollups `drift_counts` and `drift_daily`, under the same column names
/// as in `drifts`.
pub const DIMENSIONS: &str = "cluster, repository, namespace, resource_kind, drift_type, severity, status";

/// The shared statements of dialect `D`. Its functions hold the sqlx bounds of the generic code
/// in one place: each store calls them with its own dialect (`Sql::<Pg>::list(...)`).
#[derive(Debug)]
pub struct Sql<D>(PhantomData<D>);

impl<D: Dialect> Sql<D>
where
    for<'c> &'c mut <D::Db as Database>::Connection: Executor<'c, Database = D::Db>,
    for<'a> &'a str: ColumnIndex<<D::Db as Database>::Row>,
    String: for<'q> Encode<'q, D::Db> + for<'r> Decode<'r, D::Db> + Type<D::Db>,
    i64: for<'q> Encode<'q, D::Db> + for<'r> Decode<'r, D::Db> + Type<D::Db>,
    Option<String>: for<'q> Encode<'q, D::Db>,
    Option<i64>: for<'q> Encode<'q, D::Db>,
    Option<D::Time>: for<'q> Encode<'q, D::Db>,
    usize: ColumnIndex<<D::Db as Database>::Row>,
    <D::Db as Database>::Arguments: IntoArguments<D::Db>,
    for<'a> Json<&'a [SourceWarning]>: Encode<'a, D::Db> + Type<D::Db>,
    for<'a> Json<&'a [&'a CoverageEntry]>: Encode<'a, D::Db> + Type<D::Db>,
{
    /// Appends ` WHERE ...` for a filter; every value is a bind parameter.
    pub fn push_filter(q: &mut QueryBuilder<D::Db>, filter: &DriftFilter) {
        Self::push_dimensions(q, filter);
        if let Some(t) = filter.since {
            q.push(" AND last_seen >= ").push_bind(D::time(t));
        }
    }

    /// Appends ` WHERE ...` for every field of a filter but `since`: the dimensions the rollups
    /// are keyed by ([`DIMENSIONS`]).
    pub fn push_dimensions(q: &mut QueryBuilder<D::Db>, filter: &DriftFilter) {
        q.push(" WHERE true");
        let text = [
            ("status", filter.status.map(|s| s.as_str().to_owned())),
            ("severity", filter.severity.map(|s| s.as_str().to_owned())),
            ("drift_type", filter.drift_type.map(|t| t.as_str().to_owned())),
            ("namespace", filter.namespace.clone()),
            ("repository", filter.repository.clone()),
            ("cluster", filter.cluster.clone()),
            ("resource_kind", filter.kind.clone()),
        ];
        for (column, value) in text {
            if let Some(value) = value {
                q.push(" AND ").push(column).push(" = ").push_bind(value);
            }
        }
    }

    /// Reads a [`StoredDrift`] from a row of [`COLUMNS`].
    pub fn decode(row: &<D::Db as Database>::Row) -> Result<StoredDrift, SqlError<D>> {
        let get = |e| SqlError::sql("reading a drift row", e);
        let id: i64 = row.try_get("id").map_err(get)?;
        let text = |column: &str| -> Result<String, SqlError<D>> { row.try_get(column).map_err(get) };
        let opt_text = |column: &str| -> Result<Option<String>, SqlError<D>> { row.try_get(column).map_err(get) };
        let time = |column: &str, t: D::Time| {
            D::from_time(t).ok_or_else(|| SqlError::corrupt(id, column, "the time is out of range"))
        };
        let at = |column: &str| time(column, row.try_get(column).map_err(get)?);
        let opt_at = |column: &str| -> Result<_, SqlError<D>> {
            row.try_get::<Option<D::Time>, _>(column).map_err(get)?.map(|t| time(column, t)).transpose()
        };
        Ok(StoredDrift {
            id,
            fingerprint: text("fingerprint")?,
            detected_at: at("detected_at")?,
            last_seen: at("last_seen")?,
            occurrences: row.try_get("occurrences").map_err(get)?,
            cluster: text("cluster")?,
            repository: text("repository")?,
            api_group: text("api_group")?,
            resource_kind: text("resource_kind")?,
            namespace: text("namespace")?,
            resource_name: text("resource_name")?,
            path: text("path")?,
            drift_type: parse(id, "drift_type", text("drift_type")?)?,
            severity: parse(id, "severity", text("severity")?)?,
            git_value: D::json(row, id, "git_value")?,
            cluster_value: D::json(row, id, "cluster_value")?,
            status: parse(id, "status", text("status")?)?,
            resolved_at: opt_at("resolved_at")?,
            resolution: opt_text("resolution")?.map(|r| parse(id, "resolution", r)).transpose()?,
            changed_by: opt_text("changed_by")?,
            changed_at: opt_at("changed_at")?,
            // An identity this version cannot read, or one of an earlier change of the field,
            // is left out.
            changed_by_user: D::json(row, id, "changed_by_user")?
                .and_then(|v| serde_json::from_value::<drift_model::ChangeIdentity>(v).ok())
                .filter(|i| i.applies_to(opt_at("changed_at").ok().flatten())),
            classification: parse(id, "classification", text("classification")?)?,
            decision_source: parse(id, "decision_source", text("decision_source")?)?,
            recommended_action: parse(id, "recommended_action", text("recommended_action")?)?,
            waived_until: opt_at("waived_until")?,
            waived_by: opt_text("waived_by")?,
            acknowledged_at: opt_at("acknowledged_at")?,
            // A patch this version cannot read is left out, never an error of the whole row.
            revert: D::json(row, id, "revert")?.and_then(|v| serde_json::from_value(v).ok()),
        })
    }

    /// A page of drifts the filter keeps, newest first, after the cursor.
    pub async fn list(pool: &Pool<D::Db>, filter: &DriftFilter, page: PageRequest) -> Result<DriftPage> {
        page.validate()?;
        let mut q = QueryBuilder::<D::Db>::new("SELECT ");
        q.push(COLUMNS).push(" FROM drifts");
        Self::push_filter(&mut q, filter);
        if let Some(after) = page.after {
            q.push(" AND id < ").push_bind(after);
        }
        q.push(" ORDER BY id DESC LIMIT ").push_bind(page.fetch_limit() as i64);
        let rows = q.build().fetch_all(pool).await.ctx::<D>("listing drifts")?;
        let items = rows.iter().map(Self::decode).collect::<Result<Vec<_>, _>>()?;
        Ok(DriftPage::from_rows(items, page))
    }

    /// One drift by id.
    pub async fn get(pool: &Pool<D::Db>, id: i64) -> Result<StoredDrift> {
        let mut q = QueryBuilder::<D::Db>::new("SELECT ");
        q.push(COLUMNS).push(" FROM drifts WHERE id = ").push_bind(id);
        match q.build().fetch_optional(pool).await.ctx::<D>("reading a drift")? {
            Some(row) => Ok(Self::decode(&row)?),
            None => Err(drift_model::Error::not_found(format!("no drift with id {id}"))),
        }
    }

    /// The latest scans, newest first.
    pub async fn recent_scans(pool: &Pool<D::Db>, limit: u32) -> Result<Vec<ScanRecord>> {
        let mut q = QueryBuilder::<D::Db>::new(
            "SELECT scan_id, cluster, repository, revision, started_at, finished_at, outcome, drifts, warnings, \
             coverage FROM scans ORDER BY started_at DESC, scan_id DESC LIMIT ",
        );
        q.push_bind(i64::from(limit));
        let rows = q.build().fetch_all(pool).await.ctx::<D>("listing scans")?;
        let scan = |row: &<D::Db as Database>::Row| -> Result<ScanRecord, SqlError<D>> {
            let get = |e| SqlError::sql("reading a scan row", e);
            let at = |column: &str| {
                D::from_time(row.try_get(column).map_err(get)?)
                    .ok_or_else(|| SqlError::corrupt(0, column, "the time is out of range"))
            };
            Ok(ScanRecord {
                scan_id: row.try_get("scan_id").map_err(get)?,
                cluster: row.try_get("cluster").map_err(get)?,
                repository: row.try_get("repository").map_err(get)?,
                revision: row.try_get("revision").map_err(get)?,
                started_at: at("started_at")?,
                finished_at: at("finished_at")?,
                outcome: parse(0, "outcome", row.try_get("outcome").map_err(get)?)?,
                drifts: row.try_get("drifts").map_err(get)?,
                warnings: row.try_get("warnings").map_err(get)?,
                // Gaps this version cannot read are left out, never an error of the whole row.
                coverage_gaps: D::json(row, 0, "coverage")?
                    .and_then(|v| serde_json::from_value(v).ok())
                    .unwrap_or_default(),
            })
        };
        Ok(rows.iter().map(scan).collect::<Result<Vec<_>, _>>()?)
    }

    /// Checks that the database answers.
    pub async fn ping(pool: &Pool<D::Db>) -> Result<()> {
        sqlx::query("SELECT 1").execute(pool).await.ctx::<D>("ping")?;
        Ok(())
    }

    /// Statistics: from the rollups, or from the rows when the filter names `since` (the
    /// rollups do not keep `last_seen`).
    pub async fn stats<S: SqlStats<Dialect = D>>(
        store: &S,
        filter: &DriftFilter,
        now: DateTime<Utc>,
    ) -> Result<DriftStats> {
        if filter.since.is_some() {
            return Ok(Self::stats_from_rows(store, filter, now).await?);
        }
        Ok(Self::stats_from_rollups(store, filter, now).await?)
    }

    /// Statistics computed from the rollups: a few small aggregates and one short index read,
    /// whatever the size of the history. Every filter field but `since` is a rollup dimension.
    pub async fn stats_from_rollups<S: SqlStats<Dialect = D>>(
        store: &S,
        filter: &DriftFilter,
        now: DateTime<Utc>,
    ) -> Result<DriftStats, SqlError<D>> {
        debug_assert!(filter.since.is_none(), "the rollups do not keep last_seen");
        let mut tx = store.begin_read(false).await?;
        let mut stats = DriftStats::default();

        let mut q = QueryBuilder::<D::Db>::new(
            "SELECT status, CAST(sum(n) AS BIGINT) AS n, CAST(sum(ttr_sum_ms) AS BIGINT) AS ttr FROM ",
        );
        q.push(S::counts_rollup(filter, &["status"]));
        Self::push_dimensions(&mut q, filter);
        q.push(" GROUP BY status HAVING sum(n) > 0");
        let (mut resolved, mut ttr_sum_ms) = (0, 0);
        for row in q.build().fetch_all(&mut *tx).await.ctx("counting by status")? {
            let get = |e| SqlError::sql("counting by status", e);
            let (status, n, ttr): (String, i64, i64) =
                (row.try_get("status").map_err(get)?, row.try_get("n").map_err(get)?, row.try_get("ttr").map_err(get)?);
            if status == "resolved" {
                (resolved, ttr_sum_ms) = (n, ttr);
            }
            stats.by_status.insert(status, n);
        }

        store.open_breakdown(&mut tx, filter, &mut stats, true).await?;
        let fleet = S::counts_rollup(filter, &["status", "cluster", "namespace", "severity"]);
        stats.by_cluster = Self::fleet(&mut tx, filter, Some(fleet)).await?;
        let (first, today) = TrendDay::window(now);
        stats.trend = TrendDay::week(now, store.daily(&mut tx, filter, first, today).await?);
        stats.mean_time_to_resolve_seconds = mean_seconds(ttr_sum_ms, resolved);
        stats.p95_time_to_resolve_seconds = match store.p95_from_rollups(&mut tx, filter, resolved).await? {
            Some(p95) => p95,
            None => Self::p95::<S>(&mut tx, filter, resolved).await?,
        };
        tx.rollback().await.ctx("ending a read")?;
        Ok(stats)
    }

    /// Statistics computed from the rows themselves, without the rollups: what
    /// [`DriftStore::stats`](drift_model::DriftStore::stats) answers for a filter with `since`.
    /// Exact, like the rollups, but it aggregates every row the filter keeps (seconds at
    /// millions of rows). Public (`stats_from_rows` of each store) so that the rollups can be
    /// checked against it.
    pub async fn stats_from_rows<S: SqlStats<Dialect = D>>(
        store: &S,
        filter: &DriftFilter,
        now: DateTime<Utc>,
    ) -> Result<DriftStats, SqlError<D>> {
        let mut tx = store.begin_read(true).await?;
        let mut stats = DriftStats::default();

        let mut q = QueryBuilder::<D::Db>::new("SELECT status, count(*) AS n FROM drifts");
        Self::push_filter(&mut q, filter);
        q.push(" GROUP BY status");
        for row in q.build().fetch_all(&mut *tx).await.ctx("counting by status")? {
            let get = |e| SqlError::sql("counting by status", e);
            stats.by_status.insert(row.try_get("status").map_err(get)?, row.try_get("n").map_err(get)?);
        }

        store.open_breakdown(&mut tx, filter, &mut stats, false).await?;
        stats.by_cluster = Self::fleet(&mut tx, filter, None).await?;

        let (first, _) = TrendDay::window(now);
        let start = first.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc();
        let end = start + chrono::Duration::days(7);
        let mut days = Vec::new();
        for (column, new) in [("detected_at", true), ("resolved_at", false)] {
            let mut q = QueryBuilder::<D::Db>::new("SELECT ");
            q.push(S::day_of(column)).push(" AS day, count(*) AS n FROM drifts");
            Self::push_filter(&mut q, filter);
            q.push(" AND ").push(column).push(" >= ").push_bind(D::time(start));
            q.push(" AND ").push(column).push(" < ").push_bind(D::time(end));
            q.push(" GROUP BY day");
            for row in q.build().fetch_all(&mut *tx).await.ctx("trend")? {
                let get = |e| SqlError::sql("trend", e);
                let (day, n): (String, i64) = (row.try_get("day").map_err(get)?, row.try_get("n").map_err(get)?);
                let day = NaiveDate::parse_from_str(&day, "%Y-%m-%d").map_err(|e| SqlError::corrupt(0, column, e))?;
                days.push(if new { (day, n, 0) } else { (day, 0, n) });
            }
        }
        stats.trend = TrendDay::week(now, days);

        let mut q = QueryBuilder::<D::Db>::new("SELECT count(*) AS n, CAST(COALESCE(sum(");
        q.push(S::TTR_MS).push("), 0) AS BIGINT) AS ms FROM drifts");
        Self::push_filter(&mut q, filter);
        q.push(" AND status = 'resolved'");
        let row = q.build().fetch_one(&mut *tx).await.ctx("time to resolve")?;
        let get = |e| SqlError::sql("time to resolve", e);
        let (n, sum_ms): (i64, i64) = (row.try_get("n").map_err(get)?, row.try_get("ms").map_err(get)?);
        stats.mean_time_to_resolve_seconds = mean_seconds(sum_ms, n);
        stats.p95_time_to_resolve_seconds = Self::p95::<S>(&mut tx, filter, n).await?;
        tx.rollback().await.ctx("ending a read")?;
        Ok(stats)
    }

    /// The fleet overview ([`DriftStats::by_cluster`]): the open drifts the filter keeps by
    /// cluster, namespace and severity, from a rollup of counts (`drift_counts` or a narrower
    /// one with these columns; keys whose rows are all gone have n = 0 and are skipped) or, with
    /// no rollup, from the rows.
    pub async fn fleet(
        conn: &mut <D::Db as Database>::Connection,
        filter: &DriftFilter,
        rollup: Option<&str>,
    ) -> Result<Vec<drift_model::sink::ClusterOpen>, SqlError<D>> {
        let (count, source) = match rollup {
            Some(rollup) => ("CAST(sum(n) AS BIGINT)", rollup),
            None => ("count(*)", "drifts"),
        };
        let mut q = QueryBuilder::<D::Db>::new("SELECT cluster, namespace, severity, ");
        q.push(count).push(" AS n FROM ").push(source);
        if rollup.is_some() {
            Self::push_dimensions(&mut q, filter);
        } else {
            Self::push_filter(&mut q, filter);
        }
        q.push(" AND status = 'open' GROUP BY cluster, namespace, severity");
        let rows = q.build().fetch_all(&mut *conn).await.ctx("counting open drifts by cluster")?;
        let counts = rows
            .iter()
            .map(|row| {
                let get = |e| SqlError::sql("counting open drifts by cluster", e);
                Ok((
                    row.try_get("cluster").map_err(get)?,
                    row.try_get("namespace").map_err(get)?,
                    row.try_get("severity").map_err(get)?,
                    row.try_get("n").map_err(get)?,
                ))
            })
            .collect::<Result<Vec<(String, String, String, i64)>, SqlError<D>>>()?;
        Ok(drift_model::sink::ClusterOpen::fleet(counts))
    }

    /// The continuous 95th percentile of the time to resolve of the `n` resolved rows the
    /// filter keeps: the two order statistics around its rank, read from the top of the
    /// `drifts_resolved_ttr` index (about 5% of it), interpolated.
    pub async fn p95<S: SqlStats<Dialect = D>>(
        conn: &mut <D::Db as Database>::Connection,
        filter: &DriftFilter,
        n: i64,
    ) -> Result<Option<f64>, SqlError<D>> {
        let Some(p95) = TopPercentile::p95(n) else { return Ok(None) };
        let mut q = QueryBuilder::<D::Db>::new("SELECT ");
        q.push(S::TTR_MS).push(" AS ms FROM ").push(S::ttr_source(filter));
        Self::push_filter(&mut q, filter);
        q.push(" AND status = 'resolved' ORDER BY ms DESC LIMIT ").push_bind(p95.take());
        q.push(" OFFSET ").push_bind(p95.skip());
        let top = q.build().fetch_all(&mut *conn).await.ctx("time to resolve")?;
        let seconds = top
            .iter()
            .map(|row| row.try_get::<i64, _>("ms").map(|ms| ms as f64 / 1000.0))
            .collect::<Result<Vec<_>, _>>()
            .ctx("time to resolve")?;
        Ok(p95.interpolate(&seconds))
    }

    /// Writes a report in one transaction, once: its scan row (a scan id recorded already is a
    /// replay and changes nothing), the store's own part ([`SqlStore::write_drifts`]), the
    /// counts of the scan, retention relative to the report's finish time, and the events of
    /// what changed with the scan's audit entry (the outbox). A report is written whole or not
    /// at all: its events with it.
    pub async fn record_once<S: SqlStore + SqlStats<Dialect = D>>(
        store: &S,
        report: &ScanReport,
    ) -> Result<RecordOutcome, SqlError<D>> {
        let mut tx = store.begin().await?;
        if !Self::insert_scan(&mut tx, report).await? {
            tx.rollback().await.ctx("rolling back a replay")?;
            return Ok(RecordOutcome { replayed: true, ..RecordOutcome::default() });
        }
        let mut written = store.write_drifts(&mut tx, report).await?;
        Self::git_waivers(store, &mut tx, report, &mut written).await?;
        let mut outcome = written.outcome;
        let findings = Self::write_findings(&mut tx, report).await?;
        (outcome.findings_opened, outcome.findings_updated, outcome.findings_resolved) =
            (findings.opened, findings.updated, findings.resolved);
        Self::count_scan(&mut tx, report, &outcome).await?;
        if let Some(cutoff) = cutoff(store.retention_days(), report.finished_at) {
            Self::prune_in(store, &mut tx, cutoff).await?;
        }
        // Last: the outbox lock it takes is held until the commit.
        outcome.events = Self::enqueue(&mut tx, report, &written.changes, &outcome).await?;
        tx.commit().await.ctx("committing the scan report")?;
        store.recorded(&outcome).await;
        Ok(outcome)
    }

    /// Deletes resolved drifts and scans older than the retention (relative to `now`); does
    /// nothing without a retention. Recording a report also prunes, relative to the report's
    /// finish time.
    pub async fn prune<S: SqlStore + SqlStats<Dialect = D>>(store: &S, now: DateTime<Utc>) -> Result<PruneOutcome> {
        let Some(cutoff) = cutoff(store.retention_days(), now) else { return Ok(PruneOutcome::default()) };
        let mut tx = store.begin().await?;
        let outcome = Self::prune_in(store, &mut tx, cutoff).await?;
        tx.commit().await.ctx::<D>("committing the retention pass")?;
        Ok(outcome)
    }

    /// A retention pass in the transaction of `conn`: the store's drifts, then the scans.
    async fn prune_in<S: SqlStore + SqlStats<Dialect = D>>(
        store: &S,
        conn: &mut <D::Db as Database>::Connection,
        cutoff: DateTime<Utc>,
    ) -> Result<PruneOutcome, SqlError<D>> {
        let drifts = store.prune_drifts(&mut *conn, cutoff).await?;
        let findings = Self::prune_findings(&mut *conn, cutoff).await?;
        Self::prune_act(&mut *conn, cutoff).await?;
        let mut q = QueryBuilder::<D::Db>::new("DELETE FROM scans WHERE finished_at < ");
        q.push_bind(D::time(cutoff));
        let scans = D::rows_affected(&q.build().execute(&mut *conn).await.ctx("deleting old scans")?);
        if drifts + findings + scans > 0 {
            tracing::info!(drifts, findings, scans, %cutoff, "retention: deleted old history");
        }
        Ok(PruneOutcome { drifts, findings, scans })
    }

    /// Inserts the scan row of a report; `false` when its scan id is recorded already (a
    /// replay: a concurrent writer of the same scan id waits on the primary key and lands here).
    async fn insert_scan(conn: &mut <D::Db as Database>::Connection, report: &ScanReport) -> Result<bool, SqlError<D>> {
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
    async fn count_scan(
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
}

/// A stored name of an enumeration (`replicas_drift`, `open`, ...) read back.
pub(crate) fn parse<T: DeserializeOwned, D>(id: i64, column: &str, value: String) -> Result<T, SqlError<D>> {
    serde_json::from_value(Value::String(value)).map_err(|e| SqlError::corrupt(id, column, e))
}
