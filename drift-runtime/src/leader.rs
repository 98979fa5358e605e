//! Leader election of replicated detectors: the [`Elector`] loop over a
//! [`drift_core::lease::LeaseLock`] (client-go's `LeaderElector`: the leader renews every retry
//! period and steps down when no renewal succeeded within the renew deadline; on stop it
//! releases the lease), publishing whether this replica leads on a `watch` channel. The
//! detector starts its scans, watch, self-heal and notifier when it turns true and stops them
//! at once when it turns false.
//!
//! A standby whose lock can watch the lease (`drift_kube::KubeLease`) does not poll: it waits
//! for the lease to change and tries exactly when the holder's claim ends (its last renewal, as
//! the watch saw it, plus the lease duration) or at once when the lease is released. Without a
//! watch (or while it fails) it tries every retry period, as client-go does. Either way, taking
//! the lease is the lock's compare-and-swap: the watch only decides when to try.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use drift_core::lease::{Attempt, LeaseLock, Watched};
use serde::Deserialize;
use tokio::sync::watch;
use tokio::time::Instant;

/// How long a standby polls after its watch on the lease failed before it watches again.
pub const WATCH_RETRY: Duration = Duration::from_secs(30);

/// The timings of an election (the `leader_election` block of `drift.yaml`). The defaults are
/// for a takeover within 5 s of the leader's death: a lease lasts 4 s, the leader renews every
/// second and steps down when it could not renew for 3 s. (client-go's are 15 s, 10 s and 2 s,
/// with a standby that polls: a takeover within 15 to 19.4 s.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ElectionTimings {
    /// How long a standby waits, after it last saw the lease change, before it takes the lease.
    #[serde(with = "humantime_serde")]
    pub lease_duration: Duration,
    /// How long the leader keeps leading without a successful renewal.
    #[serde(with = "humantime_serde")]
    pub renew_deadline: Duration,
    /// How often the leader renews, and a standby that cannot watch tries to acquire.
    #[serde(with = "humantime_serde")]
    pub retry_period: Duration,
}

impl Default for ElectionTimings {
    fn default() -> Self {
        ElectionTimings {
            lease_duration: Duration::from_secs(4),
            renew_deadline: Duration::from_secs(3),
            retry_period: Duration::from_secs(1),
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

    /// How long the work of a term given up or lost is awaited before the lease is released or
    /// taken again: the lease duration. Whoever stops the work aborts what has not stopped
    /// sooner, within [`ElectionTimings::handover_limit`].
    pub fn handover_wait(&self) -> Duration {
        self.lease_duration
    }

    /// How long the work of a term is given to stop before it is aborted: the renew deadline,
    /// shorter than [`ElectionTimings::handover_wait`] (validated), so it is aborted before the
    /// elector stops waiting for it.
    pub fn handover_limit(&self) -> Duration {
        self.renew_deadline
    }
}

/// The terms of one lease and the work done in each, for a handover that waits for the work:
/// the [`Elector`] numbers every term in which it takes the lease and publishes, in one value,
/// the term and whether it is held ([`Terms::lead`], [`Terms::subscribe`]: after `leading`
/// turned true, and after it turned false); whoever runs the work starts it for the term it
/// read there and says when the work of that term has stopped ([`Terms::stopped`]). One flag
/// shared by every term would let a term be released on the word of an earlier one (a `stopped`
/// still true from before the work of a new term started), so each term is acknowledged by its
/// own number; and the number travels with the state, so a term read as ended is never one
/// that began meanwhile.
#[derive(Debug)]
pub struct Terms {
    lead: watch::Sender<Lead>,
    stopped: watch::Sender<u64>,
}

/// A lease's last term and whether it is held now (see [`Terms`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Lead {
    /// The last term begun (0 before the first).
    pub term: u64,
    /// Whether that term is held now (false: it ended, or none began yet).
    pub held: bool,
}

impl Terms {
    /// No term yet (term 0, stopped).
    pub fn new() -> Arc<Terms> {
        Arc::new(Terms { lead: watch::channel(Lead::default()).0, stopped: watch::channel(0).0 })
    }

