//! The plain-text rendering of a message: the email's text part and the `text` of a Slack
//! message (which Mattermost and others show instead of the blocks).

use std::fmt::Write;

use crate::message::{MAX_DRIFTS_PER_OBJECT, Message, ObjectGroup, digest_lines};

/// The message as plain text, bounded: the title, the counts when it is a summary, the first
/// objects with their first drifts, the digests, and the message id.
///
/// ```
/// use drift_model::{EventKind, Severity};
/// use drift_notify::{Message, fixtures::{drift, event}};
/// let m = Message::new("ops", vec![event(EventKind::Opened, drift(1, "shop", "web", Severity::Critical))], None);
/// let text = drift_notify::plain_text(&m);
/// assert!(text.starts_with("1 drift opened in prod/shop (1 CRITICAL)\n"));
/// assert!(text.contains("Git: 3\n"));
/// ```
pub fn plain_text(message: &Message) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", message.title());
    if message.is_summary() {
        let _ = writeln!(out, "\nSummary");
        for (label, value) in message.summary_lines() {
            let _ = writeln!(out, "  {label}: {value}");
        }
    }
    let (shown, hidden) = message.shown_groups();
    for group in shown {
        out.push('\n');
        group_text(message, group, &mut out);
    }
    if hidden > 0 {
        let _ = writeln!(out, "\n... and {hidden} more objects (the most severe are listed first)");
    }
    for d in message.digests() {
        let _ = writeln!(out, "\nDigest");
        for (label, value) in digest_lines(d) {
            let _ = writeln!(out, "  {label}: {value}");
        }
    }
    let _ = writeln!(out, "\nMessage {} of notifier {}.", message.id(), message.notifier());
    out
}

fn group_text(message: &Message, group: &ObjectGroup, out: &mut String) {
    let repository = group.events.iter().find_map(|e| e.drift.as_ref()).map(|d| d.repository.as_str()).unwrap_or("");
    let _ = writeln!(out, "{} (cluster {}, repository {repository})", group.key.display(), group.key.cluster);
    for e in group.events.iter().take(MAX_DRIFTS_PER_OBJECT) {
        let Some(v) = message.view(e) else { continue };
        let _ = writeln!(out, "  - {}: {} {} {}", v.path, v.severity, v.drift_type, v.verb);
        let _ = writeln!(out, "    Git: {}", v.git);
        match &v.before {
            Some((before, sev)) => {
                let _ = writeln!(out, "    cluster: {} (was {before}, {sev})", v.cluster);
            }
            None => {
                let _ = writeln!(out, "    cluster: {}", v.cluster);
            }
        }
        let mut facts: Vec<String> = v.who_when().into_iter().collect();
        facts.push(v.classification.to_owned());
        facts.extend(v.resolution.map(|r| format!("resolution: {r}")));
        let _ = writeln!(out, "    {}", facts.join("; "));
        if let Some(l) = &v.learned {
            let _ = writeln!(out, "    {l}");
        }
        if let Some(link) = &v.link {
            let _ = writeln!(out, "    {link}");
        }
    }
    if group.events.len() > MAX_DRIFTS_PER_OBJECT {
        let _ = writeln!(out, "  ... and {} more drifts of this object", group.events.len() - MAX_DRIFTS_PER_OBJECT);
    }
}

/// `text` cut to at most `max` bytes at a character boundary, ending with `…` when cut (ntfy
/// counts its message limit in bytes).
pub(crate) fn fit_bytes(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Length in UTF-16 code units: what Discord, Telegram and Teams count (never less than the
/// characters a user sees).
pub(crate) fn utf16_len(text: &str) -> usize {
    text.encode_utf16().count()
}

/// `text` cut to at most `max` UTF-16 code units at a character boundary, ending with `…`.
pub(crate) fn fit_utf16(text: &str, max: usize) -> String {
    if utf16_len(text) <= max {
        return text.to_owned();
    }
    let mut out = String::new();
    let mut len = 0;
    for c in text.chars() {
        if len + c.len_utf16() > max.saturating_sub(1) {
            break;
        }
        len += c.len_utf16();
        out.push(c);
    }
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn cut_text_stays_within_its_limit(text in "\\PC{0,300}", max in 1usize..200) {
            let b = fit_bytes(&text, max.max(3));
            proptest::prop_assert!(b.len() <= max.max(3));
            let u = fit_utf16(&text, max.max(2));
            proptest::prop_assert!(utf16_len(&u) <= max.max(2));
            if text.len() <= max.max(3) { proptest::prop_assert_eq!(b, text.clone()); }
        }
    }
}
