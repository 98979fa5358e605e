//! # drift-testkit
//!
//! The behaviour suite that every adapter of the drift detector passes, in the manner of
//! OpenDAL's behaviour tests: one suite per role, cases chosen from the adapter's capabilities,
//! run here against the in-memory reference implementations of `drift-core` and in each adapter
//! crate against the real backend.
//!
//! - [`desired::conformance`] for a [`drift_model::DesiredSource`];
//! - [`live::conformance`] for a [`drift_model::LiveSource`], through a [`live::LiveHarness`]
//!   that loads the [`fixtures`] into the backend;
//! - [`sink_suite!`] for a [`drift_model::DriftSink`] (most cases need one that is also a
//!   [`drift_model::DriftStore`]): one test per case of [`sink`];
//! - [`store_suite!`] for the SQL stores' behaviour (history, rollups, agreement with the
//!   reference store, 10,000 drifts), through a [`store::StoreHarness`]: one test per case of
//!   [`store`];
//! - [`act_suite!`] for the acting ports of a store ([`drift_model::act::Outbox`],
//!   [`drift_model::act::Decisions`], [`drift_model::act::AuditLog`]): events, routing, leases,
//!   waivers, decisions, the audit trail; one test per case of [`act`], run on the in-memory
//!   store, SQLite and PostgreSQL.
//!
//! [`alertmanager::Alertmanager`] runs the real Alertmanager on loopback for the tests of its
//! v2 API and its webhook receiver format.
//!
//! [`process::terminate`] stops a process under test with SIGTERM within a bound, and kills it
//! when it does not stop, so a test that waits on one cannot hang the run.
//!
//! [`corpus::dir`] finds the shared corpus of real objects (`DRIFT_CORPUS`) for the tests that
//! read it, and says when they are skipped.
//!
//! Every function panics with the name of the failed case, so a test that calls it fails with a
//! clear message.
//!
//! ```
//! // In an adapter's tests/conformance.rs: the runner lists `sink::lifecycle`, ...
//! mod sink {
//!     use std::sync::Arc;
//!     use drift_model::{DriftSink, DriftStore, memory::MemoryStore};
//!     drift_testkit::sink_suite!(|| async {
//!         let s = Arc::new(MemoryStore::new());
//!         (s.clone() as Arc<dyn DriftSink>, s as Arc<dyn DriftStore>)
//!     });
//! }
//! ```
#![warn(missing_docs)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test kit: panics are the failure report

pub mod act;
pub mod alertmanager;
pub mod charts;
pub mod corpus;
pub mod desired;
pub mod fixtures;
pub mod live;
pub mod process;
pub mod sink;
pub mod sops;
pub mod store;
pub mod store_bench;

/// What the suite macros need in the crate that expands them, without it depending on them.
#[doc(hidden)]
pub mod __private {
    pub use drift_model;
    pub use tokio;

    /// Runs a test case on a tokio runtime of its own: one thread (as `#[tokio::test]`), or
    /// `threads` worker threads. The runtime is built here rather than with `#[tokio::test]`,
    /// whose `crate = "..."` option cannot name `$crate`.
    pub fn run<F: std::future::Future>(threads: usize, case: F) -> F::Output {
        let mut builder = if threads > 1 {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(threads);
            b
        } else {
            tokio::runtime::Builder::new_current_thread()
        };
        builder.enable_all().build().expect("a tokio runtime for the test").block_on(case)
    }
}

/// One test per case: `$crate::$suite::$case(&harness)` on a fresh harness, on a tokio runtime
/// of two workers.
#[doc(hidden)]
#[macro_export]
macro_rules! __case_tests {
    (($suite:ident, $harness:expr) $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                $crate::__private::run(2, async {
                    let harness = $harness.await;
                    $crate::$suite::$case(&harness).await;
                });
            }
        )*
    };
}

/// Every case in order, each on a fresh harness from the closure `$fresh`.
#[doc(hidden)]
#[macro_export]
macro_rules! __cases_in_sequence {
    (($suite:ident, $fresh:expr) $($case:ident),* $(,)?) => {
        $(
            {
                let harness = ($fresh)().await;
                $crate::$suite::$case(&harness).await;
            }
        )*
    };
}

/// The examples of the crate's README.md, compiled and run as doctests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
