//! YAML documents read as Kubernetes reads them, straight from the parser's events.
//!
//! kubectl, Helm, Flux and Argo CD read YAML through sigs.k8s.io/yaml (go-yaml v2, then JSON):
//! [`read`] builds the same tree from granit-parser's events (the parser serde-saphyr uses, with
//! the options it gives it), every scalar typed by [`crate::resolve`]: YAML 1.1's integers,
//! floats, booleans and nulls, tags resolved or ignored as go-yaml does, anchors and aliases,
//! merge keys (`<<`, a later key wins over an earlier one, whichever wrote it), a key given twice
//! (the last wins, with a note), keys written as the strings Kubernetes makes of them. A syntax
//! error is left to serde-saphyr, whose messages stay the only ones; what Kubernetes refuses
//! (an infinite value, a null key) is an error with its line. The line reader
//! ([`crate::yaml_lines`]) reads most manifests before this does, and a differential property
//! test holds the two equal; another holds this one to the real kubectl
//! (drift-test-apiserver/tests/yaml_kubectl.rs).

use std::collections::HashMap;

use granit_parser::{Event, Parser, ScalarStyle};
use serde_json::{Map, Value};

use crate::resolve::{self, Scalar};

/// serde-saphyr's defaults for what its budget gives the parser (`Budget::parser_options`).
/// Comments are not asked for: they are no part of the tree, and a parser that emits them bounds
/// how many it buffers between a key and its value, where kubectl reads any number.
const SIMPLE_KEY_MAX_LOOKAHEAD: usize = 1024;
const FLOW_NESTING_LIMIT: usize = 255;

const MERGE_TAG: &str = "tag:yaml.org,2002:merge";

/// The reader's bounds (from the loader's [`crate::Limits`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    pub(crate) max_depth: usize,
    pub(crate) max_nodes: usize,
    pub(crate) max_aliases: usize,
}

/// A document read: its tree and what is worth a note (a tag ignored, a key given twice), each
/// with its line in the document (from 1).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Read {
    pub(crate) value: Value,
    pub(crate) notes: Vec<(String, usize)>,
}

/// Why a document was not read.
#[derive(Debug, PartialEq)]
pub(crate) enum Failure {
    /// The parser's: its message is serde-saphyr's to give.
    Syntax,
    /// A document YAML allows and Kubernetes refuses, or one past a bound: the message and the
    /// line in the document (from 1).
    Refused(String, usize),
}

/// A key read, whose value comes next.
enum Key {
    Str(String),
    Merge,
}

/// A collection being built, with the anchor it defines (0 for none).
enum Frame {
    Seq(Vec<Value>, usize),
    Map(Map<String, Value>, Option<Key>, usize),
}

/// What an anchor names: a scalar keeps its type (it may be used as a key, where a float is
/// written otherwise than as a value).
enum Anchored {
    Scalar(Scalar),
    Tree(Value, usize, usize),
}

