//! `type: teams`: a Microsoft Teams message through a Workflows webhook ("Send webhook alerts
//! to a channel") or a legacy incoming webhook: `type: message` with one attachment of
//! content type `application/vnd.microsoft.card.adaptive` holding an Adaptive Card 1.4.
//!
//! Every text from a drift is a `TextRun` of a `RichTextBlock`, which Adaptive Cards never read
//! as Markdown: a value cannot format, link or mention anything, and needs no escaping.

use serde_json::{Value, json};

use crate::config::{NotifierConfig, NotifierKind};
use crate::message::{MAX_DRIFTS_PER_OBJECT, Message, ObjectGroup, digest_lines, shorten};
use crate::push::{Urgency, urgency};
use crate::template::Markup;

/// Bytes of a whole request body (Teams refuses messages over about 28 KB; the card is kept
/// under this, and the objects that do not fit are counted).
pub const TEAMS_MAX_BYTES: usize = 24_000;

fn run(text: &str) -> Value {
    json!({ "type": "TextRun", "text": text })
}

fn mono(text: &str) -> Value {
    json!({ "type": "TextRun", "text": text, "fontType": "Monospace" })
}

fn bold(text: &str) -> Value {
    json!({ "type": "TextRun", "text": text, "weight": "Bolder" })
}

fn rich(inlines: Vec<Value>) -> Value {
    json!({ "type": "RichTextBlock", "inlines": inlines })
}

/// The Teams body of `message`: an Adaptive Card with the title (large, bold, coloured
/// `Attention` while a CRITICAL or HIGH drift is open, `Good` for resolutions only), the
/// counts of a summary as a `FactSet`, a `Container` per object (its name, then each drift:
/// path, severity, type, event, Git and cluster values in monospace, who and when, a link), the
/// digests as `FactSet`s, and a line for the objects that did not fit [`TEAMS_MAX_BYTES`].
///
/// ```
/// use drift_model::{EventKind, Severity};
/// use drift_notify::{Message, fixtures::{drift, event}};
/// let m = Message::new("teams", vec![event(EventKind::Opened, drift(1, "shop", "web", Severity::Critical))], None);
/// let body = drift_notify::teams_body(&m);
/// assert_eq!(body["type"], "message");
/// let card = &body["attachments"][0];
/// assert_eq!(card["contentType"], "application/vnd.microsoft.card.adaptive");
/// assert_eq!(card["content"]["type"], "AdaptiveCard");
/// ```
pub fn teams_body(message: &Message) -> Value {
    let colour = match urgency(message) {
        Urgency::Open(s) if s >= drift_model::drift::Severity::High => "Attention",
        Urgency::Open(_) => "Warning",
        Urgency::Resolved => "Good",
        Urgency::Digest => "Default",
    };
    let mut body = vec![rich(vec![json!({
        "type": "TextRun", "text": shorten(&message.title(), 300), "size": "Large", "weight": "Bolder", "color": colour,
    })])];
    if message.is_summary() {
        let facts: Vec<Value> = message
            .summary_lines()
            .into_iter()
            .map(|(title, value)| json!({ "title": title, "value": shorten(&value, 500) }))
            .collect();
        body.push(json!({ "type": "FactSet", "facts": facts }));
    }
    for d in message.digests() {
        body.push(rich(vec![bold("Digest")]));
        let facts: Vec<Value> =
            digest_lines(d).into_iter().map(|(title, value)| json!({ "title": title, "value": value })).collect();
        body.push(json!({ "type": "FactSet", "facts": facts }));
    }
    let (shown, hidden) = message.shown_groups();
    let card = |body: &[Value]| {
        json!({
            "type": "message",
            "attachments": [{
                "contentType": "application/vnd.microsoft.card.adaptive",
                "contentUrl": null,
                "content": {
                    "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                    "type": "AdaptiveCard",
                    "version": "1.4",
                    "msteams": { "width": "Full" },
                    "body": body,
                },
            }],
        })
    };
    let reserve = 300;
    let mut size = card(&body).to_string().len();
    let mut left_out = hidden;
    for (i, group) in shown.iter().enumerate() {
        let container = group_container(message, group);
        let n = container.to_string().len() + 1;
        if size + n > TEAMS_MAX_BYTES - reserve {
            left_out += shown.len() - i;
            break;
        }
        size += n;
        body.push(container);
    }
    if left_out > 0 {
        body.push(rich(vec![run(&format!("… and {left_out} more objects (the most severe are listed first)"))]));
    }
    body.push(json!({
        "type": "TextBlock", "isSubtle": true, "size": "Small", "wrap": true,
        "text": format!("drift · message {}", message.id()),
    }));
    card(&body)
}

