//! managedFields: one entry per (manager, operation, apiVersion, subresource), kept up to date
//! on every write, and server-side apply with field ownership and conflicts.
//!
//! An `Update` (create, update, non-apply patch) takes over the fields it added or changed,
//! which leave every other entry. An `Apply` owns exactly the fields of its configuration;
//! changing a field another manager owns to a different value is a conflict unless forced
//! (then the other manager loses it); fields the applier owned before and no longer applies are
//! removed from the object unless another manager owns them.

use serde_json::{Map, Value, json};

use crate::fieldset::{self, FieldSet, Path};
use crate::schema::{ListType, list_type, map_is_atomic};

/// One managedFields entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Field manager name.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// API version of the request.
    pub api_version: String,
    /// `status`, `scale` or empty.
    pub subresource: String,
    /// RFC 3339 time of the last change of this entry.
    pub time: String,
    /// Owned fields.
    pub fields: FieldSet,
}

impl Entry {
    fn same_slot(&self, other: &Slot<'_>) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.api_version == other.api_version
            && self.subresource == other.subresource
    }
}

/// Who writes: the entry a write is recorded under.
#[derive(Debug, Clone, Copy)]
pub struct Slot<'a> {
    /// Field manager.
    pub manager: &'a str,
    /// `Apply` or `Update`.
    pub operation: &'a str,
    /// API version of the request.
    pub api_version: &'a str,
    /// Subresource (`status`, `scale`) or empty.
    pub subresource: &'a str,
    /// Current time, RFC 3339 with seconds.
    pub time: &'a str,
}

/// The managedFields entries of an object.
pub fn decode(object: &Value) -> Vec<Entry> {
    let Some(items) = object.get("metadata").and_then(|m| m.get("managedFields")).and_then(Value::as_array) else {
        return Vec::new();
    };
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    items
        .iter()
        .map(|e| Entry {
            manager: s(e, "manager"),
            operation: s(e, "operation"),
            api_version: s(e, "apiVersion"),
            subresource: s(e, "subresource"),
            time: s(e, "time"),
            fields: FieldSet::from_fields_v1(e.get("fieldsV1").unwrap_or(&Value::Null)),
        })
        .collect()
}

/// Store entries into the object, in the API server's order (Apply before Update, then by
/// time, manager, apiVersion and subresource).
pub fn encode(object: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.fields.is_empty());
    entries.sort_by(|a, b| {
        (&a.operation, &a.time, &a.manager, &a.api_version, &a.subresource).cmp(&(
            &b.operation,
            &b.time,
            &b.manager,
            &b.api_version,
            &b.subresource,
        ))
    });
    let list: Vec<Value> = entries
        .into_iter()
        .map(|e| {
            let mut m = Map::new();
            m.insert("manager".into(), json!(e.manager));
            m.insert("operation".into(), json!(e.operation));
            m.insert("apiVersion".into(), json!(e.api_version));
            m.insert("time".into(), json!(e.time));
            m.insert("fieldsType".into(), json!("FieldsV1"));
            m.insert("fieldsV1".into(), e.fields.to_fields_v1());
            if !e.subresource.is_empty() {
                m.insert("subresource".into(), json!(e.subresource));
            }
            Value::Object(m)
        })
        .collect();
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// The serialised zero value of a kind: the nodes present in every object of that kind,
/// against which the fields of a create are compared.
pub fn skeleton(kind: &str) -> Value {
    let template = json!({"metadata": {"creationTimestamp": null}, "spec": {"containers": null}});
    match kind {
        "Deployment" => json!({"spec": {"selector": null, "template": template, "strategy": {}},
            "status": {}}),
        "StatefulSet" => json!({"spec": {"selector": null, "template": template,
            "serviceName": "", "updateStrategy": {}}, "status": {"replicas": 0, "availableReplicas": 0}}),
        "DaemonSet" => json!({"spec": {"selector": null, "template": template, "updateStrategy": {}},
            "status": {}}),
        "Job" => json!({"spec": {"template": template}, "status": {}}),
        "CronJob" => json!({"spec": {"schedule": "", "jobTemplate": {"metadata": {"creationTimestamp": null},
            "spec": {"template": template}}}, "status": {}}),
        "Service" | "Ingress" => json!({"spec": {}, "status": {"loadBalancer": {}}}),
        "PersistentVolumeClaim" => json!({"spec": {"resources": {}}, "status": {}}),
        "NetworkPolicy" => json!({"spec": {"podSelector": {}}}),
        "PodDisruptionBudget" => json!({"spec": {}, "status": {"currentHealthy": 0, "desiredHealthy": 0,
            "disruptionsAllowed": 0, "expectedPods": 0}}),
        "RoleBinding" | "ClusterRoleBinding" => {
            json!({"roleRef": {"apiGroup": "", "kind": "", "name": ""}})
        }
        "Role" | "ClusterRole" => json!({"rules": null}),
        "HorizontalPodAutoscaler" => json!({"spec": {"scaleTargetRef": {"kind": "", "name": ""},
            "maxReplicas": 0}, "status": {"desiredReplicas": 0}}),
        "Namespace" => json!({"spec": {}, "status": {}}),
        "CustomResourceDefinition" => json!({"spec": {"group": "", "names": {"plural": "", "kind": ""},
            "scope": "", "versions": null}, "status": {"acceptedNames": {"plural": "", "kind": ""},
            "storedVersions": null}}),
        _ => json!({}),
    }
}