/// Reads one document (see the module documentation).
pub(crate) fn read(text: &str, bounds: Bounds) -> Result<Read, Failure> {
    let mut options = granit_parser::Options::default();
    options.simple_key_max_lookahead = SIMPLE_KEY_MAX_LOOKAHEAD;
    options.flow_nesting_limit = FLOW_NESTING_LIMIT;
    options.block_nesting_limit = options.block_nesting_limit.max(bounds.max_depth.saturating_add(1));
    options.emit_comments = false;
    let mut stack: Vec<Frame> = Vec::new();
    let mut anchors: HashMap<usize, Anchored> = HashMap::new();
    let mut out = Read::default();
    let mut root: Option<Value> = None;
    let (mut nodes, mut aliases) = (0usize, 0usize);
    let mut ignored_tags: Vec<String> = Vec::new();
    let mut deferred = Deferred::default();
    for event in Parser::new_from_str_with_options(text, options) {
        let (event, span) = event.map_err(|_| Failure::Syntax)?;
        let line = span.start.line();
        let refused = |message: String| Failure::Refused(message, line);
        let in_key = matches!(stack.last(), Some(Frame::Map(_, None, _)));
        let value = match event {
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Comment(..) => continue,
            // A second document is the reader's to refuse.
            Event::DocumentStart(..) if root.is_some() => return Err(Failure::Syntax),
            Event::DocumentStart(..) => continue,
            Event::Scalar(text, style, anchor, tag) => {
                nodes += 1;
                if nodes > bounds.max_nodes {
                    return Err(refused(too_many_nodes(bounds.max_nodes)));
                }
                let tag = tag.map(|t| format!("{}{}", t.handle(), t.suffix()));
                let plain = style == ScalarStyle::Plain;
                if let Some(t) = &tag {
                    note_tag(t, &mut ignored_tags, line, &mut out.notes);
                }
                if in_key && text == "<<" && ((plain && tag.is_none()) || tag.as_deref() == Some(MERGE_TAG)) {
                    if let Some(Frame::Map(_, key, _)) = stack.last_mut() {
                        *key = Some(Key::Merge);
                    }
                    continue;
                }
                let scalar = resolve::resolve(tag.as_deref(), &text, plain).map_err(refused)?;
                if anchor != 0 {
                    anchors.insert(anchor, Anchored::Scalar(scalar.clone()));
                }
                if in_key {
                    set_key(&mut stack, resolve::to_key(scalar).unwrap_or_else(|e| deferred.key(e, line)));
                    continue;
                }
                resolve::to_value(scalar).unwrap_or_else(|e| deferred.value(e, line))
            }
            Event::Alias(id) => {
                aliases += 1;
                if aliases > bounds.max_aliases {
                    return Err(refused(format!("more than {} aliases in the document", bounds.max_aliases)));
                }
                match anchors.get(&id) {
                    None => return Err(refused("an alias refers to the node that contains it".to_owned())),
                    Some(Anchored::Scalar(scalar)) if in_key => {
                        set_key(&mut stack, resolve::to_key(scalar.clone()).unwrap_or_else(|e| deferred.key(e, line)));
                        continue;
                    }
                    Some(Anchored::Scalar(scalar)) => {
                        nodes += 1;
                        resolve::to_value(scalar.clone()).unwrap_or_else(|e| deferred.value(e, line))
                    }
                    Some(Anchored::Tree(..)) if in_key => return Err(refused(collection_key())),
                    Some(Anchored::Tree(value, depth, count)) => {
                        nodes += count;
                        if nodes > bounds.max_nodes {
                            return Err(refused(too_many_nodes(bounds.max_nodes)));
                        }
                        if stack.len() + depth > bounds.max_depth {
                            return Err(refused(too_deep(bounds.max_depth)));
                        }
                        value.clone()
                    }
                }
            }
            Event::SequenceStart(_, anchor, ref tag) | Event::MappingStart(_, anchor, ref tag) => {
                nodes += 1;
                if nodes > bounds.max_nodes {
                    return Err(refused(too_many_nodes(bounds.max_nodes)));
                }
                if in_key {
                    return Err(refused(collection_key()));
                }
                if stack.len() >= bounds.max_depth {
                    return Err(refused(too_deep(bounds.max_depth)));
                }
                if let Some(t) = tag {
                    let t = format!("{}{}", t.handle(), t.suffix());
                    note_tag(&t, &mut ignored_tags, line, &mut out.notes);
                }
                stack.push(if matches!(event, Event::SequenceStart(..)) {
                    Frame::Seq(Vec::new(), anchor)
                } else {
                    Frame::Map(Map::new(), None, anchor)
                });
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (value, anchor) = match stack.pop() {
                    Some(Frame::Seq(items, anchor)) => (Value::Array(items), anchor),
                    Some(Frame::Map(map, None, anchor)) => (Value::Object(map), anchor),
                    _ => return Err(Failure::Syntax),
                };
                if anchor != 0 {
                    let (depth, count) = shape(&value);
                    anchors.insert(anchor, Anchored::Tree(value.clone(), depth, count));
                }
                value
            }
            // Anything else the parser may say.
            _ => return Err(Failure::Syntax),
        };
        match stack.last_mut() {
            None if root.is_none() => root = Some(value),
            None => return Err(Failure::Syntax),
            Some(Frame::Seq(items, _)) => items.push(value),
            Some(Frame::Map(map, key, _)) => match key.take() {
                Some(Key::Str(k)) => match map.entry(k) {
                    serde_json::map::Entry::Vacant(entry) => {
                        entry.insert(value);
                    }
                    serde_json::map::Entry::Occupied(mut entry) => {
                        let note = format!(
                            "the key {:?} is given twice; the last value is used, as kubectl does",
                            entry.key()
                        );
                        out.notes.push((note, line));
                        entry.insert(value);
                    }
                },
                Some(Key::Merge) => merge(map, value).map_err(refused)?,
                None => return Err(Failure::Syntax),
            },
        }
    }
    if !stack.is_empty() {
        return Err(Failure::Syntax);
    }
    out.value = root.unwrap_or(Value::Null);
    if let Some((message, line)) = deferred.left_in(&out.value) {
        return Err(Failure::Refused(message, line));
    }
    Ok(out)
}

