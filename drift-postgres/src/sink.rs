//! The write side: one transaction per scan report, its drifts sent as column arrays.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use drift_model::act::EventKind;
use drift_model::sink::DriftStatus;
use drift_model::{Drift, Result, ScanReport};
use drift_sql::{
    Before, Change, Resolver, SqlContext, SqlStore, Written, distinct_drifts, resolvable_only, upsert_change,
};
use sqlx::postgres::{PgConnection, PgPool};
use sqlx::{Postgres, Transaction};

use crate::PostgresStore;
use crate::error::PgError;

/// The drifts of a report as column arrays, one entry per distinct fingerprint, in report order.
#[derive(Default)]
struct Columns {
    fingerprint: Vec<String>,
    api_group: Vec<String>,
    kind: Vec<String>,
    namespace: Vec<String>,
    name: Vec<String>,
    path: Vec<String>,
    drift_type: Vec<&'static str>,
    severity: Vec<&'static str>,
    git_value: Vec<Option<String>>,
    cluster_value: Vec<Option<String>>,
    changed_by: Vec<Option<String>>,
    changed_at: Vec<Option<DateTime<Utc>>>,
    classification: Vec<&'static str>,
    decision_source: Vec<&'static str>,
    recommended_action: Vec<&'static str>,
    desired_digest: Vec<Option<String>>,
    revert: Vec<Option<String>>,
}

impl Columns {
    /// Collects the drifts of a report ([`distinct_drifts`]).
    fn of(report: &ScanReport, drifts: &[(String, &Drift)]) -> Self {
        let mut c = Columns::default();
        for (fp, d) in drifts {
            c.fingerprint.push(fp.clone());
            c.api_group.push(d.api_group.clone());
            c.kind.push(d.resource.kind.clone());
            c.namespace.push(d.resource.namespace.clone().unwrap_or_default());
            c.name.push(d.resource.name.clone());
            c.path.push(d.path.clone());
            c.drift_type.push(d.drift_type.as_str());
            c.severity.push(d.severity.as_str());
            c.git_value.push(d.git_value.as_ref().map(serde_json::Value::to_string));
            c.cluster_value.push(d.cluster_value.as_ref().map(serde_json::Value::to_string));
            c.changed_by.push(d.changed_by.clone());
            c.changed_at.push(d.changed_at);
            c.classification.push(d.classification.as_str());
            c.decision_source.push(d.decision_source.as_str());
            c.recommended_action.push(d.recommended_action.as_str());
            c.desired_digest.push(report.desired_digest(&d.key()).map(str::to_owned));
            c.revert.push(d.revert.as_ref().and_then(|r| serde_json::to_string(r).ok()));
        }
        c
    }
}

