//! A JSON document read into one arena, its keys and strings borrowed from the text it was read
//! from ([`Tree`]), and what the engine's walk reads of a document, the same for a
//! [`serde_json::Value`] and for a tree ([`JsonView`]).
//!
//! A `serde_json::Value` owns a `String` for every key and string and a B-tree node for every
//! mapping: reading a live object of 27 KB of JSON into one allocates about a thousand times,
//! and dropping it frees them again, for a tree that is compared once and thrown away. A
//! [`Tree`] holds the same document in three vectors (its nodes, the fields of its mappings,
//! the items of its lists), its keys and strings borrowed from the text unless they hold an
//! escape. Each mapping's fields are sorted by key when it is closed, a repeated key counting
//! once with its last value, as `serde_json::Map` does, so that a tree reads back as the
//! `Value` serde_json would have made ([`Tree::to_value`]).
//!
//! ```
//! use drift_model::tree::{JsonView, TreeBuilder};
//! let mut b = TreeBuilder::new();
//! let mark = b.object_start();
//! let one = b.number(1.into());
//! b.member("b".into(), one);
//! let web = b.string("web".into());
//! b.member("a".into(), web);
//! let root = b.object_end(mark);
//! let tree = b.finish(root);
//! let fields: Vec<&str> = tree.root().fields().map(|(k, _)| k).collect();
//! assert_eq!(fields, ["a", "b"]);
//! assert_eq!(tree.to_value(), serde_json::json!({"a": "web", "b": 1}));
//! ```

use std::borrow::Cow;

use serde_json::{Map, Number, Value};

use crate::fields::ManagedFields;
use crate::{Provenance, Resource, ResourceKey};

/// What a node of a document is, as [`JsonView::shape`] says: a scalar with its value, or
/// which kind of container.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape<'a> {
    /// `null`.
    Null,
    /// A boolean.
    Bool(bool),
    /// A number.
    Number(&'a Number),
    /// A string.
    String(&'a str),
    /// A mapping ([`JsonView::fields`], [`JsonView::get`]).
    Object,
    /// A list ([`JsonView::len`], [`JsonView::item`]).
    Array,
}

/// A node of a JSON document, read without copying: a `&serde_json::Value`, or a node of a
/// [`Tree`]. Both answer alike for the same document (a property test holds them so).
pub trait JsonView<'a>: Copy + std::fmt::Debug {
    /// The fields of a mapping, in the order of their keys.
    type Fields: Iterator<Item = (&'a str, Self)>;

    /// What this node is.
    fn shape(self) -> Shape<'a>;

    /// A mapping's fields in the order of their keys; nothing for any other node.
    fn fields(self) -> Self::Fields;

    /// A mapping's field `key`.
    fn get(self, key: &str) -> Option<Self>;

    /// How many items a list has, or fields a mapping; 0 for a scalar.
    fn len(self) -> usize;

    /// A list's item `i`.
    fn item(self, i: usize) -> Option<Self>;

    /// The node as a `serde_json::Value` (a copy).
    fn to_value(self) -> Value;

    /// Whether it is `null`.
    fn is_null(self) -> bool {
        matches!(self.shape(), Shape::Null)
    }

    /// Whether it is an empty container (a scalar is not).
    fn is_empty(self) -> bool {
        matches!(self.shape(), Shape::Object | Shape::Array) && self.len() == 0
    }

    /// The string it holds.
    fn as_str(self) -> Option<&'a str> {
        match self.shape() {
            Shape::String(s) => Some(s),
            _ => None,
        }
    }

    /// Whether it equals `v` (as `Value`'s `==` compares).
    fn equals(self, v: &Value) -> bool {
        match (self.shape(), v) {
            (Shape::Null, Value::Null) => true,
            (Shape::Bool(a), Value::Bool(b)) => a == *b,
            (Shape::Number(a), Value::Number(b)) => a == b,
            (Shape::String(a), Value::String(b)) => a == b,
            (Shape::Array, Value::Array(items)) => {
                self.len() == items.len()
                    && items.iter().enumerate().all(|(i, b)| self.item(i).is_some_and(|a| a.equals(b)))
            }
            (Shape::Object, Value::Object(m)) => {
                self.len() == m.len() && self.fields().zip(m).all(|((ka, a), (kb, b))| ka == kb && a.equals(b))
            }
            _ => false,
        }
    }
}

