//! # drift-core
//!
//! The pure heart of the drift detector: the model, the traits every source and sink
//! implements, and the normalisation + diff engine. No I/O, no runtime, no network.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod act;
pub mod applied;
pub mod compare;
pub mod desired;
pub mod diff;
pub mod drift;
pub mod engine;
pub mod error;
pub mod ignore;
mod json_tree;
pub mod lease;
pub mod managed;
pub mod manifest;
pub mod matching;
pub mod memory;
pub mod merge_keys;
pub mod model;
pub mod normalize;
pub mod orphans;
pub mod path;
pub mod policy;
pub mod progress;
pub mod quantity;
pub mod remedy;
pub mod report;
pub mod scan;
pub mod secret;
pub mod sink;
pub mod sops;
pub mod source;
pub mod verdict;
pub mod waiver;
mod yaml;
mod yaml_lines;

/// The former name of [`verdict`]: the type rule table and the severity table.
#[deprecated(
    since = "0.1.0",
    note = "use `drift_core::verdict`, which also decides classification and recommended action"
)]
pub mod rules {
    pub use crate::verdict::{PathPattern, SeverityTable, TypeRule, drift_type_of, type_rules};
}

pub use act::{ActStore, DriftEvent, EventKind};
pub use compare::Comparator;
pub use desired::{DesiredObject, KeptResource};
pub use drift::{
    Attribution, Classification, DecisionSource, Drift, DriftType, RecommendedAction, ResourceRef, Severity,
    drift_fingerprint,
};
pub use engine::{Engine, EngineConfig};
pub use error::{Error, ErrorKind, Result};
pub use model::*;
pub use policy::{Finding, FindingType, Policy, PolicyConfig, Rule, Side};
pub use report::{Resolution, ScanOutcome, ScanReport, Summary, object_digest};
pub use sink::{DriftSink, DriftStore};
pub use source::{DesiredSource, LiveSource};
