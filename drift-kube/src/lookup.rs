//! The cluster as an [`ObjectLookup`]: single ConfigMaps and Secrets read with a GET (not the
//! watch cache), for the Flux value sources a desired source does not find in Git.

use std::sync::Arc;

use drift_model::ResourceKey;
use drift_model::lookup::ObjectLookup;
use serde_json::Value;

use crate::K8sSource;

/// [`K8sSource::get_object`] as a synchronous lookup: each read runs on the runtime of `handle`
/// from a thread of its own, so it may be called from any thread (rendering runs on blocking
/// threads), and waits at most the client's own timeouts.
#[derive(Debug, Clone)]
pub struct ClusterLookup {
    source: Arc<K8sSource>,
    handle: tokio::runtime::Handle,
}

impl ClusterLookup {
    /// A lookup through `source`, on the runtime of `handle`.
    pub fn new(source: Arc<K8sSource>, handle: tokio::runtime::Handle) -> Self {
        ClusterLookup { source, handle }
    }
}

impl ObjectLookup for ClusterLookup {
    fn get(&self, kind: &str, namespace: &str, name: &str) -> Result<Option<Value>, String> {
        let key = ResourceKey {
            group: String::new(),
            kind: kind.to_owned(),
            namespace: Some(namespace.to_owned()),
            name: name.to_owned(),
        };
        let (source, handle) = (Arc::clone(&self.source), self.handle.clone());
        let read = std::thread::scope(|s| s.spawn(|| handle.block_on(source.get_object("v1", &key))).join());
        match read {
            Ok(Ok(found)) => Ok(found.map(|r| (*r.object).clone())),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("reading {kind} {namespace}/{name} panicked")),
        }
    }
}
