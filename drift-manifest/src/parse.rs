//! Loading Kubernetes manifests from YAML or JSON text.
//!
//! Multi-document YAML, JSON, `kind: List` (and `*List` kinds with `items`) are read into
//! [`Resource`]s. Documents that are not Kubernetes objects (no `apiVersion` and no `kind`:
//! values files, CI workflows) are skipped with a note. Broken documents give a fatal warning
//! with file, document index and line, and the other documents are still read. Input is bounded:
//! file size, nesting depth, aliases (YAML alias bombs), nodes.

use serde_json::Value;

use drift_model::ErrorKind;
use drift_model::{Provenance, Resource, SourceWarning};

/// Limits of the loader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest file accepted, in bytes (default 16 MiB; [`Limits::live`]: 2 GiB).
    pub max_file_bytes: usize,
    /// Largest document, or item of a `List` document, in bytes (default 16 MiB). A larger
    /// `List` (a `kubectl get -A -o yaml` or `-o json` dump of a real cluster) is read item by
    /// item, each item bounded by this; another document that large is an error of its own.
    pub max_document_bytes: usize,
    /// Deepest nesting of mappings and sequences (default 100; real objects stay under 40).
    pub max_depth: usize,
    /// Most alias (`*ref`) uses in one file (default 10,000).
    pub max_aliases: usize,
    /// Most nodes in one document (default 1,000,000).
    pub max_nodes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_file_bytes: 16 << 20,
            max_document_bytes: 16 << 20,
            max_depth: 100,
            max_aliases: 10_000,
            max_nodes: 1_000_000,
        }
    }
}

impl Limits {
    /// The limits for files a user hands over whole (`drift diff` on files, a `live.snapshot`):
    /// a file of up to 2 GiB, each document or list item still bounded as by default.
    pub fn live() -> Self {
        Limits { max_file_bytes: 2 << 30, ..Limits::default() }
    }
}

/// What a file held.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedManifests {
    /// Kubernetes objects, with provenance (path and document index).
    pub resources: Vec<Resource>,
    /// Skipped documents (notes) and broken ones (fatal warnings).
    pub warnings: Vec<SourceWarning>,
}

/// The texts of the documents `indices` (sorted, as in [`Provenance::document`]) of a file
/// that [`parse_manifests_with`] read, in that order; `None` when one is not there. A JSON file
/// is one document.
pub(crate) fn document_texts<'a>(text: &'a str, indices: &[usize]) -> Option<Vec<&'a str>> {
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        return (indices == [0]).then(|| vec![trimmed]);
    }
    let docs = split_documents(text);
    indices.iter().map(|&i| docs.get(i).map(|d| d.text)).collect()
}

/// Parses a file's text with the default [`Limits`].
///
/// ```
/// let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nfoo: bar\n";
/// let parsed = drift_manifest::parse_manifests(text, "app/cm.yaml");
/// assert_eq!(parsed.resources.len(), 1);
/// assert_eq!(parsed.resources[0].provenance.path.as_deref(), Some("app/cm.yaml"));
/// assert_eq!(parsed.warnings.len(), 1); // the values document is skipped with a note
/// assert!(!parsed.warnings[0].fatal);
/// ```
pub fn parse_manifests(text: &str, path: &str) -> ParsedManifests {
    parse_manifests_with(text, path, Limits::default())
}

/// Parses a file's text with explicit limits.
pub fn parse_manifests_with(text: &str, path: &str, limits: Limits) -> ParsedManifests {
    parse(text, path, limits, None)
}

/// Parses a file of objects read from a cluster (`kubectl get -o json` or `-o yaml`, a live
/// snapshot) as [`parse_manifests_with`] does, each object's `status` left out: drift never
/// compares it, and the cluster source keeps objects without it too. The `status` of a JSON
/// document that is one object is checked but never built.
///
/// ```
/// let text = r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "status": {"x": 1}}"#;
/// let parsed = drift_manifest::parse_live_manifests(text, "live.json", Default::default());
/// assert!(parsed.resources[0].object.get("status").is_none());
/// ```
pub fn parse_live_manifests(text: &str, path: &str, limits: Limits) -> ParsedManifests {
    parse_live(text, path, limits, false)
}

/// [`parse_live_manifests`] for objects that are only compared (`drift diff --live`): the
/// `metadata.managedFields` list of a JSON document that is one object is also checked and kept
/// as its JSON text (a string), unparsed until an ownership question needs it;
/// `drift_engine`'s ownership reads it from the text as from the list. About half of a live
/// object's values are its managedFields. A live source keeps the list (its contract), so it
/// reads with [`parse_live_manifests`].
///
/// ```
/// let text = r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a",
///     "managedFields": [{"manager": "kubectl-edit", "fieldsV1": {"f:data": {}}}]}, "status": {"x": 1}}"#;
/// let parsed = drift_manifest::parse_live_manifests_compared(text, "live.json", Default::default());
/// let object = &parsed.resources[0].object;
/// assert!(object.get("status").is_none());
/// assert_eq!(object["metadata"]["managedFields"],
///     r#"[{"manager": "kubectl-edit", "fieldsV1": {"f:data": {}}}]"#);
/// ```
pub fn parse_live_manifests_compared(text: &str, path: &str, limits: Limits) -> ParsedManifests {
    parse_live(text, path, limits, true)
}

/// The one live object of a JSON file (what `kubectl get -o json` writes for one object), read
/// as [`parse_live_manifests_compared`] reads it but into a [`Tree`](drift_model::tree::Tree)
/// that borrows `text`: for a comparison that reads trees, which then allocates for few of the
/// object's keys and strings, where a `serde_json::Value` allocates for every one. Its `status`
/// is left out and its `metadata.managedFields` kept as their text, as there.
///
/// `Some` only where [`parse_live_manifests_compared`] reads exactly one object and says nothing
/// else, and then `to_resource()` is the resource it reads; `None` for anything else (YAML, a
/// `List`, a document over a bound, one the fast reader leaves to serde_json, one that is not an
/// object or that is broken), which the caller reads with [`parse_live_manifests_compared`] to
/// have its resources and warnings. `None` is always safe to fall back from.
///
/// ```
/// let text = r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "status": {"x": 1}}"#;
/// let limits = drift_manifest::Limits::live();
/// let live = drift_manifest::read_live_tree(text, "live.json", limits).unwrap();
/// let parsed = drift_manifest::parse_live_manifests_compared(text, "live.json", limits);
/// assert_eq!(live.key.name, "a");
/// assert_eq!(parsed.resources, [live.to_resource()]);
/// assert!(drift_manifest::read_live_tree("apiVersion: v1\nkind: ConfigMap\n", "live.yaml", limits).is_none());
/// ```
pub fn read_live_tree<'t>(text: &'t str, path: &str, limits: Limits) -> Option<drift_model::tree::ObjectTree<'t>> {
    // The steps of `parse` for a JSON document: wherever it would warn, or read the text some
    // other way, this gives up.
    if text.len() > limits.max_file_bytes {
        return None;
    }
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if !trimmed.starts_with('{') || trimmed.len() > limits.max_document_bytes || oversized_integer(trimmed).is_some() {
        return None;
    }
    let (tree, deepest) = crate::json_tree::read_tree(trimmed, true, true)?;
    if deepest > limits.max_depth {
        return None;
    }
    // Then those of `collect` and `push_resource`. The top-level `status` that `parse_live`
    // removes was never built.
    collected_tree(tree, path, 0)
}

