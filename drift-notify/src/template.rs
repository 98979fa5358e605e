//! User templates (`template:` of a notifier): MiniJinja, sandboxed and escaped for the target.
//!
//! The sandbox: no loader (a template cannot `include`, `import` or `extends` anything, nor read
//! a file), no function that reaches the network or the process, a fuel limit on the
//! instructions one rendering may run, and undefined names are errors. Every value printed by
//! `{{ ... }}` is escaped for the target's markup (Slack mrkdwn, Discord markdown, Telegram's
//! HTML, the email's HTML, plain text elsewhere) unless the template marks it `|safe`.
//!
//! A template is checked when the configuration is loaded (it must compile and render a sample
//! message); should a rendering still fail later (fuel, an output over the target's limit), the
//! built-in message is sent instead and a warning logged: a notification is never lost to a
//! template.

use std::fmt::Write as _;

use minijinja::{Environment, Error, ErrorKind, UndefinedBehavior, Value};
use serde::Serialize;

use crate::message::{MAX_DRIFTS_PER_OBJECT, Message, digest_lines};

/// Instructions one rendering may run (a loop over every drift of a large message needs a few
/// thousand).
const FUEL: u64 = 200_000;
/// Characters of a template's source.
pub const MAX_TEMPLATE_CHARS: usize = 20_000;

/// The markup a template's output is read as, which says how values are escaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Markup {
    /// No markup: values as they are (ntfy, Gotify, Teams' text runs,
    /// Alertmanager's annotation).
    Plain,
    /// HTML: `& < > " '` escaped (the email's HTML part, Telegram's `parse_mode: HTML`).
    Html,
    /// Slack mrkdwn: `& < >` escaped, backquotes made quotes.
    Slack,
    /// Discord markdown: a backslash before every formatting, link or mention character.
    Discord,
}

impl Markup {
    /// `text` escaped for this markup.
    pub fn escape(self, text: &str) -> String {
        match self {
            Markup::Plain => text.to_owned(),
            Markup::Html => crate::email::html_escape(text),
            Markup::Slack => crate::slack::esc(text),
            Markup::Discord => crate::discord::discord_escape(text),
        }
    }
}

/// What a template sees.
#[derive(Debug, Serialize)]
struct Context {
    title: String,
    notifier: String,
    message_id: String,
    severity: Option<String>,
    summary: bool,
    counts: crate::message::Counts,
    summary_lines: Vec<Line>,
    objects: Vec<Object>,
    hidden_objects: usize,
    digests: Vec<Vec<Line>>,
}

#[derive(Debug, Serialize)]
struct Line {
    label: String,
    value: String,
}

#[derive(Debug, Serialize)]
struct Object {
    display: String,
    cluster: String,
    api_group: String,
    kind: String,
    namespace: String,
    name: String,
    repository: String,
    severity: String,
    drifts: Vec<Drift>,
    hidden_drifts: usize,
}

#[derive(Debug, Serialize)]
struct Drift {
    id: Option<i64>,
    event: &'static str,
    path: String,
    severity: String,
    drift_type: &'static str,
    git: String,
    cluster: String,
    before: Option<String>,
    before_severity: Option<String>,
    changed_by: Option<String>,
    changed_at: Option<String>,
    who_when: Option<String>,
    classification: &'static str,
    resolution: Option<&'static str>,
    learned: Option<String>,
    link: Option<String>,
}

fn lines(pairs: Vec<(String, String)>) -> Vec<Line> {
    pairs.into_iter().map(|(label, value)| Line { label, value }).collect()
}

