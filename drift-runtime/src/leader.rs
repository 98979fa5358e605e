//! Leader election of replicated detectors: the [`Elector`] loop over a
//! [`drift_core::lease::LeaseLock`] (client-go's `LeaderElector`: a standby tries every retry
//! period; the leader renews every retry period and steps down when no renewal succeeded
//! within the renew deadline; on stop it releases the lease), publishing whether this replica
//! leads on a `watch` channel. The detector starts its scans, watch, self-heal and notifier
//! when it turns true and stops them at once when it turns false.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use drift_core::lease::{Attempt, LeaseLock};
use serde::Deserialize;
use tokio::sync::watch;
use tokio::time::Instant;

/// The timings of an election (the `leader_election` block of `drift.yaml`), client-go's
/// defaults: a lease lasts 15 s, the leader steps down when it could not renew for 10 s, and
/// every candidate tries every 2 s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ElectionTimings {
    /// How long a standby waits, after it last saw the lease change, before it takes the lease.
    #[serde(with = "humantime_serde")]
    pub lease_duration: Duration,
    /// How long the leader keeps leading without a successful renewal.
    #[serde(with = "humantime_serde")]
    pub renew_deadline: Duration,
    /// How often candidates try to acquire, and the leader renews.
    #[serde(with = "humantime_serde")]
    pub retry_period: Duration,
}

