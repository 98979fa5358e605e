//! [`Metrics`] without the `prometheus` feature: what the runtime reads back, and nothing else.
//!
//! It has the same methods as the Prometheus registry of the `prometheus` feature, minus
//! rendering, so that the runtime records in one way whichever is compiled (features add up:
//! another crate of the build may turn `prometheus` on, and the same calls must still compile).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use drift_model::{ErrorKind, ScanReport};

/// Whether this replica leads and how many pairs the watch does not see; every other recording
/// is a no-op. Cheap to clone; clones share the same values.
#[derive(Debug, Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// True while this replica leads (or leader election is off).
    leader: AtomicBool,
    /// (kind, namespace) pairs whose changes the watch does not see now.
    watch_out_of_sync: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Fresh values: leading (a replica without leader election scans), watch in sync.
    pub fn new() -> Self {
        Metrics { inner: Arc::new(Inner { leader: AtomicBool::new(true), watch_out_of_sync: AtomicU64::new(0) }) }
    }

    /// Says whether this replica leads.
    pub fn set_leader(&self, leader: bool) {
        self.inner.leader.store(leader, Ordering::Relaxed);
    }

    /// Says how many (kind, namespace) pairs the watch does not see now.
    pub fn set_watch_out_of_sync(&self, pairs: usize) {
        self.inner.watch_out_of_sync.store(u64::try_from(pairs).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// How many (kind, namespace) pairs the watch does not see now.
    pub fn watch_out_of_sync(&self) -> u64 {
        self.inner.watch_out_of_sync.load(Ordering::Relaxed)
    }

    /// Whether this replica leads: true unless leader election said it stands by.
    pub fn is_leader(&self) -> bool {
        self.inner.leader.load(Ordering::Relaxed)
    }

    /// Does nothing (a finished scan).
    pub fn record_scan(&self, _report: &ScanReport, _duration: Duration) {}

    /// Does nothing (a source error that no scan report carries).
    pub fn record_source_error(&self, _kind: ErrorKind) {}

    /// Does nothing (one watch lag).
    pub fn observe_watch_lag(&self, _lag: Duration) {}

    /// Does nothing (`n` delivery attempts of `notifier` with an outcome).
    pub fn record_notification(&self, _notifier: &str, _outcome: &str, _n: u64) {}

    /// Does nothing (the time from an event to the receiver's success answer).
    pub fn observe_notification_latency(&self, _notifier: &str, _seconds: f64) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_what_the_runtime_reads_back() {
        let m = Metrics::new();
        assert!(m.is_leader(), "a replica without leader election leads");
        assert_eq!(m.watch_out_of_sync(), 0);
        let shared = m.clone();
        shared.set_leader(false);
        shared.set_watch_out_of_sync(3);
        assert!(!m.is_leader());
        assert_eq!(m.watch_out_of_sync(), 3);
        m.record_source_error(ErrorKind::Unavailable);
        m.record_notification("chat", "sent", 1);
    }
}
