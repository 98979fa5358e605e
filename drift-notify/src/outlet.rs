//! A configured notifier as the delivery loop of `drift-runtime` sees it
//! ([`drift_model::act::Outlet`]): its routing and `for:` hold, reminders, digest, rate limit
//! and backoff from its [`NotifierConfig`], and one [`Message`] per batch sent through its
//! [`Notifier`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use drift_model::act::{DriftEvent, Outlet, SendFailure};
use url::Url;

use crate::{Message, Notifier, NotifierConfig, RateLimiter};

/// A [`Notifier`] with its delivery policy.
#[derive(Debug)]
pub struct NotifierOutlet {
    notifier: Arc<dyn Notifier>,
    limiter: Option<Mutex<RateLimiter>>,
    link: Option<Url>,
}

impl NotifierOutlet {
    /// The outlet of a built notifier; `link` is where messages point for a drift
    /// (`{link}/drifts/{id}`).
    pub fn new(notifier: Arc<dyn Notifier>, link: Option<Url>) -> Self {
        let limiter = notifier.config().rate_limit.map(|limit| Mutex::new(RateLimiter::new(limit, Utc::now())));
        NotifierOutlet { notifier, limiter, link }
    }

    fn config(&self) -> &NotifierConfig {
        self.notifier.config()
    }
}

/// Builds the outlet of a notifier configuration ([`crate::build`] and [`NotifierOutlet::new`]).
pub fn outlet(config: &NotifierConfig, link: Option<Url>) -> drift_model::Result<Arc<dyn Outlet>> {
    Ok(Arc::new(NotifierOutlet::new(crate::build(config)?, link)))
}

fn chrono(d: std::time::Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

/// A number in 0..1 for the jitter of a delay, from the system's random source.
fn jitter() -> f64 {
    let mut bytes = [0u8; 8];
    // Without randomness the delay is the middle of its range: still bounded, less spread.
    if getrandom::fill(&mut bytes).is_err() {
        return 0.5;
    }
    (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
}

#[async_trait]
impl Outlet for NotifierOutlet {
    fn name(&self) -> &str {
        self.notifier.name()
    }

    fn route(&self, event: &DriftEvent) -> Option<DateTime<Utc>> {
        let config = self.config();
        config.takes(event).then(|| if event.kind.announces_open() { event.at + chrono(config.for_) } else { event.at })
    }

    fn holds(&self) -> bool {
        !self.config().for_.is_zero()
    }

    fn reminder(&self) -> Option<chrono::Duration> {
        self.config().reminder.map(chrono)
    }

    fn digest_due(&self, now: DateTime<Utc>) -> Option<String> {
        self.config().digest.as_ref()?.due_day(now).map(|d| d.to_string())
    }

    fn admit(&self, now: DateTime<Utc>) -> Result<(), DateTime<Utc>> {
        match &self.limiter {
            Some(l) => l.lock().unwrap_or_else(PoisonError::into_inner).check(now),
            None => Ok(()),
        }
    }

    fn retry_at(
        &self,
        attempts: i64,
        failing_since: DateTime<Utc>,
        now: DateTime<Utc>,
        failure: &SendFailure,
    ) -> Option<DateTime<Utc>> {
        crate::retry_at(self.config(), attempts, failing_since, now, failure, jitter())
    }

    /// At the slowest pace of the notifier's retries: `backoff.max`.
    fn probe_every(&self) -> Option<chrono::Duration> {
        Some(chrono(self.config().backoff.max))
    }

    async fn send(&self, events: &[DriftEvent]) -> Result<(), SendFailure> {
        let learned: BTreeMap<i64, drift_model::act::Learned> =
            events.iter().filter_map(|e| Some((e.drift_id()?, e.learned?))).collect();
        let message = Message::new(self.notifier.name(), events.to_vec(), self.link.clone()).with_learned(learned);
        self.notifier.send(&message).await
    }
}
