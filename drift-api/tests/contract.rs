//! The contract around the routes: the OpenAPI document matches the router and the types, the
//! dashboard and alert rules use only exported metrics, and no query string makes a 5xx.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use common::*;
use drift_api::Metrics;
use drift_api::routes::endpoints;
use drift_model::ScanOutcome;
use drift_model::sink::{DriftFilter, DriftStore, PageRequest};
use drift_testkit::fixtures::t;
use proptest::prelude::*;
use serde_json::Value;

/// The API of issues 7, 12, 13, 14 and 34 and docs/api.md, written out by hand.
const EXPECTED: [&str; 19] = [
    "GET /health",
    "GET /ready",
    "POST /alertmanager/webhook",
    "POST /audit/webhook",
    "POST /check",
    "POST /scan",
    "GET /drifts",
    "GET /findings",
    "GET /drifts/{id}",
    "POST /drifts/{id}/decisions",
    "POST /drifts/{id}/revert",
    "POST /drifts/{id}/accept",
    "GET /stats",
    "GET /scans",
    "GET /audit",
    "GET /notifications",
    "POST /notifications/{event_id}/requeue",
    "GET /metrics",
    "GET /openapi.json",
];

fn operations(doc: &Value) -> BTreeSet<String> {
    let mut ops = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            ops.insert(format!("{} {path}", method.to_uppercase()));
        }
    }
    ops
}

fn concrete(path: &str) -> String {
    path.replace("{id}", "1").replace("{event_id}", "e1")
}

#[tokio::test]
async fn openapi_lists_exactly_the_routes_the_router_serves() {
    let h = harness().await;
    let a = get(&h.app, "/openapi.json").await;
    assert_eq!(a.status, StatusCode::OK);
    let doc = a.json();
    assert_eq!(doc["openapi"], "3.1.0");
    let expected: BTreeSet<String> = EXPECTED.iter().map(|s| s.to_string()).collect();
    assert_eq!(operations(&doc), expected);
    let table: BTreeSet<String> = endpoints().iter().map(|e| format!("{} {}", e.method, e.path)).collect();
    assert_eq!(table, expected);

    // Every documented operation is served (not the router's fallbacks)...
    for op in &expected {
        let (method, path) = op.split_once(' ').unwrap();
        let method: Method = method.parse().unwrap();
        let a = call(&h.app, method, &concrete(path), &[]).await;
        assert_ne!(a.status, StatusCode::METHOD_NOT_ALLOWED, "{op}");
        if a.status == StatusCode::NOT_FOUND {
            assert!(!a.text.contains("no such endpoint"), "{op} is not routed");
        }
        // ...and answers one of its documented statuses.
        let documented = doc["paths"][path][method_key(op)]["responses"].as_object().unwrap();
        assert!(documented.contains_key(a.status.as_str()), "{op} answered undocumented {}", a.status);
    }
    // Other methods on documented paths are not served.
    for path in ["/health", "/drifts", "/scan", "/drifts/{id}", "/drifts/{id}/decisions", "/audit"] {
        let a = call(&h.app, Method::PUT, &concrete(path), &[]).await;
        assert_eq!(a.status, StatusCode::METHOD_NOT_ALLOWED, "PUT {path}");
    }
}

fn method_key(op: &str) -> String {
    op.split_once(' ').unwrap().0.to_lowercase()
}

