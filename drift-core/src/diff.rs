//! The desired-driven structural diff of two normalised objects.
//!
//! Every field Git sets is compared with the live value. Fields only the cluster has are
//! returned as `extra` candidates; the engine decides from field ownership whether they are
//! drift (three-way awareness). Lists with a merge key compare as maps; other lists compare by
//! position, and a length difference is one difference at the list's path. Empty and absent are
//! equal on the desired side.

use std::collections::HashMap;

use serde_json::Value;

use crate::merge_keys::{MergeKeyRule, MergeKeys};
use crate::normalize::{is_empty, scalar_eq};
use crate::path::{Path, SegRef, SegView, scalar_text};

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
    diff_filtered(kind, desired, live, merge_keys, &mut |_| true)
}

/// [`diff`], asking `keep_extra` about each field only the cluster has before recording it
/// (most such fields are server defaults that nobody claims; skipping them early is cheap).
pub fn diff_filtered(
    kind: &str,
    desired: &Value,
    live: &Value,
    merge_keys: &MergeKeys,
    keep_extra: &mut dyn FnMut(&[SegRef<'_>]) -> bool,
) -> Vec<RawDiff> {
    let mut w = Walker {
        kind,
        merge_keys,
        keep_extra,
        path: Vec::with_capacity(16),
        schema: String::with_capacity(128),
        out: Vec::new(),
    };
    w.walk(desired, Some(live), &[]);
    w.out
}

struct Walker<'a, 'k> {
    kind: &'a str,
    merge_keys: &'a MergeKeys,
    keep_extra: &'k mut dyn FnMut(&[SegRef<'_>]) -> bool,
    path: Vec<SegRef<'a>>,
    schema: String,
    out: Vec<RawDiff>,
}

type ItemKey = (Vec<(String, String)>, Vec<bool>);

fn item_key(rule: &MergeKeyRule, item: &Value) -> Option<ItemKey> {
    let mut key = Vec::with_capacity(rule.keys.len());
    let mut hidden = Vec::with_capacity(rule.keys.len());
    for field in &rule.keys {
        let default = rule.defaults.iter().find(|(k, _)| k == field).map(|(_, v)| v.as_str());
        let text = match item.get(field).filter(|v| !v.is_null()) {
            Some(v) => scalar_text(v)?,
            None => default?.to_owned(),
        };
        hidden.push(default == Some(text.as_str()));
        key.push((field.clone(), text));
    }
    Some((key, hidden))
}

fn keys_of(rule: &MergeKeyRule, items: &[Value]) -> Option<Vec<ItemKey>> {
    let keys: Vec<ItemKey> = items.iter().map(|i| item_key(rule, i)).collect::<Option<_>>()?;
    // Lists are short: a quadratic duplicate check allocates nothing.
    let unique = keys.iter().enumerate().all(|(i, k)| keys[..i].iter().all(|o| o.0 != k.0));
    unique.then_some(keys)
}

