//! Snapshots: the desired state of one repository at one revision, the live state of one
//! cluster, what a live read should cover ([`Scope`]) and what it did cover ([`Coverage`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::desired::DesiredObject;
use crate::resource::{GroupKind, Resource, ResourceKey, SourceWarning, is_cluster_scoped};

/// The desired state read from one repository at one revision. Its objects are trees
/// ([`Resource`], the default), or kept compact until compared (`drift_manifest::KeptResource`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DesiredSnapshot<T = Resource> {
    /// Repository name or URL.
    pub repository: String,
    /// Revision read (commit id, or a content hash for plain folders).
    pub revision: Option<String>,
    /// The objects.
    pub resources: Vec<T>,
    /// Files or documents that could not be read.
    pub warnings: Vec<SourceWarning>,
}

impl<T> Default for DesiredSnapshot<T> {
    fn default() -> Self {
        DesiredSnapshot { repository: String::new(), revision: None, resources: Vec::new(), warnings: Vec::new() }
    }
}

impl<T: DesiredObject> DesiredSnapshot<T> {
    /// The live scope this desired state implies: every (group, kind, namespace) it names.
    pub fn scope(&self) -> Scope {
        let mut scope = self.kind_scope();
        scope.only = Some(self.resources.iter().map(|r| r.key().clone()).collect());
        scope
    }

    /// The (group, kind, namespace) pairs of [`DesiredSnapshot::scope`] alone, without the
    /// objects ([`Scope::only`] is `None`): what a coverage is made of. (The pairs are found
    /// among borrowed keys first: a few owned ones for tens of thousands of objects.)
    pub fn kind_scope(&self) -> Scope {
        let mut pairs: Vec<(&str, &str, Option<&str>)> = self
            .resources
            .iter()
            .map(|r| {
                let k = r.key();
                (k.group.as_str(), k.kind.as_str(), k.namespace.as_deref())
            })
            .collect();
        pairs.sort_unstable();
        pairs.dedup();
        let mut scope = Scope::default();
        for (group, kind, namespace) in pairs {
            scope.insert(GroupKind::new(group, kind), namespace.map(str::to_owned));
        }
        scope
    }
}

impl DesiredSnapshot {
    /// Places objects without a namespace in `namespace`, unless their kind is known to be
    /// cluster-scoped. This is what `kubectl apply` does with the namespace of the context.
    pub fn default_namespace(&mut self, namespace: &str) {
        for r in &mut self.resources {
            if r.key.namespace.is_none() && !is_cluster_scoped(&r.key.group, &r.key.kind) {
                r.key.namespace = Some(namespace.to_owned());
            }
        }
    }
}

/// What a live read should cover: for each group/kind, the namespaces (or `None` for
/// cluster-scoped kinds).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    /// Namespaces per group/kind; a `None` entry means cluster-scoped.
    pub entries: BTreeMap<GroupKind, BTreeSet<Option<String>>>,
    /// The objects the caller will compare, when it knows them ([`DesiredSnapshot::scope`]
    /// does). A live source reads each (kind, namespace) whole, so its coverage is unchanged,
    /// but it may drop the other objects as it reads them, which keeps a fetch of a cluster
    /// much larger than Git in the memory of what Git names. `None`: keep every object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only: Option<BTreeSet<ResourceKey>>,
}

impl Scope {
    /// Adds a (kind, namespace) pair.
    pub fn insert(&mut self, gk: GroupKind, namespace: Option<String>) {
        self.entries.entry(gk).or_default().insert(namespace);
    }
    /// Whether the scope names this (kind, namespace).
    pub fn contains(&self, gk: &GroupKind, namespace: Option<&str>) -> bool {
        self.entries.get(gk).is_some_and(|ns| ns.contains(&namespace.map(str::to_owned)))
    }
    /// Every (kind, namespace) pair, sorted.
    pub fn pairs(&self) -> impl Iterator<Item = (&GroupKind, Option<&str>)> {
        self.entries.iter().flat_map(|(gk, nss)| nss.iter().map(move |ns| (gk, ns.as_deref())))
    }
    /// Whether nothing is in scope.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// Whether the caller wants this object (see [`Scope::only`]).
    pub fn wants(&self, key: &ResourceKey) -> bool {
        self.only.as_ref().is_none_or(|only| only.contains(key))
    }
}