#[test]
fn openapi_document_is_well_formed() {
    let doc = drift_api::openapi::document();
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    // Every $ref resolves.
    fn refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    out.push(r.clone());
                }
                m.values().for_each(|v| refs(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(all.len() > 10);
    for r in all {
        let name = r.strip_prefix("#/components/schemas/").unwrap_or_else(|| panic!("bad ref {r}"));
        assert!(schemas.contains_key(name), "unresolved {r}");
    }
    let mut ids = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        assert!(path.starts_with('/'));
        for (method, op) in item.as_object().unwrap() {
            assert!(ids.insert(op["operationId"].as_str().unwrap().to_owned()), "duplicate operationId");
            let responses = op["responses"].as_object().unwrap();
            assert!(!responses.is_empty());
            for (status, r) in responses {
                assert!(status.len() == 3 && status.parse::<u16>().is_ok(), "{method} {path}: {status}");
                assert!(r["description"].is_string());
                assert_eq!(r["content"].as_object().unwrap().len(), 1);
            }
            // Every operation may answer the request-size limits, as JSON errors.
            for status in ["414", "431"] {
                assert_eq!(
                    responses[status]["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/Error",
                    "{method} {path}: {status}"
                );
            }
            // Integers have the bounds the server takes (ids are i64).
            for p in op["parameters"].as_array().unwrap() {
                if p["schema"]["type"] == "integer" {
                    assert!(p["schema"]["minimum"].is_i64() && p["schema"]["maximum"].is_i64(), "{method} {path}: {p}");
                }
            }
            // Path templates have their path parameter.
            for segment in path.split('/').filter(|s| s.starts_with('{')) {
                let name = segment.trim_matches(|c| c == '{' || c == '}');
                assert!(
                    op["parameters"].as_array().unwrap().iter().any(|p| p["name"] == name && p["in"] == "path"),
                    "{method} {path}: {name}"
                );
            }
        }
    }
    assert_eq!(doc["paths"]["/scan"]["post"]["security"], serde_json::json!([{"bearer": []}]));
    assert_eq!(doc["paths"]["/drifts/{id}/decisions"]["post"]["security"], serde_json::json!([{"bearer": []}]));
    // Reads need a bearer token only when a read token is configured.
    assert_eq!(doc["paths"]["/audit"]["get"]["security"], serde_json::json!([{}, {"bearer": []}]));
    assert!(doc["paths"]["/health"]["get"].get("security").is_none());
    assert_eq!(
        doc["paths"]["/drifts/{id}/decisions"]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/DecisionRequest"
    );
}

fn properties(doc: &Value, schema: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let s = &doc["components"]["schemas"][schema];
    let props = s["properties"].as_object().unwrap_or_else(|| panic!("{schema}")).keys().cloned().collect();
    let required = s["required"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect();
    (props, required)
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

/// The hand-written schemas list the fields the types serialise: a field added to a core type
/// fails here until the document says it.
#[tokio::test]
async fn openapi_schemas_match_the_serialised_types() {
    let doc = drift_api::openapi::document();
    let store = filled_store().await;
    let page = store.list(&DriftFilter::default(), PageRequest::default()).await.unwrap();
    let page_json = serde_json::to_value(&page).unwrap();
    let mut report = reports().remove(0);
    report.outcome = ScanOutcome::Partial;
    let report_json = serde_json::to_value(&report).unwrap();
    let stats = serde_json::to_value(store.stats(&DriftFilter::default(), t(95)).await.unwrap()).unwrap();
    let scans = serde_json::to_value(store.recent_scans(1).await.unwrap()).unwrap();
    let findings = store.findings(&Default::default(), PageRequest::default()).await.unwrap();
    let findings_json = serde_json::to_value(&findings).unwrap();
    assert!(!findings.items.is_empty() && !report.findings.is_empty(), "the fixtures hold findings");
    let cases = [
        ("FindingPage", findings_json.clone()),
        ("StoredFinding", findings_json["items"][0].clone()),
        ("Finding", report_json["findings"][0].clone()),
        ("DriftPage", page_json.clone()),
        ("StoredDrift", page_json["items"][0].clone()),
        ("DriftStats", stats.clone()),
        ("TrendDay", stats["trend"][0].clone()),
        ("ScanReport", report_json.clone()),
        ("Drift", report_json["drifts"][0].clone()),
    ];
    for (schema, value) in cases {
        let (props, required) = properties(&doc, schema);
        let got = keys(&value);
        assert!(
            got.is_subset(&props),
            "{schema}: undocumented fields {:?}",
            got.difference(&props).collect::<Vec<_>>()
        );
        assert!(
            required.is_subset(&got),
            "{schema}: required but absent {:?}",
            required.difference(&got).collect::<Vec<_>>()
        );
    }
    // Types documented field for field (a stored drift's `revert` is optional: absent for a
    // missing object or a Secret).
    for (schema, value) in [
        ("StoredDrift", &page_json["items"][0]),
        ("StoredFinding", &findings_json["items"][0]),
        ("Finding", &report_json["findings"][0]),
        ("DriftStats", &stats),
        ("ScanReport", &report_json),
        ("ScanRecord", &scans[0]),
    ] {
        let (props, required) = properties(&doc, schema);
        // Optional fields: a stored drift's `revert` (absent for a missing object or a Secret),
        // a report's findings and the sides it checked (absent without policies), a finding's
        // container.
        let optional: BTreeSet<String> = match schema {
            "StoredDrift" => ["revert".to_owned()].into(),
            "ScanReport" => ["findings".to_owned(), "policy_sides".to_owned()].into(),
            // A finding's container is absent for the pod and object rules.
            "Finding" => ["container".to_owned()].into(),
            // The fleet overview is absent when nothing is open.
            "DriftStats" => ["by_cluster".to_owned()].into(),
            _ => BTreeSet::new(),
        };
        assert_eq!(props, keys(value).union(&optional).cloned().collect(), "{schema}");
        assert_eq!(required, keys(value).difference(&optional).cloned().collect(), "{schema}");
    }
    // What the remediation answers, as the types serialise.
    let plan = drift_model::remedy::RevertPlan {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: Some("shop".into()),
        name: "settings".into(),
        apply: None,
        remove: serde_json::from_value(serde_json::json!([{"op": "remove", "path": "/data/x"}])).unwrap(),
        paths: vec!["data.mode".into()],
        resource_version: Some("42".into()),
    };
    let reverted = drift_model::remedy::RevertOutcome {
        drift_id: 1,
        status: drift_model::remedy::RevertStatus::DryRun,
        object: "ConfigMap shop/settings".into(),
        paths: vec!["data.mode".into()],
        plan: Some(plan),
        actor: "alice".into(),
        earlier: None,
        replaced: Some("slow".into()),
        written: Some("fast".into()),
    };
    let accepted = drift_model::remedy::AcceptOutcome {
        drift_ids: vec![1],
        object: "ConfigMap shop/settings".into(),
        proposal: drift_model::remedy::Proposal {
            url: Some("https://github.com/o/r/pull/1".into()),
            pull_request: Some(1),
            branch: "drift/accept/x".into(),
            updated: false,
            placed: vec![],
            unplaced: vec![],
        },
        actor: "alice".into(),
    };
    // A refusal's extra fields depend on its rule: the schema documents the union.
    let refusal = |r: drift_model::remedy::Refusal, detail: Option<serde_json::Value>| {
        let answer = drift_model::remedy::Refused { refusal: r, message: "…".into(), detail };
        let mut body = serde_json::json!({"error": answer.message, "refusal": answer.refusal});
        if let Some(serde_json::Value::Object(extra)) = answer.detail {
            body.as_object_mut().unwrap().extend(extra);
        }
        body
    };
    let refused = [
        refusal(drift_model::remedy::Refusal::Waived, None),
        refusal(drift_model::remedy::Refusal::Stale, Some(serde_json::json!({"planned": 5, "found": 7}))),
        refusal(drift_model::remedy::Refusal::ConcurrentChange, Some(serde_json::json!({"changed": ["/spec/paused"]}))),
    ];
    for (schema, values) in [
        (
            "RevertOutcome",
            vec![
                serde_json::to_value(&reverted).unwrap(),
                // A retry answered with the revert done earlier.
                serde_json::to_value(drift_model::remedy::RevertOutcome { earlier: Some(3), ..reverted.clone() })
                    .unwrap(),
            ],
        ),
        ("AcceptOutcome", vec![serde_json::to_value(&accepted).unwrap()]),
        ("Refused", refused.to_vec()),
    ] {
        let (props, required) = properties(&doc, schema);
        let all: BTreeSet<String> = values.iter().flat_map(keys).collect();
        assert_eq!(props, all, "{schema}");
        for value in &values {
            assert!(required.is_subset(&keys(value)), "{schema}");
        }
    }
    let proposal = &doc["components"]["schemas"]["AcceptOutcome"]["properties"]["proposal"]["properties"];
    assert_eq!(keys(proposal), keys(&serde_json::to_value(&accepted.proposal).unwrap()), "AcceptOutcome.proposal");
    // The acting side, from a real store: a drift with a decision and deliveries, the audit
    // trail, a page of deliveries.
    let sh = sqlite_harness().await;
    let list =
        serde_json::to_value(sh.store.list(&DriftFilter::default(), PageRequest::default()).await.unwrap()).unwrap();
    let web = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["path"] == "spec.replicas" && d["resource_name"] == "web")
        .unwrap()["id"]
        .as_i64()
        .unwrap();
    let body = r#"{"action": "accept", "comment": "intended", "expires_at": "2026-11-05T00:00:00Z"}"#;
    let decision = send(&sh.app, Method::POST, &format!("/drifts/{web}/decisions"), Some(ALICE), body).await.json();
    let detail = get(&sh.app, &format!("/drifts/{web}")).await.json();
    // Another drift is predicted from web's decision (a drift's own is left out).
    let other = list["items"].as_array().unwrap().iter().find(|d| d["id"] != web).unwrap()["id"].as_i64().unwrap();
    let prediction = get(&sh.app, &format!("/drifts/{other}")).await.json()["prediction"].clone();
    assert!(prediction.is_object(), "{prediction}");
    assert_eq!(detail["prediction"], Value::Null, "web's own decision is not its evidence");
    let learned =
        serde_json::to_value(drift_api::LearnedView::from(drift_model::act::Learned::from_counts(3, 1).unwrap()))
            .unwrap();
    let audit = get(&sh.app, "/audit?limit=1000").await.json();
    let deliveries = get(&sh.app, "/notifications?limit=1").await.json();
    assert!(deliveries["next"].is_i64(), "a page with a next cursor: {deliveries}");
    let requeued =
        send(&sh.app, Method::POST, &format!("/notifications/{}/requeue?notifier={HOOK}", sh.parked), Some(ALICE), "")
            .await
            .json();
    let request: serde_json::Map<String, Value> = serde_json::from_str(body).unwrap();
    let act_cases = [
        ("Decision", decision.clone()),
        ("DriftDetail", detail.clone()),
        ("Learned", learned.clone()),
        ("Prediction", prediction.clone()),
        ("AuditPage", audit.clone()),
        ("DeliveryPage", deliveries.clone()),
        ("DeliveryRecord", detail["notifications"][0].clone()),
        ("Requeued", requeued.clone()),
        ("DecisionRequest", Value::Object(request)),
    ];
    let mut audit_with_everything = serde_json::Map::new();
    for entry in audit["items"].as_array().unwrap() {
        for (k, v) in entry.as_object().unwrap() {
            if !v.is_null() {
                audit_with_everything.insert(k.clone(), v.clone());
            }
        }
    }
    // The outcome of an action names its attempt (no action runs here): the entry as the store
    // serialises it, with `attempt` set.
    let mut outcome: drift_model::act::AuditEntry = serde_json::from_value(audit["items"][0].clone()).unwrap();
    outcome.attempt = Some(1);
    for (k, v) in serde_json::to_value(&outcome).unwrap().as_object().unwrap() {
        if !v.is_null() {
            audit_with_everything.insert(k.clone(), v.clone());
        }
    }
    for (schema, value) in act_cases.iter().chain([("AuditEntry", Value::Object(audit_with_everything.clone()))].iter())
    {
        let (props, required) = properties(&doc, schema);
        let props: BTreeSet<String> = if *schema == "DriftDetail" {
            props.into_iter().filter(|p| p != "revert" || value.get("revert").is_some()).collect()
        } else {
            props
        };
        assert_eq!(&props, &keys(value), "{schema}: every field, documented");
        if *schema != "DecisionRequest" {
            assert_eq!(&required, &keys(value), "{schema}: every field is always there");
        }
    }
    // The DriftDetail adds four fields to the StoredDrift's.
    let (detail_props, _) = properties(&doc, "DriftDetail");
    let (stored_props, _) = properties(&doc, "StoredDrift");
    let added: BTreeSet<&str> = detail_props.difference(&stored_props).map(String::as_str).collect();
    assert_eq!(added, BTreeSet::from(["decisions", "learned", "notifications", "prediction"]));
    // Every audit action and every delivery status of the trail is in its enumeration.
    for e in audit["items"].as_array().unwrap() {
        let actions = doc["components"]["schemas"]["AuditEntry"]["properties"]["action"]["enum"].as_array().unwrap();
        assert!(actions.contains(&e["action"]), "{e}");
    }

    // The answers of the handlers too.
    let h = harness().await;
    let ready = get(&h.app, "/ready").await.json();
    let (props, required) = properties(&doc, "Ready");
    assert!(keys(&ready).is_subset(&props) && required.is_subset(&keys(&ready)));
    let (props, _) = properties(&doc, "Health");
    assert_eq!(keys(&get(&h.app, "/health").await.json()), props);
}

/// Every documented query parameter is accepted with a value its schema allows, and rejected
/// with one it does not (over a real store that keeps decisions).
#[tokio::test]
async fn documented_parameters_are_the_accepted_ones() {
    let h = sqlite_harness().await;
    let bearer = format!("Bearer {ALICE}");
    let concrete = |path: &str| path.replace("{id}", "1").replace("{event_id}", &h.parked);
    for e in endpoints() {
        for p in e.params.iter().filter(|p| p.location == "query") {
            let good = match (p.schema["type"].as_str().unwrap(), p.schema.get("enum")) {
                (_, Some(values)) => values[values.as_array().unwrap().len() - 1].as_str().unwrap().to_owned(),
                ("integer", _) => p.schema["minimum"].as_i64().unwrap().to_string(),
                ("boolean", _) => "false".to_owned(),
                ("string", _) if p.schema["format"] == "date-time" => "2026-11-02T12:00:00Z".to_owned(),
                ("string", _) => "x".to_owned(),
                (other, _) => panic!("{other}"),
            };
            // A required parameter goes with the good value of the others.
            let required: String = e
                .params
                .iter()
                .filter(|r| r.location == "query" && r.required && r.name != p.name)
                .map(|r| format!("&{}={HOOK}", r.name))
                .collect();
            let good = if p.name == "notifier" { HOOK.to_owned() } else { good };
            let uri = format!("{}?{}={good}{required}", concrete(e.path), p.name);
            let a = call(&h.app, e.method.clone(), &uri, &[("authorization", bearer.as_str())]).await;
            // This harness does not remediate nor check merges: the parameter is accepted, then
            // the answer is 501.
            let remediation = e.path.ends_with("/revert") || e.path.ends_with("/accept") || e.path == "/check";
            let ok = a.status.is_success() || (remediation && a.status == StatusCode::NOT_IMPLEMENTED);
            assert!(ok, "{} {uri}: {} {}", e.method, a.status, a.text);
            h.trigger.finish();
            // An integer takes its documented maximum and nothing above it.
            if let Some(max) = p.schema.get("maximum").and_then(serde_json::Value::as_i64) {
                let uri = format!("{}?{}={max}{required}", concrete(e.path), p.name);
                let a = call(&h.app, e.method.clone(), &uri, &[("authorization", bearer.as_str())]).await;
                assert!(a.status.is_success(), "{} {uri}: {} {}", e.method, a.status, a.text);
                let uri = format!("{}?{}={}{required}", concrete(e.path), p.name, i128::from(max) + 1);
                let a = call(&h.app, e.method.clone(), &uri, &[("authorization", bearer.as_str())]).await;
                assert_eq!(a.status, StatusCode::BAD_REQUEST, "{} {uri}: {}", e.method, a.text);
            }
            // A boolean is `true` or `false`: empty, bare or numeric values are refused.
            if p.schema["type"] == "boolean" {
                for bad in [format!("{}=", p.name), p.name.to_owned(), format!("{}=1", p.name)] {
                    let uri = format!("{}?{bad}", concrete(e.path));
                    let a = call(&h.app, e.method.clone(), &uri, &[("authorization", bearer.as_str())]).await;
                    assert_eq!(a.status, StatusCode::BAD_REQUEST, "{} {uri}: {}", e.method, a.text);
                }
            }
            if p.schema["type"] != "boolean" && p.name != "namespace" {
                let uri = format!("{}?{}=%3F%3F", concrete(e.path), p.name);
                let a = call(&h.app, e.method.clone(), &uri, &[("authorization", bearer.as_str())]).await;
                if p.schema.get("enum").is_some() || p.schema["type"] != "string" || p.schema.get("format").is_some() {
                    assert_eq!(a.status, StatusCode::BAD_REQUEST, "{} {uri}", e.method);
                }
            }
        }
        let uri = format!("{}?undocumented=1", concrete(e.path));
        let a = call(&h.app, e.method.clone(), &uri, &[("authorization", bearer.as_str())]).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{} {uri}", e.method);
    }
}

/// PromQL without label matchers (`{...}`) and label lists (`by (...)`, `without (...)`, ...),
/// so that only metric names are left that start with `drift_`.
fn strip_labels(expr: &str) -> String {
    let mut out = String::new();
    let mut rest = expr;
    while let Some(c) = rest.chars().next() {
        if c == '{' {
            rest = &rest[rest.find('}').map_or(rest.len(), |i| i + 1)..];
            continue;
        }
        let keyword = ["by", "without", "on", "ignoring", "group_left", "group_right"].iter().find(|k| {
            rest.starts_with(*k)
                && !out.chars().last().is_some_and(|p: char| p.is_ascii_alphanumeric() || p == '_')
                && rest[k.len()..].trim_start().starts_with('(')
        });
        if let Some(k) = keyword {
            let after = &rest[k.len()..];
            rest = &after[after.find(')').map_or(after.len(), |i| i + 1)..];
            out.push(' ');
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Metric names referenced by PromQL expressions.
fn metric_names(expr: &str) -> Vec<String> {
    let expr = strip_labels(expr);
    let mut names = Vec::new();
    let mut rest = expr.as_str();
    while let Some(i) = rest.find("drift_") {
        let before = rest[..i].chars().last();
        let tail = &rest[i..];
        let end = tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(tail.len());
        if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            names.push(tail[..end].to_owned());
        }
        rest = &tail[end..];
    }
    names
}

fn exprs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("expr", Value::String(s)) => out.push(s.clone()),
                    _ => exprs(v, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| exprs(v, out)),
        _ => {}
    }
}

/// Names of every series the API exports with every metric populated.
async fn exported() -> BTreeSet<String> {
    let metrics = Metrics::new();
    for r in reports() {
        metrics.record_scan(&r, Duration::from_secs(1));
    }
    metrics.record_source_error(drift_model::ErrorKind::Unavailable);
    metrics.observe_watch_lag(Duration::from_millis(10));
    metrics.record_notification(HOOK, "sent", 1);
    metrics.observe_notification_latency(HOOK, 0.2);
    let h = sqlite_harness().await;
    let text = metrics.render_with(h.store.as_ref(), Some(h.store.as_ref()), t(95), Duration::from_secs(5)).await;
    text.lines().filter(|l| !l.starts_with('#')).map(|l| l.split(['{', ' ']).next().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn dashboard_and_alerts_use_only_exported_metrics() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let exported = exported().await;
    for name in drift_api::metrics::METRIC_NAMES {
        assert!(
            exported.contains(name) || exported.contains(&format!("{name}_count")),
            "{name} is documented but not exported"
        );
    }

    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("deploy/grafana/drift-dashboard.json")).unwrap())
            .unwrap();
    assert!(dashboard["title"].is_string());
    assert!(dashboard["panels"].as_array().unwrap().len() >= 6);
    let mut dash_exprs = Vec::new();
    exprs(&dashboard, &mut dash_exprs);

    let alerts: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(root.join("deploy/prometheus/drift-alerts.yaml")).unwrap())
            .unwrap();
    let rules: Vec<&Value> =
        alerts["groups"].as_array().unwrap().iter().flat_map(|g| g["rules"].as_array().unwrap()).collect();
    let names: BTreeSet<&str> = rules.iter().map(|r| r["alert"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "DriftCriticalDriftOpened",
            "DriftLastSuccessfulScanTooOld",
            "DriftLeaderCount",
            "DriftNotificationsParked",
            "DriftScansFailing",
            "DriftWatchLagHigh",
            "DriftWatchOutOfSync"
        ])
    );
    let mut alert_exprs = Vec::new();
    for r in &rules {
        assert!(r["labels"]["severity"].is_string(), "{r}");
        assert!(r["annotations"]["summary"].is_string(), "{r}");
        alert_exprs.push(r["expr"].as_str().unwrap().to_owned());
    }

    // The promtool unit tests of the rules feed exported series and test every alert.
    let tests: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(root.join("deploy/prometheus/drift-alerts.test.yaml")).unwrap(),
    )
    .unwrap();
    assert_eq!(tests["rule_files"][0], "drift-alerts.yaml");
    let mut tested = BTreeSet::new();
    for t in tests["tests"].as_array().unwrap() {
        for series in t["input_series"].as_array().unwrap() {
            for n in metric_names(series["series"].as_str().unwrap()) {
                assert!(exported.contains(&n), "{n} in the rule tests is not exported");
            }
        }
        for a in t["alert_rule_test"].as_array().unwrap() {
            tested.insert(a["alertname"].as_str().unwrap());
        }
    }
    assert_eq!(tested, names, "every alert has a promtool test");
    let panel_ids: Vec<i64> =
        dashboard["panels"].as_array().unwrap().iter().map(|p| p["id"].as_i64().unwrap()).collect();
    assert_eq!(panel_ids.iter().collect::<BTreeSet<_>>().len(), panel_ids.len(), "panel ids are unique");

    let mut used = BTreeSet::new();
    for expr in dash_exprs.iter().chain(&alert_exprs) {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "no drift metric in {expr:?}");
        for n in names {
            assert!(exported.contains(&n), "{n} (in {expr:?}) is not exported; exported: {exported:?}");
            used.insert(n);
        }
    }
    // The dashboard shows every family.
    for name in drift_api::metrics::METRIC_NAMES {
        assert!(used.iter().any(|u| u.starts_with(name)), "{name} is on no panel or alert");
    }
}

