//! The diff walks the objects as they are, normalising as it goes (issue 15: no copy of either
//! object per comparison). Its law: over any pair of objects, it finds exactly what the walk of
//! two normalised copies finds, the same differences with the same values, and asks about the
//! same fields only the cluster has, in the same order.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use drift_core::diff::{diff_filtered, diff_normalised, diff_view};
use drift_core::drift_model::tree::Tree;
use drift_core::merge_keys::MergeKeys;
use drift_core::normalize::{DROPPED_ANNOTATIONS, DROPPED_METADATA, SecretHasher, normalize, view};
use drift_core::path::{SegRef, SegView};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use serde_json::{Map, Value, json};

/// Field names where normalisation acts (dropped fields, quantity parents, merge-keyed lists)
/// and a few where it does not.
const KEYS: &[&str] = &[
    "status",
    "metadata",
    "annotations",
    "labels",
    "namespace",
    "uid",
    "resourceVersion",
    "managedFields",
    "name",
    "spec",
    "limits",
    "requests",
    "hard",
    "capacity",
    "sizeLimit",
    "default",
    "max",
    "containers",
    "ports",
    "containerPort",
    "protocol",
    "cpu",
    "memory",
    "data",
    "stringData",
    "kubectl.kubernetes.io/last-applied-configuration",
    "deployment.kubernetes.io/revision",
    "x",
];

fn key() -> impl Strategy<Value = String> {
    prop::sample::select(KEYS).prop_map(str::to_owned)
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::sample::select(
            &["1000m", "1", "0.5", "500m", "1Gi", "1024Mi", "2k", "abc", "", "1e3", "01", "TCP", "web"][..]
        )
        .prop_map(|s| json!(s)),
        prop::sample::select(&[0i64, 1, 80, 1000, -2][..]).prop_map(|n| json!(n)),
        Just(json!(0.5)),
        Just(json!(true)),
        Just(Value::Null),
        Just(json!({})),
        Just(json!([])),
    ]
}

/// A mapping of quantities the way resources hold them (`limits: {cpu: 1000m}`).
fn quantities() -> impl Strategy<Value = Value> {
    (prop::sample::select(&["limits", "requests", "hard", "default", "x"][..]), key(), scalar())
        .prop_map(|(parent, k, v)| json!({parent: {k: v}}))
}

fn value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(5, 48, 4, |inner| {
        prop_oneof![
            quantities(),
            prop::collection::vec((key(), inner.clone()), 0..4).prop_map(|kv| Value::Object(kv.into_iter().collect())),
            prop::collection::vec(inner, 0..3).prop_map(Value::Array),
        ]
    })
}

/// `base` with `overlay` laid over it: mappings merged field by field, anything else replaced
/// (so the two sides of a pair share most of their fields and differ in some).
fn overlay(base: &Value, over: &Value) -> Value {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            let mut m = b.clone();
            for (k, v) in o {
                let merged = m.get(k).map_or_else(|| v.clone(), |bv| overlay(bv, v));
                m.insert(k.clone(), merged);
            }
            Value::Object(m)
        }
        (Value::Array(b), Value::Array(o)) if b.len() == o.len() => {
            Value::Array(b.iter().zip(o).map(|(b, o)| overlay(b, o)).collect())
        }
        _ => over.clone(),
    }
}

fn object() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::vec((key(), value()), 0..6).prop_map(|kv| kv.into_iter().collect())
}

/// The same quantities spelled in different ways, and a few that are not quantities.
fn quantity() -> impl Strategy<Value = Value> {
    prop::sample::select(&["1000m", "1", "1e3", "1Gi", "1024Mi", "0.5", "500m", "abc"][..])
        .prop_map(|s| json!(s))
        .boxed()
        .prop_union(prop::sample::select(&[1i64, 1000][..]).prop_map(|n| json!(n)).boxed())
}

/// Quantities at one place on both sides, spelled independently, in a mapping, in a list,
/// or in lists in a list (where normalisation does not reach), the lists perhaps of other
/// lengths on the live side.
fn resources() -> impl Strategy<Value = (Value, Value)> {
    (
        0usize..4,
        prop::sample::select(&["limits", "requests", "hard", "max", "x"][..]),
        prop::sample::select(&["cpu", "memory", "sizeLimit"][..]),
        quantity(),
        quantity(),
        any::<bool>(),
    )
        .prop_map(|(wrap, parent, k, q1, q2, longer)| {
            let make = |q: &Value| if k == "sizeLimit" { json!({k: q}) } else { json!({parent: {k: q}}) };
            let (m1, m2) = (make(&q1), make(&q2));
            match wrap {
                0 => (m1, m2),
                1 => (json!([m1]), if longer { json!([m2, m1]) } else { json!([m2]) }),
                2 => (json!([[m1]]), if longer { json!([[m2, m1]]) } else { json!([[m2]]) }),
                _ => (json!([[m1], [m1, m1]]), if longer { json!([[m2], [m2]]) } else { json!([[m2], [m1, m2]]) }),
            }
        })
}

