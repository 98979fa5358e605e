//! `type: webhook`: a JSON body (docs/notify-webhook.schema.json) POSTed with an HMAC-SHA256
//! signature.

use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use drift_model::act::DriftEvent;
use serde_json::{Value, json};

use crate::config::{NotifierConfig, WebhookConfig};
use crate::http::HttpPoster;
use crate::message::{MAX_WEBHOOK_EVENTS, Message};
use crate::notifier::{Notifier, SendError};
use crate::redact::Secret;
use crate::sign::{
    DELIVERY_HEADER, EVENT_COUNT_HEADER, EVENT_IDS_HEADER, IDEMPOTENCY_HEADER, MAX_EVENT_IDS_HEADER, SIGNATURE_HEADER,
    sign,
};

/// Version of the body's shape (`version`); a change that removes or renames a field bumps it.
pub const WEBHOOK_BODY_VERSION: u32 = 1;

/// The JSON body of a webhook message (docs/notify-webhook.schema.json): the message id, the
/// notifier, the title, the counts, every event id, and up to [`MAX_WEBHOOK_EVENTS`] events
/// whole (most severe objects first; `omitted_events` says how many more).
///
/// ```
/// use drift_model::{EventKind, Severity};
/// use drift_notify::{Message, fixtures::{drift, event}};
/// let m = Message::new("ops", vec![event(EventKind::Opened, drift(1, "shop", "web", Severity::High))], None);
/// let body = drift_notify::webhook_body(&m);
/// assert_eq!(body["events"][0]["drift"]["name"], "web");
/// assert_eq!(body["message_id"], m.id());
/// ```
pub fn webhook_body(message: &Message) -> Value {
    let events: Vec<Value> = message.events().take(MAX_WEBHOOK_EVENTS).map(|e| event_json(message, e)).collect();
    let c = message.counts();
    json!({
        "version": WEBHOOK_BODY_VERSION,
        "message_id": message.id(),
        "notifier": message.notifier(),
        "title": message.title(),
        "severity": message.severity(),
        "counts": {
            "events": c.events,
            "objects": c.objects,
            "by_kind": c.by_kind,
            "by_severity": c.by_severity,
            "by_type": c.by_type,
            "by_namespace": c.by_namespace,
            "by_cluster": c.by_cluster,
        },
        "event_ids": message.event_ids(),
        "omitted_events": c.events - events.len(),
        "events": events,
    })
}

fn event_json(message: &Message, e: &DriftEvent) -> Value {
    let mut out = json!({
        "id": e.id,
        "kind": e.kind,
        "at": e.at,
        "batch": e.batch,
    });
    if let Some(d) = &e.drift {
        out["drift"] = json!({
            "id": d.id,
            "cluster": d.cluster,
            "repository": d.repository,
            "api_group": d.api_group,
            "kind": d.resource_kind,
            "namespace": d.namespace,
            "name": d.resource_name,
            "path": d.path,
            "drift_type": d.drift_type,
            "severity": d.severity,
            "status": d.status,
            "git_value": d.git_value,
            "cluster_value": d.cluster_value,
            "changed_by": d.changed_by,
            "changed_at": d.changed_at,
            "detected_at": d.detected_at,
            "classification": d.classification,
            "decision_source": d.decision_source,
            "recommended_action": d.recommended_action,
            "resolution": d.resolution,
            "learned": message.learned(d.id).map(|l| json!({
                "accepted": l.accepted, "rejected": l.rejected, "intentional": l.intentional, "explanation": l.explain(),
            })),
            "link": message.link(d.id).map(|u| u.to_string()),
        });
    }
    if let Some(p) = &e.previous {
        out["previous"] = json!({ "cluster_value": p.cluster_value, "severity": p.severity });
    }
    if let Some(n) = &e.notifier {
        out["notifier"] = json!(n);
    }
    if let Some(s) = &e.digest {
        out["digest"] = json!(s);
    }
    out
}

/// The headers of a webhook request for `body` signed at `timestamp` (unix seconds), in the
/// order they are sent.
pub fn webhook_headers(message: &Message, secret: &[u8], timestamp: i64, body: &[u8]) -> Vec<(&'static str, String)> {
    let mut headers = vec![
        (SIGNATURE_HEADER, sign(secret, timestamp, body)),
        (DELIVERY_HEADER, message.id().to_owned()),
        (IDEMPOTENCY_HEADER, message.id().to_owned()),
        (EVENT_COUNT_HEADER, message.event_ids().len().to_string()),
    ];
    if message.event_ids().len() <= MAX_EVENT_IDS_HEADER {
        headers.push((EVENT_IDS_HEADER, message.event_ids().join(",")));
    }
    headers
}

