//! Property laws of the engine (issue 2): identity, idempotent normalisation, server defaulting
//! and quantity canonicalisation are not drift, keyed-list order is not drift, one mutation is
//! exactly one drift of the right type at the right path, and no Secret value ever leaks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use drift_core::normalize::{SecretHasher, normalize};
use drift_core::{Comparator, DriftType, Engine, Resource};
use proptest::prelude::*;
use serde_json::{Value, json};

fn engine() -> Engine {
    Engine::default().with_secret_hasher(SecretHasher::new([7; 32]))
}

fn res(v: Value) -> Resource {
    Resource::from_object(v).unwrap()
}

/// The engine's drifts of `desired` against `live`, which must be the same whichever way the
/// live object is read: a `Resource`, a tree (`Comparator::compare_tree`, what `drift diff
/// --live` compares), and a tree with its managedFields kept as their JSON text; and with the
/// desired object a tree too (`Comparator::compare_trees`, a kept object expanded into one).
fn compared(desired: &Resource, live: &Resource) -> Vec<drift_core::Drift> {
    use drift_core::drift_model::tree::{ObjectRef, ObjectTree, Tree};
    let drifts = engine().compare(desired, Some(live));
    let as_tree = |object: &Value| ObjectTree::new(Tree::from_value(object), live.provenance.clone()).unwrap();
    assert_eq!(engine().compare_tree(desired, &as_tree(&live.object)), drifts, "the live object as a tree");
    let mut text = Value::clone(&live.object);
    if let Some(m) = text.pointer_mut("/metadata/managedFields") {
        *m = Value::String(serde_json::to_string_pretty(m).unwrap());
    }
    assert_eq!(engine().compare_tree(desired, &as_tree(&text)), drifts, "managedFields as text");
    let desired_tree = Tree::from_value(&desired.object);
    let desired_ref = ObjectRef {
        key: &desired.key,
        api_version: &desired.api_version,
        provenance: &desired.provenance,
        tree: &desired_tree,
    };
    assert_eq!(engine().compare_trees(desired_ref, &as_tree(&text)), drifts, "both as trees");
    drifts
}

#[derive(Debug, Clone)]
struct Container {
    name: String,
    image: String,
    cpu_millis: u32,
    mem_mi: u32,
    env: Vec<(String, String)>,
    port: u16,
}

fn container(i: usize) -> impl Strategy<Value = Container> {
    (
        "[a-z]{3,8}(:[0-9]\\.[0-9]{1,2})?",
        1u32..4000,
        1u32..8192,
        prop::collection::btree_map("[A-Z]{2,6}", "[a-z0-9]{0,8}", 0..4),
        1024u16..9000,
    )
        .prop_map(move |(image, cpu_millis, mem_mi, env, port)| Container {
            name: format!("c{i}"),
            image,
            cpu_millis,
            mem_mi,
            env: env.into_iter().collect(),
            port,
        })
}

fn deployment() -> impl Strategy<Value = Value> {
    (1usize..4, "[a-z]{3,10}", 0u32..20, "[a-z]{1,8}")
        .prop_flat_map(|(n, name, replicas, app)| {
            let cs: Vec<_> = (0..n).map(container).collect();
            (Just(name), Just(replicas), Just(app), cs)
        })
        .prop_map(|(name, replicas, app, cs)| {
            let containers: Vec<Value> = cs
                .iter()
                .map(|c| {
                    json!({"name": c.name, "image": c.image,
                           "env": c.env.iter().map(|(k, v)| json!({"name": k, "value": v})).collect::<Vec<_>>(),
                           "ports": [{"containerPort": c.port}],
                           "resources": {"limits": {"cpu": format!("{}m", c.cpu_millis), "memory": format!("{}Mi", c.mem_mi)},
                                         "requests": {"cpu": format!("{}m", c.cpu_millis / 2 + 1)}}})
                })
                .collect();
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": name, "namespace": "shop", "labels": {"app": app}},
                   "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": app}},
                            "template": {"metadata": {"labels": {"app": app}},
                                         "spec": {"containers": containers}}}})
        })
}

