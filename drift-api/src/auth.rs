//! Bearer tokens: named write tokens (`POST /scan`, decisions, requeues; the name is the actor
//! of what the token does) and an optional read token. Only SHA-256 digests are kept, compared
//! in constant time; neither a token nor its digest is ever logged or shown.

use axum::extract::FromRequestParts;
use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use sha2::{Digest, Sha256};

use crate::error::ApiError;
use crate::state::ApiState;

/// The name of a token made by [`ApiToken::new`] (the configuration's single `api.token_env`).
pub const DEFAULT_TOKEN_NAME: &str = "api";

/// An API token with a name. Only its SHA-256 digest is kept; `Debug` shows the name, nothing
/// of the value.
///
/// ```
/// let token = drift_api::ApiToken::new("s3cr3t-token-value").unwrap();
/// assert_eq!(format!("{token:?}"), r#"ApiToken { name: "api", value: <redacted> }"#);
/// assert!(token.matches("s3cr3t-token-value"));
/// assert!(!token.matches("s3cr3t-token-valuE"));
/// let alice = drift_api::ApiToken::named("alice", "another-long-value").unwrap();
/// assert_eq!(alice.name(), "alice");
/// ```
#[derive(Clone)]
pub struct ApiToken {
    name: String,
    digest: [u8; 32],
}

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ApiToken {{ name: {:?}, value: <redacted> }}", self.name)
    }
}

impl ApiToken {
    /// A token named [`DEFAULT_TOKEN_NAME`]. Refused when empty or when it holds whitespace or
    /// control characters (it could not be sent in an `Authorization` header).
    pub fn new(token: impl AsRef<str>) -> drift_model::Result<Self> {
        Self::named(DEFAULT_TOKEN_NAME, token)
    }

    /// A token with a name: the owner of the waivers and decisions made with it, as the audit
    /// trail shows them. A name is 1 to 64 characters among letters, digits, `.`, `_`, `@` and
    /// `-`.
    pub fn named(name: impl Into<String>, token: impl AsRef<str>) -> drift_model::Result<Self> {
        let name = name.into();
        check_name(&name)?;
        let token = token.as_ref();
        if token.is_empty() {
            return Err(drift_model::Error::config(format!("the API token {name:?} is empty")));
        }
        if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(drift_model::Error::config(format!(
                "the API token {name:?} holds whitespace or control characters"
            )));
        }
        Ok(ApiToken { name, digest: digest(token.as_bytes()) })
    }

    /// The token held by the environment variable `var` (the configuration's `api.token_env`),
    /// named [`DEFAULT_TOKEN_NAME`]. Unset or empty gives `None` (`POST /scan` disabled); a value
    /// that is not valid UTF-8 or holds whitespace is an error that names the variable, never
    /// the value.
    pub fn from_env(var: &str) -> drift_model::Result<Option<Self>> {
        Self::named_from_env(DEFAULT_TOKEN_NAME, var)
    }

    /// A named token held by the environment variable `var` (an entry of `api.tokens`), as
    /// [`ApiToken::from_env`] reads it.
    pub fn named_from_env(name: &str, var: &str) -> drift_model::Result<Option<Self>> {
        Self::from_value(name, var, std::env::var_os(var))
    }

    fn from_value(name: &str, var: &str, value: Option<std::ffi::OsString>) -> drift_model::Result<Option<Self>> {
        let Some(value) = value.filter(|v| !v.is_empty()) else {
            return Ok(None);
        };
        let value =
            value.into_string().map_err(|_| drift_model::Error::config(format!("${var} is not valid UTF-8")))?;
        Self::named(name, value).map(Some).map_err(|e| drift_model::Error::config(format!("${var}: {}", e.message())))
    }

    /// The token's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether `candidate` is the token. The time taken does not depend on where the two
    /// differ, nor on the candidate's length: both sides are hashed first and the digests are
    /// compared with [`constant_time_eq`].
    pub fn matches(&self, candidate: &str) -> bool {
        constant_time_eq(&self.digest, &digest(candidate.as_bytes()))
    }
}

fn check_name(name: &str) -> drift_model::Result<()> {
    let ok = (1..=64).contains(&name.len())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | '-'));
    if ok {
        Ok(())
    } else {
        Err(drift_model::Error::config(format!(
            "API token name {name:?} must be 1 to 64 letters, digits, '.', '_', '@' or '-'"
        )))
    }
}

