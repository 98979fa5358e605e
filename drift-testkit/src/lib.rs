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