/// One desired object of a YAML file (what `drift diff` reads from a desired file, most often a
/// single object written by hand or by a tool) read as [`parse_manifests_with`] reads it, but
/// into a [`Tree`](drift_model::tree::Tree) that borrows `text`: for a comparison that reads
/// trees, which then allocates for the tree's vectors and the few strings the reader decodes (an
/// escape, a doubled quote, a literal block), where a `serde_json::Value` allocates for every
/// key, string and mapping.
///
/// `Some` only where [`parse_manifests_with`] reads exactly one object and says nothing else, and
/// then `to_resource()` is the resource it reads, with its provenance: the path and the index of
/// the document as that parse counts it (blank documents, comments and directives before it
/// count, and are skipped). `None` for anything else (JSON, more than one document with content,
/// a `List`, a file or document over a bound, a document the line reader leaves to the full YAML
/// reader, one that is not an object or that is broken), which the caller reads with
/// [`parse_manifests_with`] to have its resources and warnings. `None` is always safe to fall
/// back from.
///
/// ```
/// let text = "# the web app\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  mode: \"on\"\n";
/// let limits = drift_manifest::Limits::default();
/// let desired = drift_manifest::read_manifest_tree(text, "web.yaml", limits).unwrap();
/// let parsed = drift_manifest::parse_manifests_with(text, "web.yaml", limits);
/// assert_eq!(parsed.resources, [desired.to_resource()]);
/// assert_eq!(desired.provenance.document, Some(1));
/// let two = format!("{text}---\n{text}");
/// assert!(drift_manifest::read_manifest_tree(&two, "web.yaml", limits).is_none());
/// ```
pub fn read_manifest_tree<'t>(text: &'t str, path: &str, limits: Limits) -> Option<drift_model::tree::ObjectTree<'t>> {
    // The steps of `parse` for a YAML file: wherever it would warn, or read the text some other
    // way, this gives up.
    if text.len() > limits.max_file_bytes {
        return None;
    }
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        return None;
    }
    // One document with content; the blank ones `parse` skips without a word, but counts.
    let mut documents = split_documents(text).into_iter().enumerate().filter(|(_, doc)| !is_blank(doc.text));
    let (index, doc) = documents.next()?;
    if documents.next().is_some() || doc.text.len() > limits.max_document_bytes {
        return None;
    }
    // `parse_yaml_document` reads with the line reader first, and what it reads has no notes.
    let tree = crate::yaml_lines::read_tree(doc.text, limits.max_depth, limits.max_nodes)?;
    collected_tree(tree, path, index)
}

/// The object of a document read into a tree, where `collect` and `push_resource` would make a
/// resource of it and say nothing: a mapping that says it is an object, not a list of them,
/// whose key reads (their errors and notes are the fallback's to report).
fn collected_tree<'t>(
    tree: drift_model::tree::Tree<'t>,
    path: &str,
    document: usize,
) -> Option<drift_model::tree::ObjectTree<'t>> {
    use drift_model::tree::{JsonView, Shape};
    let root = tree.root();
    if !matches!(root.shape(), Shape::Object) {
        return None;
    }
    let has_api_version = root.get("apiVersion").and_then(JsonView::as_str).is_some_and(|s| !s.is_empty());
    let kind = root.get("kind").and_then(JsonView::as_str).unwrap_or("");
    if !has_api_version && kind.is_empty() {
        return None;
    }
    if kind.ends_with("List") && root.get("items").is_some_and(|items| matches!(items.shape(), Shape::Array)) {
        return None;
    }
    let provenance = Provenance { path: Some(path.to_owned()), document: Some(document), ..Provenance::default() };
    drift_model::tree::ObjectTree::new(tree, provenance).ok()
}

fn parse_live(text: &str, path: &str, limits: Limits, managed_text: bool) -> ParsedManifests {
    let mut out = parse(text, path, limits, Some(managed_text));
    for resource in &mut out.resources {
        if let Some(object) = std::sync::Arc::make_mut(&mut resource.object).as_object_mut() {
            object.remove("status");
        }
    }
    out
}

/// One YAML document that is not a manifest (Helm values, a patch), read as Kubernetes' tools
/// read it (docs/sources.md, "How YAML is read"), with the default [`Limits`]. The error is the
/// reason, with its line when known.
///
/// ```
/// let values = drift_manifest::read_yaml_value("mode: 0644\nenabled: on\n").unwrap();
/// assert_eq!(values, serde_json::json!({"mode": 420, "enabled": true}));
/// ```
pub fn read_yaml_value(text: &str) -> Result<Value, String> {
    parse_yaml_document(text, Limits::default()).map(|(value, _)| value).map_err(|(message, line)| match line {
        Some(line) => format!("line {line}: {message}"),
        None => message,
    })
}

/// `live`: read as objects from a cluster (`Some`), whether their managedFields are kept as text.
fn parse(text: &str, path: &str, limits: Limits, live: Option<bool>) -> ParsedManifests {
    let mut out = ParsedManifests::default();
    if text.len() > limits.max_file_bytes {
        out.warnings.push(
            SourceWarning::error(
                ErrorKind::InvalidInput,
                format!("file is {} bytes, larger than the limit of {} bytes", text.len(), limits.max_file_bytes),
            )
            .at(path, None, None),
        );
        return out;
    }
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        // JSON: one document. serde_json bounds recursion at 128 levels by itself.
        if trimmed.len() > limits.max_document_bytes {
            read_large_json(text, trimmed, path, limits, &mut out);
            return out;
        }
        if let Some((value, line)) = oversized_integer(trimmed) {
            out.warnings.push(
                SourceWarning::error(
                    ErrorKind::InvalidInput,
                    format!("invalid JSON: {}", crate::resolve::too_big(&value)),
                )
                .at(path, Some(0), Some(line + leading_lines(text, trimmed))),
            );
            return out;
        }
        // Most JSON (what kubectl and the API server write) is read by the fast reader; the
        // rest, and every error, by serde_json below.
        if let Some((value, deepest)) = crate::json_tree::read_with(trimmed, live.is_some(), live == Some(true)) {
            if deepest > limits.max_depth {
                out.warnings.push(too_deep_warning(limits.max_depth).at(path, Some(0), None));
            } else {
                collect(value, path, 0, 1, &mut out);
            }
            return out;
        }
        match serde_json::from_str::<Value>(trimmed) {
            Ok(value) => {
                if let Err(w) = check_depth(&value, limits.max_depth) {
                    out.warnings.push(w.at(path, Some(0), None));
                } else {
                    collect(value, path, 0, 1, &mut out);
                }
            }
            Err(e) => out.warnings.push(
                SourceWarning::error(
                    ErrorKind::InvalidInput,
                    format!("invalid JSON: {}", strip_position(&e.to_string())),
                )
                .at(path, Some(0), Some(e.line() + leading_lines(text, trimmed))),
            ),
        }
        return out;
    }
    for (index, doc) in split_documents(text).into_iter().enumerate() {
        if is_blank(doc.text) {
            continue;
        }
        if doc.text.len() > limits.max_document_bytes {
            read_large_yaml(&doc, index, path, limits, &mut out);
            continue;
        }
        match parse_yaml_document(doc.text, limits) {
            Ok((value, notes)) => {
                push_notes(notes, path, index, doc.first_line, &mut out);
                if !value.is_null() {
                    collect(value, path, index, doc.first_line, &mut out);
                }
            }
            Err((message, line)) => {
                out.warnings.push(SourceWarning::error(ErrorKind::InvalidInput, format!("invalid YAML: {message}")).at(
                    path,
                    Some(index),
                    Some(doc.first_line + line.unwrap_or(1) - 1),
                ))
            }
        }
    }
    out
}

