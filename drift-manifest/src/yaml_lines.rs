//! The block form of manifests read line by line, before any tokenizer.
//!
//! Most manifests are block mappings and sequences of one-line scalars, written by people or by
//! tools (`kubectl`, PyYAML, Helm): indentation by spaces, `key: value`, `- item`, `- key: value`,
//! sequences at their key's indentation, plain, single- and double-quoted scalars, literal block
//! scalars (`|`, `|-`, `|+`), empty flow collections (`[]`, `{}`) and comments. [`read`] builds the
//! tree of such a document from its lines, and gives up with `None` at the first thing outside
//! that form (a tab, a carriage return, a flow collection with items, a folded or indented block
//! scalar, a plain scalar on more than one line, a quoted one that does not close on its line, an
//! anchor, alias, tag, directive or second document, a key that is not plainly a string, a key
//! given twice, an escape other than JSON's, a bound of the reader's budget, a plain scalar
//! whose type needs YAML 1.1's fuller rules). The document then goes to [`crate::yaml`]'s reader
//! of parser events, which reads everything as Kubernetes does; the differential tests of
//! [`crate::yaml`] hold the two to the same tree.
//!
//! The same reader builds a [`Tree`] instead ([`read_tree`]), for a desired object that is only
//! compared: its keys and plain scalars, and quoted ones without an escape, borrowed from the
//! text (every string the reader keeps is the text as written but those it decodes: an escape,
//! a quote doubled, a literal block without its indentation), so that reading it allocates for
//! the tree's vectors and the few decoded strings, where a `serde_json::Value` allocates for
//! every key and string and every mapping. What it builds into is a [`Build`]: the lines are
//! read, checked and given up on by the one [`Reader`], so that both builds read the same
//! documents and refuse the same ones (a property test holds the tree to the `Value`).

use std::borrow::Cow;

use drift_model::tree::{Tree, TreeBuilder};
use serde_json::{Map, Number, Value};

use crate::build::Build;
use crate::yaml::Plain;

/// Whether `text` holds a character that is `odd`, the control characters below a space other
/// than the line feed and DEL being odd. ASCII text, most manifests, is looked at in blocks
/// without a branch per byte.
fn odd_text(text: &str, odd: impl Fn(char) -> bool) -> bool {
    if !text.is_ascii() {
        return text.chars().any(odd);
    }
    text.as_bytes()
        .chunks(64)
        .any(|block| block.iter().fold(false, |any, &b| any | ((b < b' ') & (b != b'\n')) | (b == 0x7f)))
}

/// The tree of one document in the block form above, or `None`.
pub(crate) fn read(text: &str, max_depth: usize, max_nodes: usize) -> Option<Value> {
    let maps = Maps { maps: Vec::with_capacity(16), lists: Vec::with_capacity(16), repeated: false };
    read_into(text, max_depth, max_nodes, maps).map(|(_, value)| value)
}

/// [`read`] into a [`Tree`] borrowing `text`: the same document, refused where [`read`]
/// refuses it.
pub(crate) fn read_tree(text: &str, max_depth: usize, max_nodes: usize) -> Option<Tree<'_>> {
    // About one value in 24 bytes of a real workload's manifest (Deployments and StatefulSets
    // of about 5 KB, written by tools: 23.7 to 23.9 bytes a value): room for a fifth more than
    // that saves growing the tree's vectors for all but the densest documents.
    let build = TreeBuilder::with_capacity(text.len() / 20);
    read_into(text, max_depth, max_nodes, build).map(|(b, root)| b.finish(root))
}

/// A [`Build`] that also finds a key given twice in a mapping, which the reader refuses (the
/// events reader reads it, with a note); [`Build::object_end`] keeps the last of two quietly,
/// as serde_json does.
trait BuildOnce<'a>: Build<'a> {
    /// [`Build::object_end`], or `None` when a key of the mapping was given twice.
    fn object_end_once(&mut self, mark: usize) -> Option<Self::Out>;
}

/// Builds `serde_json::Value`s, each mapping into its map as it is read (and each list into its
/// vector), as the reader did before it built trees: a key is inserted as it comes, and the one
/// search that places it finds it given twice, where [`crate::build::Values`] gathers a
/// mapping's members and keeps the last of two quietly.
struct Maps {
    /// The mappings being read, innermost last.
    maps: Vec<Map<String, Value>>,
    /// The lists being read, innermost last.
    lists: Vec<Vec<Value>>,
    /// Whether a mapping was given a key twice.
    repeated: bool,
}

impl<'a> Build<'a> for Maps {
    type Out = Value;

    #[inline(always)]
    fn null(&mut self) -> Value {
        Value::Null
    }

    #[inline(always)]
    fn bool(&mut self, b: bool) -> Value {
        Value::Bool(b)
    }

    #[inline(always)]
    fn number(&mut self, n: Number) -> Value {
        Value::Number(n)
    }

    #[inline(always)]
    fn string(&mut self, s: Cow<'a, str>) -> Value {
        Value::String(owned(s))
    }

    #[inline(always)]
    fn object_start(&mut self) -> usize {
        self.maps.push(Map::new());
        self.maps.len()
    }

