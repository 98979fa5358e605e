//! Field ownership as a live object's `metadata.managedFields` records it: each entry's manager
//! and its FieldsV1 (the fields it set), read into one tree of field keys whose nodes carry the
//! managers owning them ([`ManagedFields`]). The engine asks it who owns a path
//! (`drift_engine::managed::Ownership`); the live reader of `drift_manifest` builds it while it
//! reads an object's JSON, so that managedFields, about half of a live object's text, are read
//! once.
//!
//! It is read from a list of entries given as a tree ([`ManagedFields::of_view`]), from the
//! list's JSON text ([`ManagedFields::of_text`], the text trusted to be JSON, as a reader that
//! checked it keeps it) or through any reader of JSON text that implements [`FieldsText`]
//! ([`ManagedFields::read`]): all three give the same managers and the same owners, as
//! property tests hold them.
//!
//! ```
//! use drift_model::fields::ManagedFields;
//! use drift_model::path::Path;
//! let text = r#"[{"manager": "kubectl-edit", "operation": "Update", "fieldsV1": {"f:spec": {"f:replicas": {}}}}]"#;
//! let fields = ManagedFields::of_text(text);
//! assert_eq!(fields.managers()[0].manager, "kubectl-edit");
//! assert_eq!(fields.owners(&Path::root().field("spec").field("replicas")), 1);
//! assert_eq!(fields.owners(&Path::root().field("metadata")), 0);
//! ```

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::drift::Attribution;
use crate::path::{Path, SegView, scalar_text};
use crate::tree::{JsonView, Shape};

/// Managers tracked of one object at most (their owners are sets of bits of a `u64`): the first
/// 64 entries of its managedFields.
pub const MAX_MANAGERS: usize = 64;

/// The managedFields of one live object: its managers (each entry with a manager, in order, of
/// the first [`MAX_MANAGERS`] entries) and who owns which field, its field names borrowed from
/// the object where they have no escapes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ManagedFields<'a> {
    managers: Vec<Attribution>,
    nodes: Nodes<'a>,
}

impl<'a> ManagedFields<'a> {
    /// The managedFields of an object as its `metadata.managedFields` value gives them: a list
    /// of entries (missing or malformed entries are skipped), or that list's JSON text (a string:
    /// how a live reader keeps it unparsed); anything else has none.
    pub fn of_view(managed: impl JsonView<'a>) -> Self {
        match managed.shape() {
            Shape::Array => {
                let mut own = ManagedFields::default();
                for entry in (0..managed.len().min(MAX_MANAGERS)).filter_map(|i| managed.item(i)) {
                    let Some(manager) = entry.get("manager").and_then(JsonView::as_str) else { continue };
                    let text = |k: &str| entry.get(k).and_then(JsonView::as_str);
                    let bit = own.add(manager, text("operation"), text("time"), text("subresource"));
                    if let Some(fields) = entry.get("fieldsV1") {
                        insert(&mut own.nodes, 0, fields, bit);
                    }
                }
                own
            }
            Shape::String(text) => Self::of_text(text),
            _ => ManagedFields::default(),
        }
    }

    /// The entries of managedFields from their JSON text (trusted to be JSON: a reader checked
    /// it), as [`ManagedFields::of_view`] reads them from the tree: the first 64 entries, those
    /// without a manager skipped; of a key written twice in an entry the later counts, as in the
    /// tree; a text that is not JSON gives the managers read before the fault. Read in one pass
    /// ([`ManagedFields::read`]), or, when that says to read again, in two.
    pub fn of_text(text: &'a str) -> Self {
        let mut t = Text { text, bytes: text.as_bytes(), pos: 0 };
        if t.peek() != Some(b'[') {
            return ManagedFields::default();
        }
        Self::read(&mut t).unwrap_or_else(|| {
            let mut own = ManagedFields::with_capacity(text.len());
            // (At a fault the managers and fields read before it are kept, as documented above.)
            let _fault = own.read_in_two_passes(text);
            own
        })
    }

