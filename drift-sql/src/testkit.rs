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
    type Store: SqlStore + DriftSink + DriftStore + drift_model::ChangeIdentities + 'static;
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

/// The keeper of the Secret hash key ([`drift_model::hash_key::HashKeyStore`]), the same on
/// every SQL store: each store's `tests/hash_key.rs` runs these over its own handles.
pub mod hash_keys {
    use drift_model::hash_key::{HashKey, HashKeyStore, KeptHashKey, Rehash};
    use drift_model::{DriftSink, DriftStore, DriftType, ErrorKind};
    use drift_testkit::fixtures::{drift, key, report, t};
    use serde_json::json;

    fn key_of(byte: u8) -> HashKey {
        HashKey::new([byte; 32])
    }

    /// The first key proposed is kept; every later caller, on this handle or another, gets
    /// it, whatever it proposes; a key the user gives is kept by its id only.
    pub async fn the_first_key_proposed_is_kept_and_every_later_caller_gets_it<S: HashKeyStore>(a: &S, b: &S) {
        let first = KeptHashKey::kept(key_of(1));
        assert_eq!(a.hash_key(&first).await.expect("a key"), first);
        assert_eq!(a.hash_key(&KeptHashKey::kept(key_of(2))).await.expect("a key"), first, "kept, not replaced");
        assert_eq!(b.hash_key(&KeptHashKey::kept(key_of(3))).await.expect("a key"), first, "another process");
        let given = b.hash_key(&KeptHashKey::given(&key_of(4))).await.expect("a key");
        assert_eq!(given, first, "a given key does not replace the kept one: the caller sees they differ");
    }

    /// A key the user gives first: only its id is stored.
    pub async fn a_given_key_is_kept_by_its_id_only<S: HashKeyStore>(a: &S) {
        let given = KeptHashKey::given(&key_of(5));
        let kept = a.hash_key(&given).await.expect("a key");
        assert_eq!((kept.id.as_str(), kept.key.is_none()), (key_of(5).id().as_str(), true));
        assert_eq!(a.hash_key(&KeptHashKey::kept(key_of(6))).await.expect("a key"), given);
    }

    /// Processes that start at once, each proposing a key of its own, all get the same one.
    pub async fn callers_at_once_agree_on_one_key<S: HashKeyStore + 'static>(handles: Vec<std::sync::Arc<S>>) {
        let tasks: Vec<_> = handles
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                tokio::spawn(async move { s.hash_key(&KeptHashKey::kept(key_of(10 + i as u8))).await.expect("a key") })
            })
            .collect();
        let mut got = Vec::new();
        for t in tasks {
            got.push(t.await.expect("a task"));
        }
        assert!(got.windows(2).all(|w| w[0] == w[1]), "{:?}", got.iter().map(|k| &k.id).collect::<Vec<_>>());
    }

    fn secret_drift(value: &str) -> drift_model::Drift {
        let mut d = drift("Secret", "shop", "creds", DriftType::SecretDrift, "data.password", json!(value));
        d.git_value = Some(json!(format!("{value}-git")));
        d
    }

    /// A rotation rewrites the values of a live drift that holds the old hashes, without an
    /// event, and leaves one whose values changed since; the next report, hashed under the new
    /// key, is the same drift seen again: no event. A second rotation from the old key is a
    /// conflict that changes nothing.
    pub async fn a_rotation_rehashes_live_drifts_without_an_event<S>(store: &S)
    where
        S: HashKeyStore + DriftSink + DriftStore,
    {
        let old = KeptHashKey::kept(key_of(20));
        store.hash_key(&old).await.expect("a key");
        let creds = key("Secret", "shop", "creds");
        let other = {
            let mut d = secret_drift("hmac-sha256:0000000000000001");
            d.resource.name = "other".into();
            d
        };
        let first = store
            .record(&report(
                "s1",
                t(0),
                &[creds.clone(), key("Secret", "shop", "other")],
                vec![secret_drift("hmac-sha256:00000000000000aa"), other.clone()],
            ))
            .await
            .expect("recorded");
        assert_eq!(first.opened, 2);
        let fp = |d: &drift_model::Drift| d.fingerprint("test-cluster", "test-repo");
        let value = |v: &str| (Some(json!(format!("{v}-git"))), Some(json!(v)));
        let rehash = vec![
            Rehash {
                fingerprint: fp(&secret_drift("x")),
                before: value("hmac-sha256:00000000000000aa"),
                after: value("hmac-sha256:00000000000000bb"),
            },
            // Its stored value is not this one any more: left for the next scan.
            Rehash {
                fingerprint: fp(&other),
                before: value("hmac-sha256:0000000000000009"),
                after: value("hmac-sha256:000000000000000a"),
            },
        ];
        let new = KeptHashKey::kept(key_of(21));
        assert_eq!(store.rotate_hash_key(&old.id, &new, &rehash).await.expect("rotated"), 1);
        assert_eq!(store.hash_key(&KeptHashKey::kept(key_of(22))).await.expect("a key"), new);
        let page = store.list(&Default::default(), Default::default()).await.expect("a page");
        let creds_row = page.items.iter().find(|d| d.resource_name == "creds").expect("the creds drift");
        assert_eq!(creds_row.cluster_value, Some(json!("hmac-sha256:00000000000000bb")));
        assert_eq!(creds_row.git_value, Some(json!("hmac-sha256:00000000000000bb-git")));
        assert_eq!(creds_row.occurrences, 1, "a rotation is not a sighting");
        let other_row = page.items.iter().find(|d| d.resource_name == "other").expect("the other drift");
        assert_eq!(other_row.cluster_value, Some(json!("hmac-sha256:0000000000000001")), "left as it was");
        let mut other_now = other.clone();
        other_now.cluster_value = Some(json!("hmac-sha256:0000000000000001"));
        let next = store
            .record(&report(
                "s2",
                t(1),
                &[creds, key("Secret", "shop", "other")],
                vec![secret_drift("hmac-sha256:00000000000000bb"), other_now],
            ))
            .await
            .expect("recorded");
        assert_eq!((next.opened, next.updated, next.events), (0, 2, 0), "{next:?}");
        let again = store.rotate_hash_key(&old.id, &KeptHashKey::kept(key_of(23)), &[]).await.expect_err("stale");
        assert_eq!(again.kind(), ErrorKind::Conflict);
        assert!(!again.to_string().contains(&key_of(21).to_text()), "{again}");
        assert_eq!(store.hash_key(&KeptHashKey::kept(key_of(24))).await.expect("a key"), new, "unchanged");
    }
}
