//! The last applied configuration (`kubectl.kubernetes.io/last-applied-configuration`), read
//! only for which fields it holds.
//!
//! The engine asks it one question: does the configuration `kubectl apply` last sent hold this
//! path (three-way awareness of fields only the cluster has). Reading the annotation's JSON into
//! a [`serde_json::Value`] for that copied every key and string; [`Applied`] borrows them from
//! the annotation's text and answers exactly as [`crate::diff::lookup_segments`] does on the
//! parsed value.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Number;

use drift_model::path::SegView;

/// A JSON document read for its shape: mappings, lists, and the scalars list items are keyed
/// by, with strings borrowed from the text where they hold no escapes.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied<'a> {
    /// A mapping, fields in the text's order (a repeated field: the last one counts, as in
    /// `serde_json`).
    Map(Vec<(Cow<'a, str>, Applied<'a>)>),
    /// A list.
    List(Vec<Applied<'a>>),
    /// A string.
    Str(Cow<'a, str>),
    /// A number.
    Num(Number),
    /// A boolean.
    Bool(bool),
    /// `null`.
    Null,
}

impl<'a> Applied<'a> {
    /// Reads a JSON text; `None` when it is not JSON.
    pub fn read(text: &'a str) -> Option<Self> {
        serde_json::from_str(text).ok()
    }

    fn get(&self, field: &str) -> Option<&Applied<'a>> {
        match self {
            Applied::Map(fields) => fields.iter().rev().find(|(k, _)| k == field).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The text [`drift_model::path::scalar_text`] gives the same scalar, compared with `want`.
    fn scalar_is(&self, want: &str) -> bool {
        match self {
            Applied::Str(s) => s == want,
            Applied::Num(n) => n.to_string() == want,
            Applied::Bool(b) => want == if *b { "true" } else { "false" },
            _ => false,
        }
    }

    /// Whether the document holds a value other than `null` at a path: what
    /// `lookup_segments(&value, segments).is_some()` answers on the parsed value.
    pub fn holds<S: SegView>(&self, segments: &[S]) -> bool {
        let mut v = self;
        for seg in segments {
            let next = match (seg.field(), seg.item()) {
                (Some(f), _) => v.get(f),
                (None, Some((key, hidden, _))) if !key.is_empty() => match v {
                    Applied::List(items) => items.iter().find(|item| {
                        key.iter().zip(hidden.iter().chain(std::iter::repeat(&false))).all(|((k, want), h)| match item
                            .get(k)
                            .filter(|x| **x != Applied::Null)
                        {
                            Some(x) => x.scalar_is(want),
                            None => *h,
                        })
                    }),
                    _ => None,
                },
                (None, Some((_, _, index))) => match v {
                    Applied::List(items) => items.get(index),
                    _ => None,
                },
                (None, None) => None,
            };
            match next {
                Some(n) => v = n,
                None => return false,
            }
        }
        *v != Applied::Null
    }
}

/// A string, borrowed when the text holds it as it is.
struct Text<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> Deserialize<'de> for Applied<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Applied<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> Result<Self::Value, E> {
                Ok(Applied::Bool(b))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Self::Value, E> {
                Ok(Applied::Num(n.into()))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Self::Value, E> {
                Ok(Applied::Num(n.into()))
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<Self::Value, E> {
                Ok(Number::from_f64(n).map_or(Applied::Null, Applied::Num))
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Applied::Str(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Applied::Str(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Self::Value, E> {
                Ok(Applied::Str(Cow::Owned(s)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Applied::Null)
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Applied::Null)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                Applied::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Applied::List(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(0).min(64));
                while let Some((Text(k), v)) = map.next_entry()? {
                    fields.push((k, v));
                }
                Ok(Applied::Map(fields))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::lookup_segments;
    use drift_model::path::{Path, Seg};
    use proptest::prelude::*;
    use serde_json::Value;

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            prop::sample::select(&["a", "b", "web", "80", "true", "1.5", "x\"y", "é"][..]).prop_map(Value::from),
            prop::sample::select(&[0i64, 80, -1][..]).prop_map(Value::from),
            Just(Value::from(1.5)),
            Just(Value::from(1e20)),
            Just(Value::from(u64::MAX)),
            any::<bool>().prop_map(Value::from),
            Just(Value::Null),
        ];
        leaf.prop_recursive(4, 40, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec((prop::sample::select(&["a", "b", "name", "port", "x\ny"][..]), inner), 0..4)
                    .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
            ]
        })
    }

    fn seg() -> impl Strategy<Value = Seg> {
        prop_oneof![
            prop::sample::select(&["a", "b", "name", "port", "x\ny"][..]).prop_map(|f| Seg::Field(f.to_owned())),
            (0usize..4).prop_map(|index| Seg::Item { key: Vec::new(), hidden: Vec::new(), index }),
            (
                prop::collection::vec(
                    (
                        prop::sample::select(&["a", "name", "port"][..]),
                        prop::sample::select(&["a", "web", "80", "true", "1.5", "-1"][..])
                    ),
                    1..3
                ),
                prop::collection::vec(any::<bool>(), 0..3)
            )
                .prop_map(|(key, hidden)| Seg::Item {
                    key: key.into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect(),
                    hidden,
                    index: 0
                }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        #[test]
        fn holds_answers_what_a_lookup_in_the_parsed_value_answers(
            v in value(),
            paths in prop::collection::vec(prop::collection::vec(seg(), 0..4), 1..8),
            repeat in any::<bool>(),
        ) {
            let mut text = serde_json::to_string(&v).unwrap();
            if repeat && text.starts_with("{\"") {
                // A repeated field: the last one counts.
                text = format!("{{\"a\":null,{}", &text[1..]);
            }
            let parsed: Value = serde_json::from_str(&text).unwrap();
            let applied = Applied::read(&text).unwrap();
            for p in paths.iter().chain(std::iter::once(&Vec::new())) {
                prop_assert_eq!(applied.holds(p), lookup_segments(&parsed, &Path(p.clone()).0).is_some(), "{} at {:?}", text, p);
            }
        }
    }

    #[test]
    fn strings_without_escapes_are_borrowed() {
        let text = r#"{"spec":{"containers":[{"name":"web","image":"a\"b"}]}}"#;
        let Applied::Map(top) = Applied::read(text).unwrap() else { panic!() };
        let Applied::Map(spec) = &top[0].1 else { panic!() };
        assert!(matches!(top[0].0, Cow::Borrowed("spec")));
        let Applied::List(items) = &spec[0].1 else { panic!() };
        let Applied::Map(c) = &items[0] else { panic!() };
        assert!(matches!(&c[0].1, Applied::Str(Cow::Borrowed("web"))));
        assert!(matches!(&c[1].1, Applied::Str(Cow::Owned(s)) if s == "a\"b"));
        assert_eq!(Applied::read("{"), None);
    }
}
