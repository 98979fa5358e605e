//! The object store: objects per resource type, one global resourceVersion counter, a bounded
//! history of changes for watches (older versions are answered with 410 Gone), and the
//! allocators of Service cluster IPs and node ports.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::defaults::Allocator;
use crate::resources::{self, ResourceType};

/// (group, plural)
pub type TypeKey = (String, String);
/// (namespace, name); namespace empty for cluster-scoped objects.
pub type ObjKey = (String, String);

/// One change, as watches see it.
#[derive(Debug, Clone)]
pub struct Change {
    /// resourceVersion of the change.
    pub rv: u64,
    /// Resource type.
    pub key: TypeKey,
    /// Namespace of the object (empty if cluster-scoped).
    pub namespace: String,
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub kind: &'static str,
    /// The object after the change (before it, for deletions, with the deletion's version).
    pub object: Value,
}

/// The whole state of the server.
#[derive(Debug)]
pub struct State {
    /// Last resourceVersion handed out.
    pub rv: u64,
    /// Known resource types (built-in, then from CRDs).
    pub types: Vec<ResourceType>,
    /// Objects. Insert and remove only through [`State::put`] and [`State::delete`], which keep
    /// `counts` and the history right (paginated lists rely on both).
    pub objects: BTreeMap<TypeKey, BTreeMap<ObjKey, Value>>,
    /// Number of objects per resource type and namespace ("" for cluster-scoped ones).
    counts: BTreeMap<TypeKey, BTreeMap<String, usize>>,
    /// Recent changes, oldest first.
    pub history: VecDeque<Arc<Change>>,
    /// Changes kept in `history`.
    pub history_limit: usize,
    /// Versions strictly below this one are compacted: watching from them is 410 Gone.
    pub compacted_below: u64,
    next_ip: u32,
    next_node_port: u16,
}

impl Allocator for State {
    fn cluster_ip(&mut self) -> String {
        // 10.96.0.0/12 as kubeadm's default; .1 is the kubernetes Service, start after it.
        self.next_ip += 1;
        let n = self.next_ip;
        format!("10.96.{}.{}", (n >> 8) & 0xff, n & 0xff)
    }

    fn node_port(&mut self) -> u16 {
        self.next_node_port += 1;
        if self.next_node_port > 32767 {
            self.next_node_port = 30000;
        }
        self.next_node_port
    }
}

impl State {
    /// A new state with the namespaces every cluster has.
    pub fn new(history_limit: usize) -> State {
        let mut s = State {
            rv: 0,
            types: resources::builtin(),
            objects: BTreeMap::new(),
            counts: BTreeMap::new(),
            history: VecDeque::new(),
            history_limit,
            compacted_below: 0,
            next_ip: 9,
            next_node_port: 29999,
        };
        let now = crate::now();
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let mut o = json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": ns, "uid": uuid::Uuid::new_v4().to_string(),
                    "creationTimestamp": now},
            });
            crate::defaults::apply("Namespace", &mut o);
            crate::defaults::prepare("Namespace", &mut o, None, &mut s);
            s.put(&(String::new(), "namespaces".into()), ("".into(), ns.into()), o);
        }
        s
    }

    /// Next resourceVersion.
    pub fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    /// The resource type with this group and plural name.
    pub fn find_type(&self, group: &str, plural: &str) -> Option<&ResourceType> {
        self.types.iter().find(|t| t.group == group && t.plural == plural)
    }

    /// Get an object.
    pub fn get(&self, key: &TypeKey, obj: &ObjKey) -> Option<&Value> {
        self.objects.get(key).and_then(|m| m.get(obj))
    }

    /// Store an object (its resourceVersion already set) and record the change.
    /// Returns the change for broadcasting.
    pub fn put(&mut self, key: &TypeKey, obj: ObjKey, mut object: Value) -> Arc<Change> {
        let rv = self.next_rv();
        if let Some(m) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("resourceVersion".into(), json!(rv.to_string()));
        }
        let existed = self.objects.entry(key.clone()).or_default().insert(obj.clone(), object.clone()).is_some();
        if !existed {
            *self.counts.entry(key.clone()).or_default().entry(obj.0.clone()).or_default() += 1;
        }
        self.record(Change {
            rv,
            key: key.clone(),
            namespace: obj.0,
            kind: if existed { "MODIFIED" } else { "ADDED" },
            object,
        })
    }

    /// Remove an object and record the change.
    pub fn delete(&mut self, key: &TypeKey, obj: &ObjKey) -> Option<(Value, Arc<Change>)> {
        let mut object = self.objects.get_mut(key)?.remove(obj)?;
        if let Some(n) = self.counts.get_mut(key).and_then(|c| c.get_mut(&obj.0)) {
            *n = n.saturating_sub(1);
        }
        let rv = self.next_rv();
        if let Some(m) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("resourceVersion".into(), json!(rv.to_string()));
        }
        let change = self.record(Change {
            rv,
            key: key.clone(),
            namespace: obj.0.clone(),
            kind: "DELETED",
            object: object.clone(),
        });
        Some((object, change))
    }

    /// Replace a stored object without recording a change (the caller records one next, as
    /// the deletion that completes a finalised object does). Absent objects are left absent.
    pub fn overwrite(&mut self, key: &TypeKey, obj: &ObjKey, object: Value) {
        if let Some(slot) = self.objects.get_mut(key).and_then(|m| m.get_mut(obj)) {
            *slot = object;
        }
    }

    /// Number of objects of a resource type, in one namespace or in all of them: O(namespaces).
    pub fn count(&self, key: &TypeKey, namespace: Option<&str>) -> usize {
        match (namespace, self.counts.get(key)) {
            (_, None) => 0,
            (Some(ns), Some(c)) => c.get(ns).copied().unwrap_or(0),
            (None, Some(c)) => c.values().sum(),
        }
    }

    /// The recorded changes after `rv`, oldest first (complete when `watchable_from(rv)`).
    pub fn changes_after(&self, rv: u64) -> impl Iterator<Item = &Arc<Change>> {
        let first = self.history.partition_point(|c| c.rv <= rv);
        self.history.range(first..)
    }

    fn record(&mut self, change: Change) -> Arc<Change> {
        let change = Arc::new(change);
        self.history.push_back(change.clone());
        while self.history.len() > self.history_limit {
            if let Some(old) = self.history.pop_front() {
                self.compacted_below = self.compacted_below.max(old.rv + 1);
            }
        }
        change
    }

    /// Forget all history: every resourceVersion before now becomes too old.
    pub fn compact(&mut self) {
        self.history.clear();
        self.compacted_below = self.rv + 1;
    }

    /// Whether watching from `rv` is still possible.
    pub fn watchable_from(&self, rv: u64) -> bool {
        // A watch from rv needs every change after rv; changes >= compacted_below are kept.
        rv + 1 >= self.compacted_below || rv >= self.rv
    }

    /// Refresh the resource types from the stored CRDs.
    pub fn refresh_custom_types(&mut self) {
        let mut types = resources::builtin();
        if let Some(crds) =
            self.objects.get(&("apiextensions.k8s.io".to_owned(), "customresourcedefinitions".to_owned()))
        {
            types.extend(crds.values().filter_map(resources::from_crd));
        }
        self.types = types;
    }
}
