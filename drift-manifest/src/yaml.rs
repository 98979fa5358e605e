//! Manifests in their common form, read straight from the YAML parser's events into a tree.
//!
//! serde-saphyr reads a document into a `Value` through serde, which costs about as much again
//! as its parser's events (docs/benchmarks.md, "Where the whole `drift diff` goes"). Manifests
//! use a small part of YAML: block and flow collections, string keys, quoted and block scalars,
//! and plain scalars that are strings, integers, booleans or null at a glance. [`read`] builds
//! the tree of such a document from the same parser (granit-parser, with the options
//! serde-saphyr gives it) and gives up, with `None`, at the first thing outside that form: a
//! tag, an anchor, an alias, a merge key or a key given twice, a key that is not plainly a
//! string, a plain scalar whose type needs YAML's fuller rules (floats, octal and hexadecimal,
//! leading zeros, `yes`/`no`/`on`/`off`), a syntax error, or a document near a bound of the
//! reader's budget. serde-saphyr then reads the document, so that its rules and its error
//! messages stay the only ones; a differential property test holds the two readers equal.

use granit_parser::{Event, Parser, ScalarStyle};
use serde_json::{Map, Value};

/// serde-saphyr's defaults for what its budget gives the parser (`Budget::parser_options`; it
/// has the parser emit comments, and bounds how many it buffers).
const SIMPLE_KEY_MAX_LOOKAHEAD: usize = 1024;
const FLOW_NESTING_LIMIT: usize = 255;
const MAX_BUFFERED_COMMENT_EVENTS: usize = 32;
/// Below serde-saphyr's default bound on events (1,000,000), with room for how it counts.
const MAX_EVENTS: usize = 500_000;

/// A collection being built.
enum Frame {
    Seq(Vec<Value>),
    /// A mapping, and the key read whose value comes next.
    Map(Map<String, Value>, Option<String>),
}

/// The tree of one YAML document in the common form, or `None` (see the module documentation).
/// `max_depth` and `max_nodes` are the reader's bounds: a document that reaches one is left to
/// the reader, which reports it. `manifest` calls the two readers apart (it estimates the depth
/// between them); the tests hold them together to serde-saphyr's tree.
#[cfg(test)]
pub(crate) fn read(text: &str, max_depth: usize, max_nodes: usize) -> Option<Value> {
    // The block form of manifests, line by line, before the parser's events.
    if let Some(value) = crate::yaml_lines::read(text, max_depth, max_nodes) {
        return Some(value);
    }
    events(text, max_depth, max_nodes)
}

/// [`read`] from granit-parser's events.
pub(crate) fn events(text: &str, max_depth: usize, max_nodes: usize) -> Option<Value> {
    let mut options = granit_parser::Options::default();
    options.simple_key_max_lookahead = SIMPLE_KEY_MAX_LOOKAHEAD;
    options.flow_nesting_limit = FLOW_NESTING_LIMIT;
    options.block_nesting_limit = options.block_nesting_limit.max(max_depth.saturating_add(1));
    options.emit_comments = true;
    options.max_buffered_comment_events = MAX_BUFFERED_COMMENT_EVENTS;
    let mut stack: Vec<Frame> = Vec::new();
    let mut root: Option<Value> = None;
    let (mut nodes, mut events) = (0usize, 0usize);
    for event in Parser::new_from_str_with_options(text, options) {
        let (event, _) = event.ok()?;
        events += 1;
        if events > MAX_EVENTS {
            return None;
        }
        let value = match event {
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Comment(..) => continue,
            // A second document is the reader's to refuse.
            Event::DocumentStart(..) if root.is_some() => return None,
            Event::DocumentStart(..) => continue,
            Event::Scalar(text, style, anchor, tag) => {
                nodes += 1;
                if anchor != 0 || tag.is_some() || nodes > max_nodes {
                    return None;
                }
                let value = match style {
                    ScalarStyle::Plain => plain(&text)?,
                    _ => Value::String(text.into_owned()),
                };
                if let Some(Frame::Map(_, key @ None)) = stack.last_mut() {
                    // A key: a string, never the merge key.
                    match value {
                        Value::String(k) if k != "<<" => *key = Some(k),
                        _ => return None,
                    }
                    continue;
                }
                value
            }
            Event::SequenceStart(_, anchor, ref tag) | Event::MappingStart(_, anchor, ref tag) => {
                nodes += 1;
                let complex_key = matches!(stack.last(), Some(Frame::Map(_, None)));
                if anchor != 0 || tag.is_some() || nodes > max_nodes || stack.len() >= max_depth || complex_key {
                    return None;
                }
                stack.push(if matches!(event, Event::SequenceStart(..)) {
                    Frame::Seq(Vec::new())
                } else {
                    Frame::Map(Map::new(), None)
                });
                continue;
            }
            Event::SequenceEnd => match stack.pop()? {
                Frame::Seq(items) => Value::Array(items),
                Frame::Map(..) => return None,
            },
            Event::MappingEnd => match stack.pop()? {
                Frame::Map(map, None) => Value::Object(map),
                _ => return None,
            },
            // Aliases, and anything else the parser may say.
            _ => return None,
        };
        match stack.last_mut() {
            None if root.is_none() => root = Some(value),
            None => return None,
            Some(Frame::Seq(items)) => items.push(value),
            Some(Frame::Map(map, key)) => {
                let key = key.take()?;
                if map.contains_key(&key) {
                    return None;
                }
                map.insert(key, value);
            }
        }
    }
    if !stack.is_empty() {
        return None;
    }
    // An empty document is the reader's too.
    root
}

