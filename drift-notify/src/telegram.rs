//! `type: telegram`: the Bot API's `sendMessage` with `parse_mode` `HTML`. HTML rather than
//! MarkdownV2: three characters to escape (`&`, `<`, `>`; `"` too in an attribute) instead of
//! eighteen, and a value in `<code>` needs the same escaping as anywhere else.

use serde_json::{Value, json};

use crate::config::{NotifierConfig, NotifierKind, TelegramChat, TelegramConfig};
use crate::email::html_escape;
use crate::message::{MAX_DRIFTS_PER_OBJECT, Message, ObjectGroup, digest_lines, shorten};
use crate::template::Markup;
use crate::text::utf16_len;

/// Characters of a message's text (Telegram's limit is 4,096 after entities are parsed; the
/// HTML source is kept within it, which is never shorter).
pub const TELEGRAM_MAX_TEXT: usize = 4096;

/// The `sendMessage` body of `message` for `config`'s chat: `chat_id`, `text` (HTML: the
/// title in bold, then per object its drifts, values in `<code>`, each a whole line so that a
/// cut never leaves a tag open; at most [`TELEGRAM_MAX_TEXT`] characters, then how many objects
/// were left out), `parse_mode` `HTML`, `link_preview_options.is_disabled`, and
/// `message_thread_id` when set.
///
/// ```
/// use drift_model::{EventKind, Severity};
/// use drift_notify::{Message, TelegramChat, TelegramConfig, fixtures::{drift, event}};
/// let config = TelegramConfig { bot_token_env: "T".into(), chat_id: TelegramChat::Id(-100123), message_thread_id: None, api_url: "https://api.telegram.org".into() };
/// let m = Message::new("tg", vec![event(EventKind::Opened, drift(1, "shop", "web", Severity::Critical))], None);
/// let body = drift_notify::telegram_body(&m, &config);
/// assert_eq!(body["parse_mode"], "HTML");
/// assert!(body["text"].as_str().unwrap().starts_with("<b>1 drift opened in prod/shop (1 CRITICAL)</b>"));
/// ```
pub fn telegram_body(message: &Message, config: &TelegramConfig) -> Value {
    let mut lines = vec![format!("<b>{}</b>", html_escape(&shorten(&message.title(), 300)))];
    if message.is_summary() {
        for (label, value) in message.summary_lines() {
            lines.push(format!("<b>{}:</b> {}", html_escape(&label), html_escape(&shorten(&value, 300))));
        }
    }
    let (shown, hidden) = message.shown_groups();
    // Objects as blocks of lines; the blocks that do not fit are counted in the last line.
    let mut blocks: Vec<Vec<String>> = shown.iter().map(|g| group_lines(message, g)).collect();
    for d in message.digests() {
        let mut block = vec!["<b>Digest</b>".to_owned()];
        block.extend(digest_lines(d).iter().map(|(l, v)| format!("{}: {}", html_escape(l), html_escape(v))));
        blocks.push(block);
    }
    let mut text = lines.join("\n");
    let total = blocks.len() + hidden;
    let mut sent = 0;
    let reserve = 80;
    for block in &mut blocks {
        let mut part = String::new();
        for line in block.iter() {
            if utf16_len(&text) + utf16_len(&part) + utf16_len(line) + 2 > TELEGRAM_MAX_TEXT - reserve {
                break;
            }
            part.push('\n');
            part.push_str(line);
        }
        if part.is_empty() {
            break;
        }
        text.push('\n');
        text.push_str(&part);
        sent += 1;
    }
    if total > sent {
        text.push_str(&format!("\n\n… and {} more objects (the most severe are listed first)", total - sent));
    }
    let mut body = json!({
        "chat_id": match &config.chat_id {
            TelegramChat::Id(id) => json!(id),
            TelegramChat::Name(name) => json!(name),
        },
        "text": text,
        "parse_mode": "HTML",
        "link_preview_options": { "is_disabled": true },
    });
    if let Some(thread) = config.message_thread_id {
        body["message_thread_id"] = json!(thread);
    }
    body
}

fn group_lines(message: &Message, group: &ObjectGroup) -> Vec<String> {
    let repository = group.events.iter().find_map(|e| e.drift.as_ref()).map(|d| d.repository.as_str()).unwrap_or("");
    let mut lines = vec![format!(
        "\n<b>{}</b> · cluster {} · repository {}",
        html_escape(&shorten(&group.key.display(), 300)),
        html_escape(&shorten(&group.key.cluster, 100)),
        html_escape(&shorten(repository, 100))
    )];
    for e in group.events.iter().take(MAX_DRIFTS_PER_OBJECT) {
        let Some(v) = message.view(e) else { continue };
        lines.push(format!(
            "• <code>{}</code> <b>{}</b> {} {}",
            html_escape(&shorten(&v.path, 300)),
            v.severity,
            v.drift_type,
            v.verb
        ));
        let cluster = match &v.before {
            Some((before, sev)) => {
                format!("<code>{}</code> (was <code>{}</code>, {sev})", html_escape(&v.cluster), html_escape(before))
            }
            None => format!("<code>{}</code>", html_escape(&v.cluster)),
        };
        let mut facts = vec![format!("Git <code>{}</code> → cluster {cluster}", html_escape(&v.git))];
        facts.extend(v.who_when().map(|w| html_escape(&w)));
        facts.extend(v.resolution.map(|r| format!("resolution: {r}")));
        lines.push(format!("   {}", facts.join(" · ")));
        if let Some(l) = &v.learned {
            lines.push(format!("   <i>{}</i>", html_escape(l)));
        }
        if let Some(link) = &v.link {
            lines.push(format!(
                "   <a href=\"{}\">view drift {}</a>",
                html_escape(link.as_str()),
                e.drift_id().unwrap_or_default()
            ));
        }
    }
    if group.events.len() > MAX_DRIFTS_PER_OBJECT {
        lines.push(format!("   … and {} more drifts of this object", group.events.len() - MAX_DRIFTS_PER_OBJECT));
    }
    lines
}

