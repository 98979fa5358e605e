//! # drift-testkit
//!
//! The behaviour suite that every adapter of the drift detector passes, in the manner of
//! OpenDAL's behaviour tests: one suite per role, cases chosen from the adapter's capabilities,
//! run here against the in-memory reference implementations of `drift-core` and in each adapter
//! crate against the real backend.
//!
//! - [`desired::conformance`] for a [`drift_core::DesiredSource`];
//! - [`live::conformance`] for a [`drift_core::LiveSource`], through a [`live::LiveHarness`]
//!   that loads the [`fixtures`] into the backend;
//! - [`sink::conformance`] for a [`drift_core::DriftSink`] that is also a
//!   [`drift_core::DriftStore`].
//!
//! [`corpus::dir`] finds the shared corpus of real objects (`DRIFT_CORPUS`) for the tests that
//! read it, and says when they are skipped.
//!
//! Every function panics with the name of the failed case, so a test that calls it fails with a
//! clear message.
//!
//! ```
//! use std::sync::Arc;
//! use drift_core::memory::MemoryStore;
//! futures::executor::block_on(drift_testkit::sink::conformance(|| async {
//!     let store = Arc::new(MemoryStore::new());
//!     (store.clone() as Arc<dyn drift_core::DriftSink>, store as Arc<dyn drift_core::DriftStore>)
//! }));
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test kit: panics are the failure report

pub mod corpus;
pub mod desired;
pub mod fixtures;
pub mod live;
pub mod sink;

/// What the suite macros need in the crate that expands them, without it depending on them.
#[doc(hidden)]
pub mod __private {
    pub use tokio;
}

/// One test per case: `$crate::$suite::$case(&harness)` on a fresh harness, on a tokio runtime
/// of two workers. The runtime is built here rather than with `#[tokio::test]`, whose
/// `crate = "..."` option cannot name `$crate`.
#[doc(hidden)]
#[macro_export]
macro_rules! __case_tests {
    (($suite:ident, $harness:expr) $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                $crate::__private::tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("a tokio runtime for the case")
                    .block_on(async {
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