/// Which part of the object a write may touch: `Some(false)` the main resource of a type with a
/// status subresource (status excluded), `Some(true)` the status subresource, `None` all.
pub type Scope = Option<bool>;

fn prune(entries: &mut [Entry], object: &Value) {
    let full = fieldset::trackable(object, None);
    for e in entries.iter_mut() {
        e.fields.0.retain(|p| fieldset::get(&full, p).is_some());
    }
}

/// Record an Update by `slot` that turned `old` (None on create) into `new`.
pub fn record_update(kind: &str, old: Option<&Value>, new: &mut Value, slot: Slot<'_>, scope: Scope) {
    let empty: Value;
    let (old_v, mut entries) = match old {
        Some(o) => (o, decode(o)),
        None => {
            empty = skeleton(kind);
            (&empty, Vec::new())
        }
    };
    // Every object has metadata: it is never an added node itself.
    let with_meta = |v: Value| {
        let mut v = v;
        if let Some(m) = v.as_object_mut()
            && !m.contains_key("metadata")
            && scope != Some(true)
        {
            m.insert("metadata".into(), json!({}));
        }
        v
    };
    let changed = fieldset::changed(
        kind,
        &with_meta(fieldset::trackable(old_v, scope)),
        &with_meta(fieldset::trackable(new, scope)),
    );
    for e in entries.iter_mut() {
        if !e.same_slot(&slot) {
            e.fields = e.fields.difference(&changed);
        }
    }
    if !changed.is_empty() {
        match entries.iter_mut().find(|e| e.same_slot(&slot)) {
            Some(e) => {
                e.fields = e.fields.union(&changed);
                e.time = slot.time.to_owned();
            }
            None => entries.push(Entry {
                manager: slot.manager.to_owned(),
                operation: slot.operation.to_owned(),
                api_version: slot.api_version.to_owned(),
                subresource: slot.subresource.to_owned(),
                time: slot.time.to_owned(),
                fields: changed,
            }),
        }
    }
    prune(&mut entries, new);
    encode(new, entries);
}

/// One field whose value an apply would change while another manager owns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The other manager.
    pub manager: String,
    /// Its API version.
    pub api_version: String,
    /// The field, as `.spec.replicas`.
    pub field: String,
}

/// Server-side apply of `applied` onto `live` (a full object; on create, an empty object with
/// apiVersion, kind and metadata). Returns the merged object with managedFields updated, before
/// defaulting; the caller defaults it afterwards.
pub fn server_side_apply(
    kind: &str,
    live: &Value,
    applied: &Value,
    slot: Slot<'_>,
    force: bool,
    scope: Scope,
) -> Result<Value, Vec<Conflict>> {
    let mut entries = decode(live);
    let applied_t = fieldset::trackable(applied, scope);
    let new_set = fieldset::set_of(kind, &applied_t);
    let mut merged = live.clone();
    let mut names = Vec::new();
    merge_applied(kind, &mut names, &mut merged, &applied_t);

    let mut conflicts = Vec::new();
    let mut forced: Vec<(usize, Path)> = Vec::new();
    for p in &new_set.0 {
        if new_set.has_children(p) {
            continue;
        }
        let before = fieldset::get(live, p);
        if before.is_none() || before == fieldset::get(&merged, p) {
            continue;
        }
        for (i, e) in entries.iter().enumerate() {
            if e.same_slot(&slot) || !e.fields.0.contains(p) {
                continue;
            }
            conflicts.push(Conflict {
                manager: e.manager.clone(),
                api_version: e.api_version.clone(),
                field: fieldset::display(p),
            });
            forced.push((i, p.clone()));
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflicts);
    }
    for (i, p) in forced {
        entries[i].fields.0.remove(&p);
    }

    // Fields this manager applied before and no longer applies.
    let previous = entries.iter().find(|e| e.same_slot(&slot)).map(|e| e.fields.clone()).unwrap_or_default();
    let dropped = previous.difference(&new_set);
    for p in &dropped.0 {
        let others_own = entries.iter().any(|e| !e.same_slot(&slot) && e.fields.has_prefix(p));
        if !others_own && !new_set.has_prefix(p) {
            fieldset::remove(&mut merged, p);
        }
    }

    match entries.iter_mut().find(|e| e.same_slot(&slot)) {
        Some(e) => {
            if e.fields != new_set {
                e.time = slot.time.to_owned();
            }
            e.fields = new_set;
        }
        None => entries.push(Entry {
            manager: slot.manager.to_owned(),
            operation: slot.operation.to_owned(),
            api_version: slot.api_version.to_owned(),
            subresource: slot.subresource.to_owned(),
            time: slot.time.to_owned(),
            fields: new_set,
        }),
    }
    prune(&mut entries, &merged);
    encode(&mut merged, entries);
    Ok(merged)
}

