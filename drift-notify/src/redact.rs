//! Secrets in memory and HTTP URLs in messages: a Slack incoming-webhook URL is a secret (its
//! path is the credential), so errors and logs show `scheme://host[:port]` only.

use url::Url;

pub use drift_model::secret::Secret;

/// `scheme://host[:port]` of an HTTP URL, without user information, path, query or fragment;
/// `(invalid URL)` when it does not parse (the text itself is never shown).
///
/// ```
/// assert_eq!(
///     drift_notify::redact_http_url("https://user:pw@hooks.slack.com:8443/services/T0/B0/secret?x=1#f"),
///     "https://hooks.slack.com:8443"
/// );
/// assert_eq!(drift_notify::redact_http_url("hooks.slack.com/services/secret"), "(invalid URL)");
/// ```
pub fn redact_http_url(url: &str) -> String {
    match Url::parse(url) {
        Ok(u) => redact_parsed(&u),
        Err(_) => "(invalid URL)".to_owned(),
    }
}

pub(crate) fn redact_parsed(u: &Url) -> String {
    match (u.host_str(), u.port()) {
        (Some(host), Some(port)) => format!("{}://{host}:{port}", u.scheme()),
        (Some(host), None) => format!("{}://{host}", u.scheme()),
        (None, _) => format!("{}://", u.scheme()),
    }
}

/// Parses an http(s) URL with a host; the error never repeats the URL.
pub(crate) fn parse_http_url(url: &str) -> Result<Url, String> {
    let u = Url::parse(url).map_err(|e| format!("not a URL ({e})"))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(format!("the scheme must be http or https, not {:?}", u.scheme()));
    }
    if u.host_str().is_none_or(str::is_empty) {
        return Err("the URL has no host".into());
    }
    Ok(u)
}

/// Removes every trace of `url` beyond its scheme and host from `text` (an error message a
/// library wrote): the whole URL, then its path, query and user information.
pub(crate) fn scrub(text: &str, url: &Url) -> String {
    let mut out = text.replace(url.as_str(), &redact_parsed(url));
    let mut parts = Vec::new();
    if url.path().len() > 1 {
        parts.push(url.path().to_owned());
    }
    parts.extend(url.query().map(str::to_owned));
    parts.extend(url.password().map(str::to_owned));
    if !url.username().is_empty() {
        parts.push(url.username().to_owned());
    }
    for part in parts {
        out = out.replace(&part, "/[redacted]");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_do_not_print() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?} {s}"), "Secret(***) ***");
        assert_eq!(s.expose(), "hunter2");
    }

    #[test]
    fn scrub_removes_the_path_query_and_user_wherever_they_appear() {
        let u = Url::parse("https://bob:pw@hooks.example.com/services/T0/B0/XyZ?token=abc").unwrap();
        let text = format!("error sending request for url ({u}): /services/T0/B0/XyZ token=abc pw");
        let clean = scrub(&text, &u);
        for secret in ["XyZ", "token=abc", ":pw", "bob"] {
            assert!(!clean.contains(secret), "{secret} in {clean}");
        }
        assert!(clean.contains("https://hooks.example.com"), "{clean}");
    }

    #[test]
    fn only_http_urls_with_a_host_are_accepted() {
        assert!(parse_http_url("https://example.com/x").is_ok());
        assert!(parse_http_url("ftp://example.com/x").unwrap_err().contains("http or https"));
        let err = parse_http_url("not a url/secret-part").unwrap_err();
        assert!(!err.contains("secret-part"), "{err}");
    }
}
