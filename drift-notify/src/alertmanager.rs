//! `type: alertmanager`: each drift is an alert posted to Alertmanager's v2 API
//! (`POST /api/v2/alerts`), firing while the drift is open and resolved (`endsAt` now) when it
//! resolves, so Alertmanager's routes, grouping, silences and inhibitions apply to drift.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use drift_model::EventKind;
use drift_model::act::DriftEvent;
use drift_model::drift::Severity;
use drift_model::sink::StoredDrift;
use serde_json::{Value, json};

use crate::config::{AlertmanagerConfig, NotifierConfig, NotifierKind};
use crate::message::{Message, show_value};
use crate::template::Markup;

/// The `alertname` of every drift alert.
pub const ALERT_NAME: &str = "GitOpsDrift";

/// The labels that identify a drift's alert; `labels:` of the configuration cannot override
/// them.
pub const DRIFT_LABELS: [&str; 8] =
    ["alertname", "cluster", "namespace", "kind", "name", "path", "drift_type", "severity"];

/// Whether `name` is a Prometheus label name (`[a-zA-Z_][a-zA-Z0-9_]*`, not starting `__`).
pub(crate) fn is_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with("__")
}

fn labels(drift: &StoredDrift, severity: Severity, extra: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut l = extra.clone();
    let own = [
        ("alertname", ALERT_NAME.to_owned()),
        ("cluster", drift.cluster.clone()),
        ("namespace", drift.namespace.clone()),
        ("kind", drift.resource_kind.clone()),
        ("name", drift.resource_name.clone()),
        ("path", drift.path.clone()),
        ("drift_type", drift.drift_type.as_str().to_owned()),
        ("severity", severity.as_str().to_ascii_lowercase()),
    ];
    for (k, v) in own {
        // An empty value is no label for Alertmanager (a cluster-scoped object's namespace).
        if v.is_empty() {
            l.remove(k);
        } else {
            l.insert(k.to_owned(), v);
        }
    }
    l
}

fn annotations(message: &Message, event: &DriftEvent, drift: &StoredDrift) -> BTreeMap<&'static str, String> {
    let object = crate::message::ObjectKey::of(drift).display();
    let git = show_value(drift.git_value.as_ref());
    let cluster = show_value(drift.cluster_value.as_ref());
    let mut a = BTreeMap::from([
        ("summary", format!("{object}: {} {} ({})", drift.path, drift.drift_type.as_str(), drift.severity)),
        ("description", format!("{object} differs from Git at {}: Git {git}, cluster {cluster}", drift.path)),
        ("git_value", git),
        ("cluster_value", cluster),
        ("drift_id", drift.id.to_string()),
        ("repository", drift.repository.clone()),
        ("api_group", drift.api_group.clone()),
        ("classification", drift.classification.as_str().to_owned()),
        ("event", crate::message::verb(event.kind).to_owned()),
    ]);
    if let Some(by) = &drift.changed_by {
        a.insert("changed_by", by.clone());
    }
    if let Some(at) = drift.changed_at {
        a.insert("changed_at", at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    }
    if let Some(r) = drift.resolution {
        a.insert("resolution", r.as_str().to_owned());
    }
    if let Some(link) = message.link(drift.id) {
        a.insert("link", link.to_string());
    }
    a.retain(|_, v| !v.is_empty());
    a
}

/// The postable alerts of `message` at `now`: one per drift (the latest event of a drift in the
/// batch wins), labelled [`DRIFT_LABELS`] plus `labels:`, annotated with the values, `startsAt`
/// the drift's detection, `endsAt` `now + ends_after` while it is open, or when it resolved
/// (never before `startsAt`). A `changed` event that changed the severity also ends the alert
/// of the old severity (its labels differ). Digests are not alerts: a message of digests only
/// has none.
///
/// ```
/// use drift_model::{EventKind, Severity};
/// use drift_notify::{Message, fixtures::{drift, event, t}};
/// let config: drift_notify::AlertmanagerConfig = serde_saphyr::from_str("url: http://am:9093\n").unwrap();
/// let m = Message::new("am", vec![event(EventKind::Opened, drift(1, "shop", "web", Severity::High))], None);
/// let alerts = drift_notify::alertmanager_alerts(&m, &config, t(10));
/// assert_eq!(alerts[0]["labels"]["severity"], "high");
/// assert_eq!(alerts[0]["endsAt"], "2026-12-02T08:10:00.000Z");
/// ```
pub fn alertmanager_alerts(message: &Message, config: &AlertmanagerConfig, now: DateTime<Utc>) -> Vec<Value> {
    alerts_with(message, config, now, None)
}