/// `{api_url}/bot{token}/sendMessage`: the token is in the path, which errors never show.
pub(crate) fn send_message_url(api_url: &str, token: &str) -> String {
    format!("{}/bot{token}/sendMessage", api_url.trim_end_matches('/'))
}

pub(crate) fn render(config: &NotifierConfig, message: &Message) -> Option<Value> {
    let NotifierKind::Telegram(t) = &config.kind else { return None };
    let mut body = telegram_body(message, t);
    let fits = |text: &str| utf16_len(text) <= TELEGRAM_MAX_TEXT && html_problem(text).is_none();
    if let Some(text) = crate::template::output(config.name(), config.template.as_deref(), message, Markup::Html, fits)
    {
        body["text"] = json!(text);
    }
    Some(body)
}

/// The tags Telegram's HTML parse mode knows.
const TELEGRAM_TAGS: [&str; 16] = [
    "b",
    "strong",
    "i",
    "em",
    "u",
    "ins",
    "s",
    "strike",
    "del",
    "span",
    "tg-spoiler",
    "a",
    "code",
    "pre",
    "blockquote",
    "tg-emoji",
];

/// Why Telegram would refuse `html` (a tag it does not know, or tags that do not nest), or
/// `None`. A template's output is checked with it, at load time and before sending.
pub(crate) fn html_problem(html: &str) -> Option<String> {
    let mut open: Vec<&str> = Vec::new();
    for raw in html.split('<').skip(1) {
        let Some((tag, _)) = raw.split_once('>') else { return Some("a '<' that starts no tag (write &lt;)".into()) };
        let closing = tag.starts_with('/');
        let name = tag.trim_start_matches('/').split([' ', '\n']).next().unwrap_or_default();
        if !TELEGRAM_TAGS.contains(&name) {
            return Some(format!("<{name}> is not a tag of Telegram's HTML"));
        }
        if closing {
            if open.pop() != Some(name) {
                return Some(format!("</{name}> closes no open <{name}>"));
            }
        } else {
            open.push(name);
        }
    }
    open.last().map(|t| format!("<{t}> is never closed"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{drift, event};
    use drift_model::{DriftEvent, EventKind, Severity};

    fn config() -> TelegramConfig {
        TelegramConfig {
            bot_token_env: "T".into(),
            chat_id: TelegramChat::Name("@drift".into()),
            message_thread_id: Some(7),
            api_url: "https://api.telegram.org".into(),
        }
    }

    /// The tags of an HTML text, balanced: every one opened is closed, in order.
    fn balanced(text: &str) -> bool {
        let mut stack = Vec::new();
        for tag in text.split('<').skip(1).map(|t| t.split_once('>').map_or(t, |(tag, _)| tag)) {
            let name = tag.trim_start_matches('/').split(' ').next().unwrap_or_default().to_owned();
            if tag.starts_with('/') {
                if stack.pop() != Some(name) {
                    return false;
                }
            } else {
                stack.push(name);
            }
        }
        stack.is_empty()
    }

    #[test]
    fn ten_thousand_events_fit_telegrams_limit_with_every_tag_closed() {
        let events: Vec<DriftEvent> = (0..10_000)
            .map(|i| event(EventKind::Opened, drift(i, &format!("ns-{}", i % 50), &format!("app-{i}"), Severity::Low)))
            .collect();
        let body = telegram_body(&Message::new("tg", events, None), &config());
        let text = body["text"].as_str().unwrap();
        assert!(utf16_len(text) <= TELEGRAM_MAX_TEXT, "{}", utf16_len(text));
        assert!(balanced(text));
        assert!(text.ends_with("more objects (the most severe are listed first)"), "{text}");
        assert_eq!((body["chat_id"].as_str(), body["message_thread_id"].as_i64()), (Some("@drift"), Some(7)));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2_000))]
        /// Whatever a value holds (sometimes 100 KB), the text stays within 4,096 characters,
        /// has exactly the tags of a message with a harmless value, and every `&` starts an entity.
        #[test]
        fn no_value_creates_a_tag_or_breaks_the_limit(
            value in "[<>&\"'/a-z \\n\\u{1F600}]{0,60}",
            big in proptest::bool::weighted(0.05),
        ) {
            let value = if big { value.repeat(100_000 / value.len().max(1)) } else { value };
            let hostile = |v: &str| {
                let mut d = drift(1, v, v, Severity::High);
                d.cluster_value = Some(serde_json::json!(v));
                d.changed_by = Some(v.to_owned());
                d.path = v.to_owned();
                telegram_body(&Message::new("tg", vec![event(EventKind::Opened, d)], None), &config())["text"].as_str().unwrap().to_owned()
            };
            let text = hostile(&value);
            proptest::prop_assert!(utf16_len(&text) <= TELEGRAM_MAX_TEXT);
            let tags = |t: &str| t.split('<').skip(1).map(|x| x.split_once('>').map_or(x, |(tag, _)| tag).to_owned()).collect::<Vec<_>>();
            let (a, b) = (tags(&text), tags(&hostile("x")));
            proptest::prop_assert!(big || a == b, "a value changed the tags");
            proptest::prop_assert!(a.iter().all(|t| b.contains(t)), "a value created a tag");
            let bare_amp = text.match_indices('&').any(|(i, _)| {
                !["&amp;", "&lt;", "&gt;", "&quot;", "&#39;"].iter().any(|e| text[i..].starts_with(e))
            });
            proptest::prop_assert!(!bare_amp);
        }
    }
}
