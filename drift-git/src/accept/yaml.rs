//! A byte-preserving YAML editor: a small span-aware scanner for the block/flow subset that
//! real manifests use, and edits (set a value, insert a key or list item, remove one) that
//! rewrite only the bytes of the value concerned.
//!
//! The scanner understands block mappings and sequences, one-line flow mappings and
//! sequences, plain, single- and double-quoted one-line scalars, literal and folded block
//! scalars, comments, `---` documents and CRLF line ends. It refuses anchors, aliases, tags,
//! complex keys and scalars or flow collections that span lines: nothing is written then.
//! Every edit is checked by parsing the result (serde-saphyr) and comparing it with the
//! original document with exactly the requested change applied.

use std::ops::Range;

use drift_model::path::Seg;
use serde_json::Value;

use super::value;

/// How a scalar is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    Plain,
    Single,
    Double,
    /// A block scalar (`|` or `>`).
    Literal,
    /// Nothing after the colon or dash (null).
    Empty,
}

#[derive(Debug)]
enum Kind {
    Map(Vec<Entry>),
    Seq(Vec<Item>),
    Scalar(Style),
}

/// A value with its bytes.
#[derive(Debug)]
struct Node {
    kind: Kind,
    /// The value's own text (for a block collection: from its first key or dash to the end
    /// of its last content line, without the line end).
    span: Range<usize>,
    /// Written in flow style (`{...}`, `[...]`) or inside a flow collection.
    flow: bool,
    /// Column of the keys or dashes of a block collection.
    indent: usize,
}

#[derive(Debug)]
struct Entry {
    key: String,
    /// Start of the key.
    key_start: usize,
    /// Start of the key's line when only indentation precedes the key (block), else None.
    line_start: Option<usize>,
    /// Just after the `:`.
    colon_end: usize,
    value: Node,
    /// Block: start of the line after the entry. Flow: end of the value.
    end: usize,
}

#[derive(Debug)]
struct Item {
    /// Start of the dash (block) or of the item (flow).
    start: usize,
    line_start: Option<usize>,
    /// Just after the dash (block) or the item's start (flow).
    dash_end: usize,
    value: Node,
    end: usize,
}

#[derive(Debug, Clone, Copy)]
struct Line {
    start: usize,
    /// End of the content (before `\r\n` or `\n`).
    end: usize,
    /// Start of the next line.
    next: usize,
}

/// The requested change of one value.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Change<'a> {
    /// Set (or create) the value.
    Set(&'a Value),
    /// Remove the key or list item.
    Remove,
}

struct Scanner<'t> {
    text: &'t str,
    lines: Vec<Line>,
}

type R<T> = Result<T, String>;

fn indent_of(s: &str) -> usize {
    s.len() - s.trim_start_matches(' ').len()
}

/// Whether a line holds nothing but spaces and maybe a comment.
fn insignificant(s: &str) -> bool {
    let t = s.trim_start_matches([' ', '\t']);
    t.is_empty() || t.starts_with('#')
}

impl<'t> Scanner<'t> {
    fn new(text: &'t str, range: Range<usize>) -> Self {
        let mut lines = Vec::new();
        let mut pos = range.start;
        while pos < range.end {
            let nl = text[pos..range.end].find('\n').map_or(range.end, |i| pos + i);
            let next = if nl < range.end { nl + 1 } else { range.end };
            let end = if nl > pos && text.as_bytes()[nl - 1] == b'\r' { nl - 1 } else { nl };
            lines.push(Line { start: pos, end, next });
            pos = next;
        }
        Scanner { text, lines }
    }

