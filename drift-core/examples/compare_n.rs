//! One case of the engine bench compared N times, for instruction counts under callgrind
//! (repeatable on a shared machine, where criterion's times are not). The cost of one
//! comparison is the difference of two runs divided by the difference of their N:
//!
//! ```text
//! cargo build --profile bench -p drift-core --example compare_n
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null $CARGO_TARGET_DIR/release/examples/compare_n deployment_5_drifts 1
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null $CARGO_TARGET_DIR/release/examples/compare_n deployment_5_drifts 101
//! ```
//!
//! Cases: the pairs of `benches/engine.rs`, built the same way: `deployment_5_drifts` and
//! `service` (the demo's web objects), `configmap_1mb`, `custom_resource_500_rules`, and
//! `deployment_in_sync` (the corpus pair; needs `DRIFT_CORPUS`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use drift_core::manifest::parse_manifests;
use drift_core::{Comparator, Engine, Resource};
use serde_json::{Value, json};

fn demo(kind: &str, name: &str) -> (Resource, Resource) {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/demo");
    let mut desired = Vec::new();
    for f in ["desired/shop/web.yaml", "desired/shop/api.yaml"] {
        desired.extend(parse_manifests(&std::fs::read_to_string(format!("{root}/{f}")).unwrap(), f).resources);
    }
    let live =
        parse_manifests(&std::fs::read_to_string(format!("{root}/live/cluster.yaml")).unwrap(), "live").resources;
    let pick = |v: &[Resource]| v.iter().find(|r| r.key.kind == kind && r.key.name == name).unwrap().clone();
    (pick(&desired), pick(&live))
}

fn corpus_pair(name: &str) -> (Resource, Resource) {
    let dir = drift_testkit::corpus::dir("compare_n", &format!("pairs/{name}")).expect("DRIFT_CORPUS is needed");
    let read = |f: &str| parse_manifests(&std::fs::read_to_string(dir.join(f)).unwrap(), f).resources.remove(0);
    (read("desired.yaml"), read("live.yaml"))
}

fn big_configmap() -> (Resource, Resource) {
    let mut data = serde_json::Map::new();
    for i in 0..1024 {
        data.insert(format!("key-{i:04}"), json!("x".repeat(1000)));
    }
    let desired =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big", "namespace": "n"}, "data": data});
    let mut live = desired.clone();
    live["data"]["key-0500"] = json!("y".repeat(1000));
    live["metadata"]["resourceVersion"] = json!("1");
    (Resource::from_object(desired).unwrap(), Resource::from_object(live).unwrap())
}

fn large_custom_resource() -> (Resource, Resource) {
    let rules: Vec<Value> = (0..500)
        .map(|i| json!({"name": format!("rule-{i}"), "match": {"paths": [format!("/api/{i}"), format!("/v2/{i}")], "methods": ["GET", "POST"]},
                        "backend": {"service": format!("svc-{}", i % 17), "port": 8000 + i % 7, "weight": i % 100},
                        "limits": {"rps": i * 3, "burst": i * 5}}))
        .collect();
    let desired = json!({"apiVersion": "gateway.example.io/v1", "kind": "RoutePolicy",
                         "metadata": {"name": "edge", "namespace": "gw"}, "spec": {"rules": rules}});
    let mut live = desired.clone();
    live["spec"]["rules"][250]["backend"]["weight"] = json!(1);
    live["metadata"]["uid"] = json!("u");
    live["status"] = json!({"accepted": true});
    (Resource::from_object(desired).unwrap(), Resource::from_object(live).unwrap())
}

fn main() {
    let mut args = std::env::args().skip(1);
    let case = args.next().expect("usage: compare_n CASE N");
    let n: usize = args.next().expect("usage: compare_n CASE N").parse().expect("N is a count");
    let (desired, live) = match case.as_str() {
        "deployment_5_drifts" => demo("Deployment", "web"),
        "service" => demo("Service", "web"),
        "deployment_in_sync" => corpus_pair("ge-smd-deploy-defaults"),
        "configmap_1mb" => big_configmap(),
        "custom_resource_500_rules" => large_custom_resource(),
        other => panic!("unknown case {other}"),
    };
    let engine = Engine::default();
    let mut drifts = 0;
    for _ in 0..n {
        let found = engine.compare(std::hint::black_box(&desired), Some(std::hint::black_box(&live)));
        drifts += std::hint::black_box(found).len();
    }
    println!("{case}: {n} comparisons, {drifts} drifts");
}