    #[inline(always)]
    fn member(&mut self, key: Cow<'a, str>, value: Value) {
        if let Some(map) = self.maps.last_mut() {
            match map.entry(owned(key)) {
                serde_json::map::Entry::Vacant(slot) => {
                    slot.insert(value);
                }
                serde_json::map::Entry::Occupied(_) => self.repeated = true,
            }
        }
    }

    #[inline(always)]
    fn object_end(&mut self, _: usize) -> Value {
        Value::Object(self.maps.pop().unwrap_or_default())
    }

    #[inline(always)]
    fn array_start(&mut self) -> usize {
        self.lists.push(Vec::new());
        self.lists.len()
    }

    #[inline(always)]
    fn item(&mut self, value: Value) {
        if let Some(list) = self.lists.last_mut() {
            list.push(value);
        }
    }

    #[inline(always)]
    fn array_end(&mut self, _: usize) -> Value {
        Value::Array(self.lists.pop().unwrap_or_default())
    }
}

/// The string of a key or scalar, copied from the text unless the reader decoded it already.
#[inline(always)]
fn owned(s: Cow<'_, str>) -> String {
    match s {
        Cow::Borrowed(b) => copy(b),
        Cow::Owned(o) => o,
    }
}

/// A copy of a slice of the text, out of line: inlined into each of the reader's callers, the
/// allocation's setup took more instructions than the call does (callgrind, the 1,000 real
/// manifests: 405 M against 398 M for the whole read).
#[inline(never)]
fn copy(s: &str) -> String {
    s.to_owned()
}

impl BuildOnce<'_> for Maps {
    #[inline(always)]
    fn object_end_once(&mut self, mark: usize) -> Option<Value> {
        (!self.repeated).then(|| Build::object_end(self, mark))
    }
}

/// A tree refuses a key given twice as it sorts the mapping's keys.
impl<'a> BuildOnce<'a> for TreeBuilder<'a> {
    #[inline(always)]
    fn object_end_once(&mut self, mark: usize) -> Option<u32> {
        self.object_end_unique(mark)
    }
}

/// The one read of both: the builder and the document's top value built into it.
#[inline(always)]
fn read_into<'a, B: BuildOnce<'a>>(text: &'a str, max_depth: usize, max_nodes: usize, build: B) -> Option<(B, B::Out)> {
    // Tabs, carriage returns, the line breaks of YAML 1.1, a byte-order mark and characters
    // YAML does not allow in a document are the reader's.
    let odd = |c: char| {
        (c < ' ' && c != '\n')
            || ('\u{7f}'..='\u{9f}').contains(&c)
            || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}')
    };
    if odd_text(text, odd) {
        return None;
    }
    let lines = lines_of(text);
    // The reader bounds the comments it buffers while it looks ahead (32): a long run of them
    // is its to judge.
    let mut run = 0;
    for line in &lines {
        run = if line.body.starts_with('#') {
            run + 1
        } else if line.body.is_empty() {
            run
        } else {
            0
        };
        if run >= 30 {
            return None;
        }
    }
    let mut r = Reader { lines, pos: 0, nodes: 0, max_depth, max_nodes, build };
    let first = r.next_content()?;
    if r.lines[first].body == "---" {
        r.pos = first + 1;
    }
    let root = r.next_content()?;
    if r.lines[root].indent != 0 || is_item(r.lines[root].body) {
        return None;
    }
    let value = r.map(0, 0)?;
    // Nothing may follow the root mapping (a second document is the reader's to refuse).
    if r.next_content().is_some() {
        return None;
    }
    Some((r.build, value))
}

#[derive(Clone, Copy)]
struct Line<'a> {
    indent: usize,
    /// The line after its indentation, trailing spaces removed.
    body: &'a str,
    /// The whole line (for block scalars).
    raw: &'a str,
}

/// The lines of a text, as [`str::lines`] gives them to a text without carriage returns (the
/// reader leaves those to the parser): split at each `\n`, none after a last `\n`.
fn lines_of(text: &str) -> Vec<Line<'_>> {
    let bytes = text.as_bytes();
    // About 28 bytes a line in real manifests: room for most documents at once.
    let mut lines = Vec::with_capacity(bytes.len() / 24 + 4);
    let mut start = 0;
    while start < bytes.len() {
        let end = crate::swar::find_byte(bytes, start, b'\n');
        lines.push(Line::of(&text[start..end]));
        start = end + 1;
    }
    lines
}

impl<'a> Line<'a> {
    fn of(raw: &'a str) -> Self {
        // Spaces are ASCII: the body starts and ends on character boundaries.
        let bytes = raw.as_bytes();
        let indent = bytes.iter().position(|&b| b != b' ').unwrap_or(bytes.len());
        let end = bytes.iter().rposition(|&b| b != b' ').map_or(indent, |i| i + 1);
        Line { indent, body: &raw[indent..end], raw }
    }

    /// Blank or a comment alone.
    fn is_empty(&self) -> bool {
        self.body.is_empty() || self.body.starts_with('#')
    }
}

struct Reader<'a, B> {
    lines: Vec<Line<'a>>,
    pos: usize,
    nodes: usize,
    max_depth: usize,
    max_nodes: usize,
    /// What the document is built into.
    build: B,
}

