//! Remediation, the pure part: what puts a drifted field back to Git's value.
//!
//! - [`revert_patch`]: the RFC 6902 JSON patch on the live object that restores Git's value of
//!   some fields (each change guarded by a `test` of the value it replaces, so a patch made from
//!   an old reading fails instead of overwriting a newer change), and [`kubectl_command`], the
//!   same patch as a command a person can paste. The engine attaches both to every drift it
//!   reports ([`drift_model::Drift::revert`]), except Secrets: a patch would carry the value.
//! - [`revert_plan`]: what `drift fix --revert` and self-heal send to the API server: a
//!   server-side apply body holding only the drifted fields (field manager [`FIELD_MANAGER`]) and
//!   the guarded removals of fields only the cluster has (a server-side apply cannot remove a
//!   field another manager owns), with the `resourceVersion` of the object read as the
//!   precondition of the write.
//!
//! The data and the ports (what a plan holds, [`ClusterWriter`], [`ChangeProposer`], the
//! outcomes) are `drift_model::remedy`, re-exported here.
//!
//! Values come from the objects as read (not normalised): Git's value as written in Git, the
//! cluster's as the API server returned it. Paths are the engine's [`Path`]s; list items with a
//! merge key are found by their key in each object, so an item's position may differ between Git
//! and the cluster. docs/remediation.md describes how these are used and the safety rules.

use json_patch::jsonptr::{PointerBuf, Token};
use json_patch::{AddOperation, Patch, PatchOperation, RemoveOperation, ReplaceOperation, TestOperation};
use serde_json::{Map, Value};

use drift_model::path::{Path, Seg, item_is, lookup, lookup_view};
pub use drift_model::remedy::*;
use drift_model::tree::{JsonView, Shape, same};
use drift_model::{Resource, ResourceKey};

fn is_secret(r: &Resource) -> bool {
    is_secret_key(&r.key)
}

fn is_secret_key(key: &ResourceKey) -> bool {
    key.group.is_empty() && key.kind == "Secret"
}

/// The RFC 6902 patch that gives `paths` of `live` the values `desired` has (removing what
/// Git does not set). Removals of list items run last, highest index first, so that indexes
/// stay valid.
///
/// ```
/// use drift_engine::Engine;
/// use drift_model::{Comparator, Resource};
/// use drift_engine::revert::revert_patch;
/// use serde_json::json;
/// let desired = Resource::from_object(json!({"apiVersion": "apps/v1", "kind": "Deployment",
///     "metadata": {"name": "web", "namespace": "shop"}, "spec": {"replicas": 3}})).unwrap();
/// let live = Resource::from_object(json!({"apiVersion": "apps/v1", "kind": "Deployment",
///     "metadata": {"name": "web", "namespace": "shop"}, "spec": {"replicas": 5}})).unwrap();
/// let paths: Vec<_> = Engine::default().compare_paths(&desired, Some(&live)).into_iter().map(|(p, _)| p).collect();
/// let patch = revert_patch(&desired, &live, &paths).unwrap();
/// let mut fixed = serde_json::Value::clone(&live.object);
/// json_patch::patch(&mut fixed, &patch).unwrap();
/// assert_eq!(fixed["spec"]["replicas"], 3);
/// ```
pub fn revert_patch(desired: &Resource, live: &Resource, paths: &[Path]) -> Result<Patch, RemedyError> {
    if is_secret(desired) {
        return Err(RemedyError::Secret);
    }
    patch_ops(&*desired.object, &*live.object, paths)
}

