//! `type: ntfy` and `type: gotify`: push notifications to a phone, plain text (no markup, so a
//! value is shown as it is and cannot format or link anything), a priority from the most
//! severe drift still open, a click-through to the drift.

use drift_model::EventKind;
use drift_model::drift::Severity;
use serde_json::{Value, json};

use crate::config::{GotifyConfig, NotifierConfig, NotifierKind, NtfyConfig};
use crate::message::{Message, shorten};
use crate::template::Markup;
use crate::text::{fit_bytes, plain_text};

/// Bytes of an ntfy message (ntfy's default `message-size-limit`; a longer one would become
/// an attachment or be refused).
pub const NTFY_MAX_MESSAGE_BYTES: usize = 4096;
/// Characters of a push title.
const TITLE_MAX_CHARS: usize = 250;
/// Characters of a Gotify message (Gotify sets no limit; a phone shows far less).
pub const GOTIFY_MAX_MESSAGE_CHARS: usize = 8000;

/// How urgent a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Urgency {
    /// The most severe drift announced open (opened, reopened, changed, still open, out of waiver).
    Open(Severity),
    /// Only resolutions.
    Resolved,
    /// Only a digest.
    Digest,
}

pub(crate) fn urgency(message: &Message) -> Urgency {
    let open = message
        .events()
        .filter(|e| e.kind != EventKind::Resolved)
        .filter_map(|e| e.drift.as_ref().map(|d| d.severity))
        .max();
    match open {
        Some(s) => Urgency::Open(s),
        None if message.groups().is_empty() => Urgency::Digest,
        None => Urgency::Resolved,
    }
}

/// The link of the drift that matters most in the message (open before resolved, then the
/// most severe, then the oldest id), if links are configured.
pub(crate) fn first_link(message: &Message) -> Option<String> {
    let top = message
        .events()
        .filter_map(|e| e.drift.as_ref().map(|d| (e.kind != EventKind::Resolved, d.severity, std::cmp::Reverse(d.id))))
        .max()?;
    message.link(top.2.0).map(|u| u.to_string())
}

/// The ntfy JSON publication of `message` to `topic` (POSTed to the server's root URL):
/// `topic`, `title`, `message` (the plain text, at most [`NTFY_MAX_MESSAGE_BYTES`] bytes),
/// `priority` (5 for CRITICAL, 4 HIGH, 3 MEDIUM or a digest, 2 LOW or only resolutions), `tags`
/// (an emoji short code, `drift`, the severity) and `click` (the link of the most severe open drift).
///
/// ```
/// use drift_model::{EventKind, Severity};
/// use drift_notify::{Message, fixtures::{drift, event}};
/// let m = Message::new("phone", vec![event(EventKind::Opened, drift(1, "shop", "web", Severity::Critical))], None);
/// let body = drift_notify::ntfy_body(&m, "drift-alerts");
/// assert_eq!((body["topic"].as_str(), body["priority"].as_u64()), (Some("drift-alerts"), Some(5)));
/// assert_eq!(body["tags"][0], "rotating_light");
/// ```
pub fn ntfy_body(message: &Message, topic: &str) -> Value {
    let (priority, tags) = match urgency(message) {
        Urgency::Open(Severity::Critical) => (5, vec!["rotating_light", "drift", "critical"]),
        Urgency::Open(Severity::High) => (4, vec!["warning", "drift", "high"]),
        Urgency::Open(Severity::Medium) => (3, vec!["warning", "drift", "medium"]),
        Urgency::Open(Severity::Low) => (2, vec!["information_source", "drift", "low"]),
        Urgency::Resolved => (2, vec!["white_check_mark", "drift", "resolved"]),
        Urgency::Digest => (3, vec!["bar_chart", "drift", "digest"]),
    };
    let mut body = json!({
        "topic": topic,
        "title": shorten(&message.title(), TITLE_MAX_CHARS),
        "message": fit_bytes(&plain_text(message), NTFY_MAX_MESSAGE_BYTES),
        "priority": priority,
        "tags": tags,
        "markdown": false,
    });
    if let Some(link) = first_link(message) {
        body["click"] = json!(link);
    }
    body
}

