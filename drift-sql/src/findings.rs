//! Policy findings in table `findings` (migration 0006 of both stores), written once for both:
//! the lifecycle of a report's findings (open, seen again, resolved where
//! [`ScanReport::may_resolve_finding`] allows it), listing with filters and keyset paging, the
//! open counts for the metrics, and retention. Findings have no rollups: they are few next to
//! drifts and counted from the rows.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use drift_model::finding::{Rule, Side};
use drift_model::memory::distinct_findings;
use drift_model::sink::{FindingFilter, FindingPage, PageRequest, StoredFinding};
use drift_model::{CoverageEntry, ResourceKey, Result, ScanReport, Severity, SourceWarning};
use sqlx::types::Json;
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool, QueryBuilder, Row, Type};

use crate::error::{SqlContext, SqlError};
use crate::sql::parse;
use crate::{Connection, Dialect, Sql};

/// The columns of a [`StoredFinding`] in table `findings`, in the order [`Sql::decode_finding`]
/// reads them.
pub const FINDING_COLUMNS: &str = "id, fingerprint, finding_type, detected_at, last_seen, occurrences, cluster, \
     repository, rule, severity, side, api_group, resource_kind, namespace, resource_name, container, path, message, \
     status, resolved_at";

/// Ids per statement.
const IDS: usize = 5000;
/// Rows per multi-row insert (15 parameters each, under SQLite's 32,766).
const ROWS: usize = 1000;

/// What recording a report's findings changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FindingsWritten {
    /// New open rows.
    pub opened: usize,
    /// Open rows seen again.
    pub updated: usize,
    /// Open rows resolved.
    pub resolved: usize,
}