/// Inserts new drifts and updates live ones (open or waived) in one statement, and says for
/// each row what it was before: `old` reads the live rows of the report's fingerprints in the
/// statement's snapshot (before the upsert), `up` is the upsert; a new row has no `old` row. A
/// waived row whose cluster value changed is open again (its waiver ends).
///
/// `old` is `MATERIALIZED`, read once: inlined, the planner was free to read it once per
/// upserted row (a nested loop whose inner side matched the whole fingerprint array each time:
/// 3.1 million buffers and 1.6 s for a watch batch of 1,024 rows, on a table analyzed while it
/// was empty, docs/benchmarks.md "Change storms").
const UPSERT: &str = r#"
WITH old AS MATERIALIZED (
    SELECT id, status, cluster_value, severity FROM drifts
    WHERE status <> 'resolved' AND fingerprint = ANY($1::text[])
), up AS (
    INSERT INTO drifts (fingerprint, api_group, resource_kind, namespace, resource_name, path, drift_type,
        severity, git_value, cluster_value, changed_by, changed_at, classification, decision_source,
        recommended_action, desired_digest, detected_at, last_seen, occurrences, cluster, repository, status, revert)
    SELECT d.fingerprint, d.api_group, d.kind, d.namespace, d.name, d.path, d.drift_type, d.severity,
        d.git_value::jsonb, d.cluster_value::jsonb, d.changed_by, d.changed_at, d.classification,
        d.decision_source, d.recommended_action, d.desired_digest, $16, $16, 1, $17, $18, 'open', d.revert::jsonb
    FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
        $8::text[], $9::text[], $10::text[], $11::text[], $12::timestamptz[], $13::text[], $14::text[],
        $15::text[], $19::text[], $20::text[])
        WITH ORDINALITY AS d(fingerprint, api_group, kind, namespace, name, path, drift_type, severity,
            git_value, cluster_value, changed_by, changed_at, classification, decision_source,
            recommended_action, desired_digest, revert, ord)
    ORDER BY d.ord
    ON CONFLICT (fingerprint, resolved_at) WHERE status <> 'resolved' DO UPDATE SET
        last_seen = EXCLUDED.last_seen,
        occurrences = drifts.occurrences + 1,
        git_value = EXCLUDED.git_value,
        cluster_value = EXCLUDED.cluster_value,
        severity = EXCLUDED.severity,
        changed_by = EXCLUDED.changed_by,
        changed_at = EXCLUDED.changed_at,
        classification = EXCLUDED.classification,
        recommended_action = CASE WHEN drifts.decision_source = 'human' THEN drifts.recommended_action
            ELSE EXCLUDED.recommended_action END,
        desired_digest = EXCLUDED.desired_digest,
        revert = EXCLUDED.revert,
        status = CASE WHEN drifts.status = 'waived' AND drifts.cluster_value IS DISTINCT FROM EXCLUDED.cluster_value
            THEN 'open' ELSE drifts.status END,
        waived_until = CASE WHEN drifts.status = 'waived' AND drifts.cluster_value IS DISTINCT FROM EXCLUDED.cluster_value
            THEN NULL ELSE drifts.waived_until END,
        waived_by = CASE WHEN drifts.status = 'waived' AND drifts.cluster_value IS DISTINCT FROM EXCLUDED.cluster_value
            THEN NULL ELSE drifts.waived_by END
    RETURNING id, fingerprint, occurrences, status, cluster_value, severity
)
SELECT up.id, up.occurrences, up.status, up.severity, old.status AS old_status, old.severity AS old_severity,
    old.cluster_value::text AS old_value, old.cluster_value IS DISTINCT FROM up.cluster_value AS value_changed,
    (old.id IS NULL AND EXISTS (SELECT 1 FROM drifts r WHERE r.status = 'resolved' AND r.fingerprint = up.fingerprint))
        AS seen_before
FROM up LEFT JOIN old ON old.id = up.id
"#;

/// A row the upsert returns: id, occurrences, status, severity, and the live row before
/// (status, severity, cluster value as JSON text), whether the value changed, whether a
/// resolved row has the fingerprint.
type Upserted = (i64, i64, String, String, Option<String>, Option<String>, Option<String>, bool, bool);

#[async_trait]
impl SqlStore for PostgresStore {
    const NAME: &'static str = "postgres";

    fn reader(&self) -> &PgPool {
        &self.pool
    }

    fn retention_days(&self) -> Option<u32> {
        self.retention_days
    }

