//! `type: email`: SMTP with STARTTLS or implicit TLS (rustls), authentication from the
//! environment, a plain-text and an HTML part.

use std::fmt::Write;
use std::time::Duration;

use async_trait::async_trait;
use lettre::message::{Mailbox, MultiPart};
use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};

use crate::config::{EmailConfig, NotifierConfig, SmtpTls};
use crate::message::{MAX_DRIFTS_PER_OBJECT, Message, ObjectGroup, digest_lines, shorten};
use crate::notifier::{Notifier, SendError};
use crate::redact::Secret;
use crate::template::Markup;
use crate::text::plain_text;

/// How long one SMTP exchange may take.
pub const SMTP_TIMEOUT: Duration = Duration::from_secs(30);

/// An email's content, before addressing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmailContent {
    /// `[drift] <title>`, with no line break ([`header_text`]).
    pub subject: String,
    /// The plain-text part ([`plain_text`]).
    pub text: String,
    /// The HTML part (every value escaped).
    pub html: String,
}

/// Escapes text for HTML content and attribute values.
pub fn html_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A value made fit for a header field: every line break (CR, LF, NEL, U+2028, U+2029) and
/// every other control character becomes a space, so that no value ends the field or starts
/// another header.
///
/// ```
/// assert_eq!(drift_notify::header_text("a\r\nBcc: x@evil\u{2028}b"), "a  Bcc: x@evil b");
/// ```
pub fn header_text(text: &str) -> String {
    text.chars().map(|c| if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') { ' ' } else { c }).collect()
}

/// The email of `message`: the same content as the Slack message, bounded the same way.
///
/// ```
/// use drift_model::{EventKind, Severity};
/// use drift_notify::{Message, fixtures::{drift, event}};
/// let m = Message::new("mail", vec![event(EventKind::Opened, drift(1, "shop", "web", Severity::Critical))], None);
/// let email = drift_notify::email_content(&m);
/// assert_eq!(email.subject, "[drift] 1 drift opened in prod/shop (1 CRITICAL)");
/// assert!(email.html.contains("<h1>"));
/// ```
pub fn email_content(message: &Message) -> EmailContent {
    let title = message.title();
    let mut html = String::new();
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{t}</title></head>\n\
         <body style=\"font-family: sans-serif\">\n<h1>{t}</h1>\n",
        t = html_escape(&title)
    );
    if message.is_summary() {
        labelled_table(&mut html, "Summary", &message.summary_lines());
    }
    let (shown, hidden) = message.shown_groups();
    for group in shown {
        group_html(message, group, &mut html);
    }
    if hidden > 0 {
        let _ = writeln!(html, "<p>… and {hidden} more objects (the most severe are listed first).</p>");
    }
    for d in message.digests() {
        labelled_table(&mut html, "Digest", &digest_lines(d));
    }
    let _ = write!(
        html,
        "<p style=\"color: #666\">Message {} of notifier {}.</p>\n</body></html>\n",
        html_escape(message.id()),
        html_escape(message.notifier())
    );
    EmailContent { subject: shorten(&header_text(&format!("[drift] {title}")), 200), text: plain_text(message), html }
}

/// A heading and a table of (label, value) rows, escaped.
fn labelled_table(html: &mut String, heading: &str, rows: &[(String, String)]) {
    let _ = writeln!(html, "<h2>{}</h2>\n<table>", html_escape(heading));
    for (label, value) in rows {
        let _ =
            writeln!(html, "<tr><th align=\"left\">{}</th><td>{}</td></tr>", html_escape(label), html_escape(value));
    }
    html.push_str("</table>\n");
}

