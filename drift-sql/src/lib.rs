//! # drift-sql
//!
//! What the SQL stores of the drift detector (`drift-postgres`, `drift-sqlite`) share,
//! written once over sqlx's [`Database`](sqlx::Database) and a small [`Dialect`]:
//!
//! - the columns of a drift row ([`COLUMNS`]) and of the rollups ([`DIMENSIONS`]);
//! - the filter and keyset paging builder, row decoding, listing, scans and ping ([`Sql`]);
//! - the scan row of a report, which drifts of a report count ([`distinct_drifts`]), which open
//!   drifts it resolves and how ([`Resolver`]), retention's cutoff ([`cutoff`], [`PruneOutcome`]);
//! - error classification ([`SqlError`], [`classify`]) and the retry loop of `record`
//!   ([`record`]);
//! - the policy findings of table `findings` ([`Sql::write_findings`], [`Sql::findings`],
//!   [`Sql::open_findings`]): no rollups, the same statements for both stores;
//! - the key of the Secret-value hash in table `settings` ([`Sql::hash_key`],
//!   [`Sql::rotate_hash_key`]).
//!
//! Each store keeps what truly differs: its configuration, its write path
//! ([`SqlStore::write_drifts`]), its rollup strategy and statistics, and its migrations. It
//! implements [`SqlStore`] and calls [`impl_drift_store!`], which implements
//! [`DriftSink`](drift_model::DriftSink) and [`DriftStore`](drift_model::DriftStore) with the
//! shared code. docs/storage.md describes the schema and the behaviour both stores have.
//!
//! A store crate declares its dialect (`impl Dialect for PgDialect`), implements [`SqlStore`]
//! and [`SqlStats`] for its store type, and calls `impl_drift_store!(PostgresStore)`. The rules
//! of a write are plain functions over a report:
//!
//! ```
//! use drift_model::{DriftType, ScanOutcome};
//! use drift_testkit::fixtures::{drift, key, report, t};
//!
//! let web = key("Deployment", "shop", "web");
//! let d = drift("Deployment", "shop", "web", DriftType::ReplicasDrift, "spec.replicas", 3.into());
//! // Listed twice, counted once.
//! let r = report("scan-1", t(0), &[web.clone()], vec![d.clone(), d]);
//! assert_eq!(drift_sql::distinct_drifts(&r).len(), 1);
//! // A scan that read the Deployment and did not see its drift resolves it; a failed one does not.
//! let mut resolver = drift_sql::Resolver::of(&r).unwrap();
//! let how = resolver.resolve("apps".into(), "Deployment".into(), "shop".into(), "web".into(), Some("d0"));
//! assert_eq!(how.map(|(_, resolution)| resolution), Some(drift_model::Resolution::Reverted));
//! let mut failed = r.clone();
//! failed.outcome = ScanOutcome::Failed;
//! assert!(drift_sql::Resolver::of(&failed).is_none());
//! ```
#![warn(missing_docs)]

mod act;
mod dialect;
mod error;
mod findings;
mod identity;
mod keys;
mod sql;
#[cfg(feature = "testkit")]
pub mod testkit;
mod write;

pub use dialect::{Dialect, Writing};
pub use error::{SqlContext, SqlError, classify};
pub use findings::{FINDING_COLUMNS, FindingsWritten};
pub use sql::{COLUMNS, DIMENSIONS, Sql};
pub use write::{
    ATTEMPTS, Before, Change, Connection, PruneOutcome, Resolver, SqlStats, SqlStore, Written, cutoff, distinct_drifts,
    mean_seconds, record, resolvable_only, upsert_change,
};

#[doc(hidden)]
pub mod __private {
    pub use async_trait::async_trait;
    pub use chrono::{DateTime, Duration, Utc};
    pub use drift_model::Severity;
    pub use drift_model::act::{
        AuditEntry, AuditFilter, AuditLog, AuditNote, AuditPage, Decision, Decisions, Delivery, DeliveryRecord,
        DeliveryStatus, DriftEvent, Learned, NewDecision, Outbox, Route, Settle,
    };
    pub use drift_model::finding::Rule;
    pub use drift_model::hash_key::{HashKeyStore, KeptHashKey, Rehash};
    pub use drift_model::identity::{ChangeIdentities, ChangeIdentity};
    pub use drift_model::sink::{
        DriftFilter, DriftPage, DriftSink, DriftStats, DriftStore, FindingFilter, FindingPage, PageRequest,
        RecordOutcome, ScanRecord, SinkCapabilities, StoredDrift,
    };
    pub use drift_model::{Result, ScanReport};
    pub use std::collections::BTreeMap;
}