/// Whether two documents read through [`JsonView`] are equal (as `Value`'s `==` compares).
pub fn same<'a, 'b>(a: impl JsonView<'a>, b: impl JsonView<'b>) -> bool {
    match (a.shape(), b.shape()) {
        (Shape::Array, Shape::Array) => {
            a.len() == b.len()
                && (0..a.len()).all(|i| matches!((a.item(i), b.item(i)), (Some(x), Some(y)) if same(x, y)))
        }
        (Shape::Object, Shape::Object) => {
            a.len() == b.len() && a.fields().zip(b.fields()).all(|((ka, x), (kb, y))| ka == kb && same(x, y))
        }
        (x, y) => x == y,
    }
}

/// The fields of a `serde_json::Value` mapping ([`JsonView::fields`]).
#[derive(Debug)]
pub struct ValueFields<'a>(Option<serde_json::map::Iter<'a>>);

impl<'a> Iterator for ValueFields<'a> {
    type Item = (&'a str, &'a Value);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.as_mut()?.next().map(|(k, v)| (k.as_str(), v))
    }
}

impl<'a> JsonView<'a> for &'a Value {
    type Fields = ValueFields<'a>;

    fn shape(self) -> Shape<'a> {
        match self {
            Value::Null => Shape::Null,
            Value::Bool(b) => Shape::Bool(*b),
            Value::Number(n) => Shape::Number(n),
            Value::String(s) => Shape::String(s),
            Value::Object(_) => Shape::Object,
            Value::Array(_) => Shape::Array,
        }
    }

    fn fields(self) -> ValueFields<'a> {
        ValueFields(self.as_object().map(Map::iter))
    }

    fn get(self, key: &str) -> Option<Self> {
        self.as_object()?.get(key)
    }

    fn len(self) -> usize {
        match self {
            Value::Object(m) => m.len(),
            Value::Array(a) => a.len(),
            _ => 0,
        }
    }

    fn item(self, i: usize) -> Option<Self> {
        self.as_array()?.get(i)
    }

    fn to_value(self) -> Value {
        self.clone()
    }

    fn equals(self, v: &Value) -> bool {
        self == v
    }
}

/// A JSON document in one arena ([module documentation](self)): build one with
/// [`TreeBuilder`], read it through [`Tree::root`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Tree<'t> {
    nodes: Vec<Slot<'t>>,
    /// The fields of every mapping, each mapping's together and sorted by key.
    members: Vec<(Cow<'t, str>, u32)>,
    /// The items of every list, each list's together.
    items: Vec<u32>,
    root: u32,
    /// A live object's managedFields as its reader read them ([`Tree::managed_fields`]).
    fields: ReadFields<'t>,
}

/// The managedFields of a tree's document, read by the tree's reader from the text the tree
/// keeps: not part of what the tree is (a tree read with them equals one read without).
#[derive(Debug, Clone, Default)]
struct ReadFields<'t>(Option<Box<ManagedFields<'t>>>);

impl PartialEq for ReadFields<'_> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Slot<'t> {
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'t, str>),
    Object { start: u32, len: u32 },
    Array { start: u32, len: u32 },
}

impl<'t> Tree<'t> {
    /// The managedFields of the document (a live object's `metadata.managedFields`) when the
    /// tree's reader read them as it read the document ([`TreeBuilder::managed_fields`]):
    /// `drift_manifest::read_live_tree` keeps the list as its JSON text in the tree and reads it
    /// into these in the same pass. `None` when the reader did not: the caller reads them from
    /// the tree ([`ManagedFields::of_view`]), which gives the same.
    pub fn managed_fields(&self) -> Option<&ManagedFields<'t>> {
        self.fields.0.as_deref()
    }

    /// The document's top node.
    pub fn root(&self) -> Node<'_, 't> {
        Node { tree: self, at: self.root }
    }

    /// The document as a `serde_json::Value`: the one serde_json reads from the same text.
    pub fn to_value(&self) -> Value {
        self.root().to_value()
    }

    /// A tree of `v` (its strings copied), mostly for tests.
    pub fn from_value(v: &Value) -> Tree<'static> {
        fn add(b: &mut TreeBuilder<'static>, v: &Value) -> u32 {
            match v {
                Value::Null => b.null(),
                Value::Bool(x) => b.bool(*x),
                Value::Number(n) => b.number(n.clone()),
                Value::String(s) => b.string(Cow::Owned(s.clone())),
                Value::Array(items) => {
                    let mark = b.array_start();
                    for item in items {
                        let i = add(b, item);
                        b.item(i);
                    }
                    b.array_end(mark)
                }
                Value::Object(m) => {
                    let mark = b.object_start();
                    for (k, item) in m {
                        let i = add(b, item);
                        b.member(Cow::Owned(k.clone()), i);
                    }
                    b.object_end(mark)
                }
            }
        }
        let mut b = TreeBuilder::new();
        let root = add(&mut b, v);
        b.finish(root)
    }

    fn slot(&self, at: u32) -> &Slot<'t> {
        &self.nodes[at as usize]
    }
}

