//! The object pairs of the engine bench (`benches/engine.rs`) and of the instruction-count
//! example (`examples/compare_n.rs`): the demo's web Deployment and Service, a pair of the
//! corpus, a 1 MB ConfigMap and a large custom resource.
#![allow(dead_code)]

use drift_core::Resource;
use drift_core::manifest::parse_manifests;
use serde_json::{Value, json};

pub fn demo(kind: &str, name: &str) -> (Resource, Resource) {
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

/// A pair of the corpus, or `None` (said on standard error) without `DRIFT_CORPUS`.
pub fn corpus_pair(case: &str, name: &str) -> Option<(Resource, Resource)> {
    let dir = drift_testkit::corpus::dir(case, &format!("pairs/{name}"))?;
    let read = |f: &str| parse_manifests(&std::fs::read_to_string(dir.join(f)).unwrap(), f).resources.remove(0);
    Some((read("desired.yaml"), read("live.yaml")))
}

pub fn big_configmap() -> (Resource, Resource) {
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

pub fn large_custom_resource() -> (Resource, Resource) {
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

/// The pair of a case by its bench name; `None` for an unknown case, or for the corpus pair
/// without `DRIFT_CORPUS` (said on standard error).
pub fn case(bench: &str, name: &str) -> Option<(Resource, Resource)> {
    match name {
        "deployment_in_sync" => corpus_pair(bench, "ge-smd-deploy-defaults"),
        "deployment_5_drifts" => Some(demo("Deployment", "web")),
        "service" => Some(demo("Service", "web")),
        "configmap_1mb" => Some(big_configmap()),
        "custom_resource_500_rules" => Some(large_custom_resource()),
        _ => None,
    }
}

/// Every case, in table order.
pub const CASES: [&str; 5] =
    ["deployment_in_sync", "deployment_5_drifts", "service", "configmap_1mb", "custom_resource_500_rules"];