fn context(message: &Message) -> Context {
    let (shown, hidden) = message.shown_groups();
    let objects = shown
        .iter()
        .map(|g| Object {
            display: g.key.display(),
            cluster: g.key.cluster.clone(),
            api_group: g.key.api_group.clone(),
            kind: g.key.kind.clone(),
            namespace: g.key.namespace.clone(),
            name: g.key.name.clone(),
            repository: g
                .events
                .iter()
                .find_map(|e| e.drift.as_ref())
                .map(|d| d.repository.clone())
                .unwrap_or_default(),
            severity: g.severity.to_string(),
            drifts: g
                .events
                .iter()
                .take(MAX_DRIFTS_PER_OBJECT)
                .filter_map(|e| {
                    let v = message.view(e)?;
                    Some(Drift {
                        id: e.drift_id(),
                        event: v.verb,
                        who_when: v.who_when(),
                        path: v.path,
                        severity: v.severity.to_string(),
                        drift_type: v.drift_type,
                        git: v.git,
                        cluster: v.cluster,
                        before_severity: v.before.as_ref().map(|(_, s)| s.to_string()),
                        before: v.before.map(|(b, _)| b),
                        changed_by: v.changed_by,
                        changed_at: v.changed_at,
                        classification: v.classification,
                        resolution: v.resolution,
                        learned: v.learned,
                        link: v.link.map(|l| l.to_string()),
                    })
                })
                .collect(),
            hidden_drifts: g.events.len().saturating_sub(MAX_DRIFTS_PER_OBJECT),
        })
        .collect();
    Context {
        title: message.title(),
        notifier: message.notifier().to_owned(),
        message_id: message.id().to_owned(),
        severity: message.severity().map(|s| s.to_string()),
        summary: message.is_summary(),
        counts: message.counts().clone(),
        summary_lines: lines(message.summary_lines()),
        objects,
        hidden_objects: hidden,
        digests: message.digests().iter().map(|d| lines(digest_lines(d))).collect(),
    }
}

fn environment(markup: Markup) -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_fuel(Some(FUEL));
    env.set_recursion_limit(50);
    env.set_formatter(move |out, _state, value: &Value| {
        if value.is_none() || value.is_undefined() {
            return Ok(());
        }
        let text = match value.as_str() {
            Some(s) => s.to_owned(),
            None => value.to_string(),
        };
        let text = if value.is_safe() { text } else { markup.escape(&text) };
        out.write_str(&text).map_err(Error::from)
    });
    env
}

/// `source` rendered for `message` with values escaped for `markup`. The error says what is
/// wrong, with the line of the template; it never holds a secret (a template sees none).
pub fn render(source: &str, message: &Message, markup: Markup) -> Result<String, Error> {
    if source.chars().count() > MAX_TEMPLATE_CHARS {
        return Err(Error::new(ErrorKind::InvalidOperation, format!("longer than {MAX_TEMPLATE_CHARS} characters")));
    }
    let env = environment(markup);
    let template = env.template_from_named_str("template", source)?;
    template.render(Value::from(minijinja::value::Serde(context(message))))
}

/// The sample message templates are checked with: a `changed` drift with every field set (a
/// previous value, a resolution, a link) and a digest.
fn sample_message() -> Message {
    let mut d = crate::fixtures::drift(1, "shop", "web", drift_model::drift::Severity::High);
    d.resolution = Some(drift_model::Resolution::Reverted);
    let mut changed = crate::fixtures::event(drift_model::EventKind::Changed, d);
    changed.previous = Some(drift_model::act::Previous {
        cluster_value: Some(serde_json::json!(4)),
        severity: drift_model::drift::Severity::Low,
    });
    let events = vec![changed, crate::fixtures::digest_event("sample")];
    Message::new("sample", events, url::Url::parse("https://drift.example.com/").ok())
}

/// Checks a template at load time: it compiles and renders the sample message for every
/// markup. The error names the problem and its line.
pub fn check(source: &str) -> Result<(), String> {
    let message = sample_message();
    for markup in [Markup::Plain, Markup::Html, Markup::Slack, Markup::Discord] {
        render(source, &message, markup).map_err(|e| describe(&e))?;
    }
    Ok(())
}

/// The template's output for the sample message (`None` when it fails).
pub(crate) fn sample(source: &str, markup: Markup) -> Option<String> {
    render(source, &sample_message(), markup).ok()
}

