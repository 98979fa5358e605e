//! A [`serde_json::Value`] written as bytes that read back into the same tree with nothing to
//! scan: what a kept desired object holds ([`crate::KeptResource`]), LZ4-compressed.
//!
//! Compact JSON, which a kept object held before, must be escaped when written and scanned for
//! quotes, escapes and numbers when read; here each value is a tag byte, then its length as a
//! LEB128 number (a string, a list, a map) or its 8 bytes (a number), so reading is copying.
//! The strings (map keys and string values) are not among the tags: they stand together before
//! them, in the order the tags use them, so that they are checked as UTF-8 once for the whole
//! object, not once each. The layout: the strings' length (a little-endian `u64`), the
//! strings, the tags.
//! Maps are written in their keys' order (a `serde_json::Map` iterates sorted, and its keys are
//! unique), so the same tree always gives the same bytes (a fingerprint of them tells a changed
//! object apart) and a map is rebuilt by inserting its keys from the last, each placed after one
//! comparison. Only this crate writes and reads these bytes, in one process: they are not a
//! format to store or to send.

use std::borrow::Cow;

use drift_model::tree::{JsonView, Shape, Tree, TreeBuilder};
use serde_json::{Number, Value};

use crate::build::{Build, Values};

const NULL: u8 = 0;
const FALSE: u8 = 1;
const TRUE: u8 = 2;
const UNSIGNED: u8 = 3;
const SIGNED: u8 = 4;
const FLOAT: u8 = 5;
const STRING: u8 = 6;
const ARRAY: u8 = 7;
const OBJECT: u8 = 8;

/// Appends the bytes of `v` to `out`.
pub(crate) fn write<'a>(v: impl JsonView<'a>, out: &mut Vec<u8>) {
    thread_local! {
        /// The tags of the object being written, kept from one object to the next.
        static TAGS: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    TAGS.with(|t| match t.try_borrow_mut() {
        Ok(mut tags) => {
            tags.clear();
            if tags.capacity() > 1 << 20 {
                tags.shrink_to(64 << 10);
            }
            write_parts(v, out, &mut tags);
        }
        // (Not reached: writing does not write another tree.)
        Err(_) => write_parts(v, out, &mut Vec::new()),
    });
}

/// [`write`], the tags written into `tags` first.
fn write_parts<'a>(v: impl JsonView<'a>, out: &mut Vec<u8>, tags: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; 8]);
    value(v, out, tags);
    let strings = (out.len() - start - 8) as u64;
    out[start..start + 8].copy_from_slice(&strings.to_le_bytes());
    out.extend_from_slice(tags);
}

/// The strings of `v` appended to `strings`, its tags to `tags` (a `Value` or a tree alike: both
/// give their mappings' fields in the order of their keys).
fn value<'a>(v: impl JsonView<'a>, strings: &mut Vec<u8>, tags: &mut Vec<u8>) {
    match v.shape() {
        Shape::Null => tags.push(NULL),
        Shape::Bool(b) => tags.push(if b { TRUE } else { FALSE }),
        Shape::Number(n) => {
            let (tag, bits) = match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => (UNSIGNED, u),
                (None, Some(i)) => (SIGNED, i as u64),
                // (Not a `u64` nor an `i64`: an `f64`, which a `Number` always holds then.)
                (None, None) => (FLOAT, n.as_f64().unwrap_or_default().to_bits()),
            };
            tags.push(tag);
            tags.extend_from_slice(&bits.to_le_bytes());
        }
        Shape::String(s) => {
            tags.push(STRING);
            text(s, strings, tags);
        }
        Shape::Array => {
            tags.push(ARRAY);
            length(v.len(), tags);
            for i in 0..v.len() {
                if let Some(item) = v.item(i) {
                    value(item, strings, tags);
                }
            }
        }
        Shape::Object => {
            tags.push(OBJECT);
            length(v.len(), tags);
            for (key, item) in v.fields() {
                text(key, strings, tags);
                value(item, strings, tags);
            }
        }
    }
}

/// A string: its length among the tags, its bytes among the strings.
fn text(s: &str, strings: &mut Vec<u8>, tags: &mut Vec<u8>) {
    length(s.len(), tags);
    strings.extend_from_slice(s.as_bytes());
}

fn length(mut n: usize, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// The tree `write` wrote into `bytes` (and nothing else); `None` for bytes it did not write.
pub(crate) fn read(bytes: &[u8]) -> Option<Value> {
    read_into(bytes, Values { entries: Vec::new(), items: Vec::new() }).map(|(_, v)| v)
}

/// [`read`] into a [`Tree`] borrowing its strings from `bytes`.
pub(crate) fn read_tree(bytes: &[u8]) -> Option<Tree<'_>> {
    // (A value takes at least one tag byte: about one in three of a workload's.)
    let build = TreeBuilder::with_capacity(bytes.len() / 8);
    read_into(bytes, build).map(|(b, root)| b.finish(root))
}