/// A node of a [`Tree`] (a reference into it; copy it freely).
#[derive(Clone, Copy)]
pub struct Node<'a, 't> {
    tree: &'a Tree<'t>,
    at: u32,
}

impl std::fmt::Debug for Node<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.to_value())
    }
}

impl<'a, 't> Node<'a, 't> {
    fn members(self) -> &'a [(Cow<'t, str>, u32)] {
        match *self.tree.slot(self.at) {
            Slot::Object { start, len } => &self.tree.members[start as usize..][..len as usize],
            _ => &[],
        }
    }
}

/// The fields of a mapping of a [`Tree`] ([`JsonView::fields`]).
#[derive(Debug)]
pub struct TreeFields<'a, 't> {
    tree: &'a Tree<'t>,
    members: std::slice::Iter<'a, (Cow<'t, str>, u32)>,
}

impl<'a, 't> Iterator for TreeFields<'a, 't> {
    type Item = (&'a str, Node<'a, 't>);

    fn next(&mut self) -> Option<Self::Item> {
        self.members.next().map(|(k, at)| (k.as_ref(), Node { tree: self.tree, at: *at }))
    }
}

impl<'a, 't> JsonView<'a> for Node<'a, 't> {
    type Fields = TreeFields<'a, 't>;

    fn shape(self) -> Shape<'a> {
        match self.tree.slot(self.at) {
            Slot::Null => Shape::Null,
            Slot::Bool(b) => Shape::Bool(*b),
            Slot::Number(n) => Shape::Number(n),
            Slot::String(s) => Shape::String(s),
            Slot::Object { .. } => Shape::Object,
            Slot::Array { .. } => Shape::Array,
        }
    }

    fn fields(self) -> TreeFields<'a, 't> {
        TreeFields { tree: self.tree, members: self.members().iter() }
    }

    fn get(self, key: &str) -> Option<Self> {
        let members = self.members();
        // A few fields are looked through, lengths first (most differ, and a length is cheaper to
        // compare than the bytes); more are searched by halves.
        let i = if members.len() <= 8 {
            members.iter().position(|(k, _)| k.len() == key.len() && k.as_ref() == key)?
        } else {
            members.binary_search_by(|(k, _)| k.as_ref().cmp(key)).ok()?
        };
        Some(Node { tree: self.tree, at: members[i].1 })
    }

    fn len(self) -> usize {
        match *self.tree.slot(self.at) {
            Slot::Object { len, .. } | Slot::Array { len, .. } => len as usize,
            _ => 0,
        }
    }

    fn item(self, i: usize) -> Option<Self> {
        match *self.tree.slot(self.at) {
            Slot::Array { start, len } if i < len as usize => {
                Some(Node { tree: self.tree, at: self.tree.items[start as usize + i] })
            }
            _ => None,
        }
    }

    fn to_value(self) -> Value {
        match self.tree.slot(self.at) {
            Slot::Null => Value::Null,
            Slot::Bool(b) => Value::Bool(*b),
            Slot::Number(n) => Value::Number(n.clone()),
            Slot::String(s) => Value::String(s.as_ref().to_owned()),
            Slot::Object { .. } => Value::Object(self.fields().map(|(k, v)| (k.to_owned(), v.to_value())).collect()),
            Slot::Array { len, .. } => {
                Value::Array((0..*len as usize).filter_map(|i| self.item(i)).map(JsonView::to_value).collect())
            }
        }
    }
}

