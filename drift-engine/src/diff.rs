//! The desired-driven structural diff of two normalised objects.
//!
//! Every field Git sets is compared with the live value. Fields only the cluster has are
//! returned as `extra` candidates; the engine decides from field ownership whether they are
//! drift (three-way awareness). Lists with a merge key compare as maps; other lists compare by
//! position, and a length difference is one difference at the list's path. Empty and absent are
//! equal on the desired side.
//!
//! The walk sees the objects as [`crate::normalize`] would make them without copying them: it
//! skips the fields normalisation drops ([`Level`]), compares quantities by their canonical text
//! ([`quantity_at`]), and reports normalised copies of the values it records. Objects given
//! already normalised walk the same (normalisation is idempotent); a Secret must be given
//! normalised ([`crate::normalize::view`]), since its values are folded and hashed first.
//! Merge keys identify list items as written: a key field is never read as a quantity.

use serde_json::Value;

use crate::merge_keys::{MergeKeyRule, MergeKeys};
use crate::normalize::{Level, canonical_quantity, quantity_at, scalar_eq};
use drift_model::path::{Path, SegRef, scalar_text};
pub use drift_model::path::{lookup, lookup_segments};
use drift_model::tree::{JsonView, Shape, same};

/// One difference found by the walk.
#[derive(Debug, Clone, PartialEq)]
pub struct RawDiff {
    /// Where.
    pub path: Path,
    /// The desired value, `None` for a field only the cluster has.
    pub git: Option<Value>,
    /// The live value, `None` when the cluster lacks the field.
    pub live: Option<Value>,
    /// The field exists only in the cluster (a candidate for three-way drift).
    pub extra: bool,
}

/// Compares normalised `desired` with normalised `live` for an object of `kind`.
pub fn diff(kind: &str, desired: &Value, live: &Value, merge_keys: &MergeKeys) -> Vec<RawDiff> {
    diff_normalised(kind, desired, live, merge_keys, &mut |_| true)
}