    fn line_text(&self, li: usize) -> &'t str {
        let l = self.lines[li];
        &self.text[l.start..l.end]
    }

    fn significant_from(&self, mut li: usize) -> Option<usize> {
        while li < self.lines.len() {
            if !insignificant(self.line_text(li)) {
                return Some(li);
            }
            li += 1;
        }
        None
    }

    fn err(&self, at: usize, what: &str) -> String {
        let line = self.text[..at].matches('\n').count() + 1;
        format!("line {line}: {what}")
    }

    /// Parses a whole JSON text.
    fn json_root(&self) -> R<Node> {
        let end = self.lines.last().map_or(0, |l| l.next);
        let start = self.text[..end].len() - self.text[..end].trim_start().len();
        let mut p = FlowParser { s: &self.text[..end], pos: start, scanner: self, json: true };
        let node = p.value()?;
        if !self.text[p.pos..end].trim().is_empty() {
            return Err(self.err(p.pos, "unexpected text after the JSON value"));
        }
        Ok(node)
    }

    /// Parses the document's root node.
    fn root(&self) -> R<Node> {
        let li = self.significant_from(0).ok_or_else(|| "the document is empty".to_owned())?;
        let line = self.line_text(li);
        if line.starts_with("%") {
            return Err(self.err(self.lines[li].start, "YAML directives are not supported"));
        }
        let (node, next) = self.block_node(li, indent_of(line))?;
        if let Some(extra) = self.significant_from(next) {
            return Err(self.err(self.lines[extra].start, "unexpected content after the document's root value"));
        }
        Ok(node)
    }

    /// A block node whose content starts on line `li` at column `col`; returns the node and
    /// the index of the first line after it.
    fn block_node(&self, li: usize, col: usize) -> R<(Node, usize)> {
        let line = self.line_text(li);
        if line[..col.min(line.len())].contains('\t') {
            return Err(self.err(self.lines[li].start, "tabs in indentation are not supported"));
        }
        let rest = &line[col..];
        if rest == "-" || rest.starts_with("- ") || rest.starts_with("-\t") || rest.starts_with("-#") {
            return self.block_seq(li, col);
        }
        if self.key_at(li, col)?.is_some() {
            return self.block_map(li, col);
        }
        // A lone scalar or flow value on its own line.
        let start = self.lines[li].start + col;
        let (node, _) = self.inline_value(start, self.lines[li].end, col.saturating_sub(1), li)?;
        let next = self.after_inline(li, col.saturating_sub(1), &node)?;
        Ok((node, next))
    }

    /// The key at line `li`, column `col`: (key text, key start, offset just after the colon).
    fn key_at(&self, li: usize, col: usize) -> R<Option<(String, usize, usize)>> {
        let l = self.lines[li];
        let start = l.start + col;
        let s = &self.text[start..l.end];
        if s.starts_with("? ") || s == "?" {
            return Err(self.err(start, "complex mapping keys (`?`) are not supported"));
        }
        let (key, after) = if s.starts_with('"') || s.starts_with('\'') {
            let Some(len) = quoted_len(s) else { return Ok(None) };
            (unquote(&s[..len]).ok_or_else(|| self.err(start, "invalid quoted key"))?, len)
        } else {
            if s.starts_with(['&', '*', '!']) {
                return Err(self.err(start, "anchors, aliases and tags are not supported"));
            }
            let Some(colon) = find_plain_colon(s) else { return Ok(None) };
            let key = s[..colon].trim_end();
            if key.is_empty() || key.starts_with(['{', '[', '#', '|', '>']) {
                return Ok(None);
            }
            (key.to_owned(), colon)
        };
        let after_key = &s[after..];
        let trimmed = after_key.trim_start_matches(' ');
        if !trimmed.starts_with(':') {
            return Ok(None);
        }
        let colon = after + (after_key.len() - trimmed.len());
        let tail = &s[colon + 1..];
        if !(tail.is_empty() || tail.starts_with([' ', '\t'])) {
            return Ok(None);
        }
        Ok(Some((key, start, start + colon + 1)))
    }

    fn block_map(&self, first: usize, col: usize) -> R<(Node, usize)> {
        let mut entries: Vec<Entry> = Vec::new();
        let mut li = first;
        loop {
            let Some((key, key_start, colon_end)) = self.key_at(li, col)? else {
                return Err(self.err(self.lines[li].start + col, "expected a `key:` line"));
            };
            if entries.iter().any(|e| e.key == key) {
                return Err(self.err(key_start, &format!("the key `{key}` appears twice")));
            }
            let line_start =
                (li != first || self.line_text(li)[..col].trim().is_empty()).then_some(self.lines[li].start);
            let (value, next) = self.value_after(li, colon_end, col)?;
            let end = self.next_line_start(value.span.end.max(colon_end));
            entries.push(Entry { key, key_start, line_start, colon_end, value, end });
            let Some(n) = self.significant_from(next) else { break };
            let ind = indent_of(self.line_text(n));
            if ind < col {
                break;
            }
            if ind > col {
                return Err(self.err(self.lines[n].start, "unexpected indentation"));
            }
            let rest = &self.line_text(n)[ind..];
            if rest == "-" || rest.starts_with("- ") {
                break;
            }
            li = n;
        }
        let span = entries[0].key_start..entries.last().map_or(0, |e| e.value.span.end.max(e.colon_end));
        let next = self.line_after(span.end);
        Ok((Node { kind: Kind::Map(entries), span, flow: false, indent: col }, next))
    }

    fn block_seq(&self, first: usize, col: usize) -> R<(Node, usize)> {
        let mut items = Vec::new();
        let mut li = first;
        loop {
            let l = self.lines[li];
            let start = l.start + col;
            let dash_end = start + 1;
            let line_start = (li != first || self.line_text(li)[..col].trim().is_empty()).then_some(l.start);
            let after = &self.text[dash_end..l.end];
            let (value, next) = if insignificant(after) {
                self.nested_or_empty(li, dash_end, col, false)?
            } else {
                let c = col + 1 + indent_of(after);
                if after.starts_with('\t') {
                    return Err(self.err(dash_end, "tabs after a dash are not supported"));
                }
                self.block_node(li, c)?
            };
            let end = self.next_line_start(value.span.end.max(dash_end));
            items.push(Item { start, line_start, dash_end, value, end });
            let Some(n) = self.significant_from(next) else { break };
            let ind = indent_of(self.line_text(n));
            let rest = &self.line_text(n)[ind..];
            if ind != col || !(rest == "-" || rest.starts_with("- ")) {
                if ind > col {
                    return Err(self.err(self.lines[n].start, "unexpected indentation"));
                }
                break;
            }
            li = n;
        }
        let last = items.last().map_or(0, |i| i.value.span.end.max(i.dash_end));
        let span = items[0].start..last;
        let next = self.line_after(span.end);
        Ok((Node { kind: Kind::Seq(items), span, flow: false, indent: col }, next))
    }

    /// The index of the first line starting after offset `at`.
    fn line_after(&self, at: usize) -> usize {
        self.lines.iter().position(|l| l.start > at).unwrap_or(self.lines.len())
    }

    /// The start of the line after the one holding offset `at`.
    fn next_line_start(&self, at: usize) -> usize {
        let i = self.line_after(at);
        if i == 0 { 0 } else { self.lines[i - 1].next }
    }

    /// A nested block value on the following lines, or an empty (null) value.
    fn nested_or_empty(&self, li: usize, at: usize, parent_col: usize, in_map: bool) -> R<(Node, usize)> {
        if let Some(n) = self.significant_from(li + 1) {
            let ind = indent_of(self.line_text(n));
            let rest = &self.line_text(n)[ind..];
            let is_dash = rest == "-" || rest.starts_with("- ");
            if ind > parent_col || (in_map && ind == parent_col && is_dash) {
                return self.block_node(n, ind);
            }
        }
        Ok((Node { kind: Kind::Scalar(Style::Empty), span: at..at, flow: false, indent: parent_col }, li + 1))
    }

    /// The value of a block mapping entry whose colon ends at `colon_end` on line `li`.
    fn value_after(&self, li: usize, colon_end: usize, col: usize) -> R<(Node, usize)> {
        let l = self.lines[li];
        let after = &self.text[colon_end..l.end];
        if insignificant(after) {
            return self.nested_or_empty(li, colon_end, col, true);
        }
        let start = colon_end + indent_of(after);
        if self.text[colon_end..start].contains('\t') || after.starts_with('\t') {
            return Err(self.err(colon_end, "tabs after a colon are not supported"));
        }
        let (node, _) = self.inline_value(start, l.end, col, li)?;
        let next = self.after_inline(li, col, &node)?;
        Ok((node, next))
    }

    /// Checks that nothing continues an inline value on the next lines; returns the next line.
    fn after_inline(&self, li: usize, col: usize, node: &Node) -> R<usize> {
        if matches!(node.kind, Kind::Scalar(Style::Literal)) {
            return Ok(self.line_after(node.span.end));
        }
        if let Some(n) = self.significant_from(li + 1)
            && indent_of(self.line_text(n)) > col
        {
            return Err(self.err(self.lines[n].start, "values that span lines are not supported"));
        }
        Ok(li + 1)
    }

    /// A value that starts at `start` on the line ending at `end`: a scalar, a block scalar
    /// header, or a one-line flow collection.
    fn inline_value(&self, start: usize, end: usize, col: usize, li: usize) -> R<(Node, usize)> {
        let s = &self.text[start..end];
        match s.as_bytes().first() {
            Some(b'&' | b'*' | b'!') => Err(self.err(start, "anchors, aliases and tags are not supported")),
            Some(b'{' | b'[') => {
                let (node, used) = self.flow(start, end)?;
                if !insignificant(&self.text[start + used..end]) {
                    return Err(self.err(start + used, "unexpected text after a flow collection"));
                }
                Ok((node, start + used))
            }
            Some(b'|' | b'>') => self.block_scalar(start, end, col, li),
            Some(b'"' | b'\'') => {
                let len =
                    quoted_len(s).ok_or_else(|| self.err(start, "quoted values that span lines are not supported"))?;
                if !insignificant(&s[len..]) {
                    return Err(self.err(start + len, "unexpected text after a quoted value"));
                }
                let style = if s.starts_with('"') { Style::Double } else { Style::Single };
                Ok((
                    Node { kind: Kind::Scalar(style), span: start..start + len, flow: false, indent: col },
                    start + len,
                ))
            }
            _ => {
                let len = s.find(" #").unwrap_or(s.len());
                let v = s[..len].trim_end_matches([' ', '\t']);
                Ok((
                    Node { kind: Kind::Scalar(Style::Plain), span: start..start + v.len(), flow: false, indent: col },
                    start + v.len(),
                ))
            }
        }
    }

    fn block_scalar(&self, start: usize, end: usize, col: usize, li: usize) -> R<(Node, usize)> {
        let header = &self.text[start..end];
        let h = header.find(" #").map_or(header, |i| &header[..i]).trim_end();
        // Folded (`>`) scalars are read like literal ones; a replacement is written as `|`.
        if h.len() > 3 || h[1..].chars().any(|c| !matches!(c, '-' | '+' | '1'..='9')) {
            return Err(self.err(start, "unsupported block scalar header"));
        }
        let mut last = end;
        let mut n = li + 1;
        while n < self.lines.len() {
            let t = self.line_text(n);
            if t.trim().is_empty() {
                n += 1;
                continue;
            }
            if indent_of(t) <= col {
                break;
            }
            last = self.lines[n].end;
            n += 1;
        }
        Ok((Node { kind: Kind::Scalar(Style::Literal), span: start..last, flow: false, indent: col }, last))
    }

    /// A one-line flow collection at `start`; returns it and its length.
    fn flow(&self, start: usize, end: usize) -> R<(Node, usize)> {
        let mut p = FlowParser { s: &self.text[..end], pos: start, scanner: self, json: false };
        let node = p.value()?;
        Ok((node, p.pos - start))
    }
}

struct FlowParser<'a, 't> {
    s: &'a str,
    pos: usize,
    scanner: &'a Scanner<'t>,
    /// JSON text: whitespace includes line ends.
    json: bool,
}

