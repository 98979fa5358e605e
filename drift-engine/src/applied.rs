//! The last applied configuration (`kubectl.kubernetes.io/last-applied-configuration`), read
//! only for which fields it holds.
//!
//! The engine asks it one question: does the configuration `kubectl apply` last sent hold this
//! path (three-way awareness of fields only the cluster has). Reading the annotation's JSON into
//! a [`serde_json::Value`] for that copied every key and string; [`Applied`] borrows them from
//! the annotation's text and answers exactly as [`crate::diff::lookup_segments`] does on the
//! parsed value.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Number;

use drift_model::path::SegView;

/// A JSON document read for its shape: mappings, lists, and the scalars list items are keyed
/// by, with strings borrowed from the text where they hold no escapes.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied<'a> {
    /// A mapping, fields in the text's order (a repeated field: the last one counts, as in
    /// `serde_json`).
    Map(Vec<(Cow<'a, str>, Applied<'a>)>),
    /// A list.
    List(Vec<Applied<'a>>),
    /// A string.
    Str(Cow<'a, str>),
    /// A number.
    Num(Number),
    /// A boolean.
    Bool(bool),
    /// `null`.
    Null,
}

impl<'a> Applied<'a> {
    /// Reads a JSON text; `None` when it is not JSON.
    ///
    /// Read by `Fast` where it can (about a third of what serde_json's visitors cost), by
    /// serde_json where `Fast` leaves the text to it, which gives the same document.
    pub fn read(text: &'a str) -> Option<Self> {
        Fast::read(text).or_else(|| serde_json::from_str(text).ok())
    }

    fn get(&self, field: &str) -> Option<&Applied<'a>> {
        match self {
            Applied::Map(fields) => fields.iter().rev().find(|(k, _)| k == field).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The text [`drift_model::path::scalar_text`] gives the same scalar, compared with `want`.
    fn scalar_is(&self, want: &str) -> bool {
        match self {
            Applied::Str(s) => s == want,
            Applied::Num(n) => n.to_string() == want,
            Applied::Bool(b) => want == if *b { "true" } else { "false" },
            _ => false,
        }
    }

    /// Whether the document holds a value other than `null` at a path: what
    /// `lookup_segments(&value, segments).is_some()` answers on the parsed value.
    pub fn holds<S: SegView>(&self, segments: &[S]) -> bool {
        let mut v = self;
        for seg in segments {
            match v.step(seg) {
                Some(n) => v = n,
                None => return false,
            }
        }
        v.is_value()
    }

    /// Whether this is a value other than `null` (what [`Applied::holds`] asks of where a path
    /// leads).
    pub(crate) fn is_value(&self) -> bool {
        *self != Applied::Null
    }

    /// The value one segment further down, if any (a walk that asks about many paths under one
    /// parent steps to the parent once).
    pub(crate) fn step<S: SegView>(&self, seg: &S) -> Option<&Applied<'a>> {
        match (seg.field(), seg.item()) {
            (Some(f), _) => self.get(f),
            (None, Some((key, hidden, _))) if !key.is_empty() => match self {
                Applied::List(items) => items.iter().find(|item| {
                    key.iter().zip(hidden.iter().chain(std::iter::repeat(&false))).all(|((k, want), h)| {
                        match item.get(k).filter(|x| **x != Applied::Null) {
                            Some(x) => x.scalar_is(want),
                            None => *h,
                        }
                    })
                }),
                _ => None,
            },
            (None, Some((_, _, index))) => match self {
                Applied::List(items) => items.get(index),
                _ => None,
            },
            (None, None) => None,
        }
    }
}

/// Containers nested deeper than this are left to serde_json (which stops at 128).
const FAST_NESTING: usize = 100;

/// A reader of the JSON that `kubectl apply` writes into the annotation, straight into an
/// [`Applied`]: strict JSON (RFC 8259), strings borrowed where they have no escapes, each
/// mapping's and list's members gathered on one stack and moved out at once. It gives up
/// (`None`) on anything it does not read exactly as serde_json does: a `\u` escape, a number
/// other than an integer of at most 18 digits (a fraction, an exponent, `-0`, a leading zero),
/// nesting beyond [`FAST_NESTING`], and whatever is not JSON; [`Applied::read`] then asks
/// serde_json, which reads it or refuses it. A differential property test holds the two to the
/// same document.
struct Fast<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    depth: usize,
    fields: Vec<(Cow<'a, str>, Applied<'a>)>,
    items: Vec<Applied<'a>>,
}

