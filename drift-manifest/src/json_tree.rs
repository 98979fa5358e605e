//! JSON documents read straight into a [`serde_json::Value`] or a [`Tree`], without serde's
//! visitors.
//!
//! `kubectl get -o json` and the API server write objects indented by spaces, and most of such a
//! file is indentation, keys and short strings. serde_json reads it a byte at a time between
//! tokens, asks its visitor for each key and inserts every key into its map one by one (a search
//! from the root each time). [`read`] skips indentation eight bytes at a time, scans strings for
//! their end eight bytes at a time, keeps the entries of the mappings and lists it is inside on
//! one stack and builds each map at once from its entries (sorted, the later of two equal keys
//! kept, as serde_json keeps it). It reads exactly JSON (RFC 8259) into the tree serde_json
//! makes, and gives up with `None` on anything else, on a number serde_json would read
//! differently (beyond 64 bits, `-0`, out of range) and past its nesting bound; the document then
//! goes to serde_json, which reads it or says where it is wrong. A differential property test
//! holds the two to the same tree, and to `None` exactly where serde_json fails.
//!
//! The same reader builds a [`Tree`] instead ([`read_tree`]), for a live object that is only
//! compared: its keys and strings borrowed from the text unless they hold an escape, so that
//! reading it allocates for its three vectors and its escaped strings, not for every key. What it
//! builds into is a [`Build`]; the tokens are read, checked and given up on by the one
//! [`Reader`], so that both builds read the same documents and refuse the same ones (another
//! property test holds the tree to the `Value`).

use std::borrow::Cow;

use drift_model::fields::{FieldsText, ManagedFields};
use drift_model::tree::{Tree, TreeBuilder};

use crate::build::{Build, Values};
use serde_json::{Number, Value};

/// Containers nested deeper than this are left to serde_json (which stops at 128).
const MAX_NESTING: usize = 120;

use crate::swar::{HIGHS, ONES, chunk, zero_bytes};

/// The tree of one JSON document (`text` holds it and nothing else but whitespace), with the
/// deepest level a value sits at (the document is at 0, its members at 1); or `None`. With
/// `live`, the `status` of a document that is a mapping is checked but not built, nor kept (the
/// depth still counts it).
#[cfg(test)]
pub(crate) fn read(text: &str, live: bool) -> Option<(Value, usize)> {
    read_with(text, live, false)
}

/// [`read`], and with `managed_text` (for a live object) its `metadata.managedFields`, when a
/// list, checked and kept as its JSON text (a string holding the list as written), which the
/// engine's ownership reads when asked (the depth counts it as if built).
pub(crate) fn read_with(text: &str, live: bool, managed_text: bool) -> Option<(Value, usize)> {
    let values = Values { entries: Vec::with_capacity(32), items: Vec::with_capacity(32) };
    read_into(text, live, managed_text, values).map(|(_, value, deepest)| (value, deepest))
}

/// [`read_with`] into a [`Tree`] borrowing `text`: the same document, refused where
/// [`read_with`] refuses it, with the same depth; the kept managedFields are a string borrowing
/// the list's text.
pub(crate) fn read_tree(text: &str, live: bool, managed_text: bool) -> Option<(Tree<'_>, usize)> {
    // About one value in a hundred bytes of what `kubectl get -o json` writes of a workload
    // (status and managedFields left out): room for that saves growing the tree's vectors.
    let build = TreeBuilder::with_capacity(text.len() / 96);
    read_into(text, live, managed_text, build).map(|(b, root, deepest)| (b.finish(root), deepest))
}

/// The one read of both: the builder, the document's top value built into it, the depth.
#[inline(always)]
fn read_into<'a, B: Build<'a>>(text: &'a str, live: bool, managed_text: bool, build: B) -> Option<(B, B::Out, usize)> {
    let mut reader = Reader {
        text,
        bytes: text.as_bytes(),
        pos: 0,
        level: 0,
        deepest: 0,
        live,
        managed_text: live && managed_text,
        in_metadata: false,
        build,
    };
    reader.skip_whitespace();
    let value = reader.value()?;
    reader.skip_whitespace();
    (reader.pos == reader.bytes.len()).then_some((reader.build, value, reader.deepest))
}

struct Reader<'a, B> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    level: usize,
    deepest: usize,
    /// Reading a live object (see [`read`]).
    live: bool,
    /// Keeping a live object's managedFields as text (see [`read_with`]).
    managed_text: bool,
    /// Reading the top-level `metadata`.
    in_metadata: bool,
    /// What the document is built into.
    build: B,
}

