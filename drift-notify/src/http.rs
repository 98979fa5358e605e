//! The HTTP side of the webhook and Slack notifiers: one POST, its outcome as a
//! [`SendError`] that never shows the URL beyond scheme and host.

use std::time::Duration;

use reqwest::StatusCode;
use url::Url;

use crate::config::NotifierConfig;
use crate::message::Message;
use crate::notifier::{Notifier, SendError};
use crate::redact::{Secret, parse_http_url, redact_parsed, scrub};
use crate::sign::{DELIVERY_HEADER, IDEMPOTENCY_HEADER};

/// Characters of a receiver's answer kept in an error.
const MAX_ANSWER_CHARS: usize = 200;

/// POSTs JSON bodies to one URL (which may be a secret).
pub(crate) struct HttpPoster {
    client: reqwest::Client,
    url: Url,
    shown: String,
    /// Secrets that are not part of the URL's path or query but must never be shown either
    /// (a token that a receiver might echo).
    hidden: Vec<Secret>,
}

impl std::fmt::Debug for HttpPoster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpPoster").field("url", &self.shown).finish_non_exhaustive()
    }
}

impl HttpPoster {
    /// A poster with a request timeout; redirects are not followed (a signed POST must reach
    /// the URL configured).
    pub(crate) fn new(url: &str, timeout: Duration) -> drift_model::Result<Self> {
        let url = parse_http_url(url).map_err(drift_model::Error::config)?;
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("drift/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| drift_model::Error::config(format!("cannot build the HTTP client: {}", e.without_url())))?;
        let shown = redact_parsed(&url);
        Ok(HttpPoster { client, url, shown, hidden: Vec::new() })
    }

    /// Also removes `secret` from every error (a token sent in a header, a Telegram bot token).
    pub(crate) fn hiding(mut self, secret: &Secret) -> Self {
        self.hidden.push(secret.clone());
        self
    }

    fn clean(&self, text: &str) -> String {
        let mut out = scrub(text, &self.url);
        for s in &self.hidden {
            if !s.expose().is_empty() {
                out = out.replace(s.expose(), "[redacted]");
            }
        }
        out
    }

    /// One POST of `body` (JSON) with `headers`.
    pub(crate) async fn post(&self, body: Vec<u8>, headers: &[(&'static str, String)]) -> Result<(), SendError> {
        let mut request = self.client.post(self.url.clone()).header("Content-Type", "application/json").body(body);
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let response = match request.send().await {
            Ok(r) => r,
            Err(e) => return Err(self.transport_error(e)),
        };
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, chrono::Utc::now()));
        // The answer's body only adds detail to the error: one that cannot be read says so.
        let answer = response.text().await.unwrap_or_else(|e| format!("(the body could not be read: {e})"));
        let retry_after = retry_after.or_else(|| retry_after_in_body(&answer));
        let answer: String =
            answer.chars().filter(|c| !c.is_control()).take(MAX_ANSWER_CHARS).collect::<String>().trim().to_owned();
        let text = if answer.is_empty() {
            format!("{} answered {status}", self.shown)
        } else {
            format!("{} answered {status}: {answer}", self.shown)
        };
        let text = self.clean(&text);
        Err(SendError { retryable: status_is_retryable(status), message: text, retry_after })
    }

    fn transport_error(&self, e: reqwest::Error) -> SendError {
        let what = if e.is_timeout() {
            "timed out"
        } else if e.is_connect() {
            "cannot connect"
        } else {
            "request failed"
        };
        let retryable = !e.is_builder();
        let mut chain = Vec::new();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            chain.push(s.to_string());
            source = s.source();
        }
        let detail = if chain.is_empty() { e.without_url().to_string() } else { chain.join(": ") };
        SendError { retryable, message: self.clean(&format!("{} {what}: {detail}", self.shown)), retry_after: None }
    }
}

