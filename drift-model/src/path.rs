//! Paths of fields inside an object: dotted fields with keyed list items in brackets,
//! `spec.template.spec.containers[name=web].resources.limits.memory`.

use std::fmt;

use serde_json::Value;

use crate::tree::{JsonView, Shape};

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Seg {
    /// A field of a mapping.
    Field(String),
    /// An item of a list: by merge key when the list has one, else by position.
    Item {
        /// Merge-key fields and their values (`name=web`), in the rule's order; empty for
        /// positional lists.
        key: Vec<(String, String)>,
        /// Key fields whose value is the default (`protocol=TCP`): not shown.
        hidden: Vec<bool>,
        /// Index of the item in the desired list (or in the live list for an item only the
        /// cluster has).
        index: usize,
    },
}

/// A segment borrowed from the object being walked (no allocation per field); turned into a
/// [`Seg`] only when a difference is recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SegRef<'a> {
    /// A field of a mapping.
    Field(&'a str),
    /// A list item (see [`Seg::Item`]).
    Item {
        /// Merge-key fields and values.
        key: Vec<(String, String)>,
        /// Key fields equal to their default.
        hidden: Vec<bool>,
        /// Index.
        index: usize,
    },
}

impl SegRef<'_> {
    /// The owned segment.
    pub fn to_seg(&self) -> Seg {
        match self {
            SegRef::Field(f) => Seg::Field((*f).to_owned()),
            SegRef::Item { key, hidden, index } => {
                Seg::Item { key: key.clone(), hidden: hidden.clone(), index: *index }
            }
        }
    }
}

/// A list item seen through [`SegView::item`]: merge key, hidden flags, index.
pub type ItemView<'s> = (&'s [(String, String)], &'s [bool], usize);

/// Read access to a segment, owned or borrowed.
pub trait SegView {
    /// The field name, for a field.
    fn field(&self) -> Option<&str>;
    /// Key, hidden flags and index, for a list item.
    fn item(&self) -> Option<ItemView<'_>>;
}

impl SegView for Seg {
    fn field(&self) -> Option<&str> {
        match self {
            Seg::Field(f) => Some(f),
            Seg::Item { .. } => None,
        }
    }
    fn item(&self) -> Option<ItemView<'_>> {
        match self {
            Seg::Item { key, hidden, index } => Some((key, hidden, *index)),
            Seg::Field(_) => None,
        }
    }
}

impl SegView for SegRef<'_> {
    fn field(&self) -> Option<&str> {
        match self {
            SegRef::Field(f) => Some(f),
            SegRef::Item { .. } => None,
        }
    }
    fn item(&self) -> Option<ItemView<'_>> {
        match self {
            SegRef::Item { key, hidden, index } => Some((key, hidden, *index)),
            SegRef::Field(_) => None,
        }
    }
}

/// A path: a list of segments.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Path(pub Vec<Seg>);