impl FlowParser<'_, '_> {
    fn ws(&mut self) {
        while let Some(&c) = self.s.as_bytes().get(self.pos) {
            if c == b' ' || (self.json && matches!(c, b'\n' | b'\r' | b'\t')) {
                self.pos += 1;
            } else {
                break;
            }
        }
    }
    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.pos).copied()
    }
    fn fail(&self, what: &str) -> String {
        if self.pos >= self.s.len() {
            return self.scanner.err(self.pos.min(self.s.len()), "flow collections that span lines are not supported");
        }
        self.scanner.err(self.pos, what)
    }
    fn value(&mut self) -> R<Node> {
        self.ws();
        let start = self.pos;
        match self.peek() {
            Some(b'{') => {
                self.pos += 1;
                let mut entries = Vec::new();
                loop {
                    self.ws();
                    if self.peek() == Some(b'}') {
                        self.pos += 1;
                        break;
                    }
                    let key_start = self.pos;
                    let key = self.scalar_text(true)?;
                    self.ws();
                    if self.peek() != Some(b':') {
                        return Err(self.fail("expected `:` in a flow mapping"));
                    }
                    self.pos += 1;
                    let colon_end = self.pos;
                    let value = self.value()?;
                    entries.push(Entry { key, key_start, line_start: None, colon_end, end: value.span.end, value });
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b'}') => {}
                        _ => return Err(self.fail("expected `,` or `}`")),
                    }
                }
                Ok(Node { kind: Kind::Map(entries), span: start..self.pos, flow: true, indent: 0 })
            }
            Some(b'[') => {
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    self.ws();
                    if self.peek() == Some(b']') {
                        self.pos += 1;
                        break;
                    }
                    let s = self.pos;
                    let value = self.value()?;
                    items.push(Item { start: s, line_start: None, dash_end: s, end: value.span.end, value });
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b']') => {}
                        _ => return Err(self.fail("expected `,` or `]`")),
                    }
                }
                Ok(Node { kind: Kind::Seq(items), span: start..self.pos, flow: true, indent: 0 })
            }
            Some(b'&' | b'*' | b'!') => Err(self.fail("anchors, aliases and tags are not supported")),
            Some(b'"' | b'\'') => {
                let len = quoted_len(&self.s[self.pos..]).ok_or_else(|| self.fail("unterminated quoted value"))?;
                let style = if self.peek() == Some(b'"') { Style::Double } else { Style::Single };
                self.pos += len;
                Ok(Node { kind: Kind::Scalar(style), span: start..self.pos, flow: true, indent: 0 })
            }
            None => Err(self.fail("unexpected end of line")),
            _ => {
                self.plain(false)?;
                Ok(Node { kind: Kind::Scalar(Style::Plain), span: start..self.pos, flow: true, indent: 0 })
            }
        }
    }
    /// A plain scalar in flow context (a key stops at `:`).
    fn plain(&mut self, key: bool) -> R<()> {
        let start = self.pos;
        let b = self.s.as_bytes();
        while self.pos < b.len() {
            let c = b[self.pos];
            if matches!(c, b',' | b'}' | b']') || c == b'#' && self.pos > start && b[self.pos - 1] == b' ' {
                break;
            }
            if c == b':' && (key || matches!(b.get(self.pos + 1), Some(b' ' | b',' | b'}' | b']') | None)) {
                break;
            }
            if matches!(c, b'{' | b'[') {
                return Err(self.fail("unexpected bracket in a flow scalar"));
            }
            self.pos += 1;
        }
        while self.pos > start && b[self.pos - 1] == b' ' {
            self.pos -= 1;
        }
        if self.pos == start {
            return Err(self.fail("empty value in a flow collection"));
        }
        Ok(())
    }
    fn scalar_text(&mut self, key: bool) -> R<String> {
        match self.peek() {
            Some(b'"' | b'\'') => {
                let len = quoted_len(&self.s[self.pos..]).ok_or_else(|| self.fail("unterminated quoted key"))?;
                let t = unquote(&self.s[self.pos..self.pos + len]).ok_or_else(|| self.fail("invalid quoted key"))?;
                self.pos += len;
                Ok(t)
            }
            Some(b'&' | b'*' | b'!' | b'{' | b'[' | b'?') => Err(self.fail("unsupported flow key")),
            _ => {
                let start = self.pos;
                self.plain(key)?;
                Ok(self.s[start..self.pos].to_owned())
            }
        }
    }
}

/// The length of a quoted scalar at the start of `s` (quotes included), if it ends on this line.
fn quoted_len(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let q = *b.first()?;
    let mut i = 1;
    while i < b.len() {
        if q == b'"' && b[i] == b'\\' {
            i += 2;
            continue;
        }
        if b[i] == q {
            if q == b'\'' && b.get(i + 1) == Some(&b'\'') {
                i += 2;
                continue;
            }
            return Some(i + 1);
        }
        i += 1;
    }
    None
}

fn unquote(s: &str) -> Option<String> {
    if s.starts_with('\'') {
        Some(s[1..s.len() - 1].replace("''", "'"))
    } else {
        serde_saphyr::from_str::<String>(s).ok()
    }
}

/// The colon that ends a plain block key (`: ` or a colon at the end of the line).
fn find_plain_colon(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    for i in 0..b.len() {
        if b[i] == b'#' && i > 0 && b[i - 1] == b' ' {
            return None;
        }
        if b[i] == b':' && (i + 1 == b.len() || b[i + 1] == b' ' || b[i + 1] == b'\t') {
            return Some(i);
        }
    }
    None
}

// ---------------------------------------------------------------------------------------
// Writing values.

/// Whether `s` reads back as the same string when written plain.
fn plain_ok(s: &str, flow: bool) -> bool {
    if s.is_empty() || s != s.trim() || s.contains(['\n', '\r', '\t']) || s.contains(" #") || s.contains(": ") {
        return false;
    }
    if s.ends_with(':')
        || s.starts_with([
            '-', '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`',
        ])
    {
        return false;
    }
    if flow && s.contains([',', '[', ']', '{', '}']) {
        return false;
    }
    if s.chars().any(char::is_control) {
        return false;
    }
    let lower = s.to_ascii_lowercase();
    if ["y", "n", "yes", "no", "on", "off", "true", "false", "null", "~", "=", "<<"].contains(&lower.as_str()) {
        return false;
    }
    if s.starts_with(|c: char| c.is_ascii_digit() || c == '+' || c == '.')
        && s.chars().all(|c| c.is_ascii_hexdigit() || "xXoO_.+-:".contains(c))
    {
        return false;
    }
    matches!(serde_saphyr::from_str::<Value>(&format!("k: {s}\n")), Ok(Value::Object(m)) if m.get("k") == Some(&Value::String(s.to_owned())))
}

fn double(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{}\"", s.escape_default()))
}

/// Whether a string can be written as a literal block scalar with a plain `|` / `|-` header.
fn literal_ok(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with([' ', '\n'])
        && !s.ends_with("\n\n")
        && !s.contains('\r')
        && !s.chars().any(|c| c.is_control() && c != '\n')
        && s.lines().all(|l| !l.starts_with('\t'))
}

fn literal(s: &str, indent: usize) -> String {
    let header = if s.ends_with('\n') { "|" } else { "|-" };
    let pad = " ".repeat(indent);
    let mut out = header.to_owned();
    for line in s.strip_suffix('\n').unwrap_or(s).split('\n') {
        out.push('\n');
        if !line.is_empty() {
            out.push_str(&pad);
            out.push_str(line);
        }
    }
    out
}

/// A scalar written in `style` when its value allows it; `indent` is the column of block
/// scalar content.
fn scalar(v: &Value, style: Style, flow: bool, indent: usize) -> String {
    let s = match v {
        Value::String(s) => s,
        Value::Null => return "null".into(),
        other => return other.to_string(),
    };
    match style {
        Style::Plain | Style::Empty if plain_ok(s, flow) => s.clone(),
        Style::Single if !s.contains(['\n', '\r']) && !s.chars().any(char::is_control) => {
            format!("'{}'", s.replace('\'', "''"))
        }
        Style::Literal if !flow && literal_ok(s) => literal(s, indent),
        _ if !flow && s.contains('\n') && literal_ok(s) => literal(s, indent),
        _ => double(s),
    }
}

/// A mapping key.
fn key_text(k: &str) -> String {
    if plain_ok(k, true) { k.to_owned() } else { double(k) }
}

/// A value in flow style (JSON-like, plain scalars where safe).
fn flow_text(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let parts: Vec<String> = m.iter().map(|(k, v)| format!("{}: {}", key_text(k), flow_text(v))).collect();
            format!("{{{}}}", parts.join(", "))
        }
        Value::Array(a) => format!("[{}]", a.iter().map(flow_text).collect::<Vec<_>>().join(", ")),
        other => scalar(other, Style::Plain, true, 0),
    }
}

fn is_empty_collection(v: &Value) -> bool {
    matches!(v, Value::Object(m) if m.is_empty()) || matches!(v, Value::Array(a) if a.is_empty())
}