/// What a real API server does on write: defaults, canonical quantities, bookkeeping.
fn as_api_server_returns(desired: &Value) -> Value {
    let mut live = desired.clone();
    live["metadata"]["uid"] = json!("6f1e0b6e-1111-4222-8333-444455556666");
    live["metadata"]["resourceVersion"] = json!("4242");
    live["metadata"]["generation"] = json!(3);
    live["metadata"]["creationTimestamp"] = json!("2026-11-01T10:00:00Z");
    // As `kubectl apply` leaves it: the configuration it sent, in an annotation.
    live["metadata"]["annotations"] = json!({"deployment.kubernetes.io/revision": "3",
        "kubectl.kubernetes.io/last-applied-configuration": serde_json::to_string(desired).unwrap()});
    live["metadata"]["managedFields"] = json!([{"manager": "kube-controller-manager", "operation": "Update",
        "time": "2026-11-01T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:replicas": {}}}}]);
    let spec = &mut live["spec"];
    spec["revisionHistoryLimit"] = json!(10);
    spec["progressDeadlineSeconds"] = json!(600);
    spec["strategy"] = json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}});
    let pod = &mut spec["template"]["spec"];
    pod["restartPolicy"] = json!("Always");
    pod["dnsPolicy"] = json!("ClusterFirst");
    pod["schedulerName"] = json!("default-scheduler");
    pod["securityContext"] = json!({});
    pod["terminationGracePeriodSeconds"] = json!(30);
    for c in pod["containers"].as_array_mut().unwrap() {
        c["terminationMessagePath"] = json!("/dev/termination-log");
        c["terminationMessagePolicy"] = json!("File");
        c["imagePullPolicy"] = json!("IfNotPresent");
        for p in c["ports"].as_array_mut().unwrap() {
            p["protocol"] = json!("TCP");
        }
        // Canonical quantities as the API server writes them.
        for section in ["limits", "requests"] {
            if let Some(Value::Object(m)) = c["resources"].get_mut(section) {
                for (_, q) in m.iter_mut() {
                    let text = q.as_str().unwrap().to_owned();
                    *q = json!(server_canonical(&text));
                }
            }
        }
    }
    live["status"] = json!({"replicas": 1, "observedGeneration": 3});
    live
}