/// The reader's notes on a document, each at its line in the file.
fn push_notes(notes: Vec<(String, usize)>, path: &str, index: usize, first_line: usize, out: &mut ParsedManifests) {
    for (message, line) in notes {
        out.warnings.push(SourceWarning::note(message).at(path, Some(index), Some(first_line + line - 1)));
    }
}

fn too_large(what: &str, bytes: usize, limits: Limits) -> String {
    format!(
        "{what} is {bytes} bytes, larger than the limit of {} bytes (a List larger than that is read item by item)",
        limits.max_document_bytes
    )
}

/// A YAML document over the document bound: a `List` in the layout kubectl writes (`items:` at
/// the margin, each item a `- ` entry indented by two) is read item by item, each bounded;
/// anything else is an error of that document.
fn read_large_yaml(doc: &Document<'_>, index: usize, path: &str, limits: Limits, out: &mut ParsedManifests) {
    let error = |message: String, line: usize| {
        SourceWarning::error(ErrorKind::InvalidInput, message).at(path, Some(index), Some(line))
    };
    let Some((rest, items)) = list_items(doc.text) else {
        out.warnings.push(error(too_large("document", doc.text.len(), limits), doc.first_line));
        return;
    };
    let is_list = match parse_yaml_document(&rest, limits) {
        Ok((head, _)) => head.get("kind").and_then(Value::as_str).is_some_and(|k| k.ends_with("List")),
        Err(_) => false,
    };
    if !is_list {
        out.warnings.push(error(too_large("document", doc.text.len(), limits), doc.first_line));
        return;
    }
    for (i, (line, text)) in items.into_iter().enumerate() {
        let first_line = doc.first_line + line;
        if text.len() > limits.max_document_bytes {
            out.warnings.push(error(too_large(&format!("list item {i}"), text.len(), limits), first_line));
            continue;
        }
        match parse_yaml_document(&text, limits) {
            Ok((value, notes)) => {
                push_notes(notes, path, index, first_line, out);
                push_resource(value, path, index, first_line, Some(i), out);
            }
            Err((message, at)) => out
                .warnings
                .push(error(format!("invalid YAML: list item {i}: {message}"), first_line + at.unwrap_or(1) - 1)),
        }
    }
}

/// Splits a YAML `List` in kubectl's layout into the document without its items and each item's
/// text (dedented) with its line offset in the document (from 0); `None` when the document does
/// not have that layout.
fn list_items(text: &str) -> Option<(String, Vec<(usize, String)>)> {
    let mut rest = String::new();
    let mut items: Vec<(usize, String)> = Vec::new();
    let mut in_items = false;
    let mut seen_items_key = false;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        let content = line.trim_end_matches(['\n', '\r']);
        if !in_items {
            if content == "items:" {
                in_items = true;
                seen_items_key = true;
                rest.push_str("items: []\n");
            } else {
                rest.push_str(line);
            }
            continue;
        }
        if let Some(first) = content.strip_prefix("- ").or_else(|| (content == "-").then_some("")) {
            items.push((n, format!("{first}\n")));
        } else if let Some(more) = content.strip_prefix("  ") {
            items.last_mut()?.1.push_str(&format!("{more}\n"));
        } else if content.trim().is_empty() || content.starts_with('#') {
            if let Some(last) = items.last_mut() {
                last.1.push('\n');
            }
        } else {
            // Back at the margin: the rest of the document (`kind: List`, `metadata:`).
            in_items = false;
            rest.push_str(line);
        }
    }
    seen_items_key.then_some((rest, items))
}

/// A JSON document over the document bound: a `List` (`{"apiVersion": ..., "items": [...],
/// "kind": "List"}`, as `kubectl get -o json` writes it) is read item by item, each item taken
/// as raw text, bounded and parsed alone; anything else is an error of that document.
fn read_large_json(text: &str, trimmed: &str, path: &str, limits: Limits, out: &mut ParsedManifests) {
    #[derive(serde::Deserialize)]
    struct RawList<'a> {
        #[serde(default)]
        kind: String,
        #[serde(borrow, default)]
        items: Option<Vec<&'a serde_json::value::RawValue>>,
    }
    let at = |line: usize| line + leading_lines(text, trimmed);
    let error = |message: String, line: usize| {
        SourceWarning::error(ErrorKind::InvalidInput, message).at(path, Some(0), Some(line))
    };
    let list = match serde_json::from_str::<RawList<'_>>(trimmed) {
        Ok(list) => list,
        Err(e) => {
            let message = if trimmed.starts_with('[') {
                too_large("document", trimmed.len(), limits)
            } else {
                format!("invalid JSON: {}", strip_position(&e.to_string()))
            };
            out.warnings.push(error(message, at(e.line())));
            return;
        }
    };
    let (true, Some(items)) = (list.kind.ends_with("List"), list.items) else {
        out.warnings.push(error(too_large("document", trimmed.len(), limits), at(1)));
        return;
    };
    // The item's line in the file, counted on from the previous item's.
    let (mut counted_to, mut lines_before) = (0usize, 0usize);
    for (i, raw) in items.into_iter().enumerate() {
        let raw = raw.get();
        let offset = raw.as_ptr() as usize - trimmed.as_ptr() as usize;
        lines_before += trimmed[counted_to..offset].matches('\n').count();
        counted_to = offset;
        let line = at(lines_before + 1);
        if raw.len() > limits.max_document_bytes {
            out.warnings.push(error(too_large(&format!("list item {i}"), raw.len(), limits), line));
            continue;
        }
        if let Some((value, l)) = oversized_integer(raw) {
            out.warnings
                .push(error(format!("invalid JSON: list item {i}: {}", crate::resolve::too_big(&value)), line + l - 1));
            continue;
        }
        match serde_json::from_str::<Value>(raw) {
            Ok(value) => match check_depth(&value, limits.max_depth) {
                Ok(()) => push_resource(value, path, 0, line, Some(i), out),
                Err(w) => out.warnings.push(w.at(path, Some(0), Some(line))),
            },
            Err(e) => out
                .warnings
                .push(error(format!("invalid JSON: list item {i}: {}", strip_position(&e.to_string())), line)),
        }
    }
}

fn leading_lines(text: &str, trimmed: &str) -> usize {
    let skipped = text.len() - trimmed.len();
    text[..skipped].matches('\n').count()
}

fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

pub(crate) struct Document<'a> {
    pub(crate) text: &'a str,
    /// Line of the document's first line in the file, from 1.
    first_line: usize,
}

