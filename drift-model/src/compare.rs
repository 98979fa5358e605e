//! The comparator trait: pure and synchronous.

use std::collections::{HashMap, HashSet};

use crate::drift::Drift;
use crate::{Resource, ResourceKey};

/// Compares desired objects with live ones.
///
/// Contract: pure, deterministic, no I/O; the returned drifts are sorted by path; Secret values
/// never appear in clear text in them.
pub trait Comparator: Send + Sync + std::fmt::Debug {
    /// Compares one desired object with its live counterpart (`None` when absent).
    fn compare(&self, desired: &Resource, live: Option<&Resource>) -> Vec<Drift>;

    /// [`Comparator::compare`] of `desired` with a live object read as a tree
    /// ([`crate::tree::ObjectTree`]: front ends that read live objects only to compare them, as
    /// `drift diff --live` does). The default makes the tree a [`Resource`] and calls
    /// [`Comparator::compare`]; a comparator that walks trees overrides it, with the same drifts.
    fn compare_tree(&self, desired: &Resource, live: &crate::tree::ObjectTree<'_>) -> Vec<Drift> {
        self.compare(desired, Some(&live.to_resource()))
    }

    /// [`Comparator::compare_tree`] of a desired object given as a tree too (a desired object
    /// kept compact, expanded into a tree borrowing its bytes while it is compared). The
    /// default makes it a [`Resource`]; a comparator that walks trees overrides it, with the
    /// same drifts.
    fn compare_trees(&self, desired: crate::tree::ObjectRef<'_, '_>, live: &crate::tree::ObjectTree<'_>) -> Vec<Drift> {
        self.compare_tree(&desired.to_resource(), live)
    }

    /// Compares one desired object that belongs to a whole desired set (for watch mode, which
    /// re-compares only what changed). The default ignores the set; implementations use it for
    /// the same relations as [`Comparator::compare_all`].
    fn compare_in(&self, _all_desired: &[Resource], desired: &Resource, live: Option<&Resource>) -> Vec<Drift> {
        self.compare(desired, live)
    }

    /// The drift of a live object no desired object declares (`unmanaged_resource`), or `None`
    /// when it is not reported (an ignore rule names it). Called only for the candidates of
    /// `drift_engine::orphans::unmanaged`, when orphans are asked for. The default reports none.
    fn unmanaged(&self, live: &Resource) -> Option<Drift> {
        let _ = live;
        None
    }

    /// Compares a whole desired set with the live objects. The default indexes live objects by
    /// key and calls [`Comparator::compare`] for each desired object; implementations may
    /// override it to use relations between objects (an autoscaler owning a target's replicas).
    fn compare_all(&self, desired: &[Resource], live: &[Resource]) -> Vec<Drift> {
        let index: HashMap<&ResourceKey, &Resource> = live.iter().map(|r| (&r.key, r)).collect();
        desired.iter().flat_map(|d| self.compare(d, index.get(&d.key).copied())).collect()
    }

    /// The desired objects whose drifts depend on other objects of the set
    /// [`Comparator::compare_all`] is given (the target of an autoscaler: its replicas are the
    /// autoscaler's), or `None` when any object may depend on the set (the default, safe for an
    /// implementation that overrides `compare_all`).
    ///
    /// With `Some`, every other object `d` gets from [`Comparator::compare`]`(d, live)` exactly
    /// the drifts `compare_all` gives it, whatever else the set holds, and the set of a subset
    /// of `desired` is a subset of this one. A scan then compares each of those objects as soon
    /// as its live state is read and lets the live object go (`drift_engine::scan::run_scan`), and
    /// these ones at the end with [`Comparator::compare_some`].
    ///
    /// A desired side kept compact (`drift_manifest::KeptResource`) asks each object alone and unites
    /// the answers, and gives [`Comparator::compare_some`] as `desired` the objects named and the
    /// objects that named them, not the whole set: the set should be the union of what each
    /// object alone gives (as an autoscaler names its target).
    fn relations(&self, desired: &[Resource]) -> Option<HashSet<ResourceKey>> {
        let _ = desired;
        None
    }

    /// [`Comparator::relations`] of one desired object given as a tree (a desired object read
    /// as one and kept compact). The default makes it a [`Resource`]; a comparator that can tell
    /// from the object's key overrides it, with the same answer.
    fn relations_tree(&self, desired: crate::tree::ObjectRef<'_, '_>) -> Option<HashSet<ResourceKey>> {
        self.relations(std::slice::from_ref(&desired.to_resource()))
    }

    /// Compares the objects `which` of a whole desired set `desired` with the live objects
    /// `live`: for each of them the drifts [`Comparator::compare_all`]`(desired, live)` gives it.
    /// The default calls [`Comparator::compare_in`] for each.
    fn compare_some(&self, desired: &[Resource], which: &[&Resource], live: &[Resource]) -> Vec<Drift> {
        let index: HashMap<&ResourceKey, &Resource> = live.iter().map(|r| (&r.key, r)).collect();
        which.iter().flat_map(|d| self.compare_in(desired, d, index.get(&d.key).copied())).collect()
    }
}