    /// The entries of managedFields read in one pass by `t` (at the list's `[`): each entry's
    /// fields are added under the bit its manager will have (the API server writes `fieldsV1`
    /// before `manager`). `None` when `t` fails, or when an entry turns out to have no manager
    /// or two `fieldsV1`: the text is then read in two passes ([`ManagedFields::of_text`]), each
    /// entry's fields after its manager is known. A reader that checks the text as it goes reads
    /// it here and checks it at once; `t` is left after the list, or wherever it failed.
    pub fn read<T: FieldsText<'a>>(t: &mut T) -> Option<Self> {
        let mut own = ManagedFields::with_capacity(t.size_hint());
        let mut entries = 0;
        t.items(|t| {
            entries += 1;
            if entries > MAX_MANAGERS || t.next_byte()? != b'{' {
                return t.step_over();
            }
            let bit = 1u64 << own.managers.len();
            let mut walked = false;
            let nodes = &mut own.nodes;
            let e = entry(t, |t| {
                if walked {
                    return None;
                }
                walked = true;
                insert_text(nodes, 0, t, bit)
            })?;
            match e.manager {
                Some(manager) => {
                    own.add(&manager, e.operation.as_deref(), e.time.as_deref(), e.subresource.as_deref());
                }
                None if walked => return None,
                None => {}
            }
            Some(())
        })?;
        Some(own)
    }

    /// Empty, with room for the nodes of about `text` bytes of managedFields.
    fn with_capacity(text: usize) -> Self {
        // About one node for every 24 bytes of the text the API server writes.
        ManagedFields { managers: Vec::new(), nodes: Nodes::with_root(text / 24) }
    }

    /// [`ManagedFields::read`] in two passes over the text: each entry's fields read after the
    /// entry, under its manager's bit; `None` at a fault (what was read before it is kept).
    fn read_in_two_passes(&mut self, text: &'a str) -> Option<()> {
        let mut t = Text { text, bytes: text.as_bytes(), pos: 0 };
        let mut entries = 0;
        t.items(|t| {
            entries += 1;
            if entries > MAX_MANAGERS || t.next_byte()? != b'{' {
                return t.step_over();
            }
            let mut fields = None;
            let e = entry(t, |t| {
                fields = Some(*t);
                t.step_over()
            })?;
            if let Some(manager) = e.manager {
                let bit = self.add(&manager, e.operation.as_deref(), e.time.as_deref(), e.subresource.as_deref());
                if let Some(mut at) = fields {
                    insert_text(&mut self.nodes, 0, &mut at, bit)?;
                }
            }
            Some(())
        })
    }

    /// Adds a manager's write, returning its bit.
    fn add(&mut self, manager: &str, operation: Option<&str>, time: Option<&str>, subresource: Option<&str>) -> u64 {
        let bit = 1u64 << self.managers.len();
        self.managers.push(Attribution {
            manager: manager.to_owned(),
            operation: operation.unwrap_or("").to_owned(),
            time: time.and_then(|t| DateTime::parse_from_rfc3339(t).ok()).map(|t| t.with_timezone(&Utc)),
            subresource: subresource.map(str::to_owned),
        });
        bit
    }

    /// The managers, in the order of their entries; a manager's bit in an owner set is `1 <<`
    /// its index here.
    pub fn managers(&self) -> &[Attribution] {
        &self.managers
    }

    /// The managers (as a bit set over [`ManagedFields::managers`]) that own `path`: those
    /// owning it or something under it, or owning an ancestor as a whole.
    pub fn owners(&self, path: &Path) -> u64 {
        self.owners_of_segments(path.segments())
    }

    /// [`ManagedFields::owners`] of a path given as segments (owned or borrowed).
    pub fn owners_of_segments<S: SegView>(&self, segments: &[S]) -> u64 {
        self.owners_at(segments.iter().fold(OwnersAt::ROOT, |at, seg| self.step(at, seg)))
    }

    /// One segment further down the ownership tree from `from` (a walk that asks about many
    /// paths under one parent steps to the parent once).
    pub fn step<S: SegView>(&self, from: OwnersAt, seg: &S) -> OwnersAt {
        let OwnersAt::At { at, whole } = from else { return from };
        let nodes = &self.nodes;
        let whole = whole | nodes.0[at].whole;
        let found = match (seg.field(), seg.item()) {
            (Some(f), _) => nodes.children(at).find(|&c| matches!(&nodes.0[c].key, Key::Field(n) if n == f)),
            (None, Some((key, _, _))) if !key.is_empty() => nodes.children(at).find(|&c| nodes.0[c].key.is_item(key)),
            _ => return OwnersAt::Done(whole | nodes.0[at].any),
        };
        match found {
            Some(c) => OwnersAt::At { at: c, whole },
            None => OwnersAt::Done(whole),
        }
    }

    /// The managers owning the path a walk of [`ManagedFields::step`]s reached.
    pub fn owners_at(&self, at: OwnersAt) -> u64 {
        match at {
            OwnersAt::At { at, whole } => whole | self.nodes.0[at].any,
            OwnersAt::Done(owners) => owners,
        }
    }
}