/// A notifier that POSTs one JSON body per message: ntfy, Gotify, Discord, Telegram, Teams and
/// Alertmanager differ only in the URL, the body and the headers that carry a secret.
pub(crate) struct JsonNotifier {
    pub(crate) config: NotifierConfig,
    pub(crate) poster: HttpPoster,
    /// Headers carrying a secret (`X-Gotify-Key`, `Authorization: Bearer ...`), on every request.
    pub(crate) auth: Vec<(&'static str, Secret)>,
    /// The body of a message; `None` when the message holds nothing for this receiver (a
    /// digest for Alertmanager), which counts as sent.
    pub(crate) render: fn(&NotifierConfig, &Message) -> Option<serde_json::Value>,
}

impl std::fmt::Debug for JsonNotifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonNotifier")
            .field("name", &self.config.name())
            .field("type", &self.config.kind.type_name())
            .field("poster", &self.poster)
            .field("auth", &self.auth.iter().map(|(h, _)| *h).collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl JsonNotifier {
    /// A notifier posting to `url` (a secret or not: errors show its scheme and host only).
    pub(crate) fn new(
        config: NotifierConfig,
        url: &str,
        render: fn(&NotifierConfig, &Message) -> Option<serde_json::Value>,
    ) -> drift_model::Result<Self> {
        let poster = HttpPoster::new(url, Duration::from_secs(10)).map_err(|e| {
            drift_model::Error::config(format!(
                "notifier {}: the {} URL: {}",
                config.name(),
                config.kind.type_name(),
                e.message()
            ))
        })?;
        Ok(JsonNotifier { config, poster, auth: Vec::new(), render })
    }

    /// Sends `value` in header `name` on every request, and hides `hidden` (the secret part of
    /// it) from errors.
    pub(crate) fn with_auth(mut self, name: &'static str, value: Secret, hidden: &Secret) -> Self {
        self.poster = self.poster.hiding(hidden);
        self.auth.push((name, value));
        self
    }
}

#[async_trait::async_trait]
impl Notifier for JsonNotifier {
    fn name(&self) -> &str {
        self.config.name()
    }

    fn config(&self) -> &NotifierConfig {
        &self.config
    }

    async fn send(&self, message: &Message) -> Result<(), SendError> {
        let Some(body) = (self.render)(&self.config, message) else { return Ok(()) };
        let body = serde_json::to_vec(&body).map_err(|e| {
            SendError::permanent(format!("cannot encode the {} message: {e}", self.config.kind.type_name()))
        })?;
        let mut headers =
            vec![(DELIVERY_HEADER, message.id().to_owned()), (IDEMPOTENCY_HEADER, message.id().to_owned())];
        headers.extend(self.auth.iter().map(|(name, value)| (*name, value.expose().to_owned())));
        self.poster.post(body, &headers).await
    }
}

/// Whether an HTTP status is worth another attempt: 5xx, 408 and 429 are; other 4xx (the
/// request is wrong, or the URL, or the credentials) and 3xx (no redirects) are not.
pub fn status_is_retryable(status: StatusCode) -> bool {
    status.is_server_error() || status == StatusCode::REQUEST_TIMEOUT || status == StatusCode::TOO_MANY_REQUESTS
}

/// The delay a JSON answer asks for when it has no `Retry-After` header: Telegram's
/// `parameters.retry_after` (seconds) or Discord's `retry_after` (seconds, with a fraction).
fn retry_after_in_body(answer: &str) -> Option<Duration> {
    let v: serde_json::Value = serde_json::from_str(answer).ok()?;
    let secs = v["parameters"]["retry_after"].as_f64().or_else(|| v["retry_after"].as_f64())?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(86_400.0)))
}

/// `Retry-After` as seconds or an HTTP date, as a delay from `now` (a date in the past is 0).
pub(crate) fn parse_retry_after(value: &str, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    Some((at.with_timezone(&chrono::Utc) - now).to_std().unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::t;

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        assert_eq!(parse_retry_after(" 120 ", t(0)), Some(Duration::from_secs(120)));
        assert_eq!(parse_retry_after("Tue, 01 Dec 2026 08:01:30 GMT", t(0)), Some(Duration::from_secs(90)));
        assert_eq!(parse_retry_after("Tue, 01 Dec 2026 07:00:00 GMT", t(0)), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", t(0)), None);
    }

    #[test]
    fn telegram_and_discord_bodies_say_how_long_to_wait() {
        let telegram = r#"{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 7","parameters":{"retry_after":7}}"#;
        assert_eq!(retry_after_in_body(telegram), Some(Duration::from_secs(7)));
        let discord = r#"{"message":"You are being rate limited.","retry_after":1.5,"global":false}"#;
        assert_eq!(retry_after_in_body(discord), Some(Duration::from_millis(1500)));
        assert_eq!(retry_after_in_body("busy"), None);
        assert_eq!(retry_after_in_body(r#"{"retry_after":-1}"#), None);
    }

    #[test]
    fn only_server_errors_timeouts_and_throttling_are_retried() {
        for (code, retry) in
            [(500, true), (503, true), (408, true), (429, true), (400, false), (401, false), (404, false), (301, false)]
        {
            assert_eq!(status_is_retryable(StatusCode::from_u16(code).unwrap()), retry, "{code}");
        }
    }
}
