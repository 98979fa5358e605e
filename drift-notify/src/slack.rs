//! `type: slack`: a Slack-compatible incoming-webhook message: `text` (the whole message as
//! plain text, which Mattermost and other compatible receivers show) and `blocks` (Slack's
//! layout).

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::config::NotifierConfig;
use crate::http::HttpPoster;
use crate::message::{MAX_DRIFTS_PER_OBJECT, Message, ObjectGroup, digest_lines, shorten};
use crate::notifier::{Notifier, SendError};
use crate::redact::Secret;
use crate::sign::{DELIVERY_HEADER, IDEMPOTENCY_HEADER};
use crate::text::plain_text;

/// Characters of `text` (Slack shows up to 4,000 in a notification; longer text is cut).
pub const SLACK_MAX_TEXT_CHARS: usize = 3000;
/// Characters of a header block (Slack's limit is 150).
const HEADER_MAX_CHARS: usize = 150;
/// Characters of a section's text (Slack's limit is 3,000).
const SECTION_MAX_CHARS: usize = 2900;

/// Slack's mrkdwn escaping: `&`, `<` and `>`; backquotes become quotes so that a value cannot
/// end its code span.
pub(crate) fn esc(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('`', "'")
}

/// The Slack message of `message`: `text` and at most 25 `blocks` (a header, the counts of a
/// summary, one section per object shown, a line for the objects not shown, the digests, and a
/// context line with the message id).
///
/// ```
/// use drift_model::{EventKind, Severity};
/// use drift_notify::{Message, fixtures::{drift, event}};
/// let m = Message::new("ops", vec![event(EventKind::Opened, drift(1, "shop", "web", Severity::Critical))], None);
/// let body = drift_notify::slack_body(&m);
/// assert_eq!(body["blocks"][0]["type"], "header");
/// assert!(body["text"].as_str().unwrap().starts_with("1 drift opened in prod/shop (1 CRITICAL)"));
/// ```
pub fn slack_body(message: &Message) -> Value {
    let mut blocks = vec![json!({
        "type": "header",
        "text": { "type": "plain_text", "text": shorten(&message.title(), HEADER_MAX_CHARS) },
    })];
    if message.is_summary() {
        let lines: Vec<String> =
            message.summary_lines().iter().map(|(label, value)| format!("*{label}:* {}", esc(value))).collect();
        blocks.push(section(&lines.join("\n")));
    }
    let (shown, hidden) = message.shown_groups();
    for group in shown {
        blocks.push(section(&group_mrkdwn(message, group)));
    }
    if hidden > 0 {
        blocks.push(context(&format!("… and {hidden} more objects (the most severe are listed first)")));
    }
    for d in message.digests() {
        let lines: Vec<String> =
            digest_lines(d).iter().map(|(label, value)| format!("*{label}:* {}", esc(value))).collect();
        blocks.push(section(&format!("*Digest*\n{}", lines.join("\n"))));
    }
    blocks.push(context(&format!("drift · notifier {} · message {}", esc(message.notifier()), message.id())));
    json!({
        // The fallback text is parsed too (Slack reads it for mentions and links and shows it in
        // push notifications; Mattermost, Rocket.Chat and Zulip show it as the message): the
        // same escaping as the blocks, so no value becomes a `<!channel>` or a `<url|label>`.
        "text": fit(&esc(&plain_text(message)), SLACK_MAX_TEXT_CHARS),
        "blocks": blocks,
        // No preview of a link (a value is never one, but the drift's own link needs none).
        "unfurl_links": false,
        "unfurl_media": false,
    })
}

/// [`shorten`] of escaped text, never cutting an entity (`&gt;` shortened to `&g…` would leave
/// a bare `&`, which Slack reads as the start of one): a cut entity is left out whole.
fn fit(text: &str, max: usize) -> String {
    let out = shorten(text, max);
    if out.len() == text.len() {
        return out;
    }
    let body = out.strip_suffix('…').unwrap_or(&out);
    match body.rfind('&') {
        Some(at) if !body[at..].contains(';') => format!("{}…", &body[..at]),
        _ => out,
    }
}

fn section(mrkdwn: &str) -> Value {
    json!({ "type": "section", "text": { "type": "mrkdwn", "text": fit(mrkdwn, SECTION_MAX_CHARS) } })
}

fn context(mrkdwn: &str) -> Value {
    json!({ "type": "context", "elements": [{ "type": "mrkdwn", "text": fit(mrkdwn, SECTION_MAX_CHARS) }] })
}

fn group_mrkdwn(message: &Message, group: &ObjectGroup) -> String {
    let repository = group.events.iter().find_map(|e| e.drift.as_ref()).map(|d| d.repository.as_str()).unwrap_or("");
    let mut lines = vec![format!(
        "*{}* · cluster {} · repository {}",
        esc(&group.key.display()),
        esc(&group.key.cluster),
        esc(repository)
    )];
    for e in group.events.iter().take(MAX_DRIFTS_PER_OBJECT) {
        let Some(v) = message.view(e) else { continue };
        lines.push(format!("• `{}` *{}* {} {}", esc(&v.path), v.severity, v.drift_type, v.verb));
        let cluster = match &v.before {
            Some((before, sev)) => format!("`{}` (was `{}`, {sev})", esc(&v.cluster), esc(before)),
            None => format!("`{}`", esc(&v.cluster)),
        };
        let mut facts = vec![format!("Git `{}` → cluster {cluster}", esc(&v.git))];
        facts.extend(v.who_when().map(|w| esc(&w)));
        facts.extend(v.resolution.map(|r| format!("resolution: {r}")));
        lines.push(format!("    {}", facts.join(" · ")));
        if let Some(l) = &v.learned {
            lines.push(format!("    _{}_", esc(l)));
        }
        if let Some(link) = &v.link {
            lines.push(format!("    <{}|view drift {}>", esc(link.as_str()), e.drift_id().unwrap_or_default()));
        }
    }
    if group.events.len() > MAX_DRIFTS_PER_OBJECT {
        lines.push(format!("… and {} more drifts of this object", group.events.len() - MAX_DRIFTS_PER_OBJECT));
    }
    lines.join("\n")
}

