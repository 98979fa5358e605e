//! Small, fixed events and drifts for tests and examples (no wall-clock time).

use chrono::{DateTime, TimeZone, Utc};
use drift_model::EventKind;
use drift_model::act::DriftEvent;
use drift_model::drift::{Classification, DecisionSource, DriftType, RecommendedAction, Severity};
use drift_model::sink::{DriftStats, DriftStatus, StoredDrift};
use serde_json::json;

/// 2026-12-01 08:00 UTC plus `minutes`.
pub fn t(minutes: i64) -> DateTime<Utc> {
    // A fixed, valid date: the `single()` of a UTC date cannot be ambiguous.
    Utc.with_ymd_and_hms(2026, 12, 1, 8, 0, 0).single().unwrap_or_default() + chrono::Duration::minutes(minutes)
}

/// An open `replicas_drift` at `spec.replicas` of Deployment `namespace/name` in cluster `prod`,
/// repository `deploy`: Git 3, cluster 5, changed by `kubectl-edit`.
pub fn drift(id: i64, namespace: &str, name: &str, severity: Severity) -> StoredDrift {
    StoredDrift {
        id,
        fingerprint: format!("fp-{id}"),
        detected_at: t(0),
        last_seen: t(0),
        occurrences: 1,
        cluster: "prod".into(),
        repository: "deploy".into(),
        api_group: "apps".into(),
        resource_kind: "Deployment".into(),
        namespace: namespace.into(),
        resource_name: name.into(),
        path: "spec.replicas".into(),
        drift_type: DriftType::ReplicasDrift,
        severity,
        git_value: Some(json!(3)),
        cluster_value: Some(json!(5)),
        status: DriftStatus::Open,
        resolved_at: None,
        resolution: None,
        changed_by: Some("kubectl-edit".into()),
        changed_at: Some(t(-5)),
        changed_by_user: None,
        classification: Classification::ManualChange,
        decision_source: DecisionSource::Scanner,
        recommended_action: RecommendedAction::SuggestRevert,
        waived_until: None,
        waived_by: None,
        acknowledged_at: None,
        revert: None,
    }
}

/// An event of `kind` about `drift` in batch `scan-1` at [`t`]`(0)`.
pub fn event(kind: EventKind, drift: StoredDrift) -> DriftEvent {
    DriftEvent::of_drift(kind, "scan-1", t(0), drift)
}

/// The digest of `notifier`: 3 open drifts (1 CRITICAL), a mean time to resolve of one hour.
pub fn digest_event(notifier: &str) -> DriftEvent {
    let stats = DriftStats {
        by_status: [("open".to_owned(), 3), ("resolved".to_owned(), 5)].into(),
        by_severity: [("CRITICAL".to_owned(), 1), ("LOW".to_owned(), 2)].into(),
        by_type: [("replicas_drift".to_owned(), 3)].into(),
        by_namespace: [("shop".to_owned(), 3)].into(),
        by_repository: [("deploy".to_owned(), 3)].into(),
        trend: drift_model::sink::TrendDay::week(t(0), []),
        mean_time_to_resolve_seconds: Some(3600.0),
        p95_time_to_resolve_seconds: Some(7200.0),
        by_cluster: Vec::new(),
    };
    DriftEvent {
        id: drift_model::act::event_id("digest-2026-12-01", notifier, EventKind::Digest),
        seq: 0,
        kind: EventKind::Digest,
        batch: "digest-2026-12-01".into(),
        at: t(60),
        drift: None,
        previous: None,
        notifier: Some(notifier.into()),
        digest: Some(Box::new(stats)),
        learned: None,
    }
}