/// [`diff`], asking `keep_extra` about each field only the cluster has before recording it
/// (most such fields are server defaults that nobody claims; skipping them early is cheap).
/// `desired` and `live` are seen through [`crate::normalize::view`] (or normalised already):
/// the walk skips what normalisation drops and compares quantities canonically.
pub fn diff_filtered(
    kind: &str,
    desired: &Value,
    live: &Value,
    merge_keys: &MergeKeys,
    keep_extra: &mut dyn FnMut(&[SegRef<'_>]) -> bool,
) -> Vec<RawDiff> {
    walk_pair(kind, desired, live, merge_keys, &mut { keep_extra }, true)
}

/// [`diff_filtered`] of two normalised copies, without skipping or canonicalising anything
/// during the walk: the reference the normalising walk is tested against.
pub fn diff_normalised(
    kind: &str,
    desired: &Value,
    live: &Value,
    merge_keys: &MergeKeys,
    keep_extra: &mut dyn FnMut(&[SegRef<'_>]) -> bool,
) -> Vec<RawDiff> {
    walk_pair(kind, desired, live, merge_keys, &mut { keep_extra }, false)
}

/// The walk of `desired` against a live object read through [`JsonView`] (a `Value`, or a
/// [`drift_model::tree::Tree`] that borrows its text): the differences [`diff_filtered`] finds.
/// The live side's values are copied out only for what is recorded.
pub fn diff_view<'d, 'a>(
    kind: &str,
    desired: impl JsonView<'d>,
    live: impl JsonView<'a>,
    merge_keys: &MergeKeys,
    keep_extra: &mut dyn FnMut(&[SegRef<'_>]) -> bool,
) -> Vec<RawDiff> {
    walk_pair(kind, desired, live, merge_keys, &mut { keep_extra }, true)
}

/// What the walk asks about each field only the cluster has: whether to record it. A closure
/// over the path is one; the engine's own keeps what it found for the path's parents between
/// questions ([`KeepExtra::keep`] is told how much of the path is unchanged since the last one).
pub(crate) trait KeepExtra {
    /// Whether to record the field at `path`, of which the first `unchanged` segments are those
    /// of the path asked about before (none at the first question).
    fn keep(&mut self, path: &[SegRef<'_>], unchanged: usize) -> bool;
}

impl<F: FnMut(&[SegRef<'_>]) -> bool> KeepExtra for F {
    fn keep(&mut self, path: &[SegRef<'_>], _: usize) -> bool {
        self(path)
    }
}

/// [`diff_view`] with a [`KeepExtra`].
pub(crate) fn diff_view_keeping<'d, 'a>(
    kind: &str,
    desired: impl JsonView<'d>,
    live: impl JsonView<'a>,
    merge_keys: &MergeKeys,
    keep_extra: &mut dyn KeepExtra,
) -> Vec<RawDiff> {
    walk_pair(kind, desired, live, merge_keys, keep_extra, true)
}

fn walk_pair<'w, 'd: 'w, 'a: 'w, D: JsonView<'d>, L: JsonView<'a>>(
    kind: &str,
    desired: D,
    live: L,
    merge_keys: &MergeKeys,
    keep_extra: &mut dyn KeepExtra,
    normalising: bool,
) -> Vec<RawDiff> {
    let mut w = Walker {
        kind,
        normalising,
        limit_range: kind == "LimitRange",
        merge_keys,
        keep_extra,
        unchanged: 0,
        path: Vec::with_capacity(16),
        schema: String::with_capacity(128),
        out: Vec::new(),
        sides: std::marker::PhantomData,
    };
    w.walk(desired, Some(live), &[]);
    w.out
}

/// The walk of a desired object seen as `D` (a [`JsonView`] of `'d`) against a live one seen as
/// `L` (of `'a`): the path borrows the names of both, for `'w`.
struct Walker<'w, 'd, 'a, 'k, D, L> {
    kind: &'k str,
    /// Whether the walk normalises as it goes (else the objects are normalised copies).
    normalising: bool,
    limit_range: bool,
    merge_keys: &'k MergeKeys,
    keep_extra: &'k mut dyn KeepExtra,
    /// How much of the path is as it was when `keep_extra` was last asked.
    unchanged: usize,
    path: Vec<SegRef<'w>>,
    schema: String,
    out: Vec<RawDiff>,
    sides: std::marker::PhantomData<(&'d (), &'a (), D, L)>,
}

/// The merge keys of a list's items, borrowed from the items where they are strings: for item
/// `i`, the text of each key field in the rule's order (`texts[i * width..][..width]`) and
/// whether it is the field's default filled in (`hidden`, the same places). Only the keys of
/// the items a path names are copied out ([`Keys::owned`]): pairing compares them as they are.
struct Keys<'t> {
    rule: &'t MergeKeyRule,
    texts: Vec<std::borrow::Cow<'t, str>>,
    hidden: Vec<bool>,
}

impl<'t> Keys<'t> {
    /// The keys of the items of `list`, or `None` when an item lacks one or two items share one.
    fn of<'a: 't, V: JsonView<'a>>(rule: &'t MergeKeyRule, list: V) -> Option<Self> {
        use std::borrow::Cow;
        let width = rule.keys.len();
        let count = list.len();
        let mut texts = Vec::with_capacity(count * width);
        let mut hidden = Vec::with_capacity(count * width);
        for item in items(list) {
            for field in &rule.keys {
                let default = rule.defaults.iter().find(|(k, _)| k == field).map(|(_, v)| v.as_str());
                let text = match item.get(field).filter(|v| !v.is_null()) {
                    Some(v) => match v.as_str() {
                        Some(s) => Cow::Borrowed(s),
                        None => Cow::Owned(scalar_text(&v.to_value())?),
                    },
                    None => Cow::Borrowed(default?),
                };
                hidden.push(default == Some(&*text));
                texts.push(text);
            }
        }
        let keys = Keys { rule, texts, hidden };
        // Lists are short: a quadratic duplicate check allocates nothing.
        let unique = (0..count).all(|i| (0..i).all(|o| keys.key(o) != keys.key(i)));
        unique.then_some(keys)
    }

    fn width(&self) -> usize {
        self.rule.keys.len()
    }

    /// The texts of item `i`'s key fields.
    fn key(&self, i: usize) -> &[std::borrow::Cow<'t, str>] {
        &self.texts[i * self.width()..][..self.width()]
    }

    /// Item `i`'s key as a path names it: `(field, text)` pairs and their `hidden` flags.
    fn owned(&self, i: usize) -> (Vec<(String, String)>, Vec<bool>) {
        let key = self.rule.keys.iter().zip(self.key(i)).map(|(f, t)| (f.clone(), t.clone().into_owned())).collect();
        (key, self.hidden[i * self.width()..][..self.width()].to_vec())
    }
}

/// The items of a list seen through [`JsonView`], in order.
fn items<'a, V: JsonView<'a>>(list: V) -> impl Iterator<Item = V> {
    (0..list.len()).map_while(move |i| list.item(i))
}

impl<'w, 'd: 'w, 'a: 'w, 'k, D: JsonView<'d>, L: JsonView<'a>> Walker<'w, 'd, 'a, 'k, D, L> {
    fn report(&mut self, git: Option<D>, live: Option<L>, extra: bool) {
        if extra {
            let kept = self.keep_extra.keep(&self.path, self.unchanged);
            self.unchanged = self.path.len();
            if !kept {
                return;
            }
        }
        let path = Path(self.path.iter().map(SegRef::to_seg).collect());
        let git = git.map(|v| self.normalized_here(v.to_value()));
        let live = live.map(|v| self.normalized_here(v.to_value()));
        self.out.push(RawDiff { path, git, live, extra });
    }

    /// What normalisation makes of a value (a copy) at the current path.
    fn normalized_here(&self, v: Value) -> Value {
        if !self.normalising {
            return v;
        }
        let Some(name) = reach(&self.path) else { return v };
        match v {
            Value::Array(_) if matches!(self.path.last(), Some(SegRef::Item { .. })) => v,
            Value::Object(_) | Value::Array(_) => self.level().normalized_owned(v, name, self.limit_range),
            _ if self.quantity_leaf() => canonical_quantity(&v).into_owned(),
            _ => v,
        }
    }
    /// Where the mapping at the current path sits, for what normalisation drops from it.
    fn level(&self) -> Level {
        match self.path.as_slice() {
            _ if !self.normalising => Level::Other,
            [] => Level::Root,
            [SegRef::Field("metadata")] => Level::Metadata,
            [SegRef::Field("metadata"), SegRef::Field("annotations")] => Level::Annotations,
            _ => Level::Other,
        }
    }

    /// Whether a scalar at the current path is a quantity normalisation writes canonically.
    fn quantity_leaf(&self) -> bool {
        let Some((SegRef::Field(k), parent)) = self.path.split_last().filter(|_| self.normalising) else {
            return false;
        };
        let name = match parent {
            [] => None,
            [.., SegRef::Field(p)] | [.., SegRef::Field(p), SegRef::Item { .. }] => Some(*p),
            _ => return false,
        };
        quantity_at(name, k, self.limit_range) && reach(parent).is_some()
    }

    fn push_field(&mut self, name: &'w str) {
        self.path.push(SegRef::Field(name));
    }

    fn push_item(&mut self, key: Vec<(String, String)>, hidden: Vec<bool>, index: usize) {
        self.path.push(SegRef::Item { key, hidden, index });
    }

    fn pop(&mut self) {
        self.path.pop();
        self.unchanged = self.unchanged.min(self.path.len());
    }

    /// The schema path of the current path (fields joined by `.`, list items as `[]`: what
    /// merge-key rules name), written into `schema` (asked only at lists, so not kept up to
    /// date at each step).
    fn schema(&mut self) -> &str {
        self.schema.clear();
        for seg in &self.path {
            match seg {
                SegRef::Field(name) => {
                    if !self.schema.is_empty() {
                        self.schema.push('.');
                    }
                    self.schema.push_str(name);
                }
                SegRef::Item { .. } => self.schema.push_str("[]"),
            }
        }
        &self.schema
    }

    /// `key_fields`: the merge-key fields of the item being walked; they are its identity, so a
    /// key field only the cluster spells out (`protocol: TCP`) is not an extra field.
    fn walk(&mut self, d: D, l: Option<L>, key_fields: &[String]) {
        if d.is_null() {
            return;
        }
        let l = l.filter(|v| !v.is_null());
        let level = self.level();
        match (d.shape(), l) {
            (_, None) => {
                if level.is_empty(d) {
                    return;
                }
                if d.shape() == Shape::Object {
                    for (k, v) in d.fields().filter(|(k, _)| !level.drops(k)) {
                        self.push_field(k);
                        self.walk(v, None, &[]);
                        self.pop();
                    }
                } else {
                    self.report(Some(d), None, false);
                }
            }
            (Shape::Object, Some(lm)) if lm.shape() == Shape::Object => {
                // Both maps iterate in the order of their keys: each side's fields are paired
                // with the other's in one pass over both, where a search for each field
                // compares it with most keys of a map of one node (every map of an object).
                let mut others = lm.fields().peekable();
                for (k, v) in d.fields() {
                    let lv = same_key(&mut others, k);
                    if level.drops(k) {
                        continue;
                    }
                    self.push_field(k);
                    self.walk(v, lv, &[]);
                    self.pop();
                }
                let mut others = d.fields().peekable();
                for (k, lv) in lm.fields() {
                    let dv = same_key(&mut others, k);
                    if level.drops(k) {
                        continue;
                    }
                    if dv.is_none_or(JsonView::is_null)
                        && !level.child(k).is_empty(lv)
                        && !key_fields.iter().any(|f| f == k)
                    {
                        self.push_field(k);
                        self.extra(lv);
                        self.pop();
                    }
                }
            }
            (Shape::Object, Some(other)) => {
                if !level.is_empty(d) {
                    self.report(Some(d), Some(other), false);
                }
            }
            (Shape::Array, Some(l)) => {
                if d.len() == 0 {
                    if !level.is_empty(l) {
                        self.report(Some(d), Some(l), false);
                    }
                } else if l.shape() == Shape::Array {
                    self.list(d, l);
                } else {
                    self.report(Some(d), Some(l), false);
                }
            }
            (_, Some(l)) => {
                // Most scalars are equal as they stand; both are copied out to be compared
                // otherwise.
                let differ = !same(d, l) && {
                    let (dv, lv) = (d.to_value(), l.to_value());
                    if self.quantity_leaf() {
                        !scalar_eq(&canonical_quantity(&dv), &canonical_quantity(&lv))
                    } else {
                        !scalar_eq(&dv, &lv)
                    }
                };
                if differ {
                    self.report(Some(d), Some(l), false);
                }
            }
        }
    }

    /// A field only the cluster has: mappings are opened down to their leaves so that each
    /// added field is judged (and typed) on its own.
    fn extra(&mut self, lv: L) {
        let level = self.level();
        if lv.shape() == Shape::Object && !level.is_empty(lv) {
            for (k, v) in lv.fields().filter(|(k, _)| !level.drops(k)) {
                if !level.child(k).is_empty(v) {
                    self.push_field(k);
                    self.extra(v);
                    self.pop();
                }
            }
        } else {
            self.report(None, Some(lv), true);
        }
    }

    fn list(&mut self, d: D, l: L) {
        let merge_keys = self.merge_keys;
        let rule = merge_keys.lookup(self.kind, self.schema());
        let desired_len = d.len();
        if let Some(rule) = rule
            && let (Some(dk), Some(lk)) = (Keys::of(rule, d), Keys::of(rule, l))
        {
            let live_len = l.len();
            // Lists are short: pairing by linear search allocates nothing and hashes nothing.
            let in_live: Vec<Option<usize>> =
                (0..desired_len).map(|i| (0..live_len).find(|&j| lk.key(j) == dk.key(i))).collect();
            let in_desired: Vec<bool> =
                (0..live_len).map(|j| (0..desired_len).any(|i| dk.key(i) == lk.key(j))).collect();
            let mut matched = vec![false; live_len];
            // Items whose key changed (a Service port renumbered) are paired by `name` when
            // the key does not include it, so the change shows as one field, not as an item
            // removed and another added.
            let renamed = |i: usize, matched: &[bool]| -> Option<usize> {
                if rule.keys.iter().any(|k| k == "name") {
                    return None;
                }
                let name = d.item(i)?.get("name").and_then(JsonView::as_str)?;
                let j = items(l).position(|item| item.get("name").and_then(JsonView::as_str) == Some(name))?;
                (!matched[j] && !in_desired[j]).then_some(j)
            };
            for (i, item) in items(d).enumerate() {
                let found = in_live[i].or_else(|| renamed(i, &matched));
                let (key, hidden) = dk.owned(i);
                self.push_item(key, hidden, i);
                match found {
                    Some(j) => {
                        matched[j] = true;
                        self.walk(item, l.item(j), &rule.keys);
                    }
                    None => self.report(Some(item), None, false),
                }
                self.pop();
            }
            for (j, item) in items(l).enumerate() {
                if !matched[j] {
                    let (key, hidden) = lk.owned(j);
                    self.push_item(key, hidden, j);
                    self.report(None, Some(item), true);
                    self.pop();
                }
            }
            return;
        }
        if desired_len != l.len() {
            self.report(Some(d), Some(l), false);
            return;
        }
        for (i, (d, l)) in items(d).zip(items(l)).enumerate() {
            self.push_item(Vec::new(), Vec::new(), i);
            self.walk(d, Some(l), &[]);
            self.pop();
        }
    }
}

/// The value of `key` in a map whose entries `others` yields in key order, none of them before
/// `key` left: the entries up to it are taken.
fn same_key<'v, V: Copy>(others: &mut std::iter::Peekable<impl Iterator<Item = (&'v str, V)>>, key: &str) -> Option<V> {
    while let Some((k, v)) = others.peek() {
        match (*k).cmp(key) {
            std::cmp::Ordering::Less => {
                others.next();
            }
            std::cmp::Ordering::Equal => {
                let v = *v;
                others.next();
                return Some(v);
            }
            std::cmp::Ordering::Greater => return None,
        }
    }
    None
}

/// Whether normalisation reaches the value at `path` (it opens mappings, and the mappings in a
/// list, but not lists in a list), and if so the name its mapping's fields see as their
/// parent's: the field it is under, or the list's field for a list item; `None` at the root.
fn reach<'p>(path: &'p [SegRef<'_>]) -> Option<Option<&'p str>> {
    if path.windows(2).any(|w| matches!(w, [SegRef::Item { .. }, SegRef::Item { .. }])) {
        return None;
    }
    match path {
        [] => Some(None),
        [.., SegRef::Field(k)] | [.., SegRef::Field(k), SegRef::Item { .. }] => Some(Some(k)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The walk pairs the fields of two mappings in one pass over both, which holds only while
    /// `serde_json::Map` iterates in key order (no `preserve_order` feature in the build).
    #[test]
    fn maps_iterate_in_key_order_and_fields_pair_across_interleaved_keys() {
        let m: serde_json::Map<String, Value> =
            [("b", 1), ("a", 2), ("c", 3)].into_iter().map(|(k, v)| (k.to_owned(), json!(v))).collect();
        assert_eq!(m.keys().collect::<Vec<_>>(), ["a", "b", "c"], "serde_json::Map must keep keys sorted");
        let desired = json!({"spec": {"b": 1, "d": {"x": 1}, "f": 2, "h": null}});
        let live = json!({"spec": {"a": 0, "b": 1, "c": 5, "d": {"x": 2}, "g": 7, "h": 8}});
        let found: Vec<(String, bool)> = diff("ConfigMap", &desired, &live, &MergeKeys::default())
            .iter()
            .map(|d| (d.path.to_string(), d.extra))
            .collect();
        assert_eq!(
            found,
            [
                ("spec.d.x".to_owned(), false),
                ("spec.f".to_owned(), false),
                ("spec.a".to_owned(), true),
                ("spec.c".to_owned(), true),
                ("spec.g".to_owned(), true),
                ("spec.h".to_owned(), true),
            ]
        );
    }
}
