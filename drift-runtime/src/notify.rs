//! The notifier task: delivers the events of the outbox ([`ActStore`]) to every configured
//! notifier ([`Outlet`]), at least once, and never loses one.
//!
//! Each round, for each notifier: route the new events (its routing, its `for:` hold), emit
//! its reminders and its daily digest, then claim the due deliveries of one batch at a time
//! (leased to this process: two processes never send the same delivery at the same time),
//! decide what is still worth sending, send the batch as one message, and settle each delivery
//! (sent, retried later with backoff, parked when its notifier stops retrying, skipped, deferred
//! by the rate limit). Waivers that expired are ended first, so their events go out in the same
//! round.
//!
//! A receiver that is down longer than its notifier retries (`retry_for`, 24 hours by default)
//! gets its deliveries parked as an outage; every [`Outlet::probe_every`] one batch of them is
//! tried again (a probe, a real message with the same event ids), and the first message the
//! receiver takes puts all of them back in the queue: nobody has to requeue them.
//!
//! A process that dies between the store's commit and the receiver's answer leaves its
//! deliveries leased; the lease ends and another round (this process restarted, or another
//! replica) sends them again, with the same event ids. docs/notifications.md says more.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use drift_core::act::{
    ActStore, Delivery, DeliveryStatus, DriftEvent, EventKind, Outlet, ParkReason, SendFailure, Settle, event_id,
};
use drift_core::drift_engine::classify::{Classifier, Intent};
use drift_core::sink::{DriftFilter, DriftStatus, DriftStore, PageRequest};
use drift_metrics::Metrics;
use tokio::sync::{Notify, watch};

/// How long a claimed delivery stays leased to the process that claimed it: longer than a send
/// may take ([`SEND_TIMEOUT`]), short enough that the deliveries of a process that died go out
/// again soon after.
pub const LEASE: chrono::Duration = chrono::Duration::seconds(60);

/// Deliveries claimed at once: one message holds at most this many events (a scan that opens
/// more goes out as several messages; each renders a bounded summary).
pub const CLAIM: usize = 20_000;

/// Events routed per transaction.
const ROUTE: usize = 5_000;

/// How long a send may take before it counts as a failure that is retried.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(20);

/// Messages of at most this many events say what was learned from similar decisions.
pub const LEARNED_UP_TO: usize = 50;

/// How often reminders are looked for.
const REMINDER_EVERY: chrono::Duration = chrono::Duration::seconds(30);

/// What one round did, for logs, metrics and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Round {
    /// Waivers ended.
    pub waivers_expired: usize,
    /// Messages sent, by notifier.
    pub messages: BTreeMap<String, usize>,
    /// Deliveries settled, by outcome (`sent`, `retry`, `parked`, `skipped`, `deferred`), and
    /// `probed`: parked by an outage and put back in the queue by a probe.
    pub deliveries: BTreeMap<&'static str, usize>,
}

/// The notifier task.
#[derive(Debug)]
pub struct Dispatcher {
    store: Arc<dyn ActStore>,
    read: Arc<dyn DriftStore>,
    outlets: Vec<Arc<dyn Outlet>>,
    worker: String,
    metrics: Metrics,
    wake: Arc<Notify>,
    lease: chrono::Duration,
    /// Per notifier: what this process remembers between rounds.
    memory: Mutex<HashMap<String, Memory>>,
    /// The classifier, with `classify.quiet_intended`: announcements of drifts it predicts as
    /// `accept` (used) are held back ([`Dispatcher::with_classifier`]).
    classifier: Option<Arc<Classifier>>,
}

/// What the task remembers of a notifier between rounds (only to save work: the store's event
/// ids keep reminders and digests single even when a process forgets).
#[derive(Debug, Clone, Default)]
struct Memory {
    /// When reminders were last looked for.
    last_look: Option<DateTime<Utc>>,
    /// The last digest day emitted.
    last_digest: Option<String>,
    /// When deliveries parked by an outage were last probed.
    last_probe: Option<DateTime<Utc>>,
}