/// The order of two keys (their bytes'), told by their first bytes where those differ, as
/// the keys of one mapping mostly do: no library comparison is called for them.
fn key_order(a: &str, b: &str) -> std::cmp::Ordering {
    match (a.as_bytes().first(), b.as_bytes().first()) {
        (Some(x), Some(y)) if x != y => x.cmp(y),
        _ => a.cmp(b),
    }
}

/// Builds a [`Tree`] from the bottom up, as a reader meets a document: each value is added
/// before the container it is in, and a container's members are given between its start and
/// its end (nested containers in between are finished first).
#[derive(Debug, Default)]
pub struct TreeBuilder<'t> {
    tree: Tree<'t>,
    /// The fields of the mappings still open, innermost last.
    open_members: Vec<(Cow<'t, str>, u32)>,
    /// The items of the lists still open, innermost last.
    open_items: Vec<u32>,
}

impl<'t> TreeBuilder<'t> {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty builder with room for about `nodes` values (as many fields, a quarter as many
    /// items) before it grows: a reader that knows its text's size saves the copies of growing.
    pub fn with_capacity(nodes: usize) -> Self {
        let tree = Tree {
            nodes: Vec::with_capacity(nodes),
            members: Vec::with_capacity(nodes),
            items: Vec::with_capacity(nodes / 4),
            root: 0,
            fields: ReadFields::default(),
        };
        TreeBuilder { tree, open_members: Vec::with_capacity(32), open_items: Vec::with_capacity(32) }
    }

    fn push(&mut self, slot: Slot<'t>) -> u32 {
        self.tree.nodes.push(slot);
        (self.tree.nodes.len() - 1) as u32
    }

    /// Adds `null`.
    pub fn null(&mut self) -> u32 {
        self.push(Slot::Null)
    }

    /// Adds a boolean.
    pub fn bool(&mut self, b: bool) -> u32 {
        self.push(Slot::Bool(b))
    }

    /// Adds a number.
    pub fn number(&mut self, n: Number) -> u32 {
        self.push(Slot::Number(n))
    }

    /// Adds a string.
    pub fn string(&mut self, s: Cow<'t, str>) -> u32 {
        self.push(Slot::String(s))
    }

    /// Opens a mapping: give its fields with [`TreeBuilder::member`], then close it with
    /// [`TreeBuilder::object_end`] and the mark this returns.
    pub fn object_start(&self) -> usize {
        self.open_members.len()
    }

    /// A field of the innermost open mapping, its value added already.
    pub fn member(&mut self, key: Cow<'t, str>, value: u32) {
        self.open_members.push((key, value));
    }

    /// Closes the mapping opened at `mark`: its fields sorted by key, a repeated key kept once
    /// with its last value (as `serde_json::Map` keeps it).
    pub fn object_end(&mut self, mark: usize) -> u32 {
        self.sort_open(mark);
        self.close_object(mark)
    }

    /// [`TreeBuilder::object_end`] of a mapping whose keys must all differ (a reader that refuses
    /// a key given twice): `None`, and the mapping dropped, when two are the same.
    pub fn object_end_unique(&mut self, mark: usize) -> Option<u32> {
        // (Fields that came in ascending order differ already: only sorted ones are looked at.)
        let ascending = self.sort_open(mark);
        if !ascending && self.open_members[mark..].windows(2).any(|pair| pair[0].0 == pair[1].0) {
            self.open_members.truncate(mark);
            return None;
        }
        Some(self.close_object(mark))
    }

    /// The fields of the mapping opened at `mark` sorted by key; stable, so that of fields with
    /// the same key the last given stays last. Whether they came in ascending order, each key
    /// after the one before (then no two are the same).
    fn sort_open(&mut self, mark: usize) -> bool {
        let open = &mut self.open_members[mark..];
        let ascending = open.is_sorted_by(|a, b| key_order(&a.0, &b.0).is_lt());
        if !ascending {
            open.sort_by(|a, b| key_order(&a.0, &b.0));
        }
        ascending
    }

    /// The mapping opened at `mark`, its fields sorted, made a node: a repeated key once, with
    /// its last value.
    fn close_object(&mut self, mark: usize) -> u32 {
        let start = self.tree.members.len();
        let members = &mut self.tree.members;
        for (key, value) in self.open_members.drain(mark..) {
            let len = members.len();
            match members.last_mut() {
                Some(last) if len > start && last.0 == key => last.1 = value,
                _ => members.push((key, value)),
            }
        }
        let len = self.tree.members.len() - start;
        self.push(Slot::Object { start: start as u32, len: len as u32 })
    }

    /// Opens a list: give its items with [`TreeBuilder::item`], then close it with
    /// [`TreeBuilder::array_end`] and the mark this returns.
    pub fn array_start(&self) -> usize {
        self.open_items.len()
    }

    /// An item of the innermost open list, added already.
    pub fn item(&mut self, value: u32) {
        self.open_items.push(value);
    }

    /// Closes the list opened at `mark`.
    pub fn array_end(&mut self, mark: usize) -> u32 {
        let start = self.tree.items.len();
        self.tree.items.extend(self.open_items.drain(mark..));
        let len = self.tree.items.len() - start;
        self.push(Slot::Array { start: start as u32, len: len as u32 })
    }

    /// Gives the tree the managedFields of its document, read from the text of its
    /// `metadata.managedFields` as the document was read ([`Tree::managed_fields`]).
    pub fn managed_fields(&mut self, fields: ManagedFields<'t>) {
        self.tree.fields = ReadFields(Some(Box::new(fields)));
    }

    /// The tree whose top node is `root`.
    pub fn finish(mut self, root: u32) -> Tree<'t> {
        self.tree.root = root;
        self.tree
    }
}