impl<'a, B: Build<'a>> Reader<'a, B> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    #[inline(always)]
    fn skip_whitespace(&mut self) {
        while let Some(b) = self.peek() {
            match b {
                b' ' => {
                    self.pos += 1;
                    // Indentation comes in runs: skip them eight bytes at a time.
                    while let Some(x) = chunk(self.bytes, self.pos) {
                        let other = x ^ (ONES * u64::from(b' '));
                        if other != 0 {
                            self.pos += (other.trailing_zeros() / 8) as usize;
                            break;
                        }
                        self.pos += 8;
                    }
                }
                b'\n' | b'\t' | b'\r' => self.pos += 1,
                _ => return,
            }
        }
    }

    fn value(&mut self) -> Option<B::Out> {
        self.deepest = self.deepest.max(self.level);
        match self.peek()? {
            b'{' => self.object(),
            b'[' => self.array(),
            b'"' => {
                self.pos += 1;
                let s = self.string()?;
                Some(self.build.string(s))
            }
            b't' => self.literal("true").map(|()| self.build.bool(true)),
            b'f' => self.literal("false").map(|()| self.build.bool(false)),
            b'n' => self.literal("null").map(|()| self.build.null()),
            b'-' | b'0'..=b'9' => {
                let n = self.number()?;
                Some(self.build.number(n))
            }
            _ => None,
        }
    }

    /// `true`, `false` or `null`, checked and stepped over.
    fn literal(&mut self, word: &str) -> Option<()> {
        let end = self.pos + word.len();
        (self.bytes.get(self.pos..end)? == word.as_bytes()).then(|| {
            self.pos = end;
        })
    }

    /// Steps into a container (its opening byte read).
    fn open(&mut self) -> Option<()> {
        self.pos += 1;
        self.level += 1;
        (self.level <= MAX_NESTING).then_some(())
    }

    /// After a member: whether another follows (`,`), or the container closes with `close`.
    #[inline(always)]
    fn more(&mut self, close: u8) -> Option<bool> {
        self.skip_whitespace();
        let b = self.peek()?;
        self.pos += 1;
        if b == b',' {
            self.skip_whitespace();
            Some(true)
        } else {
            (b == close).then_some(false)
        }
    }

    fn object(&mut self) -> Option<B::Out> {
        self.open()?;
        self.skip_whitespace();
        let mark = self.build.object_start();
        if self.peek()? == b'}' {
            self.pos += 1;
        } else {
            loop {
                if self.peek()? != b'"' {
                    return None;
                }
                self.pos += 1;
                let key = self.string()?;
                self.skip_whitespace();
                if self.peek()? != b':' {
                    return None;
                }
                self.pos += 1;
                self.skip_whitespace();
                if self.live && self.level == 1 && key == "status" {
                    self.skip()?;
                } else if self.managed_text
                    && self.in_metadata
                    && self.level == 2
                    && key == "managedFields"
                    && self.peek() == Some(b'[')
                {
                    // Read as the ownership's entries and tree once, checked as they are read;
                    // where that reading says to read again, checked only (and read from the
                    // text when asked).
                    let (start, level) = (self.pos, self.level);
                    let read = if self.build.keeps_managed_fields() { ManagedFields::read(self) } else { None };
                    match read {
                        Some(fields) => self.build.managed_fields(fields),
                        None => {
                            (self.pos, self.level) = (start, level);
                            self.skip()?;
                        }
                    }
                    let raw = self.build.string(Cow::Borrowed(self.text.get(start..self.pos)?));
                    self.build.member(key, raw);
                } else {
                    let metadata = self.managed_text && self.level == 1 && key == "metadata";
                    self.in_metadata |= metadata;
                    let value = self.value()?;
                    self.in_metadata &= !metadata;
                    self.build.member(key, value);
                }
                if !self.more(b'}')? {
                    break;
                }
            }
        }
        self.level -= 1;
        Some(self.build.object_end(mark))
    }

    fn array(&mut self) -> Option<B::Out> {
        self.open()?;
        self.skip_whitespace();
        let mark = self.build.array_start();
        if self.peek()? == b']' {
            self.pos += 1;
        } else {
            loop {
                let value = self.value()?;
                self.build.item(value);
                if !self.more(b']')? {
                    break;
                }
            }
        }
        self.level -= 1;
        Some(self.build.array_end(mark))
    }

    /// A value read only to check it (what serde_json would refuse is refused, what [`Reader::value`]
    /// leaves to serde_json is left), nothing built; the depth counts it as if built. One loop
    /// over the value's tokens, the containers open kept as bits (an object's bit set), since
    /// [`MAX_NESTING`] is under 128.
    fn skip(&mut self) -> Option<()> {
        const _: () = assert!(MAX_NESTING < 128);
        let mut objects: u128 = 0;
        let mut depth = 0;
        loop {
            // At a value.
            self.deepest = self.deepest.max(self.level);
            match self.peek()? {
                open @ (b'{' | b'[') => {
                    self.open()?;
                    let object = open == b'{';
                    if object {
                        objects |= 1 << depth;
                    } else {
                        objects &= !(1 << depth);
                    }
                    depth += 1;
                    self.skip_whitespace();
                    if self.peek()? != if object { b'}' } else { b']' } {
                        if object {
                            self.skip_member_name()?;
                        }
                        continue;
                    }
                    // Empty: closed at once.
                    self.pos += 1;
                    self.level -= 1;
                    depth -= 1;
                }
                b'"' => {
                    self.pos += 1;
                    self.skip_string()?;
                }
                b't' => self.literal("true")?,
                b'f' => self.literal("false")?,
                b'n' => self.literal("null")?,
                b'-' | b'0'..=b'9' => {
                    self.number()?;
                }
                _ => return None,
            }
            // After a value: the containers it closes, up to one that goes on.
            loop {
                if depth == 0 {
                    return Some(());
                }
                let object = objects >> (depth - 1) & 1 == 1;
                if self.more(if object { b'}' } else { b']' })? {
                    if object {
                        self.skip_member_name()?;
                    }
                    break;
                }
                self.level -= 1;
                depth -= 1;
            }
        }
    }

    /// A member's name and its colon, checked, up to its value.
    #[inline(always)]
    fn skip_member_name(&mut self) -> Option<()> {
        if self.peek()? != b'"' {
            return None;
        }
        self.pos += 1;
        self.skip_string()?;
        self.skip_whitespace();
        if self.peek()? != b':' {
            return None;
        }
        self.pos += 1;
        self.skip_whitespace();
        Some(())
    }

    /// The first `"`, `\` or control character at or after `at`, or the end.
    fn special(&self, mut at: usize) -> usize {
        while let Some(x) = chunk(self.bytes, at) {
            let found = zero_bytes(x ^ (ONES * u64::from(b'"')))
                | zero_bytes(x ^ (ONES * u64::from(b'\\')))
                | (x.wrapping_sub(ONES * 0x20) & !x & HIGHS);
            if found != 0 {
                return at + (found.trailing_zeros() / 8) as usize;
            }
            at += 8;
        }
        self.bytes[at.min(self.bytes.len())..]
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
            .map_or(self.bytes.len(), |i| at + i)
    }

    /// A string whose opening quote is read: borrowed from the text, or, when it holds an
    /// escape, owned.
    fn string(&mut self) -> Option<Cow<'a, str>> {
        let start = self.pos;
        let end = self.special(start);
        match self.peek_at(end)? {
            b'"' => {
                self.pos = end + 1;
                // Both ends are ASCII bytes, so on character boundaries.
                self.text.get(start..end).map(Cow::Borrowed)
            }
            b'\\' => {
                // (Grown as it is unescaped: finding its end first would read it twice.)
                let mut out = String::with_capacity(2 * (end - start) + 16);
                out.push_str(self.text.get(start..end)?);
                self.pos = end;
                self.escaped(out).map(Cow::Owned)
            }
            _ => None,
        }
    }

    /// A string whose opening quote is read, checked as [`Reader::string`] reads it (its escapes
    /// too), nothing built; whether it holds an escape.
    #[inline(always)]
    fn skip_string(&mut self) -> Option<bool> {
        let mut escaped = false;
        loop {
            self.pos = self.special(self.pos);
            match self.peek()? {
                b'"' => {
                    self.pos += 1;
                    return Some(escaped);
                }
                b'\\' => {
                    escaped = true;
                    self.pos += 1;
                    match self.peek()? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'u' => {
                            self.unicode()?;
                        }
                        _ => return None,
                    }
                    // Past the escape's last byte.
                    self.pos += 1;
                }
                _ => return None,
            }
        }
    }

    fn peek_at(&self, at: usize) -> Option<u8> {
        self.bytes.get(at).copied()
    }

    /// The rest of a string from an escape on, appended to `out`.
    fn escaped(&mut self, mut out: String) -> Option<String> {
        loop {
            // At a backslash.
            self.pos += 1;
            let c = match self.peek()? {
                b'"' => '"',
                b'\\' => '\\',
                b'/' => '/',
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                b'u' => self.unicode()?,
                _ => return None,
            };
            out.push(c);
            // Past the escape's last byte.
            self.pos += 1;
            let start = self.pos;
            let end = self.special(start);
            out.push_str(self.text.get(start..end)?);
            self.pos = end;
            match self.peek()? {
                b'"' => {
                    self.pos += 1;
                    return Some(out);
                }
                b'\\' => {}
                _ => return None,
            }
        }
    }

    /// The character of a `\u` escape (at its `u`), a surrogate pair read whole; `pos` ends on
    /// the escape's last digit.
    fn unicode(&mut self) -> Option<char> {
        let first = self.hex4(self.pos + 1)?;
        self.pos += 4;
        match first {
            0xd800..=0xdbff => {
                if self.bytes.get(self.pos + 1..self.pos + 3)? != b"\\u" {
                    return None;
                }
                let second = self.hex4(self.pos + 3)?;
                if !(0xdc00..=0xdfff).contains(&second) {
                    return None;
                }
                self.pos += 6;
                char::from_u32(0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00))
            }
            // A lone trailing surrogate is no character.
            _ => char::from_u32(first),
        }
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let digits = self.bytes.get(at..at + 4)?;
        digits.iter().try_fold(0, |n, &d| Some(n * 16 + char::from(d).to_digit(16)?))
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
        self.pos - start
    }

    /// A number, as serde_json reads it, or `None` where serde_json would read it differently.
    fn number(&mut self) -> Option<Number> {
        let start = self.pos;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        match self.peek()? {
            b'0' => self.pos += 1,
            b'1'..=b'9' => {
                self.digits();
            }
            _ => return None,
        }
        let mut float = false;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return None;
            }
            float = true;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return None;
            }
            float = true;
        }
        let token = self.text.get(start..self.pos)?;
        if float {
            let f: f64 = token.parse().ok()?;
            // Out of range (infinite) is serde_json's error to give.
            return Number::from_f64(f);
        }
        if negative {
            // `-0` is a float to serde_json; beyond 64 bits, its to judge.
            let i: i64 = token.parse().ok()?;
            return (i != 0).then(|| Number::from(i));
        }
        token.parse::<u64>().ok().map(Number::from)
    }
}

