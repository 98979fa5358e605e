//! Single objects read from the cluster for the desired state that depends on them: Flux's
//! `postBuild.substituteFrom` and a HelmRelease's `valuesFrom` name ConfigMaps and Secrets that
//! often live only in the cluster (made by the cluster's bootstrap, not kept in Git), and
//! kustomize-controller and helm-controller read them there. A desired source given an
//! [`ObjectLookup`] reads the ones it does not find in Git through it.
//!
//! The lookup is synchronous because rendering is (it runs on a blocking thread); an adapter
//! over an asynchronous client waits on its own thread. What it returns is held in memory only:
//! a Secret's values never reach a note, a log line or a file.

use std::fmt;

use serde_json::Value;

/// Reads one object of the cluster by kind, namespace and name.
pub trait ObjectLookup: Send + Sync + fmt::Debug {
    /// The object of the core group (`v1`) kind `kind` (`ConfigMap`, `Secret`) named
    /// `namespace/name`, as the cluster holds it; `Ok(None)` when the cluster has no such
    /// object. The error says why it could not be read (forbidden, unreachable), naming no value.
    fn get(&self, kind: &str, namespace: &str, name: &str) -> Result<Option<Value>, String>;
}

/// A fixed set of objects as a lookup (tests, and integrators whose cluster state is at hand).
#[derive(Debug, Default, Clone)]
pub struct StaticLookup(pub Vec<Value>);

impl ObjectLookup for StaticLookup {
    fn get(&self, kind: &str, namespace: &str, name: &str) -> Result<Option<Value>, String> {
        let at = |o: &Value, p: &str| o.pointer(p).and_then(Value::as_str).map(str::to_owned);
        Ok(self
            .0
            .iter()
            .find(|o| {
                at(o, "/kind").as_deref() == Some(kind)
                    && at(o, "/metadata/namespace").as_deref() == Some(namespace)
                    && at(o, "/metadata/name").as_deref() == Some(name)
            })
            .cloned())
    }
}