impl<'a> Fast<'a> {
    fn read(text: &'a str) -> Option<Applied<'a>> {
        let mut r = Fast { text, bytes: text.as_bytes(), pos: 0, depth: 0, fields: Vec::new(), items: Vec::new() };
        r.skip_whitespace();
        let v = r.value()?;
        r.skip_whitespace();
        (r.pos == r.bytes.len()).then_some(v)
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    fn value(&mut self) -> Option<Applied<'a>> {
        match *self.bytes.get(self.pos)? {
            b'{' => self.map(),
            b'[' => self.list(),
            b'"' => self.string().map(Applied::Str),
            b't' => self.literal("true", Applied::Bool(true)),
            b'f' => self.literal("false", Applied::Bool(false)),
            b'n' => self.literal("null", Applied::Null),
            b'-' | b'0'..=b'9' => self.integer(),
            _ => None,
        }
    }

    fn literal(&mut self, word: &str, v: Applied<'a>) -> Option<Applied<'a>> {
        let end = self.pos + word.len();
        (self.bytes.get(self.pos..end)? == word.as_bytes()).then(|| {
            self.pos = end;
            v
        })
    }

    fn integer(&mut self) -> Option<Applied<'a>> {
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
        Some(Applied::Num(if negative { Number::from(-i64::try_from(n).ok()?) } else { Number::from(n) }))
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

    fn map(&mut self) -> Option<Applied<'a>> {
        self.open()?;
        let mark = self.fields.len();
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
                let v = self.value()?;
                self.fields.push((key, v));
                if !self.more(b'}')? {
                    break;
                }
            }
        }
        self.depth -= 1;
        Some(Applied::Map(self.fields.drain(mark..).collect()))
    }

    fn list(&mut self) -> Option<Applied<'a>> {
        self.open()?;
        let mark = self.items.len();
        if self.bytes.get(self.pos) == Some(&b']') {
            self.pos += 1;
        } else {
            loop {
                let v = self.value()?;
                self.items.push(v);
                if !self.more(b']')? {
                    break;
                }
            }
        }
        self.depth -= 1;
        Some(Applied::List(self.items.drain(mark..).collect()))
    }
}

/// A string, borrowed when the text holds it as it is.
struct Text<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> Deserialize<'de> for Applied<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Applied<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> Result<Self::Value, E> {
                Ok(Applied::Bool(b))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Self::Value, E> {
                Ok(Applied::Num(n.into()))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Self::Value, E> {
                Ok(Applied::Num(n.into()))
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<Self::Value, E> {
                Ok(Number::from_f64(n).map_or(Applied::Null, Applied::Num))
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Applied::Str(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Applied::Str(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Self::Value, E> {
                Ok(Applied::Str(Cow::Owned(s)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Applied::Null)
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Applied::Null)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                Applied::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Applied::List(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(0).min(64));
                while let Some((Text(k), v)) = map.next_entry()? {
                    fields.push((k, v));
                }
                Ok(Applied::Map(fields))
            }
        }
        d.deserialize_any(V)
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
            let serde: Option<Applied<'_>> = serde_json::from_str(&text).ok();
            if let Some(fast) = Fast::read(&text) {
                prop_assert_eq!(Some(&fast), serde.as_ref(), "{}", text);
            }
            prop_assert_eq!(Applied::read(&text), serde, "{}", text);
        }
    }

    #[test]
    fn the_fast_reader_reads_an_applied_configuration() {
        let text = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"annotations":{},"name":"web"},"spec":{"replicas":3,"template":{"spec":{"containers":[{"name":"web","ports":[{"containerPort":8080,"protocol":"TCP"}],"args":["--x=\"y\""]}]}}}}"#;
        let fast = Fast::read(text).expect("read without serde_json");
        assert_eq!(Some(fast), serde_json::from_str(text).ok());
    }

    #[test]
    fn strings_without_escapes_are_borrowed() {
        let text = r#"{"spec":{"containers":[{"name":"web","image":"a\"b"}]}}"#;
        let Applied::Map(top) = Applied::read(text).unwrap() else { panic!() };
        let Applied::Map(spec) = &top[0].1 else { panic!() };
        assert!(matches!(top[0].0, Cow::Borrowed("spec")));
        let Applied::List(items) = &spec[0].1 else { panic!() };
        let Applied::Map(c) = &items[0] else { panic!() };
        assert!(matches!(&c[0].1, Applied::Str(Cow::Borrowed("web"))));
        assert!(matches!(&c[1].1, Applied::Str(Cow::Owned(s)) if s == "a\"b"));
        assert_eq!(Applied::read("{"), None);
    }
}