/// The API server's own spelling of a quantity (`1000m` -> `1`, `1024Mi` -> `1Gi`), written here
/// from its documented rules, independently of the engine's canonical form.
fn server_canonical(text: &str) -> String {
    if let Some(m) = text.strip_suffix('m') {
        let m: u64 = m.parse().unwrap();
        return if m.is_multiple_of(1000) { (m / 1000).to_string() } else { format!("{m}m") };
    }
    if let Some(mi) = text.strip_suffix("Mi") {
        let mi: u64 = mi.parse().unwrap();
        return if mi.is_multiple_of(1024) { format!("{}Gi", mi / 1024) } else { format!("{mi}Mi") };
    }
    text.to_owned()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn comparing_an_object_with_itself_finds_nothing(d in deployment()) {
        prop_assert!(compared(&res(d.clone()), &res(d)).is_empty());
    }

    #[test]
    fn normalising_twice_equals_normalising_once(d in deployment()) {
        let h = SecretHasher::new([1; 32]);
        let live = as_api_server_returns(&d);
        let once = normalize(&live, &h);
        prop_assert_eq!(normalize(&once, &h), once);
    }

    #[test]
    fn api_server_defaults_and_canonical_quantities_are_not_drift(d in deployment()) {
        let live = as_api_server_returns(&d);
        let drifts = compared(&res(d), &res(live));
        prop_assert!(drifts.is_empty(), "{:?}", drifts);
    }

    #[test]
    fn reordering_keyed_lists_is_not_drift(d in deployment(), seed in any::<u64>()) {
        let mut live = as_api_server_returns(&d);
        let cs = live["spec"]["template"]["spec"]["containers"].as_array_mut().unwrap();
        cs.reverse();
        for c in cs.iter_mut() {
            let env = c["env"].as_array_mut().unwrap();
            if !env.is_empty() {
                let k = (seed as usize) % env.len();
                env.rotate_left(k);
            }
        }
        prop_assert!(compared(&res(d), &res(live)).is_empty());
    }

    #[test]
    fn one_mutation_gives_exactly_one_drift_at_its_path(d in deployment(), which in 0usize..6, n in 1u32..1000) {
        let mut live = as_api_server_returns(&d);
        let c0 = &mut live["spec"]["template"]["spec"]["containers"][0];
        let name = c0["name"].as_str().unwrap().to_owned();
        let (path, ty) = match which {
            0 => {
                let r = live["spec"]["replicas"].as_u64().unwrap();
                live["spec"]["replicas"] = json!(r + u64::from(n));
                ("spec.replicas".to_owned(), DriftType::ReplicasDrift)
            }
            1 => {
                c0["image"] = json!(format!("{}-changed", c0["image"].as_str().unwrap()));
                (format!("spec.template.spec.containers[name={name}].image"), DriftType::ImageTagDrift)
            }
            2 => {
                c0["resources"]["limits"]["memory"] = json!(format!("{}Ki", 1024 * 8192 + n));
                (format!("spec.template.spec.containers[name={name}].resources.limits.memory"), DriftType::ResourceLimitDrift)
            }
            3 => {
                c0["resources"]["requests"]["cpu"] = json!(format!("{}m", 5000 + n));
                (format!("spec.template.spec.containers[name={name}].resources.requests.cpu"), DriftType::ResourceRequestDrift)
            }
            4 => {
                live["metadata"]["labels"]["app"] = json!(format!("x{n}"));
                ("metadata.labels.app".to_owned(), DriftType::MetadataDrift)
            }
            _ => {
                c0["ports"][0]["name"] = json!(format!("p{n}"));
                c0["ports"][0]["hostPort"] = json!(n);
                c0["terminationMessagePolicy"] = json!("FallbackToLogsOnError");
                c0["args"] = json!(["--changed"]);
                // Fields only the cluster has, set by nobody we know: not drift. Then one real one:
                c0["workingDir"] = json!("/tmp");
                live["spec"]["template"]["spec"]["serviceAccountName"] = json!("x");
                live["spec"]["minReadySeconds"] = json!(n);
                let d2 = d.clone();
                prop_assert!(compared(&res(d2), &res(live.clone())).is_empty(), "cluster-only fields");
                live["spec"]["selector"]["matchLabels"]["app"] = json!(format!("y{n}"));
                ("spec.selector.matchLabels.app".to_owned(), DriftType::SpecDrift)
            }
        };
        let drifts = compared(&res(d), &res(live));
        prop_assert_eq!(drifts.len(), 1, "{:?}", drifts);
        prop_assert_eq!(&drifts[0].path, &path);
        prop_assert_eq!(drifts[0].drift_type, ty);
    }

    #[test]
    fn the_revert_patch_of_every_drift_puts_the_live_object_back_to_git(
        d in deployment(),
        mutations in prop::collection::vec((0usize..9, 1u32..1000), 1..6),
        reverse in any::<bool>(),
    ) {
        let mut live = as_api_server_returns(&d);
        let mut owned = serde_json::Map::new();
        for (which, n) in mutations {
            let cs = live["spec"]["template"]["spec"]["containers"].as_array_mut().unwrap();
            let i = n as usize % cs.len();
            let name = cs[i]["name"].as_str().unwrap().to_owned();
            let c = &mut cs[i];
            match which {
                0 => live["spec"]["replicas"] = json!(n + 20),
                1 => c["image"] = json!(format!("other:{n}")),
                2 => c["resources"]["limits"]["memory"] = json!(format!("{}Ki", 1024 * 8192 + n)),
                3 => { c["resources"].as_object_mut().unwrap().remove("requests"); }
                4 => { c["env"].as_array_mut().unwrap().pop(); }
                5 => {
                    // A variable only the cluster has, added by hand (kubectl edit owns it).
                    c["env"].as_array_mut().unwrap().push(json!({"name": format!("ZZ{n}"), "value": "x"}));
                    owned.insert(format!("k:{{\"name\":\"{name}\"}}"), json!({"f:env": {format!("k:{{\"name\":\"ZZ{n}\"}}"): {}}}));
                }
                6 => { live["metadata"]["labels"].as_object_mut().unwrap().remove("app"); }
                7 => c["ports"][0]["containerPort"] = json!(9000 + n),
                _ => live["spec"]["selector"]["matchLabels"]["app"] = json!(format!("y{n}")),
            }
        }
        if reverse {
            live["spec"]["template"]["spec"]["containers"].as_array_mut().unwrap().reverse();
        }
        if !owned.is_empty() {
            live["metadata"]["managedFields"].as_array_mut().unwrap().push(json!({"manager": "kubectl-edit",
                "operation": "Update", "time": "2026-11-02T10:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": owned}}}}}));
        }
        let (desired, live) = (res(d), res(live));
        let paths: Vec<_> = engine().compare_paths(&desired, Some(&live)).into_iter().map(|(p, _)| p).collect();
        prop_assume!(!paths.is_empty());
        let patch = drift_core::remedy::revert_patch(&desired, &live, &paths).unwrap();
        let mut fixed = Value::clone(&live.object);
        json_patch::patch(&mut fixed, &patch).map_err(|e| TestCaseError::fail(format!("{e}: {patch:?}")))?;
        let left = compared(&desired, &res(fixed));
        prop_assert!(left.is_empty(), "{:?}\npatch: {}", left, serde_json::to_string(&patch).unwrap());
    }

    #[test]
    fn no_secret_value_appears_in_any_output(
        desired_vals in prop::collection::btree_map("[a-z]{1,6}", "[A-Za-z0-9]{6,24}", 1..5),
        live_vals in prop::collection::btree_map("[a-z]{1,6}", "[A-Za-z0-9]{6,24}", 0..5),
        as_string_data in any::<bool>(),
    ) {
        use base64::Engine as _;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let field = if as_string_data { "stringData" } else { "data" };
        let dvals: serde_json::Map<String, Value> = desired_vals.iter()
            .map(|(k, v)| (k.clone(), json!(if as_string_data { v.clone() } else { b64(v) }))).collect();
        let desired = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "n"}, field: dvals});
        let lvals: serde_json::Map<String, Value> = live_vals.iter().map(|(k, v)| (k.clone(), json!(b64(v)))).collect();
        let last_applied = serde_json::to_string(&desired).unwrap();
        let live = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": "n", "annotations": {"kubectl.kubernetes.io/last-applied-configuration": last_applied},
                         "managedFields": [{"manager": "kubectl-edit", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}}}]},
            "data": lvals});
        let drifts = compared(&res(desired), &res(live));
        let out = serde_json::to_string(&drifts).unwrap() + &format!("{drifts:?}");
        for v in desired_vals.values().chain(live_vals.values()) {
            prop_assert!(!out.contains(v.as_str()), "value leaked");
            prop_assert!(!out.contains(&b64(v)), "base64 value leaked");
        }
        for d in &drifts {
            prop_assert_eq!(d.drift_type, DriftType::SecretDrift);
        }
    }

    #[test]
    fn random_text_never_panics_the_loader(text in "\\PC{0,400}") {
        let _ = drift_core::manifest::parse_manifests(&text, "random.yaml");
    }

    #[test]
    fn random_yaml_like_text_never_panics_the_loader(lines in prop::collection::vec("( {0,6})([a-z&*!|>-]{0,6})(: |- |:)?([a-z0-9'\"{}\\[\\],&*]{0,8})", 0..40)) {
        let text = lines.join("\n");
        let parsed = drift_core::manifest::parse_manifests(&text, "random.yaml");
        for w in parsed.warnings {
            prop_assert!(w.path.as_deref() == Some("random.yaml"));
        }
    }

    #[test]
    fn a_compact_resource_expands_to_the_resource_it_was_made_from(object in json_object()) {
        let mut object = object;
        object.insert("apiVersion".into(), json!("example.com/v1"));
        object.insert("kind".into(), json!("Thing"));
        object.insert("metadata".into(), json!({"name": "x", "namespace": "y"}));
        let r = res(Value::Object(object));
        let compact = drift_core::CompactResource::new(&r);
        prop_assert_eq!(&compact.key, &r.key);
        prop_assert_eq!(compact.expand(), r);
    }
}