/// The patch of `paths`, Git's values read from `desired` (a `Value` or a tree, as `live`).
fn patch_ops<'d, 'a, D: JsonView<'d>, V: JsonView<'a>>(
    desired: D,
    live: V,
    paths: &[Path],
) -> Result<Patch, RemedyError> {
    let mut sets = Vec::new();
    let mut removals: Vec<(Vec<Step<'_>>, V)> = Vec::new();
    for path in paths {
        let git = lookup_view(desired, path.segments());
        let place = locate(live, path.segments());
        match (git, place) {
            (Some(g), Located::Found(steps, l)) => {
                if same(l, g) {
                    continue;
                }
                let pointer = pointer_of(&steps);
                sets.push(test(&pointer, l));
                sets.push(PatchOperation::Replace(ReplaceOperation { path: pointer, value: g.to_value() }));
            }
            (Some(_), Located::Missing { found, first_missing }) => {
                // Git's subtree at the first missing level: everything under it is missing too.
                let prefix = Path(path.segments()[..=first_missing].to_vec());
                let value = lookup_view(desired, prefix.segments())
                    .map(JsonView::to_value)
                    .ok_or_else(|| RemedyError::NoParent { path: path.to_string() })?;
                let mut steps = found;
                steps.push(match &path.segments()[first_missing] {
                    Seg::Field(f) => Step::Field(f),
                    Seg::Item { .. } => Step::Append,
                });
                sets.push(PatchOperation::Add(AddOperation { path: pointer_of(&steps), value }));
            }
            (None, Located::Found(steps, l)) => removals.push((steps, l)),
            (None, Located::Missing { .. }) => {}
            (_, Located::NoParent) => return Err(RemedyError::NoParent { path: path.to_string() }),
        }
    }
    // Highest index first within a list; a parent after its children.
    removals.sort_by(|a, b| b.0.cmp(&a.0));
    removals.dedup_by(|a, b| a.0 == b.0);
    let mut ops = sets;
    for (steps, value) in removals {
        let pointer = pointer_of(&steps);
        ops.push(test(&pointer, value));
        ops.push(PatchOperation::Remove(RemoveOperation { path: pointer }));
    }
    Ok(Patch(ops))
}

/// The `kubectl patch` command that sends `patch` to the object `live` names, with the
/// detector's field manager. The patch is quoted for a POSIX shell.
///
/// ```
/// use drift_engine::revert::kubectl_command;
/// let live = drift_model::Resource::from_object(serde_json::json!({"apiVersion": "apps/v1",
///     "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"}})).unwrap();
/// let patch: json_patch::Patch = serde_json::from_value(serde_json::json!(
///     [{"op": "replace", "path": "/spec/replicas", "value": 3}])).unwrap();
/// assert_eq!(kubectl_command(&live, &patch),
///     r#"kubectl patch deployment.v1.apps web --namespace shop --type json --field-manager drift-detector -p '[{"op":"replace","path":"/spec/replicas","value":3}]'"#);
/// ```
pub fn kubectl_command(target: &Resource, patch: &Patch) -> String {
    command_for(&target.key, &target.api_version, patch)
}

/// [`kubectl_command`] for the object of `key` and `api_version`.
fn command_for(key: &ResourceKey, api_version: &str, patch: &Patch) -> String {
    let (group, version) = drift_model::split_api_version(api_version);
    let json = serde_json::to_string(patch).unwrap_or_else(|_| "[]".to_owned());
    // One buffer, written once: this runs for every drift the engine reports.
    let mut cmd = String::with_capacity(json.len() + 160);
    cmd.push_str("kubectl patch ");
    cmd.extend(key.kind.chars().map(|c| c.to_ascii_lowercase()));
    if !group.is_empty() {
        for part in [".", version, ".", group] {
            cmd.push_str(part);
        }
    }
    cmd.push(' ');
    push_quoted(&mut cmd, &key.name);
    if let Some(ns) = &key.namespace {
        cmd.push_str(" --namespace ");
        push_quoted(&mut cmd, ns);
    }
    cmd.push_str(" --type json --field-manager ");
    cmd.push_str(FIELD_MANAGER);
    cmd.push_str(" -p ");
    push_quoted(&mut cmd, &json);
    cmd
}

/// The JSON pointer, in `live`, of what a revert of `path` changes: the field itself, or for a
/// field the cluster lacks, its first missing level (a list, for a missing list item). `None`
/// when a parent on the way is not a mapping or a list.
pub fn pointer_in(live: &Value, path: &Path) -> Option<String> {
    match locate(live, path.segments()) {
        Located::Found(steps, _) => Some(pointer_of(&steps).to_string()),
        Located::Missing { mut found, first_missing } => {
            if let Seg::Field(f) = &path.segments()[first_missing] {
                found.push(Step::Field(f));
            }
            Some(pointer_of(&found).to_string())
        }
        Located::NoParent => None,
    }
}

/// What a write would change in an object outside the pointers it was meant to change (each a
/// prefix of what may change): the JSON pointers of `after`'s differences from `before`, leaving
/// out what the API server keeps for itself (`metadata.managedFields`, `resourceVersion`,
/// `generation`, `status`). A revert whose dry run changes more than its field is refused.
pub fn changed_outside(before: &Value, after: &Value, allowed: &[String]) -> Vec<String> {
    let clean = |v: &Value| {
        let mut v = v.clone();
        if let Some(o) = v.as_object_mut() {
            o.remove("status");
        }
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in ["managedFields", "resourceVersion", "generation"] {
                m.remove(k);
            }
        }
        v
    };
    let within = |p: &str| {
        allowed.iter().any(|a| p == a || (p.starts_with(a.as_str()) && p.as_bytes().get(a.len()) == Some(&b'/')))
    };
    json_patch::diff(&clean(before), &clean(after))
        .0
        .iter()
        .map(|op| match op {
            PatchOperation::Add(o) => o.path.to_string(),
            PatchOperation::Remove(o) => o.path.to_string(),
            PatchOperation::Replace(o) => o.path.to_string(),
            PatchOperation::Move(o) => o.path.to_string(),
            PatchOperation::Copy(o) => o.path.to_string(),
            PatchOperation::Test(o) => o.path.to_string(),
        })
        .filter(|p| !within(p))
        .collect()
}