/// Sends signed webhook messages.
#[derive(Debug)]
pub struct WebhookNotifier {
    config: NotifierConfig,
    poster: HttpPoster,
    secret: Secret,
}

impl WebhookNotifier {
    /// A notifier for `config` (its kind must be `webhook`) with the secret already read.
    pub(crate) fn new(config: NotifierConfig, webhook: &WebhookConfig, secret: Secret) -> drift_model::Result<Self> {
        let poster = HttpPoster::new(&webhook.url, Duration::from_secs(10))?;
        Ok(WebhookNotifier { config, poster, secret })
    }
}

#[async_trait]
impl Notifier for WebhookNotifier {
    fn name(&self) -> &str {
        self.config.name()
    }

    fn config(&self) -> &NotifierConfig {
        &self.config
    }

    async fn send(&self, message: &Message) -> Result<(), SendError> {
        let body = serde_json::to_vec(&webhook_body(message))
            .map_err(|e| SendError::permanent(format!("cannot encode the webhook body: {e}")))?;
        let headers = webhook_headers(message, self.secret.expose().as_bytes(), Utc::now().timestamp(), &body);
        self.poster.post(body, &headers).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{digest_event, drift, event};
    use drift_model::{EventKind, Severity};
    use proptest::strategy::Strategy;

    #[test]
    fn a_large_batch_carries_every_id_and_a_bounded_number_of_events() {
        let events: Vec<DriftEvent> =
            (0..1500).map(|i| event(EventKind::Opened, drift(i, "shop", &format!("app-{i}"), Severity::Low))).collect();
        let m = Message::new("ops", events, None);
        let body = webhook_body(&m);
        assert_eq!(body["event_ids"].as_array().unwrap().len(), 1500);
        assert_eq!(body["events"].as_array().unwrap().len(), MAX_WEBHOOK_EVENTS);
        assert_eq!(body["omitted_events"], 500);
        let headers = webhook_headers(&m, b"k", 1, b"{}");
        assert!(headers.iter().all(|(h, _)| *h != EVENT_IDS_HEADER), "1500 ids do not fit a header");
        assert!(headers.contains(&(EVENT_COUNT_HEADER, "1500".to_owned())));
    }

    #[test]
    fn a_digest_carries_its_statistics() {
        let m = Message::new("ops", vec![digest_event("ops")], None);
        let body = webhook_body(&m);
        assert_eq!(body["events"][0]["kind"], "digest");
        assert_eq!(body["events"][0]["digest"]["by_status"]["open"], 3);
        assert_eq!(body["severity"], Value::Null);
        let headers = webhook_headers(&m, b"k", 1, b"{}");
        assert!(headers.contains(&(EVENT_IDS_HEADER, m.event_ids()[0].clone())));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(10_000))]

        /// Whatever a value holds (the Slack test's hostile characters, quotes, every line
        /// separator, sometimes 100 KB), the body as sent parses as JSON and holds the value
        /// exactly where it belongs; no header carries a value or a line break. Values are not
        /// printed.
        #[test]
        fn every_value_arrives_as_data(
            value in proptest::prop_oneof![
                20 => "[<>&!|@#`*_~\\n\\r\"'\\\\{}\\[\\] a-z:/.\\u{0}\\u{85}\\u{200b}\\u{200f}\\u{202e}\\u{2028}\\u{2029}]{0,80}",
                1 => "[<>&\\r\\n\"'\\\\ a-z]{1,8}".prop_map(|s| s.repeat(100_000 / s.len())),
            ]
        ) {
            let mut d = drift(1, &value, &value, Severity::High);
            d.cluster_value = Some(serde_json::json!(value));
            d.changed_by = Some(value.clone());
            d.path = value.clone();
            let m = Message::new("ops", vec![event(EventKind::Opened, d)], None);
            let bytes = serde_json::to_vec(&webhook_body(&m)).unwrap();
            let body: Value = serde_json::from_slice(&bytes).unwrap();
            let drift = &body["events"][0]["drift"];
            for field in ["cluster_value", "changed_by", "path", "namespace", "name"] {
                proptest::prop_assert!(drift[field].as_str() == Some(value.as_str()), "{} does not hold the value", field);
            }
            for (_, header) in webhook_headers(&m, b"k", 1, &bytes) {
                proptest::prop_assert!(!header.chars().any(char::is_control), "a control character in a header");
            }
        }
    }
}
