//! `type: discord`: a channel webhook's "execute webhook" body: `content` (the title), up to 10
//! `embeds` (one per object, coloured by severity, a digest as fields), no mention allowed.

use drift_model::drift::Severity;
use serde_json::{Value, json};

use crate::config::{NotifierConfig, NotifierKind};
use crate::message::{MAX_DRIFTS_PER_OBJECT, Message, ObjectGroup, digest_lines};
use crate::push::{Urgency, urgency};
use crate::template::Markup;
use crate::text::{fit_utf16, utf16_len};

/// Characters of `content` (Discord's limit: 2,000).
pub const DISCORD_MAX_CONTENT: usize = 2000;
/// Embeds in one message (Discord's limit: 10).
pub const DISCORD_MAX_EMBEDS: usize = 10;
/// Characters of all embeds together: titles, descriptions, field names and values, footers
/// (Discord's limit: 6,000).
pub const DISCORD_MAX_EMBED_CHARS: usize = 6000;
const TITLE_MAX: usize = 256;
const DESCRIPTION_MAX: usize = 4096;
const FIELD_NAME_MAX: usize = 256;
const FIELD_VALUE_MAX: usize = 1024;
const FOOTER_MAX: usize = 2048;

/// Discord markdown escaping: a backslash before every character that formats, quotes, links
/// or mentions (`\ * _ ~ ` | > # [ ] ( ) < @ :`), so text from the cluster shows as written.
///
/// ```
/// assert_eq!(drift_notify::discord_escape("**@everyone** <@1>"), "\\*\\*\\@everyone\\*\\* \\<\\@1>");
/// ```
pub fn discord_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\\' | '*' | '_' | '~' | '`' | '|' | '#' | '[' | ']' | '(' | ')' | '<' | '@' | ':')
            || (c == '>' && out.is_empty())
        {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A value in an inline code span, where Discord parses no markdown, mention or link: a
/// backquote would end the span, so it becomes a quote; line breaks become spaces.
fn code(value: &str) -> String {
    let v: String = value
        .chars()
        .map(|c| {
            if c == '`' {
                '\''
            } else if c.is_control() {
                ' '
            } else {
                c
            }
        })
        .collect();
    format!("`{}`", if v.trim().is_empty() { "\u{a0}".to_owned() } else { v })
}

fn colour(message: &Message) -> u32 {
    match urgency(message) {
        Urgency::Open(Severity::Critical) => 0xD32F2F,
        Urgency::Open(Severity::High) => 0xF57C00,
        Urgency::Open(Severity::Medium) => 0xFBC02D,
        Urgency::Open(Severity::Low) => 0x1976D2,
        Urgency::Resolved => 0x388E3C,
        Urgency::Digest => 0x607D8B,
    }
}

/// The characters of an embed that count toward Discord's 6,000.
fn embed_chars(embed: &Value) -> usize {
    let s = |v: &Value| v.as_str().map_or(0, utf16_len);
    s(&embed["title"])
        + s(&embed["description"])
        + s(&embed["footer"]["text"])
        + embed["fields"].as_array().into_iter().flatten().map(|f| s(&f["name"]) + s(&f["value"])).sum::<usize>()
}