/// Errors of writing the JSON (an infinite value, a null key), which go-yaml meets only when
/// it writes the tree: one counts only if its value or key is still there at the end (a later
/// key given twice, or a merge, may have replaced it). Each stands in the tree as a marker.
#[derive(Default)]
struct Deferred(Vec<(String, usize)>);

impl Deferred {
    const MARK: &str = "\u{0}drift:deferred:";

    fn key(&mut self, message: String, line: usize) -> String {
        self.0.push((message, line));
        format!("{}{}\u{0}", Self::MARK, self.0.len() - 1)
    }

    fn value(&mut self, message: String, line: usize) -> Value {
        Value::String(self.key(message, line))
    }

    /// The first error whose marker is still in `tree`.
    fn left_in(&self, tree: &Value) -> Option<(String, usize)> {
        if self.0.is_empty() {
            return None;
        }
        let mut first = usize::MAX;
        let mut look = |s: &str| {
            let index = s.strip_prefix(Self::MARK).and_then(|r| r.strip_suffix('\u{0}')?.parse::<usize>().ok());
            first = first.min(index.unwrap_or(usize::MAX));
        };
        let mut todo = vec![tree];
        while let Some(v) = todo.pop() {
            match v {
                Value::String(s) => look(s),
                Value::Array(items) => todo.extend(items),
                Value::Object(map) => {
                    for (k, v) in map {
                        look(k);
                        todo.push(v);
                    }
                }
                _ => {}
            }
        }
        self.0.get(first).cloned()
    }
}

fn set_key(stack: &mut [Frame], k: String) {
    if let Some(Frame::Map(_, key, _)) = stack.last_mut() {
        *key = Some(Key::Str(k));
    }
}

/// go-yaml's merge: a mapping's entries are set in place (over what is there); a sequence's
/// mappings from the last to the first, so that an earlier one wins.
fn merge(map: &mut Map<String, Value>, value: Value) -> Result<(), String> {
    let wrong = || "map merge requires map or sequence of maps as the value".to_owned();
    match value {
        Value::Object(entries) => map.extend(entries),
        Value::Array(items) => {
            if !items.iter().all(Value::is_object) {
                return Err(wrong());
            }
            for item in items.into_iter().rev() {
                if let Value::Object(entries) = item {
                    map.extend(entries);
                }
            }
        }
        _ => return Err(wrong()),
    }
    Ok(())
}

/// A note for a tag that changes nothing or is decoded, once per tag and document.
fn note_tag(tag: &str, seen: &mut Vec<String>, line: usize, notes: &mut Vec<(String, usize)>) {
    let core = tag.strip_prefix("tag:yaml.org,2002:");
    let note = match core {
        Some("str" | "int" | "float" | "bool" | "null" | "timestamp" | "merge" | "map" | "seq") => return,
        Some("binary") => "a !!binary value is read as the text it decodes to, as kubectl reads it".to_owned(),
        _ => {
            let shown = core.map_or_else(|| tag.to_owned(), |c| format!("!!{c}"));
            format!("the tag {shown} is ignored, as kubectl ignores it: the value is read as written")
        }
    };
    if !seen.iter().any(|t| t == tag) {
        seen.push(tag.to_owned());
        notes.push((note, line));
    }
}