/// Checks a set of write tokens (and the read token) before serving: names are unique, and no
/// two tokens share a value (a value must say who acts). The error names tokens by their names,
/// never by their values.
pub fn check_tokens(write: &[ApiToken], read: Option<&ApiToken>) -> drift_model::Result<()> {
    for (i, a) in write.iter().enumerate() {
        for b in &write[i + 1..] {
            if a.name == b.name {
                return Err(drift_model::Error::config(format!("two API tokens are named {:?}", a.name)));
            }
            if constant_time_eq(&a.digest, &b.digest) {
                return Err(drift_model::Error::config(format!(
                    "the API tokens {:?} and {:?} have the same value",
                    a.name, b.name
                )));
            }
        }
        if read.is_some_and(|r| constant_time_eq(&r.digest, &a.digest)) {
            return Err(drift_model::Error::config(format!(
                "the read token has the same value as the write token {:?}",
                a.name
            )));
        }
    }
    Ok(())
}

/// The write token among `tokens` that `candidate` is. Every token is compared (no early exit),
/// so the time taken does not say which one matched.
fn find<'a>(tokens: &'a [ApiToken], candidate: &str) -> Option<&'a ApiToken> {
    let presented = digest(candidate.as_bytes());
    let mut found = None;
    for t in tokens {
        if constant_time_eq(&t.digest, &presented) && found.is_none() {
            found = Some(t);
        }
    }
    found
}

/// The caller of a write endpoint, authenticated by a write token: the token's name. Extracting
/// it answers 403 when no write token is configured, and 401 (with `WWW-Authenticate: Bearer`)
/// when the request has no bearer token or a wrong one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor(pub String);

impl FromRequestParts<ApiState> for Actor {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, Self::Rejection> {
        let what = format!("{} {}", parts.method, parts.uri.path());
        if state.tokens.is_empty() {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!(
                    "{what} is disabled: no API token is configured. Put a token in the environment variable \
                     named by api.token_env in the configuration (DRIFT_API_TOKEN by default), or name tokens \
                     under api.tokens, and restart drift serve"
                ),
            ));
        }
        let candidate = bearer(&parts.headers, &what)?;
        match find(&state.tokens, candidate) {
            Some(t) => Ok(Actor(t.name.clone())),
            None => {
                tracing::warn!(request = %what, "request refused: wrong bearer token");
                Err(ApiError::unauthorized("invalid bearer token"))
            }
        }
    }
}

/// Whether a request may read: always when no read token is configured; else with the read
/// token or a write token. 401 otherwise.
pub(crate) fn check_read(state: &ApiState, headers: &HeaderMap, what: &str) -> Result<(), ApiError> {
    let Some(read) = &state.read_token else {
        return Ok(());
    };
    let candidate = bearer(headers, what)?;
    // Both checks run, whatever the first says.
    let is_read = read.matches(candidate);
    let is_write = find(&state.tokens, candidate).is_some();
    if is_read | is_write {
        Ok(())
    } else {
        tracing::warn!(request = %what, "read refused: wrong bearer token");
        Err(ApiError::unauthorized("invalid bearer token"))
    }
}

/// The bearer token of a request, or the 401 answer saying what is wrong with its header.
fn bearer<'a>(headers: &'a HeaderMap, what: &str) -> Result<&'a str, ApiError> {
    match presented(headers) {
        Presented::Missing => {
            tracing::info!(request = %what, "request refused: no Authorization header");
            Err(ApiError::unauthorized("missing bearer token: send `Authorization: Bearer <token>`"))
        }
        Presented::Malformed => {
            tracing::info!(request = %what, "request refused: the Authorization header is not a bearer token");
            Err(ApiError::unauthorized("the Authorization header must be `Bearer <token>`"))
        }
        Presented::Bearer(candidate) => Ok(candidate),
    }
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Compares two byte strings in time that depends only on their lengths: every byte is looked
/// at, with no early exit on the first difference.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    // black_box keeps the optimiser from turning the fold back into an early-exit comparison.
    std::hint::black_box(diff) == 0
}

/// What the `Authorization` header of a request says.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Presented<'a> {
    /// No `Authorization` header.
    Missing,
    /// A header that is not `Bearer <token>`.
    Malformed,
    /// A bearer token.
    Bearer(&'a str),
}