/// How well a live read covered one (kind, namespace).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum CoverageStatus {
    /// Every object was read.
    Complete,
    /// The credentials may not read it (403).
    Forbidden {
        /// Why.
        message: String,
    },
    /// The kind is not served by the cluster (404, unknown kind, CRD missing).
    NotServed {
        /// Why.
        message: String,
    },
    /// The read failed (timeout, 5xx after retries, dropped connection).
    Failed {
        /// Why.
        message: String,
    },
}

impl CoverageStatus {
    /// Whether the read was complete.
    pub fn is_complete(&self) -> bool {
        matches!(self, CoverageStatus::Complete)
    }
    /// A short label (`complete`, `forbidden`, `not_served`, `failed`).
    pub fn label(&self) -> &'static str {
        match self {
            CoverageStatus::Complete => "complete",
            CoverageStatus::Forbidden { .. } => "forbidden",
            CoverageStatus::NotServed { .. } => "not_served",
            CoverageStatus::Failed { .. } => "failed",
        }
    }
}

/// Coverage of one (kind, namespace) pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoverageEntry {
    /// API group.
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Namespace, `None` for cluster-scoped kinds.
    pub namespace: Option<String>,
    /// Outcome.
    #[serde(flatten)]
    pub status: CoverageStatus,
}

/// Coverage of a live read: the outcome for each (kind, namespace) in scope.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "CoverageAsRead")]
pub struct Coverage {
    /// One entry per (kind, namespace), sorted by group, kind and namespace (`None` first):
    /// [`Coverage::set`] keeps them so, a coverage read (deserialized) is sorted, and
    /// [`Coverage::status`] finds a pair by binary search (a comparison asks for every object:
    /// a scan through the entries cost tens of millions of instructions at 10,000 objects in
    /// 80 pairs, and grows with objects times namespaces).
    pub entries: Vec<CoverageEntry>,
}

/// A coverage as it is read, its entries in any order.
#[derive(Deserialize)]
struct CoverageAsRead {
    entries: Vec<CoverageEntry>,
}

impl From<CoverageAsRead> for Coverage {
    fn from(read: CoverageAsRead) -> Self {
        let mut entries = read.entries;
        // Of a pair given twice, the first counts, as a scan through them found it (the sort
        // is stable, and the later ones go).
        entries.sort_by(|a, b| Coverage::pair_of(a).cmp(&Coverage::pair_of(b)));
        entries.dedup_by(|later, first| Coverage::pair_of(later) == Coverage::pair_of(first));
        Coverage { entries }
    }
}

impl Coverage {
    /// An entry's (group, kind, namespace), borrowed: the order of the entries.
    fn pair_of(e: &CoverageEntry) -> (&str, &str, Option<&str>) {
        (&e.group, &e.kind, e.namespace.as_deref())
    }

    /// Where a pair is among the entries, or where it would go.
    fn find(&self, group: &str, kind: &str, namespace: Option<&str>) -> Result<usize, usize> {
        self.entries.binary_search_by(|e| Coverage::pair_of(e).cmp(&(group, kind, namespace)))
    }

    /// Records the outcome for a pair, replacing an earlier one.
    pub fn set(&mut self, gk: &GroupKind, namespace: Option<&str>, status: CoverageStatus) {
        match self.find(&gk.group, &gk.kind, namespace) {
            Ok(at) => self.entries[at].status = status,
            Err(at) => self.entries.insert(
                at,
                CoverageEntry {
                    group: gk.group.clone(),
                    kind: gk.kind.clone(),
                    namespace: namespace.map(str::to_owned),
                    status,
                },
            ),
        }
    }

