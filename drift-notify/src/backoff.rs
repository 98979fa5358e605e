//! Delays between attempts and the rate limit of a notifier: pure functions of their inputs.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::config::{Backoff, NotifierConfig, RateLimit};

/// The delay before the attempt after the `attempt`-th failure (1 for the first failure; 0 is
/// read as 1): exponential, `initial * 2^(attempt-1)` capped at `max`, with **equal jitter**:
/// half of it fixed, half scaled by `jitter` (in `0..1`, clamped). So the delay is always
/// between half and all of the capped exponential delay: never more than `max`, never less
/// than `min(initial, max) / 2`, and workers that failed together spread out.
///
/// ```
/// use std::time::Duration;
/// let b = drift_notify::Backoff { initial: Duration::from_secs(2), max: Duration::from_secs(600) };
/// assert_eq!(drift_notify::backoff(1, &b, 0.0), Duration::from_secs(1));
/// assert_eq!(drift_notify::backoff(3, &b, 1.0), Duration::from_secs(8));
/// assert_eq!(drift_notify::backoff(30, &b, 1.0), Duration::from_secs(600));
/// ```
pub fn backoff(attempt: u32, config: &Backoff, jitter: f64) -> Duration {
    let exp = attempt.saturating_sub(1).min(63);
    let factor = 1u64.checked_shl(exp).unwrap_or(u64::MAX);
    let capped =
        config.initial.checked_mul(u32::try_from(factor).unwrap_or(u32::MAX)).unwrap_or(config.max).min(config.max);
    let jitter = if jitter.is_nan() { 0.0 } else { jitter.clamp(0.0, 1.0) };
    let half = capped / 2;
    half + (capped - half).mul_f64(jitter)
}

/// When to try a delivery again after its `attempts`-th failed attempt, its attempts failing
/// since `failing_since`: after [`backoff`] (or the receiver's `Retry-After` when longer), as
/// long as `retry_for` has not passed since `failing_since` and `attempts` (when set) is not
/// reached; `None` parks it as an outage. So the last attempt comes at most one delay (at most
/// `backoff.max`) after the horizon. `jitter` is in `0..1` ([`backoff`]).
///
/// ```
/// use std::time::Duration;
/// let t0 = drift_notify::fixtures::t(0);
/// let config: drift_notify::NotifierConfig =
///     serde_saphyr::from_str("type: slack\nurl_env: U\nretry_for: 1h\n").unwrap();
/// let failure = drift_model::act::SendFailure::retryable("HTTP 503");
/// let next = drift_notify::retry_at(&config, 1, t0, t0, &failure, 1.0).unwrap();
/// assert_eq!(next, t0 + chrono::Duration::seconds(2));
/// let later = t0 + chrono::Duration::minutes(59);
/// assert_eq!(drift_notify::retry_at(&config, 40, t0, later, &failure, 1.0), Some(later + chrono::Duration::minutes(10)));
/// assert_eq!(drift_notify::retry_at(&config, 41, t0, t0 + chrono::Duration::hours(1), &failure, 1.0), None);
/// ```
pub fn retry_at(
    config: &NotifierConfig,
    attempts: i64,
    failing_since: DateTime<Utc>,
    now: DateTime<Utc>,
    failure: &drift_model::act::SendFailure,
    jitter: f64,
) -> Option<DateTime<Utc>> {
    if config.attempts.is_some_and(|cap| attempts >= i64::from(cap)) {
        return None;
    }
    let horizon = chrono::Duration::from_std(config.retry_for).unwrap_or(chrono::Duration::MAX);
    if now.signed_duration_since(failing_since) >= horizon {
        return None;
    }
    let delay = backoff(u32::try_from(attempts).unwrap_or(u32::MAX), &config.backoff, jitter)
        .max(failure.retry_after.unwrap_or_default());
    Some(now + chrono::Duration::from_std(delay).unwrap_or(chrono::Duration::MAX))
}

/// A token bucket: bursts of up to `messages`, refilled at `messages` per `per`.
///
/// ```
/// use std::time::Duration;
/// let t0 = drift_notify::fixtures::t(0);
/// let mut limiter = drift_notify::RateLimiter::new(drift_notify::RateLimit { messages: 2, per: Duration::from_secs(60) }, t0);
/// assert!(limiter.check(t0).is_ok());
/// assert!(limiter.check(t0).is_ok());
/// assert_eq!(limiter.check(t0), Err(t0 + chrono::Duration::seconds(30)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimiter {
    /// Microseconds of waiting one message costs (`per / messages`).
    cost: i64,
    /// Most credit the bucket holds (`per`, i.e. `messages` messages).
    capacity: i64,
    /// Credit in microseconds (exact integers: no rounding can break a promised time).
    credit: i64,
    at: DateTime<Utc>,
}

impl RateLimiter {
    /// A full bucket at `now`.
    pub fn new(limit: RateLimit, now: DateTime<Utc>) -> Self {
        let messages = i64::from(limit.messages.max(1));
        let per = i64::try_from(limit.per.as_micros()).unwrap_or(i64::MAX / 2).max(messages);
        let cost = per / messages;
        let capacity = cost * messages;
        RateLimiter { cost, capacity, credit: capacity, at: now }
    }