/// The text after `key:` for a value whose key is at column `col`: ` scalar`, ` {}` or a
/// block on the next lines.
fn after_key(v: &Value, col: usize) -> String {
    match v {
        Value::Object(_) | Value::Array(_) if !is_empty_collection(v) => format!("\n{}", block(v, col + 2)),
        Value::Object(_) | Value::Array(_) => format!(" {}", flow_text(v)),
        other => format!(" {}", scalar(other, Style::Plain, false, col + 2)),
    }
}

/// The text after a dash at column `col`.
fn after_dash(v: &Value, col: usize) -> String {
    match v {
        Value::Object(_) | Value::Array(_) if !is_empty_collection(v) => {
            format!(" {}", &block(v, col + 2)[col + 2..])
        }
        Value::Object(_) | Value::Array(_) => format!(" {}", flow_text(v)),
        other => format!(" {}", scalar(other, Style::Plain, false, col + 2)),
    }
}

/// The keys of a new mapping in the order manifests are usually written: identity first.
fn ordered(m: &serde_json::Map<String, Value>) -> impl Iterator<Item = (&String, &Value)> {
    const FIRST: [&str; 5] = ["apiVersion", "kind", "metadata", "name", "namespace"];
    let rank = |k: &str| FIRST.iter().position(|f| *f == k).unwrap_or(FIRST.len());
    let mut entries: Vec<(&String, &Value)> = m.iter().collect();
    entries.sort_by_key(|(k, _)| rank(k));
    entries.into_iter()
}

/// A non-empty mapping or list in block style, every line indented to `col`, no final line end.
fn block(v: &Value, col: usize) -> String {
    let pad = " ".repeat(col);
    let lines: Vec<String> = match v {
        Value::Object(m) => ordered(m).map(|(k, v)| format!("{pad}{}:{}", key_text(k), after_key(v, col))).collect(),
        Value::Array(a) => a.iter().map(|v| format!("{pad}-{}", after_dash(v, col))).collect(),
        other => vec![format!("{pad}{}", scalar(other, Style::Plain, false, col))],
    };
    lines.join("\n")
}

/// A value written as a new block-style YAML document (no final line end).
pub(crate) fn to_block(v: &Value) -> String {
    match v {
        Value::Object(m) if !m.is_empty() => block(v, 0),
        Value::Array(a) if !a.is_empty() => block(v, 0),
        other => flow_text(other),
    }
}

// ---------------------------------------------------------------------------------------
// Edits.

/// One replacement of bytes.
#[derive(Debug)]
struct Splice {
    range: Range<usize>,
    text: String,
}

/// Where a node sits, for rewriting it whole.
#[derive(Debug, Clone, Copy)]
enum Slot {
    /// The value of a block entry: text after the colon, key column.
    Entry {
        colon_end: usize,
        col: usize,
    },
    /// A block list item: text after the dash, dash column.
    Dash {
        dash_end: usize,
        col: usize,
    },
    /// Inside a flow collection.
    Flow,
    Root,
}

/// The splice that writes `v` in place of `node`. A comment on the header line of a block
/// scalar (`key: |  # why`) is part of the node's text: it is written again on the key's line.
fn replace(node: &Node, slot: Slot, v: &Value, text: &str, json: bool) -> R<Splice> {
    let mut sp = replace_value(node, slot, v, text, json)?;
    if let Some(comment) = header_comment(node, text).filter(|_| !json) {
        let at = sp.text.find(['\r', '\n']).unwrap_or(sp.text.len());
        sp.text.insert_str(at, comment);
    }
    Ok(sp)
}

/// The text after a block scalar's indicators on its header line when it holds a comment
/// (`  # why` of `|  # why`), spaces included.
fn header_comment<'t>(node: &Node, text: &'t str) -> Option<&'t str> {
    if !matches!(node.kind, Kind::Scalar(Style::Literal)) {
        return None;
    }
    let header = &text[node.span.start..];
    let header = header[..header.find('\n').unwrap_or(header.len())].trim_end_matches('\r');
    let hash = header.find('#')?;
    Some(&header[header[..hash].trim_end().len()..])
}

fn replace_value(node: &Node, slot: Slot, v: &Value, text: &str, json: bool) -> R<Splice> {
    if json {
        return Ok(Splice { range: node.span.clone(), text: json_text(v, indent_at(text, node.span.start)) });
    }
    let complex = matches!(v, Value::Object(_) | Value::Array(_));
    if let Kind::Scalar(style) = node.kind
        && !complex
    {
        let indent = match slot {
            Slot::Entry { col, .. } | Slot::Dash { col, .. } => col + 2,
            _ => node.indent + 2,
        };
        // Keep the content indentation of an existing block scalar.
        let indent = if style == Style::Literal { literal_indent(node, text).unwrap_or(indent) } else { indent };
        let text = scalar(v, style, node.flow, indent);
        return Ok(match (style, slot) {
            (Style::Empty, _) => Splice { range: node.span.clone(), text: format!(" {text}") },
            _ => Splice { range: node.span.clone(), text },
        });
    }
    match slot {
        Slot::Flow => Ok(Splice { range: node.span.clone(), text: flow_text(v) }),
        Slot::Entry { colon_end, col } => {
            Ok(Splice { range: colon_end..node.span.end.max(colon_end), text: after_key(v, col) })
        }
        Slot::Dash { dash_end, col } => {
            Ok(Splice { range: dash_end..node.span.end.max(dash_end), text: after_dash(v, col) })
        }
        Slot::Root => Err("the whole document cannot be replaced".into()),
    }
}

/// The content indentation of an existing block scalar.
fn literal_indent(node: &Node, text: &str) -> Option<usize> {
    let body = text.get(node.span.clone())?;
    let second = body.split('\n').skip(1).find(|l| !l.trim().is_empty())?;
    Some(indent_of(second))
}

fn slot_of_entry(map: &Node, e: &Entry) -> Slot {
    if map.flow { Slot::Flow } else { Slot::Entry { colon_end: e.colon_end, col: map.indent } }
}

fn slot_of_item(seq: &Node, i: &Item) -> Slot {
    if seq.flow { Slot::Flow } else { Slot::Dash { dash_end: i.dash_end, col: seq.indent } }
}

/// The splice that makes `node` (whose parsed value is `json`) have `change` at `path`.
#[allow(clippy::too_many_arguments)]
fn plan(
    node: &Node,
    slot: Slot,
    json: &Value,
    path: &[Seg],
    change: Change<'_>,
    text: &str,
    json_mode: bool,
) -> R<Option<Splice>> {
    let Some((first, rest)) = path.split_first() else {
        return match change {
            Change::Set(v) => replace(node, slot, v, text, json_mode).map(Some),
            Change::Remove => Err("internal: removal of the node itself".into()),
        };
    };
    let new_value = |v: &Value| value::build(rest, v);
    match (first, &node.kind) {
        (Seg::Field(f), Kind::Map(entries)) => {
            let found = entries.iter().position(|e| &e.key == f);
            match (found, change) {
                (Some(i), Change::Remove) if rest.is_empty() => Ok(Some(remove_entry(node, slot, entries, i, text))),
                (Some(i), _) => {
                    let e = &entries[i];
                    let child = json.get(f).unwrap_or(&Value::Null);
                    plan(&e.value, slot_of_entry(node, e), child, rest, change, text, json_mode)
                }
                (None, Change::Remove) => Ok(None),
                (None, Change::Set(v)) => Ok(Some(insert_entry(node, entries, f, &new_value(v), text, json_mode))),
            }
        }
        (Seg::Item { .. }, Kind::Seq(items)) => {
            let list = json.as_array().map(Vec::as_slice).unwrap_or(&[]);
            if list.len() != items.len() {
                return Err("internal: the scanned list and the parsed list differ".into());
            }
            match (value::find_item(list, first), change) {
                (Some(i), Change::Remove) if rest.is_empty() => Ok(Some(remove_item(node, slot, items, i, text))),
                (Some(i), _) => {
                    plan(&items[i].value, slot_of_item(node, &items[i]), &list[i], rest, change, text, json_mode)
                }
                (None, Change::Remove) => Ok(None),
                (None, Change::Set(v)) => {
                    Ok(Some(append_item(node, items, &value::new_item(first, rest, v), text, json_mode)))
                }
            }
        }
        (_, Kind::Scalar(Style::Empty)) | (_, Kind::Scalar(_)) if json.is_null() => match change {
            Change::Remove => Ok(None),
            Change::Set(v) => replace(node, slot, &value::build(path, v), text, json_mode).map(Some),
        },
        (Seg::Field(f), _) => Err(format!("`{f}` is looked up in a value that is not a mapping")),
        (Seg::Item { .. }, _) => Err("a list item is looked up in a value that is not a list".into()),
    }
}