impl<D: Dialect> Sql<D>
where
    for<'c> &'c mut <D::Db as Database>::Connection: Executor<'c, Database = D::Db>,
    for<'a> &'a str: ColumnIndex<<D::Db as Database>::Row>,
    String: for<'q> Encode<'q, D::Db> + for<'r> Decode<'r, D::Db> + Type<D::Db>,
    i64: for<'q> Encode<'q, D::Db> + for<'r> Decode<'r, D::Db> + Type<D::Db>,
    Option<String>: for<'q> Encode<'q, D::Db> + for<'r> Decode<'r, D::Db> + Type<D::Db>,
    Option<i64>: for<'q> Encode<'q, D::Db>,
    Option<D::Time>: for<'q> Encode<'q, D::Db>,
    usize: ColumnIndex<<D::Db as Database>::Row>,
    <D::Db as Database>::Arguments: IntoArguments<D::Db>,
    for<'a> Json<&'a [SourceWarning]>: Encode<'a, D::Db> + Type<D::Db>,
    for<'a> Json<&'a [&'a CoverageEntry]>: Encode<'a, D::Db> + Type<D::Db>,
{
    /// Writes the findings of a report in its transaction: a finding whose fingerprint has an
    /// open row updates it (last seen, occurrences, and severity and message when they changed),
    /// a new one opens a row, and the open rows of the report's cluster and repository that it
    /// does not list are resolved where [`ScanReport::may_resolve_finding`] allows it. The
    /// same rules as the reference store (`drift_model::memory`).
    pub async fn write_findings(conn: &mut Connection<D>, report: &ScanReport) -> Result<FindingsWritten, SqlError<D>> {
        let mut written = FindingsWritten::default();
        if report.findings.is_empty() && report.policy_sides.is_empty() {
            return Ok(written); // nothing to open, and nothing this report may resolve
        }
        let mut q = QueryBuilder::<D::Db>::new(
            "SELECT id, fingerprint, side, api_group, resource_kind, namespace, resource_name, severity, message \
             FROM findings WHERE status = 'open' AND cluster = ",
        );
        q.push_bind(report.cluster.clone()).push(" AND repository = ").push_bind(report.repository.clone());
        q.push(D::FOR_UPDATE);
        let get = |e| SqlError::sql("reading open findings", e);
        struct Open {
            id: i64,
            side: Side,
            key: ResourceKey,
            severity: String,
            message: String,
        }
        let mut open: HashMap<String, Open> = HashMap::new();
        for row in q.build().fetch_all(&mut *conn).await.ctx("reading open findings")? {
            let id: i64 = row.try_get("id").map_err(get)?;
            let namespace: String = row.try_get("namespace").map_err(get)?;
            open.insert(
                row.try_get("fingerprint").map_err(get)?,
                Open {
                    id,
                    side: parse(id, "side", row.try_get("side").map_err(get)?)?,
                    key: ResourceKey {
                        group: row.try_get("api_group").map_err(get)?,
                        kind: row.try_get("resource_kind").map_err(get)?,
                        namespace: (!namespace.is_empty()).then_some(namespace),
                        name: row.try_get("resource_name").map_err(get)?,
                    },
                    severity: row.try_get("severity").map_err(get)?,
                    message: row.try_get("message").map_err(get)?,
                },
            );
        }

        let mut again = Vec::new();
        let mut fresh = Vec::new();
        for (fp, finding) in distinct_findings(report) {
            match open.remove(&fp) {
                Some(row) if row.severity == finding.severity.as_str() && row.message == finding.message => {
                    again.push(row.id);
                }
                Some(row) => {
                    let mut q = QueryBuilder::<D::Db>::new("UPDATE findings SET last_seen = ");
                    q.push_bind(D::time(report.finished_at)).push(", occurrences = occurrences + 1, severity = ");
                    q.push_bind(finding.severity.as_str().to_owned()).push(", message = ");
                    q.push_bind(finding.message.clone()).push(" WHERE id = ").push_bind(row.id);
                    q.build().execute(&mut *conn).await.ctx("updating a finding")?;
                    written.updated += 1;
                }
                None => fresh.push((fp, finding)),
            }
        }
        for chunk in again.chunks(IDS) {
            let mut q = QueryBuilder::<D::Db>::new("UPDATE findings SET last_seen = ");
            q.push_bind(D::time(report.finished_at)).push(", occurrences = occurrences + 1 WHERE ");
            D::push_ids(&mut q, "id", chunk.to_vec());
            q.build().execute(&mut *conn).await.ctx("updating findings seen again")?;
        }
        written.updated += again.len();
        for chunk in fresh.chunks(ROWS) {
            let mut q = QueryBuilder::<D::Db>::new(
                "INSERT INTO findings (fingerprint, finding_type, detected_at, last_seen, cluster, repository, rule, \
                 severity, side, api_group, resource_kind, namespace, resource_name, container, path, message) ",
            );
            q.push_values(chunk, |mut row, (fp, f)| {
                row.push_bind(fp.clone())
                    .push_bind("policy_violation".to_owned())
                    .push_bind(D::time(report.finished_at))
                    .push_bind(D::time(report.finished_at))
                    .push_bind(report.cluster.clone())
                    .push_bind(report.repository.clone())
                    .push_bind(f.rule.as_str().to_owned())
                    .push_bind(f.severity.as_str().to_owned())
                    .push_bind(f.side.as_str().to_owned())
                    .push_bind(f.resource.group.clone())
                    .push_bind(f.resource.kind.clone())
                    .push_bind(f.resource.namespace.clone().unwrap_or_default())
                    .push_bind(f.resource.name.clone())
                    .push_bind(f.container.clone())
                    .push_bind(f.path.clone())
                    .push_bind(f.message.clone());
            });
            // A concurrent writer of the same cluster and repository may have opened it since.
            q.push(" ON CONFLICT (fingerprint) WHERE status = 'open' DO NOTHING");
            let done = q.build().execute(&mut *conn).await.ctx("opening findings")?;
            written.opened += D::rows_affected(&done) as usize;
        }

        let mut decided: HashMap<(ResourceKey, Side), bool> = HashMap::new();
        let resolve: Vec<i64> = open
            .into_values()
            .filter(|row| {
                *decided
                    .entry((row.key.clone(), row.side))
                    .or_insert_with(|| report.may_resolve_finding(&row.key, row.side))
            })
            .map(|row| row.id)
            .collect();
        for chunk in resolve.chunks(IDS) {
            let mut q = QueryBuilder::<D::Db>::new("UPDATE findings SET status = 'resolved', resolved_at = ");
            q.push_bind(D::time(report.finished_at)).push(" WHERE status = 'open' AND ");
            D::push_ids(&mut q, "id", chunk.to_vec());
            let done = q.build().execute(&mut *conn).await.ctx("resolving findings")?;
            written.resolved += D::rows_affected(&done) as usize;
        }
        Ok(written)
    }

    /// Reads a [`StoredFinding`] from a row of [`FINDING_COLUMNS`].
    pub fn decode_finding(row: &<D::Db as Database>::Row) -> Result<StoredFinding, SqlError<D>> {
        let get = |e| SqlError::sql("reading a finding row", e);
        let id: i64 = row.try_get("id").map_err(get)?;
        let text = |column: &str| -> Result<String, SqlError<D>> { row.try_get(column).map_err(get) };
        let time = |column: &str| -> Result<DateTime<Utc>, SqlError<D>> {
            D::from_time(row.try_get(column).map_err(get)?)
                .ok_or_else(|| SqlError::corrupt(id, column, "the time is out of range"))
        };
        let resolved_at = row
            .try_get::<Option<D::Time>, _>("resolved_at")
            .map_err(get)?
            .map(|t| D::from_time(t).ok_or_else(|| SqlError::corrupt(id, "resolved_at", "the time is out of range")))
            .transpose()?;
        Ok(StoredFinding {
            id,
            fingerprint: text("fingerprint")?,
            finding_type: parse(id, "finding_type", text("finding_type")?)?,
            detected_at: time("detected_at")?,
            last_seen: time("last_seen")?,
            occurrences: row.try_get("occurrences").map_err(get)?,
            cluster: text("cluster")?,
            repository: text("repository")?,
            rule: parse(id, "rule", text("rule")?)?,
            severity: parse(id, "severity", text("severity")?)?,
            side: parse(id, "side", text("side")?)?,
            api_group: text("api_group")?,
            resource_kind: text("resource_kind")?,
            namespace: text("namespace")?,
            resource_name: text("resource_name")?,
            container: row.try_get("container").map_err(get)?,
            path: text("path")?,
            message: text("message")?,
            status: parse(id, "status", text("status")?)?,
            resolved_at,
        })
    }

    /// A page of findings the filter keeps, newest first, after the cursor.
    pub async fn findings(pool: &Pool<D::Db>, filter: &FindingFilter, page: PageRequest) -> Result<FindingPage> {
        page.validate()?;
        let mut q = QueryBuilder::<D::Db>::new("SELECT ");
        q.push(FINDING_COLUMNS).push(" FROM findings WHERE true");
        let text = [
            ("status", filter.status.map(|s| s.as_str().to_owned())),
            ("rule", filter.rule.map(|r| r.as_str().to_owned())),
            ("severity", filter.severity.map(|s| s.as_str().to_owned())),
            ("side", filter.side.map(|s| s.as_str().to_owned())),
            ("namespace", filter.namespace.clone()),
            ("resource_kind", filter.kind.clone()),
            ("repository", filter.repository.clone()),
            ("cluster", filter.cluster.clone()),
        ];
        for (column, value) in text {
            if let Some(value) = value {
                q.push(" AND ").push(column).push(" = ").push_bind(value);
            }
        }
        if let Some(after) = page.after {
            q.push(" AND id < ").push_bind(after);
        }
        q.push(" ORDER BY id DESC LIMIT ").push_bind(page.fetch_limit() as i64);
        let rows = q.build().fetch_all(pool).await.ctx::<D>("listing findings")?;
        let items = rows.iter().map(Self::decode_finding).collect::<Result<Vec<_>, _>>()?;
        Ok(FindingPage::from_rows(items, page))
    }

    /// The open findings by rule and severity.
    pub async fn open_findings(pool: &Pool<D::Db>) -> Result<BTreeMap<(Rule, Severity), i64>> {
        let rows = sqlx::query(
            "SELECT rule, severity, count(*) AS n FROM findings WHERE status = 'open' GROUP BY rule, severity",
        )
        .fetch_all(pool)
        .await
        .ctx::<D>("counting open findings")?;
        let mut counts = BTreeMap::new();
        for row in rows {
            let get = |e| SqlError::<D>::sql("counting open findings", e);
            let rule: Rule = parse::<_, D>(0, "rule", row.try_get("rule").map_err(get)?)?;
            let severity: Severity = parse::<_, D>(0, "severity", row.try_get("severity").map_err(get)?)?;
            counts.insert((rule, severity), row.try_get::<i64, _>("n").map_err(get)?);
        }
        Ok(counts)
    }

    /// Deletes the findings resolved before `cutoff`; returns how many.
    pub(crate) async fn prune_findings(conn: &mut Connection<D>, cutoff: DateTime<Utc>) -> Result<u64, SqlError<D>> {
        let mut q = QueryBuilder::<D::Db>::new("DELETE FROM findings WHERE status = 'resolved' AND resolved_at < ");
        q.push_bind(D::time(cutoff));
        Ok(D::rows_affected(&q.build().execute(&mut *conn).await.ctx("deleting old findings")?))
    }
}
