//! Accepting a live change into Git: the file edits that make the desired source say what the
//! cluster has, placed where the value comes from.
//!
//! - `locate`-ing is the pipeline's own: the object is found in the unit that renders it
//!   (a plain file, a Kustomize folder, a Helm chart, including those that Argo CD / Flux
//!   applications name);
//! - `yaml`: the byte-preserving YAML/JSON editor;
//! - `kustomize`: the overlay's patch that sets the value, a resource file of the overlay's
//!   own folder, or a new strategic-merge patch in the overlay;
//! - `helm`: the values key traced by rendering with marked values;
//! - `value`: drift paths on parsed objects.
//!
//! Every plan is checked before it is returned: the edited files are written to a copy of the
//! repository, rendered again with the same pipeline, and every placed change must read back
//! as the cluster's value. See `docs/remediation.md`.

use std::path::Path as FsPath;
use std::sync::Arc;

use drift_model::{Error, ResourceKey, Result};
use serde_json::Value;

use crate::config::RenderConfig;
use crate::edit::FileEdit;
use crate::folder::locate_in_folder;
use crate::pipeline::Origin;

mod helm;
mod kustomize;
mod value;
mod yaml;

/// One field whose Git value must become the cluster's (the type of `drift_model::remedy`).
pub use drift_model::remedy::FieldChange;

/// The drifts of one object to accept into Git, as one change.
#[derive(Debug, Clone, PartialEq)]
pub struct AcceptRequest {
    /// Group, kind, namespace and name of the desired object.
    pub key: ResourceKey,
    /// The object's `apiVersion`.
    pub api_version: String,
    /// The fields to change.
    pub changes: Vec<FieldChange>,
}

/// A change that the plan writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// The drift path (display form of [`drift_model::path::Path`]).
    pub path: String,
    /// The repository-relative file edited or created.
    pub file: String,
    /// How: `edited in place`, `overlay patch overlays/prod/replicas.yaml`, `new overlay patch
    /// ...`, `values key image.tag in values-prod.yaml`.
    pub how: String,
}

/// A change the plan cannot place: the pull request shows it for a person to make.
#[derive(Debug, Clone, PartialEq)]
pub struct Unplaced {
    /// The drift path (display form of [`drift_model::path::Path`]).
    pub path: String,
    /// The cluster's value (`None`: the cluster does not have the field).
    pub value: Option<Value>,
    /// What to put where, and why it could not be placed (for the pull request's body).
    pub hint: String,
}

/// The edits that accept a change, with what each change became.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AcceptPlan {
    /// New contents of files (several changes of one file are one edit).
    pub edits: Vec<FileEdit>,
    /// Changes placed in the edits.
    pub placed: Vec<Placed>,
    /// Changes that could not be placed.
    pub unplaced: Vec<Unplaced>,
}

/// Plans the edits that make Git say what the cluster has, in a working tree on disk: `root`
/// is the repository at the base revision, `sub` the source's sub-folder (as configured) and
/// `render` its rendering configuration.
///
/// Nothing is written to `root`. Secrets are refused (the cluster's value must never be
/// written to Git in the clear), as are files the editor does not understand.
pub fn plan_accept(root: &FsPath, sub: &str, render: &RenderConfig, request: &AcceptRequest) -> Result<AcceptPlan> {
    plan_accept_for(root, sub, render, None, request)
}

/// [`plan_accept`] as the source of one of several clusters reads the repository (`targets`,
/// as [`crate::source_for_cluster`] takes them): an object two Argo CD Applications render for
/// two clusters is edited in the file of the Application going to the drift's cluster.
pub fn plan_accept_for(
    root: &FsPath,
    sub: &str,
    render: &RenderConfig,
    targets: Option<Arc<crate::gitops::ClusterTargets>>,
    request: &AcceptRequest,
) -> Result<AcceptPlan> {
    let key = &request.key;
    if key.group.is_empty() && key.kind == "Secret" {
        return Err(Error::permission_denied(format!(
            "{key}: a Secret's value is never written to Git in the clear; change it where it is managed (a sealed or external secret)"
        )));
    }
    if request.changes.is_empty() {
        return Err(Error::invalid_input(format!("{key}: no change to accept")));
    }
    let (origin, object) = locate_in_folder(root, sub, render, targets.as_ref(), key)?.map_err(|errors| {
        let folder = if sub.is_empty() { "." } else { sub };
        let why: Vec<String> =
            errors.iter().take(3).map(|w| format!("{}: {}", w.path.as_deref().unwrap_or(folder), w.message)).collect();
        let why = if why.is_empty() { String::new() } else { format!(" (errors: {})", why.join("; ")) };
        Error::not_found(format!("{key} is not rendered by the source (folder `{folder}`){why}"))
    })?;
    let mut plan = match &origin {
        Origin::Plain(file) => plan_plain(root, file, key, &request.changes)?,
        Origin::Kustomize(dir) => kustomize::plan(root, dir, key, &object.object, &request.changes)?,
        Origin::Helm { chart, opts } => helm::plan(root, render, chart, opts, key, &object.object, &request.changes)?,
    };
    if !plan.placed.is_empty() {
        verify(root, sub, render, targets.as_ref(), request, &mut plan)?;
    }
    Ok(plan)
}