    /// Marks every pair of a scope complete (for sources that read everything at once).
    pub fn complete(scope: &Scope) -> Self {
        Coverage::all(scope, &CoverageStatus::Complete)
    }

    /// Coverage of a source that reads everything at once (files): every pair of the scope
    /// complete when every file was read; when some part could not be read (the `fatal`
    /// warnings), every pair failed with their reasons, since the broken part may hold any
    /// object, which then must not look missing.
    pub fn of_whole_read(scope: &Scope, warnings: &[SourceWarning]) -> Self {
        let fatal: Vec<String> = warnings.iter().filter(|w| w.fatal).map(ToString::to_string).collect();
        if fatal.is_empty() {
            return Coverage::complete(scope);
        }
        let message = format!("the live state could not be read completely: {}", fatal.join("; "));
        Coverage::all(scope, &CoverageStatus::Failed { message })
    }

    fn all(scope: &Scope, status: &CoverageStatus) -> Self {
        let mut c = Coverage::default();
        for (gk, ns) in scope.pairs() {
            c.set(gk, ns, status.clone());
        }
        c
    }

    /// The status of a (kind, namespace); `None` when it was not in scope. An entry for a
    /// cluster-wide read (`namespace: None`) of a namespaced kind covers every namespace.
    pub fn status(&self, group: &str, kind: &str, namespace: Option<&str>) -> Option<&CoverageStatus> {
        let at = self.find(group, kind, namespace).or_else(|_| self.find(group, kind, None)).ok()?;
        Some(&self.entries[at].status)
    }

    /// Whether the (kind, namespace) was read completely.
    pub fn is_complete(&self, group: &str, kind: &str, namespace: Option<&str>) -> bool {
        self.status(group, kind, namespace).is_some_and(CoverageStatus::is_complete)
    }

    /// Entries that were not read completely.
    pub fn incomplete(&self) -> impl Iterator<Item = &CoverageEntry> {
        self.entries.iter().filter(|e| !e.status.is_complete())
    }
}

/// Live state read from one cluster for a scope.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LiveSnapshot {
    /// Cluster name.
    pub cluster: String,
    /// The objects found, with managedFields.
    pub resources: Vec<Resource>,
    /// What was read completely and what was not.
    pub coverage: Coverage,
}