impl Path {
    /// The empty path (the whole object).
    pub fn root() -> Self {
        Path(Vec::new())
    }
    /// This path plus a field.
    pub fn field(&self, name: &str) -> Self {
        let mut v = self.0.clone();
        v.push(Seg::Field(name.to_owned()));
        Path(v)
    }
    /// This path plus a list item.
    pub fn item(&self, key: Vec<(String, String)>, hidden: Vec<bool>, index: usize) -> Self {
        let mut v = self.0.clone();
        v.push(Seg::Item { key, hidden, index });
        Path(v)
    }
    /// The segments.
    pub fn segments(&self) -> &[Seg] {
        &self.0
    }
    /// Whether `self` starts with `prefix`.
    pub fn starts_with(&self, prefix: &Path) -> bool {
        self.0.len() >= prefix.0.len() && self.0.iter().zip(&prefix.0).all(|(a, b)| a == b)
    }
    /// The path with list items by index (`containers[0]`), as `expect.json` files and
    /// kubectl-style tools write them.
    pub fn to_index_form(&self) -> String {
        let mut s = String::new();
        for seg in &self.0 {
            match seg {
                Seg::Field(f) => {
                    if !s.is_empty() {
                        s.push('.');
                    }
                    s.push_str(f);
                }
                Seg::Item { index, .. } => {
                    s.push_str(&format!("[{index}]"));
                }
            }
        }
        s
    }
    /// Whether a JSON pointer (RFC 6901; list items by index, by `*`, or by `name=value`)
    /// names this path or one of its ancestors.
    ///
    /// ```
    /// use drift_model::path::Path;
    /// let p = Path::root().field("spec").field("template").field("spec").field("containers")
    ///     .item(vec![("name".into(), "web".into())], vec![false], 0).field("image");
    /// assert!(p.matches_pointer("/spec/template/spec/containers/0/image"));
    /// assert!(p.matches_pointer("/spec/template/spec/containers/name=web"));
    /// assert!(p.matches_pointer("/spec/template"));
    /// assert!(!p.matches_pointer("/spec/template/spec/containers/1"));
    /// ```
    pub fn matches_pointer(&self, pointer: &str) -> bool {
        let Some(rest) = pointer.strip_prefix('/') else {
            return pointer.is_empty();
        };
        let tokens: Vec<String> = rest.split('/').map(|t| t.replace("~1", "/").replace("~0", "~")).collect();
        if tokens.len() > self.0.len() {
            return false;
        }
        tokens.iter().zip(&self.0).all(|(t, seg)| match seg {
            Seg::Field(f) => t == "*" || t == f,
            Seg::Item { key, index, .. } => {
                t == "*"
                    || *t == index.to_string()
                    || (!key.is_empty()
                        && *t == key.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(","))
            }
        })
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for seg in &self.0 {
            match seg {
                Seg::Field(name) => {
                    if !first {
                        f.write_str(".")?;
                    }
                    f.write_str(name)?;
                }
                Seg::Item { key, hidden, index } => {
                    if key.is_empty() {
                        write!(f, "[{index}]")?;
                    } else {
                        f.write_str("[")?;
                        let shown =
                            key.iter().zip(hidden.iter().chain(std::iter::repeat(&false))).filter(|(_, h)| !**h);
                        for (i, ((k, v), _)) in shown.enumerate() {
                            if i > 0 {
                                f.write_str(",")?;
                            }
                            f.write_str(k)?;
                            f.write_str("=")?;
                            f.write_str(v)?;
                        }
                        f.write_str("]")?;
                    }
                }
            }
            first = false;
        }
        Ok(())
    }
}

/// The text of a scalar used in keys (`80`, `web`, `true`).
pub fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The value at a path in a (normalised) object, matching keyed items by their key fields.
pub fn lookup<'v>(root: &'v Value, path: &Path) -> Option<&'v Value> {
    lookup_segments(root, path.segments())
}

/// [`lookup`] of a path given as segments (owned or borrowed).
pub fn lookup_segments<'v, S: SegView>(root: &'v Value, segments: &[S]) -> Option<&'v Value> {
    lookup_view(root, segments)
}

/// Whether a list item's key fields read as `key` (`(field, text)` pairs, as a path names an
/// item): each field's scalar text, or, for a field the item lacks, its default filled in where
/// `hidden` says so.
pub fn item_is<'a>(item: impl JsonView<'a>, key: &[(String, String)], hidden: &[bool]) -> bool {
    key.iter().zip(hidden.iter().chain(std::iter::repeat(&false))).all(|((k, want), h)| {
        match item.get(k).filter(|x| !x.is_null()) {
            Some(x) => match x.as_str() {
                Some(s) => s == want,
                None => scalar_text(&x.to_value()).as_deref() == Some(want.as_str()),
            },
            None => *h,
        }
    })
}

/// [`lookup_segments`] in a document read through [`JsonView`] (a `Value`, or a tree that
/// borrows its text).
pub fn lookup_view<'a, V: JsonView<'a>, S: SegView>(root: V, segments: &[S]) -> Option<V> {
    let mut v = root;
    for seg in segments {
        v = match (seg.field(), seg.item()) {
            (Some(f), _) => v.get(f)?,
            (None, Some((key, hidden, _))) if !key.is_empty() => {
                if v.shape() != Shape::Array {
                    return None;
                }
                (0..v.len()).filter_map(|i| v.item(i)).find(|item| item_is(*item, key, hidden))?
            }
            (None, Some((_, _, index))) if v.shape() == Shape::Array => v.item(index)?,
            (None, Some(_)) | (None, None) => return None,
        };
    }
    (!v.is_null()).then_some(v)
}