/// Whether a document is the object `key` (the document's namespace, when it has one, must
/// match too).
pub(crate) fn is_object(doc: &Value, key: &ResourceKey, names: &[&str]) -> bool {
    let group = doc.get("apiVersion").and_then(Value::as_str).map(|a| drift_model::split_api_version(a).0);
    let kind = doc.get("kind").and_then(Value::as_str);
    let name = doc.pointer("/metadata/name").and_then(Value::as_str);
    let ns = doc.pointer("/metadata/namespace").and_then(Value::as_str);
    group == Some(key.group.as_str())
        && kind == Some(key.kind.as_str())
        && name.is_some_and(|n| names.contains(&n))
        && ns.is_none_or(|n| key.namespace.as_deref() == Some(n))
}

/// The documents of a YAML stream or JSON file that parse, each followed by its items when it
/// is a `kind: List` (an object defined as an item of a List file has that file as its home).
pub(crate) fn parsed_documents(text: &str) -> Vec<Value> {
    let docs: Vec<Value> = if text.trim_start().starts_with('{') {
        serde_json::from_str(text).into_iter().collect()
    } else {
        yaml::documents(text).iter().filter_map(|d| yaml::parse(&text[d.clone()]).ok()).collect()
    };
    let mut out = Vec::with_capacity(docs.len());
    for d in docs {
        let items = yaml::list_items(&d).to_vec();
        out.push(d);
        out.extend(items);
    }
    out
}

/// Picks the document of `text` that is the object. An application or overlay that sets the
/// namespace (Flux `targetNamespace`, Kustomize `namespace:`) renders a document in another
/// namespace than it says: when no document matches with its namespace, the namespace is not
/// compared.
pub(crate) fn object_selector<'a>(
    text: &str,
    key: &'a ResourceKey,
    names: &'a [&'a str],
) -> impl Fn(&Value) -> bool + 'a {
    let strict = parsed_documents(text).iter().any(|d| is_object(d, key, names));
    let any_namespace = key.with_namespace(None);
    move |doc: &Value| {
        if strict {
            return is_object(doc, key, names);
        }
        let mut d = doc.clone();
        if let Some(m) = d.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("namespace");
        }
        is_object(&d, &any_namespace, names)
    }
}