/// The indentation of the line holding offset `at`.
fn indent_at(text: &str, at: usize) -> usize {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    indent_of(&text[start..])
}

/// A value as JSON: compact scalars, pretty collections whose later lines are indented by
/// `indent` more columns.
fn json_text(v: &Value, indent: usize) -> String {
    match v {
        Value::Object(m) if !m.is_empty() => pretty(v, indent),
        Value::Array(a) if !a.is_empty() => pretty(v, indent),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

fn pretty(v: &Value, indent: usize) -> String {
    let text = serde_json::to_string_pretty(v).unwrap_or_default();
    let pad = " ".repeat(indent);
    text.lines()
        .enumerate()
        .map(|(i, l)| if i == 0 { l.to_owned() } else { format!("{pad}{l}") })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A replacement that spans lines would push a comment that followed the old value into the
/// new value's last line: the comment moves to the end of the replacement's first line.
fn keep_comment_on_its_line(text: &str, sp: &mut Splice) {
    if !sp.text.contains('\n') {
        return;
    }
    let line_end = text[sp.range.end..].find('\n').map_or(text.len(), |i| sp.range.end + i);
    let rest = text[sp.range.end..line_end].trim_end_matches('\r');
    let comment = rest.trim_start();
    if !comment.starts_with('#') {
        return;
    }
    let first = sp.text.find(['\r', '\n']).unwrap_or(sp.text.len());
    sp.text = format!("{} {comment}{}", &sp.text[..first], &sp.text[first..]);
    sp.range.end += rest.len();
}

fn newline_of(text: &str) -> &'static str {
    if text.contains("\r\n") { "\r\n" } else { "\n" }
}

fn insert_entry(map: &Node, entries: &[Entry], key: &str, v: &Value, text: &str, json: bool) -> Splice {
    if json {
        let k = double(key);
        return match entries.last() {
            Some(last) if text[map.span.clone()].contains('\n') => {
                let ind = indent_at(text, last.key_start);
                let nl = newline_of(text);
                let body = format!(",{nl}{}{k}: {}", " ".repeat(ind), json_text(v, ind)).replace('\n', nl);
                Splice { range: last.end..last.end, text: body.replace("\r\r", "\r") }
            }
            Some(last) => Splice { range: last.end..last.end, text: format!(", {k}: {}", json_text(v, 0)) },
            None => Splice { range: map.span.clone(), text: format!("{{{k}: {}}}", json_text(v, 0)) },
        };
    }
    if map.flow {
        let part = format!("{}: {}", key_text(key), flow_text(v));
        return match entries.last() {
            Some(last) => Splice { range: last.end..last.end, text: format!(", {part}") },
            None => Splice { range: map.span.clone(), text: format!("{{{part}}}") },
        };
    }
    let last = entries.last().map_or(map.span.end, |e| e.end);
    let nl = newline_of(text);
    let body = format!("{}{}:{}", " ".repeat(map.indent), key_text(key), after_key(v, map.indent)).replace('\n', nl);
    if text[..last].ends_with('\n') {
        Splice { range: last..last, text: format!("{body}{nl}") }
    } else {
        Splice { range: last..last, text: format!("{nl}{body}") }
    }
}

fn append_item(seq: &Node, items: &[Item], v: &Value, text: &str, json: bool) -> Splice {
    if json {
        return match items.last() {
            Some(last) if text[seq.span.clone()].contains('\n') => {
                let ind = indent_at(text, last.start);
                let nl = newline_of(text);
                let body = format!(",{nl}{}{}", " ".repeat(ind), json_text(v, ind));
                Splice { range: last.end..last.end, text: body }
            }
            Some(last) => Splice { range: last.end..last.end, text: format!(", {}", json_text(v, 0)) },
            None => Splice { range: seq.span.clone(), text: format!("[{}]", json_text(v, 0)) },
        };
    }
    if seq.flow {
        let part = flow_text(v);
        return match items.last() {
            Some(last) => Splice { range: last.end..last.end, text: format!(", {part}") },
            None => Splice { range: seq.span.clone(), text: format!("[{part}]") },
        };
    }
    let last = items.last().map_or(seq.span.end, |i| i.end);
    let nl = newline_of(text);
    let body = format!("{}-{}", " ".repeat(seq.indent), after_dash(v, seq.indent)).replace('\n', nl);
    if text[..last].ends_with('\n') {
        Splice { range: last..last, text: format!("{body}{nl}") }
    } else {
        Splice { range: last..last, text: format!("{nl}{body}") }
    }
}

fn remove_entry(map: &Node, slot: Slot, entries: &[Entry], i: usize, text: &str) -> Splice {
    let e = &entries[i];
    if entries.len() == 1 {
        return empty_collection(map, slot, "{}");
    }
    if map.flow {
        return if i + 1 < entries.len() {
            Splice { range: e.key_start..entries[i + 1].key_start, text: String::new() }
        } else {
            Splice { range: entries[i - 1].end..e.end, text: String::new() }
        };
    }
    match e.line_start {
        Some(ls) => Splice { range: ls..e.end.min(text.len()), text: String::new() },
        // The first key of a list item (`- name: x`): the next key moves up after the dash.
        None => Splice { range: e.key_start..entries[i + 1].key_start, text: String::new() },
    }
}

fn remove_item(seq: &Node, slot: Slot, items: &[Item], i: usize, text: &str) -> Splice {
    let it = &items[i];
    if items.len() == 1 {
        return empty_collection(seq, slot, "[]");
    }
    if seq.flow {
        return if i + 1 < items.len() {
            Splice { range: it.start..items[i + 1].start, text: String::new() }
        } else {
            Splice { range: items[i - 1].end..it.end, text: String::new() }
        };
    }
    match it.line_start {
        Some(ls) => Splice { range: ls..it.end.min(text.len()), text: String::new() },
        None => Splice { range: it.start..items[i + 1].start, text: String::new() },
    }
}

fn empty_collection(node: &Node, slot: Slot, empty: &str) -> Splice {
    match slot {
        Slot::Entry { colon_end, .. } => Splice { range: colon_end..node.span.end, text: format!(" {empty}") },
        Slot::Dash { dash_end, .. } => Splice { range: dash_end..node.span.end, text: format!(" {empty}") },
        Slot::Flow | Slot::Root => Splice { range: node.span.clone(), text: empty.to_owned() },
    }
}

// ---------------------------------------------------------------------------------------
// Documents and files.

/// The byte ranges of the documents of a YAML stream (split at `---` lines).
pub(crate) fn documents(text: &str) -> Vec<Range<usize>> {
    let mut docs = Vec::new();
    let mut start = 0;
    let mut pos = 0;
    while pos < text.len() {
        let nl = text[pos..].find('\n').map_or(text.len(), |i| pos + i + 1);
        let line = text[pos..nl].trim_end_matches(['\n', '\r']);
        let marker = line == "---" || line.starts_with("--- ") || line.starts_with("---\t") || line == "...";
        if marker {
            docs.push(start..pos);
            start = nl;
            if line.starts_with("--- ") && !insignificant(&line[4..]) {
                // Content on the marker line (`--- {a: 1}`) starts the document.
                start = pos + 4;
            }
        }
        pos = nl;
    }
    docs.push(start..text.len());
    docs.retain(|r| !text[r.clone()].lines().all(insignificant));
    docs
}

/// Parses one document's text as Kubernetes reads it.
pub(crate) fn parse(text: &str) -> R<Value> {
    drift_manifest::read_yaml_value(text)
}

/// Applies `changes` (in order) to the document `doc` of `text`; returns the new text of the
/// whole file. The edited document must parse to the original with exactly these changes.
pub(crate) fn edit_document(text: &str, doc: Range<usize>, changes: &[(&[Seg], Change<'_>)]) -> R<String> {
    edit(text, doc, changes, false)
}

/// Applies `changes` to a JSON file, writing JSON.
pub(crate) fn edit_json(text: &str, changes: &[(&[Seg], Change<'_>)]) -> R<String> {
    edit(text, 0..text.len(), changes, true)
}

fn edit(text: &str, doc: Range<usize>, changes: &[(&[Seg], Change<'_>)], json_mode: bool) -> R<String> {
    let parse = |t: &str| -> R<Value> {
        if json_mode { serde_json::from_str(t).map_err(|e| format!("invalid JSON: {e}")) } else { parse(t) }
    };
    let original = parse(&text[doc.clone()])?;
    let mut expected = original.clone();
    for (path, change) in changes {
        let new = match change {
            Change::Set(v) => Some(*v),
            Change::Remove => None,
        };
        value::apply(&mut expected, path, new)?;
    }
    let mut out = text.to_owned();
    let mut doc = doc;
    for (path, change) in changes {
        let current = parse(&out[doc.clone()])?;
        let scanner = Scanner::new(&out, doc.clone());
        let root = if json_mode { scanner.json_root()? } else { scanner.root()? };
        let splice = plan(&root, Slot::Root, &current, path, *change, &out, json_mode)?;
        if let Some(mut sp) = splice {
            keep_comment_on_its_line(&out, &mut sp);
            if newline_of(&out) == "\r\n" {
                sp.text = sp.text.replace("\r\n", "\n").replace('\n', "\r\n");
            }
            let delta = sp.text.len() as isize - (sp.range.end - sp.range.start) as isize;
            out.replace_range(sp.range.clone(), &sp.text);
            doc = doc.start..(doc.end as isize + delta) as usize;
        }
    }
    let got = parse(&out[doc.clone()])
        .map_err(|e| format!("the edited document does not parse ({e}); nothing was written"))?;
    if got != expected {
        return Err("the edited document does not read back as the intended change; nothing was written".into());
    }
    Ok(out)
}

/// Edits the one document of a file that `select` picks, or the one item that `select` picks
/// of a `kind: List` (or `*List`) document's `items` (edited in place, as an item).
pub(crate) fn edit_file(text: &str, select: &dyn Fn(&Value) -> bool, changes: &[(&[Seg], Change<'_>)]) -> R<String> {
    let mut chosen: Option<(Range<usize>, Option<usize>)> = None;
    for d in documents(text) {
        let Ok(v) = parse(&text[d.clone()]) else { continue };
        let found = if select(&v) { Some(None) } else { list_item(&v, select)?.map(Some) };
        if let Some(item) = found {
            if chosen.is_some() {
                return Err("the object is defined twice in the file".into());
            }
            chosen = Some((d, item));
        }
    }
    let (doc, item) = chosen.ok_or_else(|| "no document of the file defines the object".to_owned())?;
    match item {
        None => edit_document(text, doc, changes),
        Some(i) => {
            let paths = in_list_item(i, changes);
            edit_document(text, doc, &refs(&paths))
        }
    }
}

/// The items of a `kind: List` document (also `ConfigMapList` and the other `*List` kinds
/// with `items`, as `kubectl` reads them); empty for any other document.
pub(crate) fn list_items(doc: &Value) -> &[Value] {
    let list = doc.get("kind").and_then(Value::as_str).is_some_and(|k| k.ends_with("List"));
    match doc.get("items").and_then(Value::as_array) {
        Some(items) if list => items,
        _ => &[],
    }
}

/// The index of the item of a List document that `select` picks (`None`: no item; an error
/// when several do).
pub(crate) fn list_item(doc: &Value, select: &dyn Fn(&Value) -> bool) -> R<Option<usize>> {
    let mut found = None;
    for (i, item) in list_items(doc).iter().enumerate() {
        if select(item) {
            if found.is_some() {
                return Err("the object is defined twice in the file".into());
            }
            found = Some(i);
        }
    }
    Ok(found)
}

/// The changes of an object moved under the item `index` of a List's `items`.
pub(crate) fn in_list_item<'c>(index: usize, changes: &[(&[Seg], Change<'c>)]) -> Vec<(Vec<Seg>, Change<'c>)> {
    changes
        .iter()
        .map(|(path, change)| {
            let mut p = vec![Seg::Field("items".into()), Seg::Item { key: Vec::new(), hidden: Vec::new(), index }];
            p.extend(path.iter().cloned());
            (p, *change)
        })
        .collect()
}

/// Borrowed changes of owned paths.
pub(crate) fn refs<'p, 'c>(changes: &'p [(Vec<Seg>, Change<'c>)]) -> Vec<(&'p [Seg], Change<'c>)> {
    changes.iter().map(|(p, c)| (p.as_slice(), *c)).collect()
}

#[cfg(test)]
mod tests {
    use drift_model::path::Path;
    use serde_json::json;

    use super::*;

    fn p(s: &str) -> Path {
        let mut path = Path::root();
        for part in s.split('.') {
            if let Some(rest) = part.strip_prefix('[') {
                let inner = rest.trim_end_matches(']');
                path = match inner.parse::<usize>() {
                    Ok(i) => path.item(vec![], vec![], i),
                    Err(_) => {
                        let (k, v) = inner.split_once('=').unwrap();
                        path.item(vec![(k.into(), v.into())], vec![false], 0)
                    }
                };
            } else {
                path = path.field(part);
            }
        }
        path
    }

    fn set(text: &str, path: &str, v: Value) -> String {
        let path = p(path);
        let doc = documents(text)[0].clone();
        edit_document(text, doc, &[(path.segments(), Change::Set(&v))]).unwrap()
    }

    fn remove(text: &str, path: &str) -> String {
        let path = p(path);
        let doc = documents(text)[0].clone();
        edit_document(text, doc, &[(path.segments(), Change::Remove)]).unwrap()
    }

    #[test]
    fn scalars_keep_their_style() {
        let t = "a: plain # note\nb: 'single'\nc: \"double\"\nd: 3\n";
        assert_eq!(set(t, "a", json!("other")), "a: other # note\nb: 'single'\nc: \"double\"\nd: 3\n");
        assert_eq!(set(t, "b", json!("it's")), "a: plain # note\nb: 'it''s'\nc: \"double\"\nd: 3\n");
        assert_eq!(set(t, "c", json!("x\ty")), "a: plain # note\nb: 'single'\nc: \"x\\ty\"\nd: 3\n");
        assert_eq!(set(t, "d", json!(5)), "a: plain # note\nb: 'single'\nc: \"double\"\nd: 5\n");
        assert_eq!(set(t, "a", json!("yes")), "a: \"yes\" # note\nb: 'single'\nc: \"double\"\nd: 3\n");
        assert_eq!(set(t, "a", json!("1.10")), "a: \"1.10\" # note\nb: 'single'\nc: \"double\"\nd: 3\n");
        assert_eq!(set(t, "b", json!(true)), "a: plain # note\nb: true\nc: \"double\"\nd: 3\n");
    }

    #[test]
    fn literal_block_scalars_are_rewritten_in_place() {
        let t = "data:\n  script: |\n    echo one\n    echo two\n  other: x\n";
        assert_eq!(set(t, "data.script", json!("echo three\n")), "data:\n  script: |\n    echo three\n  other: x\n");
        assert_eq!(set(t, "data.script", json!("no end")), "data:\n  script: |-\n    no end\n  other: x\n");
    }

    #[test]
    fn nested_maps_and_lists_by_key() {
        let t = "spec:\n  template:\n    spec:\n      containers:\n      - name: side\n        image: s:1\n      - name: web # the app\n        image: web:1\n        ports:\n        - containerPort: 80\n";
        let out = set(t, "spec.template.spec.containers.[name=web].image", json!("web:2"));
        assert_eq!(out, t.replace("web:1", "web:2"));
        let out = set(t, "spec.template.spec.containers.[name=web].env", json!([{"name": "A", "value": "1"}]));
        assert_eq!(
            out,
            t.replace(
                "        - containerPort: 80\n",
                "        - containerPort: 80\n        env:\n          - name: A\n            value: \"1\"\n"
            )
        );
        let out = set(t, "spec.template.spec.containers.[name=new]", json!({"name": "new", "image": "n:1"}));
        assert!(out.ends_with("      - name: new\n        image: n:1\n"), "{out}");
        let out = remove(t, "spec.template.spec.containers.[name=side]");
        assert_eq!(out, t.replace("      - name: side\n        image: s:1\n", ""));
        let out = remove(t, "spec.template.spec.containers.[name=web].image");
        assert_eq!(out, t.replace("        image: web:1\n", ""));
        let out = remove(t, "spec.template.spec.containers.[name=side].name");
        assert_eq!(out, t.replace("      - name: side\n        image: s:1\n", "      - image: s:1\n"));
    }

    #[test]
    fn inserting_into_empty_flow_and_null_mappings() {
        let t = "metadata: {name: a, labels: {}}\nspec:\n";
        assert_eq!(set(t, "metadata.labels.app", json!("web")), "metadata: {name: a, labels: {app: web}}\nspec:\n");
        assert_eq!(
            set(t, "metadata.namespace", json!("shop")),
            "metadata: {name: a, labels: {}, namespace: shop}\nspec:\n"
        );
        assert_eq!(set(t, "spec.replicas", json!(2)), "metadata: {name: a, labels: {}}\nspec:\n  replicas: 2\n");
        assert_eq!(set(t, "spec.a.b", json!("c")), "metadata: {name: a, labels: {}}\nspec:\n  a:\n    b: c\n");
        assert_eq!(set(t, "data.x", json!("1")), "metadata: {name: a, labels: {}}\nspec:\ndata:\n  x: \"1\"\n");
        assert_eq!(remove(t, "metadata.name"), "metadata: {labels: {}}\nspec:\n");
    }

    #[test]
    fn lists_at_the_key_indentation_and_block_scalars_before_an_insertion() {
        let t = "spec:\n  containers:\n  - name: web\n    command: >\n      run\n      fast\n\n  # trailing\nnext: 1\n";
        assert_eq!(
            set(t, "spec.containers.[name=web].image", json!("web:2")),
            t.replace("      fast\n\n", "      fast\n    image: web:2\n\n")
        );
        assert_eq!(
            set(t, "spec.containers.[name=side]", json!({"name": "side", "image": "s:1"})),
            t.replace("      fast\n\n", "      fast\n  - name: side\n    image: s:1\n\n")
        );
        assert_eq!(
            set(t, "spec.containers.[name=web].command", json!("go\n")),
            t.replace("command: >\n      run\n      fast\n", "command: |\n      go\n")
        );
    }

    #[test]
    fn a_comment_after_a_value_replaced_by_a_block_stays_on_the_key_line() {
        let t = "a: 1 # why\nb: 2\n";
        assert_eq!(set(t, "a", json!({"c": 3})), "a: # why\n  c: 3\nb: 2\n");
        assert_eq!(set(t, "a", json!("x\ny\n")), "a: | # why\n  x\n  y\nb: 2\n");
    }

    #[test]
    fn a_comment_on_the_key_line_of_a_block_scalar_is_kept() {
        // Regression (issue 31, item 4): the header's comment was part of the replaced text.
        let t = "data:\n  value: |  # why it is so\n    one\n    two\n  other: x\n";
        assert_eq!(
            set(t, "data.value", json!("three\n")),
            "data:\n  value: |  # why it is so\n    three\n  other: x\n"
        );
        assert_eq!(
            set(t, "data.value", json!("no end")),
            "data:\n  value: |-  # why it is so\n    no end\n  other: x\n"
        );
        assert_eq!(set(t, "data.value", json!(7)), "data:\n  value: 7  # why it is so\n  other: x\n");
        assert_eq!(set(t, "data.value", json!({"a": 1})), "data:\n  value:  # why it is so\n    a: 1\n  other: x\n");
        let folded = "- >- # folded\r\n  a\r\n  b\r\n";
        assert_eq!(set(folded, "[0]", json!("c\nd")), "- |- # folded\r\n  c\r\n  d\r\n");
        let bare = "k: |\n  # not a comment: content\n";
        assert_eq!(set(bare, "k", json!("v\n")), "k: |\n  v\n");
    }

    #[test]
    fn an_item_of_a_list_document_is_edited_in_place() {
        // Regression (issue 31, item 4): a `kind: List` file was no document of the object.
        let t = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n  data: {k: v}\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: b}\n  data:\n    k: v # keep\n";
        let path = p("data.k");
        let select = |v: &Value| v["kind"] == "ConfigMap" && v["metadata"]["name"] == "b";
        let out = edit_file(t, &select, &[(path.segments(), Change::Set(&json!("w")))]).unwrap();
        assert_eq!(out, t.replace("k: v # keep", "k: w # keep"));
        let twice = format!("{t}- apiVersion: v1\n  kind: ConfigMap\n  metadata: {{name: b}}\n");
        assert!(edit_file(&twice, &select, &[(path.segments(), Change::Set(&json!("w")))]).is_err());
    }

    #[test]
    fn removal_takes_only_the_lines_of_the_key() {
        let t = "a:\n  # keep me\n  b: 1\n  c:\n    d: 2\n  e: 3\n";
        assert_eq!(remove(t, "a.c"), "a:\n  # keep me\n  b: 1\n  e: 3\n");
        assert_eq!(remove("a:\n  b: 1\nz: 2\n", "a.b"), "a: {}\nz: 2\n");
        assert_eq!(remove(t, "missing"), t, "removing what is not there changes nothing");
    }

    #[test]
    fn documents_other_than_the_edited_one_stay_as_they_are() {
        let t = "# head\n---\napiVersion: v1\nkind: A\nmetadata: {name: one}\n---\napiVersion: v1\nkind: A\nmetadata: {name: two}\ndata: {k: v}\n";
        let path = p("data.k");
        let select = |v: &Value| v["metadata"]["name"] == "two";
        let out = edit_file(t, &select, &[(path.segments(), Change::Set(&json!("w")))]).unwrap();
        assert_eq!(out, t.replace("{k: v}", "{k: w}"));
    }

    #[test]
    fn crlf_files_keep_their_line_ends() {
        let t = "a:\r\n  b: 1\r\nc: x\r\n";
        assert_eq!(set(t, "a.b", json!(2)), "a:\r\n  b: 2\r\nc: x\r\n");
        assert_eq!(set(t, "a.m", json!({"x": 1})), "a:\r\n  b: 1\r\n  m:\r\n    x: 1\r\nc: x\r\n");
        assert_eq!(remove(t, "c"), "a:\r\n  b: 1\r\n");
    }

    #[test]
    fn what_the_scanner_does_not_understand_is_refused() {
        for t in ["a: &x 1\nb: *x\n", "a: !!str 1\n", "a: {b: 1,\n  c: 2}\n", "a: \"one\n  two\"\n", "? a\n: b\n"] {
            let doc = documents(t)[0].clone();
            let path = p("a");
            assert!(edit_document(t, doc, &[(path.segments(), Change::Set(&json!("z")))]).is_err(), "{t}");
        }
    }

    /// A small deterministic generator (xorshift), for fuzz-style tests without a dependency.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
            &items[self.below(items.len())]
        }
    }

    const STRINGS: &[&str] = &[
        "web",
        "yes",
        "1.10",
        "",
        "a: b",
        "# not a comment",
        "two\nlines\n",
        "it's",
        "null",
        "-x",
        "x,y",
        "~",
        "0755",
        "héllo",
    ];
    const KEYS: &[&str] = &["a", "b", "name", "image", "x-y", "on", "k8s.io/app"];

    fn scalar_value(r: &mut Rng) -> Value {
        match r.below(4) {
            0 => json!(r.below(1000)),
            1 => json!(r.below(2) == 0),
            _ => json!(*r.pick(STRINGS)),
        }
    }

    fn random_value(r: &mut Rng, depth: usize) -> Value {
        match if depth == 0 { 0 } else { r.below(5) } {
            0 | 1 => scalar_value(r),
            2 | 3 => {
                let mut m = serde_json::Map::new();
                for _ in 0..=r.below(3) {
                    m.insert((*r.pick(KEYS)).to_owned(), random_value(r, depth - 1));
                }
                Value::Object(m)
            }
            _ => {
                let named = r.below(2) == 0;
                let items = (0..=r.below(2))
                    .map(|i| {
                        if named {
                            json!({"name": format!("n{i}"), "v": random_value(r, depth - 1)})
                        } else {
                            scalar_value(r)
                        }
                    })
                    .collect();
                Value::Array(items)
            }
        }
    }

    /// Writes a value as a person might: block or flow collections, any quoting that keeps
    /// the value, comments at line ends.
    fn write_any(r: &mut Rng, v: &Value, col: usize, out: &mut String) {
        let pad = " ".repeat(col);
        let flat = |v: &Value| match v {
            Value::Object(m) => {
                m.values().all(|x| !x.is_object() && !x.is_array() && !x.as_str().is_some_and(|s| s.contains('\n')))
            }
            Value::Array(a) => {
                a.iter().all(|x| !x.is_object() && !x.is_array() && !x.as_str().is_some_and(|s| s.contains('\n')))
            }
            _ => true,
        };
        let sc = |r: &mut Rng, x: &Value, flow: bool, indent: usize| -> String {
            let style = *r.pick(&[Style::Plain, Style::Single, Style::Double, Style::Literal]);
            scalar(x, style, flow, indent)
        };
        match v {
            Value::Object(m) => {
                for (i, (k, x)) in m.iter().enumerate() {
                    match if i == 0 { 2 } else { r.below(8) } {
                        0 => out.push_str(&format!("{pad}# a comment line\n")),
                        1 => out.push('\n'),
                        _ => {}
                    }
                    out.push_str(&format!("{pad}{}:", key_text(k)));
                    match x {
                        Value::Object(_) | Value::Array(_)
                            if is_empty_collection(x) || (flat(x) && r.below(2) == 0) =>
                        {
                            out.push_str(&format!(" {}\n", flow_text(x)));
                        }
                        Value::Object(_) | Value::Array(_) => {
                            out.push('\n');
                            // kubectl writes lists at the key's own indentation.
                            let inner = if x.is_array() && r.below(2) == 0 { col } else { col + 2 };
                            write_any(r, x, inner, out);
                        }
                        _ => {
                            let text = sc(r, x, false, col + 2);
                            let comment = if r.below(3) == 0 && !text.contains('\n') { " # note" } else { "" };
                            out.push_str(&format!(" {text}{comment}\n"));
                        }
                    }
                }
            }
            Value::Array(a) => {
                for x in a {
                    if x.is_object() && !is_empty_collection(x) {
                        let mut inner = String::new();
                        write_any(r, x, col + 2, &mut inner);
                        out.push_str(&format!("{pad}- {}", &inner[col + 2..]));
                    } else if is_empty_collection(x) || x.is_array() {
                        out.push_str(&format!("{pad}- {}\n", flow_text(x)));
                    } else {
                        out.push_str(&format!("{pad}- {}\n", sc(r, x, false, col + 2)));
                    }
                }
            }
            other => out.push_str(&format!("{pad}{}\n", scalar(other, Style::Plain, false, col))),
        }
    }

    /// Every path of a value, list items by merge key (`name`) or position.
    fn paths(v: &Value, here: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    here.push(Seg::Field(k.clone()));
                    out.push(here.clone());
                    paths(x, here, out);
                    here.pop();
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    let seg = match x.get("name").and_then(Value::as_str) {
                        Some(n) => Seg::Item { key: vec![("name".into(), n.into())], hidden: vec![false], index: i },
                        None => Seg::Item { key: vec![], hidden: vec![], index: i },
                    };
                    here.push(seg);
                    out.push(here.clone());
                    paths(x, here, out);
                    here.pop();
                }
            }
            _ => {}
        }
    }

    #[test]
    fn random_documents_edited_read_back_as_the_original_with_exactly_the_change() {
        let seed = std::env::var("DRIFT_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x9e37_79b9_7f4a_7c15);
        let mut r = Rng(seed);
        let mut tried = 0;
        for _ in 0..2000 {
            let mut doc = serde_json::Map::new();
            doc.insert("kind".into(), json!("Thing"));
            for _ in 0..=r.below(3) {
                doc.insert((*r.pick(KEYS)).to_owned(), random_value(&mut r, 3));
            }
            let original = Value::Object(doc);
            let mut body = String::new();
            write_any(&mut r, &original, 0, &mut body);
            assert_eq!(
                parse(&body).unwrap_or_else(|e| panic!("{e}\n{body}")),
                original,
                "the generator writes what it means:\n{body}"
            );
            let tail = "---\nother: {keep: 'as is'} # untouched\n";
            let crlf = r.below(4) == 0;
            let text = format!("# head\n{body}{tail}");
            let text = if crlf { text.replace('\n', "\r\n") } else { text };
            let mut all = Vec::new();
            paths(&original, &mut Vec::new(), &mut all);
            let mut path = r.pick(&all).clone();
            if r.below(4) == 0 && value::get(&original, &path).is_some_and(Value::is_object) {
                path.push(Seg::Field("added".into()));
            }
            let new = random_value(&mut r, 2);
            let change = if r.below(4) == 0 && path.len() > 1 { Change::Remove } else { Change::Set(&new) };
            let doc = documents(&text)[0].clone();
            let out = edit_document(&text, doc.clone(), &[(&path, change)])
                .unwrap_or_else(|e| panic!("{e}\n--- text:\n{text}\n--- path: {path:?}\n--- change: {change:?}"));
            let mut expected = original.clone();
            value::apply(&mut expected, &path, if let Change::Set(v) = change { Some(v) } else { None }).unwrap();
            let docs = documents(&out);
            assert_eq!(parse(&out[docs[0].clone()]).unwrap(), expected);
            let tail = if crlf { tail.replace('\n', "\r\n") } else { tail.to_owned() };
            assert!(out.ends_with(&tail) && out.starts_with("# head"), "other documents stay byte for byte:\n{out}");
            assert!(!crlf || !out.replace("\r\n", "").contains('\n'), "CRLF line ends stay CRLF:\n{out:?}");
            tried += 1;
        }
        assert_eq!(tried, 2000);
    }

    #[test]
    fn random_json_files_edited_read_back_with_exactly_the_change() {
        let mut r = Rng(0x2545_f491_4f6c_dd1d);
        for n in 0..1000 {
            let mut doc = serde_json::Map::new();
            for _ in 0..=r.below(3) {
                doc.insert((*r.pick(KEYS)).to_owned(), random_value(&mut r, 3));
            }
            let original = Value::Object(doc);
            let text = if n % 2 == 0 {
                format!("{}\n", serde_json::to_string_pretty(&original).unwrap())
            } else {
                serde_json::to_string(&original).unwrap()
            };
            let mut all = Vec::new();
            paths(&original, &mut Vec::new(), &mut all);
            let mut path = r.pick(&all).clone();
            if r.below(4) == 0 && value::get(&original, &path).is_some_and(Value::is_object) {
                path.push(Seg::Field("added".into()));
            }
            let new = random_value(&mut r, 2);
            let change = if r.below(4) == 0 { Change::Remove } else { Change::Set(&new) };
            let out = edit_json(&text, &[(&path, change)])
                .unwrap_or_else(|e| panic!("{e}\n--- text:\n{text}\n--- path: {path:?}\n--- change: {change:?}"));
            let mut expected = original.clone();
            value::apply(&mut expected, &path, if let Change::Set(v) = change { Some(v) } else { None }).unwrap();
            assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), expected);
        }
    }

    #[test]
    fn json_keeps_its_layout() {
        let t = "{\n  \"a\": 1,\n  \"b\": {\"c\": [1, 2]},\n  \"d\": \"x\"\n}\n";
        let set = |path: &Path, v: Value| edit_json(t, &[(path.segments(), Change::Set(&v))]).unwrap();
        assert_eq!(set(&p("a"), json!(2)), t.replace("\"a\": 1", "\"a\": 2"));
        assert_eq!(set(&p("b.c.[1]"), json!(3)), t.replace("[1, 2]", "[1, 3]"));
        assert_eq!(
            set(&p("e"), json!({"f": true})),
            t.replace("\"d\": \"x\"\n", "\"d\": \"x\",\n  \"e\": {\n    \"f\": true\n  }\n")
        );
        let out = edit_json(t, &[(p("b").segments(), Change::Remove)]).unwrap();
        assert_eq!(out, "{\n  \"a\": 1,\n  \"d\": \"x\"\n}\n");
    }
}
