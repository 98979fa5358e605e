//! # drift-metrics
//!
//! What the runtime of the drift detector (`drift-runtime`) and its REST API (`drift-api`)
//! share, so that the runtime needs no web server to have them:
//!
//! - the [`ScanGate`]: one scan at a time, passed by the scheduler, watch mode and `POST /scan`;
//! - the [`Metrics`]: what the runtime records (scans, source errors, watch lag, notifications,
//!   whether this replica leads, whether the watch is in sync) and the API exports at
//!   `GET /metrics`.
//!
//! With the `prometheus` feature (which `drift-api` turns on), [`Metrics`] is a Prometheus
//! registry (the `metrics` module) rendered as OpenMetrics text. Without it, [`Metrics`] keeps
//! only what the runtime reads back ([`Metrics::is_leader`], [`Metrics::watch_out_of_sync`]) and
//! the other recordings do nothing; its methods are a subset of the Prometheus one's, so code
//! written against it builds either way.
//!
//! ```
//! use std::time::Duration;
//! use drift_metrics::{Metrics, ScanGate};
//!
//! let (gate, metrics) = (ScanGate::new(), Metrics::new());
//! let permit = gate.try_start("scan-1").unwrap();
//! assert_eq!(gate.try_start("scan-2").unwrap_err(), "scan-1");
//! metrics.observe_watch_lag(Duration::from_millis(20));
//! metrics.set_leader(false);
//! assert!(!metrics.is_leader());
//! drop(permit);
//! assert_eq!(gate.running(), None);
//! ```
#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod gate;
#[cfg(feature = "prometheus")]
pub mod metrics;
#[cfg(not(feature = "prometheus"))]
mod plain;

pub use gate::{ScanGate, ScanPermit};
#[cfg(feature = "prometheus")]
pub use metrics::Metrics;
#[cfg(not(feature = "prometheus"))]
pub use plain::Metrics;

/// The examples of the crate's README.md, compiled and run as doctests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
