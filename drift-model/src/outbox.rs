//! The outbox: the events recording a report yields (written in the same transaction as the
//! drifts), their deliveries to notifiers ([`Outlet`]), and the port of a store that keeps
//! them ([`Outbox`]). docs/notifications.md describes the behaviour.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::Result;
use crate::decision::Learned;
use crate::drift::Severity;
use crate::sink::{DriftStats, PageRequest, StoredDrift};

/// What an event says happened to a drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A drift was seen for the first time.
    Opened,
    /// A drift seen before (resolved since, or under a waiver whose cluster value changed) is
    /// open again.
    Reopened,
    /// The cluster value or the severity of an open drift changed.
    Changed,
    /// A drift went away (its resolution says how).
    Resolved,
    /// A waiver ended by its expiry; the drift counts as open again.
    WaiverExpired,
    /// A drift is still open, not acknowledged, `reminder:` after it was last notified.
    Reminder,
    /// The daily summary of a notifier.
    Digest,
}

impl EventKind {
    /// Every kind.
    pub const ALL: [EventKind; 7] = [
        EventKind::Opened,
        EventKind::Reopened,
        EventKind::Changed,
        EventKind::Resolved,
        EventKind::WaiverExpired,
        EventKind::Reminder,
        EventKind::Digest,
    ];

    /// snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Opened => "opened",
            EventKind::Reopened => "reopened",
            EventKind::Changed => "changed",
            EventKind::Resolved => "resolved",
            EventKind::WaiverExpired => "waiver_expired",
            EventKind::Reminder => "reminder",
            EventKind::Digest => "digest",
        }
    }

    /// Whether the event says a drift is (again) open: the kinds a `for:` delay holds back and
    /// after which a `resolved` is worth telling.
    pub fn announces_open(self) -> bool {
        matches!(self, EventKind::Opened | EventKind::Reopened | EventKind::Changed | EventKind::WaiverExpired)
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for EventKind {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self> {
        EventKind::ALL.into_iter().find(|k| k.as_str() == s).ok_or_else(|| {
            crate::Error::invalid_input(format!(
                "unknown event {s:?} (opened, reopened, changed, resolved, waiver_expired, reminder, digest)"
            ))
        })
    }
}

/// What an open drift had before a `changed` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Previous {
    /// The cluster value before.
    pub cluster_value: Option<Value>,
    /// The severity before.
    pub severity: Severity,
}

/// One event of the outbox. Its [`id`](Self::id) is stable: every message that carries it
/// carries the same id, so a receiver can drop duplicates (delivery is at least once).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriftEvent {
    /// Stable id, the idempotency key ([`event_id`]).
    pub id: String,
    /// Position in the outbox (0 before it is stored).
    #[serde(default)]
    pub seq: i64,
    /// What happened.
    pub kind: EventKind,
    /// What the event belongs to: the scan id for the events of a report, or the reminder or
    /// digest round. Events of one batch go out together, one message per notifier.
    pub batch: String,
    /// When it happened.
    pub at: DateTime<Utc>,
    /// The drift as it was when the event happened (none for a digest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<StoredDrift>,
    /// For `changed`: what the drift had before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<Previous>,
    /// For reminders and digests: the one notifier the event is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notifier: Option<String>,
    /// For a digest: the statistics it summarises.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<Box<DriftStats>>,
    /// What the team's decisions on similar drifts say (filled in when a message is made).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learned: Option<Learned>,
}

impl DriftEvent {
    /// An event about a drift in a batch; its id is derived from the batch, the drift's row
    /// id and the kind ([`event_id`]).
    pub fn of_drift(kind: EventKind, batch: &str, at: DateTime<Utc>, drift: StoredDrift) -> Self {
        DriftEvent {
            id: event_id(batch, &drift.id.to_string(), kind),
            seq: 0,
            kind,
            batch: batch.to_owned(),
            at,
            drift: Some(drift),
            previous: None,
            notifier: None,
            digest: None,
            learned: None,
        }
    }

    /// The drift's row id, when the event is about one.
    pub fn drift_id(&self) -> Option<i64> {
        self.drift.as_ref().map(|d| d.id)
    }
}

/// The stable id of an event: 32 hex digits of a SHA-256 over the batch, the subject (a drift's
/// row id, or a notifier and day for a digest) and the kind. The same event recorded twice has
/// the same id, so the outbox keeps it once.
pub fn event_id(batch: &str, subject: &str, kind: EventKind) -> String {
    let mut h = Sha256::new();
    for part in [batch, subject, kind.as_str()] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    hex::encode(&h.finalize()[..16])
}