fn group_html(message: &Message, group: &ObjectGroup, html: &mut String) {
    let repository = group.events.iter().find_map(|e| e.drift.as_ref()).map(|d| d.repository.as_str()).unwrap_or("");
    let _ = writeln!(
        html,
        "<h2>{}</h2>\n<p>cluster {}, repository {}</p>\n<table border=\"1\" cellpadding=\"4\" style=\"border-collapse: collapse\">\n\
         <tr><th>Field</th><th>Severity</th><th>Type</th><th>Event</th><th>Git</th><th>Cluster</th><th>Changed</th><th>Link</th></tr>",
        html_escape(&group.key.display()),
        html_escape(&group.key.cluster),
        html_escape(repository)
    );
    for e in group.events.iter().take(MAX_DRIFTS_PER_OBJECT) {
        let Some(v) = message.view(e) else { continue };
        let cluster = match &v.before {
            Some((before, sev)) => {
                format!("<code>{}</code> (was <code>{}</code>, {sev})", html_escape(&v.cluster), html_escape(before))
            }
            None => format!("<code>{}</code>", html_escape(&v.cluster)),
        };
        let mut changed = vec![v.who_when().unwrap_or_default(), v.classification.to_owned()];
        changed.extend(v.resolution.map(|r| format!("resolution: {r}")));
        changed.extend(v.learned.clone());
        let changed: Vec<String> = changed.iter().filter(|s| !s.is_empty()).map(|s| html_escape(s)).collect();
        let link = v
            .link
            .as_ref()
            .map(|l| format!("<a href=\"{}\">drift {}</a>", html_escape(l.as_str()), e.drift_id().unwrap_or_default()))
            .unwrap_or_default();
        let _ = writeln!(
            html,
            "<tr><td><code>{}</code></td><td><b>{}</b></td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{cluster}</td><td>{}</td><td>{link}</td></tr>",
            html_escape(&v.path),
            v.severity,
            v.drift_type,
            v.verb,
            html_escape(&v.git),
            changed.join("<br>"),
        );
    }
    html.push_str("</table>\n");
    if group.events.len() > MAX_DRIFTS_PER_OBJECT {
        let _ =
            writeln!(html, "<p>… and {} more drifts of this object.</p>", group.events.len() - MAX_DRIFTS_PER_OBJECT);
    }
}

/// Sends emails through an SMTP relay.
pub struct EmailNotifier {
    config: NotifierConfig,
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    to: Vec<Mailbox>,
    relay: String,
}

impl std::fmt::Debug for EmailNotifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmailNotifier")
            .field("name", &self.config.name())
            .field("relay", &self.relay)
            .finish_non_exhaustive()
    }
}

impl EmailNotifier {
    /// A notifier for `email`, authenticating with `username` and `password`; reads `ca_file`.
    pub(crate) fn new(
        config: NotifierConfig,
        email: &EmailConfig,
        username: Secret,
        password: Secret,
    ) -> drift_model::Result<Self> {
        let name = config.name().to_owned();
        let bad =
            |what: &str, e: &dyn std::fmt::Display| drift_model::Error::config(format!("notifier {name}: {what}: {e}"));
        let mut tls = TlsParameters::builder(email.host.clone());
        if let Some(ca) = &email.ca_file {
            let pem = std::fs::read(ca).map_err(|e| bad(&format!("cannot read ca_file {}", ca.display()), &e))?;
            let cert = Certificate::from_pem(&pem).map_err(|e| bad(&format!("ca_file {}", ca.display()), &e))?;
            tls = tls.add_root_certificate(cert);
        }
        let tls = tls.build().map_err(|e| bad("TLS", &e))?;
        let port = email.port();
        let transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(email.host.clone())
            .port(port)
            .tls(match email.tls {
                SmtpTls::Starttls => Tls::Required(tls),
                SmtpTls::Implicit => Tls::Wrapper(tls),
            })
            .credentials(Credentials::new(username.expose().to_owned(), password.expose().to_owned()))
            .authentication(vec![Mechanism::Plain, Mechanism::Login])
            .timeout(Some(SMTP_TIMEOUT))
            .build();
        let from = email.from.parse::<Mailbox>().map_err(|e| bad("from", &e))?;
        let to = email.to.iter().map(|t| t.parse::<Mailbox>().map_err(|e| bad("to", &e))).collect::<Result<_, _>>()?;
        Ok(EmailNotifier { config, transport, from, to, relay: format!("{}:{port}", email.host) })
    }
}

#[async_trait]
impl Notifier for EmailNotifier {
    fn name(&self) -> &str {
        self.config.name()
    }

    fn config(&self) -> &NotifierConfig {
        &self.config
    }

