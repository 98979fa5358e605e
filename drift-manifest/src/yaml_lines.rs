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

use serde_json::{Map, Value};

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
    let mut r = Reader { lines, pos: 0, nodes: 0, max_depth, max_nodes };
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
    Some(value)
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

struct Reader<'a> {
    lines: Vec<Line<'a>>,
    pos: usize,
    nodes: usize,
    max_depth: usize,
    max_nodes: usize,
}

/// Whether a line's body starts a sequence item.
fn is_item(body: &str) -> bool {
    body == "-" || body.starts_with("- ")
}

impl<'a> Reader<'a> {
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
    fn map(&mut self, indent: usize, depth: usize) -> Option<Value> {
        self.open(depth)?;
        let mut map = Map::new();
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
            // (One search of the map for the key: a key given twice is refused.)
            let serde_json::map::Entry::Vacant(slot) = map.entry(key) else {
                return None;
            };
            self.pos = i + 1;
            slot.insert(self.value(rest, indent, depth + 1)?);
        }
        Some(Value::Object(map))
    }

    /// A block sequence whose items sit at `indent`, the first at the current line.
    fn seq(&mut self, indent: usize, depth: usize) -> Option<Value> {
        self.open(depth)?;
        let mut items = Vec::new();
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
            if content.is_empty() || content.starts_with('#') {
                self.pos = i + 1;
                items.push(self.nested(indent, depth + 1, false)?);
            } else if content.starts_with('|') || content.starts_with('>') {
                return None;
            } else if let Some((_, _)) = split_key(content) {
                // `- key: value`: a mapping whose entries sit at the key's column.
                self.lines[i] = Line { indent: column, body: content, raw: line.raw };
                items.push(self.map(column, depth + 1)?);
            } else {
                self.pos = i + 1;
                self.count()?;
                items.push(scalar(content)?);
            }
        }
        Some(Value::Array(items))
    }

    /// The value after `key:` (the rest of the line), for an entry at `indent`.
    fn value(&mut self, rest: &'a str, indent: usize, depth: usize) -> Option<Value> {
        if rest.is_empty() || rest.starts_with('#') {
            return self.nested(indent, depth, true);
        }
        if rest.starts_with('|') || rest.starts_with('>') {
            return self.literal(rest, indent);
        }
        self.count()?;
        scalar(rest)
    }

    /// The node on the lines after a `key:` or `-` with nothing after it: a block collection
    /// indented deeper (or, after a key, a sequence at the key's indentation), else null.
    fn nested(&mut self, indent: usize, depth: usize, after_key: bool) -> Option<Value> {
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
                Some(Value::Null)
            }
        }
    }

    /// A literal block scalar (`|`, `|-`, `|+`) after a key at `indent`.
    fn literal(&mut self, header: &str, indent: usize) -> Option<Value> {
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
        Some(Value::String(text))
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

/// `key: rest` with the key a plain or quoted string, `rest` trimmed (empty when the value is on
/// the following lines).
fn split_key(body: &str) -> Option<(String, &str)> {
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
            match crate::yaml::plain(&body[..end])? {
                Value::String(k) => (k, &body[colon..]),
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

/// A one-line scalar (the rest of a line), with an optional comment after it.
fn scalar(text: &str) -> Option<Value> {
    let (value, after) = match text.as_bytes().first()? {
        b'"' => {
            let (s, after) = double_quoted(text)?;
            (Value::String(s), after)
        }
        b'\'' => {
            let (s, after) = single_quoted(text)?;
            (Value::String(s), after)
        }
        b'[' | b'{' => {
            let (v, after) = match text.get(..2)? {
                "[]" => (Value::Array(Vec::new()), &text[2..]),
                "{}" => (Value::Object(Map::new()), &text[2..]),
                _ => return None,
            };
            (v, after)
        }
        // `-x` is a plain scalar; `- x` would be a sequence.
        b'-' if text.len() > 1 && text.as_bytes()[1] != b' ' => return plain_value(text),
        c if is_indicator(*c) => return None,
        _ => return plain_value(text),
    };
    // Nothing after it but a comment, which needs a space before its `#`.
    let trimmed = after.trim_start_matches(' ');
    (after.is_empty() || (trimmed.len() < after.len() && (trimmed.is_empty() || trimmed.starts_with('#'))))
        .then_some(value)
}

/// A plain scalar on one line, up to a comment.
fn plain_value(text: &str) -> Option<Value> {
    let text = text.split_once(" #").map_or(text, |(v, _)| v).trim_end_matches(' ');
    if text.contains(": ") || text.ends_with(':') {
        return None;
    }
    crate::yaml::plain(text)
}

/// A double-quoted scalar at the start of `s` and the rest after it; `None` for an escape
/// outside JSON's or a string that does not close.
fn double_quoted(s: &str) -> Option<(String, &str)> {
    let body = s.strip_prefix('"')?;
    // The runs between escapes are copied whole (`"` and `\\` are ASCII, so the cuts fall on
    // character boundaries); a string without escapes is one copy of the right size.
    let special = |r: &str| r.bytes().position(|b| b == b'"' || b == b'\\');
    let first = special(body)?;
    if body.as_bytes()[first] == b'"' {
        return Some((body[..first].to_owned(), &body[first + 1..]));
    }
    let mut out = String::with_capacity(first + 16);
    let mut rest = body;
    loop {
        let stop = special(rest)?;
        out.push_str(&rest[..stop]);
        if rest.as_bytes()[stop] == b'"' {
            return Some((out, &rest[stop + 1..]));
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

/// A single-quoted scalar at the start of `s` and the rest after it.
fn single_quoted(s: &str) -> Option<(String, &str)> {
    let body = s.strip_prefix('\'')?;
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
            None => return Some((out, rest)),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

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
}