/// What happened to one delivery attempt, as the notifier task reports it to the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Settle {
    /// The receiver took it.
    Sent,
    /// It failed and will be tried again at `at`.
    Retry {
        /// Next attempt.
        at: DateTime<Utc>,
        /// Why it failed (never a secret).
        error: String,
    },
    /// Given up: parked, kept and shown. One parked by an [`ParkReason::Outage`] is tried again
    /// by itself ([`Outbox::probe`], and whenever the notifier sends a message again); one
    /// [`ParkReason::Refused`] only when a person requeues it.
    Parked {
        /// The last failure.
        error: String,
        /// Why it was given up.
        reason: ParkReason,
    },
    /// Not sent, on purpose (a `for:` delay the drift did not outlive, a `resolved` of a drift
    /// this notifier never announced).
    Skipped {
        /// Why.
        reason: String,
    },
    /// Not sent yet: wait until `at` (a rate limit, a `resolved` waiting for its `opened`).
    Defer {
        /// When to look again.
        at: DateTime<Utc>,
    },
}

/// Why a delivery was parked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParkReason {
    /// Failures that may pass (the receiver down, timing out, answering 5xx) for longer than the
    /// notifier retries (`retry_for`): probed at a slow cadence and put back in the queue as soon
    /// as the receiver takes a message again.
    Outage,
    /// A failure that will not pass (a 4xx, a refused login): sent again only when requeued.
    Refused,
}

impl ParkReason {
    /// snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            ParkReason::Outage => "outage",
            ParkReason::Refused => "refused",
        }
    }
}

impl FromStr for ParkReason {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "outage" => Ok(ParkReason::Outage),
            "refused" => Ok(ParkReason::Refused),
            _ => Err(crate::Error::invalid_input(format!("unknown park reason {s:?} (outage, refused)"))),
        }
    }
}

/// Status of a delivery (one event to one notifier).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    /// Waiting to be sent (maybe after failed attempts).
    Pending,
    /// The receiver took it.
    Sent,
    /// Given up for now ([`ParkReason`]); kept and shown.
    Parked,
    /// Not sent on purpose.
    Skipped,
}

impl DeliveryStatus {
    /// Every status.
    pub const ALL: [DeliveryStatus; 4] =
        [DeliveryStatus::Pending, DeliveryStatus::Sent, DeliveryStatus::Parked, DeliveryStatus::Skipped];

    /// snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Sent => "sent",
            DeliveryStatus::Parked => "parked",
            DeliveryStatus::Skipped => "skipped",
        }
    }
}

impl FromStr for DeliveryStatus {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self> {
        DeliveryStatus::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| crate::Error::invalid_input(format!("unknown delivery status {s:?}")))
    }
}

/// One event for one notifier, as the store keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    /// The event.
    pub event: DriftEvent,
    /// The notifier's name.
    pub notifier: String,
    /// Where it stands.
    pub status: DeliveryStatus,
    /// Attempts made.
    pub attempts: i64,
    /// When it is (or was) due.
    pub due_at: DateTime<Utc>,
    /// The last failure or the reason it was skipped.
    pub last_error: Option<String>,
    /// When the receiver took it.
    pub sent_at: Option<DateTime<Utc>>,
    /// Since when its attempts fail (the first failure since it was queued, requeued or sent);
    /// `retry_for` counts from here.
    #[serde(default)]
    pub failing_since: Option<DateTime<Utc>>,
    /// Why it is parked (only when it is).
    #[serde(default)]
    pub park_reason: Option<ParkReason>,
}

/// A delivery without its event: what `GET /drifts/{id}` and `GET /notifications` list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryRecord {
    /// The event's position in the outbox: the cursor of `GET /notifications` (`after`).
    pub seq: i64,
    /// The event's id.
    pub event_id: String,
    /// The event's kind.
    pub kind: EventKind,
    /// The drift, when the event is about one.
    pub drift_id: Option<i64>,
    /// The notifier's name.
    pub notifier: String,
    /// Where it stands.
    pub status: DeliveryStatus,
    /// Attempts made.
    pub attempts: i64,
    /// When it is (or was) due.
    pub due_at: DateTime<Utc>,
    /// The last failure or the reason it was skipped.
    pub last_error: Option<String>,
    /// When the receiver took it.
    pub sent_at: Option<DateTime<Utc>>,
    /// Since when its attempts fail (the first failure since it was queued, requeued or sent);
    /// `retry_for` counts from here.
    #[serde(default)]
    pub failing_since: Option<DateTime<Utc>>,
    /// Why it is parked (only when it is).
    #[serde(default)]
    pub park_reason: Option<ParkReason>,
}

