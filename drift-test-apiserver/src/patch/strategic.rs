//! Strategic merge patch: maps merge recursively, lists merge by their `patchMergeKey` when
//! their `patchStrategy` is `merge` (containers by name, ports by containerPort, ...), other
//! lists are replaced; `null` deletes; the directives `$patch` (`replace`, `delete`, `merge`),
//! `$retainKeys`, `$setElementOrder/<list>` and `$deleteFromPrimitiveList/<list>` are honoured.

use serde_json::{Map, Value};

use crate::schema::{ListType, list_type, map_is_atomic};

/// Merge `patch` into `target` with the strategy of `kind`.
pub fn merge(kind: &str, target: &mut Value, patch: &Value) {
    let mut names = Vec::new();
    merge_at(kind, &mut names, target, patch);
}

/// Remove `$` directives from a value that is inserted as it is.
fn strip(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            Value::Object(m.iter().filter(|(k, _)| !k.starts_with('$')).map(|(k, v)| (k.clone(), strip(v))).collect())
        }
        Value::Array(items) => Value::Array(
            items.iter().filter(|i| i.get("$patch").and_then(Value::as_str) != Some("delete")).map(strip).collect(),
        ),
        other => other.clone(),
    }
}

fn merge_at(kind: &str, names: &mut Vec<String>, target: &mut Value, patch: &Value) {
    let Value::Object(pm) = patch else {
        *target = strip(patch);
        return;
    };
    let directive = pm.get("$patch").and_then(Value::as_str);
    let path: Vec<&str> = names.iter().map(String::as_str).collect();
    if directive == Some("replace") || !target.is_object() || map_is_atomic(kind, &path) {
        *target = strip(patch);
        return;
    }
    if directive == Some("delete") {
        *target = Value::Object(Map::new());
        return;
    }
    let retain: Option<Vec<String>> = pm
        .get("$retainKeys")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect());
    let mut orders: Vec<(String, Vec<Value>)> = Vec::new();
    let Some(tm) = target.as_object_mut() else {
        return;
    };
    for (k, v) in pm {
        if let Some(list) = k.strip_prefix("$setElementOrder/") {
            if let Value::Array(order) = v {
                orders.push((list.to_owned(), order.clone()));
            }
            continue;
        }
        if let Some(list) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(items)), Value::Array(del)) = (tm.get_mut(list), v) {
                items.retain(|i| !del.contains(i));
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        if v.is_null() {
            tm.remove(k);
            continue;
        }
        names.push(k.clone());
        match (tm.get_mut(k), v) {
            (Some(existing @ Value::Array(_)), Value::Array(items)) => {
                merge_list(kind, names, existing, items);
            }
            (Some(existing @ Value::Object(_)), Value::Object(_)) => {
                merge_at(kind, names, existing, v);
            }
            _ => {
                let mut fresh = Value::Object(Map::new());
                if v.is_object() {
                    merge_at(kind, names, &mut fresh, v);
                } else {
                    fresh = strip(v);
                }
                tm.insert(k.clone(), fresh);
            }
        }
        names.pop();
    }
    if let Some(keep) = retain {
        tm.retain(|k, _| keep.contains(k));
    }
    for (list, order) in orders {
        names.push(list.clone());
        let path: Vec<&str> = names.iter().map(String::as_str).collect();
        let lt = list_type(kind, &path);
        names.pop();
        if let Some(Value::Array(items)) = tm.get_mut(&list) {
            reorder(items, &order, &lt);
        }
    }
}

fn merge_list(kind: &str, names: &mut Vec<String>, target: &mut Value, patch: &[Value]) {
    let path: Vec<&str> = names.iter().map(String::as_str).collect();
    let lt = list_type(kind, &path);
    let Value::Array(items) = target else { return };
    if patch.iter().any(|p| p.get("$patch").and_then(Value::as_str) == Some("replace")) {
        *items = patch.iter().filter(|p| p.get("$patch").is_none()).map(strip).collect();
        return;
    }
    match lt {
        ListType::Atomic => *items = patch.iter().map(strip).collect(),
        ListType::Set => {
            for p in patch {
                if !items.contains(p) {
                    items.push(p.clone());
                }
            }
        }
        ListType::Map { merge_key, .. } => {
            for p in patch {
                let key = p.get(merge_key);
                let pos = items.iter().position(|i| key.is_some() && i.get(merge_key) == key);
                if p.get("$patch").and_then(Value::as_str) == Some("delete") {
                    if let Some(pos) = pos {
                        items.remove(pos);
                    }
                    continue;
                }
                match pos {
                    Some(pos) => merge_at(kind, names, &mut items[pos], p),
                    None => items.push(strip(p)),
                }
            }
        }
    }
}

fn reorder(items: &mut Vec<Value>, order: &[Value], lt: &ListType) {
    let rank = |item: &Value| -> Option<usize> {
        match lt {
            ListType::Map { merge_key, .. } => {
                order.iter().position(|o| o.get(*merge_key).is_some() && o.get(*merge_key) == item.get(*merge_key))
            }
            _ => order.iter().position(|o| o == item),
        }
    };
    let mut ranked: Vec<(usize, usize, Value)> =
        std::mem::take(items).into_iter().enumerate().map(|(i, v)| (rank(&v).unwrap_or(usize::MAX), i, v)).collect();
    ranked.sort_by_key(|(r, i, _)| (*r, *i));
    *items = ranked.into_iter().map(|(_, _, v)| v).collect();
}

#[cfg(test)]
mod tests {
    use super::merge;
    use serde_json::json;

    #[test]
    fn containers_merge_by_name() {
        let mut t = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}}}});
        merge(
            "Deployment",
            &mut t,
            &json!({"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "b:2"}]}}}}),
        );
        assert_eq!(
            t,
            json!({"spec": {"template": {"spec": {"containers": [
                {"name": "a", "image": "a:1"}, {"name": "b", "image": "b:2"}]}}}})
        );
    }

    #[test]
    fn directives() {
        let mut t = json!({"metadata": {"finalizers": ["x"], "labels": {"a": "1", "b": "2"}},
            "spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
              "template": {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}}});
        merge(
            "Deployment",
            &mut t,
            &json!({"metadata": {"finalizers": ["y"], "labels": {"a": null}},
              "spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": null},
                "template": {"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
                  "containers": [{"name": "c", "$patch": "delete"}]}}}}),
        );
        assert_eq!(
            t,
            json!({"metadata": {"finalizers": ["x", "y"], "labels": {"b": "2"}},
              "spec": {"strategy": {"type": "Recreate"},
                "template": {"spec": {"containers": [{"name": "b"}, {"name": "a"}]}}}})
        );
    }
}