impl Dispatcher {
    /// A dispatcher of `outlets` over a store's acting side and read side.
    pub fn new(store: Arc<dyn ActStore>, read: Arc<dyn DriftStore>, outlets: Vec<Arc<dyn Outlet>>) -> Self {
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "drift".to_owned());
        Dispatcher {
            store,
            read,
            outlets,
            worker: format!("{host}-{}-{}", std::process::id(), uuid::Uuid::new_v4().simple()),
            metrics: Metrics::new(),
            wake: Arc::new(Notify::new()),
            lease: LEASE,
            memory: Mutex::new(HashMap::new()),
            classifier: None,
        }
    }

    /// Routing by the classifier: with settings whose `quiet_intended` is on, the announcement
    /// (`opened`, `reopened`, `changed`, `waiver_expired`) of a drift the classifier predicts as `accept`,
    /// at or above `min_confidence` and from at least `min_examples` decided drifts, is not sent:
    /// it is settled `skipped` with the prediction as the reason (in the audit trail). The drift
    /// stays open on the page, in `GET /drifts`, in the digest, and its reminders still go.
    pub fn with_classifier(mut self, classifier: Arc<Classifier>) -> Self {
        self.classifier = classifier.settings().is_some_and(|s| s.quiet_intended).then_some(classifier);
        self
    }

    /// How long a claimed delivery stays leased (default [`LEASE`]; at least twice
    /// [`SEND_TIMEOUT`] is wise, or a slow send may be sent again by another process).
    pub fn with_lease(mut self, lease: chrono::Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Shares the detector's metrics.
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// What wakes the task before its next tick (the scanner notifies it when a report wrote
    /// events).
    pub fn waker(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    /// The name this process leases deliveries under.
    pub fn worker(&self) -> &str {
        &self.worker
    }

    /// Makes each notifier known to the store (its cursor), so that it takes every event
    /// written from now on: call it before the first scan (a notifier seen for the first time
    /// starts after the newest event, so that adding one does not replay history).
    pub async fn register(&self) -> drift_core::Result<()> {
        for outlet in &self.outlets {
            self.store.route(outlet.name(), &|_| None, 0).await?;
        }
        Ok(())
    }

    /// Runs rounds until `stop` turns true: one at start, then whenever woken or every `tick`.
    /// A round that fails (the store is down) is logged and tried again next tick; nothing is
    /// lost, the outbox keeps every event.
    pub async fn run(self: Arc<Self>, tick: Duration, mut stop: watch::Receiver<bool>) {
        let mut failing = false;
        loop {
            match self.round(Utc::now()).await {
                Ok(round) => {
                    if failing {
                        tracing::info!("notifications: the store answers again");
                        failing = false;
                    }
                    if !round.messages.is_empty() || round.waivers_expired > 0 {
                        tracing::debug!(?round, "notification round");
                    }
                }
                Err(e) if !failing => {
                    tracing::warn!(error = %e, "notifications: the store is unavailable; events stay queued");
                    failing = true;
                }
                Err(_) => {}
            }
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(tick) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
        }
    }

    /// One round at `now` (see the module's documentation).
    pub async fn round(&self, now: DateTime<Utc>) -> drift_core::Result<Round> {
        let mut round = Round { waivers_expired: self.store.expire_waivers(now).await?, ..Round::default() };
        for outlet in &self.outlets {
            self.prepare(outlet.as_ref(), now).await?;
            self.probe(outlet.as_ref(), now, &mut round).await?;
            self.deliver(outlet.as_ref(), now, &mut round).await?;
        }
        Ok(round)
    }

    /// Emits the reminders and the digest of `outlet` when due, then routes the new events to it.
    async fn prepare(&self, outlet: &dyn Outlet, now: DateTime<Utc>) -> drift_core::Result<()> {
        let name = outlet.name();
        let Memory { last_look, last_digest, .. } = self.remembered(name);
        if let Some(every) = outlet.reminder().filter(|_| last_look.is_none_or(|t| now - t >= REMINDER_EVERY)) {
            let stale = self.store.stale(name, now - every, CLAIM).await?;
            let bucket = now.timestamp() / every.num_seconds().max(1);
            let batch = format!("reminder:{name}:{bucket}");
            let events: Vec<DriftEvent> = stale
                .into_iter()
                .map(|d| {
                    let subject = format!("{name}:{}:{bucket}", d.id);
                    let mut e = DriftEvent::of_drift(EventKind::Reminder, &batch, now, d);
                    e.id = event_id("reminder", &subject, EventKind::Reminder);
                    e.notifier = Some(name.to_owned());
                    e
                })
                .collect();
            self.store.emit(&events).await?;
            self.remember(name, |m| m.last_look = Some(now));
        }
        if let Some(day) = outlet.digest_due(now).filter(|d| last_digest.as_ref() != Some(d)) {
            let stats = self.read.stats(&DriftFilter::default(), now).await?;
            let batch = format!("digest:{name}:{day}");
            let event = DriftEvent {
                id: event_id("digest", &format!("{name}:{day}"), EventKind::Digest),
                seq: 0,
                kind: EventKind::Digest,
                batch,
                at: now,
                drift: None,
                previous: None,
                notifier: Some(name.to_owned()),
                digest: Some(Box::new(stats)),
                learned: None,
            };
            self.store.emit(&[event]).await?;
            self.remember(name, |m| m.last_digest = Some(day));
        }
        let route = |e: &DriftEvent| match &e.notifier {
            Some(n) if n != name => None,
            _ => outlet.route(e),
        };
        while self.store.route(name, &route, ROUTE).await? == ROUTE {}
        Ok(())
    }

    /// Every [`Outlet::probe_every`], puts the oldest batch parked by an outage back in the
    /// queue, to be sent in this round: if the receiver takes it, the store puts every other
    /// delivery parked by the outage back too; if not, one more failure parks it again.
    async fn probe(&self, outlet: &dyn Outlet, now: DateTime<Utc>, round: &mut Round) -> drift_core::Result<()> {
        let name = outlet.name();
        let Some(every) = outlet.probe_every() else { return Ok(()) };
        if self.remembered(name).last_probe.is_some_and(|t| now - t < every) {
            return Ok(());
        }
        self.remember(name, |m| m.last_probe = Some(now));
        let probed = self.store.probe(name, now, CLAIM).await?;
        if probed > 0 {
            tracing::info!(notifier = name, deliveries = probed, "notifications: probing a receiver that was down");
            *round.deliveries.entry("probed").or_default() += probed;
        }
        Ok(())
    }

    fn remembered(&self, name: &str) -> Memory {
        self.memory.lock().unwrap_or_else(PoisonError::into_inner).get(name).cloned().unwrap_or_default()
    }

    fn remember(&self, name: &str, f: impl FnOnce(&mut Memory)) {
        f(self.memory.lock().unwrap_or_else(PoisonError::into_inner).entry(name.to_owned()).or_default());
    }

    /// Claims and sends the due batches of `outlet`, one message each, until none is due or
    /// the rate limit says wait.
    async fn deliver(&self, outlet: &dyn Outlet, now: DateTime<Utc>, round: &mut Round) -> drift_core::Result<()> {
        let name = outlet.name();
        loop {
            let claimed = self.store.claim(name, &self.worker, now, self.lease, CLAIM).await?;
            if claimed.is_empty() {
                return Ok(());
            }
            let (send, mut outcomes) = self.sift(outlet, claimed, now).await?;
            let mut limited = false;
            if !send.is_empty() {
                match outlet.admit(now) {
                    Err(at) => {
                        limited = true;
                        outcomes.extend(send.iter().map(|d| (d.event.id.clone(), Settle::Defer { at })));
                    }
                    Ok(()) => {
                        let events = self.with_learned(send.iter().map(|d| d.event.clone()).collect()).await;
                        let result = match tokio::time::timeout(SEND_TIMEOUT, outlet.send(&events)).await {
                            Ok(result) => result,
                            Err(_) => Err(SendFailure::retryable(format!("no answer within {SEND_TIMEOUT:?}"))),
                        };
                        match result {
                            Ok(()) => {
                                let took = Utc::now();
                                for e in &events {
                                    let lag = (took - e.at).num_milliseconds().max(0) as f64 / 1000.0;
                                    self.metrics.observe_notification_latency(name, lag);
                                }
                                *round.messages.entry(name.to_owned()).or_default() += 1;
                                outcomes.extend(events.iter().map(|e| (e.id.clone(), Settle::Sent)));
                                tracing::info!(notifier = name, events = events.len(), "notification sent");
                            }
                            Err(failure) => {
                                let attempts = send.iter().map(|d| d.attempts).max().unwrap_or(0) + 1;
                                let since = send.iter().filter_map(|d| d.failing_since).min().unwrap_or(now).min(now);
                                let next = if failure.retryable {
                                    outlet.retry_at(attempts, since, now, &failure)
                                } else {
                                    None
                                };
                                let settle = match next {
                                    Some(at) => Settle::Retry { at, error: failure.message.clone() },
                                    None if failure.retryable => Settle::Parked {
                                        error: format!(
                                            "{} (failing since {}; probed until the receiver answers)",
                                            failure.message,
                                            since.format("%Y-%m-%d %H:%M:%S UTC")
                                        ),
                                        reason: ParkReason::Outage,
                                    },
                                    None => {
                                        Settle::Parked { error: failure.message.clone(), reason: ParkReason::Refused }
                                    }
                                };
                                tracing::warn!(
                                    notifier = name, events = events.len(), attempts, error = %failure.message,
                                    parked = matches!(settle, Settle::Parked { .. }), "notification failed"
                                );
                                outcomes.extend(events.iter().map(|e| (e.id.clone(), settle.clone())));
                            }
                        }
                    }
                }
            }
            let mut tally: BTreeMap<&'static str, usize> = BTreeMap::new();
            for (_, s) in &outcomes {
                let key = match s {
                    Settle::Sent => "sent",
                    Settle::Retry { .. } => "retry",
                    Settle::Parked { .. } => "parked",
                    Settle::Skipped { .. } => "skipped",
                    Settle::Defer { .. } => "deferred",
                };
                *tally.entry(key).or_default() += 1;
            }
            self.store.settle(name, &self.worker, &outcomes, now).await?;
            for (key, n) in tally {
                *round.deliveries.entry(key).or_default() += n;
                if key != "deferred" {
                    self.metrics.record_notification(name, key, n as u64);
                }
            }
            if limited {
                return Ok(());
            }
        }
    }

    /// Decides, for each claimed delivery, whether it is still worth sending: a held or
    /// retried announcement of a drift that is no longer open is skipped (a change reverted
    /// within `for:` stays quiet); a `resolved` goes only to a notifier that announced the
    /// drift (it waits while the announcement is pending); a reminder only for a drift still
    /// open and not acknowledged.
    async fn sift(
        &self,
        outlet: &dyn Outlet,
        claimed: Vec<Delivery>,
        now: DateTime<Utc>,
    ) -> drift_core::Result<(Vec<Delivery>, Vec<(String, Settle)>)> {
        let name = outlet.name();
        let resolved: Vec<i64> =
            claimed.iter().filter(|d| d.event.kind == EventKind::Resolved).filter_map(|d| d.event.drift_id()).collect();
        let notified = if resolved.is_empty() { BTreeMap::new() } else { self.store.notified(name, &resolved).await? };
        let (mut send, mut outcomes) = (Vec::new(), Vec::new());
        for d in claimed {
            let skip = |reason: String| (d.event.id.clone(), Settle::Skipped { reason });
            let Some(id) = d.event.drift_id() else {
                send.push(d);
                continue;
            };
            let kind = d.event.kind;
            if kind == EventKind::Resolved {
                if notified.contains_key(&id) {
                    send.push(d);
                } else if self.announcement_pending(name, id).await? {
                    outcomes.push((d.event.id.clone(), Settle::Defer { at: now + chrono::Duration::seconds(30) }));
                } else {
                    outcomes.push(skip("this notifier never announced the drift".to_owned()));
                }
                continue;
            }
            if kind.announces_open()
                && let (Some(classifier), Some(drift)) = (&self.classifier, &d.event.drift)
            {
                match classifier.predict(self.read.as_ref(), self.store.as_ref(), drift).await {
                    Ok(Some(p)) if p.says(Intent::Accept) => {
                        outcomes.push(skip(format!("likely intended, not announced: predicted {}", p.explanation)));
                        continue;
                    }
                    Ok(_) => {}
                    // A classifier that cannot learn costs the routing, not the announcement.
                    Err(e) => tracing::debug!(error = %e, "the classifier could not be asked; announced as usual"),
                }
            }
            let check = kind == EventKind::Reminder || (kind.announces_open() && (outlet.holds() || d.attempts > 0));
            if !check {
                send.push(d);
                continue;
            }
            match self.read.get(id).await {
                Ok(now_drift) if now_drift.status != DriftStatus::Open => {
                    outcomes.push(skip(format!("the drift is {} now", now_drift.status.as_str())))
                }
                Ok(now_drift) if kind == EventKind::Reminder && now_drift.acknowledged_at.is_some() => {
                    outcomes.push(skip("the drift was acknowledged".to_owned()))
                }
                Ok(_) => send.push(d),
                Err(e) if e.kind() == drift_core::ErrorKind::NotFound => {
                    outcomes.push(skip("the drift is no longer stored".to_owned()))
                }
                Err(e) => return Err(e),
            }
        }
        Ok((send, outcomes))
    }

    /// Adds to the events of a message what the team's decisions on similar drifts say
    /// ([`Decisions::similar`](drift_model::act::Decisions::similar)), for messages of up to [`LEARNED_UP_TO`] drifts (a summary of
    /// thousands does not show it). A store that fails here costs the line, not the message.
    async fn with_learned(&self, mut events: Vec<DriftEvent>) -> Vec<DriftEvent> {
        if events.len() > LEARNED_UP_TO {
            return events;
        }
        for e in &mut events {
            if e.kind == EventKind::Resolved {
                continue;
            }
            if let Some(d) = &e.drift {
                match self.store.similar(d).await {
                    Ok(learned) => e.learned = learned,
                    Err(err) => tracing::debug!(error = %err, "learned confidence not read"),
                }
            }
        }
        events
    }

    /// Whether an announcement of the drift to this notifier is still pending.
    async fn announcement_pending(&self, name: &str, drift_id: i64) -> drift_core::Result<bool> {
        let page = PageRequest { limit: 100, after: None };
        let pending = self.store.deliveries(Some(drift_id), Some(DeliveryStatus::Pending), page).await?;
        Ok(pending.iter().any(|p| p.notifier == name && p.kind.announces_open()))
    }
}