    /// The term `leading` last turned true for (0 before the first).
    pub fn current(&self) -> u64 {
        self.lead.borrow().term
    }

    /// The last term and whether it is held, read together.
    pub fn lead(&self) -> Lead {
        *self.lead.borrow()
    }

    /// Follows [`Terms::lead`]: changes when a term begins (after `leading` turned true for it)
    /// and when it ends (after `leading` turned false).
    pub fn subscribe(&self) -> watch::Receiver<Lead> {
        self.lead.subscribe()
    }

    /// The work of `term` (and of every term before it) has stopped.
    pub fn stopped(&self, term: u64) {
        self.stopped.send_if_modified(|s| {
            let newer = term > *s;
            if newer {
                *s = term;
            }
            newer
        });
    }

    /// The last term whose work said it stopped.
    pub fn last_stopped(&self) -> u64 {
        *self.stopped.borrow()
    }

    pub(crate) fn begin(&self) -> u64 {
        let mut begun = 0;
        self.lead.send_modify(|l| {
            *l = Lead { term: l.term + 1, held: true };
            begun = l.term;
        });
        begun
    }

    pub(crate) fn end(&self) {
        self.lead.send_if_modified(|l| std::mem::replace(&mut l.held, false));
    }

    /// Waits until the work of `term` has stopped, at most `limit`; whether it did.
    pub(crate) async fn wait(&self, term: u64, limit: Duration) -> bool {
        let mut rx = self.stopped.subscribe();
        tokio::time::timeout(limit, rx.wait_for(|s| *s >= term)).await.is_ok()
    }
}

/// One candidate's election loop.
#[derive(Debug, Clone)]
pub struct Elector {
    lock: Arc<dyn LeaseLock>,
    timings: ElectionTimings,
    /// The terms of the work `leading` drives: a term given up (a release) or lost is followed
    /// by a wait for its work to stop (at most [`ElectionTimings::handover_wait`]) before the
    /// lease is released or taken again.
    terms: Option<Arc<Terms>>,
}

impl Elector {
    /// A candidate on `lock` with these timings (checked by [`ElectionTimings::validate`]).
    pub fn new(lock: Arc<dyn LeaseLock>, timings: ElectionTimings) -> drift_core::Result<Self> {
        timings.validate()?;
        Ok(Elector { lock, timings, terms: None })
    }

    /// Hands over only once the work has stopped: on release, after `leading` turned false, the
    /// lease is kept (renewed every retry period) until the work of the term says it stopped
    /// ([`Terms::stopped`]), at most [`ElectionTimings::handover_wait`], and only then released,
    /// so a write of that work still in flight lands before another replica may take the lease.
    /// A term lost (another holder, or no renewal within the renew deadline) is not followed by
    /// another until its work stopped (same bound), so the work of a lost term never sees
    /// `leading` true again. Without it, the lease is released right after `leading` turns
    /// false.
    #[must_use]
    pub fn after_stopped(mut self, terms: Arc<Terms>) -> Self {
        self.terms = Some(terms);
        self
    }

    /// The lock.
    pub fn lock(&self) -> &Arc<dyn LeaseLock> {
        &self.lock
    }

    /// The timings.
    pub fn timings(&self) -> ElectionTimings {
        self.timings
    }

