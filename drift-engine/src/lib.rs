//! # drift-engine
//!
//! The pure engine of the drift detector: objects made comparable ([`normalize`],
//! [`quantity`], [`merge_keys`]), compared ([`diff`], [`engine`]), each difference typed and
//! weighed ([`verdict`]) and attributed to its field manager ([`managed`], [`applied`]);
//! ignore rules ([`ignore`]), waivers written in Git ([`waiver`]), policy checks ([`policy`]),
//! objects no one manages ([`orphans`]), revert planning ([`revert`]) and the scan pass that
//! pairs desired and live objects into a report ([`scan`], [`matching`]); what merging a branch
//! would do to the cluster, from two reports ([`check`]); a classifier of drifts learned from the
//! team's decisions, measured on held-out ones ([`classify`]).
//!
//! No I/O: it works on the model's values (`drift-model`) and is used through the model's
//! [`Comparator`](drift_model::Comparator). `drift-core` re-exports it.
//!
//! ```
//! use drift_engine::Engine;
//! use drift_model::{Comparator, Resource};
//! let desired = Resource::from_object(serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
//!     "metadata": {"name": "web", "namespace": "shop"}, "spec": {"replicas": 3}})).unwrap();
//! let live = Resource::from_object(serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
//!     "metadata": {"name": "web", "namespace": "shop"}, "spec": {"replicas": 5}})).unwrap();
//! let drifts = Engine::default().compare(&desired, Some(&live));
//! assert_eq!(drifts[0].path, "spec.replicas");
//! ```
#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod applied;
pub mod check;
pub mod classify;
pub mod diff;
pub mod engine;
pub mod ignore;
pub mod managed;
pub mod matching;
pub mod merge_keys;
pub mod normalize;
pub mod orphans;
pub mod policy;
pub mod quantity;
pub mod revert;
pub mod scan;
pub mod verdict;
pub mod waiver;

pub use engine::{Engine, EngineConfig};
pub use policy::Policy;

/// The examples of the crate's README.md, compiled and run as doctests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
