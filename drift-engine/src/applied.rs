//! The last applied configuration (`kubectl.kubernetes.io/last-applied-configuration`), read
//! only for which fields it holds.
//!
//! The engine asks it one question: does the configuration `kubectl apply` last sent hold this
//! path (three-way awareness of fields only the cluster has). Reading the annotation's JSON into
//! a [`serde_json::Value`] for that copied every key and string; [`Applied`] borrows them from
//! the annotation's text and answers exactly as [`crate::diff::lookup_segments`] does on the
//! parsed value.

use std::borrow::Cow;

use serde_json::{Number, Value};

use drift_model::path::SegView;

/// A JSON document read for its shape: its values in one vector in the text's order, each
/// container followed by what it holds (one allocation for the document, where a tree of vectors
/// made one for each mapping and list, and as many to free), with strings borrowed from the text
/// where they hold no escapes.
#[derive(Debug, Clone)]
pub struct Applied<'a> {
    /// The document first; a mapping's or list's members follow it up to its `end`.
    nodes: Vec<Node<'a>>,
}

/// A value of an [`Applied`] document.
#[derive(Debug, Clone)]
struct Node<'a> {
    /// Its name in the mapping that holds it (empty for a list's item and for the document).
    name: Cow<'a, str>,
    /// What it is.
    value: Scalar<'a>,
    /// The index after its last member (after itself for a scalar).
    end: usize,
}

/// What a value of an [`Applied`] document is: a container, or a scalar as the text holds it.
#[derive(Debug, Clone, PartialEq)]
enum Scalar<'a> {
    Map,
    List,
    Str(Cow<'a, str>),
    Num(Number),
    Bool(bool),
    Null,
}

impl<'a> Applied<'a> {
    /// Reads a JSON text; `None` when it is not JSON.
    ///
    /// Read by `Fast` where it can, by serde_json where `Fast` leaves the text to it, which
    /// gives the same document (a property test holds the two to the same `Value`).
    pub fn read(text: &'a str) -> Option<Self> {
        Fast::read(text).or_else(|| serde_json::from_str::<Value>(text).ok().map(|v| Applied::of_value(&v)))
    }

    /// The document of a parsed value (its strings copied).
    fn of_value(v: &Value) -> Self {
        fn add(nodes: &mut Vec<Node<'static>>, name: &str, v: &Value) {
            let at = nodes.len();
            let value = match v {
                Value::Object(_) => Scalar::Map,
                Value::Array(_) => Scalar::List,
                Value::String(s) => Scalar::Str(Cow::Owned(s.clone())),
                Value::Number(n) => Scalar::Num(n.clone()),
                Value::Bool(b) => Scalar::Bool(*b),
                Value::Null => Scalar::Null,
            };
            nodes.push(Node { name: Cow::Owned(name.to_owned()), value, end: at + 1 });
            match v {
                Value::Object(m) => m.iter().for_each(|(k, v)| add(nodes, k, v)),
                Value::Array(items) => items.iter().for_each(|v| add(nodes, "", v)),
                _ => {}
            }
            nodes[at].end = nodes.len();
        }
        let mut nodes = Vec::new();
        add(&mut nodes, "", v);
        Applied { nodes }
    }

    /// The document itself, where every [`Applied::step`] starts.
    pub(crate) const ROOT: usize = 0;