    async fn begin(&self) -> Result<Transaction<'static, Postgres>, PgError> {
        self.pool.begin().await.ctx("starting the transaction")
    }

    /// One upsert of every drift as column arrays, then the resolution; the triggers keep the
    /// rollups.
    async fn write_drifts(&self, conn: &mut PgConnection, report: &ScanReport) -> Result<Written, PgError> {
        let cols = Columns::of(report, &distinct_drifts(report));
        let mut written = Written::default();
        // Reports of one cluster and repository are written one at a time: the upsert reads the
        // live rows in its statement's snapshot, and a report committed meanwhile by another
        // writer (the watch beside a full pass, a second replica) would otherwise be invisible
        // to it, its rows then updated as if new and announced as `opened` a second time. Taken
        // here, the lock makes the next statement's snapshot include every earlier writer.
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
            .bind(format!("drift-report\n{}\n{}", report.cluster, report.repository))
            .execute(&mut *conn)
            .await
            .ctx("waiting for the report lock")?;
        if !cols.fingerprint.is_empty() {
            let rows: Vec<Upserted> = sqlx::query_as(UPSERT)
                .bind(&cols.fingerprint)
                .bind(&cols.api_group)
                .bind(&cols.kind)
                .bind(&cols.namespace)
                .bind(&cols.name)
                .bind(&cols.path)
                .bind(&cols.drift_type)
                .bind(&cols.severity)
                .bind(&cols.git_value)
                .bind(&cols.cluster_value)
                .bind(&cols.changed_by)
                .bind(&cols.changed_at)
                .bind(&cols.classification)
                .bind(&cols.decision_source)
                .bind(&cols.recommended_action)
                .bind(report.finished_at)
                .bind(&report.cluster)
                .bind(&report.repository)
                .bind(&cols.desired_digest)
                .bind(&cols.revert)
                .fetch_all(&mut *conn)
                .await
                .ctx("upserting drifts")?;
            for (id, occurrences, status, severity, old_status, old_severity, old_value, value_changed, seen_before) in
                rows
            {
                let outcome = &mut written.outcome;
                if occurrences == 1 {
                    outcome.opened += 1
                } else {
                    outcome.updated += 1
                }
                let status: DriftStatus = parse(id, "status", &status)?;
                if status == DriftStatus::Waived {
                    outcome.waived += 1;
                }
                let before = match (old_status, old_severity) {
                    (Some(s), Some(sev)) => Some(Before {
                        status: parse(id, "status", &s)?,
                        severity: parse(id, "severity", &sev)?,
                        cluster_value: old_value
                            .map(|v| serde_json::from_str(&v))
                            .transpose()
                            .map_err(|e| PgError::corrupt(id, "cluster_value", e))?,
                    }),
                    _ => None,
                };
                let severity = parse(id, "severity", &severity)?;
                written.changes.extend(upsert_change(id, before, seen_before, status, value_changed, severity));
            }
        }
        resolve(conn, report, &cols.fingerprint, &mut written).await?;
        Ok(written)
    }

    /// Refreshes the planner's statistics of `drifts_live` when enough rows were opened since
    /// it last did (after 500 rows opened, then each time the rows opened since the store
    /// started have doubled), beside the writes that follow (it blocks none of them).
    async fn recorded(&self, outcome: &drift_model::sink::RecordOutcome) {
        if !self.growth.add(outcome.opened) {
            return;
        }
        let pool = self.pool.clone();
        let mut running = self.growth.running.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if running.as_ref().is_some_and(|r| !r.is_finished()) {
            return; // the one running reads the rows opened meanwhile too
        }
        *running = Some(tokio::spawn(async move {
            // SKIP_LOCKED: an ANALYZE or VACUUM running already (autovacuum) does it.
            if let Err(e) = sqlx::query("ANALYZE (SKIP_LOCKED) drifts_live").execute(&pool).await {
                tracing::warn!(error = %e, "refreshing the planner's statistics of drifts_live failed");
            }
        }));
    }

    async fn prune_drifts(&self, conn: &mut PgConnection, cutoff: DateTime<Utc>) -> Result<u64, PgError> {
        // Row by row only before the first month partition (rows in drifts_live); the months go
        // whole (PostgresStore::maintain_history).
        let drifts = sqlx::query(
            "DELETE FROM drifts WHERE status = 'resolved' AND resolved_at < LEAST($1, drift_history_start())",
        )
        .bind(cutoff)
        .execute(&mut *conn)
        .await
        .ctx("deleting old resolved drifts")?
        .rows_affected();
        if drifts > 0 {
            // The triggers subtracted the deleted rows from the rollups; drop the days before the
            // cutoff that no row contributes to any more.
            sqlx::query(
                "DELETE FROM drift_daily WHERE day < ($1 AT TIME ZONE 'UTC')::date AND opened = 0 AND resolved = 0",
            )
            .bind(cutoff)
            .execute(&mut *conn)
            .await
            .ctx("deleting empty rollup days")?;
        }
        Ok(drifts)
    }
}