#[test]
fn metric_name_extraction() {
    assert_eq!(
        metric_names("sum(rate(drift_scans_total{outcome=\"failed\"}[5m])) / my_drift_x + drift_watch_lag_seconds"),
        vec!["drift_scans_total", "drift_watch_lag_seconds"]
    );
    assert_eq!(
        metric_names(
            "sum by (drift_type) (drift_open_drifts_by_type{drift_type=~\"drift_x\"}) * on (drift_y) drift_store_up"
        ),
        vec!["drift_open_drifts_by_type", "drift_store_up"]
    );
    assert_eq!(metric_names("sum(drift_nope_total)"), vec!["drift_nope_total"]);
}

fn query_component() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("status".to_owned()),
        Just("severity".to_owned()),
        Just("drift_type".to_owned()),
        Just("namespace".to_owned()),
        Just("repository".to_owned()),
        Just("cluster".to_owned()),
        Just("kind".to_owned()),
        Just("since".to_owned()),
        Just("limit".to_owned()),
        Just("after".to_owned()),
        Just("wait".to_owned()),
        Just("action".to_owned()),
        Just("drift_id".to_owned()),
        Just("actor".to_owned()),
        Just("notifier".to_owned()),
        Just("decision".to_owned()),
        Just("parked".to_owned()),
        "[a-z_]{0,8}",
        "[ -~]{0,12}",
        "(%[0-9A-Fa-f]{2}){0,4}",
        "-?[0-9]{1,22}",
        Just("2026-11-02T12:00:00Z".to_owned()),
        Just("%FF%FE".to_owned()),
        Just("CRITICAL".to_owned()),
    ]
}