/// Splits a YAML stream at `---` marker lines. Block scalars are indented, so a `---` at
/// column 0 always starts a document.
pub(crate) fn split_documents(text: &str) -> Vec<Document<'_>> {
    // Most files are one document with no marker: only a line starting with `---` or `...` can
    // be one, and a search for both finds that there is none faster than reading line by line.
    let marker_at_line = |m: &str, after_newline: &str| text.starts_with(m) || text.contains(after_newline);
    if !marker_at_line("---", "\n---") && !marker_at_line("...", "\n...") {
        return if text.is_empty() { Vec::new() } else { vec![Document { text, first_line: 1 }] };
    }
    let mut docs = Vec::new();
    let mut start = 0usize;
    let mut start_line = 1usize;
    let mut offset = 0usize;
    for (line_no, line) in (1usize..).zip(text.split_inclusive('\n')) {
        // Only a line starting with `---` or `...` can be a marker.
        if !(line.starts_with("---") || line.starts_with("...")) {
            offset += line.len();
            continue;
        }
        let content = line.trim_end_matches(['\n', '\r']);
        let is_marker = content == "---" || content.starts_with("--- ") || content.starts_with("---\t");
        let is_end = content == "...";
        if is_marker || is_end {
            if offset > start || !docs.is_empty() || is_end {
                docs.push(Document { text: &text[start..offset], first_line: start_line });
            }
            if is_marker && content.len() > 3 {
                // Content on the marker line (`--- {a: 1}`): keep it, without the marker.
                start = offset + 4;
                start_line = line_no;
            } else {
                start = offset + line.len();
                start_line = line_no + 1;
            }
        }
        offset += line.len();
    }
    if start < text.len() {
        docs.push(Document { text: &text[start..], first_line: start_line });
    }
    docs.retain(|d| !d.text.is_empty());
    docs
}

fn is_blank(text: &str) -> bool {
    text.lines().all(|l| {
        let t = l.trim();
        t.is_empty() || t.starts_with('#') || t.starts_with('%')
    })
}

/// An upper estimate of a YAML document's nesting, from indentation and flow brackets, checked
/// before parsing: a deep document must be refused before a recursive parser sees it.
/// Returns the line where the limit is first exceeded.
fn too_deep(text: &str, max: usize) -> Option<usize> {
    let mut indents: Vec<usize> = Vec::new();
    let mut flow = 0usize;
    for (n, line) in (1usize..).zip(text.lines()) {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let mut indent = line.len() - trimmed.len();
        let mut rest = trimmed;
        if flow == 0 {
            while indents.last().is_some_and(|&i| i >= indent) {
                indents.pop();
            }
            indents.push(indent);
            // `- - - a` opens one level per dash.
            while let Some(r) = rest.strip_prefix("- ") {
                indent += 2;
                indents.push(indent);
                rest = r.trim_start();
            }
        }
        // Bytes, not characters: every byte looked for is ASCII, and a character of several
        // bytes ends an escape as one of one byte does.
        let (mut quote, mut escaped) = (None, false);
        for b in rest.bytes() {
            match (quote, b) {
                (Some(b'"'), b'\\') if !escaped => {
                    escaped = true;
                    continue;
                }
                (Some(q), b) if b == q && !escaped => quote = None,
                (None, b'"' | b'\'') => quote = Some(b),
                (None, b'#') => break,
                (None, b'[' | b'{') => flow += 1,
                (None, b']' | b'}') => flow = flow.saturating_sub(1),
                _ => {}
            }
            escaped = false;
        }
        if indents.len() + flow > max {
            return Some(n);
        }
    }
    None
}

/// An integer of a JSON `text` that does not fit in a signed 64-bit integer, with its line: a
/// reader would turn it into a float (`1e+29`), as kubectl does, and Kubernetes' integers are
/// signed 64-bit. Only documents with a run of 19 digits are parsed again for it.
fn oversized_integer(text: &str) -> Option<(String, usize)> {
    if !has_digit_run(text.as_bytes(), 19) {
        return None;
    }
    for event in granit_parser::Parser::new_from_str(text) {
        // A syntax error is the reader's to report.
        let Ok((event, span)) = event else { return None };
        if let granit_parser::Event::Scalar(value, granit_parser::ScalarStyle::Plain, _, None) = event {
            let digits = value.strip_prefix(['-', '+']).unwrap_or(&value);
            let integer = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
            if integer && value.parse::<i64>().is_err() {
                return Some((value.into_owned(), span.start.line()));
            }
        }
    }
    None
}

/// Whether `bytes` hold `min` (at least 15) ASCII digits in a row. Such a run holds one of
/// every `min` positions, so only those are looked at (most are not digits), and the run is
/// measured only around one that is; the next position looked at is `min` past the run's end,
/// so that no byte is read more than twice: the check costs little on every document.
fn has_digit_run(bytes: &[u8], min: usize) -> bool {
    debug_assert!(min >= 15, "a run is sought only for numbers of more than 14 digits");
    let digits = |range: &mut dyn Iterator<Item = &u8>| range.take_while(|b| b.is_ascii_digit()).count();
    let mut at = min - 1;
    while let Some(b) = bytes.get(at) {
        if b.is_ascii_digit() {
            // (A run reaching back to the position looked at before would have been measured
            // from there and stepped over: this reads back fewer than `min` bytes.)
            let after = digits(&mut bytes[at..].iter());
            if digits(&mut bytes[..at].iter().rev()) + after >= min {
                return true;
            }
            at += after;
        }
        at += min;
    }
    false
}

/// A YAML document read, with its notes (message, line in the document from 1).
type YamlRead = (Value, Vec<(String, usize)>);

fn parse_yaml_document(text: &str, limits: Limits) -> Result<YamlRead, (String, Option<usize>)> {
    // The block form of manifests, line by line; it counts the depth and the nodes of what it
    // reads exactly and gives up at either bound.
    if let Some(value) = crate::yaml_lines::read(text, limits.max_depth, limits.max_nodes) {
        return Ok((value, Vec::new()));
    }
    // Before the parser, the depth estimated from the text, with a line to show.
    if let Some(line) = too_deep(text, limits.max_depth) {
        return Err((crate::yaml::too_deep(limits.max_depth), Some(line)));
    }
    let bounds = crate::yaml::Bounds {
        max_depth: limits.max_depth,
        max_nodes: limits.max_nodes,
        max_aliases: limits.max_aliases,
    };
    match crate::yaml::read(text, bounds) {
        Ok(read) => Ok((read.value, read.notes)),
        Err(crate::yaml::Failure::Refused(message, line)) => Err((message, Some(line))),
        Err(crate::yaml::Failure::Syntax) => Err(syntax_error(text, limits)),
    }
}

/// serde-saphyr's message for a document the parser refused (it reads with the same parser).
fn syntax_error(text: &str, limits: Limits) -> (String, Option<usize>) {
    let options = serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_depth: limits.max_depth,
            max_aliases: limits.max_aliases,
            max_nodes: limits.max_nodes,
            max_documents: 1,
        },
    };
    match serde_saphyr::from_str_with_options::<serde::de::IgnoredAny>(text, options) {
        Ok(_) => ("the YAML parser refused the document".to_owned(), None),
        Err(e) => {
            let plain = e.without_snippet();
            let line = plain.location().map(|l| l.line() as usize);
            let rendered = plain.render_with_options(serde_saphyr::render_options! {
                snippets: serde_saphyr::SnippetMode::Off,
            });
            // The first line is the reason; positions are given separately.
            let reason = rendered.lines().next().unwrap_or("syntax error").to_owned();
            (strip_position(&reason), line)
        }
    }
}

fn check_depth(value: &Value, max: usize) -> Result<(), SourceWarning> {
    fn depth(v: &Value, d: usize, max: usize) -> bool {
        if d > max {
            return false;
        }
        match v {
            Value::Array(a) => a.iter().all(|x| depth(x, d + 1, max)),
            Value::Object(o) => o.values().all(|x| depth(x, d + 1, max)),
            _ => true,
        }
    }
    if depth(value, 0, max) { Ok(()) } else { Err(too_deep_warning(max)) }
}