/// The reader reads a live object's managedFields into their ownership as it reads the object
/// ([`ManagedFields::read`]), checking each token as [`Reader::skip`] checks it, so that what it
/// refuses and the depth it counts are those of stepping over the list.
impl<'a, B: Build<'a>> FieldsText<'a> for Reader<'a, B> {
    fn next_byte(&mut self) -> Option<u8> {
        self.skip_whitespace();
        self.peek()
    }

    fn step_over(&mut self) -> Option<()> {
        self.skip_whitespace();
        // The `{}` of a FieldsV1 set's `.` (a third of its entries): stepped over at once, the
        // depth counted as `skip` counts it.
        if self.bytes.get(self.pos..self.pos + 2) == Some(b"{}") && self.level < MAX_NESTING {
            self.deepest = self.deepest.max(self.level);
            self.pos += 2;
            return Some(());
        }
        self.skip()
    }

    fn read_string(&mut self) -> Option<Cow<'a, str>> {
        self.skip_whitespace();
        self.deepest = self.deepest.max(self.level);
        if self.peek()? != b'"' {
            return None;
        }
        self.pos += 1;
        self.string()
    }

    fn members(&mut self, mut each: impl FnMut(&mut Self, &'a str, bool) -> Option<()>) -> Option<()> {
        self.skip_whitespace();
        self.deepest = self.deepest.max(self.level);
        if self.peek()? != b'{' {
            return None;
        }
        self.open()?;
        self.skip_whitespace();
        if self.peek()? == b'}' {
            self.pos += 1;
        } else {
            loop {
                if self.peek()? != b'"' {
                    return None;
                }
                self.pos += 1;
                let start = self.pos;
                let escaped = self.skip_string()?;
                let name = self.text.get(start..self.pos - 1)?;
                self.skip_whitespace();
                if self.peek()? != b':' {
                    return None;
                }
                self.pos += 1;
                self.skip_whitespace();
                each(self, name, escaped)?;
                if !self.more(b'}')? {
                    break;
                }
            }
        }
        self.level -= 1;
        Some(())
    }

    fn items(&mut self, mut each: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        // (As `members` does, but for the names: written out, so that `each` is inlined into
        // the loop of `members`, where the ownership's fields are read.)
        self.skip_whitespace();
        self.deepest = self.deepest.max(self.level);
        if self.peek()? != b'[' {
            return None;
        }
        self.open()?;
        self.skip_whitespace();
        if self.peek()? == b']' {
            self.pos += 1;
        } else {
            loop {
                each(self)?;
                if !self.more(b']')? {
                    break;
                }
            }
        }
        self.level -= 1;
        Some(())
    }

    fn size_hint(&self) -> usize {
        // (The rest of the document: the list and what follows it.)
        self.bytes.len() - self.pos
    }
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proptest::prelude::*;

    /// What serde_json reads, with the depth `manifest` would check.
    fn serde(text: &str) -> Option<(Value, usize)> {
        fn depth(v: &Value) -> usize {
            match v {
                Value::Array(a) => a.iter().map(|x| 1 + depth(x)).max().unwrap_or(0),
                Value::Object(o) => o.values().map(|x| 1 + depth(x)).max().unwrap_or(0),
                _ => 0,
            }
        }
        serde_json::from_str::<Value>(text).ok().map(|v| {
            let d = depth(&v);
            (v, d)
        })
    }

    /// The one law: whatever the reader reads, serde_json reads the same; where serde_json
    /// fails, the reader gives up.
    fn agrees(text: &str) -> Result<bool, TestCaseError> {
        let ours = read(text, false);
        let theirs = serde(text);
        match (&ours, &theirs) {
            (Some(a), Some(b)) => prop_assert_eq!(a, b, "{:?}", text),
            (Some(_), None) => prop_assert!(false, "read what serde_json refuses: {:?}", text),
            (None, _) => {}
        }
        Ok(ours.is_some())
    }

    /// A live object read with its `metadata.managedFields` parsed from the text it was kept as.
    fn parsed_managed_fields(mut v: Value) -> Value {
        if let Some(Value::String(raw)) = v.pointer_mut("/metadata/managedFields") {
            let list = serde_json::from_str(raw).unwrap();
            v["metadata"]["managedFields"] = list;
        }
        v
    }

    /// Strings with what escapes are made for: quotes, backslashes, controls, characters beyond
    /// the basic plane, the bytes around the eight-byte chunks.
    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z:./-]{0,20}",
            "[ -~]{0,24}",
            proptest::collection::vec(
                prop_oneof![
                    Just('"'),
                    Just('\\'),
                    Just('/'),
                    Just('\n'),
                    Just('\t'),
                    Just('\u{1}'),
                    Just('\u{1f}'),
                    Just('\u{7f}'),
                    Just('é'),
                    Just('\u{2028}'),
                    Just('😀'),
                    Just('<'),
                    Just('&'),
                    Just('a'),
                    Just(' '),
                ],
                0..20
            )
            .prop_map(|c| c.into_iter().collect()),
        ]
    }

    fn number() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<u64>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            (0u64..1000).prop_map(Value::from),
            any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
            (-1e3f64..1e3).prop_map(Value::from),
        ]
    }

    pub(crate) fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            number(),
            text().prop_map(Value::String),
        ];
        leaf.prop_recursive(5, 64, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::vec((text(), inner), 0..6)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    /// `value` written the way Go's encoder (kubectl, the API server) writes it: `<`, `>`, `&`
    /// and the line separators as `\u` escapes, indented by `indent` spaces (none: compact).
    fn go_style(v: &Value, indent: usize) -> String {
        let text = if indent == 0 {
            serde_json::to_string(v).unwrap()
        } else {
            let pad = " ".repeat(indent);
            let mut out = Vec::new();
            let formatter = serde_json::ser::PrettyFormatter::with_indent(pad.as_bytes());
            let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
            serde::Serialize::serialize(v, &mut ser).unwrap();
            String::from_utf8(out).unwrap()
        };
        text.replace('<', "\\u003c")
            .replace('>', "\\u003E")
            .replace('&', "\\u0026")
            .replace('\u{2028}', "\\u2028")
            .replace('😀', "\\ud83d\\ude00")
    }

    /// Numbers as they may be written, not all of them JSON, nor all of them read by the reader:
    /// `-0`, exponents, subnormals, beyond 64 bits, out of range, a leading zero.
    #[rustfmt::skip]
    const NUMBERS: &[&str] = &[
        "0", "-0", "-0.0", "0.0", "1.0", "0.1", "1E+2", "1e-7", "2.5e+10", "5e-324", "1e400", "-1e400",
        "18446744073709551615", "18446744073709551616", "-9223372036854775808", "-9223372036854775809",
        "123456789012345678901234567890.5", "01", "1.", "-",
    ];

    /// A value as a live object's text holds it: as Go writes it, or a number written one of
    /// the ways above.
    fn written_value() -> BoxedStrategy<String> {
        prop_oneof![
            6 => (value(), 0usize..3).prop_map(|(v, indent)| go_style(&v, indent)),
            1 => number().prop_map(|n| n.to_string()),
            1 => prop::sample::select(NUMBERS).prop_map(str::to_owned),
        ]
        .boxed()
    }

    /// A string as Go writes it.
    /// An entry of managedFields, as the API server writes it (`fieldsV1` first, item keys and
    /// names with escapes) or not quite (no manager, a manager that is no string, no entry).
    fn managed_entry() -> BoxedStrategy<Value> {
        let key = prop::sample::select(
            &[
                "f:spec",
                "f:replicas",
                "f:containers",
                ".",
                "k:{\"name\":\"web\"}",
                "k:{\"port\":80,\"protocol\":\"TCP\"}",
                "k:{\"a\":\"\\u0041\"}",
                "f:we\"ird\\/\u{e9}<",
                "f:",
            ][..],
        );
        let leaf = prop_oneof![4 => Just(serde_json::json!({})), 1 => value()];
        let fields = leaf.prop_recursive(6, 48, 5, move |inner| {
            proptest::collection::vec((key.clone(), inner), 0..5)
                .prop_map(|members| Value::Object(members.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
        });
        let manager = prop_oneof![
            6 => prop::sample::select(&["kubectl-client-side-apply", "kube-controller-manager", "my \"tool\""][..])
                .prop_map(|m| Value::String(m.to_owned())),
            1 => value(),
        ];
        prop_oneof![
            8 => (prop::option::weighted(0.9, manager), prop::option::weighted(0.7, fields), any::<bool>()).prop_map(
                |(manager, fields, time)| {
                    let mut e = serde_json::Map::new();
                    e.insert("operation".into(), "Update".into());
                    if time {
                        e.insert("time".into(), "2026-11-20T08:00:00Z".into());
                    }
                    e.extend(manager.map(|m| ("manager".to_owned(), m)));
                    e.extend(fields.map(|f| ("fieldsV1".to_owned(), f)));
                    Value::Object(e)
                }
            ),
            1 => value(),
        ]
        .boxed()
    }

    fn written_string(s: &str) -> String {
        go_style(&Value::String(s.to_owned()), 0)
    }

    /// A member `"key": value`; its key written as Go writes it or, with `escaped`, every
    /// character of it a `\u` escape (`"kind"` as `"\u006b\u0069\u006e\u0064"`), which reads as
    /// the same key.
    fn member(
        key: impl Strategy<Value = String> + 'static,
        value: impl Strategy<Value = String> + 'static,
    ) -> BoxedStrategy<String> {
        (key, value, any::<bool>(), prop::bool::weighted(0.15))
            .prop_map(|(key, value, spaced, escaped)| {
                let key = if escaped {
                    format!("\"{}\"", key.encode_utf16().map(|u| format!("\\u{u:04x}")).collect::<String>())
                } else {
                    written_string(&key)
                };
                format!("{key}:{}{value}", if spaced { " " } else { "" })
            })
            .boxed()
    }

    /// The members, shuffled, as one mapping.
    fn mapping(members: impl Strategy<Value = Vec<String>> + 'static) -> BoxedStrategy<String> {
        (members.prop_flat_map(|m| Just(m).prop_shuffle()), prop::sample::select(&[",", ", ", ",\n    "][..]))
            .prop_map(|(members, separator)| format!("{{{}}}", members.join(separator)))
            .boxed()
    }

    /// A live object's `metadata`: mostly a name, a namespace and a managedFields list, with
    /// other members, repeated keys among them (the last one counts), in any order.
    fn metadata() -> BoxedStrategy<String> {
        let name = prop_oneof![
            12 => "[a-z0-9-]{1,12}".prop_map(|n| written_string(&n)),
            1 => Just("\"\"".to_owned()),
            1 => text().prop_map(|n| written_string(&n)),
            1 => written_value(),
        ];
        let managed_fields = prop_oneof![
            3 => (proptest::collection::vec(value(), 0..3), 0usize..4)
                .prop_map(|(list, indent)| go_style(&Value::Array(list), indent)),
            1 => written_value(),
        ];
        let others = proptest::collection::vec(
            member(prop_oneof![Just("name".to_owned()), Just("managedFields".to_owned()), text()], written_value()),
            0..3,
        );
        mapping(
            (
                member(Just("name".to_owned()), name),
                prop::option::weighted(
                    0.5,
                    member(Just("namespace".to_owned()), "[a-z]{1,6}".prop_map(|n| written_string(&n))),
                ),
                prop::option::weighted(0.8, member(Just("managedFields".to_owned()), managed_fields)),
                others,
            )
                .prop_map(|(name, namespace, managed_fields, others)| {
                    [name].into_iter().chain(namespace).chain(managed_fields).chain(others).collect()
                }),
        )
    }

    /// Texts of live objects as the API server writes them, and not quite: `apiVersion`, `kind`
    /// and `metadata` mostly there and mostly right, `status`, `spec`, `items` and other members,
    /// keys repeated and escaped, numbers of every sort; now and then a document that is not a
    /// mapping at all.
    /// (The strategies are boxed: nested unboxed, their value trees overflow a test thread's
    /// stack.)
    pub(crate) fn live_text() -> BoxedStrategy<String> {
        let api_version = || {
            prop_oneof![
                10 => prop::sample::select(&["\"v1\"", "\"apps/v1\"", "\"apps\\/v1\""][..]).prop_map(str::to_owned),
                1 => Just("\"\"".to_owned()),
                1 => written_value(),
            ]
        };
        let kind = || {
            prop_oneof![
                10 => prop::sample::select(&["\"ConfigMap\"", "\"Deployment\"", "\"Config\\u004dap\""][..]).prop_map(str::to_owned),
                1 => prop::sample::select(&["\"List\"", "\"PodList\"", "\"\""][..]).prop_map(str::to_owned),
                1 => written_value(),
            ]
        };
        let items = prop_oneof![
            Just("[]".to_owned()),
            Just(r#"[{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "item"}}]"#.to_owned()),
            written_value(),
        ];
        let extra = prop_oneof![
            member(Just("status".to_owned()), written_value()),
            member(Just("spec".to_owned()), written_value()),
            member(Just("items".to_owned()), items),
            member(Just("apiVersion".to_owned()), api_version()),
            member(Just("kind".to_owned()), kind()),
            member(Just("metadata".to_owned()), prop_oneof![3 => metadata(), 1 => written_value()]),
            member(text(), written_value()),
        ];
        let object = mapping(
            (
                prop::option::weighted(0.95, member(Just("apiVersion".to_owned()), api_version())),
                prop::option::weighted(0.95, member(Just("kind".to_owned()), kind())),
                prop::option::weighted(0.95, member(Just("metadata".to_owned()), metadata())),
                proptest::collection::vec(extra, 0..4),
            )
                .prop_map(|(a, k, m, extra)| a.into_iter().chain(k).chain(m).chain(extra).collect()),
        );
        prop_oneof![
            9 => (object, prop::sample::select(&["", "\n", "  \r\n"][..])).prop_map(|(o, end)| format!("{o}{end}")),
            1 => written_value(),
        ]
        .boxed()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// Every document serde_json writes, compact or indented, and as Go writes it, is read
        /// into the very tree serde_json reads back.
        #[test]
        fn reads_what_serde_json_reads(v in value(), indent in 0usize..5) {
            for text in [go_style(&v, indent), serde_json::to_string_pretty(&v).unwrap()] {
                prop_assert!(agrees(&text)?, "gave up on {:?}", text);
            }
        }

        /// With `status` dropped, the reader reads the same document into the same tree without
        /// its top-level `status`, and gives up exactly where it gives up building it.
        #[test]
        fn a_dropped_status_is_checked_and_left_out(
            v in value(),
            status in value(),
            with_status in any::<bool>(),
            indent in 0usize..5,
            at in any::<prop::sample::Index>(),
            cut in any::<bool>(),
        ) {
            let mut v = v;
            if let (Value::Object(map), true) = (&mut v, with_status) {
                map.insert("status".into(), status);
            }
            let mut text = go_style(&v, indent);
            if cut {
                // A broken document, possibly inside its status.
                let mut i = at.index(text.len() + 1);
                while !text.is_char_boundary(i) {
                    i -= 1;
                }
                text.truncate(i);
            }
            let built = read(&text, false);
            let dropped = read(&text, true);
            prop_assert_eq!(built.is_some(), dropped.is_some(), "{:?}", text);
            if let (Some((mut full, depth)), Some((without, depth_without))) = (built, dropped) {
                if let Value::Object(map) = &mut full {
                    map.remove("status");
                }
                prop_assert_eq!(full, parsed_managed_fields(without));
                prop_assert_eq!(depth, depth_without);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// A live object's `metadata.managedFields` list is kept as its text, which reads back
        /// into the list the full read builds; the rest is the same tree; the reader gives up
        /// exactly where it gives up building the list.
        #[test]
        fn managed_fields_are_kept_as_their_text(
            v in value(),
            fields in proptest::collection::vec(value(), 0..4),
            indent in 0usize..5,
            at in any::<prop::sample::Index>(),
            cut in any::<bool>(),
        ) {
            let meta = match v {
                Value::Object(mut m) => {
                    m.insert("managedFields".into(), Value::Array(fields));
                    Value::Object(m)
                }
                _ => serde_json::json!({"name": "web", "managedFields": fields}),
            };
            let object = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta});
            let mut text = go_style(&object, indent);
            if cut {
                let mut i = at.index(text.len() + 1);
                while !text.is_char_boundary(i) {
                    i -= 1;
                }
                text.truncate(i);
            }
            let built = read(&text, false);
            let kept = read_with(&text, true, true);
            prop_assert_eq!(read(&text, true), built.clone(), "without managed_text, the list is built");
            prop_assert_eq!(built.is_some(), kept.is_some(), "{:?}", text);
            if let (Some((full, depth)), Some((live, depth_live))) = (built, kept) {
                let raw = live["metadata"]["managedFields"].as_str().expect("kept as text");
                prop_assert!(text.contains(raw), "the text as written: {:?}", raw);
                prop_assert_eq!(&full["metadata"]["managedFields"], &serde_json::from_str::<Value>(raw).unwrap());
                prop_assert_eq!(full, parsed_managed_fields(live));
                prop_assert_eq!(depth, depth_live);
            }
        }

        /// A live object's managedFields, as the API server writes them or near it (names with
        /// escapes, item keys, entries without a manager or not entries, nesting), read into a
        /// tree: read once as the object is read, they are the managedFields the kept text reads
        /// as; the reader refuses what stepping over them refuses (a byte changed, the text cut),
        /// with the same depth; where the one pass says to read again, the tree has none and the
        /// text is read when asked.
        #[test]
        fn managed_fields_are_read_once_as_their_text_reads(
            entries in proptest::collection::vec(managed_entry(), 0..5),
            indent in 0usize..4,
            at in any::<prop::sample::Index>(),
            byte in prop::sample::select(&[b'\x01', b'}', b']', b'"', b'\\', b' ', b'1', b'{', b',', b':'][..]),
            harm in 0u8..4,
        ) {
            let object = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "managedFields": entries}, "spec": {"replicas": 1}});
            let mut text = go_style(&object, indent);
            let (start, end) = (text.find("\"managedFields\"").unwrap(), text.find("\"spec\"").unwrap());
            let i = start + at.index(end - start);
            let harmed = match harm {
                // A byte of the list changed (on ASCII, so the text stays UTF-8).
                0 if text.is_char_boundary(i) && text.is_char_boundary(i + 1) => {
                    text.replace_range(i..i + 1, &char::from(byte).to_string());
                    true
                }
                1 if text.is_char_boundary(i) => {
                    text.truncate(i);
                    true
                }
                _ => false,
            };
            // The one pass reads the list unless an entry has fields but no manager (a string).
            let again = entries.iter().any(|e| {
                e.as_object().is_some_and(|m| m.contains_key("fieldsV1") && !m.get("manager").is_some_and(Value::is_string))
            });
            let stepped = read_with(&text, true, true);
            let tree = read_tree(&text, true, true);
            prop_assert_eq!(stepped.is_some(), tree.is_some(), "{:?}", text);
            if let (Some((value, depth)), Some((tree, tree_depth))) = (stepped, tree) {
                prop_assert_eq!(tree_depth, depth);
                prop_assert_eq!(tree.to_value(), value);
                use drift_model::tree::JsonView;
                let kept = tree.root().get("metadata").and_then(|m| m.get("managedFields")).map(|m| m.shape());
                match (kept, tree.managed_fields()) {
                    (Some(drift_model::tree::Shape::String(raw)), Some(read)) => {
                        prop_assert_eq!(read, &ManagedFields::of_text(raw));
                    }
                    (_, None) => prop_assert!(harmed || again, "read again: {:?}", text),
                    (other, Some(_)) => prop_assert!(false, "read from no list: {:?}", other),
                }
                if !harmed {
                    prop_assert_eq!(tree.managed_fields().is_none(), again, "{:?}", text);
                }
            }
        }

        /// Broken or odd documents: cut, a byte changed, a piece repeated, whitespace around. The
        /// reader never reads what serde_json refuses, nor differently from it.
        #[test]
        fn gives_up_where_serde_json_fails(
            v in value(),
            indent in 0usize..3,
            at in any::<prop::sample::Index>(),
            edit in 0u8..6,
            byte in prop_oneof![Just(b'"'), Just(b'\\'), Just(b','), Just(b'}'), Just(b']'), Just(b'0'),
                Just(b'-'), Just(b'.'), Just(b'e'), Just(b' '), Just(b'\t'), Just(b'\x0b'), Just(b'u'), Just(b'a')],
        ) {
            let text = go_style(&v, indent);
            let mut bytes = text.into_bytes();
            let i = at.index(bytes.len() + 1);
            match edit {
                0 => bytes.truncate(i),
                1 if i < bytes.len() => bytes[i] = byte,
                2 => bytes.insert(i, byte),
                3 if i < bytes.len() => {
                    bytes.remove(i);
                }
                4 => {
                    let piece = bytes[i..].iter().take(7).copied().collect::<Vec<_>>();
                    bytes.splice(i..i, piece);
                }
                _ => {
                    bytes.insert(0, b'\r');
                    bytes.push(b'\n');
                }
            }
            if let Ok(text) = String::from_utf8(bytes) {
                agrees(&text)?;
            }
        }
    }

    #[test]
    fn edge_documents_are_read_as_serde_json_reads_them_or_left_to_it() {
        #[rustfmt::skip]
        let documents = [
            "{}", "[]", " {} ", "\n\t{\r\n}\n", "{\"a\":1,\"a\":2}", "{\"b\":1,\"a\":2,\"b\":3}", "0", "-0", "-0.0",
            "1.0", "1e2", "1E+2", "1e-2", "1e400", "-1e400", "1e-400", "18446744073709551615",
            "18446744073709551616", "-9223372036854775808", "-9223372036854775809", "01", "1.", ".5", "+1",
            "-", "1e", "1e+", "tru", "true ", "nul", "nulls", "\"\\u00e9\"", "\"\\ud83d\\ude00\"", "\"\\ud83d\"",
            "\"\\ude00\"", "\"\\ud83dx\"", "\"\\ud83d\\u0041\"", "\"\\u12\"", "\"\\uzzzz\"", "\"\\x\"", "\"\\'\"",
            "\"a\u{1}\"", "\"a\u{7f}\"", "\"abcdefgh\\\"ijklmnop\"", "\"tab\tinside\"", "\"unterminated",
            "{\"a\" 1}", "{\"a\":1,}", "[1,]", "[,1]", "{,}", "{\"a\":1 \"b\":2}", "[1 2]", "{1:2}", "{} {}",
            "{}x", "\u{feff}{}", "{\"k\":\"v\"}\u{0}", "[[[[[[[[[[]]]]]]]]]]", "\"        \"", "        1",
            "\"a\\/b\"", "\"\\b\\f\\n\\r\\t\"", "[1e-7,5e-324,2.2250738585072014e-308,1.7976931348623157e308]",
        ];
        // What it leaves to serde_json while serde_json reads it (named in the module's docs).
        let left = ["-0", "18446744073709551616", "-9223372036854775809"];
        for text in documents {
            let ours = read(text, false);
            let theirs = serde(text);
            match (&ours, &theirs) {
                (Some(a), Some(b)) => assert_eq!(a, b, "{text:?}"),
                (Some(_), None) => panic!("read what serde_json refuses: {text:?}"),
                (None, Some(_)) => assert!(left.contains(&text), "left to serde_json: {text:?}"),
                (None, None) => {}
            }
            // The same document as a live object's status, which is checked and not built:
            // refused exactly where serde_json refuses it.
            let live = format!("{{\"kind\":\"Pod\",\"status\":{text}}}");
            let skipped = read(&live, true);
            match serde(&live) {
                Some((mut tree, _)) => {
                    tree.as_object_mut().map(|o| o.remove("status"));
                    match skipped {
                        Some((ours, _)) => assert_eq!(ours, tree, "{live:?}"),
                        None => assert!(left.contains(&text), "left to serde_json: {live:?}"),
                    }
                }
                None => assert_eq!(skipped, None, "read what serde_json refuses: {live:?}"),
            }
        }
    }

    #[test]
    fn nesting_is_bounded_and_the_depth_is_that_of_the_deepest_value() {
        assert_eq!(read("{\"a\":[1,{\"b\":{}}],\"c\":2}", false).map(|(_, d)| d), Some(3));
        assert_eq!(read("[[[]]]", false).map(|(_, d)| d), Some(2));
        assert_eq!(read("7", false).map(|(_, d)| d), Some(0));
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert_eq!(read(&deep(MAX_NESTING), false).map(|(_, d)| d), Some(MAX_NESTING - 1));
        assert!(read(&deep(MAX_NESTING + 1), false).is_none());
        assert!(serde(&deep(MAX_NESTING + 1)).is_some(), "serde_json reads what the reader leaves to it");
    }

    #[test]
    fn a_kubectl_read_back_is_read_whole() {
        let text = r#"{
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {
        "annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"annotations\":{},\"name\":\"web\"}}\n"
        },
        "managedFields": [
            {
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}}}}}}},
                "manager": "kubectl-client-side-apply",
                "time": "2024-01-01T00:00:00Z"
            }
        ],
        "generation": 3,
        "name": "web"
    },
    "spec": {"replicas": 2, "ratio": 0.25, "selector": {"matchLabels": {"app": "web"}}}
}
"#;
        let (value, depth) = read(text, false).expect("read");
        assert_eq!(value, serde_json::from_str::<Value>(text).unwrap());
        assert_eq!(depth, 10);
        let (live, live_depth) = read_with(text, true, true).expect("read");
        let raw = live["metadata"]["managedFields"].as_str().expect("kept as text");
        assert!(raw.starts_with("[\n            {") && raw.ends_with("}\n        ]"), "{raw:?}");
        assert_eq!(parsed_managed_fields(live), value);
        assert_eq!(live_depth, depth);
    }

    /// Every key and string of a tree, with whether it is borrowed from `text`.
    pub(crate) fn strings(text: &str, tree: &Tree<'_>) -> Vec<(String, bool)> {
        use drift_model::tree::{JsonView, Node, Shape};
        fn walk(text: &str, node: Node<'_, '_>, out: &mut Vec<(String, bool)>) {
            let inside = |s: &str| text.as_bytes().as_ptr_range().contains(&s.as_ptr());
            if let Shape::String(s) = node.shape() {
                out.push((s.to_owned(), inside(s)));
            }
            for (key, value) in node.fields() {
                out.push((key.to_owned(), inside(key)));
                walk(text, value, out);
            }
            for i in 0..node.len() {
                if let Some(item) = node.item(i) {
                    walk(text, item, out);
                }
            }
        }
        let mut out = Vec::new();
        walk(text, tree.root(), &mut out);
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// The tree build reads what the `Value` build reads, into the same document at the same
        /// depth, and gives up exactly where it gives up, however it is asked to read (a live
        /// object's status dropped, its managedFields kept as text): live objects, broken ones,
        /// any document.
        #[test]
        fn a_tree_is_read_where_a_value_is_and_reads_back_as_it(
            live in live_text(),
            v in value(),
            indent in 0usize..5,
            at in any::<prop::sample::Index>(),
            cut in prop::bool::weighted(0.2),
        ) {
            for mut text in [live, go_style(&v, indent)] {
                if cut {
                    let mut i = at.index(text.len() + 1);
                    while !text.is_char_boundary(i) {
                        i -= 1;
                    }
                    text.truncate(i);
                }
                for (live, managed_text) in [(false, false), (true, false), (true, true)] {
                    let value = read_with(&text, live, managed_text);
                    let tree = read_tree(&text, live, managed_text);
                    prop_assert_eq!(value.is_some(), tree.is_some(), "{:?} live {} managed {}", text, live, managed_text);
                    if let (Some((value, depth)), Some((tree, tree_depth))) = (value, tree) {
                        prop_assert_eq!(tree.to_value(), value, "{:?}", text);
                        prop_assert_eq!(tree_depth, depth, "{:?}", text);
                        // What is borrowed is the text as written: no escape in it.
                        for (s, borrowed) in strings(&text, &tree) {
                            prop_assert!(!borrowed || text.contains(&s), "{:?} in {:?}", s, text);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_tree_borrows_its_keys_and_strings_from_the_text_unless_they_hold_an_escape() {
        let text = r#"{
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {
        "annotations": {"note": "a \"quoted\" word", "k\u0065y": "x\u0026y", "plain": "text"},
        "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:data": {}}}],
        "name": "web"
    },
    "data": {"n": 1.5, "m": -3, "list": ["one", "two"]},
    "status": {"phase": "Running"}
}"#;
        let (tree, depth) = read_tree(text, true, true).unwrap();
        let (value, value_depth) = read_with(text, true, true).unwrap();
        assert_eq!(tree.to_value(), value);
        assert_eq!(depth, value_depth);
        let read = strings(text, &tree);
        let owned: Vec<&str> = read.iter().filter(|(_, borrowed)| !borrowed).map(|(s, _)| s.as_str()).collect();
        assert_eq!(owned, ["key", "x&y", "a \"quoted\" word"], "only the escaped ones are copied");
        assert!(read.iter().any(|(s, _)| s == "plain") && read.iter().all(|(s, _)| s != "status"));
        let managed = &value["metadata"]["managedFields"];
        assert_eq!(managed, r#"[{"manager": "kubectl", "fieldsV1": {"f:data": {}}}]"#, "kept as its text");
        assert!(read.iter().any(|(s, borrowed)| s == managed && *borrowed), "and borrowed");
    }
}
