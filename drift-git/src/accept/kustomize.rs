//! Accepting into a Kustomize overlay: the value is changed where it comes from.
//!
//! In order: the last patch of the overlay's kustomization (`patches:`,
//! `patchesStrategicMerge:`, `patchesJson6902:`, from a file of the overlay's folder or inline)
//! that sets the value is edited in place; else a resource file inside the overlay's own
//! folder that defines the object; else the change goes into a new strategic-merge patch
//! `drift-accept-<kind>-<name>.yaml` in the overlay, listed under `patches:`. A file outside
//! the overlay's folder (a base other overlays may share) is never edited.

use std::path::Path as FsPath;

use drift_model::path::Seg;
use drift_model::{Error, ResourceKey, Result};
use serde_json::{Map, Value, json};

use super::yaml::{self, Change};
use super::{AcceptPlan, FieldChange, Placed, change_of, current, put_edit, value};
use crate::edit::FileEdit;
use crate::render::KUSTOMIZATION_FILES;
use crate::tree::join_relative;

/// Kinds whose lists strategic merge merges by key (built-in API groups); other kinds'
/// lists are replaced whole.
const BUILTIN_GROUPS: &[&str] = &[
    "",
    "apps",
    "batch",
    "autoscaling",
    "policy",
    "networking.k8s.io",
    "rbac.authorization.k8s.io",
    "storage.k8s.io",
    "scheduling.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
];

/// A patch of the kustomization: where its text is, what it targets.
#[derive(Debug)]
struct Patch {
    /// Repository-relative file, or `None` for an inline patch.
    file: Option<String>,
    /// For an inline patch: its path inside the kustomization document.
    inline_at: Vec<Seg>,
    text: String,
    target: Option<Value>,
}

fn within(path: &str, dir: &str) -> bool {
    dir.is_empty() || path.starts_with(&format!("{dir}/"))
}

fn field(s: &str) -> Seg {
    Seg::Field(s.to_owned())
}

fn index(i: usize) -> Seg {
    Seg::Item { key: Vec::new(), hidden: Vec::new(), index: i }
}

/// The patches of a kustomization document, in the order kustomize applies them.
fn patches(root: &FsPath, dir: &str, k: &Value) -> Vec<Patch> {
    let mut out = Vec::new();
    let mut add = |entry: &Value, at: Vec<Seg>, target: Option<Value>| {
        let (file, text, inline_at) = match entry {
            Value::String(s) if s.contains('\n') => (None, s.clone(), at),
            Value::String(p) => (join_relative(dir, p), String::new(), Vec::new()),
            Value::Object(m) => match (m.get("path").and_then(Value::as_str), m.get("patch").and_then(Value::as_str)) {
                (Some(p), _) => (join_relative(dir, p), String::new(), Vec::new()),
                (None, Some(inline)) => {
                    let mut at = at;
                    at.push(field("patch"));
                    (None, inline.to_owned(), at)
                }
                _ => return,
            },
            _ => return,
        };
        let text = match &file {
            Some(f) => std::fs::read_to_string(root.join(f)).unwrap_or_default(),
            None => text,
        };
        out.push(Patch { file, inline_at, text, target });
    };
    for (list, with_target) in [("patchesStrategicMerge", false), ("patchesJson6902", true), ("patches", true)] {
        if let Some(items) = k.get(list).and_then(Value::as_array) {
            for (i, item) in items.iter().enumerate() {
                let target = if with_target { item.get("target").cloned() } else { None };
                add(item, vec![field(list), index(i)], target);
            }
        }
    }
    out
}

fn target_matches(target: &Value, key: &ResourceKey, names: &[&str]) -> bool {
    let s = |k: &str| target.get(k).and_then(Value::as_str);
    s("kind").is_none_or(|k| k == key.kind)
        && s("group").is_none_or(|g| g == key.group)
        && s("name").is_none_or(|n| names.contains(&n))
        && s("namespace").is_none_or(|n| key.namespace.as_deref() == Some(n))
}

/// The object's names as a patch may write them: rendered, and without the overlay's
/// `namePrefix` / `nameSuffix`.
fn names(k: &Value, rendered: &str) -> Vec<String> {
    let prefix = k.get("namePrefix").and_then(Value::as_str).unwrap_or("");
    let suffix = k.get("nameSuffix").and_then(Value::as_str).unwrap_or("");
    let mut out = vec![rendered.to_owned()];
    if let Some(base) = rendered.strip_prefix(prefix).and_then(|n| n.strip_suffix(suffix))
        && base != rendered
        && !base.is_empty()
    {
        out.push(base.to_owned());
    }
    out
}