fn query_string() -> impl Strategy<Value = String> {
    prop::collection::vec((query_component(), query_component(), prop::bool::ANY), 0..5).prop_map(|pairs| {
        pairs
            .into_iter()
            .map(|(k, v, eq)| if eq { format!("{k}={v}") } else { k })
            .collect::<Vec<_>>()
            .join("&")
            .replace(['#', ' '], "")
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// Schemathesis-style: whatever the query string or id, the answer is never a 5xx, and a
    /// 4xx always carries a JSON error.
    #[test]
    fn random_requests_never_answer_5xx(q in query_string(), id in "[ -~]{0,8}", path in 0usize..6) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let h = harness().await;
            let id: String = id.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
            let id = if id.is_empty() { "1".to_owned() } else { id };
            let base = ["/drifts".to_owned(), "/stats".to_owned(), format!("/drifts/{id}"), "/ready".to_owned(), "/health".to_owned(), "/scan".to_owned()][path].clone();
            let method = if base == "/scan" { Method::POST } else { Method::GET };
            let uri = format!("{base}?{q}");
            let Ok(parsed) = uri.parse::<axum::http::Uri>() else { return Ok(()) };
            let bearer = format!("Bearer {TOKEN}");
            let a = call(&h.app, method, &parsed.to_string(), &[("authorization", bearer.as_str())]).await;
            prop_assert!(!a.status.is_server_error(), "{uri}: {} {}", a.status, a.text);
            if a.status.is_client_error() && a.status != StatusCode::CONFLICT {
                prop_assert!(!a.error().is_empty(), "{uri}");
            }
            Ok(())
        })?;
    }
}