fn too_deep_warning(max: usize) -> SourceWarning {
    SourceWarning::error(ErrorKind::InvalidInput, format!("document nested deeper than {max} levels"))
}

/// Turns one parsed document into resources (expanding lists) or warnings.
fn collect(value: Value, path: &str, document: usize, first_line: usize, out: &mut ParsedManifests) {
    let Value::Object(map) = &value else {
        out.warnings.push(SourceWarning::note("document is not a mapping; not a Kubernetes object, skipped").at(
            path,
            Some(document),
            Some(first_line),
        ));
        return;
    };
    let has_api_version = map.get("apiVersion").and_then(Value::as_str).is_some_and(|s| !s.is_empty());
    let kind = map.get("kind").and_then(Value::as_str).unwrap_or("");
    if !has_api_version && kind.is_empty() {
        out.warnings.push(
            SourceWarning::note("document has no apiVersion and no kind; not a Kubernetes object, skipped").at(
                path,
                Some(document),
                Some(first_line),
            ),
        );
        return;
    }
    if kind.ends_with("List") && map.get("items").is_some_and(Value::is_array) {
        let Value::Object(mut map) = value else { return };
        if let Some(Value::Array(items)) = map.remove("items") {
            for (i, item) in items.into_iter().enumerate() {
                push_resource(item, path, document, first_line, Some(i), out);
            }
        }
        return;
    }
    push_resource(value, path, document, first_line, None, out);
}