/// [`revert_patch`] and [`kubectl_command`] of one drift path, or `None` when no patch can be
/// shown (a Secret, nothing to do, or a parent missing).
pub fn revert_of(desired: &Resource, live: &Resource, path: &Path) -> Option<Revert> {
    revert_of_view(&desired.key, &*desired.object, &live.key, &live.api_version, &*live.object, path)
}

/// [`revert_of`] of objects read through [`JsonView`]: the desired one of `desired_key`, the
/// live one named by `key` and `api_version`.
pub(crate) fn revert_of_view<'d, 'a>(
    desired_key: &ResourceKey,
    desired: impl JsonView<'d>,
    key: &ResourceKey,
    api_version: &str,
    live: impl JsonView<'a>,
    path: &Path,
) -> Option<Revert> {
    if is_secret_key(desired_key) {
        return None;
    }
    let patch = patch_ops(desired, live, std::slice::from_ref(path)).ok()?;
    if patch.0.is_empty() {
        return None;
    }
    let command = command_for(key, api_version, &patch);
    Some(Revert { patch, command })
}

/// What a revert of `paths` sends: a server-side apply body with Git's values of the fields
/// Git sets (a list without a merge key is atomic for server-side apply, so it is sent whole),
/// and guarded removals of the fields only the cluster has. Secrets are planned like any object
/// (the plan is sent, never shown or stored).
pub fn revert_plan(desired: &Resource, live: &Resource, paths: &[Path]) -> Result<RevertPlan, RemedyError> {
    // The engine compares a Secret's `stringData` as `data` (the API server folds it in): Git's
    // value of `data.x` may be written as `stringData.x`.
    let folded = secret_with_string_data_folded(desired);
    let desired = folded.as_ref().unwrap_or(desired);
    let mut body = Map::new();
    let mut removals = Vec::new();
    let mut covered = Vec::new();
    for path in paths {
        match lookup(&desired.object, path) {
            Some(g) => {
                if let Located::Found(_, l) = locate(&*live.object, path.segments())
                    && g == l
                {
                    continue;
                }
                set_in_body(&mut body, &desired.object, path.segments());
            }
            None => match locate(&*live.object, path.segments()) {
                Located::Found(..) => removals.push(path.clone()),
                Located::Missing { .. } => continue,
                Located::NoParent => return Err(RemedyError::NoParent { path: path.to_string() }),
            },
        }
        covered.push(path.to_string());
    }
    // revert_patch refuses Secrets (its result is shown); a plan is sent, never shown.
    let remove = patch_ops(&*desired.object, &*live.object, &removals)?;
    let apply = (!body.is_empty()).then(|| {
        let mut metadata = Map::new();
        metadata.insert("name".into(), Value::String(live.key.name.clone()));
        if let Some(ns) = &live.key.namespace {
            metadata.insert("namespace".into(), Value::String(ns.clone()));
        }
        if let Some(Value::Object(extra)) = body.remove("metadata") {
            metadata.extend(extra);
        }
        let mut object = Map::new();
        object.insert("apiVersion".into(), Value::String(live.api_version.clone()));
        object.insert("kind".into(), Value::String(live.key.kind.clone()));
        object.insert("metadata".into(), Value::Object(metadata));
        object.extend(body);
        Value::Object(object)
    });
    Ok(RevertPlan {
        api_version: live.api_version.clone(),
        kind: live.key.kind.clone(),
        namespace: live.key.namespace.clone(),
        name: live.key.name.clone(),
        apply,
        remove,
        paths: covered,
        resource_version: resource_version(&live.object),
    })
}