/// JSON text as [`ManagedFields::read`] reads it, a value at a time: implemented here by a cursor
/// over text a reader already checked (which trusts it), and by `drift_manifest`'s JSON reader,
/// which checks the text as it goes (so that a live object's managedFields are read once). Each
/// method is called with the cursor at a value (whitespace before it skipped by the method) and
/// leaves it after that value; `None` is a fault (for a checking reader: text that is not JSON).
pub trait FieldsText<'a> {
    /// The first byte of the value at the cursor, not stepped over.
    fn next_byte(&mut self) -> Option<u8>;
    /// Steps over the value at the cursor.
    fn step_over(&mut self) -> Option<()>;
    /// The string at the cursor, unescaped (borrowed from the text when it has no escapes).
    fn read_string(&mut self) -> Option<Cow<'a, str>>;
    /// The members of the mapping at the cursor: `each` gets each member's name as it stands
    /// between its quotes in the text, and whether it holds an escape, with the cursor at the
    /// member's value, which `each` reads or steps over.
    fn members(&mut self, each: impl FnMut(&mut Self, &'a str, bool) -> Option<()>) -> Option<()>;
    /// The items of the list at the cursor: `each` reads or steps over each.
    fn items(&mut self, each: impl FnMut(&mut Self) -> Option<()>) -> Option<()>;
    /// About how many bytes of text the list may hold, to size the tree's first allocation (the
    /// rest of a whole document will do: room not used is not touched), none when not known.
    fn size_hint(&self) -> usize {
        0
    }
}

/// What an entry of managedFields says of its write: each string as written (a value that is no
/// string counts as none; of a key written twice, the later).
#[derive(Default)]
struct Entry<'a> {
    manager: Option<Cow<'a, str>>,
    operation: Option<Cow<'a, str>>,
    time: Option<Cow<'a, str>>,
    subresource: Option<Cow<'a, str>>,
}

/// The entry at the cursor (a mapping), `fields` called at each of its `fieldsV1` to read or
/// step over it.
fn entry<'a, T: FieldsText<'a>>(t: &mut T, mut fields: impl FnMut(&mut T) -> Option<()>) -> Option<Entry<'a>> {
    let mut e = Entry::default();
    t.members(|t, raw, escaped| {
        let key = if escaped { Cow::Owned(unescaped(raw)?) } else { Cow::Borrowed(raw) };
        match &*key {
            "manager" => e.manager = string_value(t)?,
            "operation" => e.operation = string_value(t)?,
            "time" => e.time = string_value(t)?,
            "subresource" => e.subresource = string_value(t)?,
            "fieldsV1" => fields(t)?,
            _ => t.step_over()?,
        }
        Some(())
    })?;
    Some(e)
}

/// A value that counts only as a string (as `Value::as_str` reads it): the string, or
/// `Some(None)` for any other value, stepped over.
fn string_value<'a, T: FieldsText<'a>>(t: &mut T) -> Option<Option<Cow<'a, str>>> {
    if t.next_byte()? == b'"' { t.read_string().map(Some) } else { t.step_over().map(|()| None) }
}

/// The content of a string whose text between the quotes is `raw`.
fn unescaped(raw: &str) -> Option<String> {
    unescape(raw).or_else(|| serde_json::from_str::<String>(&format!("\"{raw}\"")).ok())
}