/// The JSON pointer of a path, list items by their index in `object`.
fn pointer(object: &Value, path: &[Seg]) -> Option<String> {
    let mut cur = object;
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Field(f) => {
                out.push('/');
                out.push_str(&f.replace('~', "~0").replace('/', "~1"));
                cur = cur.get(f).unwrap_or(&Value::Null);
            }
            Seg::Item { .. } => {
                let list = cur.as_array()?;
                let i = value::find_item(list, seg)?;
                out.push_str(&format!("/{i}"));
                cur = &list[i];
            }
        }
    }
    Some(out)
}

/// Where in a patch's text (document `Option<usize>` of a YAML stream; the whole text for a
/// JSON 6902 list) the change goes, and the path there.
struct InPatch {
    select: Box<dyn Fn(&Value) -> bool>,
    changes: Vec<(Vec<Seg>, Option<Value>)>,
}

/// Whether `patch` sets the value at `path` of the object; if so, how to edit it.
fn sets(patch: &Patch, key: &ResourceKey, names: &[String], object: &Value, c: &FieldChange) -> Option<InPatch> {
    let path = c.path.segments();
    let names_ref: Vec<&str> = names.iter().map(String::as_str).collect();
    if patch.target.as_ref().is_some_and(|t| !target_matches(t, key, &names_ref)) {
        return None;
    }
    let docs: Vec<Value> =
        yaml::documents(&patch.text).iter().filter_map(|d| yaml::parse(&patch.text[d.clone()]).ok()).collect();
    if let [Value::Array(ops)] = docs.as_slice() {
        // JSON 6902: an add/replace op whose path is the drift path or one of its parents.
        patch.target.as_ref()?;
        let full = pointer(object, path)?;
        for (i, op) in ops.iter().enumerate().rev() {
            let kind = op.get("op").and_then(Value::as_str)?;
            let at = op.get("path").and_then(Value::as_str)?;
            if !matches!(kind, "add" | "replace") {
                continue;
            }
            if at == full {
                let changes = match &c.value {
                    Some(v) => vec![(vec![index(i), field("value")], Some(v.clone()))],
                    None if kind == "add" => vec![(vec![index(i)], None)],
                    None => vec![
                        (vec![index(i), field("op")], Some(json!("remove"))),
                        (vec![index(i), field("value")], None),
                    ],
                };
                return Some(InPatch { select: Box::new(|_| true), changes });
            }
            if full.starts_with(&format!("{at}/")) {
                // The op sets a parent: the rest of the path inside its value.
                let depth = at.matches('/').count();
                let mut rest = vec![index(i), field("value")];
                rest.extend(path[depth..].iter().cloned());
                return Some(InPatch { select: Box::new(|_| true), changes: vec![(rest, c.value.clone())] });
            }
        }
        return None;
    }
    // Strategic merge: the document for the object that has the path.
    for doc in docs.iter().rev() {
        let kind_ok = doc.get("kind").and_then(Value::as_str) == Some(key.kind.as_str());
        let name = doc.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
        let by_name = kind_ok && names.iter().any(|n| n == name);
        if !(by_name || (patch.target.is_some() && kind_ok)) {
            continue;
        }
        if value::get(doc, path).is_some() {
            let name = name.to_owned();
            let kind = key.kind.clone();
            let change = match &c.value {
                Some(v) => Some(v.clone()),
                // Strategic merge deletes a field set to null (the base may set it too).
                None => Some(Value::Null),
            };
            return Some(InPatch {
                select: Box::new(move |d: &Value| {
                    d.get("kind").and_then(Value::as_str) == Some(kind.as_str())
                        && d.pointer("/metadata/name").and_then(Value::as_str) == Some(name.as_str())
                }),
                changes: vec![(path.to_vec(), change)],
            });
        }
    }
    None
}