    /// The term held ended (after `leading` turned false): published with its number.
    fn end_term(&self) {
        if let Some(terms) = &self.terms {
            terms.end();
        }
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
        // The term held now (with `terms`), and a lost one whose work has not said it stopped.
        let mut term: u64 = 0;
        let mut lost: Option<u64> = None;
        // After the watch failed: poll until then.
        let mut watch_failed: Option<Instant> = None;
        // The time given to the lock follows the monotonic clock from here (a wall clock that
        // jumps must not shorten or stretch a lease).
        let anchor = (Utc::now(), Instant::now());
        let now = move || anchor.0 + chrono::Duration::from_std(anchor.1.elapsed()).unwrap_or(chrono::Duration::zero());
        // The instant `at` (on the clock above) is reached.
        let instant_of = |at: DateTime<Utc>| Instant::now() + (at - now()).to_std().unwrap_or(Duration::ZERO);
        'election: loop {
            if *release.borrow() {
                break;
            }
            // A term lost: its work stops before this candidate may lead again (else that work,
            // still running, would see `leading` true again and write under the next term).
            if let (Some(old), Some(terms)) = (lost.take(), &self.terms) {
                tokio::select! {
                    done = terms.wait(old, t.handover_wait()) => if !done {
                        tracing::warn!(lease = %what, wait = ?t.handover_wait(), "the work of a lost term did not say it stopped in time");
                    },
                    _ = release.changed() => break,
                }
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
            // While standing by: when the holder's claim ends unless it renews (this clock).
            let mut expires: Option<DateTime<Utc>> = None;
            match attempt {
                Ok(Ok(Attempt::Leading { acquired })) => {
                    if renewed.is_none() {
                        tracing::info!(lease = %what, %identity, acquired, "this replica leads: it runs the scans");
                        leading.send_replace(true);
                        if let Some(terms) = &self.terms {
                            term = terms.begin();
                        }
                        logged_holder = None;
                    }
                    renewed = Some(started);
                }
                Ok(Ok(Attempt::Standby { holder, expires: until })) => {
                    if renewed.take().is_some() {
                        tracing::warn!(lease = %what, %holder, "the lease was taken by another replica; this one stops scanning");
                        leading.send_replace(false);
                        self.end_term();
                        lost = Some(term);
                    } else if logged_holder.as_deref() != Some(holder.as_str()) {
                        tracing::info!(lease = %what, %holder, "standing by: another replica leads");
                    }
                    logged_holder = Some(holder);
                    expires = Some(until);
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
                self.end_term();
                lost = Some(term);
            }
            // The next attempt: a leader's after one retry period, never past its deadline (the
            // next attempt is its last chance); a polling standby's after one retry period, or
            // when the claim ends if that is sooner; a watching standby's when the claim ends,
            // or when the watch shows the lease free.
            let poll = t.retry_period + crate::schedule::clock_jitter(t.retry_period);
            let mut wake = Instant::now() + poll;
            if let Some(at) = renewed {
                wake = wake.min(at + t.renew_deadline);
            }
            if watch_failed.is_some_and(|at| Instant::now() >= at + WATCH_RETRY) {
                watch_failed = None;
            }
            let mut watching = renewed.is_none() && watch_failed.is_none() && self.lock.can_watch();
            if renewed.is_none()
                && let Some(until) = expires
            {
                let at = instant_of(until);
                wake = if watching { at } else { wake.min(at) };
            }
            loop {
                tokio::select! {
                    () = tokio::time::sleep_until(wake) => break,
                    _ = release.changed() => break 'election,
                    seen = self.lock.changed(&now), if watching => match seen {
                        Ok(Watched::Held { holder, expires: until }) => {
                            if logged_holder.as_deref() != Some(holder.as_str()) {
                                tracing::info!(lease = %what, %holder, "standing by: another replica leads");
                                logged_holder = Some(holder);
                            }
                            wake = instant_of(until);
                        }
                        Ok(Watched::Open) => break,
                        Ok(Watched::Ended) => {
                            // Resumed after the next attempt; until then, poll.
                            watching = false;
                            wake = wake.min(Instant::now() + poll);
                        }
                        Err(e) => {
                            tracing::warn!(
                                lease = %what, error = %e, retry = ?WATCH_RETRY,
                                "the lease cannot be watched; this standby polls it every retry period meanwhile"
                            );
                            watch_failed = Some(Instant::now());
                            watching = false;
                            wake = wake.min(Instant::now() + poll);
                        }
                    },
                }
            }
        }
        // Releasing is a no-op unless this candidate holds the lease (the lock checks).
        let was_leading = renewed.is_some() || *leading.borrow();
        if was_leading || interrupted {
            leading.send_replace(false);
            self.end_term();
            if was_leading && let Some(terms) = &self.terms {
                // The lease is kept, renewed every retry period, until the work of this term
                // says it stopped (or the wait ends): it must not expire under that work. Only
                // within the renew deadline after the last renewal, as while leading: past it
                // the lease may have expired and been taken, and an attempt then would take it
                // afresh (a new term) rather than renew it.
                let until = Instant::now() + t.handover_wait();
                let mut stopped = std::pin::pin!(terms.wait(term, t.handover_wait()));
                let mut last_renewal = renewed;
                loop {
                    let renewing = last_renewal.is_some_and(|at| Instant::now() < at + t.renew_deadline);
                    let next = (Instant::now() + t.retry_period).min(until);
                    tokio::select! {
                        done = &mut stopped => {
                            if done {
                                tracing::debug!(lease = %what, "the work of this lease has stopped; releasing it");
                            } else {
                                tracing::warn!(
                                    lease = %what, wait = ?t.handover_wait(),
                                    "the work of this lease did not say it stopped in time; the lease is released anyway"
                                );
                            }
                            break;
                        }
                        () = tokio::time::sleep_until(next), if renewing => {
                            let Some(deadline) = last_renewal.map(|at| at + t.renew_deadline) else { continue };
                            let started = Instant::now();
                            let budget = until.min(deadline).saturating_duration_since(started);
                            if budget.is_zero() {
                                continue;
                            }
                            match tokio::time::timeout(budget, self.lock.try_acquire_or_renew(now())).await {
                                Ok(Ok(Attempt::Leading { acquired: false })) => last_renewal = Some(started),
                                Ok(Ok(Attempt::Leading { acquired: true })) => {
                                    // The lease had expired and nobody took it: this attempt took
                                    // it again. Not renewed any more; released below.
                                    tracing::warn!(lease = %what, "the lease expired while its work stopped");
                                    last_renewal = None;
                                }
                                Ok(Ok(Attempt::Standby { holder, .. })) => {
                                    tracing::warn!(lease = %what, %holder, "the lease was taken while its work stopped");
                                    last_renewal = None;
                                }
                                Ok(Err(e)) => tracing::warn!(lease = %what, error = %e, "renewing the lease while its work stops failed"),
                                Err(_) => tracing::warn!(lease = %what, "renewing the lease while its work stops did not answer in time"),
                            }
                        }
                    }
                }
            }
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
pub(crate) mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::Mutex;

    use async_trait::async_trait;
    use chrono::{DateTime, Utc};
    use drift_core::lease::{LeaseRecord, Step, decide};

    use super::*;

    /// client-go's timings, with a standby that polls: the loop's rules at a slower pace.
    const CLIENT_GO: ElectionTimings = ElectionTimings {
        lease_duration: Duration::from_secs(15),
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_secs(2),
    };

    /// A lease in memory shared by candidates, with a switch that makes every request fail or
    /// hang (an API server that is down or partitioned from this replica), and a version that
    /// every write bumps (what a watch sees).
    #[derive(Debug)]
    pub(crate) struct Shared {
        pub(crate) record: Option<LeaseRecord>,
        down: bool,
        /// The candidate whose requests hang (cut off from the API server).
        cut: Option<String>,
        pub(crate) releases: u32,
        /// Attempts made by each candidate.
        attempts: std::collections::BTreeMap<String, u32>,
        /// Every write that took or renewed the lease: by whom, when.
        writes: Vec<(String, Instant)>,
        changes: watch::Sender<u64>,
    }

    impl Default for Shared {
        fn default() -> Self {
            Shared {
                record: None,
                down: false,
                cut: None,
                releases: 0,
                attempts: Default::default(),
                writes: Vec::new(),
                changes: watch::channel(0).0,
            }
        }
    }

    impl Shared {
        fn set(&mut self, record: LeaseRecord) {
            self.record = Some(record);
            self.changes.send_modify(|v| *v += 1);
        }

        fn last_write_by(&self, id: &str) -> Instant {
            self.writes.iter().rev().find(|(who, _)| who == id).map(|(_, at)| *at).unwrap()
        }
    }

    /// How a [`MemLock`] watches.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub(crate) enum Watching {
        No,
        Yes,
        /// It can, but every watch fails (RBAC without `watch`).
        Fails,
    }

    #[derive(Debug)]
    pub(crate) struct MemLock {
        id: String,
        shared: Arc<Mutex<Shared>>,
        duration: Duration,
        watching: Watching,
        seen: tokio::sync::Mutex<watch::Receiver<u64>>,
        observed: Mutex<Option<(LeaseRecord, DateTime<Utc>)>>,
    }

    impl MemLock {
        /// A polling candidate claiming client-go's 15 s.
        fn new(id: &str, shared: &Arc<Mutex<Shared>>) -> Arc<MemLock> {
            MemLock::with(id, shared, CLIENT_GO.lease_duration, Watching::No)
        }

        pub(crate) fn with(
            id: &str,
            shared: &Arc<Mutex<Shared>>,
            duration: Duration,
            watching: Watching,
        ) -> Arc<MemLock> {
            let seen = tokio::sync::Mutex::new(shared.lock().unwrap().changes.subscribe());
            Arc::new(MemLock {
                id: id.to_owned(),
                shared: shared.clone(),
                duration,
                watching,
                seen,
                observed: Mutex::new(None),
            })
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

        fn observe(&self, record: Option<&LeaseRecord>, now: DateTime<Utc>) -> DateTime<Utc> {
            let mut observed = self.observed.lock().unwrap();
            match (record, observed.as_ref()) {
                (Some(r), Some((seen, at))) if seen == r => *at,
                (Some(r), _) => {
                    *observed = Some((r.clone(), now));
                    now
                }
                (None, _) => now,
            }
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
            *self.shared.lock().unwrap().attempts.entry(self.id.clone()).or_default() += 1;
            self.gate().await?;
            let mut s = self.shared.lock().unwrap();
            let seen_at = self.observe(s.record.as_ref(), now);
            let (record, acquired) = match decide(&self.id, s.record.as_ref(), seen_at, now, self.duration) {
                Step::Held { holder, expires } => return Ok(Attempt::Standby { holder, expires }),
                Step::Renew(r) => (r, false),
                Step::Acquire(r) => (r, true),
            };
            self.observe(Some(&record), now);
            s.set(record);
            s.writes.push((self.id.clone(), Instant::now()));
            Ok(Attempt::Leading { acquired })
        }
        async fn release(&self, now: DateTime<Utc>) -> drift_core::Result<()> {
            self.gate().await?;
            let mut s = self.shared.lock().unwrap();
            if let Some(r) = s.record.clone()
                && r.holder() == Some(self.id.as_str())
            {
                s.set(r.released(now));
                s.releases += 1;
            }
            Ok(())
        }
        fn can_watch(&self) -> bool {
            self.watching != Watching::No
        }
        async fn changed(&self, clock: &(dyn Fn() -> DateTime<Utc> + Send + Sync)) -> drift_core::Result<Watched> {
            assert_ne!(self.watching, Watching::No, "never called on a lock that cannot watch");
            if self.watching == Watching::Fails {
                return Err(drift_core::Error::permission_denied("leases \"lock\" is forbidden: cannot watch"));
            }
            let mut seen = self.seen.lock().await;
            if seen.changed().await.is_err() {
                return Ok(Watched::Ended);
            }
            self.gate().await?;
            let now = clock();
            let record = self.shared.lock().unwrap().record.clone();
            let observed_at = self.observe(record.as_ref(), now);
            Ok(Watched::judge(&self.id, record.as_ref(), observed_at, now))
        }
    }

    fn start(lock: Arc<MemLock>) -> (watch::Receiver<bool>, watch::Sender<bool>, tokio::task::JoinHandle<()>) {
        start_with(lock, CLIENT_GO)
    }

    fn start_with(
        lock: Arc<MemLock>,
        timings: ElectionTimings,
    ) -> (watch::Receiver<bool>, watch::Sender<bool>, tokio::task::JoinHandle<()>) {
        let (tx, rx) = watch::channel(false);
        let (release_tx, release_rx) = watch::channel(false);
        let elector = Elector::new(lock, timings).unwrap();
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

    /// An elector with terms on the default timings (a 4 s lease, renewed every second).
    fn start_with_terms(
        lock: Arc<MemLock>,
    ) -> (watch::Receiver<bool>, watch::Sender<bool>, Arc<Terms>, tokio::task::JoinHandle<()>) {
        let (tx, rx) = watch::channel(false);
        let (release_tx, release_rx) = watch::channel(false);
        let terms = Terms::new();
        let elector = Elector::new(lock, ElectionTimings::default()).unwrap().after_stopped(terms.clone());
        (rx, release_tx, terms, tokio::spawn(elector.run(tx, release_rx)))
    }

    #[tokio::test(start_paused = true)]
    async fn on_release_the_lease_is_given_up_only_once_the_work_has_stopped_or_after_the_wait() {
        let t = ElectionTimings::default();
        for stops in [true, false] {
            let shared = Arc::new(Mutex::new(Shared::default()));
            let (mut rx, release_tx, terms, task) =
                start_with_terms(MemLock::with("a", &shared, t.lease_duration, Watching::No));
            turns(&mut rx, true).await;
            let term = terms.current();
            assert_eq!(term, 1);
            release_tx.send_replace(true);
            let told = turns(&mut rx, false).await;
            // Told to stop, the work has not stopped yet: the lease is still held.
            tokio::time::sleep(Duration::from_secs(1)).await;
            assert_eq!(shared.lock().unwrap().releases, 0, "released before the work stopped");
            if stops {
                terms.stopped(term);
            }
            task.await.unwrap();
            let waited = Instant::now() - told;
            let s = shared.lock().unwrap();
            assert_eq!((s.releases, s.record.as_ref().unwrap().holder()), (1, None));
            if stops {
                assert!(waited < t.handover_wait(), "released once stopped: {waited:?}");
            } else {
                assert!(waited >= t.handover_wait(), "released at the end of the wait anyway: {waited:?}");
            }
        }
    }

    /// The review's finding: the lease was not renewed while the work was awaited, so with the
    /// defaults it could end (4 s after its last renewal) before the work stopped and a standby
    /// take it under that work.
    #[tokio::test(start_paused = true)]
    async fn the_lease_is_renewed_while_the_work_stops_so_no_standby_takes_it_before_the_release() {
        let t = ElectionTimings::default();
        let shared = Arc::new(Mutex::new(Shared::default()));
        let (mut a, release_a, terms, task_a) =
            start_with_terms(MemLock::with("a", &shared, t.lease_duration, Watching::Yes));
        turns(&mut a, true).await;
        let (mut b, _rb, _tb) = start_with(MemLock::with("b", &shared, t.lease_duration, Watching::Yes), t);
        tokio::time::sleep(Duration::from_secs(5)).await;
        release_a.send_replace(true);
        let told = turns(&mut a, false).await;
        // The work takes 3.9 s to stop (within the renew deadline, plus the time to say so):
        // past the lease duration after the last renewal before the release.
        tokio::time::sleep(Duration::from_millis(3_900)).await;
        assert!(!*b.borrow(), "the standby took the lease while the work was stopping");
        assert_eq!(shared.lock().unwrap().releases, 0);
        assert!(shared.lock().unwrap().last_write_by("a") > told, "renewed while the work stopped");
        terms.stopped(terms.current());
        task_a.await.unwrap();
        let released = Instant::now();
        let took_over = turns(&mut b, true).await;
        assert_eq!(shared.lock().unwrap().releases, 1);
        assert!(took_over - released < Duration::from_millis(50), "taken on the release: {:?}", took_over - released);
    }

    /// The review's finding: while its work stopped, a released leader went on renewing past the
    /// renew deadline (the lease possibly expired meanwhile: an attempt then takes it afresh, a
    /// new transition, just before it is released). It renews only within the deadline after its
    /// last renewal, as while leading.
    #[tokio::test(start_paused = true)]
    async fn a_lease_given_up_is_not_renewed_past_the_renew_deadline_while_its_work_stops() {
        let t = ElectionTimings::default();
        let shared = Arc::new(Mutex::new(Shared::default()));
        let (mut rx, release_tx, _terms, task) =
            start_with_terms(MemLock::with("a", &shared, t.lease_duration, Watching::No));
        turns(&mut rx, true).await;
        // Half a second after a renewal, the release; the API server is down from then on.
        let writes = shared.lock().unwrap().writes.len();
        while shared.lock().unwrap().writes.len() == writes {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let last = shared.lock().unwrap().last_write_by("a");
        tokio::time::sleep(Duration::from_millis(500)).await;
        shared.lock().unwrap().down = true;
        release_tx.send_replace(true);
        turns(&mut rx, false).await;
        // Back just before the renew deadline; the work never says it stopped.
        tokio::time::sleep_until(last + t.renew_deadline - Duration::from_millis(300)).await;
        shared.lock().unwrap().down = false;
        task.await.unwrap();
        let s = shared.lock().unwrap();
        assert_eq!(s.last_write_by("a"), last, "renewed after the renew deadline had passed");
        assert_eq!((s.releases, s.record.as_ref().unwrap().transitions), (1, 0));
    }

    /// The review's finding: a flag shared by every term was still true from the term before (or
    /// from the start) when a new term began, so a release right after an acquisition did not
    /// wait for the work the new term had started.
    #[tokio::test(start_paused = true)]
    async fn a_release_right_after_an_acquisition_waits_for_the_work_of_that_term() {
        let t = ElectionTimings::default();
        let shared = Arc::new(Mutex::new(Shared::default()));
        let (mut rx, release_tx, terms, task) =
            start_with_terms(MemLock::with("a", &shared, t.lease_duration, Watching::No));
        turns(&mut rx, true).await;
        release_tx.send_replace(true);
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        assert_eq!(shared.lock().unwrap().releases, 0, "released without the work of term 1 saying it stopped");
        terms.stopped(1);
        task.await.unwrap();
        assert_eq!(shared.lock().unwrap().releases, 1);
    }

    /// The review's finding: the work of a lost term (not given up) still running when the lease
    /// was won back saw `leading` true again and could write under the new term.
    #[tokio::test(start_paused = true)]
    async fn a_lost_term_is_not_followed_by_another_until_its_work_stopped() {
        let t = ElectionTimings::default();
        let shared = Arc::new(Mutex::new(Shared::default()));
        let (mut a, _release, terms, _task) =
            start_with_terms(MemLock::with("a", &shared, t.lease_duration, Watching::No));
        turns(&mut a, true).await;
        // Another holder for a moment, then the lease is free again.
        {
            let mut s = shared.lock().unwrap();
            let r = s.record.clone().unwrap();
            s.set(LeaseRecord { holder: Some("intruder".into()), transitions: r.transitions + 1, ..r });
        }
        turns(&mut a, false).await;
        {
            let mut s = shared.lock().unwrap();
            let r = s.record.clone().unwrap();
            s.set(r.released(Utc::now()));
        }
        // The work of term 1 does not stop for 2 s: a does not lead meanwhile.
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(!*a.borrow(), "led again while the work of the lost term still ran");
        terms.stopped(1);
        turns(&mut a, true).await;
        assert_eq!(terms.current(), 2);
        // Unacknowledged, a lost term holds the next one back at most the wait.
        {
            let mut s = shared.lock().unwrap();
            let r = s.record.clone().unwrap();
            s.set(LeaseRecord { holder: Some("intruder".into()), transitions: r.transitions + 1, ..r });
        }
        let lost = turns(&mut a, false).await;
        {
            let mut s = shared.lock().unwrap();
            let r = s.record.clone().unwrap();
            s.set(r.released(Utc::now()));
        }
        let again = turns(&mut a, true).await;
        assert!(again - lost >= t.handover_wait(), "{:?}", again - lost);
        assert!(again - lost <= t.handover_wait() + 2 * t.retry_period, "{:?}", again - lost);
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
            s.set(LeaseRecord { holder: Some("intruder".into()), transitions: r.transitions + 1, ..r });
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
            .leader_election(Elector::new(MemLock::new("a", &shared), CLIENT_GO).unwrap())
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

    /// Two candidates on the default timings, `a` leading and `b` standing by for ten seconds.
    struct Pair {
        shared: Arc<Mutex<Shared>>,
        task_a: tokio::task::JoinHandle<()>,
        b: watch::Receiver<bool>,
        /// The release senders (dropping one stops its candidate) and b's task.
        _keep: (watch::Sender<bool>, watch::Sender<bool>, tokio::task::JoinHandle<()>),
    }

    async fn a_leads_b_stands_by(watching: Watching) -> Pair {
        let t = ElectionTimings::default();
        let shared = Arc::new(Mutex::new(Shared::default()));
        let (mut a, release_a, task_a) = start_with(MemLock::with("a", &shared, t.lease_duration, watching), t);
        turns(&mut a, true).await;
        let (b, release_b, task_b) = start_with(MemLock::with("b", &shared, t.lease_duration, watching), t);
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(*a.borrow() && !*b.borrow());
        Pair { shared, task_a, b, _keep: (release_a, release_b, task_b) }
    }

    #[tokio::test(start_paused = true)]
    async fn with_the_defaults_a_watching_standby_takes_over_when_the_dead_leaders_claim_ends() {
        let Pair { shared, task_a, mut b, _keep } = a_leads_b_stands_by(Watching::Yes).await;
        let tries = shared.lock().unwrap().attempts["b"];
        assert_eq!(tries, 1, "a watching standby does not poll while the leader renews");
        // kill -9: a stops renewing at once, without releasing.
        task_a.abort();
        let killed = Instant::now();
        let took_over = turns(&mut b, true).await;
        let s = shared.lock().unwrap();
        let last = s.last_write_by("a");
        assert!(last <= killed && killed < took_over, "a's last renewal, the kill, b's term");
        let t = ElectionTimings::default();
        // The watch dated a's last renewal when it was written, and b tried when the claim
        // ended: not a retry period later, and within 5 s of the death.
        let after_renewal = took_over - last;
        assert!(
            after_renewal >= t.lease_duration && after_renewal <= t.lease_duration + Duration::from_millis(50),
            "{after_renewal:?} after a's last renewal"
        );
        assert!(took_over - killed < Duration::from_secs(5), "{:?} after the kill", took_over - killed);
        assert_eq!(s.attempts["b"], tries + 1, "one attempt took the lease");
        assert_eq!(s.record.as_ref().unwrap().holder(), Some("b"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_watching_standby_takes_a_released_lease_at_once() {
        let t = ElectionTimings::default();
        let shared = Arc::new(Mutex::new(Shared::default()));
        let (mut a, release_a, task_a) = start_with(MemLock::with("a", &shared, t.lease_duration, Watching::Yes), t);
        turns(&mut a, true).await;
        let (mut b, _rb, _tb) = start_with(MemLock::with("b", &shared, t.lease_duration, Watching::Yes), t);
        tokio::time::sleep(Duration::from_secs(10)).await;
        release_a.send_replace(true);
        task_a.await.unwrap();
        let released = Instant::now();
        let took_over = turns(&mut b, true).await;
        assert_eq!(shared.lock().unwrap().releases, 1);
        assert!(took_over - released < Duration::from_millis(50), "at once: {:?}", took_over - released);
    }

    #[tokio::test(start_paused = true)]
    async fn a_standby_that_cannot_watch_polls_and_still_takes_over() {
        for watching in [Watching::No, Watching::Fails] {
            let Pair { shared, task_a, mut b, _keep } = a_leads_b_stands_by(watching).await;
            let tries = shared.lock().unwrap().attempts["b"];
            assert!(tries >= 8, "{watching:?}: polled every retry period: {tries} attempts in 10 s");
            task_a.abort();
            let killed = Instant::now();
            let took_over = turns(&mut b, true).await;
            let t = ElectionTimings::default();
            let last = shared.lock().unwrap().last_write_by("a");
            let after_renewal = took_over - last;
            // It saw a's last renewal up to a retry period late, and tries up to one after the
            // claim ended on its clock.
            assert!(
                after_renewal >= t.lease_duration && after_renewal <= t.lease_duration + 2 * (t.retry_period * 11 / 10),
                "{watching:?}: {after_renewal:?}"
            );
            assert!(killed < took_over);
        }
    }
}
