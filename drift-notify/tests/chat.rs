//! ntfy, Gotify, Discord, Telegram and Teams against a local receiver (axum on loopback) that
//! checks what each service documents: the path, the headers that carry the credential, the
//! content type, the JSON fields, the escaping and the limits. Failures come back retryable
//! (5xx, 429 with its delay, from a header or from the body as Telegram and Discord send it)
//! or not (other 4xx), and never show a token or a secret URL.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::IntoResponse;
use axum::routing::post;
use drift_model::act::DriftEvent;
use drift_model::{EventKind, Severity};
use drift_notify::fixtures::{digest_event, drift, event};
use drift_notify::{Message, Notifier, NotifierConfig, build_with_env};
use serde_json::Value;
use url::Url;

/// What the receiver saw of one request.
#[derive(Debug, Clone)]
struct Request {
    path: String,
    headers: HeaderMap,
    body: Value,
}

/// A status to answer, a Retry-After header when set, and a body.
type Answer = (u16, Option<&'static str>, &'static str);

#[derive(Clone, Default)]
struct Receiver {
    seen: Arc<Mutex<Vec<Request>>>,
    /// Answers in order, then 200 with `{"ok":true}`.
    answers: Arc<Mutex<VecDeque<Answer>>>,
}

impl Receiver {
    fn answer(&self, answers: &[Answer]) {
        self.answers.lock().unwrap().extend(answers.iter().copied());
    }
    fn last(&self) -> Request {
        self.seen.lock().unwrap().last().cloned().expect("a request")
    }
    fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

async fn hook(State(r): State<Receiver>, uri: Uri, headers: HeaderMap, body: Bytes) -> impl IntoResponse {
    let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    r.seen.lock().unwrap().push(Request { path: uri.path().to_owned(), headers, body: json });
    let (status, retry_after, answer) = r.answers.lock().unwrap().pop_front().unwrap_or((200, None, r#"{"ok":true}"#));
    let mut out = HeaderMap::new();
    if let Some(ra) = retry_after {
        out.insert("retry-after", ra.parse().unwrap());
    }
    out.insert("content-type", "application/json".parse().unwrap());
    (StatusCode::from_u16(status).unwrap(), out, answer)
}

async fn start() -> (Receiver, Url) {
    let receiver = Receiver::default();
    let app = Router::new().route("/", post(hook)).route("/{*path}", post(hook)).with_state(receiver.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (receiver, Url::parse(&format!("http://{addr}/")).unwrap())
}

/// The value an attacker writes into the cluster: a mention, markup of every target, a link.
const HOSTILE: &str = "@everyone <@123> <b>x</b> *bold* _it_ `code` [click](https://evil.example) & <at>all</at>";

fn batch() -> Vec<DriftEvent> {
    let mut hostile = drift(7, "shop", "web", Severity::High);
    hostile.cluster_value = Some(serde_json::json!(HOSTILE));
    hostile.changed_by = Some(HOSTILE.to_owned());
    vec![
        event(EventKind::Opened, drift(1, "shop", "web", Severity::Critical)),
        event(EventKind::Opened, hostile),
        event(EventKind::Resolved, drift(2, "shop", "api", Severity::Low)),
        digest_event("n"),
    ]
}

fn message() -> Message {
    Message::new("n", batch(), Some(Url::parse("https://drift.example.com/").unwrap()))
}

fn notifier(yaml: &str, env: &[(&str, String)]) -> Arc<dyn Notifier> {
    common::install_crypto_provider();
    let config: NotifierConfig = serde_saphyr::from_str(yaml).unwrap();
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect();
    let lookup = move |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    drift_notify::validate(std::slice::from_ref(&config), &lookup).unwrap();
    build_with_env(&config, &lookup).unwrap()
}

/// Sends and expects a failure; checks that no secret is in it or in the notifier's `Debug`.
async fn fails(n: &Arc<dyn Notifier>, secrets: &[&str]) -> (bool, Option<Duration>, String) {
    let e = n.send(&message()).await.unwrap_err();
    for s in secrets {
        assert!(!e.message.contains(s), "a secret in the error: {e}");
        assert!(!format!("{n:?}").contains(s), "a secret in Debug: {n:?}");
    }
    (e.retryable, e.retry_after, e.message)
}

fn header<'a>(r: &'a Request, name: &str) -> &'a str {
    r.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default()
}

#[tokio::test]
async fn ntfy_gets_a_json_publication_with_its_token_and_priority() {
    let (r, base) = start().await;
    let yaml = format!("type: ntfy\nurl: {base}\ntopic: drift-alerts\ntoken_env: NTFY_TOKEN\n");
    let n = notifier(&yaml, &[("NTFY_TOKEN", "tk_secret0123".into())]);
    n.send(&message()).await.unwrap();
    let req = r.last();
    assert_eq!(req.path, "/", "ntfy takes JSON at its root");
    assert_eq!(header(&req, "content-type"), "application/json");
    assert_eq!(header(&req, "authorization"), "Bearer tk_secret0123");
    let b = &req.body;
    assert_eq!(b["topic"], "drift-alerts");
    assert_eq!(b["priority"], 5, "a CRITICAL drift is open");
    assert_eq!(b["tags"], serde_json::json!(["rotating_light", "drift", "critical"]));
    assert_eq!(b["click"], "https://drift.example.com/drifts/1");
    assert_eq!(b["markdown"], false, "plain text: a value cannot format anything");
    assert!(b["title"].as_str().unwrap().starts_with("3 drift events in prod/shop"), "{}", b["title"]);
    let text = b["message"].as_str().unwrap();
    assert!(text.contains(HOSTILE), "plain text shows the value as it is: {text}");
    assert!(text.len() <= drift_notify::NTFY_MAX_MESSAGE_BYTES);

    r.answer(&[(500, None, "{}"), (429, Some("11"), "{}"), (403, None, r#"{"code":40301,"error":"forbidden"}"#)]);
    assert!(fails(&n, &["tk_secret0123", "drift-alerts"]).await.0);
    let (retry, after, _) = fails(&n, &["tk_secret0123"]).await;
    assert_eq!((retry, after), (true, Some(Duration::from_secs(11))));
    let (retry, _, text) = fails(&n, &["tk_secret0123"]).await;
    assert!(!retry && text.contains("403"), "{text}");
}

#[tokio::test]
async fn gotify_gets_its_message_with_the_app_token_header() {
    let (r, base) = start().await;
    let yaml = format!("type: gotify\nurl: {}\ntoken_env: GOTIFY_TOKEN\n", base.join("gotify/").unwrap());
    let n = notifier(&yaml, &[("GOTIFY_TOKEN", "AbCgotifysecret".into())]);
    n.send(&message()).await.unwrap();
    let req = r.last();
    assert_eq!(req.path, "/gotify/message", "a server behind a path prefix");
    assert_eq!(header(&req, "x-gotify-key"), "AbCgotifysecret");
    assert_eq!(header(&req, "content-type"), "application/json");
    assert!(req.headers.get("authorization").is_none());
    let b = &req.body;
    assert_eq!(b["priority"], 8);
    assert_eq!(b["extras"]["client::display"]["contentType"], "text/plain");
    assert_eq!(b["extras"]["client::notification"]["click"]["url"], "https://drift.example.com/drifts/1");
    assert!(b["message"].as_str().unwrap().contains(HOSTILE));

    r.answer(&[(503, None, "{}"), (401, None, r#"{"error":"Unauthorized","errorCode":401}"#)]);
    assert!(fails(&n, &["AbCgotifysecret"]).await.0);
    assert!(!fails(&n, &["AbCgotifysecret"]).await.0);
    assert_eq!(r.count(), 3);
}

#[tokio::test]
async fn discord_gets_content_and_embeds_within_its_limits_and_no_mention() {
    let (r, base) = start().await;
    let url = base.join("api/webhooks/123/discord-secret-token").unwrap().to_string();
    let n = notifier("type: discord\nurl_env: DISCORD_URL\n", &[("DISCORD_URL", url)]);
    n.send(&message()).await.unwrap();
    let req = r.last();
    assert_eq!(req.path, "/api/webhooks/123/discord-secret-token");
    assert_eq!(header(&req, "content-type"), "application/json");
    let b = &req.body;
    assert_eq!(b["allowed_mentions"], serde_json::json!({ "parse": [] }), "nothing may ping");
    assert!(b["content"].as_str().unwrap().starts_with("**3 drift events in prod/shop"), "{}", b["content"]);
    let embeds = b["embeds"].as_array().unwrap();
    assert_eq!(embeds.len(), 3, "two objects and the digest");
    assert_eq!(embeds[0]["title"], "Deployment shop/web");
    assert_eq!(embeds[0]["color"], 0xD32F2F);
    let web = embeds[0]["description"].as_str().unwrap();
    assert!(web.contains("[view drift 1](<https://drift.example.com/drifts/1>)"), "{web}");
    // The hostile value: in a code span (backquotes made quotes), or escaped outside one.
    assert!(
        web.contains("`@everyone <@123> <b>x</b> *bold* _it_ 'code' [click](https://evil.example) & <at>all</at>`"),
        "{web}"
    );
    assert!(web.contains("changed by \\@everyone \\<\\@123> \\<b>x\\</b> \\*bold\\* \\_it\\_ \\`code\\`"), "{web}");
    assert_eq!(embeds[2]["title"], "Digest");
    assert!(embeds[2]["fields"].as_array().unwrap().len() <= 25);

    // Discord's 429: a Retry-After header, or only `retry_after` in the JSON body.
    r.answer(&[
        (429, Some("2"), r#"{"message":"You are being rate limited.","retry_after":2.0,"global":false}"#),
        (429, None, r#"{"message":"You are being rate limited.","retry_after":0.75,"global":false}"#),
        (502, None, ""),
        (404, None, r#"{"message":"Unknown Webhook","code":10015}"#),
    ]);
    let secret = ["discord-secret-token", "/api/webhooks/"];
    assert_eq!(fails(&n, &secret).await.1, Some(Duration::from_secs(2)));
    assert_eq!(fails(&n, &secret).await.1, Some(Duration::from_millis(750)));
    assert!(fails(&n, &secret).await.0);
    let (retry, _, text) = fails(&n, &secret).await;
    assert!(!retry && text.contains("Unknown Webhook"), "{text}");
}

#[tokio::test]
async fn telegram_gets_send_message_in_html_and_its_token_never_shows() {
    let (r, base) = start().await;
    let token = "123456:AAE-telegram-secret_token";
    let yaml = format!("type: telegram\nbot_token_env: TG_TOKEN\nchat_id: -1001234567890\napi_url: {base}\n");
    let n = notifier(&yaml, &[("TG_TOKEN", token.into())]);
    n.send(&message()).await.unwrap();
    let req = r.last();
    assert_eq!(req.path, format!("/bot{token}/sendMessage"), "the Bot API's URL");
    assert_eq!(header(&req, "content-type"), "application/json");
    let b = &req.body;
    assert_eq!(b["chat_id"], -1001234567890i64);
    assert_eq!(b["parse_mode"], "HTML");
    assert_eq!(b["link_preview_options"]["is_disabled"], true);
    let text = b["text"].as_str().unwrap();
    assert!(text.chars().count() <= drift_notify::TELEGRAM_MAX_TEXT);
    assert!(text.starts_with("<b>3 drift events in prod/shop"), "{text}");
    assert!(text.contains("<a href=\"https://drift.example.com/drifts/1\">view drift 1</a>"), "{text}");
    assert!(
        text.contains("<code>@everyone &lt;@123&gt; &lt;b&gt;x&lt;/b&gt; *bold* _it_ `code` [click](https://evil.example) &amp; &lt;at&gt;all&lt;/at&gt;</code>"),
        "{text}"
    );
    assert!(!text.contains("<b>x</b>"), "{text}");

    r.answer(&[
        (429, None, r#"{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 3","parameters":{"retry_after":3}}"#),
        (500, None, r#"{"ok":false,"error_code":500,"description":"Internal Server Error"}"#),
        (401, None, r#"{"ok":false,"error_code":401,"description":"Unauthorized"}"#),
        (400, None, r#"{"ok":false,"error_code":400,"description":"Bad Request: chat not found"}"#),
    ]);
    let secret = [token, "AAE-telegram-secret_token", "/bot"];
    assert_eq!(fails(&n, &secret).await.1, Some(Duration::from_secs(3)));
    assert!(fails(&n, &secret).await.0);
    assert!(!fails(&n, &secret).await.0);
    let (retry, _, text) = fails(&n, &secret).await;
    assert!(!retry && text.contains("chat not found"), "{text}");

    // Unreachable: the connection error names the host, not the path with the token.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let yaml = format!("type: telegram\nbot_token_env: TG_TOKEN\nchat_id: '@drift'\napi_url: http://{closed}\n");
    let n = notifier(&yaml, &[("TG_TOKEN", token.into())]);
    let (retry, _, text) = fails(&n, &secret).await;
    assert!(retry && text.contains("cannot connect"), "{text}");
}

#[tokio::test]
async fn teams_gets_an_adaptive_card_in_a_message_attachment() {
    let (r, base) = start().await;
    let url = base.join("workflows/abc/triggers/manual/paths/invoke?sig=teams-secret-sig").unwrap().to_string();
    let n = notifier("type: teams\nurl_env: TEAMS_URL\n", &[("TEAMS_URL", url)]);
    n.send(&message()).await.unwrap();
    let req = r.last();
    assert_eq!(header(&req, "content-type"), "application/json");
    let b = &req.body;
    assert_eq!(b["type"], "message");
    let attachments = b["attachments"].as_array().unwrap();
    assert_eq!(attachments.len(), 1);
    assert_eq!(attachments[0]["contentType"], "application/vnd.microsoft.card.adaptive");
    let card = &attachments[0]["content"];
    assert_eq!((card["type"].as_str(), card["version"].as_str()), (Some("AdaptiveCard"), Some("1.4")));
    assert_eq!(card["$schema"], "http://adaptivecards.io/schemas/adaptive-card.json");
    let text = card.to_string();
    assert!(text.len() <= drift_notify::TEAMS_MAX_BYTES);
    assert!(
        text.contains(r#""selectAction":{"type":"Action.OpenUrl","url":"https://drift.example.com/drifts/1"}"#),
        "{text}"
    );
    // The hostile value only ever in a TextRun, which Adaptive Cards do not read as Markdown.
    let mut runs = Vec::new();
    fn walk<'a>(v: &'a Value, runs: &mut Vec<&'a Value>) {
        match v {
            Value::Object(o) => {
                if o.get("text").and_then(Value::as_str).is_some_and(|t| t.contains("@everyone")) {
                    runs.push(v);
                }
                o.values().for_each(|x| walk(x, runs));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, runs)),
            _ => {}
        }
    }
    walk(card, &mut runs);
    assert!(!runs.is_empty());
    assert!(runs.iter().all(|r| r["type"] == "TextRun"), "{runs:?}");

    r.answer(&[(502, None, ""), (400, None, r#"{"error":{"code":"InvalidRequestContent"}}"#)]);
    let secret = ["teams-secret-sig", "/workflows/"];
    assert!(fails(&n, &secret).await.0);
    assert!(!fails(&n, &secret).await.0);
}

#[test]
fn secrets_stay_out_of_debug_and_configuration_errors() {
    let yaml = "
- type: telegram
  bot_token_env: TG
  chat_id: not-a-chat
- type: ntfy
  topic: 'has spaces'
- type: discord
  url_env: DISCORD
- type: gotify
  url: https://push.example.com
  token_env: MISSING
- type: teams
  url: https://prod.example.com/workflows/x?sig=inline-sig
";
    let configs: Vec<NotifierConfig> = serde_saphyr::from_str(yaml).unwrap();
    let env = |name: &str| match name {
        "TG" => Some("999:tg-secret".to_owned()),
        "DISCORD" => Some("not a url discord-secret".to_owned()),
        _ => None,
    };
    let err = drift_notify::validate(&configs, &env).unwrap_err().to_string();
    for needle in [
        "notify[0].chat_id: \"not-a-chat\" is neither",
        "notify[1].topic: must be",
        "notify[2].url_env: the value of DISCORD",
        "notify[3].token_env: the environment variable MISSING is not set",
    ] {
        assert!(err.contains(needle), "{needle:?} missing from {err}");
    }
    let debug = format!("{configs:?}");
    for secret in ["tg-secret", "discord-secret", "inline-sig", "has spaces", "/workflows/"] {
        assert!(!err.contains(secret) && !debug.contains(secret), "{secret} leaked:\n{err}\n{debug}");
    }
}

/// One template for every notifier: the title, then each drift's path and cluster value.
const TEMPLATE: &str = "{{ title }}{% for o in objects %}{% for d in o.drifts %}\n{{ o.display }} {{ d.path }} = {{ d.cluster }} ({{ d.who_when }}){% endfor %}{% endfor %}";

fn templated(yaml: &str) -> String {
    format!("{yaml}template: {}\n", serde_json::to_string(TEMPLATE).unwrap())
}

#[tokio::test]
async fn a_template_is_rendered_with_values_escaped_for_each_target() {
    let (r, base) = start().await;
    let hostile_line = |rendered: &str| rendered.lines().find(|l| l.contains("everyone")).unwrap().to_owned();

    let n = notifier(&templated(&format!("type: ntfy\nurl: {base}\ntopic: t\n")), &[]);
    n.send(&message()).await.unwrap();
    let text = r.last().body["message"].as_str().unwrap().to_owned();
    assert!(text.starts_with("3 drift events in prod/shop"), "{text}");
    assert!(
        hostile_line(&text).contains(&format!("= {HOSTILE} (changed by {HOSTILE} at")),
        "plain: as written: {text}"
    );

    let n = notifier(&templated(&format!("type: gotify\nurl: {base}\ntoken_env: G\n")), &[("G", "g".into())]);
    n.send(&message()).await.unwrap();
    assert!(r.last().body["message"].as_str().unwrap().contains(&format!("= {HOSTILE} (")));

    let url = base.join("d/x").unwrap().to_string();
    let n = notifier(&templated("type: discord\nurl_env: D\n"), &[("D", url)]);
    n.send(&message()).await.unwrap();
    let body = r.last().body;
    assert!(body.get("embeds").is_none() && body["allowed_mentions"] == serde_json::json!({ "parse": [] }));
    let line = hostile_line(body["content"].as_str().unwrap());
    assert!(line.contains("= \\@everyone \\<\\@123> \\<b>x\\</b> \\*bold\\* \\_it\\_ \\`code\\` \\[click\\]\\(https\\://evil.example\\)"), "{line}");

    let yaml = format!("type: telegram\nbot_token_env: T\nchat_id: 1\napi_url: {base}\n");
    let n = notifier(&templated(&yaml), &[("T", "1:x".into())]);
    n.send(&message()).await.unwrap();
    let line = hostile_line(r.last().body["text"].as_str().unwrap());
    assert!(line.contains("= @everyone &lt;@123&gt; &lt;b&gt;x&lt;/b&gt; *bold*"), "{line}");

    let url = base.join("slack/x").unwrap().to_string();
    let n = notifier(&templated("type: slack\nurl_env: S\n"), &[("S", url)]);
    n.send(&message()).await.unwrap();
    let body = r.last().body;
    assert!(body.get("blocks").is_none());
    let line = hostile_line(body["text"].as_str().unwrap());
    assert!(line.contains("= @everyone &lt;@123&gt; &lt;b&gt;x&lt;/b&gt; *bold* _it_ 'code' [click](https://evil.example) &amp; &lt;at&gt;all&lt;/at&gt;"), "{line}");

    let url = base.join("teams/x").unwrap().to_string();
    let n = notifier(&templated("type: teams\nurl_env: M\n"), &[("M", url)]);
    n.send(&message()).await.unwrap();
    let body = r.last().body;
    let run = &body["attachments"][0]["content"]["body"][0]["inlines"][0];
    assert_eq!(run["type"], "TextRun", "a template's text is a TextRun: never Markdown");
    assert!(hostile_line(run["text"].as_str().unwrap()).contains(&format!("= {HOSTILE} (")));
}

#[tokio::test]
async fn a_template_over_the_receivers_limit_falls_back_to_the_built_in_message() {
    let (r, base) = start().await;
    let url = base.join("d/x").unwrap().to_string();
    let yaml = "type: discord\nurl_env: D\ntemplate: \"{{ title }}{% for i in range(3000) %}x{% endfor %}\"\n";
    let n = notifier(yaml, &[("D", url)]);
    n.send(&message()).await.unwrap();
    let body = r.last().body;
    assert_eq!(body["embeds"].as_array().unwrap().len(), 3, "the built-in embeds: {body}");
    // Telegram: HTML its parser would refuse is caught at load time...
    let yaml =
        format!("type: telegram\nbot_token_env: T\nchat_id: 1\napi_url: {base}\ntemplate: '<b>{{{{ title }}}}'\n");
    let config: NotifierConfig = serde_saphyr::from_str(&yaml).unwrap();
    let err = drift_notify::validate(&[config], &|_: &str| Some("1:x".to_owned())).unwrap_err().to_string();
    assert!(err.contains("notify[0].template: Telegram would refuse its HTML: <b> is never closed"), "{err}");
}

#[test]
fn a_bad_template_is_a_configuration_error_naming_its_line() {
    let configs: Vec<NotifierConfig> = serde_saphyr::from_str(
        "
- type: ntfy
  topic: t
  template: \"{{ title }}\\n{% for o in objects %}{{ o.displya }}{% endfor %}\"
- type: gotify
  url: https://g.example.com
  token_env: G
  template: \"{% if %}\"
- type: webhook
  url: https://h.example.com
  secret_env: G
  template: \"{{ title }}\"
",
    )
    .unwrap();
    let err = drift_notify::validate(&configs, &|_: &str| Some("x".to_owned())).unwrap_err().to_string();
    for needle in [
        "notify[0].template: undefined value (line 2)",
        "notify[1].template: syntax error (line 1)",
        "notify[2].template: the webhook sends its documented JSON document",
    ] {
        assert!(err.contains(needle), "{needle:?} missing from:\n{err}");
    }
}