/// An object read as a tree: its key, its `apiVersion`, where it was read, and its document as a
/// [`Tree`] borrowing the text it was read from (a live object read only to be compared, as
/// `drift diff --live` reads them). A comparator that reads trees compares it as it is
/// ([`crate::Comparator::compare_tree`]); anything that keeps it makes it a [`Resource`]
/// ([`ObjectTree::to_resource`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectTree<'t> {
    /// Identity, as [`Resource::from_object`] reads it.
    pub key: ResourceKey,
    /// `apiVersion` of the object as read.
    pub api_version: String,
    /// Where it came from.
    pub provenance: Provenance,
    /// The whole object.
    pub tree: Tree<'t>,
}

impl<'t> ObjectTree<'t> {
    /// The object of `tree`, its key read as [`Resource::from_object`] reads it (the same errors).
    pub fn new(tree: Tree<'t>, provenance: Provenance) -> crate::Result<Self> {
        let (key, api_version) = crate::resource::identity_of(tree.root())?;
        Ok(ObjectTree { key, api_version, provenance, tree })
    }

    /// The object as a [`Resource`] (its tree copied into a `Value`).
    pub fn to_resource(&self) -> Resource {
        Resource {
            key: self.key.clone(),
            api_version: self.api_version.clone(),
            object: std::sync::Arc::new(self.tree.to_value()),
            provenance: self.provenance.clone(),
        }
    }
}

/// An object as a tree with its name and provenance, all borrowed from whoever holds them: the
/// desired side of [`crate::Comparator::compare_trees`] (a desired object kept compact and
/// expanded into a tree only while it is compared).
#[derive(Debug, Clone, Copy)]
pub struct ObjectRef<'a, 't> {
    /// Identity.
    pub key: &'a ResourceKey,
    /// `apiVersion` of the object as read.
    pub api_version: &'a str,
    /// Where it came from.
    pub provenance: &'a Provenance,
    /// The whole object.
    pub tree: &'a Tree<'t>,
}