/// Edits the patch text (JSON stays JSON); returns its new text.
fn edit_patch_text(text: &str, place: &InPatch) -> std::result::Result<String, String> {
    let changes: Vec<(&[Seg], Change<'_>)> = place.changes.iter().map(|(p, v)| (p.as_slice(), change_of(v))).collect();
    if text.trim_start().starts_with(['[', '{']) && serde_json::from_str::<Value>(text).is_ok() {
        return yaml::edit_json(text, &changes);
    }
    yaml::edit_file(text, &*place.select, &changes)
}

pub(super) fn plan(
    root: &FsPath,
    dir: &str,
    key: &ResourceKey,
    object: &Value,
    changes: &[FieldChange],
) -> Result<AcceptPlan> {
    let kfile = KUSTOMIZATION_FILES
        .iter()
        .map(|f| if dir.is_empty() { (*f).to_owned() } else { format!("{dir}/{f}") })
        .find(|p| root.join(p).is_file())
        .ok_or_else(|| Error::not_found(format!("no kustomization file in `{dir}`")))?;
    let ktext = super::read(root, &kfile)?;
    let k = yaml::parse(&ktext).map_err(|e| Error::invalid_input(format!("{kfile}: {e}")))?;
    let names = names(&k, &key.name);
    let names_ref: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut plan = AcceptPlan::default();
    let mut leftover: Vec<&FieldChange> = Vec::new();
    let all = patches(root, dir, &k);
    let new_file = format!(
        "{}drift-accept-{}-{}.yaml",
        if dir.is_empty() { String::new() } else { format!("{dir}/") },
        key.kind.to_ascii_lowercase(),
        names.last().map_or(key.name.as_str(), String::as_str)
    );
    'changes: for c in changes {
        let shown = c.path.to_string();
        for patch in all.iter().rev() {
            let Some(place) = sets(patch, key, &names, object, c) else { continue };
            match &patch.file {
                Some(f) if !within(f, dir) => {
                    return Err(Error::unsupported(format!(
                        "{key}: `{shown}` is set by the patch {f}, outside the overlay `{dir}` (possibly shared); it is not edited"
                    )));
                }
                Some(f) => {
                    let text = current(root, &plan.edits, f)?;
                    let out = edit_patch_text(&text, &place)
                        .map_err(|e| Error::unsupported(format!("cannot edit the patch {f}: {e}")))?;
                    put_edit(&mut plan.edits, FileEdit { path: f.clone(), content: out.into_bytes(), created: false });
                    plan.placed.push(Placed { path: shown, file: f.clone(), how: format!("overlay patch {f}") });
                }
                None => {
                    // An inline patch: edit its text, then the string in the kustomization.
                    let ktext = current(root, &plan.edits, &kfile)?;
                    let kv = yaml::parse(&ktext).map_err(|e| Error::invalid_input(format!("{kfile}: {e}")))?;
                    let inline = value::get(&kv, &patch.inline_at).and_then(Value::as_str).unwrap_or(&patch.text);
                    let out = edit_patch_text(inline, &place)
                        .map_err(|e| Error::unsupported(format!("cannot edit the inline patch in {kfile}: {e}")))?;
                    let new = Value::String(out);
                    let doc = yaml::documents(&ktext).first().cloned().unwrap_or(0..ktext.len());
                    let kout = yaml::edit_document(&ktext, doc, &[(patch.inline_at.as_slice(), Change::Set(&new))])
                        .map_err(|e| Error::unsupported(format!("cannot edit {kfile}: {e}")))?;
                    put_edit(
                        &mut plan.edits,
                        FileEdit { path: kfile.clone(), content: kout.into_bytes(), created: false },
                    );
                    plan.placed.push(Placed {
                        path: shown,
                        file: kfile.clone(),
                        how: format!("inline patch in {kfile}"),
                    });
                }
            }
            continue 'changes;
        }
        // A resource file of the overlay's own folder that defines the object.
        if let Some(resources) = k.get("resources").and_then(Value::as_array) {
            for r in resources.iter().filter_map(Value::as_str) {
                let Some(file) = join_relative(dir, r) else { continue };
                if !within(&file, dir) || !root.join(&file).is_file() {
                    continue;
                }
                let text = current(root, &plan.edits, &file)?;
                let select = super::object_selector(&text, key, &names_ref);
                if !super::parsed_documents(&text).iter().any(&select) {
                    continue;
                }
                let out =
                    super::edit_manifest_text(&text, &file, &select, &[(c.path.segments(), change_of(&c.value))])?;
                put_edit(&mut plan.edits, FileEdit { path: file.clone(), content: out.into_bytes(), created: false });
                plan.placed.push(Placed { path: shown, file: file.clone(), how: "edited in place".into() });
                continue 'changes;
            }
        }
        leftover.push(c);
    }
    if leftover.is_empty() {
        return Ok(plan);
    }
    new_patch(root, &kfile, &k, &new_file, key, &names, object, &leftover, &mut plan)?;
    Ok(plan)
}