    /// The members of the container at `at`, as indices.
    fn members(&self, at: usize) -> impl Iterator<Item = usize> + '_ {
        let end = self.nodes[at].end;
        let mut next = at + 1;
        std::iter::from_fn(move || {
            let c = next;
            (c < end).then(|| {
                next = self.nodes[c].end;
                c
            })
        })
    }

    /// The field `field` of the mapping at `at` (a repeated field: the last one, as in
    /// `serde_json`).
    fn get(&self, at: usize, field: &str) -> Option<usize> {
        match self.nodes[at].value {
            Scalar::Map => self.members(at).filter(|&c| self.nodes[c].name == field).last(),
            _ => None,
        }
    }

    /// The text [`drift_model::path::scalar_text`] gives the same scalar, compared with `want`.
    fn scalar_is(&self, at: usize, want: &str) -> bool {
        match &self.nodes[at].value {
            Scalar::Str(s) => s == want,
            Scalar::Num(n) => n.to_string() == want,
            Scalar::Bool(b) => want == if *b { "true" } else { "false" },
            _ => false,
        }
    }

    /// Whether the document holds a value other than `null` at a path: what
    /// `lookup_segments(&value, segments).is_some()` answers on the parsed value.
    pub fn holds<S: SegView>(&self, segments: &[S]) -> bool {
        let mut at = Self::ROOT;
        for seg in segments {
            match self.step(at, seg) {
                Some(n) => at = n,
                None => return false,
            }
        }
        self.is_value(at)
    }

    /// Whether the value at `at` is other than `null` (what [`Applied::holds`] asks of where a
    /// path leads).
    pub(crate) fn is_value(&self, at: usize) -> bool {
        self.nodes[at].value != Scalar::Null
    }

    /// The value one segment further down from the one at `at`, if any (a walk that asks about
    /// many paths under one parent steps to the parent once).
    pub(crate) fn step<S: SegView>(&self, at: usize, seg: &S) -> Option<usize> {
        match (seg.field(), seg.item()) {
            (Some(f), _) => self.get(at, f),
            (None, Some((key, hidden, _))) if !key.is_empty() => match self.nodes[at].value {
                Scalar::List => self.members(at).find(|&item| {
                    key.iter().zip(hidden.iter().chain(std::iter::repeat(&false))).all(|((k, want), h)| {
                        match self.get(item, k).filter(|&x| self.is_value(x)) {
                            Some(x) => self.scalar_is(x, want),
                            None => *h,
                        }
                    })
                }),
                _ => None,
            },
            (None, Some((_, _, index))) => match self.nodes[at].value {
                Scalar::List => self.members(at).nth(index),
                _ => None,
            },
            (None, None) => None,
        }
    }
}

/// Containers nested deeper than this are left to serde_json (which stops at 128).
const FAST_NESTING: usize = 100;

/// A reader of the JSON that `kubectl apply` writes into the annotation, straight into an
/// [`Applied`]: strict JSON (RFC 8259), strings borrowed where they have no escapes, each value
/// pushed as it is met (a container's end written when it closes). It gives up (`None`) on
/// anything it does not read exactly as serde_json does: a `\u` escape, a number other than an
/// integer of at most 18 digits (a fraction, an exponent, `-0`, a leading zero), nesting beyond
/// [`FAST_NESTING`], and whatever is not JSON; [`Applied::read`] then asks serde_json, which reads
/// it or refuses it. A differential property test holds the two to the same document.
struct Fast<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    depth: usize,
    nodes: Vec<Node<'a>>,
}