/// Characters that a number's text may hold, in every spelling YAML or a float parser accepts
/// (signs, radix prefixes, hexadecimal digits, exponents, `.inf`/`.nan`, underscores,
/// sexagesimal colons, commas): a plain scalar that starts like a number and holds only these
/// is left to the reader.
const NUMERIC: &[u8] = b"0123456789abcdefABCDEFxXoObBiInN._+-:,";

/// YAML 1.1 booleans, in any case (the reader's `parse_yaml11_bool`), and null.
const WORDS: &[&str] = &["y", "yes", "n", "no", "on", "off", "true", "false", "null"];

/// The value of a plain scalar without tag, when it is plain at a glance.
pub(crate) fn plain(s: &str) -> Option<Value> {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Some(Value::Null),
        "true" | "True" | "TRUE" => return Some(Value::Bool(true)),
        "false" | "False" | "FALSE" => return Some(Value::Bool(false)),
        _ => {}
    }
    let first = *s.as_bytes().first()?;
    if first.is_ascii_alphabetic() {
        // A word that is not a boolean or null is a string (`inf`, `nan` too: the reader
        // reads a float only from a numeral).
        return if WORDS.iter().any(|w| s.eq_ignore_ascii_case(w)) { None } else { Some(Value::String(s.to_owned())) };
    }
    let digits = s.strip_prefix('-').unwrap_or(s);
    let decimal = !digits.is_empty() && digits.len() <= 18 && digits.bytes().all(|b| b.is_ascii_digit());
    if decimal && (digits == s || digits != "0") {
        // No leading zero (octal for some readers, a string for others).
        return if digits.len() > 1 && digits.starts_with('0') { None } else { s.parse::<i64>().ok().map(Value::from) };
    }
    if (first.is_ascii_digit() || matches!(first, b'+' | b'-' | b'.')) && s.bytes().all(|b| NUMERIC.contains(&b)) {
        return None;
    }
    Some(Value::String(s.to_owned()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proptest::prelude::*;

    /// The reader the fast path stands in for, with the budget `manifest` gives it.
    fn saphyr(text: &str) -> Result<Value, String> {
        let options = serde_saphyr::options! {
            budget: serde_saphyr::budget! { max_depth: 100, max_aliases: 10_000, max_nodes: 1_000_000, max_documents: 1 },
            reject_unsupported_tags: true,
        };
        serde_saphyr::from_str_with_options::<Value>(text, options).map_err(|e| e.to_string())
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

        /// Whenever the fast path reads a document, the reader reads the same tree (in the
        /// indented form and in the compact one; the line reader first, the events after it).
        #[test]
        fn the_fast_path_reads_what_the_reader_reads(n in node()) {
            for text in [document(&n), document_compact(&n)] {
                if let Some(fast) = read(&text, 100, 1_000_000) {
                    prop_assert_eq!(Ok(fast), saphyr(&text), "{}", text);
                }
                if let Some(lines) = crate::yaml_lines::read(&text, 100, 1_000_000) {
                    prop_assert_eq!(Some(lines), events(&text, 100, 1_000_000), "{}", text);
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
            if let Some(lines) = crate::yaml_lines::read(text, 100, 1_000_000) {
                taken += 1;
                assert_eq!(Ok(lines), saphyr(text), "{text:?}");
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

    #[test]
    fn every_token_alone_is_read_as_the_reader_reads_it_or_left_to_it() {
        let mut fast = 0;
        for t in TOKENS {
            for style in 0..5u8 {
                let text = format!("k: {}\n", scalar(t, style, 2));
                if let Some(v) = read(&text, 100, 1_000_000) {
                    fast += 1;
                    assert_eq!(Ok(v), saphyr(&text), "{text}");
                }
                let key = format!("{}: v\n", scalar(t, if style >= 3 { style } else { 0 }, 0));
                if let Some(v) = read(&key, 100, 1_000_000) {
                    assert_eq!(Ok(v), saphyr(&key), "{key}");
                }
            }
        }
        assert!(fast > TOKENS.len() * 3, "the fast path read only {fast} documents");
    }

    /// Every YAML document under `dir`: (read by the fast path, all), each read so checked
    /// against the reader.
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
                        if let Some(v) = read(doc.text, 100, 1_000_000) {
                            fast += 1;
                            assert_eq!(Ok(v), saphyr(doc.text), "{}", path.display());
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

    /// Comments anywhere, and runs of them past the reader's bound on buffered comments: the
    /// fast path reads what the reader reads and refuses what it refuses.
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
                if let Some(v) = read(&text, 100, 1_000_000) {
                    fast += 1;
                    assert_eq!(Ok(v), saphyr(&text), "{text}");
                }
            }
        }
        assert!(fast > 12, "the fast path read only {fast} documents with comments");
    }

    #[test]
    fn a_manifest_is_read_by_the_fast_path_and_the_rest_is_left_to_the_reader() {
        let manifest = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: shop\n  labels: {app: web, tier: \"1\"}\nspec:\n  replicas: 3\n  template:\n    spec:\n      containers:\n        - name: web\n          image: nginx:1.25\n          args: [--port=8080, -v]\n          resources:\n            limits: {cpu: 500m, memory: 256Mi}\n          env:\n            - name: A\n              value: 'yes'\n            - name: B\n              value: |\n                line one\n                line two\n          securityContext:\n            runAsNonRoot: true\n            runAsUser: 1000\n";
        let fast = read(manifest, 100, 1_000_000).expect("a common manifest takes the fast path");
        assert_eq!(Ok(fast), saphyr(manifest));
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
            assert!(read(left, 100, 1_000_000).is_none(), "{left:?} is left to the reader");
        }
        let deep = "a:\n  b:\n    c: 1\n";
        assert!(read(deep, 2, 1_000_000).is_none() && read(deep, 3, 1_000_000).is_some());
        assert!(read(deep, 3, 3).is_none() && read(deep, 3, 7).is_some());
    }
}