/// Whether a line's body starts a sequence item.
fn is_item(body: &str) -> bool {
    body == "-" || body.starts_with("- ")
}

impl<'a, B: BuildOnce<'a>> Reader<'a, B> {
    /// The next line with content (skipping blank lines and comments), not consumed.
    fn next_content(&mut self) -> Option<usize> {
        while let Some(line) = self.lines.get(self.pos) {
            if !line.is_empty() {
                return Some(self.pos);
            }
            self.pos += 1;
        }
        None
    }

    /// The indentation of the next line with content, if any.
    fn peek_indent(&mut self) -> Option<(usize, &'a str)> {
        let save = self.pos;
        let found = self.next_content().map(|i| (self.lines[i].indent, self.lines[i].body));
        self.pos = save;
        found
    }

    fn count(&mut self) -> Option<()> {
        self.nodes += 1;
        (self.nodes <= self.max_nodes).then_some(())
    }

    /// A collection opened at `depth`: within the depth bound, counted as a node.
    fn open(&mut self, depth: usize) -> Option<()> {
        if depth >= self.max_depth {
            return None;
        }
        self.count()
    }

    /// A block mapping whose entries sit at `indent`, the first at the current line.
    fn map(&mut self, indent: usize, depth: usize) -> Option<B::Out> {
        self.open(depth)?;
        let mark = self.build.object_start();
        while let Some(i) = self.next_content() {
            let line = self.lines[i];
            if line.indent < indent {
                break;
            }
            // (Deeper would continue the value before; `---`, `...` and `%` lines are no keys.)
            if line.indent != indent {
                return None;
            }
            let (key, rest) = split_key(line.body)?;
            self.count()?;
            self.pos = i + 1;
            let value = self.value(rest, indent, depth + 1)?;
            self.build.member(key, value);
        }
        // A key given twice is refused: the events reader reads it with a note.
        self.build.object_end_once(mark)
    }

    /// A block sequence whose items sit at `indent`, the first at the current line.
    fn seq(&mut self, indent: usize, depth: usize) -> Option<B::Out> {
        self.open(depth)?;
        let mark = self.build.array_start();
        while let Some(i) = self.next_content() {
            let line = self.lines[i];
            if line.indent < indent || (line.indent == indent && !is_item(line.body)) {
                break;
            }
            if line.indent != indent {
                return None;
            }
            let after = &line.body[1..];
            let content = after.trim_start_matches(' ');
            let column = indent + 1 + (after.len() - content.len());
            let item = if content.is_empty() || content.starts_with('#') {
                self.pos = i + 1;
                self.nested(indent, depth + 1, false)?
            } else if content.starts_with('|') || content.starts_with('>') {
                return None;
            } else if split_key(content).is_some() {
                // `- key: value`: a mapping whose entries sit at the key's column.
                self.lines[i] = Line { indent: column, body: content, raw: line.raw };
                self.map(column, depth + 1)?
            } else {
                self.pos = i + 1;
                self.count()?;
                scalar(content, &mut self.build)?
            };
            self.build.item(item);
        }
        Some(self.build.array_end(mark))
    }

    /// The value after `key:` (the rest of the line), for an entry at `indent`.
    fn value(&mut self, rest: &'a str, indent: usize, depth: usize) -> Option<B::Out> {
        if rest.is_empty() || rest.starts_with('#') {
            return self.nested(indent, depth, true);
        }
        if rest.starts_with('|') || rest.starts_with('>') {
            return self.literal(rest, indent);
        }
        self.count()?;
        scalar(rest, &mut self.build)
    }

    /// The node on the lines after a `key:` or `-` with nothing after it: a block collection
    /// indented deeper (or, after a key, a sequence at the key's indentation), else null.
    fn nested(&mut self, indent: usize, depth: usize, after_key: bool) -> Option<B::Out> {
        match self.peek_indent() {
            Some((deeper, body)) if deeper > indent => {
                self.next_content()?;
                if is_item(body) {
                    self.seq(deeper, depth)
                } else if split_key(body).is_some() {
                    self.map(deeper, depth)
                } else {
                    // A scalar on its own line (perhaps on several): the reader's.
                    None
                }
            }
            Some((same, body)) if same == indent && after_key && is_item(body) => {
                self.next_content()?;
                self.seq(same, depth)
            }
            _ => {
                self.count()?;
                Some(self.build.null())
            }
        }
    }

    /// A literal block scalar (`|`, `|-`, `|+`) after a key at `indent`.
    fn literal(&mut self, header: &str, indent: usize) -> Option<B::Out> {
        let header = header.split_once(" #").map_or(header, |(h, _)| h).trim_end_matches(' ');
        let chomp = match header {
            "|" => Chomp::Clip,
            "|-" => Chomp::Strip,
            "|+" => Chomp::Keep,
            _ => return None,
        };
        self.count()?;
        // The block: every following line that is blank or indented deeper than the key.
        let start = self.pos;
        let mut end = start;
        while let Some(line) = self.lines.get(end) {
            if !line.raw.trim_start_matches(' ').is_empty() && line.indent <= indent {
                break;
            }
            end += 1;
        }
        let block = &self.lines[start..end];
        let width = block.iter().find(|l| !l.raw.trim_start_matches(' ').is_empty())?.indent;
        let mut text = String::new();
        let (mut trailing, mut first) = (0, true);
        for line in block {
            if line.raw.trim_start_matches(' ').is_empty() {
                // A blank line longer than the block's indentation holds spaces of its own.
                if line.raw.len() > width {
                    return None;
                }
                trailing += 1;
                continue;
            }
            if line.indent < width {
                return None;
            }
            if !first {
                text.push('\n');
            }
            for _ in 0..trailing {
                text.push('\n');
            }
            (trailing, first) = (0, false);
            text.push_str(&line.raw[width..]);
        }
        match chomp {
            Chomp::Strip => {}
            Chomp::Clip => text.push('\n'),
            Chomp::Keep => {
                text.push('\n');
                for _ in 0..trailing {
                    text.push('\n');
                }
            }
        }
        self.pos = end;
        // (Its lines without their indentation are no slice of the text: a string of its own.)
        Some(self.build.string(Cow::Owned(text)))
    }
}