/// Implements [`DriftSink`](drift_model::DriftSink) and [`DriftStore`](drift_model::DriftStore)
/// for a [`SqlStore`]: a readable sink that resolves drifts, whose `record` is [`record`] of
/// [`Sql::record_once`], `stats` is [`Sql::stats`], and reads are those of [`Sql`] over
/// [`SqlStore::reader`]; the acting side (outbox, decisions, audit trail) and the keeper of the
/// Secret hash key ([`HashKeyStore`](drift_model::hash_key::HashKeyStore)); and the store's
/// `prune` ([`Sql::prune`]) and `stats_from_rows` ([`Sql::stats_from_rows`]).
///
/// A macro because the two traits belong to `drift-core` and the store types to their crates:
/// only the store's crate may implement one for the other.
#[macro_export]
macro_rules! impl_drift_store {
    ($store:ty) => {
        #[$crate::__private::async_trait]
        impl $crate::__private::DriftSink for $store {
            fn name(&self) -> &str {
                <$store as $crate::SqlStore>::NAME
            }

            fn capabilities(&self) -> $crate::__private::SinkCapabilities {
                $crate::__private::SinkCapabilities { readable: true, resolves: true, findings: true }
            }

            async fn record(
                &self,
                report: &$crate::__private::ScanReport,
            ) -> $crate::__private::Result<$crate::__private::RecordOutcome> {
                $crate::record(report, || {
                    $crate::Sql::<<$store as $crate::SqlStats>::Dialect>::record_once(self, report)
                })
                .await
            }
        }

        #[$crate::__private::async_trait]
        impl $crate::__private::DriftStore for $store {
            async fn list(
                &self,
                filter: &$crate::__private::DriftFilter,
                page: $crate::__private::PageRequest,
            ) -> $crate::__private::Result<$crate::__private::DriftPage> {
                let pool = <$store as $crate::SqlStore>::reader(self);
                $crate::Sql::<<$store as $crate::SqlStats>::Dialect>::list(pool, filter, page).await
            }

            async fn get(&self, id: i64) -> $crate::__private::Result<$crate::__private::StoredDrift> {
                let pool = <$store as $crate::SqlStore>::reader(self);
                $crate::Sql::<<$store as $crate::SqlStats>::Dialect>::get(pool, id).await
            }

            async fn stats(
                &self,
                filter: &$crate::__private::DriftFilter,
                now: $crate::__private::DateTime<$crate::__private::Utc>,
            ) -> $crate::__private::Result<$crate::__private::DriftStats> {
                $crate::Sql::<<$store as $crate::SqlStats>::Dialect>::stats(self, filter, now).await
            }

            async fn recent_scans(&self, limit: u32) -> $crate::__private::Result<Vec<$crate::__private::ScanRecord>> {
                let pool = <$store as $crate::SqlStore>::reader(self);
                $crate::Sql::<<$store as $crate::SqlStats>::Dialect>::recent_scans(pool, limit).await
            }

            async fn ping(&self) -> $crate::__private::Result<()> {
                let pool = <$store as $crate::SqlStore>::reader(self);
                $crate::Sql::<<$store as $crate::SqlStats>::Dialect>::ping(pool).await
            }

            async fn findings(
                &self,
                filter: &$crate::__private::FindingFilter,
                page: $crate::__private::PageRequest,
            ) -> $crate::__private::Result<$crate::__private::FindingPage> {
                let pool = <$store as $crate::SqlStore>::reader(self);
                $crate::Sql::<<$store as $crate::SqlStats>::Dialect>::findings(pool, filter, page).await
            }

            async fn open_findings(
                &self,
            ) -> $crate::__private::Result<
                $crate::__private::BTreeMap<($crate::__private::Rule, $crate::__private::Severity), i64>,
            > {
                let pool = <$store as $crate::SqlStore>::reader(self);
                $crate::Sql::<<$store as $crate::SqlStats>::Dialect>::open_findings(pool).await
            }
        }

        #[$crate::__private::async_trait]
        impl $crate::__private::Outbox for $store {
            async fn emit(&self, events: &[$crate::__private::DriftEvent]) -> $crate::__private::Result<usize> {
                Ok($crate::Sql::<<$store as $crate::SqlStats>::Dialect>::emit(self, events).await?)
            }

            async fn route(
                &self,
                notifier: &str,
                route: &$crate::__private::Route<'_>,
                limit: usize,
            ) -> $crate::__private::Result<usize> {
                Ok($crate::Sql::<<$store as $crate::SqlStats>::Dialect>::route(self, notifier, route, limit).await?)
            }

            async fn claim(
                &self,
                notifier: &str,
                worker: &str,
                now: $crate::__private::DateTime<$crate::__private::Utc>,
                lease: $crate::__private::Duration,
                limit: usize,
            ) -> $crate::__private::Result<Vec<$crate::__private::Delivery>> {
                Ok($crate::Sql::<<$store as $crate::SqlStats>::Dialect>::claim(self, notifier, worker, now, lease, limit)
                    .await?)
            }

            async fn settle(
                &self,
                notifier: &str,
                worker: &str,
                outcomes: &[(String, $crate::__private::Settle)],
                now: $crate::__private::DateTime<$crate::__private::Utc>,
            ) -> $crate::__private::Result<()> {
                Ok($crate::Sql::<<$store as $crate::SqlStats>::Dialect>::settle(self, notifier, worker, outcomes, now)
                    .await?)
            }

            async fn notified(
                &self,
                notifier: &str,
                drift_ids: &[i64],
            ) -> $crate::__private::Result<
                $crate::__private::BTreeMap<i64, $crate::__private::DateTime<$crate::__private::Utc>>,
            > {
                Ok($crate::Sql::<<$store as $crate::SqlStats>::Dialect>::notified(self, notifier, drift_ids).await?)
            }

            async fn stale(
                &self,
                notifier: &str,
                before: $crate::__private::DateTime<$crate::__private::Utc>,
                limit: usize,
            ) -> $crate::__private::Result<Vec<$crate::__private::StoredDrift>> {
                Ok($crate::Sql::<<$store as $crate::SqlStats>::Dialect>::stale(self, notifier, before, limit).await?)
            }

            async fn delivery_counts(
                &self,
            ) -> $crate::__private::Result<
                $crate::__private::BTreeMap<(String, $crate::__private::DeliveryStatus), i64>,
            > {
                Ok($crate::Sql::<<$store as $crate::SqlStats>::Dialect>::delivery_counts(self).await?)
            }

            async fn deliveries(
                &self,
                drift_id: Option<i64>,
                status: Option<$crate::__private::DeliveryStatus>,
                page: $crate::__private::PageRequest,
            ) -> $crate::__private::Result<Vec<$crate::__private::DeliveryRecord>> {
                Ok($crate::Sql::<<$store as $crate::SqlStats>::Dialect>::deliveries(self, drift_id, status, page).await?)
            }

            async fn requeue(
                &self,
                event_id: &str,
                notifier: &str,
                actor: &str,
                now: $crate::__private::DateTime<$crate::__private::Utc>,
            ) -> $crate::__private::Result<bool> {
                Ok($crate::Sql::<<$store as $crate::SqlStats>::Dialect>::requeue(self, event_id, notifier, actor, now)
                    .await?)
            }

            async fn probe(
                &self,
                notifier: &str,
                now: $crate::__private::DateTime<$crate::__private::Utc>,
                limit: usize,
            ) -> $crate::__private::Result<usize> {
                Ok($crate::Sql::<<$store as $crate::SqlStats>::Dialect>::probe(self, notifier, now, limit).await?)
            }
        }

        #[$crate::__private::async_trait]
        impl $crate::__private::Decisions for $store {
            async fn expire_waivers(
                &self,
                now: $crate::__private::DateTime<$crate::__private::Utc>,
            ) -> $crate::__private::Result<usize> {
                Ok($crate::Sql::<<$store as $crate::SqlStats>::Dialect>::expire_waivers(self, now).await?)
            }

            async fn decide(
                &self,
                drift_id: i64,
                decision: &$crate::__private::NewDecision,
                now: $crate::__private::DateTime<$crate::__private::Utc>,
            ) -> $crate::__private::Result<$crate::__private::Decision> {
                Ok($crate::Sql::<<$store as $crate::SqlStats>::Dialect>::decide(self, drift_id, decision, now).await?)
            }

            async fn decisions(&self, drift_id: i64) -> $crate::__private::Result<Vec<$crate::__private::Decision>> {
                Ok($crate::Sql::<<$store as $crate::SqlStats>::Dialect>::decisions(self, drift_id).await?)
            }

            async fn similar(
                &self,
                drift: &$crate::__private::StoredDrift,
            ) -> $crate::__private::Result<Option<$crate::__private::Learned>> {
                Ok($crate::Sql::<<$store as $crate::SqlStats>::Dialect>::similar(self, drift).await?)
            }
        }

        #[$crate::__private::async_trait]
        impl $crate::__private::AuditLog for $store {
            async fn audit(
                &self,
                filter: &$crate::__private::AuditFilter,
                page: $crate::__private::PageRequest,
            ) -> $crate::__private::Result<$crate::__private::AuditPage> {
                Ok($crate::Sql::<<$store as $crate::SqlStats>::Dialect>::audit(self, filter, page).await?)
            }

            async fn note(
                &self,
                entry: &$crate::__private::AuditNote,
                now: $crate::__private::DateTime<$crate::__private::Utc>,
            ) -> $crate::__private::Result<i64> {
                Ok($crate::Sql::<<$store as $crate::SqlStats>::Dialect>::note(self, entry, now).await?)
            }

            async fn unfinished(
                &self,
                limit: u32,
            ) -> $crate::__private::Result<Vec<$crate::__private::AuditEntry>> {
                Ok($crate::Sql::<<$store as $crate::SqlStats>::Dialect>::unfinished(self, limit).await?)
            }
        }

        #[$crate::__private::async_trait]
        impl $crate::__private::ChangeIdentities for $store {
            async fn identify(
                &self,
                drift_id: i64,
                identity: &$crate::__private::ChangeIdentity,
            ) -> $crate::__private::Result<bool> {
                Ok($crate::Sql::<<$store as $crate::SqlStats>::Dialect>::identify(self, drift_id, identity).await?)
            }
        }

        #[$crate::__private::async_trait]
        impl $crate::__private::HashKeyStore for $store {
            async fn hash_key(
                &self,
                proposed: &$crate::__private::KeptHashKey,
            ) -> $crate::__private::Result<$crate::__private::KeptHashKey> {
                Ok($crate::Sql::<<$store as $crate::SqlStats>::Dialect>::hash_key(self, proposed).await?)
            }

            async fn rotate_hash_key(
                &self,
                from: &str,
                to: &$crate::__private::KeptHashKey,
                rehash: &[$crate::__private::Rehash],
            ) -> $crate::__private::Result<usize> {
                Ok($crate::Sql::<<$store as $crate::SqlStats>::Dialect>::rotate_hash_key(self, from, to, rehash).await?)
            }
        }

        impl $store {
            /// Deletes resolved drifts and scans older than the retention (relative to `now`);
            /// does nothing without a retention. Recording a report also prunes, relative to the
            /// report's finish time.
            pub async fn prune(
                &self,
                now: $crate::__private::DateTime<$crate::__private::Utc>,
            ) -> $crate::__private::Result<$crate::PruneOutcome> {
                $crate::Sql::<<$store as $crate::SqlStats>::Dialect>::prune(self, now).await
            }

            /// Statistics computed from the rows themselves, without the rollups (the shared
            /// `Sql::stats_from_rows` of `drift-sql`): what `stats` answers for a filter
            /// with `since`, and what the rollups are checked against.
            pub async fn stats_from_rows(
                &self,
                filter: &$crate::__private::DriftFilter,
                now: $crate::__private::DateTime<$crate::__private::Utc>,
            ) -> $crate::__private::Result<$crate::__private::DriftStats> {
                Ok($crate::Sql::<<$store as $crate::SqlStats>::Dialect>::stats_from_rows(self, filter, now).await?)
            }
        }
    };
}

/// The examples of the crate's README.md, compiled and run as doctests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