/// Rows opened before the store first refreshes the planner's statistics of `drifts_live`.
pub(crate) const ANALYZE_FIRST: u64 = 500;

/// When the store refreshes the planner's statistics of `drifts_live` itself: after
/// [`ANALYZE_FIRST`] rows opened, then each time the rows opened since it started have doubled.
///
/// The migrations analyze `drifts` while it is empty, and autovacuum analyzes it again only
/// after its next nap (a minute): a new database that a storm fills (10,000 drifts opened in
/// its first seconds) is planned meanwhile as an empty table, and the plans of a watch batch's
/// statements compared every object of the batch with every live row (seconds a batch,
/// docs/benchmarks.md "Change storms"). Doubling keeps the statistics within a factor of two of
/// the rows opened, with a handful of ANALYZEs (of a table of live rows only: tens of
/// milliseconds) in a store's life.
#[derive(Debug)]
pub(crate) struct Growth {
    /// Rows opened since the store started, and the count at which to analyze next.
    state: std::sync::Mutex<(u64, u64)>,
    /// The ANALYZE started last.
    pub(crate) running: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Default for Growth {
    fn default() -> Self {
        Growth { state: std::sync::Mutex::new((0, ANALYZE_FIRST)), running: std::sync::Mutex::default() }
    }
}

impl Growth {
    /// Counts `opened` rows; whether to analyze now.
    pub(crate) fn add(&self, opened: usize) -> bool {
        if opened == 0 {
            return false;
        }
        // A poisoned lock only means another write panicked while counting: the counts stand.
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (total, next) = &mut *state;
        *total += opened as u64;
        if *total < *next {
            return false;
        }
        while *next <= *total {
            *next = next.saturating_mul(2);
        }
        true
    }
}

/// A live drift that a report may resolve: id, fingerprint, group, kind, namespace, name, and the
/// digest of Git's object when it was last seen.
type Candidate = (i64, String, String, String, String, String, Option<String>);

/// Resolves the open drifts of the report's cluster and repository that it does not list, where
/// the report may resolve them. One query fetches the candidates' keys and digests (of the
/// report's own objects only when it may resolve no other, [`resolvable_only`]), the
/// [`Resolver`] decides, one statement resolves.
async fn resolve(
    conn: &mut PgConnection,
    report: &ScanReport,
    seen: &[String],
    written: &mut Written,
) -> Result<(), PgError> {
    let Some(mut resolver) = Resolver::of(report) else { return Ok(()) };
    // The report's own drifts are left out here, by a hash set: `NOT (fingerprint = ANY($n))`
    // compared each row read with every fingerprint of the report (up to 1,024 for a watch's
    // batch, every drift for a full pass): seconds of a storm's write (docs/benchmarks.md).
    let candidates: Vec<Candidate> = match resolvable_only(report) {
        // Every live drift of the scope (through `drifts_live_scope`).
        None => sqlx::query_as(
            "SELECT id, fingerprint, api_group, resource_kind, namespace, resource_name, desired_digest FROM drifts \
             WHERE status <> 'resolved' AND cluster = $1 AND repository = $2",
        )
        .bind(&report.cluster)
        .bind(&report.repository)
        .fetch_all(&mut *conn)
        .await
        .ctx("reading open drifts")?,
        // Only the live drifts of the report's objects (a watch's batch): one probe of
        // `drifts_live_object` per object, whatever the number of open drifts of the scope.
        // The probe is a LATERAL subquery kept apart (`OFFSET 0`) so that the planner cannot
        // turn the join around: with the table analyzed while it was empty and a generic plan
        // made for short arrays, it scanned every live row of the scope and compared each with
        // every object of the batch (4.9 million comparisons, 1.5 s for a batch of 488 objects
        // during a storm; docs/benchmarks.md "Change storms"). `resolved_at IS NULL` (the same
        // rows: a constraint) confines the probes to `drifts_live`.
        Some(keys) => {
            let mut k: [Vec<&str>; 4] = Default::default();
            for key in keys {
                k[0].push(&key.group);
                k[1].push(&key.kind);
                k[2].push(key.namespace.as_deref().unwrap_or_default());
                k[3].push(&key.name);
            }
            sqlx::query_as(
                "SELECT d.id, d.fingerprint, d.api_group, d.resource_kind, d.namespace, d.resource_name, \
                     d.desired_digest \
                 FROM UNNEST($3::text[], $4::text[], $5::text[], $6::text[]) AS k(api_group, kind, namespace, name) \
                 CROSS JOIN LATERAL ( \
                     SELECT id, fingerprint, api_group, resource_kind, namespace, resource_name, desired_digest \
                     FROM drifts WHERE cluster = $1 AND repository = $2 AND namespace = k.namespace \
                         AND resource_name = k.name AND resource_kind = k.kind AND api_group = k.api_group \
                         AND status <> 'resolved' AND resolved_at IS NULL \
                     OFFSET 0 \
                 ) AS d",
            )
            .bind(&report.cluster)
            .bind(&report.repository)
            .bind(&k[0])
            .bind(&k[1])
            .bind(&k[2])
            .bind(&k[3])
            .fetch_all(&mut *conn)
            .await
            .ctx("reading the open drifts of the report's objects")?
        }
    };
    let seen: std::collections::HashSet<&str> = seen.iter().map(String::as_str).collect();
    let (mut ids, mut resolutions) = (Vec::new(), Vec::new());
    for (id, fingerprint, group, kind, namespace, name, digest) in candidates {
        if seen.contains(fingerprint.as_str()) {
            continue;
        }
        if let Some((_, resolution)) = resolver.resolve(group, kind, namespace, name, digest.as_deref()) {
            ids.push(id);
            resolutions.push(resolution.as_str());
        }
    }
    if ids.is_empty() {
        return Ok(());
    }
    let resolved: Vec<i64> = sqlx::query_scalar(
        "UPDATE drifts SET status = 'resolved', resolved_at = $1, resolution = r.resolution, waived_until = NULL, \
         waived_by = NULL \
         FROM UNNEST($2::bigint[], $3::text[]) AS r(id, resolution) \
         WHERE drifts.id = r.id AND drifts.status <> 'resolved' RETURNING drifts.id",
    )
    .bind(report.finished_at)
    .bind(&ids)
    .bind(&resolutions)
    .fetch_all(&mut *conn)
    .await
    .ctx("resolving drifts")?;
    written.outcome.resolved = resolved.len();
    written.changes.extend(resolved.into_iter().map(|id| Change::of(id, EventKind::Resolved)));
    Ok(())
}

/// A stored enumeration name read back.
fn parse<T: std::str::FromStr>(id: i64, column: &str, value: &str) -> Result<T, PgError> {
    value.parse().map_err(|_| PgError::corrupt(id, column, format!("unknown value {value:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_statistics_are_refreshed_as_the_opened_rows_double() {
        let g = Growth::default();
        assert!(!g.add(0));
        assert!(!g.add(499), "below the first threshold");
        assert!(g.add(1), "500 opened");
        assert!(!g.add(499));
        assert!(g.add(1), "1,000 opened");
        assert!(g.add(5_000), "6,000 opened, past 2,000 and 4,000: once");
        assert!(!g.add(1_000), "7,000: the next is 8,000");
        assert!(g.add(1_000));
        let analyzed = (0..10_000).filter(|_| g.add(100)).count();
        assert!(analyzed <= 7, "a handful of ANALYZEs for a million more rows: {analyzed}");
    }
}