/// The depth and the number of nodes of a tree.
fn shape(value: &Value) -> (usize, usize) {
    match value {
        Value::Array(items) => items.iter().map(shape).fold((1, 1), |(d, n), (cd, cn)| (d.max(cd + 1), n + cn)),
        Value::Object(map) => map.values().map(shape).fold((1, 1), |(d, n), (cd, cn)| (d.max(cd + 1), n + cn)),
        _ => (0, 1),
    }
}

pub(crate) fn too_deep(max: usize) -> String {
    format!("document nested deeper than {max} levels")
}

fn too_many_nodes(max: usize) -> String {
    format!("document has more than {max} nodes")
}

fn collection_key() -> String {
    "a map key is a mapping or a sequence, which Kubernetes' YAML reader refuses".to_owned()
}

/// Characters that a number's text may hold, in every spelling YAML or a float parser accepts
/// (signs, radix prefixes, hexadecimal digits, exponents, `.inf`/`.nan`, underscores,
/// sexagesimal colons, commas): a plain scalar that starts like a number and holds only these
/// is left to the reader.
const NUMERIC: &[u8] = b"0123456789abcdefABCDEFxXoObBiInN._+-:,";

/// YAML 1.1 booleans and null in any case: go-yaml reads some cases only, which the events
/// reader knows.
const WORDS: &[&str] = &["y", "yes", "n", "no", "on", "off", "true", "false", "null"];

/// What a plain scalar without tag is, when it is plain at a glance ([`plain`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Plain {
    Null,
    Bool(bool),
    Int(i64),
    /// A string, which is the scalar's text as written: a reader that keeps the text's slices
    /// borrows it rather than copy it.
    Str,
}

