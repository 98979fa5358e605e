//! Server-side mode against an API server that mutates objects on admission: a webhook-like
//! change to a field Git sets is drift for the client-side engine and is not for server-side
//! mode, while a change made with kubectl still is; and the dry runs write nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Cluster;
use drift_core::scan::{ScanOptions, compare_snapshots};
use drift_core::{DesiredSnapshot, Engine, EngineConfig, LiveSource as _, Provenance, Resource, ScanReport};
use drift_test_apiserver::{Admission, Options};
use serde_json::{Value, json};

/// A policy engine's "always pull images" rule, on Deployments in `shop`.
const ALWAYS_PULL: &str = r#"
mutations:
  - name: always-pull
    match: {resource: Deployment, group: apps, namespace: shop}
    set:
      - {path: "spec.template.spec.containers[*].imagePullPolicy", value: Always}
"#;

const PULL_POLICY: &str = "spec.template.spec.containers[name=web].imagePullPolicy";

/// What Git holds: a Deployment that asks for `IfNotPresent`.
fn git_deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27", "imagePullPolicy": "IfNotPresent"}]},
            },
        },
    })
}

fn desired() -> DesiredSnapshot {
    let r = Resource::from_object(git_deployment()).unwrap().with_provenance(Provenance {
        repository: Some("git".into()),
        path: Some("web/deployment.yaml".into()),
        document: Some(0),
        ..Provenance::default()
    });
    DesiredSnapshot { repository: "git".into(), revision: None, resources: vec![r], warnings: Vec::new() }
}

/// (path, Git value, cluster value) of each drift, sorted.
fn drifts(report: &ScanReport) -> Vec<(String, Option<Value>, Option<Value>)> {
    let mut out: Vec<_> =
        report.drifts.iter().map(|d| (d.path.clone(), d.git_value.clone(), d.cluster_value.clone())).collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn paths(report: &ScanReport) -> Vec<String> {
    drifts(report).into_iter().map(|d| d.0).collect()
}

/// The client-side report, then the same report reviewed by server-side mode.
async fn diff(cluster: &Cluster, engine: &Engine) -> (ScanReport, ScanReport) {
    let source = cluster.source().await;
    let desired = desired();
    let live = source.fetch(&desired.scope()).await.unwrap();
    let client_side = compare_snapshots(desired.clone(), live.clone(), engine, &ScanOptions::new("t"));
    let mut server_side = client_side.clone();
    source.review_server_side(engine, &desired.resources, &live, &mut server_side).await;
    (client_side, server_side)
}

#[tokio::test]
async fn a_webhook_mutation_is_drift_client_side_only_and_a_kubectl_change_is_drift_in_both() {
    let cluster =
        Cluster::with(Options { admission: Admission::from_yaml(ALWAYS_PULL).unwrap(), ..Options::default() });
    cluster.kubectl(&["create", "namespace", "shop"]);
    cluster.kubectl_stdin(&["apply", "-f", "-"], &git_deployment().to_string());
    let engine = Engine::new(&EngineConfig::default()).unwrap();

    // Right after `kubectl apply` of Git, the webhook has overridden a field Git sets.
    let rv = cluster.server.resource_version();
    let (client_side, server_side) = diff(&cluster, &engine).await;
    assert_eq!(
        drifts(&client_side),
        vec![(PULL_POLICY.to_owned(), Some(json!("IfNotPresent")), Some(json!("Always")))]
    );
    assert_eq!(drifts(&server_side), vec![], "the API server would set Always again: not drift");
    assert!(server_side.warnings.is_empty(), "{:?}", server_side.warnings);
    assert_eq!(server_side.summary.drifts, 0);
    assert_eq!(cluster.server.resource_version(), rv, "dry runs write nothing");
    let dry_runs = cluster
        .server
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH" && r.query.get("dryRun").map(String::as_str) == Some("All"))
        .count();
    assert_eq!(dry_runs, 1);

    // A hand change with kubectl is drift in both modes; the webhook's stays client-side only.
    cluster.kubectl(&["scale", "deployment/web", "-n", "shop", "--replicas=5"]);
    let (client_side, server_side) = diff(&cluster, &engine).await;
    assert_eq!(paths(&client_side), vec!["spec.replicas".to_owned(), PULL_POLICY.to_owned()]);
    assert_eq!(drifts(&server_side), vec![("spec.replicas".to_owned(), Some(json!(2)), Some(json!(5)))]);
    let replicas = &server_side.drifts[0];
    assert_eq!(replicas.changed_by.as_deref(), Some("kubectl"), "attribution is kept");

    // Once the webhook is gone, the difference it left is real drift: the API server would now
    // store what Git says.
    cluster.server.clear_admission();
    let (client_side, server_side) = diff(&cluster, &engine).await;
    assert_eq!(paths(&server_side), paths(&client_side));
    assert_eq!(paths(&server_side), vec!["spec.replicas".to_owned(), PULL_POLICY.to_owned()]);
}
