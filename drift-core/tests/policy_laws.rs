//! Property laws of the policy rules (docs/policies.md): a finding's path always points into the
//! object, at the offending value or at where a missing field goes (never through a value that is
//! not an object or a list); its container is the one the path is in; findings are sorted,
//! unique, the same on both sides; and a Secret's data never reaches one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use drift_core::policy::{Policy, PolicyConfig, Rule, Side};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn maybe<T: std::fmt::Debug + Clone + 'static>(s: impl Strategy<Value = T> + 'static) -> BoxedStrategy<Option<T>> {
    prop_oneof![Just(None), s.prop_map(Some)].boxed()
}

fn security() -> impl Strategy<Value = Option<Value>> {
    maybe((maybe(prop_oneof![Just(0i64), Just(1000i64)]), maybe(any::<bool>()), maybe(any::<bool>())).prop_map(
        |(user, non_root, privileged)| {
            let mut m = Map::new();
            if let Some(u) = user {
                m.insert("runAsUser".into(), json!(u));
            }
            if let Some(n) = non_root {
                m.insert("runAsNonRoot".into(), json!(n));
            }
            if let Some(p) = privileged {
                m.insert("privileged".into(), json!(p));
            }
            Value::Object(m)
        },
    ))
}

fn container() -> impl Strategy<Value = Value> {
    let image = prop_oneof![
        Just("nginx"),
        Just("nginx:latest"),
        Just("nginx:1.27"),
        Just("registry.example:5000/web"),
        Just("web@sha256:0123abcd"),
        Just(""),
    ];
    let resources = maybe(proptest::sample::subsequence(
        vec!["requests/cpu", "requests/memory", "limits/cpu", "limits/memory"],
        0..=4,
    ));
    ("[a-z]{1,6}", maybe(image), resources, security()).prop_map(|(name, image, resources, security)| {
        let mut c = Map::new();
        c.insert("name".into(), json!(name));
        if let Some(i) = image {
            c.insert("image".into(), json!(i));
        }
        if let Some(set) = resources {
            let mut r = json!({});
            for field in set {
                let (kind, what) = field.split_once('/').unwrap();
                r.as_object_mut().unwrap().entry(kind).or_insert_with(|| json!({}))[what] = json!("1");
            }
            c.insert("resources".into(), r);
        }
        if let Some(s) = security {
            c.insert("securityContext".into(), s);
        }
        Value::Object(c)
    })
}

fn pod_spec() -> impl Strategy<Value = Value> {
    (
        maybe(any::<bool>()),
        maybe(any::<bool>()),
        security(),
        prop::collection::vec(container(), 0..3),
        maybe(prop::collection::vec(container(), 0..2)),
        maybe(prop::collection::vec(container(), 0..2)),
    )
        .prop_map(|(net, pid, security, containers, init, ephemeral)| {
            let mut s = Map::new();
            if let Some(n) = net {
                s.insert("hostNetwork".into(), json!(n));
            }
            if let Some(p) = pid {
                s.insert("hostPID".into(), json!(p));
            }
            if let Some(sc) = security {
                s.insert("securityContext".into(), sc);
            }
            s.insert("containers".into(), json!(containers));
            if let Some(i) = init {
                s.insert("initContainers".into(), json!(i));
            }
            if let Some(e) = ephemeral {
                s.insert("ephemeralContainers".into(), json!(e));
            }
            Value::Object(s)
        })
}

fn object() -> impl Strategy<Value = Value> {
    let kinds = prop_oneof![
        Just(("v1", "Pod")),
        Just(("apps/v1", "Deployment")),
        Just(("apps/v1", "StatefulSet")),
        Just(("apps/v1", "DaemonSet")),
        Just(("apps/v1", "ReplicaSet")),
        Just(("batch/v1", "Job")),
        Just(("batch/v1", "CronJob")),
        Just(("v1", "ConfigMap")),
    ];
    let labels = proptest::sample::subsequence(vec!["team", "app.kubernetes.io/name", "tier"], 0..=3);
    (kinds, pod_spec(), labels).prop_map(|((api, kind), spec, labels)| {
        let spec = match kind {
            "Pod" | "ConfigMap" => spec,
            "CronJob" => json!({"jobTemplate": {"spec": {"template": {"spec": spec}}}}),
            _ => json!({"template": {"spec": spec}}),
        };
        let labels: Map<String, Value> = labels.into_iter().map(|l| (l.to_owned(), json!("x"))).collect();
        json!({"apiVersion": api, "kind": kind, "metadata": {"name": "o", "namespace": "a", "labels": labels}, "spec": spec})
    })
}

