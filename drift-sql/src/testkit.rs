//! The store suite of drift-testkit ([`drift_testkit::store`]) over a SQL store (feature
//! `testkit`, for the stores' own tests). What every SQL store answers the same way (rows
//! counted by the database, a statement of an operator's own, statistics from the rows, a
//! retention pass) is written here once; a store's [`SqlHarness`] says how to open its stores
//! and how to check its rollups.
#![allow(clippy::expect_used)] // test tooling: a panic is the failure report

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use drift_model::sink::{DriftFilter, DriftStats, RecordOutcome};
use drift_model::{CoverageEntry, DriftSink, DriftStore, ScanReport, SourceWarning};
use drift_testkit::store::StoreHarness;
use sqlx::types::Json;
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool, Row, Type};

use crate::{Dialect, Sql, SqlStats, SqlStore};

/// What a SQL store's tests provide to run the store suite ([`Harness`]).
#[async_trait]
pub trait SqlHarness: Send + Sync {
    /// The store under test.
    type Store: SqlStore + DriftSink + DriftStore + 'static;
    /// The name of the index that refuses a second open row per fingerprint, as the
    /// database's error message says it.
    const OPEN_ROW_CONSTRAINT: &'static str;
    /// A new, empty store on a database of its own, with this retention.
    async fn open(&self, retention_days: Option<u32>) -> Self::Store;
    /// Another handle, with connections of its own, on the database of `store`.
    async fn reopen(&self, store: &Self::Store) -> Self::Store;
    /// The pool an operator's own statements go through.
    fn pool(store: &Self::Store) -> &Pool<<<Self::Store as SqlStats>::Dialect as Dialect>::Db>;
    /// Checks, with the store's own SQL, that its rollups hold exactly what its rows add up to.
    async fn assert_rollups_match_rows(&self, store: &Self::Store);
    /// [`StoreHarness::race`] where the backend can hold both writers at their first statement;
    /// `None` (the default): both are simply spawned at once.
    async fn race(&self, _a: &ScanReport, _b: &ScanReport) -> Option<(RecordOutcome, RecordOutcome, Self::Store)> {
        None
    }
}

/// A [`StoreHarness`] over a [`SqlHarness`]: `drift_testkit::store_suite!(Harness(...))`.
#[derive(Debug)]
pub struct Harness<H>(pub H);

#[async_trait]
impl<H, D> StoreHarness for Harness<H>
where
    H: SqlHarness,
    H::Store: SqlStats<Dialect = D>,
    D: Dialect,
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
    type Store = H::Store;

    async fn fresh(&self) -> Arc<H::Store> {
        Arc::new(self.0.open(None).await)
    }

    async fn with_retention(&self, days: u32) -> Option<Arc<H::Store>> {
        Some(Arc::new(self.0.open(Some(days)).await))
    }

    async fn reopen(&self, store: &Arc<H::Store>) -> Arc<H::Store> {
        Arc::new(self.0.reopen(store).await)
    }

    async fn race(&self, a: ScanReport, b: ScanReport) -> (RecordOutcome, RecordOutcome, Arc<H::Store>) {
        match self.0.race(&a, &b).await {
            Some((oa, ob, store)) => (oa, ob, Arc::new(store)),
            None => drift_testkit::store::race(self, a, b).await,
        }
    }

    async fn count_rows(&self, store: &H::Store) -> Option<i64> {
        let row = sqlx::query("SELECT count(*) AS n FROM drifts").fetch_one(H::pool(store)).await.expect("count");
        Some(row.try_get("n").expect("a count"))
    }

    async fn execute(&self, store: &H::Store, sql: &'static str) -> Option<Result<u64, String>> {
        let result = sqlx::query(sql).execute(H::pool(store)).await;
        Some(result.map(|r| D::rows_affected(&r)).map_err(|e| e.to_string()))
    }

    fn open_row_constraint(&self) -> &'static str {
        H::OPEN_ROW_CONSTRAINT
    }

    async fn check_rollups(&self, store: &H::Store) -> bool {
        self.0.assert_rollups_match_rows(store).await;
        true
    }

    async fn stats_from_rows(&self, store: &H::Store, filter: &DriftFilter, now: DateTime<Utc>) -> Option<DriftStats> {
        Some(Sql::<D>::stats_from_rows(store, filter, now).await.expect("stats from the rows"))
    }

    async fn prune(&self, store: &H::Store, now: DateTime<Utc>) -> Option<(u64, u64)> {
        let o = Sql::<D>::prune(store, now).await.expect("a retention pass");
        Some((o.drifts, o.scans))
    }
}
