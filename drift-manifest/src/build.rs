//! What the readers build a document into ([`Build`]): a `serde_json::Value` ([`Values`]) or a
//! [`drift_model::tree::Tree`] borrowing the text ([`TreeBuilder`]), so that one reader of each
//! format reads, checks and gives up on its tokens once for both.

use std::borrow::Cow;

use drift_model::fields::ManagedFields;
use drift_model::tree::TreeBuilder;
use serde_json::{Map, Number, Value};

/// What a reader ([`crate::json_tree`], [`crate::value_bytes`], [`crate::yaml_lines`]) builds a document into, from the bottom up as it meets it: each value is
/// built before the container it is in, a container's members given between its start and its
/// end. Keys and strings come borrowed from the text when they hold no escape, for a builder
/// that can keep them so.
pub(crate) trait Build<'a> {
    /// A value built: the value itself, or where the builder put it.
    type Out;
    /// `null`.
    fn null(&mut self) -> Self::Out;
    /// `true` or `false`.
    fn bool(&mut self, b: bool) -> Self::Out;
    /// A number.
    fn number(&mut self, n: Number) -> Self::Out;
    /// A string (or a kept managedFields list's text).
    fn string(&mut self, s: Cow<'a, str>) -> Self::Out;
    /// Opens a mapping: the mark closes it ([`Build::object_end`]).
    fn object_start(&mut self) -> usize;
    /// A member of the innermost open mapping, in the order of the text.
    fn member(&mut self, key: Cow<'a, str>, value: Self::Out);
    /// Closes the mapping opened at `mark`: its members in the order of their keys, a repeated
    /// key once with its last value, as serde_json reads it.
    fn object_end(&mut self, mark: usize) -> Self::Out;
    /// Opens a list: the mark closes it ([`Build::array_end`]).
    fn array_start(&mut self) -> usize;
    /// An item of the innermost open list.
    fn item(&mut self, value: Self::Out);
    /// Closes the list opened at `mark`.
    fn array_end(&mut self, mark: usize) -> Self::Out;
    /// Whether the builder keeps a live object's managedFields read as they are read
    /// ([`Build::managed_fields`]): a reader that keeps them as text then reads them once.
    fn keeps_managed_fields(&self) -> bool {
        false
    }
    /// The managedFields of the document, read from the list whose text it keeps (when
    /// [`Build::keeps_managed_fields`]).
    fn managed_fields(&mut self, _fields: ManagedFields<'a>) {}
}

/// Builds `serde_json::Value`s: the members of the mappings and the items of the lists being
/// read on two stacks, innermost last, each container built at once when it closes.
pub(crate) struct Values {
    pub(crate) entries: Vec<(String, Value)>,
    pub(crate) items: Vec<Value>,
}

impl<'a> Build<'a> for Values {
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
        Value::String(s.into_owned())
    }

    #[inline(always)]
    fn object_start(&mut self) -> usize {
        self.entries.len()
    }

    #[inline(always)]
    fn member(&mut self, key: Cow<'a, str>, value: Value) {
        self.entries.push((key.into_owned(), value));
    }

    #[inline(always)]
    fn object_end(&mut self, mark: usize) -> Value {
        // Inserted last first: a map's search runs from its smallest key, and the keys of
        // Kubernetes' maps (labels, FieldsV1) come in ascending order, so each key is placed
        // after one comparison. Of two equal keys the later is kept, as serde_json keeps it.
        let mut map = Map::new();
        for (key, value) in self.entries.drain(mark..).rev() {
            map.entry(key).or_insert(value);
        }
        Value::Object(map)
    }

    #[inline(always)]
    fn array_start(&mut self) -> usize {
        self.items.len()
    }

    #[inline(always)]
    fn item(&mut self, value: Value) {
        self.items.push(value);
    }

    #[inline(always)]
    fn array_end(&mut self, mark: usize) -> Value {
        Value::Array(self.items.drain(mark..).collect())
    }
}

/// Builds a [`Tree`] with the builder's own methods, each called by its path: a method call
/// would find these (on `&mut self`) before the builder's `object_start` and `array_start` (on
/// `&self`), and call itself.
impl<'a> Build<'a> for TreeBuilder<'a> {
    type Out = u32;

    #[inline(always)]
    fn null(&mut self) -> u32 {
        TreeBuilder::null(self)
    }

    #[inline(always)]
    fn bool(&mut self, b: bool) -> u32 {
        TreeBuilder::bool(self, b)
    }

    #[inline(always)]
    fn number(&mut self, n: Number) -> u32 {
        TreeBuilder::number(self, n)
    }

    #[inline(always)]
    fn string(&mut self, s: Cow<'a, str>) -> u32 {
        TreeBuilder::string(self, s)
    }

    #[inline(always)]
    fn object_start(&mut self) -> usize {
        TreeBuilder::object_start(self)
    }

    #[inline(always)]
    fn member(&mut self, key: Cow<'a, str>, value: u32) {
        TreeBuilder::member(self, key, value);
    }

    #[inline(always)]
    fn object_end(&mut self, mark: usize) -> u32 {
        TreeBuilder::object_end(self, mark)
    }

    #[inline(always)]
    fn array_start(&mut self) -> usize {
        TreeBuilder::array_start(self)
    }

    #[inline(always)]
    fn item(&mut self, value: u32) {
        TreeBuilder::item(self, value);
    }

    #[inline(always)]
    fn array_end(&mut self, mark: usize) -> u32 {
        TreeBuilder::array_end(self, mark)
    }

    fn keeps_managed_fields(&self) -> bool {
        true
    }

    fn managed_fields(&mut self, fields: ManagedFields<'a>) {
        TreeBuilder::managed_fields(self, fields);
    }
}
