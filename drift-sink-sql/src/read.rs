//! The read side both stores share: filters, keyset pagination, row decoding, scans.

use std::marker::PhantomData;

use drift_core::Result;
use drift_core::sink::{DriftFilter, DriftPage, PageRequest, ScanRecord, StoredDrift};
use serde::de::DeserializeOwned;
use serde_json::Value;
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool, QueryBuilder, Row, Type};

use crate::Dialect;
use crate::error::{SqlContext, SqlError};

/// The columns of a [`StoredDrift`] in table `drifts`, in the order [`Sql::decode`] reads them.
pub const COLUMNS: &str = "id, fingerprint, detected_at, last_seen, occurrences, cluster, repository, api_group, \
     resource_kind, namespace, resource_name, path, drift_type, severity, git_value, cluster_value, status, \
     resolved_at, resolution, changed_by, changed_at, classification, decision_source, recommended_action";

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
    <D::Db as Database>::Arguments: IntoArguments<D::Db>,
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
            classification: parse(id, "classification", text("classification")?)?,
            decision_source: parse(id, "decision_source", text("decision_source")?)?,
            recommended_action: parse(id, "recommended_action", text("recommended_action")?)?,
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
            None => Err(drift_core::Error::not_found(format!("no drift with id {id}"))),
        }
    }

    /// The latest scans, newest first.
    pub async fn recent_scans(pool: &Pool<D::Db>, limit: u32) -> Result<Vec<ScanRecord>> {
        let mut q = QueryBuilder::<D::Db>::new(
            "SELECT scan_id, cluster, repository, revision, started_at, finished_at, outcome, drifts, warnings \
             FROM scans ORDER BY started_at DESC, scan_id DESC LIMIT ",
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
            })
        };
        Ok(rows.iter().map(scan).collect::<Result<Vec<_>, _>>()?)
    }

    /// Checks that the database answers.
    pub async fn ping(pool: &Pool<D::Db>) -> Result<()> {
        sqlx::query("SELECT 1").execute(pool).await.ctx::<D>("ping")?;
        Ok(())
    }
}

/// A stored name of an enumeration (`replicas_drift`, `open`, ...) read back.
fn parse<T: DeserializeOwned, D>(id: i64, column: &str, value: String) -> Result<T, SqlError<D>> {
    serde_json::from_value(Value::String(value)).map_err(|e| SqlError::corrupt(id, column, e))
}
