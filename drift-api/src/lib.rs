//! # drift-api
//!
//! The REST API of the drift detector (docs/api.md), as an [`axum::Router`] that the `drift`
//! binary mounts. The API reads the store only through the [`drift_model::sink::DriftStore`]
//! trait (and its acting side through [`drift_model::act::ActStore`]), starts scans through a [`ScanTrigger`] the binary implements, and exports Prometheus
//! metrics through [`Metrics`] (of `drift-metrics`, which the runtime records into without
//! depending on this crate).
//!
//! | route | what |
//! | --- | --- |
//! | `GET /health` | liveness: 200 whenever the process serves |
//! | `GET /ready` | readiness: the store answers, the newest scan is recent, no repository's recent last scan failed, and the watch sees every pair it watches |
//! | `POST /scan` | starts a scan (bearer token); `?wait=true` answers with the reports |
//! | `GET /drifts` | drifts, newest first, with filters and keyset pagination |
//! | `GET /drifts/{id}` | one drift, with its decisions, notifications and learned confidence |
//! | `POST /drifts/{id}/decisions` | acknowledge, accept (a waiver) or reject a drift (write token) |
//! | `GET /audit` | the audit trail, with filters and keyset pagination |
//! | `GET /notifications` | deliveries of events to notifiers |
//! | `POST /notifications/{event_id}/requeue` | puts a parked delivery back in the queue (write token) |
//! | `GET /stats` | counts, 7-day trend, time to resolve |
//! | `GET /scans` | the last scans, with their coverage gaps |
//! | `GET /` | the web page ([`ui`]; assets under `/ui/`) |
//! | `GET /metrics` | Prometheus text |
//! | `GET /openapi.json` | the OpenAPI 3.1 document, generated from the route table |
//!
//! Errors are JSON `{"error": "message"}`. Bad parameters answer 400, a store that fails 503.
//! Write endpoints need a named write token ([`ApiToken::named`], [`ApiState::with_tokens`]);
//! reads need the read token only when one is set ([`ApiState::with_read_token`]).
//! See `docs/api.md` for every parameter and answer. [`server::serve`] serves the router with
//! header-read and idle timeouts and a cap on connections; a `Host` the state does not allow is
//! answered 421 ([`server::AllowedHosts`]).
//!
//! ```
//! use std::sync::Arc;
//! use async_trait::async_trait;
//! use drift_api::{ApiState, ApiToken, Metrics, ScanTrigger, TriggerOutcome, router};
//! use drift_model::memory::MemoryStore;
//!
//! #[derive(Debug)]
//! struct NeverRunning;
//!
//! #[async_trait]
//! impl ScanTrigger for NeverRunning {
//!     async fn trigger(&self, _wait: bool) -> drift_model::Result<TriggerOutcome> {
//!         Ok(TriggerOutcome::Started { scan_id: "scan-1".to_owned() })
//!     }
//! }
//!
//! # fn main() -> Result<(), drift_model::Error> {
//! let metrics = Metrics::new();
//! let state = ApiState::new(Arc::new(MemoryStore::new()), Arc::new(NeverRunning))
//!     .with_token(Some(ApiToken::new("a-long-random-token")?))
//!     .with_metrics(metrics.clone());
//! let app: axum::Router = router(state);
//! // drift_api::server::serve(listener, app, ServerLimits::default(), shutdown).await — and after
//! // each scan: metrics.record_scan(&report, elapsed)
//! # let _ = app;
//! # Ok(())
//! # }
//! ```
// The OpenAPI document is one `json!` literal of many schemas: deeper than the default 128.
#![recursion_limit = "256"]
#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod acting;
pub mod alerts;
pub mod auth;
pub mod check;
pub mod detail;
pub mod error;
mod handlers;
mod identity;
pub mod limits;
pub mod openapi;
pub mod query;
pub mod remediation;
pub mod routes;
pub mod server;
pub mod state;
pub mod ui;

pub use acting::{DecisionRequest, DeliveryPage, NO_ACT_STORE};
pub use auth::{Actor, ApiToken, check_tokens};
pub use check::{MergeCheck, NO_MERGE_CHECK};
pub use detail::{DriftDetail, LearnedView, drift_detail};
/// The scan gate, shared with the runtime ([`drift_metrics::gate`]).
pub use drift_metrics::gate;
/// The Prometheus metrics the runtime records and `GET /metrics` renders
/// ([`drift_metrics::metrics`]).
pub use drift_metrics::metrics;
pub use drift_metrics::{Metrics, ScanGate, ScanPermit};
pub use drift_model::prediction::{PredictionView, Predictor};
pub use error::ApiError;
pub use remediation::{NO_REMEDIES, Remediate};
pub use routes::router;
pub use state::{ApiState, Clock, ClusterGaps, ManualClock, ScanTrigger, SystemClock, TriggerOutcome};

/// The examples of the crate's README.md, compiled and run as doctests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