fn group_container(message: &Message, group: &ObjectGroup) -> Value {
    let repository = group.events.iter().find_map(|e| e.drift.as_ref()).map(|d| d.repository.as_str()).unwrap_or("");
    let mut items = vec![rich(vec![
        bold(&shorten(&group.key.display(), 300)),
        run(&format!(" · cluster {} · repository {}", shorten(&group.key.cluster, 100), shorten(repository, 100))),
    ])];
    for e in group.events.iter().take(MAX_DRIFTS_PER_OBJECT) {
        let Some(v) = message.view(e) else { continue };
        items.push(rich(vec![
            run("• "),
            mono(&shorten(&v.path, 300)),
            run(" "),
            bold(v.severity.as_str()),
            run(&format!(" {} {}", v.drift_type, v.verb)),
        ]));
        let mut values = vec![run("Git "), mono(&v.git), run(" → cluster "), mono(&v.cluster)];
        if let Some((before, sev)) = &v.before {
            values.extend([run(" (was "), mono(before), run(&format!(", {sev})"))]);
        }
        items.push(rich(values));
        let mut facts: Vec<String> = v.who_when().map(|w| shorten(&w, 300)).into_iter().collect();
        facts.push(v.classification.to_owned());
        facts.extend(v.resolution.map(|r| format!("resolution: {r}")));
        facts.extend(v.learned.clone());
        let mut line = vec![run(&facts.join(" · "))];
        if let Some(link) = &v.link {
            line.push(run(" · "));
            line.push(json!({
                "type": "TextRun",
                "text": format!("view drift {}", e.drift_id().unwrap_or_default()),
                "selectAction": { "type": "Action.OpenUrl", "url": link.as_str() },
            }));
        }
        items.push(rich(line));
    }
    if group.events.len() > MAX_DRIFTS_PER_OBJECT {
        items.push(rich(vec![run(&format!(
            "… and {} more drifts of this object",
            group.events.len() - MAX_DRIFTS_PER_OBJECT
        ))]));
    }
    json!({ "type": "Container", "separator": true, "items": items })
}

pub(crate) fn render(config: &NotifierConfig, message: &Message) -> Option<Value> {
    if !matches!(config.kind, NotifierKind::Teams(_)) {
        return None;
    }
    let mut body = teams_body(message);
    let fits = |t: &str| t.len() <= TEAMS_MAX_BYTES - 2000;
    // A template's text is one TextRun: shown as written, never read as Markdown.
    if let Some(text) = crate::template::output(config.name(), config.template.as_deref(), message, Markup::Plain, fits)
    {
        body["attachments"][0]["content"]["body"] = json!([
            rich(vec![run(&text)]),
            { "type": "TextBlock", "isSubtle": true, "size": "Small", "wrap": true, "text": format!("drift · message {}", message.id()) },
        ]);
    }
    Some(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{drift, event};
    use drift_model::{DriftEvent, EventKind, Severity};

    #[test]
    fn ten_thousand_events_fit_teams_limit() {
        let events: Vec<DriftEvent> = (0..10_000)
            .map(|i| {
                let mut d = drift(i, &format!("ns-{}", i % 50), &format!("app-{}", i % 3000), Severity::Low);
                d.cluster_value = Some(json!("y".repeat(300)));
                event(EventKind::Opened, d)
            })
            .collect();
        let body = teams_body(&Message::new("teams", events, None));
        let bytes = body.to_string().len();
        assert!(bytes <= TEAMS_MAX_BYTES, "{bytes}");
        let items = body["attachments"][0]["content"]["body"].as_array().unwrap();
        assert!(items.iter().any(|i| i["inlines"][0]["text"].as_str().is_some_and(|t| t.contains("more objects"))));
    }

    #[test]
    fn values_are_text_runs_never_markdown() {
        let mut d = drift(1, "shop", "web", Severity::High);
        d.cluster_value = Some(json!("**x** [click](https://evil.example) <at>all</at>"));
        let body = teams_body(&Message::new("teams", vec![event(EventKind::Opened, d)], None));
        let text = body.to_string();
        assert!(
            text.contains(
                r#"{"fontType":"Monospace","text":"**x** [click](https://evil.example) <at>all</at>","type":"TextRun"}"#
            ),
            "{text}"
        );
        // The only TextBlock (the one element that reads Markdown) is drift's own footer.
        let blocks: Vec<&Value> = body["attachments"][0]["content"]["body"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == "TextBlock")
            .collect();
        assert_eq!(blocks.len(), 1);
        assert!(blocks[0]["text"].as_str().unwrap().starts_with("drift · message "));
    }
}