/// The object's `metadata.resourceVersion`, the precondition a plan carries.
pub fn resource_version(object: &Value) -> Option<String> {
    object.pointer("/metadata/resourceVersion").and_then(Value::as_str).filter(|v| !v.is_empty()).map(str::to_owned)
}

/// A Secret whose `stringData` is folded into `data`, base64-encoded, as the API server stores
/// it (`stringData` wins over `data`); `None` for other objects and Secrets without it.
fn secret_with_string_data_folded(desired: &Resource) -> Option<Resource> {
    use base64::Engine as _;
    if !is_secret(desired) {
        return None;
    }
    let Some(Value::Object(string_data)) = desired.object.get("stringData") else { return None };
    let mut folded = desired.clone();
    let Value::Object(o) = std::sync::Arc::make_mut(&mut folded.object) else { return None };
    let string_data = string_data.clone();
    o.remove("stringData");
    let data = o.entry("data").or_insert_with(|| Value::Object(Map::new()));
    if !data.is_object() {
        *data = Value::Object(Map::new());
    }
    if let Value::Object(data) = data {
        for (k, v) in string_data {
            let text = match v {
                Value::String(s) => s,
                other => other.to_string(),
            };
            data.insert(k, Value::String(base64::engine::general_purpose::STANDARD.encode(text)));
        }
    }
    Some(folded)
}

/// Puts Git's value at `segs` into the apply body, with the merge-key fields of each list item
/// on the way (typed, as Git writes them) so that server-side apply finds the item.
fn set_in_body(body: &mut Map<String, Value>, desired: &Value, segs: &[Seg]) {
    let Some((first, rest)) = segs.split_first() else { return };
    let Seg::Field(f) = first else { return };
    let Some(dv) = desired.get(f) else { return };
    match rest.first() {
        None => {
            body.insert(f.clone(), dv.clone());
        }
        Some(Seg::Field(_)) => {
            let child = body.entry(f.clone()).or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(m) = child {
                set_in_body(m, dv, rest);
            }
        }
        Some(Seg::Item { key, hidden, .. }) if !key.is_empty() => {
            let Some(item) = find_item(dv, key, hidden) else { return };
            let (_, dv_item) = item;
            let list = body.entry(f.clone()).or_insert_with(|| Value::Array(Vec::new()));
            let Value::Array(items) = list else { return };
            let pos = items.iter().position(|it| key.iter().all(|(k, _)| it.get(k) == dv_item.get(k)));
            let pos = match pos {
                Some(p) => p,
                None => {
                    let mut m = Map::new();
                    for (k, _) in key {
                        if let Some(v) = dv_item.get(k) {
                            m.insert(k.clone(), v.clone());
                        }
                    }
                    items.push(Value::Object(m));
                    items.len() - 1
                }
            };
            if rest.len() == 1 {
                items[pos] = dv_item.clone();
            } else if let Value::Object(m) = &mut items[pos] {
                set_in_body(m, dv_item, &rest[1..]);
            }
        }
        // A list without a merge key is atomic: the whole list.
        Some(Seg::Item { .. }) => {
            body.insert(f.clone(), dv.clone());
        }
    }
}

