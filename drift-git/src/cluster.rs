//! The ConfigMaps and Secrets a Flux object reads (`substituteFrom`, `valuesFrom`): from the
//! revision's objects, else from the cluster when the source was given a
//! [`drift_model::lookup::ObjectLookup`] (as kustomize-controller and helm-controller read
//! them: from the cluster). A snapshot that read the cluster is not kept between fetches (the
//! cluster may change without a commit).

use std::sync::atomic::{AtomicBool, Ordering};

use drift_model::Resource;
use drift_model::lookup::ObjectLookup;
use serde_json::Value;

/// The cluster, when a lookup was given, and whether it was read.
#[derive(Clone, Copy)]
pub(crate) struct ClusterRead<'a> {
    pub lookup: Option<&'a dyn ObjectLookup>,
    pub consulted: &'a AtomicBool,
}

/// Where a source was found.
pub(crate) enum Found {
    Git(Value),
    Cluster(Value),
    /// Neither in Git nor (when there is a lookup) in the cluster: the message says where it
    /// was looked for.
    Missing(String),
    /// The cluster could not be read: why.
    Unreadable(String),
}

impl ClusterRead<'static> {
    /// No cluster: sources are looked for in Git only.
    #[cfg(test)]
    pub(crate) fn none() -> ClusterRead<'static> {
        static UNUSED: AtomicBool = AtomicBool::new(false);
        ClusterRead { lookup: None, consulted: &UNUSED }
    }
}

impl ClusterRead<'_> {
    /// The object `kind` (`ConfigMap`, `Secret`) `namespace/name`.
    pub(crate) fn find<'r>(
        &self,
        objects: impl IntoIterator<Item = &'r Resource>,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Found {
        let in_git = objects.into_iter().find(|r| {
            r.key.group.is_empty()
                && r.key.kind == kind
                && r.key.name == name
                && r.key.namespace.as_deref() == Some(namespace)
        });
        if let Some(r) = in_git {
            return Found::Git((*r.object).clone());
        }
        let Some(lookup) = self.lookup else {
            return Found::Missing("is not in Git".to_owned());
        };
        self.consulted.store(true, Ordering::Relaxed);
        match lookup.get(kind, namespace, name) {
            Ok(Some(object)) => Found::Cluster(object),
            Ok(None) => Found::Missing("is neither in Git nor in the cluster".to_owned()),
            Err(e) => Found::Unreadable(format!("is not in Git and cannot be read from the cluster: {e}")),
        }
    }
}