impl From<&Delivery> for DeliveryRecord {
    fn from(d: &Delivery) -> Self {
        DeliveryRecord {
            seq: d.event.seq,
            event_id: d.event.id.clone(),
            kind: d.event.kind,
            drift_id: d.event.drift_id(),
            notifier: d.notifier.clone(),
            status: d.status,
            attempts: d.attempts,
            due_at: d.due_at,
            last_error: d.last_error.clone(),
            sent_at: d.sent_at,
            failing_since: d.failing_since,
            park_reason: d.park_reason,
        }
    }
}

/// Why a message was not delivered. The message never holds a secret (a webhook URL with its
/// token, a password): outlets say only what a person may read in logs and the audit trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendFailure {
    /// Whether trying again may succeed (a 5xx, a timeout, a refused connection).
    pub retryable: bool,
    /// What went wrong.
    pub message: String,
    /// When the receiver asked to be tried again (a 429's `Retry-After`).
    pub retry_after: Option<std::time::Duration>,
}

impl fmt::Display for SendFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SendFailure {}

impl SendFailure {
    /// A failure worth trying again.
    pub fn retryable(message: impl Into<String>) -> Self {
        SendFailure { retryable: true, message: message.into(), retry_after: None }
    }
    /// A failure that will fail again (a 4xx, bad credentials).
    pub fn permanent(message: impl Into<String>) -> Self {
        SendFailure { retryable: false, message: message.into(), retry_after: None }
    }
}

/// One configured notifier as the task sees it: its routing and timing policy, and how it
/// sends a batch of events as one message. `drift-notify` provides the webhook, Slack and
/// email ones; an integrator may write their own.
#[async_trait]
pub trait Outlet: Send + Sync + std::fmt::Debug {
    /// The notifier's name (unique; it keys its cursor and deliveries in the store).
    fn name(&self) -> &str;
    /// Whether the notifier takes the event and, when it does, when it is due: the event's
    /// time, plus the `for:` hold for events that announce an open drift.
    fn route(&self, event: &DriftEvent) -> Option<DateTime<Utc>>;
    /// Whether announcements are held (`for:` above zero): they are then sent only if the
    /// drift is still open when they come due.
    fn holds(&self) -> bool {
        false
    }
    /// How often an open drift, not acknowledged, is announced again (`reminder:`).
    fn reminder(&self) -> Option<chrono::Duration> {
        None
    }
    /// The day (`YYYY-MM-DD` in the digest's time zone) whose digest is due at `now`, once
    /// its hour has passed; `None` without a digest or before the hour.
    fn digest_due(&self, _now: DateTime<Utc>) -> Option<String> {
        None
    }
    /// Whether a message may go now (the rate limit); `Err(at)`: not before `at`.
    fn admit(&self, _now: DateTime<Utc>) -> Result<(), DateTime<Utc>> {
        Ok(())
    }
    /// When to try again after the `attempts`-th failed attempt of a retryable failure, the
    /// attempts failing since `failing_since` (`now` for the first failure); `None` parks the
    /// delivery as an [`ParkReason::Outage`] (a failure that is not retryable is parked at once,
    /// [`ParkReason::Refused`]).
    fn retry_at(
        &self,
        attempts: i64,
        failing_since: DateTime<Utc>,
        now: DateTime<Utc>,
        failure: &SendFailure,
    ) -> Option<DateTime<Utc>>;
    /// How often deliveries parked by an outage are probed ([`Outbox::probe`]): one batch is
    /// tried again, and once the receiver takes a message every such delivery goes back in the
    /// queue. `None`: never (a person requeues them). Default: every 10 minutes.
    fn probe_every(&self) -> Option<chrono::Duration> {
        Some(chrono::Duration::minutes(10))
    }
    /// Sends the events of one batch as one message.
    async fn send(&self, events: &[DriftEvent]) -> Result<(), SendFailure>;
}