impl<'a> Walker<'a, '_> {
    fn report(&mut self, git: Option<&Value>, live: Option<&Value>, extra: bool) {
        if extra && !(self.keep_extra)(&self.path) {
            return;
        }
        let path = Path(self.path.iter().map(SegRef::to_seg).collect());
        self.out.push(RawDiff { path, git: git.cloned(), live: live.cloned(), extra });
    }

    fn push_field(&mut self, name: &'a str) -> usize {
        let len = self.schema.len();
        if !self.schema.is_empty() {
            self.schema.push('.');
        }
        self.schema.push_str(name);
        self.path.push(SegRef::Field(name));
        len
    }

    fn push_item(&mut self, key: Vec<(String, String)>, hidden: Vec<bool>, index: usize) -> usize {
        let len = self.schema.len();
        self.schema.push_str("[]");
        self.path.push(SegRef::Item { key, hidden, index });
        len
    }

    fn pop(&mut self, schema_len: usize) {
        self.path.pop();
        self.schema.truncate(schema_len);
    }

    /// `key_fields`: the merge-key fields of the item being walked; they are its identity, so a
    /// key field only the cluster spells out (`protocol: TCP`) is not an extra field.
    fn walk(&mut self, d: &'a Value, l: Option<&'a Value>, key_fields: &[String]) {
        if d.is_null() {
            return;
        }
        let l = l.filter(|v| !v.is_null());
        match (d, l) {
            (_, None) => {
                if is_empty(d) {
                    return;
                }
                if let Value::Object(dm) = d {
                    for (k, v) in dm {
                        let s = self.push_field(k);
                        self.walk(v, None, &[]);
                        self.pop(s);
                    }
                } else {
                    self.report(Some(d), None, false);
                }
            }
            (Value::Object(dm), Some(Value::Object(lm))) => {
                for (k, v) in dm {
                    let s = self.push_field(k);
                    self.walk(v, lm.get(k), &[]);
                    self.pop(s);
                }
                for (k, lv) in lm {
                    if dm.get(k).is_none_or(Value::is_null) && !is_empty(lv) && !key_fields.contains(k) {
                        let s = self.push_field(k);
                        self.extra(lv);
                        self.pop(s);
                    }
                }
            }
            (Value::Object(dm), Some(other)) => {
                if !dm.is_empty() {
                    self.report(Some(d), Some(other), false);
                }
            }
            (Value::Array(da), Some(l)) => {
                if da.is_empty() {
                    if !is_empty(l) {
                        self.report(Some(d), Some(l), false);
                    }
                } else if let Value::Array(la) = l {
                    self.list(da, la, l);
                } else {
                    self.report(Some(d), Some(l), false);
                }
            }
            (_, Some(l)) => {
                if !scalar_eq(d, l) {
                    self.report(Some(d), Some(l), false);
                }
            }
        }
    }

    /// A field only the cluster has: mappings are opened down to their leaves so that each
    /// added field is judged (and typed) on its own.
    fn extra(&mut self, lv: &'a Value) {
        match lv {
            Value::Object(m) if !m.is_empty() => {
                for (k, v) in m {
                    if !is_empty(v) {
                        let s = self.push_field(k);
                        self.extra(v);
                        self.pop(s);
                    }
                }
            }
            _ => self.report(None, Some(lv), true),
        }
    }

    fn list(&mut self, da: &'a [Value], la: &'a [Value], l: &'a Value) {
        let rule = self.merge_keys.lookup(self.kind, &self.schema);
        if let Some(rule) = rule
            && let (Some(dk), Some(lk)) = (keys_of(rule, da), keys_of(rule, la))
        {
            let index: HashMap<&Vec<(String, String)>, usize> = lk.iter().enumerate().map(|(j, k)| (&k.0, j)).collect();
            let mut matched = vec![false; la.len()];
            // Items whose key changed (a Service port renumbered) are paired by `name` when
            // the key does not include it, so the change shows as one field, not as an item
            // removed and another added.
            let by_name = |item: &Value| item.get("name").and_then(Value::as_str).map(str::to_owned);
            let renamed = |i: usize, matched: &[bool]| -> Option<usize> {
                if rule.keys.iter().any(|k| k == "name") {
                    return None;
                }
                let name = by_name(&da[i])?;
                let j = la.iter().position(|l| by_name(l).as_deref() == Some(name.as_str()))?;
                (!matched[j] && !index.contains_key(&dk[i].0) && !dk.iter().any(|d| d.0 == lk[j].0)).then_some(j)
            };
            for (i, (item, (key, hidden))) in da.iter().zip(dk.iter()).enumerate() {
                let found = index.get(key).copied().or_else(|| renamed(i, &matched));
                let s = self.push_item(key.clone(), hidden.clone(), i);
                match found {
                    Some(j) => {
                        matched[j] = true;
                        self.walk(item, Some(&la[j]), &rule.keys);
                    }
                    None => self.report(Some(item), None, false),
                }
                self.pop(s);
            }
            for (j, (item, (key, hidden))) in la.iter().zip(lk).enumerate() {
                if !matched[j] {
                    let s = self.push_item(key, hidden, j);
                    self.report(None, Some(item), true);
                    self.pop(s);
                }
            }
            return;
        }
        if da.len() != la.len() {
            let d = Value::Array(da.to_vec());
            self.report(Some(&d), Some(l), false);
            return;
        }
        for (i, (d, l)) in da.iter().zip(la).enumerate() {
            let s = self.push_item(Vec::new(), Vec::new(), i);
            self.walk(d, Some(l), &[]);
            self.pop(s);
        }
    }
}

/// The value at a path in a (normalised) object, matching keyed items by their key fields.
pub fn lookup<'v>(root: &'v Value, path: &Path) -> Option<&'v Value> {
    lookup_segments(root, path.segments())
}

/// [`lookup`] of a path given as segments (owned or borrowed).
pub fn lookup_segments<'v, S: SegView>(root: &'v Value, segments: &[S]) -> Option<&'v Value> {
    let mut v = root;
    for seg in segments {
        v = match (seg.field(), seg.item()) {
            (Some(f), _) => v.get(f)?,
            (None, Some((key, hidden, _))) if !key.is_empty() => v.as_array()?.iter().find(|item| {
                key.iter().zip(hidden.iter().chain(std::iter::repeat(&false))).all(|((k, want), h)| {
                    match item.get(k).filter(|x| !x.is_null()) {
                        Some(x) => scalar_text(x).as_deref() == Some(want.as_str()),
                        None => *h,
                    }
                })
            })?,
            (None, Some((_, _, index))) => v.as_array()?.get(index)?,
            (None, None) => return None,
        };
    }
    (!v.is_null()).then_some(v)
}