/// The Discord webhook body of `message`: `content` (the title, bold, and how many objects
/// did not fit), `embeds` (one per object, most severe first, while they fit Discord's limits;
/// the digests as fields), `allowed_mentions` with nothing allowed (no value can ping anyone),
/// `username` `drift`.
///
/// ```
/// use drift_model::{EventKind, Severity};
/// use drift_notify::{Message, fixtures::{drift, event}};
/// let m = Message::new("chat", vec![event(EventKind::Opened, drift(1, "shop", "web", Severity::Critical))], None);
/// let body = drift_notify::discord_body(&m);
/// assert_eq!(body["embeds"][0]["title"], "Deployment shop/web");
/// assert_eq!(body["allowed_mentions"]["parse"], serde_json::json!([]));
/// ```
pub fn discord_body(message: &Message) -> Value {
    let colour = colour(message);
    let mut embeds: Vec<Value> = Vec::new();
    let mut used = 0;
    let (shown, mut hidden) = message.shown_groups();
    let digests: Vec<Value> = message
        .digests()
        .iter()
        .map(|d| {
            let fields: Vec<Value> = digest_lines(d)
                .into_iter()
                .take(25)
                .map(|(label, value)| {
                    json!({ "name": fit_utf16(&label, FIELD_NAME_MAX), "value": fit_utf16(&discord_escape(&value), FIELD_VALUE_MAX) })
                })
                .collect();
            json!({ "title": "Digest", "color": colour, "fields": fields })
        })
        .collect();
    let digest_chars: usize = digests.iter().map(embed_chars).sum();
    let room = DISCORD_MAX_EMBEDS.saturating_sub(digests.len());
    for (i, group) in shown.iter().enumerate() {
        let embed = group_embed(message, group, colour);
        let n = embed_chars(&embed);
        if embeds.len() >= room || used + n + digest_chars > DISCORD_MAX_EMBED_CHARS {
            hidden += shown.len() - i;
            break;
        }
        used += n;
        embeds.push(embed);
    }
    embeds.extend(digests);
    let mut content = format!("**{}**", discord_escape(&message.title()));
    if message.is_summary() {
        for (label, value) in message.summary_lines() {
            content.push_str(&format!("\n{label}: {}", discord_escape(&value)));
        }
    }
    if hidden > 0 {
        content.push_str(&format!("\n… and {hidden} more objects (the most severe are listed first)"));
    }
    json!({
        "username": "drift",
        "content": fit_content(&content),
        "embeds": embeds,
        "allowed_mentions": { "parse": [] },
    })
}

/// `content` within 2,000 characters, never ending in a lone backslash that would escape the
/// ellipsis.
fn fit_content(content: &str) -> String {
    let out = fit_utf16(content, DISCORD_MAX_CONTENT);
    if out.len() == content.len() {
        return out;
    }
    let body = out.strip_suffix('…').unwrap_or(&out);
    let trailing = body.chars().rev().take_while(|c| *c == '\\').count();
    format!("{}…", if trailing % 2 == 1 { &body[..body.len() - 1] } else { body })
}

fn group_embed(message: &Message, group: &ObjectGroup, colour: u32) -> Value {
    let repository = group.events.iter().find_map(|e| e.drift.as_ref()).map(|d| d.repository.as_str()).unwrap_or("");
    let mut lines = Vec::new();
    for e in group.events.iter().take(MAX_DRIFTS_PER_OBJECT) {
        let Some(v) = message.view(e) else { continue };
        let mut drift =
            vec![format!("• {} **{}** {} {}", code(&v.path), v.severity, discord_escape(v.drift_type), v.verb)];
        let cluster = match &v.before {
            Some((before, sev)) => format!("{} (was {}, {sev})", code(&v.cluster), code(before)),
            None => code(&v.cluster),
        };
        let mut facts = vec![format!("Git {} → cluster {cluster}", code(&v.git))];
        facts.extend(v.who_when().map(|w| discord_escape(&w)));
        facts.extend(v.resolution.map(|r| format!("resolution: {r}")));
        drift.push(format!("  {}", facts.join(" · ")));
        if let Some(l) = &v.learned {
            drift.push(format!("  _{}_", discord_escape(l)));
        }
        if let Some(link) = &v.link {
            drift.push(format!("  [view drift {}](<{link}>)", e.drift_id().unwrap_or_default()));
        }
        lines.push(drift.join("\n"));
    }
    if group.events.len() > MAX_DRIFTS_PER_OBJECT {
        lines.push(format!("… and {} more drifts of this object", group.events.len() - MAX_DRIFTS_PER_OBJECT));
    }
    // Whole drifts only: a cut in the middle of one could leave a code span open.
    let mut description = String::new();
    for line in lines {
        if utf16_len(&description) + utf16_len(&line) + 1 > DESCRIPTION_MAX - 2 {
            description.push_str("\n…");
            break;
        }
        if !description.is_empty() {
            description.push('\n');
        }
        description.push_str(&line);
    }
    json!({
        "title": fit_utf16(&group.key.display(), TITLE_MAX),
        "description": description,
        "color": colour,
        "footer": { "text": fit_utf16(&format!("cluster {} · repository {repository}", group.key.cluster), FOOTER_MAX) },
    })
}

