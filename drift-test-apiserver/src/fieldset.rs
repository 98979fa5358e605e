//! Field sets as managedFields records them (`FieldsV1`): `f:name` for a field, `k:{...}` for
//! an element of an associative list, `v:value` for an element of a set, and `.` for a node that
//! is itself a member of the set and has members below it.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::schema::{ListType, list_type, map_is_atomic};

/// One path: encoded path elements from the root.
pub type Path = Vec<String>;

/// A set of field paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet(pub BTreeSet<Path>);

impl FieldSet {
    /// Whether the set has no members.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Members of `self` that are not in `other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        FieldSet(self.0.difference(&other.0).cloned().collect())
    }

    /// Members of either.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        FieldSet(self.0.union(&other.0).cloned().collect())
    }

    /// Whether `path` or a path below it is a member.
    pub fn has_prefix(&self, path: &Path) -> bool {
        self.0.range(path.clone()..).next().is_some_and(|p| p.starts_with(path))
    }

    /// Whether some path strictly below `path` is a member.
    pub fn has_children(&self, path: &Path) -> bool {
        self.0.range(path.clone()..).find(|p| *p != path).is_some_and(|p| p.starts_with(path))
    }

    /// Encode as a FieldsV1 JSON object.
    pub fn to_fields_v1(&self) -> Value {
        let mut root = Map::new();
        for path in &self.0 {
            let mut node = &mut root;
            for (i, pe) in path.iter().enumerate() {
                let entry = node.entry(pe.clone()).or_insert_with(|| Value::Object(Map::new()));
                let Value::Object(m) = entry else { break };
                if i + 1 == path.len() && self.has_children(path) {
                    m.insert(".".into(), Value::Object(Map::new()));
                }
                node = m;
            }
        }
        sort_value(&mut Value::Object(root))
    }

    /// Decode a FieldsV1 JSON object.
    pub fn from_fields_v1(v: &Value) -> FieldSet {
        fn walk(v: &Value, prefix: &mut Path, out: &mut BTreeSet<Path>) {
            let Some(m) = v.as_object() else { return };
            if (m.is_empty() || m.contains_key(".")) && !prefix.is_empty() {
                out.insert(prefix.clone());
            }
            for (k, child) in m {
                if k == "." {
                    continue;
                }
                prefix.push(k.clone());
                walk(child, prefix, out);
                prefix.pop();
            }
        }
        let mut out = BTreeSet::new();
        walk(v, &mut Vec::new(), &mut out);
        FieldSet(out)
    }
}

/// Sort object keys so that `.` comes first, then `f:`, `k:`, `v:` entries in order.
fn sort_value(v: &mut Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(String, Value)> = std::mem::take(m).into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, mut v)| (k, sort_value(&mut v))).collect())
        }
        other => other.clone(),
    }
}

/// The encoded `k:` element of an associative list item.
pub fn key_element(item: &Value, keys: &[&str]) -> String {
    let mut sorted: Vec<&str> = keys.to_vec();
    sorted.sort_unstable();
    let mut m = Map::new();
    for k in sorted {
        let v = match item.get(k) {
            Some(v) => v.clone(),
            // The schema default of the list-map keys that have one.
            None if k == "protocol" => Value::String("TCP".into()),
            None => continue,
        };
        m.insert(k.to_owned(), v);
    }
    format!("k:{}", Value::Object(m))
}

/// The encoded `v:` element of a set item.
pub fn value_element(item: &Value) -> String {
    format!("v:{item}")
}

/// Strip the fields that managedFields never tracks, and status or everything but status.
pub fn trackable(object: &Value, status_only: Option<bool>) -> Value {
    let mut o = object.clone();
    if let Some(m) = o.as_object_mut() {
        m.remove("apiVersion");
        m.remove("kind");
        match status_only {
            Some(true) => m.retain(|k, _| k == "status"),
            Some(false) => {
                m.remove("status");
            }
            None => {}
        }
        if let Some(Value::Object(meta)) = m.get_mut("metadata") {
            for k in [
                "name",
                "namespace",
                "uid",
                "resourceVersion",
                "generation",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "managedFields",
                "selfLink",
                "generateName",
            ] {
                meta.remove(k);
            }
            if meta.is_empty() {
                m.remove("metadata");
            }
        }
    }
    o
}

struct Walker<'a> {
    kind: &'a str,
    names: Vec<String>,
    path: Path,
    out: BTreeSet<Path>,
}

