//! # drift-core
//!
//! The pure heart of the drift detector in one crate, as `kube` re-exports `kube-core`,
//! `kube-client` and `kube-runtime`: a facade over its three floors, each a crate of its own
//! that can be depended on alone (docs/architecture.md, "Floors"):
//!
//! - [`drift_model`]: the data (keys, resources, snapshots, drifts, reports, findings,
//!   waivers, ignore rules, errors) and the ports (sources, sinks and stores, comparator,
//!   outbox, decisions, audit, cluster writer, change proposer, lease, SOPS opener), with
//!   in-memory references;
//! - [`drift_manifest`]: manifests read as the detector compares them ([`manifest`]);
//! - [`drift_engine`]: normalisation, diff, ownership, verdicts, policies, ignore rules and
//!   waivers, revert planning, the scan pass.
//!
//! No I/O, no runtime, no network. Every module keeps the path it had before the split
//! (`drift_core::scan`, `drift_core::manifest::parse_manifests`, ...).
//!
//! ```
//! use drift_core::{Comparator, Engine};
//! let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: shop}\ndata: {a: '1'}\n";
//! let desired = drift_core::manifest::parse_manifests(text, "web.yaml").resources;
//! let live = drift_core::manifest::parse_manifests(&text.replace("'1'", "'2'"), "live.yaml").resources;
//! let drifts = Engine::default().compare(&desired[0], Some(&live[0]));
//! assert_eq!(drifts[0].path, "data.a");
//! ```
#![warn(missing_docs)]

pub use drift_engine;
pub use drift_manifest;
pub use drift_model;

pub use drift_manifest as manifest;
pub use drift_model::{
    act, compare, drift, error, hash_key, lease, memory, path, progress, report, secret, sink, source,
};

pub use drift_engine::{
    applied, check, diff, engine, ignore, managed, matching, merge_keys, normalize, orphans, policy, quantity, scan,
    verdict, waiver,
};
pub use drift_manifest::sops;

/// The data model: resources ([`drift_model::resource`]) and snapshots ([`drift_model::snapshot`]).
pub mod model {
    pub use drift_model::resource::*;
    pub use drift_model::snapshot::*;
}

/// Desired objects as a scan holds them: the model's [`drift_model::desired::DesiredObject`]
/// and the reader's [`drift_manifest::kept::KeptResource`].
pub mod desired {
    pub use drift_manifest::kept::*;
    pub use drift_model::desired::*;
}

/// Remediation: the model's data and ports ([`drift_model::remedy`]) and the engine's revert
/// planning ([`drift_engine::revert`]).
pub mod remedy {
    pub use drift_engine::revert::*;
}

/// The former name of [`verdict`]: the type rule table and the severity table.
#[deprecated(
    since = "0.1.0",
    note = "use `drift_core::verdict`, which also decides classification and recommended action"
)]
pub mod rules {
    pub use drift_engine::verdict::{PathPattern, SeverityTable, TypeRule, drift_type_of, type_rules};
}

pub use drift_engine::{Engine, EngineConfig, Policy};
pub use drift_manifest::KeptResource;
pub use drift_model::act::{ActStore, DriftEvent, EventKind};
pub use drift_model::compare::Comparator;
pub use drift_model::desired::DesiredObject;
pub use drift_model::drift::{
    Attribution, Classification, DecisionSource, Drift, DriftType, RecommendedAction, ResourceRef, Severity,
    drift_fingerprint,
};
pub use drift_model::error::{Error, ErrorKind, Result};
pub use drift_model::finding::{Finding, FindingType, PolicyConfig, Rule, Side};
pub use drift_model::report::{Resolution, ScanOutcome, ScanReport, Summary};
pub use drift_model::resource::*;
pub use drift_model::sink::{DriftSink, DriftStore};
pub use drift_model::snapshot::*;
pub use drift_model::source::{DesiredSource, LiveSource};

/// The examples of the crate's README.md, compiled and run as doctests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