fn push_resource(
    value: Value,
    path: &str,
    document: usize,
    first_line: usize,
    item: Option<usize>,
    out: &mut ParsedManifests,
) {
    match Resource::from_object(value) {
        Ok(r) => out.resources.push(r.with_provenance(Provenance {
            path: Some(path.to_owned()),
            document: Some(document),
            ..Provenance::default()
        })),
        Err(e) => {
            let item = item.map(|i| format!("list item {i}: ")).unwrap_or_default();
            out.warnings.push(SourceWarning::error(ErrorKind::InvalidInput, format!("{item}{}", e.message())).at(
                path,
                Some(document),
                Some(first_line),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The pre-check finds a run of digits exactly when a plain scan does, wherever
        /// the run starts against the positions it looks at.
        #[test]
        fn digit_runs_are_found_wherever_they_start(
            text in "[0-9a]{0,80}", pad in 0usize..8, min in 15usize..24,
        ) {
            let text = format!("{}{text}", "x".repeat(pad));
            let plain = text.as_bytes().split(|b| !b.is_ascii_digit()).any(|run| run.len() >= min);
            proptest::prop_assert_eq!(has_digit_run(text.as_bytes(), min), plain);
        }
    }

    #[test]
    fn a_run_of_nineteen_digits_across_two_chunks_is_found() {
        let text = format!("{}{}", "a".repeat(7), "1".repeat(19));
        assert!(has_digit_run(text.as_bytes(), 19));
        assert!(!has_digit_run(format!("{}{}", "a".repeat(7), "1".repeat(18)).as_bytes(), 19));
    }

    #[test]
    fn multi_document_with_list_and_line_numbers() {
        let text = "# header\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Secret\n  metadata: {name: s, namespace: x}\n---\nbroken: [\n";
        let p = parse_manifests(text, "f.yaml");
        let names: Vec<_> = p.resources.iter().map(|r| r.key.name.as_str()).collect();
        assert_eq!(names, ["a", "s"]);
        assert_eq!(p.resources[1].provenance.document, Some(1));
        assert_eq!(p.warnings.len(), 1);
        let w = &p.warnings[0];
        assert!(w.fatal);
        assert_eq!(w.document, Some(2));
        assert_eq!(w.line, Some(14), "{w}");
    }

    #[test]
    fn missing_kind_and_name_are_errors_with_position() {
        let p =
            parse_manifests("apiVersion: v1\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\n", "x.yaml");
        assert!(p.resources.is_empty());
        assert_eq!(p.warnings.len(), 2);
        assert!(p.warnings[0].message.contains("no kind"), "{}", p.warnings[0]);
        assert!(p.warnings[1].message.contains("no metadata.name"), "{}", p.warnings[1]);
        assert_eq!(p.warnings[1].line, Some(4));
        assert!(p.warnings.iter().all(|w| w.fatal));
    }

    #[test]
    fn a_list_over_the_document_bound_is_read_item_by_item_with_lines() {
        let limits = Limits { max_document_bytes: 120, ..Limits::default() };
        let yaml = "apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a, namespace: x}\n\
                    - apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: [bad\n\
                    - apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: c\n    namespace: x\n  data:\n    t: |\n      one\n      two\n\
                    kind: List\nmetadata: {}\n";
        let parsed = parse_manifests_with(yaml, "dump.yaml", limits);
        let names: Vec<_> = parsed.resources.iter().map(|r| r.key.name.as_str()).collect();
        assert_eq!(names, ["a", "c"]);
        assert_eq!(parsed.resources[1].object["data"]["t"], "one\ntwo\n");
        assert_eq!(parsed.warnings.len(), 1, "{:?}", parsed.warnings);
        assert!(parsed.warnings[0].fatal && parsed.warnings[0].message.contains("list item 1"));
        assert_eq!(parsed.warnings[0].line, Some(8), "the line of the broken item in the file");

        let json = format!(
            "{{\"apiVersion\": \"v1\", \"items\": [\n{},\n{}\n], \"kind\": \"List\"}}",
            r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "x"}}"#,
            r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}, "n": 100000000000000000000000000000}"#
        );
        let parsed = parse_manifests_with(&json, "dump.json", limits);
        assert_eq!(parsed.resources.len(), 1);
        assert_eq!(parsed.warnings.len(), 1);
        assert!(parsed.warnings[0].message.contains("does not fit in 64 bits"), "{:?}", parsed.warnings);
        assert_eq!(parsed.warnings[0].line, Some(3));

        let not_a_list =
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a}}\ndata: {{k: {}}}\n", "v".repeat(200));
        let parsed = parse_manifests_with(&not_a_list, "big.yaml", limits);
        assert!(parsed.resources.is_empty());
        assert!(parsed.warnings[0].fatal && parsed.warnings[0].message.contains("larger than the limit"));
    }

    #[test]
    fn a_float_read_from_yaml_survives_a_json_round_trip_exactly() {
        // Found by the `manifest` fuzz target: serde_json must read floats exactly
        // (`float_roundtrip`), or an object written as JSON reads back as another value.
        let text =
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: tags}\ndata:\n  big: 000000000000995158874220407624\n";
        let parsed = parse_manifests(text, "f.yaml");
        let object = &parsed.resources[0].object;
        let again: Value = serde_json::from_str(&serde_json::to_string(object).unwrap()).unwrap();
        assert_eq!(&again, &**object);
    }

    #[test]
    fn live_objects_are_read_without_their_status_in_every_form() {
        let object = |name: &str| {
            serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
                "spec": {"replicas": 2, "status": "kept: not the object's"}, "status": {"replicas": 1}})
        };
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [object("a"), object("b")]});
        let one = object("c").to_string();
        let texts = [
            (one.clone(), 1),
            (serde_json::to_string_pretty(&object("d")).unwrap(), 1),
            (list.to_string(), 2),
            (
                format!(
                    "{}\n---\n{}",
                    serde_saphyr::to_string(&object("e")).unwrap(),
                    serde_saphyr::to_string(&list).unwrap()
                ),
                3,
            ),
        ];
        for (text, objects) in &texts {
            let live = parse_live_manifests(text, "live", Limits::default());
            let desired = parse_manifests(text, "live");
            assert_eq!(live.resources.len(), *objects, "{text}");
            assert!(live.warnings.is_empty() && desired.warnings.is_empty(), "{text}");
            for (l, d) in live.resources.iter().zip(&desired.resources) {
                assert!(l.object.get("status").is_none(), "{text}");
                assert_eq!(d.object["status"]["replicas"], 1, "desired objects keep theirs");
                let mut without = (*d.object).clone();
                without.as_object_mut().unwrap().remove("status");
                assert_eq!(*l.object, without);
            }
        }
        // A broken status is the document's error as before, not skipped over.
        let broken = one.replace("{\"replicas\":1}", "{\"replicas\":01}");
        assert_ne!(broken, one);
        let live = parse_live_manifests(&broken, "live.json", Limits::default());
        assert!(live.resources.is_empty());
        assert_eq!(live.warnings, parse_manifests_with(&broken, "live.json", Limits::default()).warnings);
    }

    proptest::proptest! {
        /// Nothing nested deeper than the bound is read, whichever reader reads it, and what is
        /// well within it is read.
        #[test]
        fn nothing_deeper_than_the_bound_is_read(levels in 1usize..14, max in 2usize..12, sequences in 0u16..) {
            let mut yaml = String::from("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\ndata:\n");
            let mut indent = 2;
            for level in 0..levels {
                let pad = " ".repeat(indent);
                if sequences >> (level % 16) & 1 == 1 {
                    yaml.push_str(&format!("{pad}- k{level}:\n"));
                    indent += 4;
                } else {
                    yaml.push_str(&format!("{pad}k{level}:\n"));
                    indent += 2;
                }
            }
            yaml.push_str(&format!("{}leaf: 1\n", " ".repeat(indent)));
            let limits = Limits { max_depth: max, ..Limits::default() };
            for text in [yaml.clone(), serde_json::to_string_pretty(&serde_saphyr::from_str::<Value>(&yaml).unwrap()).unwrap()] {
                let parsed = parse_manifests_with(&text, "deep", limits);
                if let Some(r) = parsed.resources.first() {
                    proptest::prop_assert!(check_depth(&r.object, max).is_ok(), "{} read past {}", text, max);
                } else {
                    let depth = if text.starts_with('{') { "nested deeper" } else { "deeper" };
                    proptest::prop_assert!(parsed.warnings[0].message.contains(depth), "{:?}", parsed.warnings);
                }
                // The tree's depth: the leaf under data, its levels, and a list item for each dash.
                let deepest = 2 + levels + (0..levels).filter(|l| sequences >> (l % 16) & 1 == 1).count();
                if deepest + 2 <= max {
                    proptest::prop_assert_eq!(parsed.resources.len(), 1, "{}", text);
                }
            }
        }
    }

    #[test]
    fn json_document() {
        let p =
            parse_manifests("\n{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"s\"}}", "s.json");
        assert_eq!(p.resources.len(), 1);
        let bad = parse_manifests("{\n\"apiVersion\": }", "b.json");
        assert_eq!(bad.warnings[0].line, Some(2));
    }

    #[test]
    fn yaml_booleans_and_numbers_follow_yaml_1_1_readers() {
        // Golden behaviour that the normaliser must live with (DEPENDENCIES.md pitfalls).
        let p = parse_manifests(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  on: yes\n  v: 1.10\n  q: \"1.10\"\n",
            "a.yaml",
        );
        let data = &p.resources[0].object["data"];
        assert_eq!(data["q"], Value::String("1.10".into()));
        assert!(data["v"].is_number());
    }

    #[test]
    fn tags_are_read_as_kubectl_reads_them_with_a_note() {
        let ok = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\ndata: {a: \"1\"}\n";
        for ((tagged, field, want, says), line) in [
            (
                "data: !!python/object/apply:os.system [\"id\"]\n",
                "data",
                serde_json::json!(["id"]),
                "the tag !!python/object/apply:os.system is ignored",
            ),
            ("data:\n  a: !custom 0644\n", "data", serde_json::json!({"a": "0644"}), "the tag !custom is ignored"),
            ("data:\n  a: !!binary aGVsbG8=\n", "data", serde_json::json!({"a": "hello"}), "!!binary"),
            ("data:\n  a: 1\n  a: 2\n", "data", serde_json::json!({"a": 2}), "given twice"),
        ]
        .into_iter()
        .zip([9, 10, 10, 11])
        {
            let text = format!("{ok}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: b}}\n{tagged}");
            let p = parse_manifests(&text, "a.yaml");
            assert_eq!(p.resources.len(), 2, "{tagged}: {:?}", p.warnings);
            assert_eq!(p.resources[1].object[field], want, "{tagged}");
            assert_eq!(p.warnings.len(), 1, "{tagged}: {:?}", p.warnings);
            let w = &p.warnings[0];
            assert!(!w.fatal && w.message.contains(says), "{tagged}: {w}");
            assert_eq!((w.document, w.line), (Some(1), Some(line)), "{tagged}: {w}");
        }
    }

    #[test]
    fn integers_beyond_64_bits_are_errors_of_their_document_not_silent_changes() {
        let ok = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\ndata: {a: \"1\"}\n";
        for big in ["100000000000000000000000000000", "18446744073709551615", "-9223372036854775809"] {
            let bad =
                format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: b}}\nspec:\n  replicas: {big}\n");
            let p = parse_manifests(&format!("{ok}---\n{bad}"), "a.yaml");
            assert_eq!(p.resources.len(), 1, "the other document is read: {bad}");
            assert_eq!(p.warnings.len(), 1, "{bad}: {:?}", p.warnings);
            let w = &p.warnings[0];
            assert!(w.fatal && w.message.contains("does not fit in 64 bits"), "{bad}: {}", w.message);
            assert_eq!((w.document, w.line), (Some(1), Some(10)));
            let json = parse_manifests(
                &format!(
                    "{{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {{\"name\": \"j\"}}, \"data\": {{\"n\": {big}}}}}"
                ),
                "a.json",
            );
            assert!(
                json.resources.is_empty() && json.warnings[0].message.contains("does not fit"),
                "{:?}",
                json.warnings
            );
        }
        // Long digit runs that are not plain integers are values like any other; the i64 edges
        // are exact.
        let fine = parse_manifests(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n  q: \"100000000000000000000000000000\"\n  b: |\n    100000000000000000000000000000\n  max: 9223372036854775807\n  min: -9223372036854775808\n",
            "c.yaml",
        );
        assert!(fine.warnings.is_empty(), "{:?}", fine.warnings);
        let data = &fine.resources[0].object["data"];
        assert_eq!(data["max"], serde_json::json!(i64::MAX));
        assert_eq!(data["min"], serde_json::json!(i64::MIN));
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(2048))]

        /// A live object read into a tree is the one resource `parse_live_manifests_compared`
        /// reads from the same text, with the same limits; and it is read so wherever that reads
        /// one object and nothing else with the fast reader, from a document that is no `List`.
        #[test]
        fn a_live_tree_is_the_one_resource_the_live_parse_reads(
            text in crate::json_tree::tests::live_text(),
            prefix in proptest::sample::select(&["", " \n", "\u{feff}", "\u{feff}\n\t"][..]),
            depth in proptest::prop_oneof![5 => proptest::strategy::Just(100usize), 1 => 0usize..8],
            bound in 0u8..12,
        ) {
            let text = format!("{prefix}{text}");
            let trimmed = text.trim_start_matches('\u{feff}').trim_start();
            // Now and then a bound just at the file's size or the document's, or just under.
            let mut limits = Limits { max_depth: depth, ..Limits::live() };
            match bound {
                0 => limits.max_file_bytes = text.len(),
                1 => limits.max_file_bytes = text.len() - 1,
                2 => limits.max_document_bytes = trimmed.len(),
                3 => limits.max_document_bytes = trimmed.len().saturating_sub(1),
                _ => {}
            }
            let parsed = parse_live_manifests_compared(&text, "live.json", limits);
            let tree = read_live_tree(&text, "live.json", limits);
            if let Some(tree) = &tree {
                proptest::prop_assert!(parsed.warnings.is_empty(), "{:?}: {:?}", text, parsed.warnings);
                proptest::prop_assert_eq!(parsed.resources.len(), 1, "{:?}", text);
                proptest::prop_assert_eq!(&tree.to_resource(), &parsed.resources[0], "{:?}", text);
            }
            let fast = text.len() <= limits.max_file_bytes
                && trimmed.len() <= limits.max_document_bytes
                && crate::json_tree::read_with(trimmed, true, true).is_some_and(|(value, _)| {
                    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
                    !(kind.ends_with("List") && value.get("items").is_some_and(Value::is_array))
                });
            let alone = parsed.resources.len() == 1 && parsed.warnings.is_empty();
            proptest::prop_assert_eq!(tree.is_some(), fast && alone, "{:?}: {:?}", text, parsed);
        }
    }

    #[test]
    fn a_live_tree_is_read_only_where_the_live_parse_reads_one_object_alone() {
        let object = r#"{
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {
        "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {"f:replicas": {}}}}],
        "name": "web",
        "namespace": "shop"
    },
    "spec": {"replicas": 2, "ratio": 0.5, "note": "caf\u00e9"},
    "status": {"replicas": 1}
}
"#;
        let limits = Limits::live();
        fn read(text: &str, limits: Limits) -> (Option<drift_model::tree::ObjectTree<'_>>, ParsedManifests) {
            let parsed = parse_live_manifests_compared(text, "live.json", limits);
            (read_live_tree(text, "live.json", limits), parsed)
        }
        for text in [object.to_owned(), format!("\u{feff}\n  {object}")] {
            let (tree, parsed) = read(&text, limits);
            let tree = tree.expect("read into a tree");
            assert_eq!(parsed.resources, [tree.to_resource()]);
            assert_eq!(tree.key.name, "web");
            assert_eq!(tree.provenance.document, Some(0));
            let object = tree.tree.to_value();
            assert!(object.get("status").is_none());
            assert_eq!(
                object["metadata"]["managedFields"].as_str().map(|raw| raw.starts_with("[{\"manager\"")),
                Some(true)
            );
            assert_eq!(object["spec"]["note"], "café");
        }

        // Each of these the live parse reads some other way, or refuses: never a tree.
        let list = |kind: &str| format!(r#"{{"apiVersion": "v1", "kind": "{kind}", "items": [{object}]}}"#);
        let tight = |change: fn(&mut Limits)| {
            let mut l = limits;
            change(&mut l);
            l
        };
        let cases = [
            ("a List", list("List"), limits, 1),
            ("a PodList", list("PodList"), limits, 1),
            ("no name", object.replace("\"name\": \"web\",", ""), limits, 0),
            ("no kind", object.replace("\"kind\": \"Deployment\",", ""), limits, 0),
            ("no apiVersion nor kind", r#"{"replicas": 2}"#.to_owned(), limits, 0),
            ("too deep", object.to_owned(), tight(|l| l.max_depth = 5), 0),
            (
                "an integer beyond 64 bits",
                object.replace("\"replicas\": 2", "\"replicas\": 100000000000000000000"),
                limits,
                0,
            ),
            ("invalid JSON", object.replace("\"replicas\": 2,", "\"replicas\": 2,,"), limits, 0),
            ("a number left to serde_json", object.replace("\"replicas\": 2", "\"replicas\": -0"), limits, 1),
            ("YAML", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n".to_owned(), limits, 1),
            ("a JSON list", format!("[{object}]"), limits, 0),
            ("a file over the bound", object.to_owned(), tight(|l| l.max_file_bytes = 100), 0),
            ("a document over the bound", object.to_owned(), tight(|l| l.max_document_bytes = 100), 0),
        ];
        for (what, text, limits, resources) in cases {
            let (tree, parsed) = read(&text, limits);
            assert!(tree.is_none(), "{what}: {text}");
            assert_eq!(parsed.resources.len(), resources, "{what}: {:?}", parsed.warnings);
        }
        // The same object at the depth bound is read.
        assert!(read(object, tight(|l| l.max_depth = 6)).0.is_some());
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(2048))]

        /// A desired object read into a tree is the one resource `parse_manifests_with` reads
        /// from the same text, with the same limits, at the same document; and it is read so
        /// wherever that parse reads one object and says nothing else, from the one document
        /// with content, which the line reader reads and which is no `List`.
        #[test]
        fn a_manifest_tree_is_the_one_resource_the_parse_reads(
            written in crate::yaml_lines::tests::manifest(),
            prefix in proptest::sample::select(&["", "---\n", "# c\n", "# c\n---\n", "\n---\n\n---\n", "%YAML 1.2\n---\n", "\u{feff}", " {"][..]),
            suffix in proptest::sample::select(
                &["", "---\n", "...\n", "---\n# c\n", "---\nkind: ConfigMap\napiVersion: v1\nmetadata: {name: b}\n", "---\nfoo: bar\n", "---\n~\n"][..],
            ),
            depth in proptest::prop_oneof![4 => proptest::strategy::Just(100usize), 1 => 0usize..8],
            nodes in proptest::prop_oneof![4 => proptest::strategy::Just(1_000_000usize), 1 => 0usize..60],
            bound in 0u8..12,
        ) {
            let text = format!("{prefix}{}{suffix}", written.text);
            let documents: Vec<Document<'_>> = split_documents(&text).into_iter().filter(|d| !is_blank(d.text)).collect();
            let first = documents.first().map_or(0, |d| d.text.len());
            // Now and then a bound just at the file's size or the document's, or just under.
            let mut limits = Limits { max_depth: depth, max_nodes: nodes, ..Limits::default() };
            match bound {
                0 => limits.max_file_bytes = text.len(),
                1 => limits.max_file_bytes = text.len() - 1,
                2 => limits.max_document_bytes = first,
                3 => limits.max_document_bytes = first.saturating_sub(1),
                _ => {}
            }
            let parsed = parse_manifests_with(&text, "app.yaml", limits);
            let tree = read_manifest_tree(&text, "app.yaml", limits);
            if let Some(tree) = &tree {
                proptest::prop_assert!(parsed.warnings.is_empty(), "{:?}: {:?}", text, parsed.warnings);
                proptest::prop_assert_eq!(parsed.resources.len(), 1, "{:?}", text);
                proptest::prop_assert_eq!(&tree.to_resource(), &parsed.resources[0], "{:?}", text);
            }
            let fast = text.len() <= limits.max_file_bytes
                && !text.trim_start_matches('\u{feff}').trim_start().starts_with(['{', '['])
                && documents.len() == 1
                && first <= limits.max_document_bytes
                && crate::yaml_lines::read(documents[0].text, depth, nodes).is_some_and(|value| {
                    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
                    !(kind.ends_with("List") && value.get("items").is_some_and(Value::is_array))
                });
            let alone = parsed.resources.len() == 1 && parsed.warnings.is_empty();
            proptest::prop_assert_eq!(tree.is_some(), fast && alone, "{:?}: {:?}", text, parsed);
        }
    }

    /// The generated manifests are read into trees often enough for the property above to say
    /// something of them.
    #[test]
    fn most_generated_manifests_that_parse_alone_are_read_into_trees() {
        use proptest::strategy::{Strategy, ValueTree};
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let (mut trees, mut alone) = (0, 0);
        for _ in 0..1000 {
            let text = crate::yaml_lines::tests::manifest().new_tree(&mut runner).unwrap().current().text;
            let parsed = parse_manifests(&text, "app.yaml");
            alone += usize::from(parsed.resources.len() == 1 && parsed.warnings.is_empty());
            trees += usize::from(read_manifest_tree(&text, "app.yaml", Limits::default()).is_some());
        }
        assert!(trees >= 120 && trees * 2 > alone, "{trees} trees of {alone} objects read alone");
    }

    #[test]
    fn a_manifest_tree_is_read_only_where_the_parse_reads_one_object_alone() {
        let object = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: shop\n  labels:\n    app: web # the app\nspec:\n  replicas: 2\n  template:\n    spec:\n      containers:\n      - name: web\n        image: \"nginx:1.25\"\n        args: ['--port=8080', \"-v\\tx\"]\n";
        let flowless =
            object.replace("args: ['--port=8080', \"-v\\tx\"]", "args:\n        - '--port=8080'\n        - \"-v\\tx\"");
        let limits = Limits::default();
        fn read(text: &str, limits: Limits) -> (Option<drift_model::tree::ObjectTree<'_>>, ParsedManifests) {
            (read_manifest_tree(text, "app.yaml", limits), parse_manifests_with(text, "app.yaml", limits))
        }
        // Blank documents, comments and directives before the object count as the parse
        // counts them; so do a marker or comments after it.
        for (text, document) in [
            (flowless.clone(), 0),
            (format!("---\n{flowless}"), 0),
            (format!("# the web app\n# of the shop\n{flowless}---\n"), 0),
            (format!("# the web app\n---\n{flowless}...\n"), 1),
            (format!("---\n---\n# c\n---\n{flowless}---\n# end\n"), 1),
            (format!("%YAML 1.2\n---\n{flowless}"), 1),
        ] {
            let (tree, parsed) = read(&text, limits);
            let tree = tree.unwrap_or_else(|| panic!("read into a tree: {text}"));
            assert!(parsed.warnings.is_empty(), "{text}: {:?}", parsed.warnings);
            assert_eq!(parsed.resources, [tree.to_resource()], "{text}");
            assert_eq!(tree.provenance.document, Some(document), "{text}");
            assert_eq!(tree.provenance.path.as_deref(), Some("app.yaml"));
            assert_eq!((tree.key.name.as_str(), tree.key.namespace.as_deref()), ("web", Some("shop")));
            let object = tree.tree.to_value();
            assert_eq!(object["spec"]["template"]["spec"]["containers"][0]["args"][1], "-v\tx");
            assert_eq!(object["metadata"]["labels"]["app"], "web");
        }

        // Each of these the parse reads some other way, or refuses, or says something of:
        // never a tree.
        let tight = |change: fn(&mut Limits)| {
            let mut l = limits;
            change(&mut l);
            l
        };
        let cases = [
            ("two objects", format!("{flowless}---\n{}", flowless.replace("name: web", "name: api")), limits, 2, 0),
            ("an object and a note", format!("{flowless}---\nreplicas: 2\n"), limits, 1, 1),
            ("an object and a null document", format!("{flowless}---\n~\n"), limits, 1, 0),
            ("a flow collection, left to the events reader", object.to_owned(), limits, 1, 0),
            (
                "a List",
                format!(
                    "apiVersion: v1\nkind: List\nmetadata:\n  name: all\nitems:\n- {}",
                    flowless.replace('\n', "\n  ").trim_end()
                ),
                limits,
                1,
                0,
            ),
            (
                "a PodList",
                "apiVersion: v1\nkind: PodList\nmetadata:\n  name: all\nitems: []\n".to_owned(),
                limits,
                0,
                0,
            ),
            ("no name", flowless.replace("  name: web\n", ""), limits, 0, 1),
            ("no kind", flowless.replace("kind: Deployment\n", ""), limits, 0, 1),
            ("no apiVersion nor kind", "metadata:\n  name: web\n".to_owned(), limits, 0, 1),
            ("not a mapping", "- web\n".to_owned(), limits, 0, 1),
            ("invalid YAML", flowless.replace("replicas: 2", "replicas: [2"), limits, 0, 1),
            ("a key given twice", flowless.replace("replicas: 2", "replicas: 2\n  replicas: 3"), limits, 1, 1),
            ("a tag", flowless.replace("replicas: 2", "replicas: !custom 2"), limits, 1, 1),
            (
                "an integer beyond 64 bits",
                flowless.replace("replicas: 2", "replicas: 100000000000000000000"),
                limits,
                0,
                1,
            ),
            ("a YAML 1.1 value", flowless.replace("replicas: 2", "paused: on"), limits, 1, 0),
            ("too deep", flowless.clone(), tight(|l| l.max_depth = 5), 0, 1),
            ("too many nodes", flowless.clone(), tight(|l| l.max_nodes = 10), 0, 1),
            ("a file over the bound", flowless.clone(), tight(|l| l.max_file_bytes = 100), 0, 1),
            ("a document over the bound", flowless.clone(), tight(|l| l.max_document_bytes = 100), 0, 1),
            (
                "JSON",
                r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}"#.to_owned(),
                limits,
                1,
                0,
            ),
            ("a byte-order mark", format!("\u{feff}{flowless}"), limits, 1, 0),
            ("nothing", String::new(), limits, 0, 0),
            ("comments alone", "# nothing\n---\n# here\n".to_owned(), limits, 0, 0),
        ];
        for (what, text, limits, resources, warnings) in cases {
            let (tree, parsed) = read(&text, limits);
            assert!(tree.is_none(), "{what}: {text}");
            assert_eq!((parsed.resources.len(), parsed.warnings.len()), (resources, warnings), "{what}: {parsed:?}");
        }
        // Where the parse reads the object at the tightest depth or node bound, so does this.
        let alone = |limits| {
            let (tree, parsed) = read(&flowless, limits);
            (tree.is_some(), parsed.resources.len() == 1 && parsed.warnings.is_empty())
        };
        let depth = (0..20).find(|&d| alone(Limits { max_depth: d, ..limits }).1).unwrap();
        assert_eq!(depth, 7, "six levels of collections and their scalars");
        assert_eq!(alone(Limits { max_depth: depth, ..limits }), (true, true));
        assert_eq!(alone(Limits { max_depth: depth - 1, ..limits }), (false, false));
        let nodes = (0..100).find(|&n| alone(Limits { max_nodes: n, ..limits }).1).unwrap();
        assert_eq!(alone(Limits { max_nodes: nodes, ..limits }), (true, true));
        assert_eq!(alone(Limits { max_nodes: nodes - 1, ..limits }), (false, false));
    }
}