/// Edits the text of `file` (YAML or JSON) so that the document `select` picks has `changes`.
pub(crate) fn edit_manifest_text(
    text: &str,
    file: &str,
    select: &dyn Fn(&Value) -> bool,
    changes: &[(&[drift_model::path::Seg], yaml::Change<'_>)],
) -> Result<String> {
    let json = file.to_ascii_lowercase().ends_with(".json") || text.trim_start().starts_with('{');
    let out = if json {
        let whole: Value =
            serde_json::from_str(text).map_err(|e| Error::invalid_input(format!("{file} is not valid JSON: {e}")))?;
        if select(&whole) {
            yaml::edit_json(text, changes)
        } else {
            // An item of a List (`kubectl get -o json` writes one): edited in place.
            let item = yaml::list_item(&whole, select)
                .map_err(|e| Error::unsupported(format!("cannot edit {file}: {e}")))?
                .ok_or_else(|| Error::not_found(format!("{file} does not define the object")))?;
            let paths = yaml::in_list_item(item, changes);
            yaml::edit_json(text, &yaml::refs(&paths))
        }
    } else {
        yaml::edit_file(text, select, changes)
    };
    out.map_err(|e| Error::unsupported(format!("cannot edit {file}: {e}")))
}

/// The folder of a repository-relative path ("" at the root).
pub(crate) fn parent(path: &str) -> &str {
    path.rfind('/').map_or("", |i| &path[..i])
}

/// Reads a repository file as text.
pub(crate) fn read(root: &FsPath, file: &str) -> Result<String> {
    let bytes = std::fs::read(root.join(file)).map_err(|e| Error::not_found(format!("cannot read {file}: {e}")))?;
    String::from_utf8(bytes).map_err(|_| Error::invalid_input(format!("{file} is not UTF-8 text")))
}

/// The editor's change for a cluster value.
fn change_of(v: &Option<Value>) -> yaml::Change<'_> {
    match v {
        Some(v) => yaml::Change::Set(v),
        None => yaml::Change::Remove,
    }
}

fn plan_plain(root: &FsPath, file: &str, key: &ResourceKey, changes: &[FieldChange]) -> Result<AcceptPlan> {
    let text = read(root, file)?;
    let name = [key.name.as_str()];
    let select = object_selector(&text, key, &name);
    let edits: Vec<(&[drift_model::path::Seg], yaml::Change<'_>)> =
        changes.iter().map(|c| (c.path.segments(), change_of(&c.value))).collect();
    let content = edit_manifest_text(&text, file, &select, &edits)
        .map_err(|e| e.with_context(format!("accepting into {key}")))?;
    Ok(AcceptPlan {
        edits: vec![FileEdit { path: file.to_owned(), content: content.into_bytes(), created: false }],
        placed: changes
            .iter()
            .map(|c| Placed { path: c.path.to_string(), file: file.to_owned(), how: "edited in place".into() })
            .collect(),
        unplaced: Vec::new(),
    })
}

/// Adds or replaces the content of one file in a plan.
pub(crate) fn put_edit(edits: &mut Vec<FileEdit>, edit: FileEdit) {
    match edits.iter_mut().find(|e| e.path == edit.path) {
        Some(e) => {
            e.content = edit.content;
            e.created |= edit.created;
        }
        None => edits.push(edit),
    }
}

/// The content of `file` as the plan has it so far (edited, or as on disk).
pub(crate) fn current(root: &FsPath, edits: &[FileEdit], file: &str) -> Result<String> {
    match edits.iter().find(|e| e.path == file) {
        Some(e) => {
            String::from_utf8(e.content.clone()).map_err(|_| Error::unexpected(format!("{file}: edit is not UTF-8")))
        }
        None => read(root, file),
    }
}

/// Renders a copy of the repository with the plan's edits and checks that every placed change
/// reads back as the cluster's value; a change that does not becomes an error.
fn verify(
    root: &FsPath,
    sub: &str,
    render: &RenderConfig,
    targets: Option<&Arc<crate::gitops::ClusterTargets>>,
    request: &AcceptRequest,
    plan: &mut AcceptPlan,
) -> Result<()> {
    let copy = tempfile::Builder::new()
        .prefix("drift-accept-")
        .tempdir()
        .map_err(|e| Error::unexpected(format!("cannot create a folder to check the change: {e}")))?;
    copy_tree(root, copy.path())
        .map_err(|e| Error::unexpected(format!("cannot copy the repository to check the change: {e}")))?;
    for e in &plan.edits {
        let target = copy.path().join(&e.path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|err| Error::unexpected(format!("writing {}: {err}", e.path)))?;
        }
        std::fs::write(&target, &e.content).map_err(|err| Error::unexpected(format!("writing {}: {err}", e.path)))?;
    }
    let key = &request.key;
    let (_, object) = locate_in_folder(copy.path(), sub, render, targets, key)?.map_err(|errors| {
        let why: Vec<&str> = errors.iter().take(3).map(|w| w.message.as_str()).collect();
        Error::unexpected(format!(
            "{key} is no longer rendered after the planned edits ({}); nothing is proposed",
            why.join("; ")
        ))
    })?;
    for c in &request.changes {
        let shown = c.path.to_string();
        if !plan.placed.iter().any(|p| p.path == shown) {
            continue;
        }
        let got = value::get(&object.object, c.path.segments()).filter(|v| !v.is_null());
        let want = c.value.as_ref().filter(|v| !v.is_null());
        if got != want {
            return Err(Error::unexpected(format!(
                "{key}: after the planned edits `{shown}` renders as {} instead of the cluster's {}; nothing is proposed",
                got.map_or("nothing".into(), Value::to_string),
                want.map_or("nothing".into(), Value::to_string)
            )));
        }
    }
    Ok(())
}

fn copy_tree(from: &FsPath, to: &FsPath) -> std::io::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let ft = entry.file_type()?;
        let name = entry.file_name();
        if name == ".git" {
            continue;
        }
        if ft.is_dir() {
            std::fs::create_dir_all(to.join(&name))?;
            copy_tree(&entry.path(), &to.join(&name))?;
        } else if ft.is_file() {
            std::fs::copy(entry.path(), to.join(&name))?;
        }
    }
    Ok(())
}