enum Chomp {
    Clip,
    Strip,
    Keep,
}

/// Characters that start something other than a plain scalar (YAML's indicators).
///
/// A `match`, not a search of a list: a library search costs more to set up than the one byte
/// it is asked about (every key and value of a document is).
fn is_indicator(c: u8) -> bool {
    matches!(
        c,
        b'-' | b'?'
            | b':'
            | b','
            | b'['
            | b']'
            | b'{'
            | b'}'
            | b'#'
            | b'&'
            | b'*'
            | b'!'
            | b'|'
            | b'>'
            | b'\''
            | b'"'
            | b'%'
            | b'@'
            | b'`'
    )
}

/// `key: rest` with the key a plain or quoted string (borrowed from `body` unless decoded),
/// `rest` trimmed (empty when the value is on the following lines).
fn split_key(body: &str) -> Option<(Cow<'_, str>, &str)> {
    // An implicit key is at most 1024 characters long: a longer one is the reader's.
    let first_colon_within = |body: &str| body.find(':').is_some_and(|colon| colon <= 1000);
    let (key, after) = match body.as_bytes().first()? {
        b'"' if first_colon_within(body) => double_quoted(body)?,
        b'\'' if first_colon_within(body) => single_quoted(body)?,
        c if is_indicator(*c) => return None,
        _ => {
            // In one pass, byte by byte (a library search, or one eight bytes at a time, costs
            // more to set up than these few bytes take to scan): the first `: ` or `:` that
            // ends the line, if the first `:` is within the bound; a ` #` before it starts a
            // comment, so the line is no key.
            let bytes = body.as_bytes();
            let mut seen_colon = false;
            let mut colon = None;
            for (i, &b) in bytes.iter().enumerate() {
                match b {
                    b':' => {
                        if !seen_colon && i > 1000 {
                            return None;
                        }
                        seen_colon = true;
                        if bytes.get(i + 1).is_none_or(|&b| b == b' ') {
                            colon = Some(i);
                            break;
                        }
                    }
                    b'#' if i > 0 && bytes[i - 1] == b' ' => return None,
                    _ => {}
                }
            }
            let colon = colon?;
            // Spaces are ASCII: the key ends on a character boundary.
            let end = bytes[..colon].iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
            let key = &body[..end];
            match crate::yaml::plain(key)? {
                Plain::Str => (Cow::Borrowed(key), &body[colon..]),
                _ => return None,
            }
        }
    };
    if key == "<<" {
        return None;
    }
    let rest = after.strip_prefix(':')?;
    if !(rest.is_empty() || rest.starts_with(' ')) {
        return None;
    }
    let spaces = rest.bytes().position(|b| b != b' ').unwrap_or(rest.len());
    Some((key, &rest[spaces..]))
}

/// A one-line scalar other than a plain one, read before it is built (a comment may follow it).
enum OneLine<'a> {
    String(Cow<'a, str>),
    EmptySeq,
    EmptyMap,
}

/// A one-line scalar (the rest of a line), with an optional comment after it, built.
fn scalar<'a, B: Build<'a>>(text: &'a str, build: &mut B) -> Option<B::Out> {
    let (value, after) = match text.as_bytes().first()? {
        b'"' => {
            let (s, after) = double_quoted(text)?;
            (OneLine::String(s), after)
        }
        b'\'' => {
            let (s, after) = single_quoted(text)?;
            (OneLine::String(s), after)
        }
        b'[' | b'{' => match text.get(..2)? {
            "[]" => (OneLine::EmptySeq, &text[2..]),
            "{}" => (OneLine::EmptyMap, &text[2..]),
            _ => return None,
        },
        // `-x` is a plain scalar; `- x` would be a sequence.
        b'-' if text.len() > 1 && text.as_bytes()[1] != b' ' => return plain_value(text, build),
        c if is_indicator(*c) => return None,
        _ => return plain_value(text, build),
    };
    // Nothing after it but a comment, which needs a space before its `#`.
    let trimmed = after.trim_start_matches(' ');
    if !(after.is_empty() || (trimmed.len() < after.len() && (trimmed.is_empty() || trimmed.starts_with('#')))) {
        return None;
    }
    Some(match value {
        OneLine::String(s) => build.string(s),
        OneLine::EmptySeq => {
            let mark = build.array_start();
            build.array_end(mark)
        }
        OneLine::EmptyMap => {
            let mark = build.object_start();
            build.object_end(mark)
        }
    })
}