fn policy() -> Policy {
    Policy::new(&PolicyConfig {
        required_labels: vec!["team".into(), "app.kubernetes.io/name".into()],
        ..PolicyConfig::default()
    })
    .unwrap()
}

/// RFC 6901 reference tokens of a pointer.
fn tokens(pointer: &str) -> Vec<String> {
    assert!(pointer.starts_with('/'), "{pointer}");
    pointer[1..].split('/').map(|t| t.replace("~1", "/").replace("~0", "~")).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn a_finding_points_into_the_object_at_its_value_or_where_it_is_missing(o in object()) {
        let findings = policy().evaluate(&o, Side::Desired);
        for f in &findings {
            let mut at = &o;
            let mut missing = false;
            for t in tokens(&f.path) {
                if missing {
                    break;
                }
                let next = match at {
                    Value::Object(m) => m.get(&t),
                    Value::Array(a) => t.parse::<usize>().ok().and_then(|i| a.get(i)),
                    other => panic!("{}: {} walks through {other}", f.rule, f.path),
                };
                match next {
                    Some(v) => at = v,
                    None => {
                        prop_assert!(at.is_object(), "{}: {} is missing at an object", f.rule, f.path);
                        missing = true;
                    }
                }
            }
            let value = o.pointer(&f.path);
            prop_assert_eq!(value.is_none(), missing);
            match f.rule {
                Rule::Privileged | Rule::HostNetwork | Rule::HostPid => prop_assert_eq!(value, Some(&json!(true))),
                Rule::ImageTag => prop_assert!(value.is_some_and(Value::is_string)),
                Rule::RunAsRoot if f.path.ends_with("/runAsUser") => prop_assert_eq!(value, Some(&json!(0))),
                Rule::RunAsRoot => {
                    prop_assert!(f.path.ends_with("/runAsNonRoot"));
                    prop_assert!(value.is_none() || value == Some(&json!(false)), "{:?}", value);
                }
                Rule::ResourceRequests | Rule::ResourceLimits | Rule::RequiredLabels => prop_assert!(missing),
            }
            // The container is the list item the path is in.
            let parts = tokens(&f.path);
            let list = parts.iter().position(|t| t.ends_with("ontainers"));
            match (&f.container, list) {
                (Some(name), Some(i)) => {
                    let item = format!("/{}", parts[..i + 2].join("/"));
                    prop_assert_eq!(o.pointer(&item).and_then(|c| c.get("name")), Some(&json!(name)));
                }
                (None, None) => {}
                (c, l) => prop_assert!(f.rule == Rule::RunAsRoot && c.is_some() && l.is_none(),
                    "{} at {} with container {:?}", f.rule, f.path, c),
            }
        }
        // Sorted by rule then path, each (rule, path, container) once.
        let keys: Vec<_> = findings.iter().map(|f| (f.rule, f.path.clone(), f.container.clone())).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        sorted.dedup();
        prop_assert_eq!(keys, sorted);
        // The same object gives the same findings on the other side.
        let live = policy().evaluate(&o, Side::Live);
        prop_assert_eq!(live.len(), findings.len());
        for (d, l) in findings.iter().zip(&live) {
            prop_assert_eq!((d.side, l.side), (Side::Desired, Side::Live));
            prop_assert_eq!((&d.rule, &d.path, &d.message), (&l.rule, &l.path, &l.message));
        }
    }

    #[test]
    fn a_secret_never_reaches_a_finding(data in prop::collection::btree_map("[a-z]{1,8}", "[A-Za-z0-9]{12,24}", 1..4), pod in pod_spec()) {
        // A Secret with a field named like a pod spec, and data, and no required label.
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "a"},
            "data": data, "stringData": data, "spec": pod});
        let findings = policy().evaluate(&secret, Side::Live);
        prop_assert_eq!(findings.iter().map(|f| f.rule).collect::<Vec<_>>(), [Rule::RequiredLabels, Rule::RequiredLabels]);
        let text = serde_json::to_string(&findings).unwrap();
        for v in data.values() {
            prop_assert!(!text.contains(v.as_str()), "{v} in {text}");
        }
    }
}
