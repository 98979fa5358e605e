//! Shared fixtures: small, realistic objects and drifts.

use chrono::{DateTime, TimeZone, Utc};
use drift_model::sink::{DriftFilter, DriftStatus};
use drift_model::*;
use serde_json::{Value, json};

/// A fixed instant, so that tests compare no wall-clock time.
pub fn t(minutes: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 2, 12, 0, 0).single().expect("valid date") + chrono::Duration::minutes(minutes)
}

/// Live objects as an API server returns them: two namespaces, three kinds, with
/// managedFields, resourceVersion and status.
pub fn live_objects() -> Vec<Value> {
    let managed = |manager: &str| {
        json!([{"manager": manager, "operation": "Update", "apiVersion": "v1", "time": "2026-11-01T10:00:00Z",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}}])
    };
    vec![
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}, "resourceVersion": "11",
                            "uid": "0b7c7f5e-0000-4000-8000-000000000001", "managedFields": managed("kubectl-client-side-apply")},
               "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                        "template": {"metadata": {"labels": {"app": "web"}},
                                     "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}},
               "status": {"replicas": 2}}),
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}, "resourceVersion": "12",
                            "managedFields": managed("kubectl-client-side-apply")},
               "spec": {"ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}], "selector": {"app": "web"}}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "settings", "namespace": "shop", "labels": {"app": "web"}, "resourceVersion": "13",
                            "managedFields": managed("kubectl-client-side-apply")},
               "data": {"mode": "fast"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "settings", "namespace": "billing", "labels": {"app": "web"}, "resourceVersion": "14",
                            "managedFields": managed("kubectl-client-side-apply")},
               "data": {"mode": "safe"}}),
    ]
}

/// The live fixtures as resources.
pub fn live_resources() -> Vec<Resource> {
    live_objects().into_iter().map(|o| Resource::from_object(o).expect("fixture is valid")).collect()
}

/// A drift of a given type on an object, as the engine would produce it.
pub fn drift(kind: &str, namespace: &str, name: &str, drift_type: DriftType, path: &str, live: Value) -> Drift {
    let (group, api_version) = match kind {
        "Deployment" | "StatefulSet" | "DaemonSet" => ("apps", "apps/v1"),
        _ => ("", "v1"),
    };
    Drift {
        resource: ResourceRef {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
            namespace: Some(namespace.to_owned()),
            name: name.to_owned(),
        },
        api_group: group.to_owned(),
        drift_type,
        severity: Severity::Low,
        path: path.to_owned(),
        git_value: Some(json!("git")),
        cluster_value: Some(live),
        changed_by: Some("kubectl-edit".to_owned()),
        changed_at: Some(t(-60)),
        attribution: None,
        classification: Classification::ManualChange,
        decision_source: DecisionSource::Scanner,
        recommended_action: RecommendedAction::SuggestRevert,
        source_path: None,
        waiver: None,
        revert: None,
    }
}

/// A policy finding on a fixture object, as `drift_engine::policy::Policy` would make it
/// (container `web` for a path into a container).
pub fn finding(
    kind: &str,
    namespace: &str,
    name: &str,
    rule: drift_model::finding::Rule,
    side: drift_model::finding::Side,
    severity: Severity,
    path: &str,
) -> drift_model::finding::Finding {
    let group = match kind {
        "Deployment" | "StatefulSet" | "DaemonSet" => "apps",
        _ => "",
    };
    drift_model::finding::Finding {
        resource: ResourceKey::new(group, kind, Some(namespace), name),
        side,
        rule,
        path: path.to_owned(),
        container: path.contains("ontainers/").then(|| "web".to_owned()),
        finding_type: drift_model::finding::FindingType::PolicyViolation,
        severity,
        message: format!("{rule} at {path} ({severity})"),
    }
}

/// A successful report over the given desired objects (each with the digest `d0`), complete
/// coverage of their (kind, namespace), and these drifts.
pub fn report(scan_id: &str, at: DateTime<Utc>, desired: &[ResourceKey], drifts: Vec<Drift>) -> ScanReport {
    let mut coverage = Coverage::default();
    for k in desired {
        coverage.set(&k.group_kind(), k.namespace.as_deref(), CoverageStatus::Complete);
    }
    let mut desired = desired.to_vec();
    desired.sort();
    let summary = Summary::of(&drifts, desired.len(), 0);
    let desired_digests = vec!["d0".to_owned(); desired.len()];
    ScanReport {
        scan_id: scan_id.to_owned(),
        cluster: "test-cluster".to_owned(),
        repository: "test-repo".to_owned(),
        revision: Some("0123456789abcdef".to_owned()),
        started_at: at,
        finished_at: at,
        outcome: ScanOutcome::Success,
        drifts,
        coverage,
        warnings: Vec::new(),
        desired,
        desired_digests,
        desired_complete: true,
        uncomparable: Vec::new(),
        summary,
        findings: Vec::new(),
        policy_sides: Vec::new(),
        live_versions: Vec::new(),
    }
}

/// The key of a fixture object.
pub fn key(kind: &str, namespace: &str, name: &str) -> ResourceKey {
    let group = if kind == "Deployment" { "apps" } else { "" };
    ResourceKey::new(group, kind, Some(namespace), name)
}

/// Sets the digest of one desired object of a report (Git changed it).
pub fn with_digest(mut report: ScanReport, key: &ResourceKey, digest: &str) -> ScanReport {
    let i = report.desired.binary_search(key).expect("the object is in the report");
    report.desired_digests[i] = digest.to_owned();
    report
}

/// The `web` Deployment of the `shop` namespace as Git holds it (2 replicas of `nginx:1.27`
/// with limits), the manifest the end-to-end tests apply with kubectl and then change by hand.
pub const SHOP_WEB_DEPLOYMENT: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        resources:
          limits: {cpu: 500m, memory: 256Mi}
"#;

/// Filters over every dimension the rollups serve, alone and combined, and one with `since`
/// (served from the rows).
pub fn stats_filters() -> Vec<DriftFilter> {
    vec![
        DriftFilter::default(),
        DriftFilter { status: Some(DriftStatus::Open), ..Default::default() },
        DriftFilter { status: Some(DriftStatus::Resolved), ..Default::default() },
        DriftFilter { severity: Some(Severity::High), ..Default::default() },
        DriftFilter { drift_type: Some(DriftType::ImageTagDrift), ..Default::default() },
        DriftFilter { namespace: Some("ops".into()), ..Default::default() },
        DriftFilter { repository: Some("infra".into()), ..Default::default() },
        DriftFilter { cluster: Some("test-cluster".into()), kind: Some("Deployment".into()), ..Default::default() },
        DriftFilter { cluster: Some("elsewhere".into()), ..Default::default() },
        DriftFilter {
            namespace: Some("shop".into()),
            severity: Some(Severity::Critical),
            status: Some(DriftStatus::Resolved),
            ..Default::default()
        },
        DriftFilter { severity: Some(Severity::High), since: Some(t(1000)), ..Default::default() },
    ]
}