/// The one read of both: the builder, and the top value built into it.
fn read_into<'b, B: Build<'b>>(bytes: &'b [u8], build: B) -> Option<(B, B::Out)> {
    let n = usize::try_from(u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?)).ok()?;
    let strings = std::str::from_utf8(bytes.get(8..8usize.checked_add(n)?)?).ok()?;
    let tags = &bytes[8 + n..];
    let mut reader = Reader { bytes: tags, pos: 0, strings, at: 0, build };
    let value = reader.value()?;
    (reader.pos == tags.len() && reader.at == strings.len()).then_some((reader.build, value))
}

struct Reader<'b, B> {
    /// The tags.
    bytes: &'b [u8],
    pos: usize,
    /// The strings, and where the next one starts.
    strings: &'b str,
    at: usize,
    /// What the object is built into.
    build: B,
}

impl<'b, B: Build<'b>> Reader<'b, B> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let end = self.pos.checked_add(n)?;
        let taken = self.bytes.get(self.pos..end)?;
        self.pos = end;
        Some(taken)
    }

    fn length(&mut self) -> Option<usize> {
        let mut n = 0usize;
        for shift in (0..usize::BITS).step_by(7) {
            let b = self.byte()?;
            n |= usize::from(b & 0x7f).checked_shl(shift)?;
            if b < 0x80 {
                return Some(n);
            }
        }
        None
    }

    /// A count of items, each of which takes at least one byte: no larger than what is left.
    fn count(&mut self) -> Option<usize> {
        self.length().filter(|n| *n <= self.bytes.len() - self.pos)
    }

    fn text(&mut self) -> Option<&'b str> {
        let end = self.at.checked_add(self.length()?)?;
        // (`None` past the strings' end, or off a character's boundary.)
        let s = self.strings.get(self.at..end)?;
        self.at = end;
        Some(s)
    }

    fn bits(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn value(&mut self) -> Option<B::Out> {
        Some(match self.byte()? {
            NULL => self.build.null(),
            FALSE => self.build.bool(false),
            TRUE => self.build.bool(true),
            UNSIGNED => {
                let n = Number::from(self.bits()?);
                self.build.number(n)
            }
            SIGNED => {
                let n = Number::from(self.bits()? as i64);
                self.build.number(n)
            }
            FLOAT => {
                let n = Number::from_f64(f64::from_bits(self.bits()?))?;
                self.build.number(n)
            }
            STRING => {
                let s = self.text()?;
                self.build.string(Cow::Borrowed(s))
            }
            ARRAY => {
                let n = self.count()?;
                let mark = self.build.array_start();
                for _ in 0..n {
                    let item = self.value()?;
                    self.build.item(item);
                }
                self.build.array_end(mark)
            }
            OBJECT => {
                let n = self.count()?;
                // (Written in ascending order of their keys, each key once: a map is built as
                // a reader of JSON builds it, with nothing to sort nor to drop.)
                let mark = self.build.object_start();
                for _ in 0..n {
                    let key = self.text()?;
                    let value = self.value()?;
                    self.build.member(Cow::Borrowed(key), value);
                }
                self.build.object_end(mark)
            }
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bytes_of(v: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        write(v, &mut out);
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// Every tree reads back as itself, and equal trees have the same bytes.
        #[test]
        fn a_tree_reads_back_as_itself(v in crate::json_tree::tests::value()) {
            let bytes = bytes_of(&v);
            prop_assert_eq!(read(&bytes), Some(v.clone()));
            // And into a tree borrowing them, the same document.
            prop_assert_eq!(read_tree(&bytes).map(|t| t.to_value()), Some(v.clone()));
            let again: Value = serde_json::from_str(&v.to_string()).unwrap();
            prop_assert_eq!(bytes_of(&again), bytes);
        }

        /// Bytes cut short or followed by more are refused, never read as another tree.
        #[test]
        fn bytes_cut_or_lengthened_are_refused(v in crate::json_tree::tests::value(), at in any::<prop::sample::Index>()) {
            let bytes = bytes_of(&v);
            let cut = at.index(bytes.len());
            prop_assert_eq!(read(&bytes[..cut]), None);
            prop_assert!(read_tree(&bytes[..cut]).is_none());
            let mut longer = bytes.clone();
            longer.push(NULL);
            prop_assert_eq!(read(&longer), None);
            prop_assert!(read_tree(&longer).is_none());
        }
    }

    #[test]
    fn numbers_keep_their_kind_and_lengths_take_several_bytes() {
        let v = serde_json::json!({
            "u": u64::MAX, "i": i64::MIN, "f": 1.0, "g": -0.5, "zero": 0, "minus": -1,
            "long": "x".repeat(300), "list": vec![1; 200],
        });
        let bytes = bytes_of(&v);
        let back = read(&bytes).unwrap();
        assert_eq!(back, v);
        assert_eq!(back.to_string(), v.to_string(), "1.0 stays a float, 0 an integer");
        assert_eq!(read(&[OBJECT, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]), None);
        assert_eq!(read(&[9]), None, "an unknown tag");
        assert_eq!(read(&[STRING, 2, 0xc3, 0x28]), None, "text that is not UTF-8");
    }
}
