//! The HTTP side of the webhook and Slack notifiers: one POST, its outcome as a
//! [`SendError`] that never shows the URL beyond scheme and host.

use std::time::Duration;

use reqwest::StatusCode;
use url::Url;

use crate::notifier::SendError;
use crate::redact::{parse_http_url, redact_parsed, scrub};

/// Characters of a receiver's answer kept in an error.
const MAX_ANSWER_CHARS: usize = 200;

/// POSTs JSON bodies to one URL (which may be a secret).
pub(crate) struct HttpPoster {
    client: reqwest::Client,
    url: Url,
    shown: String,
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
        Ok(HttpPoster { client, url, shown })
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
        let answer: String =
            answer.chars().filter(|c| !c.is_control()).take(MAX_ANSWER_CHARS).collect::<String>().trim().to_owned();
        let text = if answer.is_empty() {
            format!("{} answered {status}", self.shown)
        } else {
            format!("{} answered {status}: {answer}", self.shown)
        };
        let text = scrub(&text, &self.url);
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
        SendError {
            retryable,
            message: scrub(&format!("{} {what}: {detail}", self.shown), &self.url),
            retry_after: None,
        }
    }
}

/// Whether an HTTP status is worth another attempt: 5xx, 408 and 429 are; other 4xx (the
/// request is wrong, or the URL, or the credentials) and 3xx (no redirects) are not.
pub fn status_is_retryable(status: StatusCode) -> bool {
    status.is_server_error() || status == StatusCode::REQUEST_TIMEOUT || status == StatusCode::TOO_MANY_REQUESTS
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
    fn only_server_errors_timeouts_and_throttling_are_retried() {
        for (code, retry) in
            [(500, true), (503, true), (408, true), (429, true), (400, false), (401, false), (404, false), (301, false)]
        {
            assert_eq!(status_is_retryable(StatusCode::from_u16(code).unwrap()), retry, "{code}");
        }
    }
}