/// A plain scalar on one line, up to a comment, built: a string is the text itself.
fn plain_value<'a, B: Build<'a>>(text: &'a str, build: &mut B) -> Option<B::Out> {
    let text = text.split_once(" #").map_or(text, |(v, _)| v).trim_end_matches(' ');
    if text.contains(": ") || text.ends_with(':') {
        return None;
    }
    Some(match crate::yaml::plain(text)? {
        Plain::Null => build.null(),
        Plain::Bool(b) => build.bool(b),
        Plain::Int(i) => build.number(i.into()),
        Plain::Str => build.string(Cow::Borrowed(text)),
    })
}

/// A double-quoted scalar at the start of `s` and the rest after it; `None` for an escape
/// outside JSON's or a string that does not close. Without an escape, it is borrowed.
fn double_quoted(s: &str) -> Option<(Cow<'_, str>, &str)> {
    let body = s.strip_prefix('"')?;
    // The runs between escapes are copied whole (`"` and `\\` are ASCII, so the cuts fall on
    // character boundaries); a string without escapes is the text itself.
    let special = |r: &str| r.bytes().position(|b| b == b'"' || b == b'\\');
    let first = special(body)?;
    if body.as_bytes()[first] == b'"' {
        return Some((Cow::Borrowed(&body[..first]), &body[first + 1..]));
    }
    let mut out = String::with_capacity(first + 16);
    let mut rest = body;
    loop {
        let stop = special(rest)?;
        out.push_str(&rest[..stop]);
        if rest.as_bytes()[stop] == b'"' {
            return Some((Cow::Owned(out), &rest[stop + 1..]));
        }
        let mut chars = rest[stop + 1..].chars();
        let e = chars.next()?;
        out.push(match e {
            '"' => '"',
            '\\' => '\\',
            '/' => '/',
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'u' => {
                let hex: String = (0..4).map(|_| chars.next()).collect::<Option<_>>()?;
                char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?
            }
            _ => return None,
        });
        rest = chars.as_str();
    }
}

