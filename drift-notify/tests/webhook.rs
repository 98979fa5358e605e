//! The webhook and Slack notifiers against a real HTTP receiver (axum on loopback): the
//! receiver verifies each signature with `drift_notify::verify` and counts deliveries per
//! event id; failures come back as retryable or not, and never show a URL's secret part.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use drift_model::act::{DriftEvent, Previous};
use drift_model::{EventKind, Severity};
use drift_notify::fixtures::{digest_event, drift, event};
use drift_notify::{Message, NotifierConfig, NotifierKind, SlackConfig, WebhookConfig, build_with_env};
use serde_json::Value;
use url::Url;

const SECRET: &str = "test-hmac-secret";

#[derive(Default)]
struct Seen {
    /// Deliveries of each event id (a message counts for each of its events).
    per_event: BTreeMap<String, usize>,
    /// Requests whose signature did not verify.
    bad_signatures: usize,
    bodies: Vec<Value>,
    headers: Vec<HeaderMap>,
}

/// An HTTP status to answer, with a Retry-After when set.
type Answer = (u16, Option<&'static str>);

#[derive(Clone, Default)]
struct Receiver {
    seen: Arc<Mutex<Seen>>,
    /// Statuses to answer, in order (then 200), with a Retry-After when set.
    answers: Arc<Mutex<VecDeque<Answer>>>,
    /// Whether to check the signature (the webhook) or not (Slack).
    signed: bool,
}

async fn hook(State(r): State<Receiver>, headers: HeaderMap, body: Bytes) -> impl IntoResponse {
    let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    {
        let mut seen = r.seen.lock().unwrap();
        if r.signed {
            let header = headers.get("x-drift-signature").and_then(|v| v.to_str().ok()).unwrap_or_default();
            let now = chrono::Utc::now().timestamp();
            match drift_notify::verify(SECRET.as_bytes(), header, &body, now, Duration::from_secs(300)) {
                Ok(()) => {
                    for id in json["event_ids"].as_array().into_iter().flatten() {
                        *seen.per_event.entry(id.as_str().unwrap().to_owned()).or_default() += 1;
                    }
                }
                Err(_) => seen.bad_signatures += 1,
            }
        }
        seen.bodies.push(json);
        seen.headers.push(headers);
    }
    let (status, retry_after) = r.answers.lock().unwrap().pop_front().unwrap_or((200, None));
    let mut out = HeaderMap::new();
    if let Some(ra) = retry_after {
        out.insert("retry-after", ra.parse().unwrap());
    }
    (StatusCode::from_u16(status).unwrap(), out, "answer from the receiver")
}

/// Starts a receiver on loopback; returns it and its base URL.
async fn start(receiver: Receiver) -> (Receiver, Url) {
    let app = Router::new().route("/{*path}", post(hook)).with_state(receiver.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (receiver, Url::parse(&format!("http://{addr}/")).unwrap())
}

fn env(name: &str) -> Option<String> {
    (name == "HOOK_SECRET").then(|| SECRET.to_owned())
}

fn webhook(url: &Url) -> Arc<dyn drift_notify::Notifier> {
    common::install_crypto_provider();
    let config = NotifierConfig::new(NotifierKind::Webhook(WebhookConfig {
        url: url.join("hooks/drift?token=query-secret").unwrap().to_string(),
        secret_env: "HOOK_SECRET".into(),
    }))
    .with_name("ops");
    build_with_env(&config, &env).unwrap()
}

fn batch() -> Vec<DriftEvent> {
    let mut changed = event(EventKind::Changed, drift(3, "shop", "api", Severity::Medium));
    changed.previous = Some(Previous { cluster_value: Some(serde_json::json!(4)), severity: Severity::Low });
    vec![
        event(EventKind::Opened, drift(1, "shop", "web", Severity::Critical)),
        event(EventKind::Resolved, drift(2, "shop", "web", Severity::Low)),
        changed,
        digest_event("ops"),
    ]
}

#[tokio::test]
async fn signed_messages_verify_and_each_event_is_counted_per_delivery() {
    let (r, base) = start(Receiver { signed: true, ..Receiver::default() }).await;
    let notifier = webhook(&base);
    let message = Message::new("ops", batch(), Some(Url::parse("https://drift.example.com").unwrap()));
    notifier.send(&message).await.unwrap();
    // The same message again (as after a lost acknowledgement): same ids, counted twice.
    notifier.send(&message).await.unwrap();

    let seen = r.seen.lock().unwrap();
    assert_eq!(seen.bad_signatures, 0);
    assert_eq!(seen.per_event.len(), 4);
    assert!(seen.per_event.values().all(|n| *n == 2), "{:?}", seen.per_event);
    let expected: Vec<&String> = message.event_ids().iter().collect();
    assert_eq!(seen.per_event.keys().collect::<Vec<_>>(), expected);
    for h in &seen.headers {
        assert_eq!(h["x-drift-delivery"], message.id());
        assert_eq!(h["idempotency-key"], message.id());
        assert_eq!(h["x-drift-event-ids"], message.event_ids().join(","));
        assert_eq!(h["x-drift-event-count"], "4");
        assert_eq!(h["content-type"], "application/json");
    }
    let body = &seen.bodies[0];
    let schema = common::webhook_schema();
    let problems = common::schema_problems(&schema, &schema, body, "$");
    assert!(problems.is_empty(), "the body does not follow docs/notify-webhook.schema.json: {problems:#?}");
    let first = &body["events"][0];
    assert_eq!(first["drift"]["severity"], "CRITICAL", "the most severe object comes first");
    assert_eq!(first["drift"]["link"], "https://drift.example.com/drifts/1");
    assert_eq!(
        body["title"],
        "3 drift events in prod/shop: 1 opened, 1 changed, 1 resolved (1 CRITICAL) and the digest"
    );
    let changed = body["events"].as_array().unwrap().iter().find(|e| e["kind"] == "changed").unwrap();
    assert_eq!(changed["previous"], serde_json::json!({"cluster_value": 4, "severity": "LOW"}));
}

#[tokio::test]
async fn the_schema_checker_finds_a_body_that_breaks_the_schema() {
    // Guards the checker of the test above: it must not accept anything.
    let schema = common::webhook_schema();
    let message = Message::new("ops", batch(), None);
    let mut body = drift_notify::webhook_body(&message);
    assert!(common::schema_problems(&schema, &schema, &body, "$").is_empty());
    body["events"][0]["drift"]["severity"] = "SEVERE".into();
    body["events"][1]["surprise"] = 1.into();
    body.as_object_mut().unwrap().remove("event_ids");
    let problems = common::schema_problems(&schema, &schema, &body, "$");
    assert_eq!(problems.len(), 3, "{problems:#?}");
}

#[tokio::test]
async fn a_server_error_is_retryable_and_the_next_attempt_delivers() {
    let r = Receiver { signed: true, ..Receiver::default() };
    r.answers.lock().unwrap().extend([(500, None), (503, None)]);
    let (r, base) = start(r).await;
    let notifier = webhook(&base);
    let message = Message::new("ops", batch(), None);
    for _ in 0..2 {
        let err = notifier.send(&message).await.unwrap_err();
        assert!(err.retryable, "{err}");
        assert!(err.message.contains("answered 50"), "{err}");
    }
    notifier.send(&message).await.unwrap();
    let seen = r.seen.lock().unwrap();
    assert!(seen.per_event.values().all(|n| *n == 3), "the receiver saw every attempt: {:?}", seen.per_event);
    let ids: Vec<&str> = seen.headers.iter().map(|h| h["x-drift-delivery"].to_str().unwrap()).collect();
    assert!(ids.iter().all(|id| *id == message.id()), "retries carry the same message id");
}

#[tokio::test]
async fn client_errors_are_not_retried_but_throttling_is_with_its_delay() {
    let r = Receiver { signed: true, ..Receiver::default() };
    r.answers.lock().unwrap().extend([(400, None), (404, None), (429, Some("7")), (408, None)]);
    let (_r, base) = start(r).await;
    let notifier = webhook(&base);
    let message = Message::new("ops", batch(), None);
    let outcomes: Vec<(bool, Option<Duration>)> = {
        let mut v = Vec::new();
        for _ in 0..4 {
            let e = notifier.send(&message).await.unwrap_err();
            for secret in ["/hooks/drift", "query-secret"] {
                assert!(!e.message.contains(secret), "the URL's path or query leaked: {e}");
            }
            assert!(e.message.contains(&format!("http://{}", base.host_str().unwrap())), "{e}");
            assert!(e.message.contains("answer from the receiver"), "the receiver's answer is kept: {e}");
            v.push((e.retryable, e.retry_after));
        }
        v
    };
    assert_eq!(outcomes, [(false, None), (false, None), (true, Some(Duration::from_secs(7))), (true, None)]);
}

#[tokio::test]
async fn an_unreachable_receiver_is_retryable_and_its_url_stays_hidden() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let notifier = webhook(&Url::parse(&format!("http://{addr}/")).unwrap());
    let err = notifier.send(&Message::new("ops", batch(), None)).await.unwrap_err();
    assert!(err.retryable, "{err}");
    assert!(!err.message.contains("query-secret") && !err.message.contains("/hooks/drift"), "{err}");
    assert!(err.message.contains("cannot connect"), "{err}");
}

#[tokio::test]
async fn the_slack_message_has_its_documented_shape_and_its_url_stays_secret() {
    let (r, base) = start(Receiver::default()).await;
    common::install_crypto_provider();
    let url = base.join("services/T0000/B0000/very-secret-path").unwrap().to_string();
    let slack_env = move |name: &str| (name == "SLACK_URL").then(|| url.clone());
    let config = NotifierConfig::new(NotifierKind::Slack(SlackConfig { url_env: Some("SLACK_URL".into()), url: None }));
    let notifier = build_with_env(&config, &slack_env).unwrap();
    assert!(!format!("{notifier:?}").contains("very-secret-path"), "{notifier:?}");
    let message = Message::new("slack", batch(), Some(Url::parse("https://drift.example.com/").unwrap()));
    notifier.send(&message).await.unwrap();

    let body = r.seen.lock().unwrap().bodies[0].clone();
    let text = body["text"].as_str().unwrap();
    assert!(text.starts_with(&message.title()), "text starts with the title: {text}");
    for fact in ["Deployment shop/web", "spec.replicas", "Git: 3", "cluster: 5", "changed by kubectl-edit", "CRITICAL"]
    {
        assert!(text.contains(fact), "{fact:?} missing from the fallback text:\n{text}");
    }
    let blocks = body["blocks"].as_array().unwrap();
    assert_eq!(blocks[0]["type"], "header");
    assert_eq!(blocks[0]["text"]["type"], "plain_text");
    assert_eq!(blocks.last().unwrap()["type"], "context");
    let sections: Vec<&str> =
        blocks.iter().filter(|b| b["type"] == "section").map(|b| b["text"]["text"].as_str().unwrap()).collect();
    assert!(blocks.iter().filter(|b| b["type"] == "section").all(|b| b["text"]["type"] == "mrkdwn"));
    assert_eq!(sections.len(), 3, "two objects and the digest: {sections:#?}");
    let web = sections[0];
    for fact in [
        "*Deployment shop/web*",
        "`spec.replicas` *CRITICAL* replicas_drift opened",
        "Git `3` → cluster `5`",
        "changed by kubectl-edit at 2026-12-01 07:55 UTC",
        "<https://drift.example.com/drifts/1|view drift 1>",
    ] {
        assert!(web.contains(fact), "{fact:?} missing from:\n{web}");
    }
    assert!(sections[1].contains("(was `4`, LOW)"), "{}", sections[1]);
    assert!(sections[2].starts_with("*Digest*"), "{}", sections[2]);

    // A refused URL: the error shows the host, never the path.
    r.answers.lock().unwrap().push_back((404, None));
    let err = notifier.send(&message).await.unwrap_err();
    assert!(!err.retryable);
    assert!(!err.message.contains("very-secret-path") && !err.message.contains("/services/"), "{err}");
}

/// The value an attacker writes into the cluster (issue 36): a Slack mention and disguised
/// link, a script, and a header injection.
const HOSTILE: &str =
    "<!channel> <http://evil.example|click> & done <script>alert(1)</script>\r\nBcc: evil@evil.example\r\n\r\nX";

#[tokio::test]
async fn a_hostile_value_arrives_at_the_webhook_as_data() {
    let (r, base) = start(Receiver { signed: true, ..Receiver::default() }).await;
    let mut d = drift(7, "shop", "web", Severity::High);
    d.cluster_value = Some(serde_json::json!(HOSTILE));
    d.changed_by = Some(HOSTILE.to_owned());
    let message = Message::new("ops", vec![event(EventKind::Opened, d)], None);
    webhook(&base).send(&message).await.unwrap();

    let seen = r.seen.lock().unwrap();
    assert_eq!(seen.bad_signatures, 0);
    let drift = &seen.bodies[0]["events"][0]["drift"];
    assert_eq!(drift["cluster_value"], HOSTILE, "the value arrives exactly, as a JSON string");
    assert_eq!(drift["changed_by"], HOSTILE);
    let h = &seen.headers[0];
    assert!(h.get("bcc").is_none(), "no header was made from the value");
    for (name, value) in h {
        assert!(!value.as_bytes().contains(&b'\n'), "{name}");
        assert!(!value.to_str().unwrap_or_default().contains("evil"), "{name} carries the value");
    }
}

/// The same value through the Slack notifier, read as the receiver got it: no mention or link
/// from the value survives in the fallback text or any block, and link previews are off.
#[tokio::test]
async fn a_hostile_value_arrives_at_slack_inert() {
    let (r, base) = start(Receiver::default()).await;
    common::install_crypto_provider();
    let url = base.join("services/T0000/B0000/hook").unwrap().to_string();
    let slack_env = move |name: &str| (name == "SLACK_URL").then(|| url.clone());
    let config = NotifierConfig::new(NotifierKind::Slack(SlackConfig { url_env: Some("SLACK_URL".into()), url: None }));
    let notifier = build_with_env(&config, &slack_env).unwrap();
    let mut d = drift(7, "shop", "web", Severity::High);
    d.cluster_value = Some(serde_json::json!(HOSTILE));
    d.changed_by = Some(HOSTILE.to_owned());
    notifier.send(&Message::new("ops", vec![event(EventKind::Opened, d)], None)).await.unwrap();

    let body = r.seen.lock().unwrap().bodies[0].clone();
    assert_eq!((&body["unfurl_links"], &body["unfurl_media"]), (&serde_json::json!(false), &serde_json::json!(false)));
    let mut texts = vec![body["text"].as_str().unwrap().to_owned()];
    for b in body["blocks"].as_array().unwrap() {
        texts.extend(b["text"]["text"].as_str().map(str::to_owned));
        for e in b["elements"].as_array().into_iter().flatten() {
            texts.extend(e["text"].as_str().map(str::to_owned));
        }
    }
    assert!(texts.iter().any(|t| t.contains("&lt;!channel&gt;")), "the value is shown, escaped: {texts:#?}");
    for t in &texts {
        assert!(!t.contains("<!channel>") && !t.contains("<http://evil") && !t.contains("<script>"), "{t}");
    }
}