/// One step of a JSON pointer into the live object (field names borrowed from the path).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Step<'p> {
    Field(&'p str),
    Index(usize),
    /// `-`: after the last item.
    Append,
}

enum Located<'p, V> {
    /// The value and the pointer to it.
    Found(Vec<Step<'p>>, V),
    /// Absent: `found` leads to the deepest existing parent, `first_missing` is the index of
    /// the first segment that is absent.
    Missing { found: Vec<Step<'p>>, first_missing: usize },
    /// A parent on the way is not a mapping or list.
    NoParent,
}

/// The item of `list` whose key fields read as `key` (a field absent counts where `hidden`
/// says its default was filled in), with its index.
fn find_item<'a, V: JsonView<'a>>(list: V, key: &[(String, String)], hidden: &[bool]) -> Option<(usize, V)> {
    if list.shape() != Shape::Array {
        return None;
    }
    (0..list.len()).filter_map(|i| Some((i, list.item(i)?))).find(|(_, item)| item_is(*item, key, hidden))
}

fn locate<'a, 'p, V: JsonView<'a>>(root: V, segs: &'p [Seg]) -> Located<'p, V> {
    let mut v = root;
    let mut steps = Vec::with_capacity(segs.len());
    for (i, seg) in segs.iter().enumerate() {
        let next = match seg {
            Seg::Field(f) => match v.shape() {
                Shape::Object => v.get(f).filter(|x| !x.is_null()).map(|x| (Step::Field(f), x)),
                _ => return Located::NoParent,
            },
            Seg::Item { key, hidden, index } => match v.shape() {
                Shape::Array if !key.is_empty() => find_item(v, key, hidden).map(|(i, x)| (Step::Index(i), x)),
                Shape::Array => v.item(*index).map(|x| (Step::Index(*index), x)),
                _ => return Located::NoParent,
            },
        };
        match next {
            Some((step, x)) => {
                steps.push(step);
                v = x;
            }
            None => return Located::Missing { found: steps, first_missing: i },
        }
    }
    Located::Found(steps, v)
}

fn pointer_of(steps: &[Step<'_>]) -> PointerBuf {
    PointerBuf::from_tokens(steps.iter().map(|s| match s {
        Step::Field(f) => Token::from(*f),
        Step::Index(i) => Token::from(i.to_string()),
        Step::Append => Token::from("-"),
    }))
}

fn test<'a>(pointer: &PointerBuf, value: impl JsonView<'a>) -> PatchOperation {
    PatchOperation::Test(TestOperation { path: pointer.clone(), value: value.to_value() })
}

