//! JSON laid out as serde_json's `to_writer_pretty` lays it out, with the elements of a long
//! list rendered on every core.
//!
//! A report of 10,000 drifts is 11.5 MB of JSON, and rendering it took about 275 M
//! instructions on one core at the end of `drift diff`, when every other step of the run had
//! both cores. [`write_elements`] renders the list in blocks on as many threads as there are
//! cores and writes the blocks in order; the bytes are those serde_json writes (tested).

use std::io::{self, Write};
use std::num::NonZero;
use std::sync::mpsc::sync_channel;

use serde::Serialize;

/// Elements a thread renders at a time (about 290 KB of a report's drifts): what the threads
/// hold at once is a few blocks, however long the list.
const BLOCK: usize = 256;

/// serde_json's pretty layout (two spaces an indentation level, `": "` after a key, each
/// element and member on a line of its own, `[]` and `{}` when empty), starting at a depth: a
/// value rendered with `Pretty::at(d)` is what `to_writer_pretty` writes for it found `d` levels
/// deep in a document.
#[derive(Debug)]
pub struct Pretty {
    depth: usize,
    has_value: bool,
}

impl Pretty {
    /// The layout of a value `depth` levels deep.
    pub fn at(depth: usize) -> Self {
        Pretty { depth, has_value: false }
    }
}

fn indent<W: ?Sized + Write>(w: &mut W, depth: usize) -> io::Result<()> {
    for _ in 0..depth {
        w.write_all(b"  ")?;
    }
    Ok(())
}

impl serde_json::ser::Formatter for Pretty {
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"[")
    }

    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"]")
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.next_line(w, first)
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"{")
    }

    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"}")
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.next_line(w, first)
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

impl Pretty {
    /// `[` or `{`: one level deeper, nothing in it yet.
    fn open<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(bracket)
    }

    /// `]` or `}`: on a line of its own at the outer level, unless the container was empty.
    fn close<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            w.write_all(b"\n")?;
            indent(w, self.depth)?;
        }
        w.write_all(bracket)
    }

    /// Before an element or a key: a comma after the one before it, then a new line.
    fn next_line<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        w.write_all(if first { b"\n" } else { b",\n" })?;
        indent(w, self.depth)
    }
}

/// Writes the elements of a non-empty JSON array found `depth` levels deep, between its `[`
/// and its `]` (which the caller writes), as `to_writer_pretty` writes them: each on a line of
/// its own one level deeper, separated by commas, then a new line at the array's level. Nothing
/// for an empty list (`[]`). Blocks of [`BLOCK`] elements are rendered on up to one thread a
/// core (eight at most), each thread handing its blocks over one at a time, and written in
/// order.
pub fn write_elements<T: Serialize + Sync>(items: &[T], depth: usize, out: &mut dyn Write) -> io::Result<()> {
    if items.is_empty() {
        return Ok(());
    }
    let blocks = items.len().div_ceil(BLOCK);
    let render = |k: usize| -> io::Result<Vec<u8>> {
        let block = &items[k * BLOCK..((k + 1) * BLOCK).min(items.len())];
        let mut buf = Vec::with_capacity(block.len() * 1024);
        for (i, item) in block.iter().enumerate() {
            buf.write_all(if k == 0 && i == 0 { b"\n" } else { b",\n" })?;
            indent(&mut buf, depth + 1)?;
            item.serialize(&mut serde_json::Serializer::with_formatter(&mut buf, Pretty::at(depth + 1)))?;
        }
        Ok(buf)
    };
    let threads = std::thread::available_parallelism().map_or(1, NonZero::get).min(8).min(blocks);
    if threads < 2 {
        for k in 0..blocks {
            out.write_all(&render(k)?)?;
        }
    } else {
        std::thread::scope(|s| -> io::Result<()> {
            // Thread t renders blocks t, t + threads, ...; each hands one over and may render
            // the next meanwhile. Should writing fail, the receivers go and the threads stop at
            // their next hand-over.
            let receivers: Vec<_> = (0..threads)
                .map(|t| {
                    let (tx, rx) = sync_channel(1);
                    let render = &render;
                    s.spawn(move || {
                        for k in (t..blocks).step_by(threads) {
                            let block = render(k);
                            let failed = block.is_err();
                            if tx.send(block).is_err() || failed {
                                return;
                            }
                        }
                    });
                    rx
                })
                .collect();
            for k in 0..blocks {
                let block =
                    receivers[k % threads].recv().map_err(|_| io::Error::other("a rendering thread stopped"))?;
                out.write_all(&block?)?;
            }
            Ok(())
        })?;
    }
    out.write_all(b"\n")?;
    indent(out, depth)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    /// A document with a list at `"items"`, first member of an object one level deep.
    fn whole(items: &[Value]) -> Vec<u8> {
        let doc = json!({ "outer": { "items": items, "more": [1, {}, []] } });
        serde_json::to_vec_pretty(&doc).unwrap()
    }

    /// The same document with the list's elements written by `write_elements`.
    fn spliced(items: &[Value]) -> Vec<u8> {
        let without = whole(&[]);
        let head = b"{\n  \"outer\": {\n    \"items\": [";
        let tail = without.strip_prefix(head.as_slice()).unwrap();
        let mut out = head.to_vec();
        write_elements(items, 2, &mut out).unwrap();
        out.extend_from_slice(tail);
        out
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            "[a-z\"\\\\\n\u{e9}]{0,6}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map("[a-z]{1,3}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Any list, of any values nested any way (empty ones included), is written byte for
        /// byte as serde_json's pretty writer writes it in place.
        #[test]
        fn elements_are_written_as_serde_json_writes_them(items in prop::collection::vec(value(), 0..6)) {
            prop_assert_eq!(String::from_utf8(spliced(&items)).unwrap(), String::from_utf8(whole(&items)).unwrap());
        }
    }

    /// A list of many blocks (rendered on several threads where there are cores) comes out
    /// whole and in order, the same bytes as serde_json's.
    #[test]
    fn a_list_of_many_blocks_is_written_in_order() {
        let items: Vec<Value> =
            (0..BLOCK * 5 + 7).map(|i| json!({ "n": i, "list": [i, { "deep": [] }], "empty": {} })).collect();
        assert_eq!(spliced(&items), whole(&items));
    }

    /// A writer that fails stops the writing with its error, whatever the threads were doing.
    #[test]
    fn a_failing_writer_stops_the_writing_with_its_error() {
        struct Full(usize);
        impl Write for Full {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                if self.0 < buf.len() {
                    return Err(io::Error::new(io::ErrorKind::BrokenPipe, "full"));
                }
                self.0 -= buf.len();
                Ok(buf.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let items: Vec<Value> = (0..BLOCK * 9).map(|i| json!({ "n": i })).collect();
        let err = write_elements(&items, 1, &mut Full(10_000)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
    }
}