/// A single-quoted scalar at the start of `s` and the rest after it. Without a doubled quote,
/// it is borrowed.
fn single_quoted(s: &str) -> Option<(Cow<'_, str>, &str)> {
    let body = s.strip_prefix('\'')?;
    let end = body.find('\'')?;
    if !body[end + 1..].starts_with('\'') {
        return Some((Cow::Borrowed(&body[..end]), &body[end + 1..]));
    }
    let mut out = String::new();
    let mut rest = body;
    loop {
        let end = rest.find('\'')?;
        out.push_str(&rest[..end]);
        rest = &rest[end + 1..];
        match rest.strip_prefix('\'') {
            Some(r) => {
                out.push('\'');
                rest = r;
            }
            None => return Some((Cow::Owned(out), rest)),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use proptest::prelude::*;
    use proptest::sample::select;

    use super::{read, read_tree};

    proptest! {
        /// The lines and their indentation and body are what `str::lines` and trimming spaces
        /// give, on the texts the reader reads (no carriage return).
        #[test]
        fn lines_are_those_of_str_lines_trimmed(
            text in proptest::collection::vec(prop_oneof![Just(' '), Just('\n'), Just('a'), Just(':'), Just('é')], 0..60)
                .prop_map(|c| c.into_iter().collect::<String>()),
        ) {
            let lines = super::lines_of(&text);
            let expected: Vec<&str> = text.lines().collect();
            prop_assert_eq!(lines.len(), expected.len());
            for (line, raw) in lines.iter().zip(expected) {
                let body = raw.trim_start_matches(' ');
                prop_assert_eq!(line.raw, raw);
                prop_assert_eq!(line.indent, raw.len() - body.len());
                prop_assert_eq!(line.body, body.trim_end_matches(' '));
            }
        }
    }

    /// A key or one-line scalar as written, and the string the reader decodes from it where that
    /// is no slice of the text (an escape, a doubled quote).
    pub(crate) type Scalar = (&'static str, Option<&'static str>);

    /// A document to write in block form ([`write`]).
    #[derive(Debug, Clone)]
    pub(crate) enum Gen {
        Scalar(Scalar),
        /// A block scalar after its key: its header and its lines.
        Block(&'static str, Vec<&'static str>),
        Seq(Vec<Gen>),
        Map(Vec<(Scalar, Gen)>),
    }

    /// Values on the edges of what the reader reads: plain and quoted strings, YAML 1.1's
    /// values that it leaves to the events reader, quoted ones with escapes (JSON's and
    /// others), comments after a value, empty and other flow collections, anchors and tags.
    #[rustfmt::skip]
    const SCALARS: &[Scalar] = &[
        ("web", None), ("nginx:1.25", None), ("--port=8080", None), ("/var/run", None), ("a b", None),
        ("é", None), ("3", None), ("-7", None), ("0", None), ("true", None), ("False", None), ("null", None),
        ("~", None), ("", None), ("on", None), ("yes", None), ("0644", None), ("1_000", None), ("1.5", None),
        ("0x1F", None), ("2023-12-31", None), ("\"on\"", None), ("'0644'", None), ("\"1_000\"", None),
        ("\"plain\"", None), ("'single'", None), ("\"\"", None), ("\"caf\u{e9}\"", None),
        ("\"a\\\"b\"", Some("a\"b")), ("\"tab\\there\"", Some("tab\there")), ("\"caf\\u00e9\"", Some("café")),
        ("\"back\\\\slash\"", Some("back\\slash")), ("\"x\\x41\"", Some("xA")), ("'it''s'", Some("it's")),
        ("''''", Some("'")), ("v # note", None), ("\"q\" # note", None), ("'q'#x", None), ("[]", None),
        ("{}", None), ("[] # none", None), ("[a, b]", None), ("{a: 1}", None), ("&x web", None), ("!!str 1", None),
        ("a: b", None),
    ];

    /// Keys: plain and quoted, decoded ones, ones that are no string (the reader leaves those),
    /// few enough that a mapping often has one twice.
    #[rustfmt::skip]
    const KEYS: &[Scalar] = &[
        ("a", None), ("b", None), ("name", None), ("app.kubernetes.io/name", None), ("x y", None),
        ("\"a\"", None), ("'b'", None), ("\"\"", None), ("\"k\\\"q\"", Some("k\"q")), ("'it''s'", Some("it's")),
        ("\"on\"", None), ("on", None), ("0644", None), ("~", None), ("<<", None), ("? c", None),
    ];

    const BLOCK_HEADERS: &[&str] = &["|", "|-", "|+", "| # c", ">", ">-", "|2"];
    const BLOCK_LINES: &[&str] = &["line one", "x: y", "# not a comment", "  indented", "é", ""];

    fn scalar() -> impl Strategy<Value = Gen> {
        select(SCALARS).prop_map(Gen::Scalar)
    }

    /// A document of those scalars, block scalars, sequences and mappings.
    pub(crate) fn node() -> impl Strategy<Value = Gen> {
        let block = (select(BLOCK_HEADERS), proptest::collection::vec(select(BLOCK_LINES), 1..4))
            .prop_map(|(header, lines)| Gen::Block(header, lines));
        let leaf = prop_oneof![8 => scalar(), 1 => block];
        leaf.prop_recursive(4, 32, 5, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Gen::Seq),
                proptest::collection::vec((select(KEYS), inner), 0..5).prop_map(Gen::Map),
            ]
        })
    }

    /// A document written, with the strings the reader decodes from it: those of its quoted
    /// scalars and keys with escapes (`decoded`), and how many in all with its literal blocks
    /// (`owned`); every other string of a tree read from it is a slice of the text.
    #[derive(Debug, Default)]
    pub(crate) struct Written {
        pub(crate) text: String,
        pub(crate) decoded: Vec<&'static str>,
        pub(crate) owned: usize,
    }

    /// Writes `root` (a mapping, or the value of a key `root`) in block form, the way tools
    /// and people write manifests: `noise`'s bits choose where comment lines and blank lines
    /// go, and which sequences sit at their key's indentation and which mappings start on
    /// their item's line (`- key: value`).
    pub(crate) fn write(root: &Gen, noise: u64) -> Written {
        let mut w = Writer { out: Written::default(), noise, at: 0 };
        match root {
            Gen::Map(entries) if !entries.is_empty() => w.entries(entries, 0, false),
            _ => w.entries(&[(("root", None), root.clone())], 0, false),
        }
        w.out
    }

    struct Writer {
        out: Written,
        noise: u64,
        at: u32,
    }

    impl Writer {
        fn bit(&mut self) -> bool {
            self.at = (self.at + 1) % 64;
            self.noise >> self.at & 1 == 1
        }

        fn pad(&mut self, indent: usize) {
            self.out.text.push_str(&" ".repeat(indent));
        }

        /// Now and then a comment or a blank line, before an entry or item at `indent`.
        fn noise(&mut self, indent: usize) {
            if self.bit() && self.bit() {
                if self.bit() {
                    self.pad(indent);
                    self.out.text.push_str("# note\n");
                } else {
                    self.out.text.push('\n');
                }
            }
        }

        fn scalar(&mut self, (written, decoded): Scalar) {
            self.out.text.push_str(written);
            if let Some(d) = decoded {
                self.out.decoded.push(d);
                self.out.owned += 1;
            }
        }

        /// Entries at `indent`, the first on the line already written (after `- `) if `inline`.
        fn entries(&mut self, entries: &[(Scalar, Gen)], indent: usize, inline: bool) {
            for (j, (key, value)) in entries.iter().enumerate() {
                if j > 0 || !inline {
                    self.noise(indent);
                    self.pad(indent);
                }
                self.scalar(*key);
                self.out.text.push(':');
                self.value(value, indent, true);
            }
        }

        /// A value after `key:` or `-` at `indent`.
        fn value(&mut self, value: &Gen, indent: usize, after_key: bool) {
            match value {
                Gen::Scalar(s) => {
                    if !s.0.is_empty() {
                        self.out.text.push(' ');
                    }
                    self.scalar(*s);
                    self.out.text.push('\n');
                }
                Gen::Block(header, lines) => {
                    self.out.text.push(' ');
                    self.out.text.push_str(header);
                    self.out.text.push('\n');
                    for line in lines {
                        if !line.is_empty() {
                            self.pad(indent + 2);
                        }
                        self.out.text.push_str(line);
                        self.out.text.push('\n');
                    }
                    self.out.owned += 1;
                }
                Gen::Seq(items) if items.is_empty() => self.out.text.push_str(" []\n"),
                Gen::Map(entries) if entries.is_empty() => self.out.text.push_str(" {}\n"),
                Gen::Seq(items) => {
                    self.out.text.push('\n');
                    let at = if after_key && self.bit() { indent } else { indent + 2 };
                    self.items(items, at);
                }
                Gen::Map(entries) => {
                    self.out.text.push('\n');
                    self.entries(entries, indent + 2, false);
                }
            }
        }

        fn items(&mut self, items: &[Gen], indent: usize) {
            for item in items {
                self.noise(indent);
                self.pad(indent);
                self.out.text.push('-');
                match item {
                    Gen::Map(entries) if !entries.is_empty() && self.bit() => {
                        self.out.text.push(' ');
                        self.entries(entries, indent + 2, true);
                    }
                    _ => self.value(item, indent, false),
                }
            }
        }
    }

    /// A Kubernetes object in block form, most often one that reads: its `apiVersion`, `kind`
    /// and `metadata` now and then missing, empty, not strings or quoted, a `List` with items
    /// now and then, and a body of any [`node`]s.
    pub(crate) fn manifest() -> impl Strategy<Value = Written> {
        // (Each a choice of its own; the most usual ones more often, by repeating them.)
        let (v1, apps, quoted) = (Some(("v1", None)), Some(("apps/v1", None)), Some(("\"v1\"", None)));
        let api = select(vec![v1, v1, apps, apps, quoted, Some(("''", None)), None]);
        let (config, deployment) = (Some(("ConfigMap", None)), Some(("'Deployment'", None)));
        let kind = select(vec![
            config,
            config,
            config,
            deployment,
            deployment,
            Some(("List", None)),
            Some(("PodList", None)),
            Some(("on", None)),
            None,
        ]);
        let (web, quoted, decoded) = (Some(("web", None)), Some(("\"web\"", None)), Some(("'it''s'", Some("it's"))));
        let name =
            select(vec![web, web, web, quoted, quoted, decoded, decoded, Some(("''", None)), Some(("7", None)), None]);
        let namespace = select(&[Some(("shop", None)), Some(("~", None)), None][..]);
        let items = proptest::collection::vec(select(&["a", "b", "a"][..]), 0..3);
        let body = proptest::collection::vec((select(KEYS), node()), 0..3);
        (api, kind, name, namespace, proptest::option::weighted(0.2, items), body, any::<u64>()).prop_map(
            |(api, kind, name, namespace, items, body, noise)| {
                let mut metadata = Vec::new();
                metadata.extend(name.map(|n| (("name", None), Gen::Scalar(n))));
                metadata.extend(namespace.map(|n| (("namespace", None), Gen::Scalar(n))));
                let mut entries = Vec::new();
                entries.extend(api.map(|a| (("apiVersion", None), Gen::Scalar(a))));
                entries.extend(kind.map(|k| (("kind", None), Gen::Scalar(k))));
                entries.push((("metadata", None), Gen::Map(metadata)));
                if let Some(items) = items {
                    let item = |name| {
                        Gen::Map(vec![
                            (("apiVersion", None), Gen::Scalar(("v1", None))),
                            (("kind", None), Gen::Scalar(("ConfigMap", None))),
                            (("metadata", None), Gen::Map(vec![(("name", None), Gen::Scalar((name, None)))])),
                        ])
                    };
                    entries.push((("items", None), Gen::Seq(items.into_iter().map(item).collect())));
                }
                entries.extend(body);
                write(&Gen::Map(entries), noise)
            },
        )
    }

    /// The bounds of a read: most often the default ones, now and then tight.
    fn bounds() -> impl Strategy<Value = (usize, usize)> {
        (prop_oneof![4 => Just(100usize), 1 => 0usize..8], prop_oneof![4 => Just(1_000_000usize), 1 => 0usize..60])
    }

    /// The strings of a tree copied rather than borrowed from `text`.
    fn owned_strings(text: &str, tree: &drift_model::tree::Tree<'_>) -> Vec<String> {
        crate::json_tree::tests::strings(text, tree)
            .into_iter()
            .filter(|(_, borrowed)| !borrowed)
            .map(|(s, _)| s)
            .collect()
    }

    /// The tree of `text` is read where its `Value` is, and reads back as it; the `Value` is
    /// what the events reader reads; and the tree copies only the strings the reader decoded.
    fn tree_reads_as_value(written: &Written, (depth, nodes): (usize, usize)) -> Result<bool, TestCaseError> {
        let text = &written.text;
        let value = read(text, depth, nodes);
        let tree = read_tree(text, depth, nodes);
        prop_assert_eq!(value.is_some(), tree.is_some(), "{}", text);
        let (Some(value), Some(tree)) = (value, tree) else { return Ok(false) };
        prop_assert_eq!(&tree.to_value(), &value, "{}", text);
        // (Within the default bounds: at a tight one the events reader counts an empty `[]` or
        // `{}` as a level deeper, where the line reader, as the JSON reader, counts a value.)
        let bounds = crate::yaml::Bounds { max_depth: 100, max_nodes: 1_000_000, max_aliases: 1 };
        if (depth, nodes) == (100, 1_000_000) {
            prop_assert_eq!(crate::yaml::read(text, bounds).map(|r| r.value), Ok(value), "{}", text);
        }
        let mut owned = owned_strings(text, &tree);
        prop_assert_eq!(owned.len(), written.owned, "{:?} copied from {}", owned, text);
        for decoded in &written.decoded {
            let at = owned.iter().position(|s| s == decoded);
            prop_assert!(at.is_some(), "{:?} not among {:?} copied from {}", decoded, owned, text);
            owned.swap_remove(at.unwrap_or_default());
        }
        Ok(true)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// Whatever the document, the two builds of the one reader read it or give it up
        /// together, into the same document, within the same bounds.
        #[test]
        fn a_tree_is_read_where_a_value_is_and_reads_back_as_it(n in node(), noise in any::<u64>(), bounds in bounds()) {
            tree_reads_as_value(&write(&n, noise), bounds)?;
        }

        /// And so for manifests.
        #[test]
        fn a_manifest_tree_is_read_where_its_value_is(written in manifest(), bounds in bounds()) {
            tree_reads_as_value(&written, bounds)?;
        }
    }

    /// The generated documents take the line reader often enough, and leave it often enough,
    /// for the properties above to say something of both.
    #[test]
    fn the_generators_make_documents_read_and_refused() {
        use proptest::strategy::ValueTree;
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let (mut read_docs, mut read_manifests, mut copied) = (0, 0, 0);
        for _ in 0..1000 {
            let noise = any::<u64>().new_tree(&mut runner).unwrap().current();
            let doc = write(&node().new_tree(&mut runner).unwrap().current(), noise);
            let manifest = manifest().new_tree(&mut runner).unwrap().current();
            read_docs += usize::from(read(&doc.text, 100, 1_000_000).is_some());
            if let Some(tree) = read_tree(&manifest.text, 100, 1_000_000) {
                read_manifests += 1;
                copied += usize::from(!owned_strings(&manifest.text, &tree).is_empty());
            }
        }
        assert!((250..900).contains(&read_docs), "{read_docs} of 1000 documents read");
        assert!((250..900).contains(&read_manifests), "{read_manifests} of 1000 manifests read");
        assert!(copied >= 50, "{copied} of the manifests read copied a string");
    }

    /// Only the strings the reader decodes are copied: keys and plain scalars, and quoted ones
    /// without an escape, are slices of the text; what it types (numbers, booleans, null) is
    /// typed as the `Value` build types it.
    #[test]
    fn a_tree_borrows_its_keys_and_strings_from_the_text_unless_they_are_decoded() {
        let text = r#"# a comment
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web # the name
  labels: {}
  annotations:
    "quoted": "a \"quoted\" word"
    'single': 'it''s'
    plain: 'text'
    "k\u0065y": "caf\u00e9"
spec:
  replicas: 3
  paused: false
  minReadySeconds: ~
  ports:
  - name: http
    containerPort: -8080
  - []
  script: |
    echo one
    echo two
"#;
        let tree = read_tree(text, 100, 1_000_000).expect("read");
        assert_eq!(Some(tree.to_value()), read(text, 100, 1_000_000));
        let mut owned = owned_strings(text, &tree);
        owned.sort();
        assert_eq!(owned, ["a \"quoted\" word", "café", "echo one\necho two\n", "it's", "key"]);
        let value = tree.to_value();
        assert_eq!(value["spec"]["replicas"], 3);
        assert_eq!(value["spec"]["paused"], false);
        assert!(value["spec"]["minReadySeconds"].is_null());
        assert_eq!(value["spec"]["ports"][0]["containerPort"], -8080);
        assert_eq!(value["metadata"]["annotations"]["plain"], "text");
        // A key given twice is the events reader's, with a note, for both builds.
        for twice in ["a: 1\na: 2\n", "b: 1\na: 2\n'b': 3\n", "m:\n  x: 1\n  \"x\": 2\n"] {
            assert!(read(twice, 100, 1_000_000).is_none() && read_tree(twice, 100, 1_000_000).is_none(), "{twice}");
        }
        // Sibling mappings' keys, or a nested mapping's, are no key given twice.
        let apart = "a:\n  x: 1\nb:\n  x: 2\nx:\n  a: 1\n";
        assert!(read(apart, 100, 1_000_000).is_some());
        assert_eq!(read_tree(apart, 100, 1_000_000).map(|t| t.to_value()), read(apart, 100, 1_000_000));
    }
}
