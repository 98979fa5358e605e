//! The comparator trait: pure and synchronous.

use std::collections::HashMap;

use crate::drift::Drift;
use crate::model::{Resource, ResourceKey};

/// Compares desired objects with live ones.
///
/// Contract: pure, deterministic, no I/O; the returned drifts are sorted by path; Secret values
/// never appear in clear text in them.
pub trait Comparator: Send + Sync + std::fmt::Debug {
    /// Compares one desired object with its live counterpart (`None` when absent).
    fn compare(&self, desired: &Resource, live: Option<&Resource>) -> Vec<Drift>;

    /// Compares a whole desired set with the live objects. The default indexes live objects by
    /// key and calls [`Comparator::compare`] for each desired object; implementations may
    /// override it to use relations between objects (an autoscaler owning a target's replicas).
    /// Compares one desired object that belongs to a whole desired set (for watch mode, which
    /// re-compares only what changed). The default ignores the set; implementations use it for
    /// the same relations as [`Comparator::compare_all`].
    fn compare_in(&self, _all_desired: &[Resource], desired: &Resource, live: Option<&Resource>) -> Vec<Drift> {
        self.compare(desired, live)
    }

    /// The drift of a live object no desired object declares (`unmanaged_resource`), or `None`
    /// when it is not reported (an ignore rule names it). Called only for the candidates of
    /// [`crate::orphans::unmanaged`], when orphans are asked for. The default reports none.
    fn unmanaged(&self, live: &Resource) -> Option<Drift> {
        let _ = live;
        None
    }

    fn compare_all(&self, desired: &[Resource], live: &[Resource]) -> Vec<Drift> {
        let index: HashMap<&ResourceKey, &Resource> = live.iter().map(|r| (&r.key, r)).collect();
        desired.iter().flat_map(|d| self.compare(d, index.get(&d.key).copied())).collect()
    }
}