/// [`alertmanager_alerts`], with the `description` of each alert rendered by `template`
/// (notifier name, source) for a message of that drift's event alone, as plain text.
fn alerts_with(
    message: &Message,
    config: &AlertmanagerConfig,
    now: DateTime<Utc>,
    template: Option<(&str, &str)>,
) -> Vec<Value> {
    let ends_after = chrono::Duration::from_std(config.ends_after).unwrap_or(chrono::Duration::days(1));
    // The latest event of each drift: by outbox position, then time, then kind.
    let mut latest: BTreeMap<i64, &DriftEvent> = BTreeMap::new();
    for e in message.events() {
        let Some(id) = e.drift_id() else { continue };
        let entry = latest.entry(id).or_insert(e);
        if (e.seq, e.at, e.kind) > (entry.seq, entry.at, entry.kind) {
            *entry = e;
        }
    }
    let ts = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let mut alerts: BTreeMap<BTreeMap<String, String>, Value> = BTreeMap::new();
    for e in latest.values() {
        let Some(d) = &e.drift else { continue };
        let starts = d.detected_at;
        let ends =
            if e.kind == EventKind::Resolved { d.resolved_at.unwrap_or(e.at).max(starts) } else { now + ends_after };
        let mut annotations = annotations(message, e, d);
        if let Some((name, source)) = template {
            // The message's link base, from the link of a drift: `{base}/drifts/{id}`.
            let base = message.link(d.id).and_then(|l| l.join("../").ok());
            let one = Message::new(message.notifier(), vec![(*e).clone()], base);
            if let Some(text) = crate::template::output(name, Some(source), &one, Markup::Plain, |t| t.len() <= 4096) {
                annotations.insert("description", text);
            }
        }
        let mut alert = json!({
            "labels": labels(d, d.severity, &config.labels),
            "annotations": annotations,
            "startsAt": ts(starts),
            "endsAt": ts(ends),
        });
        if let Some(link) = message.link(d.id) {
            alert["generatorURL"] = json!(link.to_string());
        }
        if let Some(p) = &e.previous
            && p.severity != d.severity
            && e.kind != EventKind::Resolved
        {
            let old = labels(d, p.severity, &config.labels);
            let mut ended = alert.clone();
            ended["labels"] = json!(old);
            ended["endsAt"] = json!(ts(e.at.max(starts)));
            alerts.insert(old, ended);
        }
        alerts.insert(labels(d, d.severity, &config.labels), alert);
    }
    alerts.into_values().collect()
}

pub(crate) fn render(config: &NotifierConfig, message: &Message) -> Option<Value> {
    let NotifierKind::Alertmanager(a) = &config.kind else { return None };
    let template = config.template.as_deref().map(|t| (config.name(), t));
    let alerts = alerts_with(message, a, Utc::now(), template);
    (!alerts.is_empty()).then_some(Value::Array(alerts))
}

/// `{url}/api/v2/alerts`.
pub(crate) fn alerts_url(base: &str) -> String {
    crate::push::join(base, "api/v2/alerts")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{digest_event, drift, event, t};
    use drift_model::act::Previous;

    fn config() -> AlertmanagerConfig {
        serde_saphyr::from_str("url: http://am:9093\nlabels: { team: platform }\n").unwrap()
    }

    #[test]
    fn a_resolution_ends_the_alert_and_wins_over_an_earlier_event_of_the_batch() {
        let opened = event(EventKind::Opened, drift(1, "shop", "web", Severity::High));
        let mut gone = drift(1, "shop", "web", Severity::High);
        gone.resolved_at = Some(t(30));
        let mut resolved = event(EventKind::Resolved, gone);
        resolved.at = t(30);
        let alerts = alertmanager_alerts(&Message::new("am", vec![opened, resolved], None), &config(), t(40));
        assert_eq!(alerts.len(), 1);
        assert_eq!(alerts[0]["endsAt"], "2026-12-01T08:30:00.000Z");
        assert_eq!(alerts[0]["startsAt"], "2026-12-01T08:00:00.000Z");
        assert_eq!(alerts[0]["labels"]["team"], "platform");
        assert_eq!(alerts[0]["annotations"]["event"], "resolved");
    }

    #[test]
    fn a_new_severity_ends_the_alert_of_the_old_one() {
        let mut changed = event(EventKind::Changed, drift(1, "shop", "web", Severity::Critical));
        changed.previous = Some(Previous { cluster_value: Some(json!(4)), severity: Severity::Low });
        changed.at = t(5);
        let alerts = alertmanager_alerts(&Message::new("am", vec![changed], None), &config(), t(10));
        let by_sev: BTreeMap<&str, &str> =
            alerts.iter().map(|a| (a["labels"]["severity"].as_str().unwrap(), a["endsAt"].as_str().unwrap())).collect();
        assert_eq!(
            by_sev,
            BTreeMap::from([("critical", "2026-12-02T08:10:00.000Z"), ("low", "2026-12-01T08:05:00.000Z")])
        );
    }

    #[test]
    fn digests_are_not_alerts_and_cluster_scoped_objects_have_no_namespace_label() {
        assert!(alertmanager_alerts(&Message::new("am", vec![digest_event("am")], None), &config(), t(0)).is_empty());
        let alerts = alertmanager_alerts(
            &Message::new("am", vec![event(EventKind::Opened, drift(1, "", "admin", Severity::Low))], None),
            &config(),
            t(0),
        );
        assert!(alerts[0]["labels"].get("namespace").is_none(), "{}", alerts[0]);
    }

    #[test]
    fn a_template_writes_each_alerts_description_from_its_own_drift() {
        let events = vec![
            event(EventKind::Opened, drift(1, "shop", "web", Severity::High)),
            event(EventKind::Opened, drift(2, "shop", "api", Severity::Low)),
        ];
        let link = url::Url::parse("https://drift.example.com/ui/").ok();
        let source = "{% for o in objects %}{% for d in o.drifts %}{{ o.name }} <{{ d.link }}>{% endfor %}{% endfor %}";
        let alerts = alerts_with(&Message::new("am", events, link), &config(), t(0), Some(("am", source)));
        let descriptions: Vec<&str> =
            alerts.iter().map(|a| a["annotations"]["description"].as_str().unwrap()).collect();
        assert_eq!(
            descriptions,
            ["api <https://drift.example.com/ui/drifts/2>", "web <https://drift.example.com/ui/drifts/1>"]
        );
    }

    #[test]
    fn label_names_follow_prometheus() {
        for (name, ok) in [("team", true), ("_x1", true), ("1x", false), ("a-b", false), ("__meta", false), ("", false)]
        {
            assert_eq!(is_label_name(name), ok, "{name}");
        }
    }
}