/// How a notifier routes an event: `Some(due)` takes it, to be sent at `due`; `None` leaves it.
pub type Route<'a> = dyn Fn(&DriftEvent) -> Option<DateTime<Utc>> + Send + Sync + 'a;

/// The outbox of a store: the events recording a report yields (written by
/// [`DriftSink::record`](crate::DriftSink::record) in the transaction of the report, or
/// emitted), routed to each notifier behind its cursor, and their deliveries.
///
/// Contract (checked by `drift_testkit::act_suite!` on the in-memory store, SQLite and
/// PostgreSQL):
/// - every event is delivered to every notifier whose routing takes it, at least once;
/// - a claimed delivery is leased to one worker until it settles it or the lease ends: two
///   workers never hold the same delivery at the same time;
/// - deliveries are never deleted by the notifier; a parked one stays until requeued, probed
///   ([`probe`](Self::probe)) or, when parked by an outage, put back by a message the receiver
///   took ([`settle`](Self::settle)).
#[async_trait]
pub trait Outbox: Send + Sync + fmt::Debug {
    /// Stores events that do not come from a report (reminders, digests); an id already stored
    /// is skipped. Returns how many were new.
    async fn emit(&self, events: &[DriftEvent]) -> Result<usize>;

    /// Hands the events after `notifier`'s cursor to `route` (up to `limit`), stores a
    /// pending delivery due at the time `route` returns for each event it takes, and moves the
    /// cursor past them, in one transaction (two processes never route the same event twice).
    /// A notifier seen for the first time starts after the newest event. Returns how many
    /// events were read.
    async fn route(&self, notifier: &str, route: &Route<'_>, limit: usize) -> Result<usize>;

    /// Leases to `worker`, until `now + lease`, the pending deliveries of `notifier` that are
    /// due at `now` and belong to the batch of the oldest one (at most `limit`), and returns
    /// them. Empty when nothing is due.
    async fn claim(
        &self,
        notifier: &str,
        worker: &str,
        now: DateTime<Utc>,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<Delivery>>;

    /// Settles deliveries `worker` holds, with an audit entry for each attempt (sent, retry,
    /// parked); a delivery whose lease `worker` lost is left alone. `Retry` keeps when the
    /// delivery started failing (`failing_since`, set at its first failure); `Sent` clears it.
    /// `Sent` also marks the drift as notified by `notifier` (for reminders and `resolved`),
    /// and, since the receiver answers again, puts every delivery of `notifier` parked by an
    /// [`ParkReason::Outage`] back in the queue, due at `now`, with an audit entry each
    /// (`requeue` by `notifier:NAME`, status `pending`).
    async fn settle(
        &self,
        notifier: &str,
        worker: &str,
        outcomes: &[(String, Settle)],
        now: DateTime<Utc>,
    ) -> Result<()>;

    /// When `notifier` last sent an event announcing each of these drifts (absent: never).
    async fn notified(&self, notifier: &str, drift_ids: &[i64]) -> Result<BTreeMap<i64, DateTime<Utc>>>;

    /// The open drifts, not acknowledged, that `notifier` announced and has not told about
    /// since `before` (reminder candidates), at most `limit`.
    async fn stale(&self, notifier: &str, before: DateTime<Utc>, limit: usize) -> Result<Vec<StoredDrift>>;

    /// Deliveries by notifier and status (for `/metrics`).
    async fn delivery_counts(&self) -> Result<BTreeMap<(String, DeliveryStatus), i64>>;

    /// Deliveries, newest first: of one drift, or with one status (parked ones for the API).
    async fn deliveries(
        &self,
        drift_id: Option<i64>,
        status: Option<DeliveryStatus>,
        page: PageRequest,
    ) -> Result<Vec<DeliveryRecord>>;

    /// Puts a parked delivery back in the queue, due at `now`, with an audit entry by `actor`.
    /// Returns whether one was parked.
    async fn requeue(&self, event_id: &str, notifier: &str, actor: &str, now: DateTime<Utc>) -> Result<bool>;

    /// A probe of a receiver that was down: puts the deliveries of `notifier` of the oldest
    /// batch parked by an [`ParkReason::Outage`] (at most `limit`) back in the queue, due at
    /// `now`, keeping their attempts and `failing_since` (one more failure parks them again),
    /// with an audit entry each (`requeue` by `notifier:NAME`, status `probe`). Returns how many.
    async fn probe(&self, notifier: &str, now: DateTime<Utc>, limit: usize) -> Result<usize>;
}
