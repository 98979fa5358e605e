//! Drift paths on parsed objects: reading the value at a path, finding a list item by its
//! merge key or position, and applying a change to a copy (what an edited file must parse to).

use drift_model::path::Seg;
use serde_json::{Map, Value};

/// The text of a scalar as the engine writes merge-key values (`80`, `TCP`, `true`).
pub(crate) fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Whether a list item has the merge key of a path segment (a hidden key field may be absent:
/// it then has its default value).
fn item_matches(item: &Value, key: &[(String, String)], hidden: &[bool]) -> bool {
    key.iter().enumerate().all(|(i, (field, text))| match item.get(field).filter(|v| !v.is_null()) {
        Some(v) => scalar_text(v).as_deref() == Some(text.as_str()),
        None => hidden.get(i).copied().unwrap_or(false),
    })
}

/// The index in `list` of the item a segment names: by merge key when it has one, else by
/// position.
pub(crate) fn find_item(list: &[Value], seg: &Seg) -> Option<usize> {
    match seg {
        Seg::Item { key, hidden, index } => {
            if key.is_empty() {
                (*index < list.len()).then_some(*index)
            } else {
                list.iter().position(|item| item_matches(item, key, hidden))
            }
        }
        Seg::Field(_) => None,
    }
}

/// The value at a path, if every step exists.
pub(crate) fn get<'v>(value: &'v Value, path: &[Seg]) -> Option<&'v Value> {
    let mut cur = value;
    for seg in path {
        cur = match seg {
            Seg::Field(f) => cur.as_object()?.get(f)?,
            Seg::Item { .. } => {
                let list = cur.as_array()?;
                &list[find_item(list, seg)?]
            }
        };
    }
    Some(cur)
}

/// A merge-key value read back from its text: a number or boolean when it reads as one.
pub(crate) fn key_value(text: &str) -> Value {
    match serde_json::from_str::<Value>(text) {
        Ok(v @ (Value::Number(_) | Value::Bool(_))) => v,
        _ => Value::String(text.to_owned()),
    }
}

/// What a missing part of a path becomes: nested mappings, and a list item carrying its merge
/// key fields.
pub(crate) fn build(path: &[Seg], leaf: &Value) -> Value {
    let Some((first, rest)) = path.split_first() else {
        return leaf.clone();
    };
    match first {
        Seg::Field(f) => {
            let mut m = Map::new();
            m.insert(f.clone(), build(rest, leaf));
            Value::Object(m)
        }
        Seg::Item { .. } => Value::Array(vec![new_item(first, rest, leaf)]),
    }
}

/// A new list item for `seg` whose content below it is `rest` = `leaf`.
pub(crate) fn new_item(seg: &Seg, rest: &[Seg], leaf: &Value) -> Value {
    let mut item = build(rest, leaf);
    if let (Seg::Item { key, hidden, .. }, Value::Object(m)) = (seg, &mut item) {
        for (i, (field, text)) in key.iter().enumerate() {
            if !m.contains_key(field) && !hidden.get(i).copied().unwrap_or(false) {
                m.insert(field.clone(), key_value(text));
            }
        }
    }
    item
}

/// Applies one change to `value`: sets the value at `path` (creating what is missing) or,
/// with `None`, removes it. Errors name the step that cannot be walked.
pub(crate) fn apply(value: &mut Value, path: &[Seg], new: Option<&Value>) -> Result<(), String> {
    let Some((first, rest)) = path.split_first() else {
        match new {
            Some(v) => *value = v.clone(),
            None => return Err("the whole object cannot be removed".into()),
        }
        return Ok(());
    };
    match first {
        Seg::Field(f) => {
            if value.is_null() && new.is_some() {
                *value = Value::Object(Map::new());
            }
            let Some(m) = value.as_object_mut() else {
                return Err(format!("`{f}` is looked up in a value that is not a mapping"));
            };
            if rest.is_empty() {
                match new {
                    Some(v) => {
                        m.insert(f.clone(), v.clone());
                    }
                    None => {
                        m.remove(f);
                    }
                }
                return Ok(());
            }
            match m.get_mut(f) {
                Some(child) => apply(child, rest, new),
                None => {
                    if let Some(v) = new {
                        m.insert(f.clone(), build(rest, v));
                    }
                    Ok(())
                }
            }
        }
        Seg::Item { .. } => {
            if value.is_null() && new.is_some() {
                *value = Value::Array(Vec::new());
            }
            let Some(list) = value.as_array_mut() else {
                return Err("a list item is looked up in a value that is not a list".into());
            };
            match find_item(list, first) {
                Some(i) if rest.is_empty() => {
                    match new {
                        Some(v) => list[i] = v.clone(),
                        None => {
                            list.remove(i);
                        }
                    }
                    Ok(())
                }
                Some(i) => apply(&mut list[i], rest, new),
                None => {
                    if let Some(v) = new {
                        list.push(new_item(first, rest, v));
                    }
                    Ok(())
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use drift_model::path::Path;
    use serde_json::json;

    use super::*;

    fn web() -> Path {
        Path::root()
            .field("spec")
            .field("containers")
            .item(vec![("name".into(), "web".into())], vec![false], 5)
            .field("image")
    }

    #[test]
    fn items_are_found_by_merge_key_and_missing_parts_are_built() {
        let mut obj = json!({"spec": {"containers": [{"name": "side"}, {"name": "web", "image": "a"}]}});
        assert_eq!(get(&obj, web().segments()), Some(&json!("a")));
        apply(&mut obj, web().segments(), Some(&json!("b"))).unwrap();
        assert_eq!(obj["spec"]["containers"][1]["image"], "b");
        let port = Path::root()
            .field("spec")
            .field("ports")
            .item(vec![("port".into(), "80".into()), ("protocol".into(), "TCP".into())], vec![false, true], 0)
            .field("name");
        apply(&mut obj, port.segments(), Some(&json!("http"))).unwrap();
        assert_eq!(obj["spec"]["ports"], json!([{"port": 80, "name": "http"}]));
        assert_eq!(get(&obj, port.segments()), Some(&json!("http")), "a hidden default key field matches");
        apply(&mut obj, web().segments(), None).unwrap();
        assert_eq!(obj["spec"]["containers"][1], json!({"name": "web"}));
    }
}