impl Walker<'_> {
    fn names(&self) -> Vec<&str> {
        self.names.iter().map(String::as_str).collect()
    }

    fn insert(&mut self) {
        if !self.path.is_empty() {
            self.out.insert(self.path.clone());
        }
    }

    fn with<R>(&mut self, name: Option<&str>, pe: String, f: impl FnOnce(&mut Self) -> R) -> R {
        if let Some(n) = name {
            self.names.push(n.to_owned());
        }
        self.path.push(pe);
        let r = f(self);
        self.path.pop();
        if name.is_some() {
            self.names.pop();
        }
        r
    }

    /// ToFieldSet: leaves, list items and empty maps.
    fn set_of(&mut self, v: &Value) {
        match v {
            Value::Object(m) if !map_is_atomic(self.kind, &self.names()) && !m.is_empty() => {
                for (k, child) in m {
                    self.with(Some(k), format!("f:{k}"), |w| w.set_of(child));
                }
            }
            Value::Array(items) if !items.is_empty() => match list_type(self.kind, &self.names()) {
                ListType::Map { keys, .. } => {
                    for item in items {
                        let pe = key_element(item, &keys);
                        self.with(None, pe, |w| {
                            w.insert();
                            w.set_of(item);
                        });
                    }
                }
                ListType::Set => {
                    for item in items {
                        self.with(None, value_element(item), |w| w.insert());
                    }
                }
                ListType::Atomic => self.insert(),
            },
            _ => self.insert(),
        }
    }

    /// Every node of `v` under the current path, as added fields.
    fn added(&mut self, v: &Value) {
        self.insert();
        match v {
            Value::Object(m) if !map_is_atomic(self.kind, &self.names()) => {
                for (k, child) in m {
                    self.with(Some(k), format!("f:{k}"), |w| w.added(child));
                }
            }
            Value::Array(items) => match list_type(self.kind, &self.names()) {
                ListType::Map { keys, .. } => {
                    for item in items {
                        let pe = key_element(item, &keys);
                        self.with(None, pe, |w| w.added(item));
                    }
                }
                ListType::Set => {
                    for item in items {
                        self.with(None, value_element(item), |w| w.insert());
                    }
                }
                ListType::Atomic => {}
            },
            _ => {}
        }
    }

    /// The fields added or modified from `old` to `new`.
    fn changed(&mut self, old: Option<&Value>, new: &Value) {
        let Some(old) = old else {
            self.added(new);
            return;
        };
        let names = self.names();
        match new {
            Value::Object(m) if !map_is_atomic(self.kind, &names) => {
                let om = match old {
                    Value::Object(om) => Some(om),
                    Value::Null => None,
                    _ => {
                        self.added(new);
                        return;
                    }
                };
                if m.is_empty() && old != new {
                    self.insert();
                }
                for (k, child) in m {
                    let oc = match om {
                        Some(om) => om.get(k),
                        None => None,
                    };
                    self.with(Some(k), format!("f:{k}"), |w| w.changed(oc, child));
                }
            }
            Value::Array(items) => match list_type(self.kind, &names) {
                ListType::Map { keys, .. } => {
                    let old_items = old.as_array();
                    for item in items {
                        let pe = key_element(item, &keys);
                        let oi = old_items.and_then(|oi| oi.iter().find(|o| key_element(o, &keys) == pe));
                        self.with(None, pe, |w| w.changed(oi, item));
                    }
                }
                ListType::Set => {
                    let old_items = old.as_array();
                    for item in items {
                        if !old_items.is_some_and(|o| o.contains(item)) {
                            self.with(None, value_element(item), |w| w.insert());
                        }
                    }
                }
                ListType::Atomic => {
                    if old != new {
                        self.insert();
                    }
                }
            },
            _ => {
                if old != new {
                    self.insert();
                }
            }
        }
    }
}

/// The field set of an applied configuration (what an Apply manager owns).
pub fn set_of(kind: &str, v: &Value) -> FieldSet {
    let mut w = Walker { kind, names: Vec::new(), path: Vec::new(), out: BTreeSet::new() };
    w.set_of(v);
    FieldSet(w.out)
}

/// The fields added or modified from `old` to `new` (what an Update manager takes over).
pub fn changed(kind: &str, old: &Value, new: &Value) -> FieldSet {
    let mut w = Walker { kind, names: Vec::new(), path: Vec::new(), out: BTreeSet::new() };
    w.changed(Some(old), new);
    FieldSet(w.out)
}