pub(crate) fn render(config: &NotifierConfig, message: &Message) -> Option<Value> {
    if !matches!(config.kind, NotifierKind::Discord(_)) {
        return None;
    }
    let fits = |t: &str| utf16_len(t) <= DISCORD_MAX_CONTENT;
    Some(match crate::template::output(config.name(), config.template.as_deref(), message, Markup::Discord, fits) {
        Some(content) => json!({ "username": "drift", "content": content, "allowed_mentions": { "parse": [] } }),
        None => discord_body(message),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{digest_event, drift, event};
    use drift_model::{DriftEvent, EventKind};

    fn within_limits(body: &Value) {
        assert!(utf16_len(body["content"].as_str().unwrap()) <= DISCORD_MAX_CONTENT);
        let embeds = body["embeds"].as_array().unwrap();
        assert!(embeds.len() <= DISCORD_MAX_EMBEDS);
        assert!(embeds.iter().map(embed_chars).sum::<usize>() <= DISCORD_MAX_EMBED_CHARS);
        for e in embeds {
            assert!(e["title"].as_str().map_or(0, utf16_len) <= TITLE_MAX);
            assert!(e["description"].as_str().map_or(0, utf16_len) <= DESCRIPTION_MAX);
            assert!(e["fields"].as_array().map_or(0, Vec::len) <= 25);
        }
    }

    #[test]
    fn ten_thousand_events_stay_within_discords_limits() {
        let events: Vec<DriftEvent> = (0..10_000)
            .map(|i| {
                let mut d = drift(i, &format!("ns-{}", i % 50), &format!("app-{}", i % 3000), Severity::Low);
                d.cluster_value = Some(json!("x".repeat(500)));
                event(EventKind::Opened, d)
            })
            .chain([digest_event("chat")])
            .collect();
        let body = discord_body(&Message::new("chat", events, None));
        within_limits(&body);
        assert!(body["content"].as_str().unwrap().contains("more objects"), "{}", body["content"]);
    }

    #[test]
    fn values_cannot_mention_format_or_link() {
        let mut d = drift(1, "shop", "web", Severity::High);
        d.cluster_value = Some(json!("@everyone `**bold**` [x](https://evil.example)"));
        d.changed_by = Some("<@123> **me** https://evil.example".into());
        let body = discord_body(&Message::new("chat", vec![event(EventKind::Opened, d)], None));
        let text = body["embeds"][0]["description"].as_str().unwrap();
        assert!(text.contains("`@everyone '**bold**' [x](https://evil.example)`"), "{text}");
        assert!(text.contains("changed by \\<\\@123> \\*\\*me\\*\\* https\\://evil.example"), "{text}");
        assert_eq!(body["allowed_mentions"], json!({ "parse": [] }));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2_000))]
        /// Whatever a value holds, every code span closes on its line, and outside code spans
        /// no markdown or mention character is left unescaped.
        #[test]
        fn no_value_escapes_its_code_span_or_its_escaping(value in "[<>@*_~`|#\\[\\]():\\\\\\n a-z]{0,60}") {
            let mut d = drift(1, "shop", "web", Severity::High);
            d.cluster_value = Some(json!(value));
            d.changed_by = Some(value.clone());
            let body = discord_body(&Message::new("chat", vec![event(EventKind::Opened, d)], None));
            within_limits(&body);
            let text = body["embeds"][0]["description"].as_str().unwrap();
            for line in text.lines() {
                // Discord's reading: a backslash escapes the next character outside code spans;
                // inside one nothing is special but the closing backquote.
                let (mut in_code, mut escaped) = (false, false);
                for c in line.chars() {
                    if in_code {
                        in_code = c != '`';
                    } else if escaped {
                        escaped = false;
                    } else if c == '\\' {
                        escaped = true;
                    } else if c == '`' {
                        in_code = true;
                    } else {
                        proptest::prop_assert!(!matches!(c, '@' | '<' | '~' | '|' | '_'), "unescaped {:?} in {}", c, line);
                    }
                }
                proptest::prop_assert!(!in_code, "an open code span: {}", line);
            }
        }
    }
}