/// Sends Slack-compatible messages to an incoming webhook.
#[derive(Debug)]
pub struct SlackNotifier {
    config: NotifierConfig,
    poster: HttpPoster,
}

impl SlackNotifier {
    /// A notifier posting to `url` (a secret: errors show its scheme and host only).
    pub(crate) fn new(config: NotifierConfig, url: &Secret) -> drift_model::Result<Self> {
        let poster = HttpPoster::new(url.expose(), Duration::from_secs(10)).map_err(|e| {
            drift_model::Error::config(format!("notifier {}: the Slack URL: {}", config.name(), e.message()))
        })?;
        Ok(SlackNotifier { config, poster })
    }
}

#[async_trait]
impl Notifier for SlackNotifier {
    fn name(&self) -> &str {
        self.config.name()
    }

    fn config(&self) -> &NotifierConfig {
        &self.config
    }

    async fn send(&self, message: &Message) -> Result<(), SendError> {
        let templated = crate::template::output(
            self.config.name(),
            self.config.template.as_deref(),
            message,
            crate::template::Markup::Slack,
            |t| t.chars().count() <= SLACK_MAX_TEXT_CHARS,
        );
        let body = match templated {
            // A template's text as the message (mrkdwn), values escaped; no blocks.
            Some(text) => json!({ "text": text, "unfurl_links": false, "unfurl_media": false }),
            None => slack_body(message),
        };
        let body = serde_json::to_vec(&body)
            .map_err(|e| SendError::permanent(format!("cannot encode the Slack message: {e}")))?;
        let headers = [(DELIVERY_HEADER, message.id().to_owned()), (IDEMPOTENCY_HEADER, message.id().to_owned())];
        self.poster.post(body, &headers).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{drift, event};
    use crate::message::MAX_OBJECTS_SHOWN;
    use drift_model::{DriftEvent, EventKind, Severity};

    #[test]
    fn values_cannot_inject_mrkdwn_or_links() {
        let mut d = drift(1, "shop", "web", Severity::High);
        d.cluster_value = Some(serde_json::json!("<!channel> `x` & <https://evil.example|click>"));
        let body = slack_body(&Message::new("ops", vec![event(EventKind::Opened, d)], None));
        let section = body["blocks"][1]["text"]["text"].as_str().unwrap();
        assert!(section.contains("&lt;!channel&gt; 'x' &amp; &lt;https://evil.example|click&gt;"), "{section}");
        assert!(!section.contains("<!channel>"));
        let text = body["text"].as_str().unwrap();
        assert!(text.contains("&lt;!channel&gt; 'x' &amp; &lt;https://evil.example|click&gt;"), "{text}");
        assert!(!text.contains("<!channel>") && !text.contains("<https://"), "{text}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(10_000))]
        /// Whatever a value holds, the fallback text and every mrkdwn block carry no `<` or `>`
        /// (Slack's mentions and links need them) and no `&` that does not start one of the
        /// three entities.
        #[test]
        fn no_value_opens_a_mention_or_a_link_in_any_text(
            (value, big) in ("[<>&!|@#`*_~\\n\\r a-z:/.\\u{200b}\\u{200f}\\u{202e}\\u{2028}\"']{1,80}", proptest::bool::weighted(0.05))
        ) {
            // One value in twenty is about 100 KB (shortened in the message).
            let value = if big { value.repeat(100_000 / value.len()) } else { value };
            let mut d = drift(1, "shop", "web", Severity::High);
            d.changed_by = Some(value.clone());
            d.cluster_value = Some(serde_json::json!(value));
            d.git_value = Some(serde_json::json!(value.chars().rev().collect::<String>()));
            let body = slack_body(&Message::new("ops", vec![event(EventKind::Opened, d)], None));
            let mut texts = vec![body["text"].as_str().unwrap().to_owned()];
            for b in body["blocks"].as_array().unwrap().iter().filter(|b| b["type"] == "section") {
                texts.push(b["text"]["text"].as_str().unwrap().to_owned());
            }
            for text in texts {
                proptest::prop_assert!(!text.contains('<') && !text.contains('>'), "{}", text);
                let bare_amp = text.match_indices('&').any(|(i, _)| {
                    !["&amp;", "&lt;", "&gt;"].iter().any(|e| text[i..].starts_with(e))
                });
                proptest::prop_assert!(!bare_amp, "{}", text);
            }
        }
    }

    #[test]
    fn ten_thousand_events_stay_within_slack_limits() {
        let events: Vec<DriftEvent> = (0..10_000)
            .map(|i| {
                event(
                    EventKind::Opened,
                    drift(i, &format!("ns-{}", i % 50), &format!("app-{}", i % 3000), Severity::Low),
                )
            })
            .collect();
        let body = slack_body(&Message::new("ops", events, None));
        let blocks = body["blocks"].as_array().unwrap();
        assert!(blocks.len() <= 50, "{}", blocks.len());
        assert_eq!(blocks.iter().filter(|b| b["type"] == "section").count(), MAX_OBJECTS_SHOWN + 1);
        assert!(body["text"].as_str().unwrap().chars().count() <= SLACK_MAX_TEXT_CHARS);
        assert!(serde_json::to_vec(&body).unwrap().len() < 100_000);
    }
}
