//! Loading Kubernetes manifests from YAML or JSON text.
//!
//! Multi-document YAML, JSON, `kind: List` (and `*List` kinds with `items`) are read into
//! [`Resource`]s. Documents that are not Kubernetes objects (no `apiVersion` and no `kind`:
//! values files, CI workflows) are skipped with a note. Broken documents give a fatal warning
//! with file, document index and line, and the other documents are still read. Input is bounded:
//! file size, nesting depth, aliases (YAML alias bombs), nodes.

use serde_json::Value;

use crate::ErrorKind;
use crate::model::{Provenance, Resource, SourceWarning};

/// Limits of the loader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest file accepted, in bytes (default 16 MiB).
    pub max_file_bytes: usize,
    /// Deepest nesting of mappings and sequences (default 100; real objects stay under 40).
    pub max_depth: usize,
    /// Most alias (`*ref`) uses in one file (default 10,000).
    pub max_aliases: usize,
    /// Most nodes in one document (default 1,000,000).
    pub max_nodes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_file_bytes: 16 << 20, max_depth: 100, max_aliases: 10_000, max_nodes: 1_000_000 }
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

/// Parses a file's text with the default [`Limits`].
///
/// ```
/// let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nfoo: bar\n";
/// let parsed = drift_core::manifest::parse_manifests(text, "app/cm.yaml");
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
        if let Some((value, line)) = oversized_integer(trimmed) {
            out.warnings.push(
                SourceWarning::error(
                    ErrorKind::InvalidInput,
                    format!("invalid JSON: the integer {value} does not fit in 64 bits (Kubernetes rejects it)"),
                )
                .at(path, Some(0), Some(line + leading_lines(text, trimmed))),
            );
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
        match parse_yaml_document(doc.text, limits) {
            Ok(Value::Null) => {}
            Ok(value) => collect(value, path, index, doc.first_line, &mut out),
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

struct Document<'a> {
    text: &'a str,
    /// Line of the document's first line in the file, from 1.
    first_line: usize,
}

/// Splits a YAML stream at `---` marker lines. Block scalars are indented, so a `---` at
/// column 0 always starts a document.
fn split_documents(text: &str) -> Vec<Document<'_>> {
    let mut docs = Vec::new();
    let mut start = 0usize;
    let mut start_line = 1usize;
    let mut offset = 0usize;
    for (line_no, line) in (1usize..).zip(text.split_inclusive('\n')) {
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
        let (mut quote, mut escaped) = (None, false);
        for c in rest.chars() {
            match (quote, c) {
                (Some('"'), '\\') if !escaped => {
                    escaped = true;
                    continue;
                }
                (Some(q), c) if c == q && !escaped => quote = None,
                (None, '"' | '\'') => quote = Some(c),
                (None, '#') => break,
                (None, '[' | '{') => flow += 1,
                (None, ']' | '}') => flow = flow.saturating_sub(1),
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

/// A plain integer of `text` (YAML or JSON) that does not fit in 64 bits, with its line: a
/// reader would turn it into a float (`1e+29`), and Kubernetes rejects it. Only documents with a
/// run of 19 digits are parsed again for it.
fn oversized_integer(text: &str) -> Option<(String, usize)> {
    let mut run = 0;
    if !text.bytes().any(|b| {
        run = if b.is_ascii_digit() { run + 1 } else { 0 };
        run >= 19
    }) {
        return None;
    }
    for event in granit_parser::Parser::new_from_str(text) {
        // A syntax error is the reader's to report.
        let Ok((event, span)) = event else { return None };
        if let granit_parser::Event::Scalar(value, granit_parser::ScalarStyle::Plain, _, None) = event {
            let digits = value.strip_prefix(['-', '+']).unwrap_or(&value);
            let integer = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
            if integer && value.parse::<i64>().is_err() && digits.parse::<u64>().is_err() {
                return Some((value.into_owned(), span.start.line()));
            }
        }
    }
    None
}

fn parse_yaml_document(text: &str, limits: Limits) -> Result<Value, (String, Option<usize>)> {
    if let Some(line) = too_deep(text, limits.max_depth) {
        return Err((format!("document nested deeper than {} levels", limits.max_depth), Some(line)));
    }
    if let Some((value, line)) = oversized_integer(text) {
        return Err((format!("the integer {value} does not fit in 64 bits (Kubernetes rejects it)"), Some(line)));
    }
    let options = serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_depth: limits.max_depth,
            max_aliases: limits.max_aliases,
            max_nodes: limits.max_nodes,
            max_documents: 1,
        },
        // A tag it does not know (`!!python/object/apply:...`, `!custom`) is an error of the
        // document, not a value silently kept without it.
        reject_unsupported_tags: true,
    };
    serde_saphyr::from_str_with_options::<Value>(text, options).map_err(|e| {
        let plain = e.without_snippet();
        let line = plain.location().map(|l| l.line() as usize);
        let rendered = plain.render_with_options(serde_saphyr::render_options! {
            snippets: serde_saphyr::SnippetMode::Off,
        });
        // The first line is the reason; positions are given separately.
        let reason = rendered.lines().next().unwrap_or("syntax error").to_owned();
        (strip_position(&reason), line)
    })
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
    if depth(value, 0, max) {
        Ok(())
    } else {
        Err(SourceWarning::error(ErrorKind::InvalidInput, format!("document nested deeper than {max} levels")))
    }
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
    fn unknown_tags_and_integers_beyond_64_bits_are_errors_of_their_document_not_silent_changes() {
        let ok = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\ndata: {a: \"1\"}\n";
        for (bad, says) in [
            (
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\ndata: !!python/object/apply:os.system [\"id\"]\n",
                "tag",
            ),
            ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\ndata:\n  a: !custom x\n", "tag"),
            (
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: b}\nspec:\n  replicas: 100000000000000000000000000000\n",
                "does not fit in 64 bits",
            ),
        ] {
            let p = parse_manifests(&format!("{ok}---\n{bad}"), "a.yaml");
            assert_eq!(p.resources.len(), 1, "the other document is read: {bad}");
            assert_eq!(p.warnings.len(), 1, "{bad}: {:?}", p.warnings);
            let w = &p.warnings[0];
            assert!(w.message.contains(says), "{bad}: {}", w.message);
            assert_eq!(w.document, Some(1));
        }
        let json = parse_manifests(
            "{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"j\"}, \"data\": {\"n\": 123456789012345678901234}}",
            "a.json",
        );
        assert!(json.resources.is_empty() && json.warnings[0].message.contains("does not fit"), "{:?}", json.warnings);
        // Long digit runs that are not plain integers are values like any other; u64 and i64
        // edges are exact.
        let fine = parse_manifests(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n  q: \"100000000000000000000000000000\"\n  b: |\n    100000000000000000000000000000\n  max: 18446744073709551615\n  min: -9223372036854775808\n",
            "c.yaml",
        );
        assert!(fine.warnings.is_empty(), "{:?}", fine.warnings);
        let data = &fine.resources[0].object["data"];
        assert_eq!(data["max"], serde_json::json!(18446744073709551615u64));
        assert_eq!(data["min"], serde_json::json!(i64::MIN));
    }
}
