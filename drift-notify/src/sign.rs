//! The webhook signature: `X-Drift-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>`, over
//! `"<t>.<body>"` with the notifier's secret, so that a receiver can check who sent the body
//! and refuse a replay of an old one.

use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The signature header.
pub const SIGNATURE_HEADER: &str = "X-Drift-Signature";
/// The message id, once per message (retries carry the same).
pub const DELIVERY_HEADER: &str = "X-Drift-Delivery";
/// The message id again, under the common name.
pub const IDEMPOTENCY_HEADER: &str = "Idempotency-Key";
/// The event ids, comma-separated (only when at most [`MAX_EVENT_IDS_HEADER`] events; the body
/// always lists them).
pub const EVENT_IDS_HEADER: &str = "X-Drift-Event-Ids";
/// The number of events of the message.
pub const EVENT_COUNT_HEADER: &str = "X-Drift-Event-Count";
/// Most event ids put in [`EVENT_IDS_HEADER`] (100 ids are 3.3 kB; servers refuse headers
/// of a few tens of kB).
pub const MAX_EVENT_IDS_HEADER: usize = 100;

type HmacSha256 = Hmac<Sha256>;

fn mac(secret: &[u8], timestamp: i64, body: &[u8]) -> HmacSha256 {
    // HMAC takes a key of any length: `new_from_slice` cannot fail for it.
    #[allow(clippy::expect_used)]
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC accepts keys of any length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The value of [`SIGNATURE_HEADER`] for `body` sent at `timestamp` (unix seconds).
///
/// ```
/// let header = drift_notify::sign(b"secret", 1_764_576_000, b"{}");
/// assert!(header.starts_with("t=1764576000,v1="));
/// drift_notify::verify(b"secret", &header, b"{}", 1_764_576_010, std::time::Duration::from_secs(300)).unwrap();
/// ```
pub fn sign(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    format!("t={timestamp},v1={}", hex::encode(mac(secret, timestamp, body).finalize().into_bytes()))
}

/// Why a signature was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The header is not `t=<unix>,v1=<hex>[,v1=<hex>...]`.
    #[error("malformed signature header")]
    Malformed,
    /// The timestamp is further than the tolerance from now (a replay, or a clock far off).
    #[error("signature timestamp {timestamp} is {skew_seconds}s away from now, more than the tolerance")]
    OutsideTolerance {
        /// The header's timestamp.
        timestamp: i64,
        /// How far it is from now, in seconds.
        skew_seconds: u64,
    },
    /// No `v1` signature matches the body with this secret.
    #[error("signature does not match")]
    Mismatch,
}

/// Checks a [`SIGNATURE_HEADER`] value against `body` at `now` (unix seconds): the timestamp
/// must be within `tolerance` of now (either way), and one of the `v1` signatures must match,
/// compared in constant time. A receiver should also drop message ids it has seen
/// ([`DELIVERY_HEADER`]): delivery is at least once.
pub fn verify(secret: &[u8], header: &str, body: &[u8], now: i64, tolerance: Duration) -> Result<(), VerifyError> {
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", t)) => timestamp = Some(t.parse::<i64>().map_err(|_| VerifyError::Malformed)?),
            Some(("v1", sig)) => signatures.push(hex::decode(sig).map_err(|_| VerifyError::Malformed)?),
            Some(_) => {} // other schemes, for later versions
            None => return Err(VerifyError::Malformed),
        }
    }
    let timestamp = timestamp.ok_or(VerifyError::Malformed)?;
    if signatures.is_empty() {
        return Err(VerifyError::Malformed);
    }
    let skew_seconds = now.abs_diff(timestamp);
    if skew_seconds > tolerance.as_secs() {
        return Err(VerifyError::OutsideTolerance { timestamp, skew_seconds });
    }
    let expected = mac(secret, timestamp, body);
    if signatures.iter().any(|sig| expected.clone().verify_slice(sig).is_ok()) {
        Ok(())
    } else {
        Err(VerifyError::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOL: Duration = Duration::from_secs(300);

    #[test]
    fn a_known_vector_matches_an_independent_hmac() {
        // HMAC-SHA256("key", "1.The quick brown fox jumps over the lazy dog"), computed with
        // Python: hmac.new(b"key", b"1.The quick ...", hashlib.sha256).hexdigest().
        let header = sign(b"key", 1, b"The quick brown fox jumps over the lazy dog");
        assert_eq!(header, "t=1,v1=3ff4d3cc115b639a16dc5b217aa5c89be41d1e4b54efc356d63d0cd2a65b30f1");
    }

    #[test]
    fn verify_refuses_tampering_replays_and_wrong_secrets() {
        let body = br#"{"message_id":"abc"}"#;
        let header = sign(b"s3cret", 1000, body);
        assert_eq!(verify(b"s3cret", &header, body, 1000, TOL), Ok(()));
        assert_eq!(verify(b"s3cret", &header, body, 1300, TOL), Ok(()), "at the edge of the tolerance");
        assert_eq!(verify(b"s3cret", &header, body, 700, TOL), Ok(()), "a clock a little behind");
        assert!(matches!(verify(b"s3cret", &header, body, 1301, TOL), Err(VerifyError::OutsideTolerance { .. })));
        assert_eq!(verify(b"other", &header, body, 1000, TOL), Err(VerifyError::Mismatch));
        assert_eq!(verify(b"s3cret", &header, br#"{"message_id":"abd"}"#, 1000, TOL), Err(VerifyError::Mismatch));
        // A replay with a fresh timestamp but the old signature does not match.
        let moved = header.replace("t=1000", "t=1290");
        assert_eq!(verify(b"s3cret", &moved, body, 1300, TOL), Err(VerifyError::Mismatch));
        for bad in ["", "t=1000", "v1=00", "t=x,v1=00", "t=1000,v1=zz", "garbage"] {
            assert_eq!(verify(b"s3cret", bad, body, 1000, TOL), Err(VerifyError::Malformed), "{bad:?}");
        }
        // Key rotation: any v1 may match.
        let two = format!("{header},v1={}", "00".repeat(32));
        assert_eq!(verify(b"s3cret", &two, body, 1000, TOL), Ok(()));
    }
}