/// Appends `s` quoted for a POSIX shell (as it is when nothing needs quoting).
fn push_quoted(out: &mut String, s: &str) {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.:/=".contains(&b)) {
        out.push_str(s);
        return;
    }
    out.push('\'');
    for (i, part) in s.split('\'').enumerate() {
        if i > 0 {
            out.push_str(r"'\''");
        }
        out.push_str(part);
    }
    out.push('\'');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Engine;
    use drift_model::Comparator;
    use serde_json::json;

    fn res(v: Value) -> Resource {
        Resource::from_object(v).unwrap()
    }

    fn deployment(image: &str, extra_env: bool, replicas: i64) -> Value {
        let mut env = vec![json!({"name": "MODE", "value": "fast"})];
        if extra_env {
            env.push(json!({"name": "DEBUG", "value": "1"}));
        }
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "labels": {"app.kubernetes.io/name": "web"}},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": [
            {"name": "sidecar", "image": "proxy:1"},
            {"name": "web", "image": image, "env": env, "ports": [{"containerPort": 8080}]}
        ]}}}})
    }

    fn paths(desired: &Resource, live: &Resource) -> Vec<Path> {
        crate::diff::diff(&desired.key.kind, &desired.object, &live.object, &crate::merge_keys::MergeKeys::default())
            .into_iter()
            .map(|d| d.path)
            .collect()
    }

    #[test]
    fn the_patch_replaces_adds_and_removes_by_key_and_guards_each_change() {
        let desired = res(deployment("web:1", false, 3));
        let mut live_obj = deployment("web:2", true, 5);
        // The cluster lists the containers in another order.
        live_obj["spec"]["template"]["spec"]["containers"].as_array_mut().unwrap().reverse();
        live_obj["metadata"]["labels"] = json!({});
        let live = res(live_obj);
        let ps = paths(&desired, &live);
        let patch = revert_patch(&desired, &live, &ps).unwrap();
        let text = serde_json::to_string(&patch).unwrap();
        assert!(
            text.contains(r#"{"op":"test","path":"/spec/template/spec/containers/0/image","value":"web:2"}"#),
            "{text}"
        );
        assert!(
            text.contains(r#"{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"web:1"}"#),
            "{text}"
        );
        assert!(text.contains(r#""path":"/metadata/labels/app.kubernetes.io~1name""#), "{text}");
        let mut fixed = Value::clone(&live.object);
        json_patch::patch(&mut fixed, &patch).unwrap();
        assert!(paths(&desired, &res(fixed.clone())).is_empty(), "{fixed}");
        // A patch made from an old reading fails instead of overwriting a newer change.
        let mut newer = Value::clone(&live.object);
        newer["spec"]["replicas"] = json!(9);
        assert!(json_patch::patch(&mut newer, &patch).is_err());
    }

    #[test]
    fn the_engine_attaches_a_patch_and_a_command_to_drifts_but_never_to_secrets() {
        let desired = res(deployment("web:1", false, 3));
        let live = res(deployment("web:1", false, 5));
        let drifts = Engine::default().compare(&desired, Some(&live));
        let revert = drifts[0].revert.as_ref().unwrap();
        assert_eq!(
            revert.command,
            r#"kubectl patch deployment.v1.apps web --namespace shop --type json --field-manager drift-detector -p '[{"op":"test","path":"/spec/replicas","value":5},{"op":"replace","path":"/spec/replicas","value":3}]'"#
        );
        let secret = |v: &str| {
            res(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "shop"},
                "stringData": {"password": v}}))
        };
        let drifts = Engine::default().compare(&secret("git-value"), Some(&secret("live-value")));
        assert!(!drifts.is_empty());
        assert!(drifts.iter().all(|d| d.revert.is_none()));
        assert_eq!(revert_patch(&secret("a"), &secret("b"), &[]), Err(RemedyError::Secret));
    }

    #[test]
    fn the_plan_applies_only_drifted_fields_with_merge_keys_and_removes_with_a_test() {
        let desired = res(deployment("web:1", false, 3));
        let live = res(deployment("web:2", true, 3));
        let ps = paths(&desired, &live);
        let plan = revert_plan(&desired, &live, &ps).unwrap();
        assert_eq!(
            plan.apply,
            Some(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "shop"},
                "spec": {"template": {"spec": {"containers": [{"name": "web", "image": "web:1"}]}}}}))
        );
        assert_eq!(
            serde_json::to_value(&plan.remove).unwrap(),
            json!([{"op": "test", "path": "/spec/template/spec/containers/1/env/1", "value": {"name": "DEBUG", "value": "1"}},
                   {"op": "remove", "path": "/spec/template/spec/containers/1/env/1"}])
        );
        assert_eq!(plan.paths.len(), 2);
        assert_eq!(plan.resource_version, None, "the object read has no resourceVersion");
        let mut read = Value::clone(&live.object);
        read["metadata"]["resourceVersion"] = json!("41");
        let plan = revert_plan(&desired, &res(read), &ps).unwrap();
        assert_eq!(plan.resource_version.as_deref(), Some("41"), "the precondition of the write");
    }

    #[test]
    fn a_change_outside_the_reverted_field_is_found_and_server_bookkeeping_is_not() {
        let before = json!({"metadata": {"name": "web", "resourceVersion": "1", "managedFields": []},
            "spec": {"selector": {"app": "api", "extra": "x"}, "ports": [{"port": 80}]}});
        let mut after = before.clone();
        after["metadata"]["resourceVersion"] = json!("2");
        after["spec"]["selector"]["app"] = json!("web");
        let allowed = ["/spec/selector/app".to_owned()];
        assert!(changed_outside(&before, &after, &allowed).is_empty());
        // An atomic map replaced whole drops a key the revert was not about.
        after["spec"]["selector"].as_object_mut().unwrap().remove("extra");
        assert_eq!(changed_outside(&before, &after, &allowed), ["/spec/selector/extra"]);
        // A sibling whose name starts like the allowed one is not within it.
        let mut sibling = before.clone();
        sibling["spec"]["selector"]["apps"] = json!("x");
        assert_eq!(changed_outside(&before, &sibling, &allowed), ["/spec/selector/apps"]);
        let p = Path::root().field("spec").field("selector").field("tier");
        assert_eq!(pointer_in(&before, &p).as_deref(), Some("/spec/selector/tier"));
        let plan = RevertPlan {
            api_version: "v1".into(),
            kind: "Secret".into(),
            namespace: None,
            name: "s".into(),
            apply: Some(json!({"data": {"password": "c2VjcmV0"}})),
            remove: Patch(Vec::new()),
            paths: vec![],
            resource_version: None,
        };
        assert!(!format!("{plan:?}").contains("c2VjcmV0"), "{plan:?}");
    }

    #[test]
    fn a_positional_list_is_sent_whole_and_quoting_survives_quotes() {
        let desired =
            res(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "it's", "namespace": "a"},
            "data": {"k": "v"}}));
        let live = res(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "it's", "namespace": "a"},
            "data": {"k": "it's changed"}}));
        let r = revert_of(&desired, &live, &paths(&desired, &live)[0]).unwrap();
        assert!(r.command.starts_with(r"kubectl patch configmap 'it'\''s' --namespace a"), "{}", r.command);
        assert!(r.command.contains(r#""value":"it'\''s changed""#), "{}", r.command);
        let args = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "a"},
            "spec": {"containers": [{"name": "c", "args": ["a", "b"]}]}});
        let mut live_args = args.clone();
        live_args["spec"]["containers"][0]["args"] = json!(["a", "c"]);
        let (d, l) = (res(args), res(live_args));
        let plan = revert_plan(&d, &l, &paths(&d, &l)).unwrap();
        assert_eq!(plan.apply.unwrap()["spec"], json!({"containers": [{"name": "c", "args": ["a", "b"]}]}));
    }

    #[test]
    fn a_secret_written_with_string_data_is_planned_as_data_and_never_removed() {
        let git = res(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "a"},
            "data": {"user": "YWRtaW4="}, "stringData": {"password": "git-value"}}));
        let live = res(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "a"},
            "data": {"user": "YWRtaW4=", "password": "bGl2ZS12YWx1ZQ==", "extra": "eA=="}}));
        let ps: Vec<Path> = Engine::default().compare_paths(&git, Some(&live)).into_iter().map(|(p, _)| p).collect();
        let mut shown: Vec<String> = ps.iter().map(ToString::to_string).collect();
        shown.sort();
        assert_eq!(shown, vec!["data.password".to_owned()]);
        let plan = revert_plan(&git, &live, &ps).unwrap();
        // Git's value, encoded as the API server stores stringData; the key is not removed.
        assert_eq!(plan.apply.unwrap()["data"], json!({"password": "Z2l0LXZhbHVl"}));
        assert!(plan.remove.0.is_empty(), "nothing is removed");
        assert_eq!(plan.paths, vec!["data.password".to_owned()]);
    }
}
