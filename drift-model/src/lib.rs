//! # drift-model
//!
//! The data of the drift detector and the ports every adapter implements, the floor every other
//! crate stands on (docs/architecture.md, "Floors"):
//!
//! - the data: keys and resources ([`resource`]), snapshots and coverage ([`snapshot`]), drifts ([`drift`]),
//!   scan reports ([`report`]), policy findings ([`finding`]), waivers ([`waiver`]), ignore
//!   rules ([`ignore`]), drift paths ([`path`]), documents read as trees that borrow their text
//!   and what a comparison reads of a document ([`tree`]), errors ([`error`]);
//! - the ports: desired and live sources ([`source`]), sinks and the read side of a store
//!   ([`sink`]), the comparator ([`compare`]), the outbox, decisions and the audit trail
//!   ([`outbox`], [`decision`], [`audit`]; [`act`] the three together), the cluster writer and the change proposer ([`remedy`]), the lease
//!   ([`lease`]), the SOPS opener ([`sops`]), where the key of the Secret-value hash is kept ([`hash_key`]);
//! - an in-memory reference implementation of the sources and the store ([`memory`]).
//!
//! No I/O, no runtime, no parsing, no engine: reading manifests is `drift-manifest`,
//! comparing is `drift-engine`, and `drift-core` re-exports all three.
//!
//! ```
//! use drift_model::{Resource, ResourceKey};
//! let r = Resource::from_object(serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
//!     "metadata": {"name": "web", "namespace": "shop"}})).unwrap();
//! assert_eq!(r.key, ResourceKey::new("apps", "Deployment", Some("shop"), "web"));
//! ```
#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod act;
pub mod audit;
pub mod compare;
pub mod decision;
pub mod desired;
pub mod drift;
pub mod error;
pub mod fields;
pub mod finding;
pub mod hash_key;
pub mod identity;
pub mod ignore;
pub mod lease;
pub mod lookup;
pub mod memory;
pub mod outbox;
pub mod path;
pub mod prediction;
pub mod progress;
pub mod remedy;
pub mod report;
pub mod resource;
pub mod secret;
pub mod sink;
pub mod snapshot;
pub mod sops;
pub mod source;
pub mod tree;
pub mod waiver;

pub use act::{ActStore, DriftEvent, EventKind};
pub use compare::Comparator;
pub use desired::DesiredObject;
pub use drift::{
    Attribution, Classification, DecisionSource, Drift, DriftType, RecommendedAction, ResourceRef, Severity,
    drift_fingerprint,
};
pub use error::{Error, ErrorKind, Result};
pub use finding::{Finding, FindingType, PolicyConfig, Rule, Side};
pub use identity::{AuditIntake, ChangeIdentities, ChangeIdentity};
pub use report::{Resolution, ScanOutcome, ScanReport, Summary};
pub use resource::*;
pub use sink::{DriftSink, DriftStore};
pub use snapshot::*;
pub use source::{DesiredSource, LiveSource};

/// The examples of the crate's README.md, compiled and run as doctests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