/// The type and value of a plain scalar without tag, when it is plain at a glance. Nothing is
/// copied: a string is the text itself.
pub(crate) fn plain(s: &str) -> Option<Plain> {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Some(Plain::Null),
        "true" | "True" | "TRUE" => return Some(Plain::Bool(true)),
        "false" | "False" | "FALSE" => return Some(Plain::Bool(false)),
        _ => {}
    }
    let first = *s.as_bytes().first()?;
    if first.is_ascii_alphabetic() {
        // A word that is not a boolean or null is a string (`inf`, `nan` too: the reader
        // reads a float only from a numeral).
        return if WORDS.iter().any(|w| s.eq_ignore_ascii_case(w)) { None } else { Some(Plain::Str) };
    }
    let digits = s.strip_prefix('-').unwrap_or(s);
    let decimal = !digits.is_empty() && digits.len() <= 18 && digits.bytes().all(|b| b.is_ascii_digit());
    if decimal && (digits == s || digits != "0") {
        // No leading zero (octal for some readers, a string for others).
        return if digits.len() > 1 && digits.starts_with('0') { None } else { s.parse::<i64>().ok().map(Plain::Int) };
    }
    if (first.is_ascii_digit() || matches!(first, b'+' | b'-' | b'.')) && s.bytes().all(|b| NUMERIC.contains(&b)) {
        return None;
    }
    Some(Plain::Str)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proptest::prelude::*;

    const BOUNDS: Bounds = Bounds { max_depth: 100, max_nodes: 1_000_000, max_aliases: 10_000 };

    /// The reader's tree, or its failure.
    fn reader(text: &str) -> Result<Value, Failure> {
        read(text, BOUNDS).map(|r| r.value)
    }

    /// The line reader's tree, when it reads the document.
    fn lines(text: &str) -> Option<Value> {
        crate::yaml_lines::read(text, 100, 1_000_000)
    }

    /// Plain scalars that sit on the edges of YAML's typing rules.
    #[rustfmt::skip]
    const TOKENS: &[&str] = &[
        "", "~", "null", "Null", "NULL", "nULL", "true", "True", "TRUE", "tRUE", "false", "FALSE", "yes", "Yes",
        "no", "NO", "on", "Off", "y", "n", "Y", "N", "inf", "nan", "NaN", "Infinity", ".inf", "-.inf", ".NaN",
        "+.nan", "0", "-0", "+0", "00", "007", "-007", "12", "-12", "+12", "123456789012345678",
        "-123456789012345678", "1234567890123456789", "99999999999999999999", "1_000", "0x1F", "0X1F", "0o17",
        "0b101", "1.5", "-1.5", "1.", ".5", "+.5", "1e5", "1E5", "1e999", "-1e999", "1:30", "1,000", "10.0.0.1",
        "500m", "100Mi", "1Gi", "0.5Gi", "3s", "--port=8080", "-Xmx512m", "-", "--", ".", "_", "+", "/var/run",
        "a b", "nginx:1.25", "app.kubernetes.io/name", "2023-12-31", "2001-12-14t21:59:43.10-05:00", "90deg",
        "1.5rad", "~foo", "=x", "<<", "$HOME", "a#b", "é", "ÿes", "1__0", "_1", "0x", "0xg", "1e", "e5",
    ];

    #[derive(Debug, Clone)]
    enum Node {
        Scalar(&'static str, u8),
        Seq(Vec<Node>, bool),
        Map(Vec<((&'static str, u8), Node)>, bool),
    }

    fn node() -> impl Strategy<Value = Node> {
        let scalar = (proptest::sample::select(TOKENS), 0u8..5).prop_map(|(t, s)| Node::Scalar(t, s));
        scalar.prop_recursive(4, 24, 5, |inner| {
            let key = (proptest::sample::select(TOKENS), 0u8..5);
            prop_oneof![
                (proptest::collection::vec(inner.clone(), 0..4), proptest::bool::weighted(0.2))
                    .prop_map(|(v, flow)| Node::Seq(v, flow)),
                (proptest::collection::vec((key, inner), 0..4), proptest::bool::weighted(0.2))
                    .prop_map(|(v, flow)| Node::Map(v, flow)),
            ]
        })
    }

    /// A scalar in one of the styles: plain (most often), single- or double-quoted, literal.
    fn scalar(t: &str, style: u8, indent: usize) -> String {
        match style {
            3 => format!("'{}'", t.replace('\'', "''")),
            4 => format!("\"{}\"", t.replace('\\', "\\\\").replace('"', "\\\"")),
            2 if indent > 0 && !t.is_empty() => format!("|\n{}{t}", " ".repeat(indent)),
            _ => t.to_owned(),
        }
    }

    fn flow(n: &Node, out: &mut String) {
        match n {
            Node::Scalar(t, s) => out.push_str(&scalar(t, if *s >= 3 { *s } else { 0 }, 0)),
            Node::Seq(items, _) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    flow(item, out);
                }
                out.push(']');
            }
            Node::Map(entries, _) => {
                out.push('{');
                for (i, ((k, ks), v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(&scalar(k, if *ks >= 3 { *ks } else { 0 }, 0));
                    out.push_str(": ");
                    flow(v, out);
                }
                out.push('}');
            }
        }
    }

    /// Writes `n` after a `key:` or a `- ` at `indent`.
    fn block(n: &Node, indent: usize, out: &mut String) {
        let pad = " ".repeat(indent);
        match n {
            Node::Scalar(t, s) => {
                out.push(' ');
                out.push_str(&scalar(t, *s, indent + 2));
            }
            Node::Seq(items, in_flow) if *in_flow || items.is_empty() => {
                out.push(' ');
                flow(n, out);
            }
            Node::Map(entries, in_flow) if *in_flow || entries.is_empty() => {
                out.push(' ');
                flow(n, out);
            }
            Node::Seq(items, _) => {
                for item in items {
                    out.push('\n');
                    out.push_str(&pad);
                    out.push('-');
                    block(item, indent + 2, out);
                }
            }
            Node::Map(entries, _) => {
                for ((k, ks), v) in entries {
                    out.push('\n');
                    out.push_str(&pad);
                    out.push_str(&scalar(k, if *ks >= 3 { *ks } else { 0 }, 0));
                    out.push(':');
                    block(v, indent + 2, out);
                }
            }
        }
    }

    /// [`block`] in the compact form tools write: a sequence at its key's indentation, a
    /// mapping item's first entry on the item's line (`- key: value`).
    fn block_compact(n: &Node, indent: usize, out: &mut String) {
        match n {
            Node::Seq(items, false) if !items.is_empty() => {
                let at = indent.saturating_sub(2);
                for item in items {
                    out.push('\n');
                    out.push_str(&" ".repeat(at));
                    out.push_str("- ");
                    item_inline(item, at + 2, out);
                }
            }
            Node::Map(entries, false) if !entries.is_empty() => {
                for ((k, ks), v) in entries {
                    out.push('\n');
                    out.push_str(&" ".repeat(indent));
                    out.push_str(&scalar(k, if *ks >= 3 { *ks } else { 0 }, 0));
                    out.push(':');
                    block_compact(v, indent + 2, out);
                }
            }
            _ => block(n, indent, out),
        }
    }

    /// A sequence item after its `- `, its content at column `col`.
    fn item_inline(n: &Node, col: usize, out: &mut String) {
        match n {
            Node::Map(entries, false) if !entries.is_empty() => {
                for (j, ((k, ks), v)) in entries.iter().enumerate() {
                    if j > 0 {
                        out.push('\n');
                        out.push_str(&" ".repeat(col));
                    }
                    out.push_str(&scalar(k, if *ks >= 3 { *ks } else { 0 }, 0));
                    out.push(':');
                    block_compact(v, col + 2, out);
                }
            }
            Node::Seq(items, false) if !items.is_empty() => block_compact(n, col + 2, out),
            Node::Scalar(t, s) => out.push_str(&scalar(t, *s, col + 2)),
            _ => {
                let mut rest = String::new();
                block(n, col + 2, &mut rest);
                out.push_str(rest.trim_start_matches(' '));
            }
        }
    }

    fn document_compact(n: &Node) -> String {
        let mut out = String::new();
        match n {
            Node::Map(entries, false) if !entries.is_empty() => {
                block_compact(n, 0, &mut out);
                out.remove(0);
            }
            _ => {
                out.push_str("root:");
                block_compact(n, 2, &mut out);
            }
        }
        out.push('\n');
        out
    }

    fn document(n: &Node) -> String {
        let mut out = String::new();
        match n {
            Node::Map(entries, false) if !entries.is_empty() => block(n, 0, &mut out),
            _ => {
                out.push_str("root:");
                block(n, 2, &mut out);
            }
        }
        out.push('\n');
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

        /// Whenever the line reader reads a document, the reader reads the same tree (in the
        /// indented form and in the compact one); the reader's parser refuses only what
        /// serde-saphyr's refuses. The line reader's tree build reads the same as its `Value`
        /// build.
        #[test]
        fn the_line_reader_reads_what_the_reader_reads(n in node()) {
            for text in [document(&n), document_compact(&n)] {
                let full = reader(&text);
                if full == Err(Failure::Syntax) {
                    prop_assert!(serde_saphyr::from_str::<serde::de::IgnoredAny>(&text).is_err(), "{}", text);
                }
                let tree = crate::yaml_lines::read_tree(&text, 100, 1_000_000);
                prop_assert_eq!(tree.map(|t| t.to_value()), lines(&text), "{}", text);
                if let Some(fast) = lines(&text) {
                    prop_assert_eq!(Ok(fast), full, "{}", text);
                }
            }
        }
    }

    /// Documents on the edges of the line reader's form: whatever it reads, the reader reads
    /// the same; what it leaves, the events path or the reader read.
    #[test]
    fn the_line_reader_reads_edge_documents_as_the_reader_does() {
        let long_key = format!("{}: 1\n", "k".repeat(1100));
        let docs: &[&str] = &[
            "a: b\n  c\n",
            "a:\n- b\n  c\n",
            "a: |+\n  x\n\n\nb: 1\n",
            "a: |-\n  x\n\n  y\n\nb: 1\n",
            "a: |\n\n  x\n",
            "a: |\n   \n  x\n",
            "a: |\n  x\n # c\n  y\nb: 1\n",
            "a: \"x\"#c\n",
            "a: \"x\" #c\n",
            "a: 'x''y' # c\n",
            "a: 'x\n  y'\n",
            "a: \"x\\x41\"\n",
            "a: \"x\\u0041\\n\"\n",
            "a: \"\\ud800\"\n",
            "<<: {a: 1}\n",
            "a: 1\na: 2\n",
            "a: b: c\n",
            "a: b:\n",
            "- - x\n",
            "a:\n- - x\n",
            "a:\n-\n- x\n",
            "a:\n  -\n  - x\n",
            "a: \u{1}\n",
            "a: x\u{85}y\n",
            "a: x\u{2028}y\n",
            "a: -x\n",
            "a: - x\n",
            "a: :x\n",
            "a: []\nb: {}\nc: [ ]\n",
            "a: [] # c\nb: []x\n",
            "--- \na: 1\n",
            "---\na: 1\n---\nb: 1\n",
            "a: 1\n...\n",
            "%YAML 1.2\n---\na: 1\n",
            "a:\n  b: 1\n c: 2\n",
            "a:\n    b: 1\n  c: 2\n",
            "- a: 1\n  b: 2\n",
            "k:\n- a: 1\n   b: 2\n",
            "k:\n-   a: 1\n    b: 2\n",
            "'a': 1\n\"b\": 2\n\"c\":3\n",
            "a b: c d\n",
            "a#b: c#d\n",
            "on: 1\n",
            "a: yes\n",
            "? a\n: b\n",
            &long_key,
        ];
        let mut taken = 0;
        for text in docs {
            if let Some(fast) = lines(text) {
                taken += 1;
                assert_eq!(Ok(fast), reader(text), "{text:?}");
            }
        }
        assert!(taken >= 10, "the line reader took {taken} of {} edge documents", docs.len());
    }

    /// The line reader takes most generated documents, in both forms (else the property
    /// above would say little of it).
    #[test]
    fn the_line_reader_reads_most_generated_documents() {
        use proptest::strategy::ValueTree;
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let (mut taken, mut all) = (0, 0);
        for _ in 0..1000 {
            let n = node().new_tree(&mut runner).unwrap().current();
            for text in [document(&n), document_compact(&n)] {
                all += 1;
                taken += usize::from(crate::yaml_lines::read(&text, 100, 1_000_000).is_some());
            }
        }
        assert!(taken * 3 > all, "the line reader took {taken} of {all} documents");
    }

    /// What the line reader types at a glance, it types as Kubernetes does.
    #[test]
    fn plain_scalars_typed_at_a_glance_are_typed_as_kubernetes_types_them() {
        let mut typed = 0;
        for t in TOKENS.iter().chain(&["0644", "0O17", "yES", "1.0", "1e3", "08", "-0", "12", "-7", "é", "x_1"]) {
            if let Some(p) = plain(t) {
                let v = match p {
                    Plain::Null => Value::Null,
                    Plain::Bool(b) => Value::Bool(b),
                    Plain::Int(i) => Value::from(i),
                    Plain::Str => Value::String((*t).to_owned()),
                };
                typed += 1;
                assert_eq!(crate::resolve::resolve(None, t, true).and_then(crate::resolve::to_value), Ok(v), "{t:?}");
            }
        }
        assert!(typed > 30, "{typed} tokens typed at a glance");
    }

    #[test]
    fn every_token_alone_is_read_as_the_reader_reads_it_or_left_to_it() {
        let mut fast = 0;
        for t in TOKENS {
            for style in 0..5u8 {
                let text = format!("k: {}\n", scalar(t, style, 2));
                if let Some(v) = lines(&text) {
                    fast += 1;
                    assert_eq!(Ok(v), reader(&text), "{text}");
                }
                let key = format!("{}: v\n", scalar(t, if style >= 3 { style } else { 0 }, 0));
                if let Some(v) = lines(&key) {
                    assert_eq!(Ok(v), reader(&key), "{key}");
                }
            }
        }
        assert!(fast > TOKENS.len() * 3, "the line reader read only {fast} documents");
    }

    /// Every YAML document under `dir`: (read by the line reader, all), each read so checked
    /// against the reader, which reads every one.
    fn documents_under(dir: &std::path::Path) -> (usize, usize) {
        let (mut fast, mut all) = (0, 0);
        let mut folders = vec![dir.to_path_buf()];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(&folder).unwrap().flatten() {
                let path = entry.path();
                if entry.file_type().unwrap().is_dir() {
                    folders.push(path);
                } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                    let Ok(text) = std::fs::read_to_string(&path) else { continue };
                    for doc in crate::parse::split_documents(&text) {
                        all += 1;
                        let full = reader(doc.text);
                        assert!(full.is_ok(), "{}: {full:?}", path.display());
                        if let Some(v) = lines(doc.text) {
                            fast += 1;
                            assert_eq!(Ok(v), full, "{}", path.display());
                        }
                    }
                }
            }
        }
        (fast, all)
    }

    #[test]
    fn the_repository_examples_read_the_same_both_ways() {
        let (fast, all) = documents_under(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples"));
        assert!(all > 5 && fast * 2 > all, "{fast} of {all} documents took the fast path");
    }

    #[test]
    fn the_corpus_reads_the_same_both_ways() {
        let Some(corpus) = drift_testkit::corpus::dir("the_corpus_reads_the_same_both_ways", "") else { return };
        let (fast, all) = documents_under(&corpus);
        eprintln!("{fast} of {all} YAML documents of the corpus took the fast path");
        assert!(fast * 2 > all, "{fast} of {all} documents took the fast path");
    }

    /// Comments anywhere, and runs of them longer than serde-saphyr buffers: the reader reads
    /// them all, as kubectl does, and the line reader reads what the reader reads.
    #[test]
    fn comments_are_read_as_the_reader_reads_them() {
        let mut fast = 0;
        for run in [1, 31, 32, 33, 40, 100] {
            let comments = "# c\n".repeat(run);
            for text in [
                format!("{comments}a: 1\n"),
                format!("a:\n{comments}  b: 1\n"),
                format!("a:\n{comments}- 1\n"),
                format!("a:\n  - 1\n{comments}  - 2\n"),
                format!("a: 1 # c\n{comments}b: [1, # c\n  2]\n"),
                format!("? a\n{comments}: b\n"),
            ] {
                let full = reader(&text);
                assert!(full.is_ok(), "{text}: {full:?}");
                if let Some(v) = lines(&text) {
                    fast += 1;
                    assert_eq!(Ok(v), full, "{text}");
                }
            }
        }
        assert!(fast >= 4, "the fast path read only {fast} documents with comments");
    }

    #[test]
    fn a_manifest_is_read_and_what_is_not_block_form_is_left_to_the_reader() {
        let manifest = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: shop\n  labels: {app: web, tier: \"1\"}\nspec:\n  replicas: 3\n  template:\n    spec:\n      containers:\n        - name: web\n          image: nginx:1.25\n          args: [--port=8080, -v]\n          resources:\n            limits: {cpu: 500m, memory: 256Mi}\n          env:\n            - name: A\n              value: 'yes'\n            - name: B\n              value: |\n                line one\n                line two\n          securityContext:\n            runAsNonRoot: true\n            runAsUser: 1000\n";
        let full = reader(manifest).expect("a common manifest is read");
        assert_eq!(full["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"], "yes");
        let block = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  a: x\n  b: |\n    one\n";
        assert_eq!(Ok(lines(block).expect("the block form takes the line reader")), reader(block));
        for left in [
            "a: 1.5\n",
            "a: yes\n",
            "a: 0x1F\n",
            "a: &x 1\nb: *x\n",
            "a: !!str 1\n",
            "a: 1\na: 2\n",
            "<<: {a: 1}\n",
            "? [a]\n: b\n",
            "a: [\n",
            "",
            "8080: x\n",
        ] {
            assert!(lines(left).is_none(), "{left:?} is left to the reader");
        }
        let deep = "a:\n  b:\n    c: 1\n";
        let lines_within = |depth, nodes| crate::yaml_lines::read(deep, depth, nodes);
        assert!(lines_within(2, 1_000_000).is_none() && lines_within(3, 1_000_000).is_some());
        assert!(lines_within(3, 3).is_none() && lines_within(3, 7).is_some());
        let within = |max_depth, max_nodes| read(deep, Bounds { max_depth, max_nodes, max_aliases: 1 }).is_ok();
        assert!(!within(2, 1_000_000) && within(3, 1_000_000));
        assert!(!within(3, 6) && within(3, 7));
    }
}
