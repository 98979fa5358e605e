//! normalise + compare per object: a Deployment, a Service, a 1 MB ConfigMap, a large custom
//! resource. `DRIFT_CORPUS=$PWD/../shared/corpus cargo bench -p drift-core --bench engine`
//! (without `DRIFT_CORPUS`, the in-sync Deployment of the corpus is skipped).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
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

/// A pair of the corpus, or `None` (said on standard error) without `DRIFT_CORPUS`.
fn corpus_pair(case: &str, name: &str) -> Option<(Resource, Resource)> {
    let dir = drift_testkit::corpus::dir(case, &format!("pairs/{name}"))?;
    let read = |f: &str| parse_manifests(&std::fs::read_to_string(dir.join(f)).unwrap(), f).resources.remove(0);
    Some((read("desired.yaml"), read("live.yaml")))
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

fn bench(c: &mut Criterion) {
    let engine = Engine::default();
    let cases = [
        ("deployment_in_sync", corpus_pair("deployment_in_sync", "ge-smd-deploy-defaults")),
        ("deployment_5_drifts", Some(demo("Deployment", "web"))),
        ("service", Some(demo("Service", "web"))),
        ("configmap_1mb", Some(big_configmap())),
        ("custom_resource_500_rules", Some(large_custom_resource())),
    ];
    let mut g = c.benchmark_group("normalise_and_compare");
    for (name, (desired, live)) in cases.iter().filter_map(|(name, pair)| Some((name, pair.as_ref()?))) {
        let found = engine.compare(desired, Some(live)).len();
        assert_eq!(found == 0, name.ends_with("in_sync"), "{name}: {found} drifts");
        g.bench_function(*name, |b| {
            b.iter(|| engine.compare(std::hint::black_box(desired), Some(std::hint::black_box(live))))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