/// Any JSON object: nested mappings and lists of strings, booleans, nulls, integers of any
/// size and finite floats of any precision.
fn json_object() -> impl Strategy<Value = serde_json::Map<String, Value>> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
    ];
    let value = leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::btree_map("[a-z./-]{0,8}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    prop::collection::btree_map("[a-z]{1,8}", value, 0..8).prop_map(|m| m.into_iter().collect())
}

/// The engine's relations of one object read as a tree are those of the object as a `Resource`:
/// an autoscaler's target, nothing for any other kind, with autoscalers owning replicas or not.
#[test]
fn relations_of_a_tree_are_the_relations_of_its_resource() {
    use drift_core::drift_model::tree::{ObjectRef, Tree};
    let hpa = res(json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}}}));
    let deployment =
        res(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"}}));
    let config = drift_core::EngineConfig { autoscaler_owns_replicas: false, ..drift_core::EngineConfig::default() };
    for engine in [engine(), Engine::new(&config).unwrap()] {
        for r in [&hpa, &deployment] {
            let tree = Tree::from_value(&r.object);
            let desired =
                ObjectRef { key: &r.key, api_version: &r.api_version, provenance: &r.provenance, tree: &tree };
            assert_eq!(engine.relations_tree(desired), engine.relations(std::slice::from_ref(r)), "{}", r.key);
        }
    }
    assert_eq!(engine().relations(std::slice::from_ref(&hpa)).unwrap().len(), 1, "the autoscaler relates its target");
}
