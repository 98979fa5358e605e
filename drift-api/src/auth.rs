//! The bearer token of `POST /scan`: kept as a SHA-256 digest, compared in constant time.

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use sha2::{Digest, Sha256};

/// The API token. Only its SHA-256 digest is kept; `Debug` shows nothing of it.
///
/// ```
/// let token = drift_api::ApiToken::new("s3cr3t-token-value").unwrap();
/// assert_eq!(format!("{token:?}"), "ApiToken(<redacted>)");
/// assert!(token.matches("s3cr3t-token-value"));
/// assert!(!token.matches("s3cr3t-token-valuE"));
/// ```
#[derive(Clone)]
pub struct ApiToken {
    digest: [u8; 32],
}

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiToken(<redacted>)")
    }
}

impl ApiToken {
    /// A token. Refused when empty or when it holds whitespace or control characters (it could
    /// not be sent in an `Authorization` header).
    pub fn new(token: impl AsRef<str>) -> drift_core::Result<Self> {
        let token = token.as_ref();
        if token.is_empty() {
            return Err(drift_core::Error::config("the API token is empty"));
        }
        if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(drift_core::Error::config("the API token holds whitespace or control characters"));
        }
        Ok(ApiToken { digest: digest(token.as_bytes()) })
    }

    /// The token held by the environment variable `var` (the configuration's `api.token_env`).
    /// Unset or empty gives `None` (`POST /scan` disabled); a value that is not valid UTF-8 or
    /// holds whitespace is an error that names the variable, never the value.
    pub fn from_env(var: &str) -> drift_core::Result<Option<Self>> {
        Self::from_value(var, std::env::var_os(var))
    }

    fn from_value(var: &str, value: Option<std::ffi::OsString>) -> drift_core::Result<Option<Self>> {
        let Some(value) = value.filter(|v| !v.is_empty()) else {
            return Ok(None);
        };
        let value = value.into_string().map_err(|_| drift_core::Error::config(format!("${var} is not valid UTF-8")))?;
        Self::new(value).map(Some).map_err(|e| drift_core::Error::config(format!("${var}: {}", e.message())))
    }

    /// Whether `candidate` is the token. The time taken does not depend on where the two
    /// differ, nor on the candidate's length: both sides are hashed first and the digests are
    /// compared with [`constant_time_eq`].
    pub fn matches(&self, candidate: &str) -> bool {
        constant_time_eq(&self.digest, &digest(candidate.as_bytes()))
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
        assert!(ApiToken::from_value("V", None).unwrap().is_none());
        assert!(ApiToken::from_value("V", Some("".into())).unwrap().is_none());
        let t = ApiToken::from_value("V", Some("abc-123".into())).unwrap().unwrap();
        assert!(t.matches("abc-123"));
        let e = ApiToken::from_value("DRIFT_API_TOKEN", Some("has space-secret".into())).unwrap_err();
        assert!(e.message().contains("$DRIFT_API_TOKEN"), "{e}");
        assert!(!e.to_string().contains("space-secret"), "{e}");
    }

    #[test]
    fn debug_hides_the_token() {
        let t = ApiToken::new("very-secret-value").unwrap();
        let shown = format!("{t:?} {t:#?}");
        assert!(!shown.contains("very-secret-value"));
        assert!(!shown.contains(&hex::encode(digest(b"very-secret-value"))));
        assert_eq!(format!("{t:?}"), "ApiToken(<redacted>)");
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