    async fn send(&self, message: &Message) -> Result<(), SendError> {
        let mut content = email_content(message);
        // A template makes the HTML part, values HTML-escaped; the text part stays the built-in
        // plain text (a text-only reader would otherwise see the template's tags).
        let template = self.config.template.as_deref();
        if let Some(html) = crate::template::output(self.config.name(), template, message, Markup::Html, |_| true) {
            content.html = html;
        }
        let mut builder = lettre::Message::builder()
            .from(self.from.clone())
            .subject(content.subject)
            .message_id(Some(format!("<{}@drift.notify>", message.id())));
        for to in &self.to {
            builder = builder.to(to.clone());
        }
        let mail = builder
            .multipart(MultiPart::alternative_plain_html(content.text, content.html))
            .map_err(|e| SendError::permanent(format!("cannot build the email: {e}")))?;
        self.transport.send(mail).await.map(|_| ()).map_err(|e| {
            let retryable = !(e.is_permanent() || e.is_tls() || e.is_client());
            SendError { retryable, message: format!("SMTP relay {}: {e}", self.relay), retry_after: None }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{drift, event};
    use drift_model::{EventKind, Severity};
    use proptest::strategy::Strategy;

    #[test]
    fn every_value_is_escaped_in_html() {
        let mut d = drift(1, "shop", "web", Severity::High);
        d.cluster_value = Some(serde_json::json!("<script>alert('x')</script>"));
        d.changed_by = Some("\"evil\" & co".into());
        let email = email_content(&Message::new("mail", vec![event(EventKind::Opened, d)], None));
        assert!(!email.html.contains("<script>"), "{}", email.html);
        assert!(email.html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
        assert!(email.html.contains("&quot;evil&quot; &amp; co"));
        assert!(email.text.contains("<script>alert('x')</script>"), "the text part shows values as they are");
    }

    /// The `<…>` tags of an HTML document, in order.
    fn tags(html: &str) -> Vec<&str> {
        html.split('<').skip(1).map(|t| t.split_once('>').map_or(t, |(tag, _)| tag)).collect()
    }

    /// `html_escape` undone (the five entities it writes).
    fn unescape(text: &str) -> String {
        text.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&amp;", "&")
    }

    fn hostile_email(value: &str) -> EmailContent {
        let mut d = drift(1, value, value, Severity::High);
        d.cluster_value = Some(serde_json::json!(value));
        d.git_value = Some(serde_json::json!(value.chars().rev().collect::<String>()));
        d.changed_by = Some(value.to_owned());
        d.path = value.to_owned();
        email_content(&Message::new("mail", vec![event(EventKind::Opened, d)], None))
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(10_000))]

        /// Whatever a value holds (the Slack test's hostile characters, quotes, every line
        /// separator, sometimes 100 KB), the HTML part has exactly the tags of a message with a
        /// harmless value, every `&` starts one of the entities of `html_escape`, and the value
        /// reads back from its escaped form; the subject holds no line break or control
        /// character; the plain-text part shows the value as it is. Values are not printed.
        #[test]
        fn no_value_creates_a_tag_or_a_header(
            value in proptest::prop_oneof![
                20 => "[<>&!|@#`*_~\\n\\r\"' a-z:/.\\u{85}\\u{200b}\\u{200f}\\u{202e}\\u{2028}\\u{2029}]{0,80}",
                1 => "[<>&\\r\\n\"' a-z]{1,8}".prop_map(|s| s.repeat(100_000 / s.len())),
            ]
        ) {
            let email = hostile_email(&value);
            let harmless = hostile_email("x");
            proptest::prop_assert!(tags(&email.html) == tags(&harmless.html), "a value created or removed a tag");
            let html = &email.html;
            let bare_amp = html.match_indices('&').any(|(i, _)| {
                !["&amp;", "&lt;", "&gt;", "&quot;", "&#39;"].iter().any(|e| html[i..].starts_with(e))
            });
            proptest::prop_assert!(!bare_amp, "an & that starts no entity");
            proptest::prop_assert!(unescape(&html_escape(&value)) == value, "the escaped value does not read back");
            let view = Message::new("mail", vec![event(EventKind::Opened, {
                let mut d = drift(1, &value, &value, Severity::High);
                d.cluster_value = Some(serde_json::json!(value));
                d
            })], None);
            let cluster = view.events().next().and_then(|e| view.view(e)).map(|v| v.cluster).unwrap_or_default();
            proptest::prop_assert!(html.contains(&format!("<code>{}</code>", html_escape(&cluster))), "the value is not shown as text");
            proptest::prop_assert!(email.text.contains(&cluster), "the text part does not show the value as it is");
            proptest::prop_assert!(
                !email.subject.chars().any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')),
                "a line break in the subject"
            );
        }
    }
}