impl ObjectRef<'_, '_> {
    /// The object as a [`Resource`] (its tree copied into a `Value`).
    pub fn to_resource(&self) -> Resource {
        Resource {
            key: self.key.clone(),
            api_version: self.api_version.to_owned(),
            object: std::sync::Arc::new(self.tree.to_value()),
            provenance: self.provenance.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn arb_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            (-1e6f64..1e6).prop_map(|f| json!(f)),
            "[a-c]{0,3}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 40, 5, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                // (Up to a dozen fields: a few are looked through, more searched by halves.)
                proptest::collection::vec(("[a-d]{0,2}", inner), 0..12)
                    .prop_map(|fields| Value::Object(fields.into_iter().collect())),
            ]
        })
    }

    /// Every question [`JsonView`] answers, asked of both views down the whole document.
    fn answers_alike<'a, 'b>(a: &'a Value, b: Node<'b, '_>) -> Result<(), TestCaseError> {
        prop_assert_eq!(a.shape(), b.shape());
        prop_assert_eq!(JsonView::len(a), b.len());
        prop_assert_eq!(JsonView::is_empty(a), b.is_empty());
        prop_assert_eq!(a.as_str(), b.as_str());
        prop_assert!(b.equals(a));
        prop_assert_eq!(&b.to_value(), a);
        let fa: Vec<&str> = a.fields().map(|(k, _)| k).collect();
        let fb: Vec<&str> = b.fields().map(|(k, _)| k).collect();
        prop_assert_eq!(&fa, &fb);
        for ((_, x), (k, y)) in a.fields().zip(b.fields()) {
            answers_alike(x, y)?;
            prop_assert!(b.get(k).is_some_and(|g| g.equals(x)));
        }
        for key in ["", "a", "ab", "b", "c", "dd", "zz"] {
            prop_assert_eq!(b.get(key).map(JsonView::to_value), a.get(key).cloned());
        }
        for i in 0..=JsonView::len(a) {
            match (JsonView::item(a, i), b.item(i)) {
                (Some(x), Some(y)) => answers_alike(x, y)?,
                (None, None) => {}
                (x, y) => prop_assert!(false, "item {}: {:?} against {:?}", i, x, y),
            }
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn a_tree_answers_as_the_value_it_was_built_from(v in arb_value(), other in arb_value()) {
            let tree = Tree::from_value(&v);
            prop_assert_eq!(tree.to_value(), v.clone());
            answers_alike(&v, tree.root())?;
            prop_assert_eq!(tree.root().equals(&other), v == other);
            prop_assert_eq!(same(tree.root(), &other), v == other);
            prop_assert_eq!(same(&other, tree.root()), v == other);
            prop_assert!(same(tree.root(), &v));
        }

        #[test]
        fn a_live_tree_has_the_key_and_errors_of_a_resource(v in arb_value(), name in "[a-c]{0,2}", kind in "[A-C]{0,1}") {
            let mut object = serde_json::json!({"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}});
            object["metadata"]["namespace"] = v;
            let tree = ObjectTree::new(Tree::from_value(&object), Provenance::default());
            match (Resource::from_object(object.clone()), tree) {
                (Ok(r), Ok(t)) => prop_assert_eq!(t.to_resource(), r),
                (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
                (a, b) => prop_assert!(false, "{:?} against {:?}", a, b),
            }
        }
    }

    #[test]
    fn a_mapping_whose_keys_must_differ_is_refused_with_a_key_given_twice() {
        let mut b = TreeBuilder::new();
        let outer = b.object_start();
        let one = b.number(1.into());
        b.member("b".into(), one);
        let two = b.number(2.into());
        b.member("a".into(), two);
        let inner = b.object_start();
        for key in ["k", "j", "k"] {
            let v = b.null();
            b.member(key.into(), v);
        }
        assert_eq!(b.object_end_unique(inner), None, "k given twice");
        let root = b.object_end_unique(outer).expect("a and b differ");
        assert_eq!(b.finish(root).to_value(), serde_json::json!({"a": 2, "b": 1}));
    }

    #[test]
    fn fields_are_sorted_and_a_repeated_key_keeps_its_last_value() {
        let mut b = TreeBuilder::new();
        let outer = b.object_start();
        let z = b.number(1.into());
        b.member("z".into(), z);
        let inner = b.object_start();
        let first = b.string("first".into());
        b.member("k".into(), first);
        let last = b.string("last".into());
        b.member("k".into(), last);
        let a = b.bool(true);
        b.member("a".into(), a);
        let inner = b.object_end(inner);
        b.member("m".into(), inner);
        let list = b.array_start();
        let n = b.null();
        b.item(n);
        let list = b.array_end(list);
        b.member("a".into(), list);
        let root = b.object_end(outer);
        let tree = b.finish(root);
        // What serde_json reads from the same text.
        let read: Value =
            serde_json::from_str(r#"{"z": 1, "m": {"k": "first", "k": "last", "a": true}, "a": [null]}"#).unwrap();
        assert_eq!(tree.to_value(), read);
        assert_eq!(tree.root().fields().map(|(k, _)| k).collect::<Vec<_>>(), ["a", "m", "z"]);
        assert_eq!(tree.root().get("m").and_then(|m| m.get("k")).and_then(JsonView::as_str), Some("last"));
    }
}