fn decision_body() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(r#"{"action": "acknowledge"}"#.to_owned()),
        Just(r#"{"action": "accept", "comment": "x"}"#.to_owned()),
        Just(r#"{"action": "reject", "comment": "x", "expires_at": "2026-11-03T00:00:00Z"}"#.to_owned()),
        Just(r#"{"action": "accept", "comment": "x", "expires_at": "1970-01-01T00:00:00Z"}"#.to_owned()),
        Just(r#"{"action": "accept", "comment": null, "expires_at": null}"#.to_owned()),
        "[ -~]{0,40}",
        "\\{\"action\": \"[a-z]{0,12}\"(, \"[a-z_]{1,10}\": [0-9a-z\"]{0,8})?\\}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    /// The same for the acting side, over a real SQLite store: random query strings, ids and
    /// decision bodies never make a 5xx, and a 4xx carries a JSON error.
    #[test]
    fn random_requests_to_the_acting_side_never_answer_5xx(
        q in query_string(),
        id in "[ -~]{0,8}",
        body in decision_body(),
        path in 0usize..4,
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let h = sqlite_harness().await;
            let id: String = id.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
            let id = if id.is_empty() { "1".to_owned() } else { id };
            let (method, base) = [
                (Method::GET, "/audit".to_owned()),
                (Method::GET, "/notifications".to_owned()),
                (Method::POST, format!("/drifts/{id}/decisions")),
                (Method::POST, format!("/notifications/{id}/requeue")),
            ][path].clone();
            let uri = format!("{base}?{q}");
            let Ok(parsed) = uri.parse::<axum::http::Uri>() else { return Ok(()) };
            let a = send(&h.app, method, &parsed.to_string(), Some(ALICE), &body).await;
            prop_assert!(!a.status.is_server_error(), "{uri} {body}: {} {}", a.status, a.text);
            if a.status.is_client_error() {
                prop_assert!(!a.error().is_empty(), "{uri}");
            }
            Ok(())
        })?;
    }
}
