//! A comparator of an integrator's own: the engine, with the drift types a team has decided
//! are not drift for it left out (a platform whose autoscalers or operators own replica counts
//! everywhere, say, leaves out `replicas_drift`).
//!
//! It implements [`drift_core::Comparator`] by wrapping [`drift_core::Engine`] and keeps the
//! trait's contract: pure, deterministic, drifts sorted by path (leaving some out keeps the
//! order), Secret values never in clear (the engine hashes them; nothing is added here).
//!
//! It forwards **every** method of the trait to the engine, not only
//! [`Comparator::compare`]: the engine overrides the set-wide ones
//! ([`Comparator::compare_all`], [`Comparator::relations`], [`Comparator::compare_some`]) to
//! judge an object with the others of its repository (an autoscaler owns its target's
//! replicas). A wrapper that forwarded `compare` alone would get the trait's defaults, which
//! compare each object alone, and report the replicas of an autoscaled Deployment as drift.
//!
//! ```
//! use drift_core::{Comparator, DriftType, Engine, Resource};
//! use drift_example_custom_comparator::LeaveOut;
//! use serde_json::json;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let web = |replicas: u32| Resource::from_object(json!({"apiVersion": "apps/v1", "kind": "Deployment",
//!     "metadata": {"name": "web", "namespace": "shop"}, "spec": {"replicas": replicas}}));
//! let comparator = LeaveOut::new(Engine::default(), [DriftType::ReplicasDrift]);
//! assert!(comparator.compare(&web(3)?, Some(&web(5)?)).is_empty());
//! assert_eq!(Engine::default().compare(&web(3)?, Some(&web(5)?)).len(), 1);
//! # Ok(())
//! # }
//! ```

use std::collections::{BTreeSet, HashSet};

use drift_core::{Comparator, Drift, DriftType, Engine, Resource, ResourceKey};

/// The engine, with the drifts of some types left out.
#[derive(Debug, Clone)]
pub struct LeaveOut {
    engine: Engine,
    types: BTreeSet<DriftType>,
}

impl LeaveOut {
    /// The engine's comparisons without the drifts of `types`.
    pub fn new(engine: Engine, types: impl IntoIterator<Item = DriftType>) -> Self {
        LeaveOut { engine, types: types.into_iter().collect() }
    }

    /// The types left out.
    pub fn types(&self) -> &BTreeSet<DriftType> {
        &self.types
    }

    fn keep(&self, mut drifts: Vec<Drift>) -> Vec<Drift> {
        drifts.retain(|d| !self.types.contains(&d.drift_type));
        drifts
    }
}

impl Comparator for LeaveOut {
    fn compare(&self, desired: &Resource, live: Option<&Resource>) -> Vec<Drift> {
        self.keep(self.engine.compare(desired, live))
    }

    fn compare_in(&self, all_desired: &[Resource], desired: &Resource, live: Option<&Resource>) -> Vec<Drift> {
        self.keep(self.engine.compare_in(all_desired, desired, live))
    }

    fn unmanaged(&self, live: &Resource) -> Option<Drift> {
        self.engine.unmanaged(live).filter(|d| !self.types.contains(&d.drift_type))
    }

    fn compare_all(&self, desired: &[Resource], live: &[Resource]) -> Vec<Drift> {
        self.keep(self.engine.compare_all(desired, live))
    }

    fn relations(&self, desired: &[Resource]) -> Option<HashSet<ResourceKey>> {
        // Leaving drifts out does not change which objects depend on others.
        self.engine.relations(desired)
    }

    fn compare_some(&self, desired: &[Resource], which: &[&Resource], live: &[Resource]) -> Vec<Drift> {
        self.keep(self.engine.compare_some(desired, which, live))
    }
}