/// Custom kinds (not in the built-in table, [`crate::is_cluster_scoped`]) of which `live`
/// holds objects and all of them name no namespace, sorted: the kinds a live state read from
/// files shows to be cluster-scoped.
pub fn cluster_scoped_in(live: &[Resource]) -> Vec<GroupKind> {
    let mut kinds: BTreeMap<GroupKind, bool> = BTreeMap::new();
    for r in live.iter().filter(|r| !is_cluster_scoped(&r.key.group, &r.key.kind)) {
        *kinds.entry(r.key.group_kind()).or_insert(true) &= r.key.namespace.is_none();
    }
    kinds.into_iter().filter_map(|(gk, none)| none.then_some(gk)).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn object(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Resource {
        let mut metadata = serde_json::json!({ "name": name });
        if let Some(ns) = namespace {
            metadata["namespace"] = ns.into();
        }
        Resource::from_object(serde_json::json!({ "apiVersion": api_version, "kind": kind, "metadata": metadata }))
            .unwrap()
    }

    /// The status of a pair as a scan through the entries found it: the exact pair's first
    /// entry, else the kind's first cluster-wide entry.
    fn scanned<'a>(
        entries: &'a [CoverageEntry],
        group: &str,
        kind: &str,
        ns: Option<&str>,
    ) -> Option<&'a CoverageStatus> {
        let first = |ns: Option<&str>| {
            entries.iter().find(|e| e.group == group && e.kind == kind && e.namespace.as_deref() == ns)
        };
        first(ns).or_else(|| first(None)).map(|e| &e.status)
    }

    fn status(n: u8) -> CoverageStatus {
        match n % 3 {
            0 => CoverageStatus::Complete,
            1 => CoverageStatus::Forbidden { message: format!("f{n}") },
            _ => CoverageStatus::Failed { message: format!("x{n}") },
        }
    }

    fn pair() -> impl proptest::strategy::Strategy<Value = (String, String, Option<String>)> {
        ("(|apps|batch)", "(Deployment|Job|ConfigMap)", proptest::option::of("(a|b|c|kube-system)"))
    }

    proptest::proptest! {
        /// A coverage read in any order, pairs given twice included, answers every pair as a
        /// scan through the entries as given did; one made by `set` in any order is sorted and
        /// answers with each pair's last status.
        #[test]
        fn a_coverage_answers_as_a_scan_through_its_entries(
            given in proptest::collection::vec((pair(), 0u8..9), 0..24),
            asked in proptest::collection::vec(pair(), 0..12),
        ) {
            let entries: Vec<CoverageEntry> = given
                .iter()
                .map(|((group, kind, namespace), n)| CoverageEntry {
                    group: group.clone(),
                    kind: kind.clone(),
                    namespace: namespace.clone(),
                    status: status(*n),
                })
                .collect();
            let read: Coverage = serde_json::from_value(serde_json::json!({ "entries": entries })).unwrap();
            let mut made = Coverage::default();
            for e in &entries {
                made.set(&GroupKind::new(&e.group, &e.kind), e.namespace.as_deref(), e.status.clone());
            }
            let last: Vec<CoverageEntry> = entries.iter().rev().cloned().collect();
            for (group, kind, ns) in asked.iter().chain(given.iter().map(|(p, _)| p)) {
                let ns = ns.as_deref();
                proptest::prop_assert_eq!(read.status(group, kind, ns), scanned(&entries, group, kind, ns));
                proptest::prop_assert_eq!(made.status(group, kind, ns), scanned(&last, group, kind, ns));
            }
            let sorted = |c: &Coverage| c.entries.windows(2).all(|w| Coverage::pair_of(&w[0]) < Coverage::pair_of(&w[1]));
            proptest::prop_assert!(sorted(&read) && sorted(&made));
        }
    }

    /// The kind scope is the scope's (group, kind, namespace) pairs, each once, whatever the
    /// order and repetitions of the objects, and names no object.
    #[test]
    fn the_kind_scope_is_the_scopes_pairs_without_its_objects() {
        let resources = vec![
            object("apps/v1", "Deployment", Some("b"), "web"),
            object("v1", "ConfigMap", Some("a"), "x"),
            object("apps/v1", "Deployment", Some("a"), "web"),
            object("apps/v1", "Deployment", Some("b"), "api"),
            object("rbac.authorization.k8s.io/v1", "ClusterRole", None, "reader"),
            object("v1", "ConfigMap", Some("a"), "y"),
            object("apps/v1", "Deployment", Some("b"), "web"),
        ];
        let snapshot = DesiredSnapshot { resources, ..DesiredSnapshot::default() };
        let kinds = snapshot.kind_scope();
        assert_eq!(kinds.only, None);
        let pairs: Vec<(String, Option<&str>)> = kinds.pairs().map(|(gk, ns)| (gk.to_string(), ns)).collect();
        assert_eq!(
            pairs,
            [
                ("ConfigMap".to_owned(), Some("a")),
                ("apps/Deployment".to_owned(), Some("a")),
                ("apps/Deployment".to_owned(), Some("b")),
                ("rbac.authorization.k8s.io/ClusterRole".to_owned(), None),
            ]
        );
        let scope = snapshot.scope();
        assert_eq!(scope.entries, kinds.entries);
        assert_eq!(scope.only.unwrap().len(), 6, "the objects, each key once");
    }
}
