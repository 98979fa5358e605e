//! How a scan holds its desired objects: as trees ([`Resource`]), or compact until each is
//! compared (`drift_manifest::KeptResource`).
//!
//! A desired object as a `serde_json::Value` tree costs about twelve times its YAML text (a
//! B-tree node with room for eleven entries per mapping). A scan that holds every desired
//! object whole for the time of a live read (`drift diff` over 10,000 real-sized Deployments:
//! 605 MiB for the desired side alone) keeps them as `drift_manifest::KeptResource` instead: the tree
//! written as compressed bytes that read back with nothing to scan, with the few facts a scan needs of every object worked out once (its digest, or a
//! fingerprint where the report is only printed, whether it is SOPS-encrypted, whether it carries waivers), expanded into a tree only while it is
//! compared or checked, and dropped again. The scan functions that take a
//! [`crate::DesiredSnapshot`] of either kind (`drift_engine::scan::compare_files_streamed`) give the
//! same report for both.

use std::borrow::Cow;
use std::collections::HashSet;

use crate::compare::Comparator;
use crate::{Provenance, Resource, ResourceKey};

/// A desired object as a scan holds it. Implemented by [`Resource`] (a tree, borrowed where a
/// tree is asked for) and `drift_manifest::KeptResource` (expanded where a tree is asked for).
pub trait DesiredObject {
    /// Identity.
    fn key(&self) -> &ResourceKey;
    /// Identity, for the namespace rules.
    fn key_mut(&mut self) -> &mut ResourceKey;
    /// Where it came from.
    fn provenance(&self) -> &Provenance;
    /// The object as a tree.
    fn tree(&self) -> Cow<'_, Resource>;
    /// The object as a tree, owned.
    fn into_tree(self) -> Resource;
    /// Whether the object is SOPS-encrypted ([`crate::secret::is_sops_encrypted`]).
    fn encrypted(&self) -> bool;
    /// The digest reported for it: of its encrypted document when it was opened from SOPS, of
    /// the object otherwise ([`crate::object_digest`]).
    fn digest(&self) -> String;
    /// Whether `again`, this object read again from where it came from, is the object held
    /// (the same digest, by default).
    fn same_as(&self, again: &Resource) -> bool {
        again.digest() == self.digest()
    }
    /// Whether it carries the waivers annotation ([`crate::waiver::WAIVERS_ANNOTATION`]).
    fn waived(&self) -> bool;
    /// `comparator`'s drifts of this object against a live object read as a tree
    /// ([`Comparator::compare_tree`] of its tree, by default). An object kept compact gives its
    /// tree to [`Comparator::compare_trees`] as it expands it, borrowing its bytes.
    fn compare_live(
        &self,
        comparator: &dyn Comparator,
        live: &crate::tree::ObjectTree<'_>,
    ) -> Vec<crate::drift::Drift> {
        comparator.compare_tree(&self.tree(), live)
    }
    /// Lets go of what its tree is made from, once its pair is compared and nothing else will
    /// ask for the tree; [`DesiredObject::held`] then says `false` until
    /// [`DesiredObject::restore`]. Trees are kept (the default does nothing).
    fn let_go(&mut self) {}
    /// Whether its tree can be had ([`DesiredObject::let_go`]).
    fn held(&self) -> bool {
        true
    }
    /// Holds `r` again after [`DesiredObject::let_go`] (the same object, read again).
    fn restore(&mut self, _again: &Resource) {}
    /// The trees of the objects of `all` that `keep` selects, in their order; objects held as
    /// trees are all lent whatever `keep` says (the callers ask for a superset of what they need).
    fn trees<'a>(all: &'a [Self], keep: &dyn Fn(&ResourceKey) -> bool) -> Cow<'a, [Resource]>
    where
        Self: Sized;
    /// [`Comparator::relations`] of the objects `all`, with the objects that make them. Trees
    /// are asked as a whole (`holders` is then empty: [`DesiredObject::trees`] lends every
    /// tree); objects kept compact are asked one at a time and the answers united (`None` if
    /// any says `None`), `holders` being the objects whose own answer is not empty. A kept
    /// object remembers its answer until its key changes.
    fn relations(all: &mut [Self], comparator: &dyn Comparator) -> Option<Relations>
    where
        Self: Sized;
}

/// What [`DesiredObject::relations`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Relations {
    /// The objects whose drifts depend on others ([`Comparator::relations`]).
    pub related: HashSet<ResourceKey>,
    /// The objects whose trees those comparisons need (for an autoscaler's target, the
    /// autoscaler), when the desired objects are not all trees.
    pub holders: HashSet<ResourceKey>,
}

/// The digest of a tree: of its encrypted document when it was opened from SOPS.
fn digest_of(r: &Resource) -> String {
    r.provenance.sops_digest.clone().unwrap_or_else(|| crate::object_digest(&r.object))
}

fn has_waivers(r: &Resource) -> bool {
    r.object.pointer("/metadata/annotations").and_then(|a| a.get(crate::waiver::WAIVERS_ANNOTATION)).is_some()
}

impl DesiredObject for Resource {
    fn key(&self) -> &ResourceKey {
        &self.key
    }

    fn key_mut(&mut self) -> &mut ResourceKey {
        &mut self.key
    }

    fn provenance(&self) -> &Provenance {
        &self.provenance
    }

    fn tree(&self) -> Cow<'_, Resource> {
        Cow::Borrowed(self)
    }

    fn into_tree(self) -> Resource {
        self
    }

    fn encrypted(&self) -> bool {
        crate::secret::is_sops_encrypted(&self.object)
    }

    fn digest(&self) -> String {
        digest_of(self)
    }

    fn waived(&self) -> bool {
        has_waivers(self)
    }

    fn trees<'a>(all: &'a [Self], _keep: &dyn Fn(&ResourceKey) -> bool) -> Cow<'a, [Resource]> {
        Cow::Borrowed(all)
    }

    fn relations(all: &mut [Self], comparator: &dyn Comparator) -> Option<Relations> {
        Some(Relations { related: comparator.relations(all)?, holders: HashSet::new() })
    }
}