/// A FieldsV1 key, borrowed from the live object: `f:name` as the name, `k:{...}` as its key
/// fields and their values (in the text's order; compared as a set), anything else (`v:`, `i:`,
/// a key that does not parse) as written, which no path segment matches.
#[derive(Debug, Clone, PartialEq)]
enum Key<'a> {
    Field(Cow<'a, str>),
    Item(Vec<(Cow<'a, str>, Cow<'a, str>)>),
    Other(Cow<'a, str>),
}

impl<'a> Key<'a> {
    fn of(k: &'a str) -> Self {
        if let Some(name) = k.strip_prefix("f:") {
            return Key::Field(Cow::Borrowed(name));
        }
        if let Some(json) = k.strip_prefix("k:") {
            if let Some(pairs) = flat_pairs(json) {
                return Key::Item(pairs);
            }
            if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(json) {
                let pairs = m
                    .iter()
                    .map(|(k, v)| (Cow::Owned(k.clone()), Cow::Owned(scalar_text(v).unwrap_or_else(|| v.to_string()))))
                    .collect();
                return Key::Item(pairs);
            }
        }
        Key::Other(Cow::Borrowed(k))
    }

    /// The key with nothing borrowed (of a name that had escapes in the text it was read from).
    fn into_owned(self) -> Key<'static> {
        let own = |c: Cow<'_, str>| Cow::Owned(c.into_owned());
        match self {
            Key::Field(f) => Key::Field(own(f)),
            Key::Item(pairs) => Key::Item(pairs.into_iter().map(|(k, v)| (own(k), own(v))).collect()),
            Key::Other(o) => Key::Other(own(o)),
        }
    }

    /// Whether this key is the same as another written differently (key fields in another order).
    fn same(&self, other: &Key<'_>) -> bool {
        match (self, other) {
            (Key::Field(a), Key::Field(b)) | (Key::Other(a), Key::Other(b)) => a == b,
            (Key::Item(a), Key::Item(b)) => {
                a.len() == b.len() && b.iter().all(|(k, v)| a.iter().any(|(ak, av)| ak == k && av == v))
            }
            _ => false,
        }
    }

    fn is_item(&self, key: &[(String, String)]) -> bool {
        match self {
            Key::Item(pairs) => {
                pairs.len() == key.len()
                    && key.iter().all(|(k, v)| pairs.iter().any(|(pk, pv)| pk == k.as_str() && pv == v.as_str()))
            }
            _ => false,
        }
    }
}

/// The fields of a flat JSON object as the API server writes FieldsV1 item keys
/// (`{"containerPort":80,"protocol":"TCP"}`), borrowed: string values without escapes and
/// integers written as serde_json writes them back, else `None` (and the caller parses the
/// JSON in full).
fn flat_pairs(json: &str) -> Option<Vec<(Cow<'_, str>, Cow<'_, str>)>> {
    flat_pairs_quoted(json, "\"")
}

/// [`flat_pairs`] of an item key as it stands inside a JSON string of the managedFields text,
/// its quotes escaped (`{\"name\":\"web\"}`), borrowed from that text without unescaping it
/// first: `None` when a name or value has any other escape.
fn flat_pairs_escaped(raw: &str) -> Option<Vec<(Cow<'_, str>, Cow<'_, str>)>> {
    flat_pairs_quoted(raw, "\\\"")
}

/// [`flat_pairs`] with strings between `quote`s (`"`, or `\"` within a JSON string).
fn flat_pairs_quoted<'j>(json: &'j str, quote: &str) -> Option<Vec<(Cow<'j, str>, Cow<'j, str>)>> {
    // The content of a string at the start of `s` and the rest after it; none with escapes.
    let string = |s: &'j str| -> Option<(&'j str, &'j str)> {
        let body = s.strip_prefix(quote)?;
        // (Byte by byte: a character search decodes each character, and these are short.)
        let end = body.bytes().position(|b| b == b'"' || b == b'\\')?;
        body[end..].starts_with(quote).then(|| (&body[..end], &body[end + quote.len()..]))
    };
    let mut rest = json.strip_prefix('{')?.strip_suffix('}')?;
    let mut pairs = Vec::with_capacity(2);
    loop {
        let (key, after) = string(rest)?;
        rest = after.strip_prefix(':')?;
        let value = if rest.starts_with(quote) {
            let (v, after) = string(rest)?;
            rest = after;
            v
        } else {
            let end = rest.bytes().position(|b| b == b',' || b == b'}').unwrap_or(rest.len());
            let v = &rest[..end];
            let digits = v.strip_prefix('-').unwrap_or(v);
            let integer = !digits.is_empty()
                && digits.len() < 19
                && digits.bytes().all(|c| c.is_ascii_digit())
                && (digits == "0" || !digits.starts_with('0'))
                && v != "-0";
            if !(integer || v == "true" || v == "false" || v == "null") {
                return None;
            }
            rest = &rest[end..];
            v
        };
        pairs.push((Cow::Borrowed(key), Cow::Borrowed(value)));
        match rest.strip_prefix(',') {
            Some(r) => rest = r,
            None if rest.is_empty() => return Some(pairs),
            None => return None,
        }
    }
}