/// Metadata shapes around what normalisation drops: only dropped fields, dropped
/// annotations, a scalar or an empty list where a mapping belongs.
fn metadata() -> impl Strategy<Value = Option<Value>> {
    prop::option::of(prop::sample::select(vec![
        json!({"uid": "u"}),
        json!({"namespace": "n", "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}}),
        json!({"annotations": {"deployment.kubernetes.io/revision": "1"}}),
        json!({"annotations": {"deployment.kubernetes.io/revision": "1", "a": "b"}, "labels": {"a": "b"}}),
        json!({"name": "a", "managedFields": []}),
        json!("x"),
        json!([]),
        json!({}),
    ]))
}

/// A pair of one kind: the desired object, and the live one made from it by an overlay (or
/// made alone), with quantities and metadata of the shapes above in some of them.
fn pair() -> impl Strategy<Value = (String, Value, Value)> {
    (
        prop::sample::select(&["Deployment", "LimitRange", "Secret", "ConfigMap"][..]),
        object(),
        object(),
        any::<bool>(),
        prop::option::of(resources()),
        (metadata(), metadata(), prop::option::of(prop::sample::select(vec![json!({"a": 1}), json!("x"), json!([])]))),
    )
        .prop_map(|(kind, desired, over, independent, resources, (meta_d, meta_l, status))| {
            let mut desired = Value::Object(desired);
            desired["kind"] = json!(kind);
            let mut live = if independent { Value::Object(over) } else { overlay(&desired, &Value::Object(over)) };
            live["kind"] = json!(kind);
            if let Some((r1, r2)) = resources {
                desired["r"] = r1;
                live["r"] = r2;
            }
            if let Some(m) = meta_d {
                desired["metadata"] = m;
            }
            if let Some(m) = meta_l {
                live["metadata"] = m;
            }
            if let Some(s) = status {
                live["status"] = s.clone();
                desired["status"] = s;
            }
            (kind.to_owned(), desired, live)
        })
}

/// The walk's questions about fields only the cluster has, answered by a fixed rule (yes for
/// every other one, by position in the walk), and written down.
fn asking(asked: &mut Vec<String>) -> impl FnMut(&[SegRef<'_>]) -> bool + '_ {
    move |segs| {
        let text: Vec<String> =
            segs.iter().map(|s| s.field().map_or_else(|| format!("{:?}", s.item()), str::to_owned)).collect();
        asked.push(text.join("."));
        asked.len() % 2 == 1
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn the_normalising_walk_finds_what_the_walk_of_normalised_copies_finds((kind, desired, live) in pair()) {
        let hasher = SecretHasher::new([3; 32]);
        let keys = MergeKeys::default();
        let (nd, nl) = (normalize(&desired, &hasher), normalize(&live, &hasher));
        let (mut asked_copies, mut asked_walk) = (Vec::new(), Vec::new());
        let copies = diff_normalised(&kind, &nd, &nl, &keys, &mut asking(&mut asked_copies));
        let (vd, vl) = (view(&desired, &hasher), view(&live, &hasher));
        let walk = diff_filtered(&kind, &vd, &vl, &keys, &mut asking(&mut asked_walk));
        prop_assert_eq!(&walk, &copies, "desired {} live {}", desired, live);
        prop_assert_eq!(&asked_walk, &asked_copies);
        // And the same walk of the live object read as a tree (`drift diff --live`).
        let tree = Tree::from_value(&vl);
        let mut asked_tree = Vec::new();
        let on_tree = diff_view(&kind, &*vd, tree.root(), &keys, &mut asking(&mut asked_tree));
        prop_assert_eq!(&on_tree, &walk, "the live object as a tree");
        prop_assert_eq!(&asked_tree, &asked_walk);
        // And both as trees (a kept desired object expanded into one).
        let desired_tree = Tree::from_value(&vd);
        let mut asked_trees = Vec::new();
        let on_trees = diff_view(&kind, desired_tree.root(), tree.root(), &keys, &mut asking(&mut asked_trees));
        prop_assert_eq!(&on_trees, &walk, "both objects as trees");
        prop_assert_eq!(asked_trees, asked_walk);
        // And the walk of normalised copies is the same whether it normalises or not.
        let again = diff_filtered(&kind, &nd, &nl, &keys, &mut |_| true);
        prop_assert_eq!(again, diff_normalised(&kind, &nd, &nl, &keys, &mut |_| true));
    }
}

#[test]
fn the_pairs_reach_every_place_normalisation_acts() {
    // The generator is worth its cases only if the lens is exercised: count pairs whose
    // normalised copies differ from the objects in each way.
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut dropped, mut quantity, mut differ) = (0, 0, 0);
    let hasher = SecretHasher::new([3; 32]);
    for _ in 0..2000 {
        let (kind, desired, live) = pair().new_tree(&mut runner).unwrap().current();
        let nl = normalize(&live, &hasher);
        if kind != "Secret" {
            let mut only_dropped = live.clone();
            if let Value::Object(m) = &mut only_dropped {
                m.remove("status");
                if let Some(Value::Object(meta)) = m.get_mut("metadata") {
                    meta.retain(|k, _| !DROPPED_METADATA.contains(&k.as_str()));
                    if let Some(Value::Object(a)) = meta.get_mut("annotations") {
                        a.retain(|k, _| !DROPPED_ANNOTATIONS.contains(&k.as_str()));
                    }
                }
            }
            dropped += usize::from(only_dropped != live);
            quantity += usize::from(only_dropped != nl);
        }
        if !drift_core::diff::diff(&kind, &normalize(&desired, &hasher), &nl, &MergeKeys::default()).is_empty() {
            differ += 1;
        }
    }
    assert!(dropped > 100 && quantity > 200 && differ > 500, "dropped {dropped}, quantity {quantity}, differ {differ}");
}