    /// Takes a token at `now` when there is one; otherwise says when the next one comes (and
    /// takes nothing). A clock going backwards refills nothing.
    pub fn check(&mut self, now: DateTime<Utc>) -> Result<(), DateTime<Utc>> {
        if now > self.at {
            let elapsed = (now - self.at).num_microseconds().unwrap_or(i64::MAX);
            self.credit = self.credit.saturating_add(elapsed).min(self.capacity);
            self.at = now;
        }
        if self.credit >= self.cost {
            self.credit -= self.cost;
            return Ok(());
        }
        Err(self.at + chrono::Duration::microseconds(self.cost - self.credit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::t;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn backoff_stays_between_half_and_all_of_the_capped_exponential(
            attempt in 0u32..200,
            initial_ms in 1u64..100_000,
            max_ms in 1u64..100_000_000,
            jitter in proptest::num::f64::ANY,
        ) {
            let b = Backoff { initial: Duration::from_millis(initial_ms), max: Duration::from_millis(max_ms.max(initial_ms)) };
            let d = backoff(attempt, &b, jitter);
            prop_assert!(d <= b.max);
            let exp = 2u128.saturating_pow(attempt.saturating_sub(1)).saturating_mul(u128::from(initial_ms));
            let capped = Duration::from_millis(u64::try_from(exp.min(u128::from(b.max.as_millis() as u64))).unwrap());
            prop_assert!(d >= capped / 2, "{d:?} < half of {capped:?}");
            prop_assert!(d <= capped);
        }

        #[test]
        fn backoff_never_shrinks_with_more_attempts(attempt in 1u32..100, jitter in 0.0f64..1.0) {
            let b = Backoff::default();
            prop_assert!(backoff(attempt + 1, &b, jitter) >= backoff(attempt, &b, jitter));
        }

        #[test]
        fn a_bucket_never_lets_more_than_capacity_plus_refill_through(
            messages in 1u32..20,
            per_s in 1u64..3600,
            steps in proptest::collection::vec(0i64..120_000, 1..200),
        ) {
            let limit = RateLimit { messages, per: Duration::from_secs(per_s) };
            let mut l = RateLimiter::new(limit, t(0));
            let mut now = t(0);
            let mut sent = 0u64;
            for step in steps {
                now += chrono::Duration::milliseconds(step);
                match l.check(now) {
                    Ok(()) => sent += 1,
                    Err(next) => {
                        prop_assert!(next > now);
                        prop_assert!(l.clone().check(next).is_ok(), "a token is there at the time it promised");
                    }
                }
            }
            let elapsed = (now - t(0)).num_milliseconds() as f64 / 1000.0;
            let allowed = f64::from(messages) + elapsed * f64::from(messages) / per_s as f64;
            prop_assert!(sent as f64 <= allowed + 1e-6, "{sent} > {allowed}");
        }
    }

    proptest! {
        /// Whatever the failures, a delivery is retried until `retry_for` has passed since its
        /// first failure and no longer; each wait is at most `backoff.max` (or `Retry-After`).
        #[test]
        fn retries_last_retry_for_and_never_longer(
            retry_for_s in 1u64..200_000,
            jitters in proptest::collection::vec(0.0f64..1.0, 1..400),
        ) {
            let mut config: NotifierConfig = serde_saphyr::from_str("type: slack\nurl_env: U\n").unwrap();
            config.retry_for = Duration::from_secs(retry_for_s);
            let failure = drift_model::act::SendFailure::retryable("HTTP 503");
            let since = t(0);
            let (mut now, mut attempts) = (since, 0i64);
            let horizon = since + chrono::Duration::seconds(retry_for_s as i64);
            for jitter in jitters {
                attempts += 1;
                match retry_at(&config, attempts, since, now, &failure, jitter) {
                    Some(next) => {
                        prop_assert!(now < horizon, "retried at {now} after the horizon {horizon}");
                        prop_assert!(next > now && next - now <= chrono::Duration::seconds(600));
                        now = next;
                    }
                    None => {
                        prop_assert!(now >= horizon, "parked at {now} before the horizon {horizon}");
                        break;
                    }
                }
            }
        }
    }

    #[test]
    fn a_30_minute_outage_is_retried_through_and_attempts_cap_when_set() {
        let mut config: NotifierConfig = serde_saphyr::from_str("type: slack\nurl_env: U\n").unwrap();
        let failure = drift_model::act::SendFailure::retryable("HTTP 503");
        let thirty = t(30);
        assert!(retry_at(&config, 500, t(0), thirty, &failure, 0.0).is_some(), "24h by default, whatever the count");
        config.attempts = Some(8);
        assert_eq!(retry_at(&config, 8, t(0), t(1), &failure, 0.0), None);
        let mut asked = failure.clone();
        asked.retry_after = Some(Duration::from_secs(3600));
        config.attempts = None;
        assert_eq!(retry_at(&config, 1, t(0), t(0), &asked, 0.0), Some(t(60)), "Retry-After when longer");
    }

    #[test]
    fn the_bucket_refills_at_the_rate() {
        let mut l = RateLimiter::new(RateLimit { messages: 3, per: Duration::from_secs(60) }, t(0));
        for _ in 0..3 {
            l.check(t(0)).unwrap();
        }
        let next = l.check(t(0)).unwrap_err();
        assert_eq!(next, t(0) + chrono::Duration::seconds(20));
        assert!(l.check(next - chrono::Duration::seconds(1)).is_err());
        assert!(l.check(next).is_ok());
        assert!(l.check(t(-5)).is_err(), "a clock going back refills nothing");
        // A long pause refills up to the capacity, no more.
        let later = t(600);
        for _ in 0..3 {
            l.check(later).unwrap();
        }
        assert!(l.check(later).is_err());
    }
}