/// A node of the ownership tree, in [`Nodes`]: its children are found from its first child
/// along their `next` links (fan-out is small: a walk along them beats a hash map here).
#[derive(Debug, Clone, PartialEq)]
struct Node<'a> {
    /// Its FieldsV1 key under its parent (the root's is empty).
    key: Key<'a>,
    /// Managers whose set holds this node as a leaf (the whole value).
    whole: u64,
    /// Managers with any entry at or below this node.
    any: u64,
    /// Its first and last child and its next sibling, as indices into [`Nodes`] (`0`, the root,
    /// is nobody's child: none).
    first: usize,
    last: usize,
    next: usize,
}

/// The nodes of an ownership tree in one vector, the root first: one allocation for the tree,
/// not one for each node's children.
#[derive(Debug, Clone, PartialEq)]
struct Nodes<'a>(Vec<Node<'a>>);

impl<'a> Nodes<'a> {
    /// A tree with its root alone, with room for about `capacity` nodes.
    fn with_root(capacity: usize) -> Self {
        let mut nodes = Vec::with_capacity(capacity.max(1));
        nodes.push(Node { key: Key::Other(Cow::Borrowed("")), whole: 0, any: 0, first: 0, last: 0, next: 0 });
        Nodes(nodes)
    }

    /// The children of the node at `at`, as indices.
    fn children(&self, at: usize) -> impl Iterator<Item = usize> + '_ {
        std::iter::successors(Some(self.0[at].first).filter(|&c| c != 0), |&c| Some(self.0[c].next).filter(|&n| n != 0))
    }

    /// The child of the node at `at` whose key is `key` (written in any order), made when it has
    /// none.
    fn child(&mut self, at: usize, key: Key<'a>) -> usize {
        if let Some(c) = self.children(at).find(|&c| self.0[c].key.same(&key)) {
            return c;
        }
        let c = self.0.len();
        self.0.push(Node { key, whole: 0, any: 0, first: 0, last: 0, next: 0 });
        match self.0[at].last {
            0 => self.0[at].first = c,
            last => self.0[last].next = c,
        }
        self.0[at].last = c;
        c
    }
}

impl Default for Nodes<'_> {
    fn default() -> Self {
        Nodes::with_root(1)
    }
}

/// Where a walk down an ownership tree stands ([`ManagedFields::step`]): at a node, with the
/// managers owning one of its ancestors as a whole, or past the last node the path reaches, with
/// the owners of the path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OwnersAt {
    /// At a node (an index into the tree), with the managers owning one of its ancestors as a
    /// whole.
    At {
        /// The node.
        at: usize,
        /// The managers owning one of its ancestors as a whole.
        whole: u64,
    },
    /// Past the last node the path reaches, with the owners of the path.
    Done(u64),
}

impl OwnersAt {
    /// The root, where every walk starts.
    pub const ROOT: OwnersAt = OwnersAt::At { at: 0, whole: 0 };
}

/// Adds FieldsV1 given as a tree under the node at `at`, for the manager of `bit`.
fn insert<'a>(nodes: &mut Nodes<'a>, at: usize, fields: impl JsonView<'a>, bit: u64) {
    nodes.0[at].any |= bit;
    if fields.shape() != Shape::Object {
        return;
    }
    let mut leaf = true;
    for (k, v) in fields.fields().filter(|(k, _)| *k != ".") {
        leaf = false;
        let c = nodes.child(at, Key::of(k));
        insert(nodes, c, v, bit);
    }
    if leaf {
        nodes.0[at].whole |= bit;
    }
}

/// [`insert`] of FieldsV1 given as JSON text (the cursor at the value), its names borrowed from
/// the text where they have no escapes.
fn insert_text<'a, T: FieldsText<'a>>(nodes: &mut Nodes<'a>, at: usize, t: &mut T, bit: u64) -> Option<()> {
    nodes.0[at].any |= bit;
    if t.next_byte()? != b'{' {
        return t.step_over();
    }
    let mut leaf = true;
    t.members(|t, raw, escaped| {
        // An item key's quotes are escaped in the text (`k:{\"name\":\"web\"}`): its fields are
        // read from the text as they stand; any other name with escapes is unescaped first.
        let fast = if escaped { raw.strip_prefix("k:").and_then(flat_pairs_escaped).map(Key::Item) } else { None };
        let key = match fast {
            Some(key) => key,
            None if !escaped => {
                if raw == "." {
                    return t.step_over();
                }
                Key::of(raw)
            }
            None => {
                let name = unescaped(raw)?;
                if name == "." {
                    return t.step_over();
                }
                Key::of(&name).into_owned()
            }
        };
        leaf = false;
        let c = nodes.child(at, key);
        insert_text(nodes, c, t, bit)
    })?;
    if leaf {
        nodes.0[at].whole |= bit;
    }
    Some(())
}

