//! # drift-runtime
//!
//! The running half of the drift detector, as a library: the [`Scanner`] (one pass over every
//! desired source, recorded in the store and in every extra sink), the scheduler
//! ([`schedule`]: an interval plus jitter, one pass at a time, clean shutdown), the watch loop
//! ([`watch`]: re-compare only the objects the cluster changes, folded by the pure [`batch`]
//! state machine), leader election of replicas ([`leader`]: only the holder of a lease scans), sharding of several
//! clusters over replicas ([`shard`]: a lease per cluster, spread over the replicas alive) and,
//! with the `api` feature (on by default), the REST API of `drift-api`, composed by a
//! [`DetectorBuilder`].
//!
//! Without the `api` feature (`default-features = false`) the runtime links no web server and no
//! Prometheus client: [`Detector::run`] scans, watches, notifies and heals as `Detector::serve`
//! does, and [`Metrics`] records only what the runtime reads back (whether this replica leads,
//! whether the watch is in sync). The scan gate and the metrics come from `drift-metrics`, which
//! the API shares.
//!
//! The `drift` binary is one composition of it (its `compose.rs` chooses the adapters from
//! `drift.yaml`); an integrator composes their own, with their own sources and sinks, without
//! copying the binary. It names no adapter crate: everything comes in as a trait object.
//!
//! ```
//! use std::sync::Arc;
//! use drift_core::memory::{MemoryDesiredSource, MemoryLiveSource, MemoryStore};
//! use drift_core::Resource;
//! use drift_runtime::{Detector, Store};
//! use serde_json::json;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let cm = |v: &str| Resource::from_object(json!({"apiVersion": "v1", "kind": "ConfigMap",
//!     "metadata": {"name": "settings", "namespace": "shop"}, "data": {"mode": v}}));
//! let detector = Detector::builder()
//!     .desired(Arc::new(MemoryDesiredSource::new("platform", vec![cm("fast")?])))
//!     .live(Arc::new(MemoryLiveSource::new("homelab", vec![cm("slow")?])))
//!     .store(Store::new(Arc::new(MemoryStore::new())))
//!     .build()?;
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! let reports = runtime.block_on(detector.scan_once())?;
//! assert_eq!(reports[0].drifts[0].path, "data.mode");
//! // Or run it as a service until Ctrl-C, with the API (the `api` feature) or without:
//! // detector.serve(tokio::net::TcpListener::bind("127.0.0.1:8080").await?, shutdown).await?;
//! // detector.run(shutdown).await;
//! # Ok(())
//! # }
//! ```
//!
//! The comparator is the engine unless the builder is given an integrator's own
//! ([`DetectorBuilder::comparator`]).
//!
//! See `docs/extending.md` for writing a sink, a source or a comparator and plugging it in, and
//! `examples/custom-sink` and `examples/custom-comparator` for whole detectors built this way.
#![warn(missing_docs)]

pub mod attempt;
pub mod batch;
pub mod detector;
pub mod identity;
pub mod leader;
pub mod notify;
pub mod remedies;
pub mod scanner;
pub mod schedule;
pub mod shard;
pub mod watch;

pub use detector::{ClusterParts, Detector, DetectorBuilder, SHUTDOWN_GRACE};
pub use drift_core::act::{Outlet, SendFailure};
pub use drift_metrics::{Metrics, ScanGate, ScanPermit};
pub use leader::{ElectionTimings, Elector};
pub use notify::Dispatcher;
pub use remedies::{AutoAcceptPolicy, AutoRule, HealPolicy, Remedies};
pub use scanner::{Recorded, ScanSettings, Scanner, Store, new_scan_id};
pub use shard::{Membership, Sharding};

/// The examples of the crate's README.md, compiled and run as doctests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