/// The value at an encoded path, if present.
pub fn get<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = v;
    for pe in path {
        cur = step(cur, pe)?;
    }
    Some(cur)
}

fn step<'a>(cur: &'a Value, pe: &str) -> Option<&'a Value> {
    if let Some(name) = pe.strip_prefix("f:") {
        return cur.as_object()?.get(name);
    }
    let items = cur.as_array()?;
    if let Some(key) = pe.strip_prefix("k:") {
        let key: Map<String, Value> = serde_json::from_str(key).ok()?;
        let keys: Vec<&str> = key.keys().map(String::as_str).collect();
        return items.iter().find(|i| key_element(i, &keys) == pe);
    }
    if let Some(val) = pe.strip_prefix("v:") {
        let val: Value = serde_json::from_str(val).ok()?;
        return items.iter().find(|i| **i == val);
    }
    None
}

/// Remove the node at an encoded path, if present.
pub fn remove(v: &mut Value, path: &[String]) {
    let Some((last, parent_path)) = path.split_last() else {
        return;
    };
    let mut cur = v;
    for pe in parent_path {
        cur = match step_mut(cur, pe) {
            Some(n) => n,
            None => return,
        };
    }
    if let Some(name) = last.strip_prefix("f:") {
        if let Some(m) = cur.as_object_mut() {
            m.remove(name);
        }
        return;
    }
    let Some(pos) = cur.as_array().and_then(|items| items.iter().position(|i| step_item_matches(i, last))) else {
        return;
    };
    if let Some(items) = cur.as_array_mut() {
        items.remove(pos);
    }
}

fn step_item_matches(item: &Value, pe: &str) -> bool {
    if let Some(key) = pe.strip_prefix("k:") {
        let Ok(key) = serde_json::from_str::<Map<String, Value>>(key) else {
            return false;
        };
        let keys: Vec<&str> = key.keys().map(String::as_str).collect();
        return key_element(item, &keys) == pe;
    }
    if let Some(val) = pe.strip_prefix("v:") {
        return serde_json::from_str::<Value>(val).is_ok_and(|v| v == *item);
    }
    false
}

fn step_mut<'a>(cur: &'a mut Value, pe: &str) -> Option<&'a mut Value> {
    if let Some(name) = pe.strip_prefix("f:") {
        return cur.as_object_mut()?.get_mut(name);
    }
    cur.as_array_mut()?.iter_mut().find(|i| step_item_matches(i, pe))
}

/// Human form of a path for conflict messages: `.spec.replicas`,
/// `.spec.containers[name="nginx"].image`.
pub fn display(path: &[String]) -> String {
    let mut s = String::new();
    for pe in path {
        if let Some(n) = pe.strip_prefix("f:") {
            s.push('.');
            s.push_str(n);
        } else if let Some(k) = pe.strip_prefix("k:") {
            let parts: Vec<String> = serde_json::from_str::<Map<String, Value>>(k)
                .map(|m| m.iter().map(|(k, v)| format!("{k}={v}")).collect())
                .unwrap_or_default();
            s.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(v) = pe.strip_prefix("v:") {
            s.push_str(&format!("[={v}]"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn roundtrip_fields_v1() {
        let v = json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"a\"}": {".": {}, "f:image": {}}}}});
        let s = FieldSet::from_fields_v1(&v);
        assert_eq!(s.to_fields_v1(), v);
    }

    #[test]
    fn changed_marks_added_nodes() {
        let old = json!({"spec": {"strategy": {}}});
        let new = json!({"spec": {"strategy": {"type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": "25%"}}, "replicas": 1}});
        let s = changed("Deployment", &old, &new);
        assert_eq!(
            s.to_fields_v1(),
            json!({"f:spec": {"f:replicas": {}, "f:strategy": {
                "f:rollingUpdate": {".": {}, "f:maxSurge": {}}, "f:type": {}}}})
        );
    }

    #[test]
    fn get_and_remove_by_key() {
        let mut v = json!({"spec": {"containers": [{"name": "a", "image": "x"},
            {"name": "b", "image": "y"}]}});
        let p: Path = vec!["f:spec".into(), "f:containers".into(), "k:{\"name\":\"b\"}".into(), "f:image".into()];
        assert_eq!(get(&v, &p), Some(&json!("y")));
        remove(&mut v, &p[..3]);
        assert_eq!(v, json!({"spec": {"containers": [{"name": "a", "image": "x"}]}}));
        assert_eq!(display(&p), ".spec.containers[name=\"b\"].image");
    }
}