/// The content of a JSON string whose only escapes are `\"`, `\\` and `\/` (the item keys of
/// FieldsV1: `k:{\"name\":\"web\"}`); `None` for any other escape.
fn unescape(raw: &str) -> Option<String> {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        out.push(match rest.as_bytes().get(i + 1)? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            _ => return None,
        });
        rest = rest.get(i + 2..)?;
    }
    out.push_str(rest);
    Some(out)
}

/// A cursor over JSON text that a reader has already checked (managedFields kept as text); on
/// anything else it stops with `None` rather than guess.
#[derive(Clone, Copy)]
struct Text<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Text<'a> {
    fn skip_whitespace(&mut self) {
        const SPACES: u64 = u64::from_le_bytes([b' '; 8]);
        while let Some(&b) = self.bytes.get(self.pos) {
            match b {
                b' ' => {
                    self.pos += 1;
                    // Indentation comes in runs: eight bytes at a time.
                    while let Some(eight) = self.bytes.get(self.pos..self.pos + 8) {
                        let mut x = [0; 8];
                        x.copy_from_slice(eight);
                        let other = u64::from_le_bytes(x) ^ SPACES;
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

    /// The next byte after whitespace.
    fn peek(&mut self) -> Option<u8> {
        self.skip_whitespace();
        self.bytes.get(self.pos).copied()
    }

    /// Steps over `c` when it comes next.
    fn eat(&mut self, c: u8) -> bool {
        let found = self.peek() == Some(c);
        if found {
            self.pos += 1;
        }
        found
    }

    /// Steps over a string (at its opening quote); whether it had escapes.
    fn skip_string(&mut self) -> Option<bool> {
        if !self.eat(b'"') {
            return None;
        }
        const ONES: u64 = u64::from_le_bytes([1; 8]);
        const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
        const QUOTES: u64 = u64::from_le_bytes([b'"'; 8]);
        const BACKSLASHES: u64 = u64::from_le_bytes([b'\\'; 8]);
        // The high bit of each zero byte of `x`, exact up to the first one.
        let zeros = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
        let mut escaped = false;
        loop {
            // Eight bytes at a time to the next quote or backslash.
            while let Some(eight) = self.bytes.get(self.pos..self.pos + 8) {
                let mut x = [0; 8];
                x.copy_from_slice(eight);
                let x = u64::from_le_bytes(x);
                let found = zeros(x ^ QUOTES) | zeros(x ^ BACKSLASHES);
                if found != 0 {
                    self.pos += (found.trailing_zeros() / 8) as usize;
                    break;
                }
                self.pos += 8;
            }
            match self.bytes.get(self.pos)? {
                b'"' => {
                    self.pos += 1;
                    return Some(escaped);
                }
                b'\\' => {
                    escaped = true;
                    self.pos += 2;
                }
                _ => self.pos += 1,
            }
        }
    }

    /// A string as it stands between its quotes in the text, and whether it has escapes.
    fn raw_string(&mut self) -> Option<(&'a str, bool)> {
        self.skip_whitespace();
        let start = self.pos;
        let escaped = self.skip_string()?;
        Some((self.text.get(start + 1..self.pos - 1)?, escaped))
    }
}

impl<'a> FieldsText<'a> for Text<'a> {
    fn next_byte(&mut self) -> Option<u8> {
        self.peek()
    }

    fn read_string(&mut self) -> Option<Cow<'a, str>> {
        let (raw, escaped) = self.raw_string()?;
        if escaped { unescaped(raw).map(Cow::Owned) } else { Some(Cow::Borrowed(raw)) }
    }

    /// Steps over a value.
    fn step_over(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.skip_string().map(drop),
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match self.bytes.get(self.pos)? {
                        b'"' => {
                            self.skip_string()?;
                        }
                        b'{' | b'[' => {
                            depth += 1;
                            self.pos += 1;
                        }
                        b'}' | b']' => {
                            depth -= 1;
                            self.pos += 1;
                            if depth == 0 {
                                return Some(());
                            }
                        }
                        _ => self.pos += 1,
                    }
                }
            }
            _ => {
                let start = self.pos;
                while self.bytes.get(self.pos).is_some_and(|b| !b",}] \n\t\r".contains(b)) {
                    self.pos += 1;
                }
                (self.pos > start).then_some(())
            }
        }
    }

    fn members(&mut self, mut each: impl FnMut(&mut Self, &'a str, bool) -> Option<()>) -> Option<()> {
        if !self.eat(b'{') {
            return None;
        }
        if self.eat(b'}') {
            return Some(());
        }
        loop {
            let (key, escaped) = self.raw_string()?;
            if !self.eat(b':') {
                return None;
            }
            each(self, key, escaped)?;
            if !self.eat(b',') {
                return self.eat(b'}').then_some(());
            }
        }
    }

    fn items(&mut self, mut each: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        if !self.eat(b'[') {
            return None;
        }
        if self.eat(b']') {
            return Some(());
        }
        loop {
            each(self)?;
            if !self.eat(b',') {
                return self.eat(b']').then_some(());
            }
        }
    }

    fn size_hint(&self) -> usize {
        self.bytes.len() - self.pos.min(self.bytes.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn item_keys_read_without_parsing_equal_the_parsed_ones() {
        for k in [
            r#"{"name":"web"}"#,
            r#"{"containerPort":80,"protocol":"TCP"}"#,
            r#"{"port":-8,"b":true,"c":null,"d":"","e":0}"#,
            r#"{"a":1.5}"#,
            r#"{"a":1e3}"#,
            r#"{"a":-0}"#,
            r#"{"a":007}"#,
            r#"{"a":12345678901234567890}"#,
            r#"{"a\"b":"c"}"#,
            r#"{"a":"\u0041"}"#,
            r#"{ "a": 1 }"#,
            r#"{"a":{"b":1}}"#,
            r#"{}"#,
            "{",
        ] {
            let parsed = match serde_json::from_str::<Value>(k) {
                Ok(Value::Object(m)) => Some(
                    m.iter()
                        .map(|(k, v)| (k.clone(), scalar_text(v).unwrap_or_else(|| v.to_string())))
                        .collect::<Vec<_>>(),
                ),
                _ => None,
            };
            let fast = flat_pairs(k);
            // As the key stands in the managedFields text: its quotes escaped.
            let written = serde_json::to_string(k).unwrap();
            let in_text = flat_pairs_escaped(&written[1..written.len() - 1]);
            assert!(in_text.is_none() || in_text == fast, "{k}: {in_text:?} {fast:?}");
            if k.bytes().all(|b| b >= 0x20) {
                assert_eq!(in_text.is_some(), fast.is_some(), "{k}");
            }
            if let Some(fast) = &fast {
                let mut fast: Vec<(String, String)> =
                    fast.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
                fast.sort();
                assert_eq!(Some(fast), parsed, "{k}");
            }
            let key = Key::of(Box::leak(format!("k:{k}").into_boxed_str()));
            match parsed {
                Some(pairs) => {
                    assert!(matches!(&key, Key::Item(_)) && (pairs.is_empty() || key.is_item(&pairs)), "{k}: {key:?}")
                }
                None => assert!(matches!(key, Key::Other(_)), "{k}: {key:?}"),
            }
        }
        assert!(flat_pairs(r#"{"name":"web"}"#).is_some(), "the common form is read without parsing");
        assert!(flat_pairs(r#"{"containerPort":80,"protocol":"TCP"}"#).is_some());
    }

    /// Each node of an ownership tree as (path of keys, whole, any), sorted: the tree whatever
    /// the order its children were met in.
    fn nodes(o: &ManagedFields<'_>) -> Vec<(String, u64, u64)> {
        fn walk(nodes: &Nodes<'_>, i: usize, at: String, out: &mut Vec<(String, u64, u64)>) {
            out.push((at.clone(), nodes.0[i].whole, nodes.0[i].any));
            for c in nodes.children(i) {
                let name = match &nodes.0[c].key {
                    Key::Item(pairs) => {
                        let mut pairs = pairs.clone();
                        pairs.sort();
                        format!("{pairs:?}")
                    }
                    other => format!("{other:?}"),
                };
                walk(nodes, c, format!("{at}/{name}"), out);
            }
        }
        let mut out = Vec::new();
        walk(&o.nodes, 0, String::new(), &mut out);
        out.sort();
        out
    }

    /// `metadata.managedFields` as a tree and as its text (compact or indented).
    fn both_forms(fields: &Value) -> [Value; 3] {
        [
            fields.clone(),
            Value::String(fields.to_string()),
            Value::String(serde_json::to_string_pretty(fields).unwrap()),
        ]
    }

    fn fields_v1() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let key = prop_oneof![
            Just("f:spec"),
            Just("f:replicas"),
            Just("f:containers"),
            Just("."),
            Just("k:{\"name\":\"web\"}"),
            Just("k:{\"protocol\":\"TCP\",\"port\":80}"),
            Just("k:{\"port\":80,\"protocol\":\"TCP\"}"),
            Just("k:{\"a\":\"\\u0041\\\"\"}"),
            Just("k:{not json"),
            Just("v:\"x\""),
            Just("f:we\"ird\\/\u{e9}"),
            Just("f:"),
        ];
        let leaf = prop_oneof![
            3 => Just(json!({})),
            1 => Just(json!({".": {}})),
            1 => Just(json!(null)),
            1 => Just(json!([1, {"f:x": {}}])),
            1 => Just(json!("f:x")),
        ];
        leaf.prop_recursive(4, 40, 5, move |inner| {
            proptest::collection::vec((key.clone(), inner), 0..5)
                .prop_map(|entries| Value::Object(entries.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
        })
    }

    fn entry() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let text = |options: &'static [&'static str]| {
            proptest::sample::select(options).prop_map(|s| if s == "-" { json!(7) } else { json!(s) })
        };
        (
            proptest::option::of(text(&[
                "kubectl-edit",
                "argocd-controller",
                "kube-controller-manager",
                "my \"tool\"",
                "-",
            ])),
            proptest::option::of(text(&["Update", "Apply", "-"])),
            proptest::option::of(text(&["2026-01-01T00:00:00Z", "2026-01-02T10:00:00+02:00", "yesterday", "-"])),
            proptest::option::of(text(&["status", "scale", "", "-"])),
            proptest::option::of(fields_v1()),
            any::<bool>(),
        )
            .prop_map(|(manager, operation, time, subresource, fields, object)| {
                if !object {
                    return json!(["not", "an", "entry"]);
                }
                let mut e = serde_json::Map::new();
                e.insert("apiVersion".into(), json!("apps/v1"));
                e.insert("fieldsType".into(), json!("FieldsV1"));
                for (k, v) in [
                    ("manager", manager),
                    ("operation", operation),
                    ("time", time),
                    ("subresource", subresource),
                    ("fieldsV1", fields),
                ] {
                    if let Some(v) = v {
                        e.insert(k.into(), v);
                    }
                }
                Value::Object(e)
            })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// managedFields kept as text (how the live reader keeps them) give the ownership the
        /// tree gives: the same managers in the same order, the same nodes, the same owners.
        #[test]
        fn ownership_from_the_text_is_the_ownership_from_the_tree(
            entries in proptest::collection::vec(entry(), 0..6),
        ) {
            let fields = Value::Array(entries);
            let [tree, compact, indented] = both_forms(&fields);
            let expected = ManagedFields::of_view(&tree);
            for object in [&compact, &indented] {
                let got = ManagedFields::of_view(object);
                proptest::prop_assert_eq!(&got.managers, &expected.managers);
                proptest::prop_assert_eq!(nodes(&got), nodes(&expected));
            }
        }
    }

    #[test]
    fn ownership_from_the_text_keeps_the_first_64_entries_and_stops_at_a_fault() {
        let entries: Vec<Value> =
            (0..70).map(|i| json!({"manager": format!("m{i}"), "fieldsV1": {format!("f:f{i}"): {}}})).collect();
        let fields = Value::Array(entries);
        let [tree, compact, indented] = both_forms(&fields);
        let expected = ManagedFields::of_view(&tree);
        assert_eq!(expected.managers.len(), 64);
        for object in [&compact, &indented] {
            let got = ManagedFields::of_view(object);
            assert_eq!(got.managers, expected.managers);
            assert_eq!(nodes(&got), nodes(&expected));
        }
        // Text that is no list, or breaks off, gives what was read before the fault.
        let text = fields.to_string();
        let cut = json!(&text[..text.find("m1\"").unwrap()]);
        assert_eq!(ManagedFields::of_view(&cut).managers.len(), 1);
        for odd in ["", "{}", "nope", "[", "[{", "[]", "[1,2]"] {
            assert!(ManagedFields::of_view(&json!(odd)).managers.is_empty(), "{odd:?}");
        }
    }
}