/// Merge an applied configuration into the live object: granular maps recursively,
/// associative lists by key, sets as unions, everything else replaced.
fn merge_applied(kind: &str, names: &mut Vec<String>, live: &mut Value, applied: &Value) {
    let path: Vec<&str> = names.iter().map(String::as_str).collect();
    match applied {
        Value::Object(am) if !map_is_atomic(kind, &path) => {
            if !live.is_object() {
                *live = Value::Object(Map::new());
            }
            let Some(lm) = live.as_object_mut() else { return };
            for (k, v) in am {
                names.push(k.clone());
                match lm.get_mut(k) {
                    Some(existing) => merge_applied(kind, names, existing, v),
                    None => {
                        let mut fresh = Value::Null;
                        merge_applied(kind, names, &mut fresh, v);
                        lm.insert(k.clone(), fresh);
                    }
                }
                names.pop();
            }
        }
        Value::Array(items) => match list_type(kind, &path) {
            ListType::Map { keys, .. } => {
                if !live.is_array() {
                    *live = Value::Array(Vec::new());
                }
                let Some(li) = live.as_array_mut() else { return };
                for item in items {
                    let key = fieldset::key_element(item, &keys);
                    match li.iter_mut().find(|l| fieldset::key_element(l, &keys) == key) {
                        Some(existing) => merge_applied(kind, names, existing, item),
                        None => li.push(item.clone()),
                    }
                }
            }
            ListType::Set => {
                if !live.is_array() {
                    *live = Value::Array(Vec::new());
                }
                let Some(li) = live.as_array_mut() else { return };
                for item in items {
                    if !li.contains(item) {
                        li.push(item.clone());
                    }
                }
            }
            ListType::Atomic => *live = applied.clone(),
        },
        other => *live = other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot<'a>(manager: &'a str, operation: &'a str) -> Slot<'a> {
        Slot { manager, operation, api_version: "v1", subresource: "", time: "2026-01-01T00:00:00Z" }
    }

    fn cm(labels: Value, data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": labels}, "data": data})
    }

    #[test]
    fn apply_removes_what_it_no_longer_applies() {
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        let first = cm(json!({"a": "1", "b": "2"}), json!({"k": "v"}));
        let merged = server_side_apply("ConfigMap", &live, &first, slot("m", "Apply"), false, None).unwrap();
        assert_eq!(merged["metadata"]["labels"], json!({"a": "1", "b": "2"}));
        let second = cm(json!({"a": "1"}), json!({"k": "v"}));
        let merged = server_side_apply("ConfigMap", &merged, &second, slot("m", "Apply"), false, None).unwrap();
        assert_eq!(merged["metadata"]["labels"], json!({"a": "1"}));
        let entries = decode(&merged);
        assert_eq!(entries.len(), 1);
        assert_eq!(
            entries[0].fields.to_fields_v1(),
            json!({"f:data": {"f:k": {}}, "f:metadata": {"f:labels": {"f:a": {}}}})
        );
    }

    #[test]
    fn update_takes_changed_fields_from_an_applier() {
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        let applied = cm(json!({"a": "1"}), json!({"k": "v"}));
        let mut merged = server_side_apply("ConfigMap", &live, &applied, slot("m", "Apply"), false, None).unwrap();
        let old = merged.clone();
        merged["data"]["k"] = json!("w");
        record_update("ConfigMap", Some(&old), &mut merged, slot("editor", "Update"), None);
        let entries = decode(&merged);
        let by = |m: &str| entries.iter().find(|e| e.manager == m).map(|e| e.fields.to_fields_v1());
        assert_eq!(by("editor"), Some(json!({"f:data": {"f:k": {}}})));
        assert_eq!(by("m"), Some(json!({"f:metadata": {"f:labels": {"f:a": {}}}})));
        // Now the applier conflicts with the editor on data.k.
        let again = cm(json!({"a": "1"}), json!({"k": "v"}));
        let err = server_side_apply("ConfigMap", &merged, &again, slot("m", "Apply"), false, None).unwrap_err();
        assert_eq!(err, vec![Conflict { manager: "editor".into(), api_version: "v1".into(), field: ".data.k".into() }]);
    }
}