/// Reads the bearer token of a request (scheme case-insensitive, as RFC 9110 says).
pub(crate) fn presented(headers: &HeaderMap) -> Presented<'_> {
    let Some(value) = headers.get(AUTHORIZATION) else {
        return Presented::Missing;
    };
    let Ok(value) = value.to_str() else {
        return Presented::Malformed;
    };
    let mut parts = value.trim().splitn(2, ' ');
    match (parts.next(), parts.next()) {
        (Some(scheme), Some(token)) if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() => {
            Presented::Bearer(token.trim())
        }
        _ => Presented::Malformed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn constant_time_eq_compares_every_byte() {
        assert!(constant_time_eq(b"", b""));
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"xbc"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(!constant_time_eq(b"ab", b"abc"));
        // A difference in any single bit of any byte is seen.
        let a = [0x5au8; 64];
        for i in 0..a.len() {
            for bit in 0..8 {
                let mut b = a;
                b[i] ^= 1 << bit;
                assert!(!constant_time_eq(&a, &b), "byte {i} bit {bit}");
            }
        }
    }

    #[test]
    fn token_matches_only_itself() {
        let t = ApiToken::new("token-123").unwrap();
        assert!(t.matches("token-123"));
        assert!(!t.matches("token-12"));
        assert!(!t.matches("token-1234"));
        assert!(!t.matches(""));
        assert!(!t.matches("TOKEN-123"));
    }

    #[test]
    fn token_refuses_empty_and_whitespace() {
        assert!(ApiToken::new("").is_err());
        assert!(ApiToken::new("two words").is_err());
        assert!(ApiToken::new("line\n").is_err());
    }

    #[test]
    fn token_from_the_environment() {
        assert!(ApiToken::from_env("DRIFT_API_TEST_VARIABLE_THAT_IS_NEVER_SET").unwrap().is_none());
        assert!(ApiToken::from_value("api", "V", None).unwrap().is_none());
        assert!(ApiToken::from_value("api", "V", Some("".into())).unwrap().is_none());
        let t = ApiToken::from_value("bob", "V", Some("abc-123".into())).unwrap().unwrap();
        assert!(t.matches("abc-123"));
        assert_eq!(t.name(), "bob");
        let e = ApiToken::from_value("api", "DRIFT_API_TOKEN", Some("has space-secret".into())).unwrap_err();
        assert!(e.message().contains("$DRIFT_API_TOKEN"), "{e}");
        assert!(!e.to_string().contains("space-secret"), "{e}");
    }

    #[test]
    fn debug_hides_the_token() {
        let t = ApiToken::new("very-secret-value").unwrap();
        let shown = format!("{t:?} {t:#?}");
        assert!(!shown.contains("very-secret-value"));
        assert!(!shown.contains(&hex::encode(digest(b"very-secret-value"))));
        assert_eq!(format!("{t:?}"), r#"ApiToken { name: "api", value: <redacted> }"#);
    }

    #[test]
    fn names_are_checked() {
        assert_eq!(ApiToken::named("alice@ops", "v-1").unwrap().name(), "alice@ops");
        for bad in ["", "two words", "a/b", &"x".repeat(65), "é"] {
            assert!(ApiToken::named(bad, "v-1").is_err(), "{bad:?}");
        }
    }

    #[test]
    fn token_sets_refuse_shared_names_and_values_without_showing_them() {
        let a = ApiToken::named("alice", "value-a").unwrap();
        let b = ApiToken::named("bob", "value-b").unwrap();
        assert!(check_tokens(&[a.clone(), b.clone()], None).is_ok());
        let e = check_tokens(&[a.clone(), ApiToken::named("alice", "value-c").unwrap()], None).unwrap_err();
        assert!(e.message().contains("alice"), "{e}");
        let e = check_tokens(&[a.clone(), ApiToken::named("carol", "value-a").unwrap()], None).unwrap_err();
        assert!(e.message().contains("carol") && !e.message().contains("value-a"), "{e}");
        let read = ApiToken::named("read", "value-b").unwrap();
        assert!(check_tokens(&[a.clone(), b.clone()], Some(&read)).is_err());
        assert_eq!(find(&[a.clone(), b.clone()], "value-b").map(ApiToken::name), Some("bob"));
        assert!(find(&[a, b], "value-").is_none());
    }

    #[test]
    fn bearer_header_parsing() {
        let mut h = HeaderMap::new();
        assert_eq!(presented(&h), Presented::Missing);
        h.insert(AUTHORIZATION, HeaderValue::from_static("Bearer abc"));
        assert_eq!(presented(&h), Presented::Bearer("abc"));
        h.insert(AUTHORIZATION, HeaderValue::from_static("bearer   abc "));
        assert_eq!(presented(&h), Presented::Bearer("abc"));
        h.insert(AUTHORIZATION, HeaderValue::from_static("Basic YWJj"));
        assert_eq!(presented(&h), Presented::Malformed);
        h.insert(AUTHORIZATION, HeaderValue::from_static("Bearer"));
        assert_eq!(presented(&h), Presented::Malformed);
        h.insert(AUTHORIZATION, HeaderValue::from_static("Bearer "));
        assert_eq!(presented(&h), Presented::Malformed);
    }
}