/// The strategic-merge content of `changes` for the object: minimal, list items with their
/// merge keys (whole lists for positional lists and for kinds outside the built-in groups).
fn patch_content(key: &ResourceKey, object: &Value, changes: &[&FieldChange], mut patch: Value) -> Result<Value> {
    let builtin = BUILTIN_GROUPS.contains(&key.group.as_str());
    let mut expected = object.clone();
    for c in changes {
        value::apply(&mut expected, c.path.segments(), c.value.as_ref()).map_err(Error::invalid_input)?;
    }
    for c in changes {
        let path = c.path.segments();
        let whole_list = path.iter().position(|s| match s {
            Seg::Item { key, .. } => key.is_empty() || !builtin,
            Seg::Field(_) => false,
        });
        let result = match whole_list {
            Some(i) => {
                let list = value::get(&expected, &path[..i]).cloned().unwrap_or(Value::Array(Vec::new()));
                value::apply(&mut patch, &path[..i], Some(&list))
            }
            None => match (&c.value, path.last()) {
                (Some(v), _) => value::apply(&mut patch, path, Some(v)),
                (None, Some(item @ Seg::Item { .. })) => {
                    let mut marker = value::new_item(item, &[], &Value::Object(Map::new()));
                    if let Value::Object(m) = &mut marker {
                        m.insert("$patch".into(), json!("delete"));
                    }
                    value::apply(&mut patch, path, Some(&marker))
                }
                (None, _) => value::apply(&mut patch, path, Some(&Value::Null)),
            },
        };
        result.map_err(|e| Error::invalid_input(format!("{key}: `{}`: {e}", c.path)))?;
    }
    Ok(patch)
}

#[allow(clippy::too_many_arguments)]
fn new_patch(
    root: &FsPath,
    kfile: &str,
    k: &Value,
    file: &str,
    key: &ResourceKey,
    names: &[String],
    object: &Value,
    changes: &[&FieldChange],
    plan: &mut AcceptPlan,
) -> Result<()> {
    let name = names.last().cloned().unwrap_or_else(|| key.name.clone());
    let mut meta = Map::new();
    meta.insert("name".into(), json!(name));
    if let Some(ns) = object.pointer("/metadata/namespace")
        && k.get("namespace").is_none()
    {
        meta.insert("namespace".into(), ns.clone());
    }
    let api_version = object.get("apiVersion").cloned().unwrap_or(json!("v1"));
    let header = json!({"apiVersion": api_version, "kind": key.kind, "metadata": meta});
    let rel = file.rsplit('/').next().unwrap_or(file).to_owned();
    let listed = patches(root, super::parent(kfile), k).iter().any(|p| p.file.as_deref() == Some(file));
    let exists = root.join(file).is_file() || plan.edits.iter().any(|e| e.path == file);
    let how = format!("new overlay patch {file}");
    if exists {
        // A patch of an earlier acceptance: the new fields go into it.
        let text = current(root, &plan.edits, file)?;
        let select = |d: &Value| d.get("kind").and_then(Value::as_str) == Some(key.kind.as_str());
        let current_doc = yaml::parse(&text).map_err(|e| Error::invalid_input(format!("{file}: {e}")))?;
        let wanted = patch_content(key, object, changes, current_doc.clone())?;
        let mut edits: Vec<(Vec<Seg>, Value)> = Vec::new();
        for c in changes {
            let top = c.path.segments().iter().take_while(|s| matches!(s, Seg::Field(_))).count().max(1);
            let p = c.path.segments()[..top.min(c.path.segments().len())].to_vec();
            if let Some(v) = value::get(&wanted, &p) {
                edits.push((p, v.clone()));
            }
        }
        let refs: Vec<(&[Seg], Change<'_>)> = edits.iter().map(|(p, v)| (p.as_slice(), Change::Set(v))).collect();
        let out = yaml::edit_file(&text, &select, &refs)
            .map_err(|e| Error::unsupported(format!("cannot edit {file}: {e}")))?;
        put_edit(&mut plan.edits, FileEdit { path: file.to_owned(), content: out.into_bytes(), created: false });
    } else {
        let content = patch_content(key, object, changes, header)?;
        let text = format!("# Accepted from the cluster by drift-detector.\n{}\n", yaml::to_block(&content));
        if yaml::parse(&text).ok().as_ref() != Some(&content) {
            return Err(Error::unexpected(format!("{file}: the new patch does not read back as written")));
        }
        put_edit(&mut plan.edits, FileEdit { path: file.to_owned(), content: text.into_bytes(), created: true });
    }
    if !listed {
        let ktext = current(root, &plan.edits, kfile)?;
        let entry = json!({"path": rel});
        let at =
            [field("patches"), Seg::Item { key: vec![("path".into(), rel.clone())], hidden: vec![false], index: 0 }];
        let doc = yaml::documents(&ktext).first().cloned().unwrap_or(0..ktext.len());
        let kout = yaml::edit_document(&ktext, doc, &[(&at[..], Change::Set(&entry))])
            .map_err(|e| Error::unsupported(format!("cannot add the patch to {kfile}: {e}")))?;
        put_edit(&mut plan.edits, FileEdit { path: kfile.to_owned(), content: kout.into_bytes(), created: false });
    }
    for c in changes {
        plan.placed.push(Placed { path: c.path.to_string(), file: file.to_owned(), how: how.clone() });
    }
    Ok(())
}