impl<'a> Fast<'a> {
    fn read(text: &'a str) -> Option<Applied<'a>> {
        // A value takes about sixteen bytes of what `kubectl apply` writes: room for them all
        // (grown, the vector would be copied whole).
        let nodes = Vec::with_capacity(text.len() / 12 + 1);
        let mut r = Fast { text, bytes: text.as_bytes(), pos: 0, depth: 0, nodes };
        r.skip_whitespace();
        r.value(Cow::Borrowed(""))?;
        r.skip_whitespace();
        (r.pos == r.bytes.len()).then_some(Applied { nodes: r.nodes })
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    /// The value at the cursor, named `name` in the mapping that holds it.
    fn value(&mut self, name: Cow<'a, str>) -> Option<()> {
        let value = match *self.bytes.get(self.pos)? {
            b'{' => return self.map(name),
            b'[' => return self.list(name),
            b'"' => Scalar::Str(self.string()?),
            b't' => self.literal("true", Scalar::Bool(true))?,
            b'f' => self.literal("false", Scalar::Bool(false))?,
            b'n' => self.literal("null", Scalar::Null)?,
            b'-' | b'0'..=b'9' => self.integer()?,
            _ => return None,
        };
        let end = self.nodes.len() + 1;
        self.nodes.push(Node { name, value, end });
        Some(())
    }

    fn literal(&mut self, word: &str, v: Scalar<'a>) -> Option<Scalar<'a>> {
        let end = self.pos + word.len();
        (self.bytes.get(self.pos..end)? == word.as_bytes()).then(|| {
            self.pos = end;
            v
        })
    }

    fn integer(&mut self) -> Option<Scalar<'a>> {
        let negative = self.bytes[self.pos] == b'-';
        let start = self.pos + usize::from(negative);
        let mut end = start;
        while self.bytes.get(end).is_some_and(u8::is_ascii_digit) {
            end += 1;
        }
        let digits = end - start;
        // A leading zero (`-0`, `01`), a fraction or an exponent: serde_json's.
        if digits == 0
            || digits > 18
            || (self.bytes[start] == b'0' && (negative || digits > 1))
            || matches!(self.bytes.get(end), Some(b'.' | b'e' | b'E'))
        {
            return None;
        }
        let n: u64 = self.text.get(start..end)?.parse().ok()?;
        self.pos = end;
        Some(Scalar::Num(if negative { Number::from(-i64::try_from(n).ok()?) } else { Number::from(n) }))
    }

    /// A string at its opening quote.
    fn string(&mut self) -> Option<Cow<'a, str>> {
        const ONES: u64 = u64::from_le_bytes([1; 8]);
        const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
        const QUOTES: u64 = u64::from_le_bytes([b'"'; 8]);
        const BACKSLASHES: u64 = u64::from_le_bytes([b'\\'; 8]);
        const CONTROLS: u64 = u64::from_le_bytes([0x20; 8]);
        // The high bit of each zero byte of `x`, exact up to the first one.
        let zeros = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
        self.pos += 1;
        let start = self.pos;
        let mut owned: Option<String> = None;
        let mut run = start;
        loop {
            // Eight bytes at a time to the next quote, backslash or control character.
            while let Some(eight) = self.bytes.get(self.pos..self.pos + 8) {
                let mut x = [0; 8];
                x.copy_from_slice(eight);
                let x = u64::from_le_bytes(x);
                let found = zeros(x ^ QUOTES) | zeros(x ^ BACKSLASHES) | (x.wrapping_sub(CONTROLS) & !x & HIGHS);
                if found != 0 {
                    self.pos += (found.trailing_zeros() / 8) as usize;
                    break;
                }
                self.pos += 8;
            }
            match *self.bytes.get(self.pos)? {
                b'"' => {
                    // Both ends are ASCII bytes, on character boundaries.
                    let rest = self.text.get(run..self.pos)?;
                    self.pos += 1;
                    return Some(match owned {
                        None => Cow::Borrowed(rest),
                        Some(mut s) => {
                            s.push_str(rest);
                            Cow::Owned(s)
                        }
                    });
                }
                b'\\' => {
                    let s = owned.get_or_insert_with(|| String::with_capacity(64));
                    s.push_str(self.text.get(run..self.pos)?);
                    s.push(match *self.bytes.get(self.pos + 1)? {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        // `\u` (and anything else): serde_json's.
                        _ => return None,
                    });
                    self.pos += 2;
                    run = self.pos;
                }
                b if b < 0x20 => return None,
                // A byte the eight-byte test flagged past the first match: go on.
                _ => self.pos += 1,
            }
        }
    }

    fn open(&mut self) -> Option<()> {
        self.pos += 1;
        self.depth += 1;
        (self.depth <= FAST_NESTING).then_some(())?;
        self.skip_whitespace();
        Some(())
    }

    /// After a member: whether another follows (`,`), or the container closes with `close`.
    fn more(&mut self, close: u8) -> Option<bool> {
        self.skip_whitespace();
        let b = *self.bytes.get(self.pos)?;
        self.pos += 1;
        if b == b',' {
            self.skip_whitespace();
            Some(true)
        } else {
            (b == close).then_some(false)
        }
    }

    /// Pushes a container named `name`, its end written when it closes.
    fn container(&mut self, name: Cow<'a, str>, value: Scalar<'a>) -> usize {
        let at = self.nodes.len();
        self.nodes.push(Node { name, value, end: at + 1 });
        at
    }

    fn map(&mut self, name: Cow<'a, str>) -> Option<()> {
        self.open()?;
        let at = self.container(name, Scalar::Map);
        if self.bytes.get(self.pos) == Some(&b'}') {
            self.pos += 1;
        } else {
            loop {
                if self.bytes.get(self.pos) != Some(&b'"') {
                    return None;
                }
                let key = self.string()?;
                self.skip_whitespace();
                if self.bytes.get(self.pos) != Some(&b':') {
                    return None;
                }
                self.pos += 1;
                self.skip_whitespace();
                self.value(key)?;
                if !self.more(b'}')? {
                    break;
                }
            }
        }
        self.depth -= 1;
        self.nodes[at].end = self.nodes.len();
        Some(())
    }

    fn list(&mut self, name: Cow<'a, str>) -> Option<()> {
        self.open()?;
        let at = self.container(name, Scalar::List);
        if self.bytes.get(self.pos) == Some(&b']') {
            self.pos += 1;
        } else {
            loop {
                self.value(Cow::Borrowed(""))?;
                if !self.more(b']')? {
                    break;
                }
            }
        }
        self.depth -= 1;
        self.nodes[at].end = self.nodes.len();
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::lookup_segments;
    use drift_model::path::{Path, Seg};
    use proptest::prelude::*;
    use serde_json::Value;

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            prop::sample::select(&["a", "b", "web", "80", "true", "1.5", "x\"y", "é"][..]).prop_map(Value::from),
            prop::sample::select(&[0i64, 80, -1][..]).prop_map(Value::from),
            Just(Value::from(1.5)),
            Just(Value::from(1e20)),
            Just(Value::from(u64::MAX)),
            any::<bool>().prop_map(Value::from),
            Just(Value::Null),
        ];
        leaf.prop_recursive(4, 40, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec((prop::sample::select(&["a", "b", "name", "port", "x\ny"][..]), inner), 0..4)
                    .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
            ]
        })
    }

    fn seg() -> impl Strategy<Value = Seg> {
        prop_oneof![
            prop::sample::select(&["a", "b", "name", "port", "x\ny"][..]).prop_map(|f| Seg::Field(f.to_owned())),
            (0usize..4).prop_map(|index| Seg::Item { key: Vec::new(), hidden: Vec::new(), index }),
            (
                prop::collection::vec(
                    (
                        prop::sample::select(&["a", "name", "port"][..]),
                        prop::sample::select(&["a", "web", "80", "true", "1.5", "-1"][..])
                    ),
                    1..3
                ),
                prop::collection::vec(any::<bool>(), 0..3)
            )
                .prop_map(|(key, hidden)| Seg::Item {
                    key: key.into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect(),
                    hidden,
                    index: 0
                }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        #[test]
        fn holds_answers_what_a_lookup_in_the_parsed_value_answers(
            v in value(),
            paths in prop::collection::vec(prop::collection::vec(seg(), 0..4), 1..8),
            repeat in any::<bool>(),
        ) {
            let mut text = serde_json::to_string(&v).unwrap();
            if repeat && text.starts_with("{\"") {
                // A repeated field: the last one counts.
                text = format!("{{\"a\":null,{}", &text[1..]);
            }
            let parsed: Value = serde_json::from_str(&text).unwrap();
            let applied = Applied::read(&text).unwrap();
            for p in paths.iter().chain(std::iter::once(&Vec::new())) {
                prop_assert_eq!(applied.holds(p), lookup_segments(&parsed, &Path(p.clone()).0).is_some(), "{} at {:?}", text, p);
            }
        }
    }

    /// JSON texts near what the annotation holds, and their edges: whitespace, escapes of every
    /// kind, numbers of every form, repeated fields, deep nesting and broken texts.
    fn json_text() -> impl Strategy<Value = String> {
        let token = prop::sample::select(
            &[
                "{",
                "}",
                "[",
                "]",
                ",",
                ":",
                " ",
                "\n",
                "\t",
                "\"a\"",
                "\"name\"",
                "\"x\\\"y\"",
                "\"\\u00e9\"",
                "\"\\ud83d\\ude00\"",
                "\"\\/\\b\\f\\n\\r\\t\"",
                "\"\\q\"",
                "\"\u{1}\"",
                "\"é\"",
                "0",
                "-0",
                "01",
                "80",
                "-1",
                "1.5",
                "1e3",
                "-",
                "123456789012345678",
                "1234567890123456789",
                "18446744073709551615",
                "true",
                "false",
                "null",
                "nul",
                "\"",
            ][..],
        );
        prop_oneof![
            value().prop_map(|v| serde_json::to_string_pretty(&v).unwrap()),
            value().prop_map(|v| serde_json::to_string(&v).unwrap()),
            prop::collection::vec(token, 0..24).prop_map(|t| t.concat()),
            (1usize..140).prop_map(|n| format!("{}{}", "[".repeat(n), "]".repeat(n))),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        #[test]
        fn the_fast_reader_reads_what_serde_json_reads_or_leaves_it(text in json_text()) {
            let serde: Option<Value> = serde_json::from_str(&text).ok();
            if let Some(fast) = Fast::read(&text) {
                prop_assert_eq!(Some(fast.to_value(Applied::ROOT)), serde.clone(), "{}", text);
            }
            prop_assert_eq!(Applied::read(&text).map(|a| a.to_value(Applied::ROOT)), serde, "{}", text);
        }
    }

    impl Applied<'_> {
        /// The value at `at`, as serde_json reads it (a repeated field: the last one).
        fn to_value(&self, at: usize) -> Value {
            match &self.nodes[at].value {
                Scalar::Map => Value::Object(
                    self.members(at).map(|c| (self.nodes[c].name.to_string(), self.to_value(c))).collect(),
                ),
                Scalar::List => Value::Array(self.members(at).map(|c| self.to_value(c)).collect()),
                Scalar::Str(s) => Value::String(s.to_string()),
                Scalar::Num(n) => Value::Number(n.clone()),
                Scalar::Bool(b) => Value::Bool(*b),
                Scalar::Null => Value::Null,
            }
        }
    }

    #[test]
    fn the_fast_reader_reads_an_applied_configuration() {
        let text = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"annotations":{},"name":"web"},"spec":{"replicas":3,"template":{"spec":{"containers":[{"name":"web","ports":[{"containerPort":8080,"protocol":"TCP"}],"args":["--x=\"y\""]}]}}}}"#;
        let fast = Fast::read(text).expect("read without serde_json");
        assert_eq!(Some(fast.to_value(Applied::ROOT)), serde_json::from_str(text).ok());
        // One value a node, each container followed by its members.
        assert_eq!(fast.nodes.len(), 19);
        assert_eq!(fast.nodes[0].end, 19);
    }

    #[test]
    fn strings_without_escapes_are_borrowed() {
        let text = r#"{"spec":{"containers":[{"name":"web","image":"a\"b"}]}}"#;
        let a = Applied::read(text).unwrap();
        let names: Vec<_> = a.nodes.iter().map(|n| (&n.name, &n.value)).collect();
        assert!(matches!(names[1], (Cow::Borrowed("spec"), Scalar::Map)));
        assert!(matches!(names[2], (Cow::Borrowed("containers"), Scalar::List)));
        assert!(matches!(names[4], (Cow::Borrowed("name"), Scalar::Str(Cow::Borrowed("web")))));
        assert!(matches!(names[5], (Cow::Borrowed("image"), Scalar::Str(Cow::Owned(s))) if s == "a\"b"));
        assert!(Applied::read("{").is_none());
    }
}