impl Default for ElectionTimings {
    fn default() -> Self {
        ElectionTimings {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl ElectionTimings {
    /// Checks the order client-go requires (`lease_duration` longer than `renew_deadline`,
    /// longer than `retry_period`, more than 0) and whole seconds for the lease (a Lease holds
    /// seconds). The gap between the first two is what keeps an old leader from scanning after
    /// a standby may have taken over.
    pub fn validate(&self) -> drift_core::Result<()> {
        if self.retry_period.is_zero() {
            return Err(drift_core::Error::config("`leader_election.retry_period` must be more than 0"));
        }
        if self.renew_deadline <= self.retry_period {
            return Err(drift_core::Error::config(format!(
                "`leader_election.renew_deadline` ({:?}) must be longer than `retry_period` ({:?})",
                self.renew_deadline, self.retry_period
            )));
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(drift_core::Error::config(format!(
                "`leader_election.lease_duration` ({:?}) must be longer than `renew_deadline` ({:?})",
                self.lease_duration, self.renew_deadline
            )));
        }
        if self.lease_duration.subsec_nanos() != 0 {
            return Err(drift_core::Error::config(format!(
                "`leader_election.lease_duration` ({:?}) must be whole seconds (a Lease holds seconds)",
                self.lease_duration
            )));
        }
        Ok(())
    }
}

/// One candidate's election loop.
#[derive(Debug, Clone)]
pub struct Elector {
    lock: Arc<dyn LeaseLock>,
    timings: ElectionTimings,
}

impl Elector {
    /// A candidate on `lock` with these timings (checked by [`ElectionTimings::validate`]).
    pub fn new(lock: Arc<dyn LeaseLock>, timings: ElectionTimings) -> drift_core::Result<Self> {
        timings.validate()?;
        Ok(Elector { lock, timings })
    }

    /// The lock.
    pub fn lock(&self) -> &Arc<dyn LeaseLock> {
        &self.lock
    }

    /// The timings.
    pub fn timings(&self) -> ElectionTimings {
        self.timings
    }

    /// Runs until `release` turns true (or its sender is dropped): sends `true` on `leading`
    /// when this candidate takes the lease, `false` the moment it may have lost it (another
    /// holder seen, or no renewal within the renew deadline: an attempt that hangs counts as
    /// failed when the deadline comes). On release, a leader gives the lease up (so a standby
    /// takes over at once) after sending `false`.
    pub async fn run(self, leading: watch::Sender<bool>, mut release: watch::Receiver<bool>) {
        let t = self.timings;
        let what = self.lock.describe();
        let identity = self.lock.identity().to_owned();
        // While leading: the start of the last attempt that renewed the lease.
        let mut renewed: Option<Instant> = None;
        let mut logged_holder: Option<String> = None;
        let mut interrupted = false;
        // The time given to the lock follows the monotonic clock from here (a wall clock that
        // jumps must not shorten or stretch a lease).
        let anchor = (Utc::now(), Instant::now());
        let now = || anchor.0 + chrono::Duration::from_std(anchor.1.elapsed()).unwrap_or(chrono::Duration::zero());
        loop {
            if *release.borrow() {
                break;
            }
            let started = Instant::now();
            // A leader's attempt may last until its deadline; a standby's, one renew deadline.
            let budget = match renewed {
                Some(at) => (at + t.renew_deadline).saturating_duration_since(started),
                None => t.renew_deadline,
            };
            let attempt = tokio::select! {
                r = tokio::time::timeout(budget, self.lock.try_acquire_or_renew(now())) => r,
                _ = release.changed() => {
                    // The attempt may have taken the lease before it was dropped: release below.
                    interrupted = true;
                    break;
                }
            };
            match attempt {
                Ok(Ok(Attempt::Leading { acquired })) => {
                    if renewed.is_none() {
                        tracing::info!(lease = %what, %identity, acquired, "this replica leads: it runs the scans");
                        leading.send_replace(true);
                        logged_holder = None;
                    }
                    renewed = Some(started);
                }
                Ok(Ok(Attempt::Standby { holder })) => {
                    if renewed.take().is_some() {
                        tracing::warn!(lease = %what, %holder, "the lease was taken by another replica; this one stops scanning");
                        leading.send_replace(false);
                    } else if logged_holder.as_deref() != Some(holder.as_str()) {
                        tracing::info!(lease = %what, %holder, "standing by: another replica leads");
                    }
                    logged_holder = Some(holder);
                }
                Ok(Err(e)) if e.kind() == drift_core::ErrorKind::Conflict => {
                    // Another candidate wrote first: the next attempt reads who.
                    tracing::debug!(lease = %what, error = %e, "lost a race for the lease");
                }
                Ok(Err(e)) => {
                    tracing::warn!(lease = %what, error = %e, "leader election attempt failed");
                }
                Err(_) => {
                    tracing::warn!(lease = %what, budget = ?budget, "leader election attempt did not answer in time");
                }
            }
            if let Some(at) = renewed
                && Instant::now() >= at + t.renew_deadline
            {
                tracing::error!(
                    lease = %what, renew_deadline = ?t.renew_deadline,
                    "the lease could not be renewed within the renew deadline; this replica stops scanning"
                );
                renewed = None;
                leading.send_replace(false);
            }
            // A leader never sleeps past its deadline: the next attempt is its last chance.
            let mut pause = t.retry_period + crate::schedule::clock_jitter(t.retry_period);
            if let Some(at) = renewed {
                pause = pause.min((at + t.renew_deadline).saturating_duration_since(Instant::now()));
            }
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = release.changed() => break,
            }
        }
        // Releasing is a no-op unless this candidate holds the lease (the lock checks).
        let was_leading = renewed.is_some() || *leading.borrow();
        if was_leading || interrupted {
            leading.send_replace(false);
            match tokio::time::timeout(t.renew_deadline, self.lock.release(now())).await {
                Ok(Ok(())) if was_leading => {
                    tracing::info!(lease = %what, "lease released; a standby takes over at once")
                }
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(lease = %what, error = %e, "the lease could not be released; a standby takes over when it expires")
                }
                Err(_) => {
                    tracing::warn!(lease = %what, "releasing the lease did not answer in time; a standby takes over when it expires")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::Mutex;

    use async_trait::async_trait;
    use chrono::{DateTime, Utc};
    use drift_core::lease::{LeaseRecord, Step, decide};

    use super::*;

    /// A lease in memory shared by candidates, with a switch that makes every request fail or
    /// hang (an API server that is down or partitioned from this replica).
    #[derive(Debug, Default)]
    struct Shared {
        record: Option<LeaseRecord>,
        down: bool,
        /// The candidate whose requests hang (cut off from the API server).
        cut: Option<String>,
        releases: u32,
    }

    #[derive(Debug)]
    struct MemLock {
        id: String,
        shared: Arc<Mutex<Shared>>,
        observed: Mutex<Option<(LeaseRecord, DateTime<Utc>)>>,
    }

    impl MemLock {
        fn new(id: &str, shared: &Arc<Mutex<Shared>>) -> Arc<MemLock> {
            Arc::new(MemLock { id: id.to_owned(), shared: shared.clone(), observed: Mutex::new(None) })
        }
        async fn gate(&self) -> drift_core::Result<()> {
            let (down, hang) = {
                let s = self.shared.lock().unwrap();
                (s.down, s.cut.as_deref() == Some(self.id.as_str()))
            };
            if hang {
                std::future::pending::<()>().await;
            }
            if down {
                return Err(drift_core::Error::unavailable("the API server is down"));
            }
            Ok(())
        }
    }

    #[async_trait]
    impl LeaseLock for MemLock {
        fn identity(&self) -> &str {
            &self.id
        }
        fn describe(&self) -> String {
            "Lease test/lock".to_owned()
        }
        async fn try_acquire_or_renew(&self, now: DateTime<Utc>) -> drift_core::Result<Attempt> {
            self.gate().await?;
            let mut s = self.shared.lock().unwrap();
            let mut observed = self.observed.lock().unwrap();
            let seen_at = match (&s.record, observed.as_ref()) {
                (Some(r), Some((seen, at))) if seen == r => *at,
                (Some(r), _) => {
                    *observed = Some((r.clone(), now));
                    now
                }
                (None, _) => now,
            };
            match decide(&self.id, s.record.as_ref(), seen_at, now, Duration::from_secs(15)) {
                Step::Held { holder, .. } => Ok(Attempt::Standby { holder }),
                Step::Renew(r) => {
                    s.record = Some(r);
                    Ok(Attempt::Leading { acquired: false })
                }
                Step::Acquire(r) => {
                    s.record = Some(r);
                    Ok(Attempt::Leading { acquired: true })
                }
            }
        }
        async fn release(&self, now: DateTime<Utc>) -> drift_core::Result<()> {
            self.gate().await?;
            let mut s = self.shared.lock().unwrap();
            if let Some(r) = &s.record
                && r.holder() == Some(self.id.as_str())
            {
                s.record = Some(r.released(now));
                s.releases += 1;
            }
            Ok(())
        }
    }

    fn start(lock: Arc<MemLock>) -> (watch::Receiver<bool>, watch::Sender<bool>, tokio::task::JoinHandle<()>) {
        let (tx, rx) = watch::channel(false);
        let (release_tx, release_rx) = watch::channel(false);
        let elector = Elector::new(lock, ElectionTimings::default()).unwrap();
        (rx, release_tx, tokio::spawn(elector.run(tx, release_rx)))
    }

    async fn turns(rx: &mut watch::Receiver<bool>, want: bool) -> Instant {
        rx.wait_for(|v| *v == want).await.unwrap();
        Instant::now()
    }

    #[test]
    fn timings_must_leave_a_gap_between_deadline_and_expiry() {
        ElectionTimings::default().validate().unwrap();
        let t = |l, d, r| ElectionTimings {
            lease_duration: Duration::from_secs(l),
            renew_deadline: Duration::from_secs(d),
            retry_period: Duration::from_secs(r),
        };
        for (bad, word) in
            [(t(10, 10, 2), "lease_duration"), (t(15, 2, 2), "renew_deadline"), (t(15, 10, 0), "retry_period")]
        {
            let e = bad.validate().unwrap_err();
            assert!(e.to_string().contains(word), "{e}");
        }
        let e = ElectionTimings { lease_duration: Duration::from_millis(15_500), ..ElectionTimings::default() }
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("whole seconds"), "{e}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_candidate_leads_and_releases_on_stop() {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let (mut rx, release, task) = start(MemLock::new("a", &shared));
        turns(&mut rx, true).await;
        release.send_replace(true);
        task.await.unwrap();
        assert!(!*rx.borrow());
        let s = shared.lock().unwrap();
        assert_eq!((s.releases, s.record.as_ref().unwrap().holder()), (1, None));
    }

    #[tokio::test(start_paused = true)]
    async fn a_leader_that_cannot_renew_steps_down_at_the_deadline_before_a_standby_takes_over() {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let (mut a, _ra, _ta) = start(MemLock::new("a", &shared));
        turns(&mut a, true).await;
        let (mut b, _rb, _tb) = start(MemLock::new("b", &shared));
        // b tries a few times and stands by.
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(*a.borrow() && !*b.borrow());
        // a's requests hang from now on (cut off); b still reaches the lease.
        let cut = Instant::now();
        shared.lock().unwrap().cut = Some("a".into());
        let stepped_down = turns(&mut a, false).await;
        let after = stepped_down - cut;
        assert!(after <= Duration::from_secs(10), "a steps down within its renew deadline: {after:?}");
        let took_over = turns(&mut b, true).await;
        assert!(took_over > stepped_down, "never two leaders");
        // a renewed last at most one retry period (2 s plus 10% jitter) before the cut; b saw
        // that at most one retry period after it, and tries at most one retry period after the
        // lease expired on its clock.
        let within = took_over - cut;
        assert!(
            within <= Duration::from_millis(15_000 + 3 * 2_200),
            "b leads within the lease duration plus the retry periods: {within:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_leader_whose_lease_was_taken_steps_down_at_its_next_attempt() {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let (mut a, _ra, _ta) = start(MemLock::new("a", &shared));
        turns(&mut a, true).await;
        {
            let mut s = shared.lock().unwrap();
            let r = s.record.clone().unwrap();
            s.record = Some(LeaseRecord { holder: Some("intruder".into()), transitions: r.transitions + 1, ..r });
        }
        let at = Instant::now();
        let stepped_down = turns(&mut a, false).await;
        assert!(stepped_down - at <= Duration::from_secs(3), "{:?}", stepped_down - at);
    }

    #[tokio::test(start_paused = true)]
    async fn failed_renewals_within_the_deadline_keep_the_lead() {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let (mut a, _ra, _ta) = start(MemLock::new("a", &shared));
        turns(&mut a, true).await;
        shared.lock().unwrap().down = true;
        tokio::time::sleep(Duration::from_secs(6)).await;
        assert!(*a.borrow(), "6 s of errors are within the 10 s deadline");
        shared.lock().unwrap().down = false;
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert!(*a.borrow(), "renewed again, still leading");
        shared.lock().unwrap().down = true;
        let at = Instant::now();
        let lost = turns(&mut a, false).await;
        assert!(lost - at <= Duration::from_secs(10), "{:?}", lost - at);
    }

    /// A live source whose reads take a minute and are counted.
    #[derive(Debug)]
    struct Slow {
        inner: drift_core::memory::MemoryLiveSource,
        fetches: std::sync::atomic::AtomicUsize,
    }

    #[async_trait]
    impl drift_core::LiveSource for Slow {
        fn cluster(&self) -> &str {
            self.inner.cluster()
        }
        async fn fetch(&self, scope: &drift_core::Scope) -> drift_core::Result<drift_core::LiveSnapshot> {
            self.fetches.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(60)).await;
            self.inner.fetch(scope).await
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_leader_that_loses_the_lease_mid_scan_records_nothing_and_scans_again_once_it_leads() {
        use drift_core::DriftStore;
        use std::sync::atomic::Ordering;
        let cm = |mode: &str| {
            drift_core::Resource::from_object(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": "shop"}, "data": {"mode": mode}}))
            .unwrap()
        };
        let shared = Arc::new(Mutex::new(Shared::default()));
        let store = Arc::new(drift_core::memory::MemoryStore::new());
        let live = Arc::new(Slow {
            inner: drift_core::memory::MemoryLiveSource::new("homelab", vec![cm("slow")]),
            fetches: Default::default(),
        });
        let detector = crate::Detector::builder()
            .desired(Arc::new(drift_core::memory::MemoryDesiredSource::new("platform", vec![cm("fast")])))
            .live(live.clone())
            .store(crate::Store::new(store.clone()))
            .watch(false)
            .interval(Duration::from_secs(30))
            .leader_election(Elector::new(MemLock::new("a", &shared), ElectionTimings::default()).unwrap())
            .build()
            .unwrap();
        let metrics = detector.scanner().metrics().clone();
        assert!(!metrics.is_leader(), "a candidate stands by until it holds the lease");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serve = tokio::spawn(detector.run(async move {
            let _ = stopped.await;
        }));
        while live.fetches.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(metrics.is_leader());
        // Cut off from the lease while its first pass reads the cluster.
        shared.lock().unwrap().cut = Some("a".into());
        tokio::time::sleep(Duration::from_secs(11)).await;
        assert!(!metrics.is_leader(), "stepped down at the renew deadline");
        tokio::time::sleep(Duration::from_secs(120)).await;
        assert!(store.recent_scans(10).await.unwrap().is_empty(), "the pass was aborted before its report");
        assert_eq!(live.fetches.load(Ordering::SeqCst), 1, "no pass while standing by");
        // Back in touch: it leads again and scans.
        shared.lock().unwrap().cut = None;
        tokio::time::sleep(Duration::from_secs(80)).await;
        assert!(metrics.is_leader());
        assert!(!store.recent_scans(10).await.unwrap().is_empty(), "a pass recorded under the new term");
        stop.send(()).unwrap();
        serve.await.unwrap();
        assert!(!metrics.is_leader());
        let s = shared.lock().unwrap();
        assert_eq!((s.releases, s.record.as_ref().unwrap().holder()), (1, None), "released on stop");
    }
}