/// An error in words with its line: `undefined value (line 2): ...`.
fn describe(e: &Error) -> String {
    let mut out = e.kind().to_string();
    if let Some(line) = e.line() {
        let _ = write!(out, " (line {line})");
    }
    if let Some(detail) = e.detail() {
        let _ = write!(out, ": {detail}");
    }
    out
}

/// The template's output for `message`, or `None` (with a warning) when it fails or does not
/// fit `fits`: the caller then sends its built-in message.
pub(crate) fn output(
    notifier: &str,
    source: Option<&str>,
    message: &Message,
    markup: Markup,
    fits: impl Fn(&str) -> bool,
) -> Option<String> {
    let source = source?;
    match render(source, message, markup) {
        Ok(text) if fits(&text) && !text.trim().is_empty() => Some(text),
        Ok(_) => {
            tracing::warn!(
                notifier,
                message_id = message.id(),
                "the template's output is empty or over the receiver's limit; the built-in message is sent"
            );
            None
        }
        Err(e) => {
            tracing::warn!(notifier, message_id = message.id(), error = %describe(&e), "the template failed; the built-in message is sent");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{drift, event};
    use drift_model::{EventKind, Severity};

    fn hostile() -> Message {
        let mut d = drift(1, "shop", "web", Severity::High);
        d.cluster_value = Some(serde_json::json!("<b>x</b> & *y* `z` <!channel> @everyone"));
        Message::new("t", vec![event(EventKind::Opened, d)], None)
    }

    const T: &str = "{{ title }}\n{% for o in objects %}{% for d in o.drifts %}{{ d.path }}={{ d.cluster }}\n{% endfor %}{% endfor %}";

    #[test]
    fn values_are_escaped_for_each_markup() {
        let m = hostile();
        let out = |markup| render(T, &m, markup).unwrap();
        assert!(out(Markup::Plain).contains("spec.replicas=<b>x</b> & *y* `z` <!channel> @everyone"));
        assert!(
            out(Markup::Html).contains("spec.replicas=&lt;b&gt;x&lt;/b&gt; &amp; *y* `z` &lt;!channel&gt; @everyone")
        );
        assert!(
            out(Markup::Slack).contains("spec.replicas=&lt;b&gt;x&lt;/b&gt; &amp; *y* 'z' &lt;!channel&gt; @everyone")
        );
        assert!(out(Markup::Discord).contains("spec.replicas=\\<b>x\\</b> & \\*y\\* \\`z\\` \\<!channel> \\@everyone"));
        // The template's own markup is not escaped; `|safe` opts a value out.
        assert_eq!(render("*{{ '<b>' }}* {{ '<i>'|safe }}", &m, Markup::Html).unwrap(), "*&lt;b&gt;* <i>");
    }

    #[test]
    fn the_sandbox_has_no_files_no_unknown_names_and_a_fuel_limit() {
        let m = hostile();
        for (source, why) in [
            ("{% include '/etc/passwd' %}", "unknown statement include"),
            ("{% import 'x' as y %}", "unknown statement import"),
            ("{{ titel }}", "undefined"),
            ("{{ title | shell }}", "unknown filter"),
            ("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}", "fuel"),
            ("{% if %}", "syntax"),
        ] {
            let e = render(source, &m, Markup::Plain).unwrap_err();
            let text = describe(&e).to_lowercase();
            assert!(text.contains(why) || e.kind().to_string().to_lowercase().contains(why), "{source}: {text}");
            assert!(check(source).is_err(), "{source} passed the load-time check");
        }
        check(T).unwrap();
    }

    #[test]
    fn a_failing_or_oversized_output_falls_back_to_the_built_in_message() {
        let m = hostile();
        assert_eq!(output("n", None, &m, Markup::Plain, |_| true), None);
        assert_eq!(output("n", Some("{{ 1/0 }}"), &m, Markup::Plain, |_| true), None);
        assert_eq!(output("n", Some("{{ title }}"), &m, Markup::Plain, |t| t.len() < 5), None);
        assert_eq!(output("n", Some("{{ title }}"), &m, Markup::Plain, |_| true).as_deref(), Some(m.title().as_str()));
    }
}
