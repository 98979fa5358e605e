//! Known drifts recorded through the store's own API (reports, a decision): two clusters,
//! four repositories (one with a quote in its name), namespaced and cluster-scoped objects,
//! every severity, open, waived and resolved drifts with known times to resolve, drifts that
//! come back, and history before the dashboard's ranges.

use chrono::{DateTime, Duration, TimeZone, Utc};
use drift_model::act::Decisions;
use drift_model::act::{DecisionAction, NewDecision};
use drift_model::sink::{DriftFilter, PageRequest};
use drift_model::{Drift, DriftSink, DriftStore, DriftType, ResourceKey, Severity};
use drift_postgres::PostgresStore;
use drift_testkit::fixtures::{drift, report};
use serde_json::json;

/// Day `d` (0 is "today") at hour `h`, UTC.
pub fn at(d: i64, h: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 20, 0, 0, 0).unwrap() + Duration::days(d) + Duration::hours(h)
}

/// "Now" for the dashboard: the end of its default range.
pub fn now() -> DateTime<Utc> {
    at(0, 12)
}

/// The objects of a scope (cluster, repository), with the drifts each scan of it finds.
struct Scope {
    cluster: &'static str,
    repository: &'static str,
    objects: Vec<ResourceKey>,
}

fn key(group: &str, kind: &str, namespace: Option<&str>, name: &str) -> ResourceKey {
    ResourceKey::new(group, kind, namespace, name)
}

/// A drift of `key`, as the engine reports it.
fn d(key: &ResourceKey, drift_type: DriftType, severity: Severity, path: &str, live: serde_json::Value) -> Drift {
    let mut drift = drift(&key.kind, key.namespace.as_deref().unwrap_or(""), &key.name, drift_type, path, live);
    drift.resource.namespace = key.namespace.clone();
    drift.api_group = key.group.clone();
    drift.resource.api_version = if key.group.is_empty() { "v1".into() } else { format!("{}/v1", key.group) };
    drift.severity = severity;
    drift
}

/// Records the scans of every scope, in time order within each, and waives one drift.
pub async fn seed(store: &PostgresStore) {
    let web = key("apps", "Deployment", Some("shop"), "web");
    let web_svc = key("", "Service", Some("shop"), "web");
    let settings = key("", "ConfigMap", Some("shop"), "settings");
    let view = key("rbac.authorization.k8s.io", "ClusterRole", None, "view");
    let api = key("apps", "Deployment", Some("billing"), "api");
    let worker = key("apps", "Deployment", Some("billing"), "worker");
    let gw = key("", "Service", Some("ops"), "gw");
    let cfg = key("", "ConfigMap", Some("ops"), "cfg");
    let creds = key("", "Secret", Some("ops"), "creds");
    let old = key("apps", "Deployment", Some("ops"), "old");

    let image = |k: &ResourceKey, tag: &str| {
        d(k, DriftType::ImageTagDrift, Severity::High, "spec.template.spec.containers[name=web].image", json!(tag))
    };
    let replicas = |k: &ResourceKey, n: i64| d(k, DriftType::ReplicasDrift, Severity::Low, "spec.replicas", json!(n));
    let port = |k: &ResourceKey| {
        d(k, DriftType::ServicePortDrift, Severity::Critical, "spec.ports[port=80].targetPort", json!(9090))
    };
    let data = |k: &ResourceKey| d(k, DriftType::ConfigmapDrift, Severity::Medium, "data.mode", json!("slow"));
    let limits = |k: &ResourceKey| {
        d(
            k,
            DriftType::ResourceLimitDrift,
            Severity::High,
            "spec.template.spec.containers[name=api].resources.limits.memory",
            json!("2Gi"),
        )
    };
    let label = |k: &ResourceKey| d(k, DriftType::MetadataDrift, Severity::Low, "metadata.labels.team", json!("ops"));
    let secret = |k: &ResourceKey| d(k, DriftType::SecretDrift, Severity::High, "data.password", json!("sha256:3f0c"));

    let homelab_platform = Scope {
        cluster: "homelab",
        repository: "platform",
        objects: vec![web.clone(), web_svc.clone(), settings.clone(), view.clone()],
    };
    let homelab_ops = Scope { cluster: "homelab", repository: "ops'lab", objects: vec![api.clone(), worker.clone()] };
    let prod_platform = Scope { cluster: "prod", repository: "platform", objects: vec![web.clone(), gw.clone()] };
    let prod_infra =
        Scope { cluster: "prod", repository: "infra", objects: vec![cfg.clone(), creds.clone(), old.clone()] };

    let scans: Vec<(&Scope, &str, DateTime<Utc>, Vec<Drift>)> = vec![
        (&prod_infra, "pi1", at(-8, 0), vec![replicas(&old, 1), data(&cfg)]),
        (&prod_infra, "pi2", at(-7, 13), vec![data(&cfg), secret(&creds)]),
        (&prod_platform, "pp1", at(-6, 1), vec![image(&web, "nginx:1.28"), port(&gw)]),
        (&prod_platform, "pp2", at(-6, 2), vec![image(&web, "nginx:1.28")]),
        (
            &homelab_platform,
            "hp1",
            at(-5, 9),
            vec![image(&web, "nginx:1.29"), port(&web_svc), data(&settings), replicas(&web, 5)],
        ),
        (&prod_platform, "pp3", at(-5, 0), vec![image(&web, "nginx:1.28"), port(&gw)]),
        (&homelab_platform, "hp2", at(-4, 9), vec![image(&web, "nginx:1.29"), port(&web_svc), replicas(&web, 5)]),
        (&homelab_ops, "ho1", at(-3, 8), vec![limits(&api), replicas(&api, 4), image(&worker, "worker:2")]),
        (&homelab_platform, "hp3", at(-2, 15), vec![image(&web, "nginx:1.29"), replicas(&web, 5)]),
        (&prod_platform, "pp4", at(-1, 3), vec![image(&web, "nginx:1.28")]),
        (&homelab_ops, "ho2", at(-1, 20), vec![limits(&api), image(&worker, "worker:2")]),
        (&prod_infra, "pi3", at(0, 6), vec![data(&cfg), secret(&creds)]),
        (
            &homelab_platform,
            "hp4",
            at(0, 10),
            vec![image(&web, "nginx:1.29"), replicas(&web, 5), data(&settings), label(&view)],
        ),
        (&prod_platform, "pp5", at(0, 11), vec![image(&web, "nginx:1.28"), port(&gw)]),
    ];
    for (scope, id, time, drifts) in scans {
        let mut r = report(id, time, &scope.objects, drifts);
        r.cluster = scope.cluster.into();
        r.repository = scope.repository.into();
        store.record(&r).await.unwrap_or_else(|e| panic!("recording scan {id}: {e}"));
    }

    // The worker's image is accepted for a while: waived, not open.
    let rows = store
        .list(&DriftFilter { namespace: Some("billing".into()), ..Default::default() }, PageRequest::default())
        .await
        .unwrap();
    let worker_image = rows.items.iter().find(|r| r.resource_name == "worker").expect("the worker's drift").id;
    let accept = NewDecision {
        action: DecisionAction::Accept,
        comment: Some("new worker image on trial".into()),
        expires_at: Some(at(5, 0)),
        actor: "alice".into(),
    };
    store.decide(worker_image, &accept, at(-1, 21)).await.unwrap();
}