/// The Gotify message of `message` (`POST /message`): `title`, `message` (the plain text, at
/// most [`GOTIFY_MAX_MESSAGE_CHARS`] characters), `priority` (8 for CRITICAL, 6 HIGH, 4 MEDIUM,
/// 3 a digest, 2 LOW, 1 only resolutions: Gotify's Android app makes a sound from 4 and shows a
/// heads-up from 8), and `extras`: `client::display` `text/plain` (no Markdown rendering of
/// values) and, with links, `client::notification.click.url`.
///
/// ```
/// use drift_model::{EventKind, Severity};
/// use drift_notify::{Message, fixtures::{drift, event}};
/// let m = Message::new("phone", vec![event(EventKind::Opened, drift(1, "shop", "web", Severity::High))], None);
/// let body = drift_notify::gotify_body(&m);
/// assert_eq!(body["priority"], 6);
/// assert_eq!(body["extras"]["client::display"]["contentType"], "text/plain");
/// ```
pub fn gotify_body(message: &Message) -> Value {
    let priority = match urgency(message) {
        Urgency::Open(Severity::Critical) => 8,
        Urgency::Open(Severity::High) => 6,
        Urgency::Open(Severity::Medium) => 4,
        Urgency::Open(Severity::Low) => 2,
        Urgency::Resolved => 1,
        Urgency::Digest => 3,
    };
    let mut extras = json!({ "client::display": { "contentType": "text/plain" } });
    if let Some(link) = first_link(message) {
        extras["client::notification"] = json!({ "click": { "url": link } });
    }
    json!({
        "title": shorten(&message.title(), TITLE_MAX_CHARS),
        "message": shorten(&plain_text(message), GOTIFY_MAX_MESSAGE_CHARS),
        "priority": priority,
        "extras": extras,
    })
}

pub(crate) fn render_ntfy(config: &NotifierConfig, message: &Message) -> Option<Value> {
    let NotifierKind::Ntfy(NtfyConfig { topic, .. }) = &config.kind else { return None };
    let mut body = ntfy_body(message, topic);
    let fits = |t: &str| t.len() <= NTFY_MAX_MESSAGE_BYTES;
    if let Some(text) = crate::template::output(config.name(), config.template.as_deref(), message, Markup::Plain, fits)
    {
        body["message"] = json!(text);
    }
    Some(body)
}

pub(crate) fn render_gotify(config: &NotifierConfig, message: &Message) -> Option<Value> {
    if !matches!(&config.kind, NotifierKind::Gotify(GotifyConfig { .. })) {
        return None;
    }
    let mut body = gotify_body(message);
    let fits = |t: &str| t.chars().count() <= GOTIFY_MAX_MESSAGE_CHARS;
    if let Some(text) = crate::template::output(config.name(), config.template.as_deref(), message, Markup::Plain, fits)
    {
        body["message"] = json!(text);
    }
    Some(body)
}

/// `{base}/{segment}`, keeping a path the base has (a server behind a reverse proxy at
/// `https://example.com/gotify`).
pub(crate) fn join(base: &str, segment: &str) -> String {
    format!("{}/{segment}", base.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{digest_event, drift, event};
    use drift_model::DriftEvent;

    #[test]
    fn the_priority_follows_what_is_still_open() {
        let open = event(EventKind::Opened, drift(1, "shop", "web", Severity::Medium));
        let resolved = event(EventKind::Resolved, drift(2, "shop", "api", Severity::Critical));
        let m = Message::new("n", vec![open.clone(), resolved.clone()], None);
        assert_eq!(urgency(&m), Urgency::Open(Severity::Medium), "a resolved CRITICAL does not wake anyone");
        assert_eq!(ntfy_body(&m, "t")["priority"], 3);
        let m = Message::new("n", vec![resolved], None);
        assert_eq!((ntfy_body(&m, "t")["priority"].as_u64(), gotify_body(&m)["priority"].as_u64()), (Some(2), Some(1)));
        let m = Message::new("n", vec![digest_event("n")], None);
        assert_eq!(urgency(&m), Urgency::Digest);
    }

    #[test]
    fn ten_thousand_events_fit_ntfys_limit() {
        let events: Vec<DriftEvent> = (0..10_000)
            .map(|i| event(EventKind::Opened, drift(i, "shop", &format!("app-{i}"), Severity::Low)))
            .collect();
        let m = Message::new("n", events, None);
        let body = ntfy_body(&m, "t");
        assert!(body["message"].as_str().unwrap().len() <= NTFY_MAX_MESSAGE_BYTES);
        assert!(body["message"].as_str().unwrap().ends_with('…'));
        assert!(gotify_body(&m)["message"].as_str().unwrap().chars().count() <= GOTIFY_MAX_MESSAGE_CHARS);
    }

    #[test]
    fn the_base_url_keeps_its_path() {
        assert_eq!(join("https://example.com/gotify/", "message"), "https://example.com/gotify/message");
        assert_eq!(join("http://127.0.0.1:8080", "message"), "http://127.0.0.1:8080/message");
    }
}
