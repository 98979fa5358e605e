//! Acting on drift: the events recording a report yields (written to an outbox in the same
//! transaction as the drifts), the deliveries of those events to notifiers, human decisions and
//! waivers, the audit trail, and the confidence learned from past decisions.
//!
//! The types are plain data; the [`ActStore`] trait is the side of a store that keeps them
//! (both SQL stores implement it). docs/notifications.md and docs/decisions.md describe the
//! behaviour.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use async_trait::async_trait;
use chrono::{DateTime, Duration, Timelike, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::Result;
use crate::drift::{DriftType, Severity};
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
    /// It failed `attempts` times: parked, kept and shown, not sent again unless retried by hand.
    Parked {
        /// The last failure.
        error: String,
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

/// Status of a delivery (one event to one notifier).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    /// Waiting to be sent (maybe after failed attempts).
    Pending,
    /// The receiver took it.
    Sent,
    /// Gave up after the last attempt; kept and shown.
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
        }
    }
}

/// What a person decides about a drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionAction {
    /// Someone is on it: reminders stop.
    Acknowledge,
    /// A waiver: the change is intended; the drift no longer counts as open until the waiver
    /// expires or the cluster value changes again.
    Accept,
    /// The change must be reverted.
    Reject,
}

impl DecisionAction {
    /// snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionAction::Acknowledge => "acknowledge",
            DecisionAction::Accept => "accept",
            DecisionAction::Reject => "reject",
        }
    }
}

impl FromStr for DecisionAction {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "acknowledge" | "ack" => Ok(DecisionAction::Acknowledge),
            "accept" => Ok(DecisionAction::Accept),
            "reject" => Ok(DecisionAction::Reject),
            _ => Err(crate::Error::invalid_input(format!("unknown decision {s:?} (acknowledge, accept, reject)"))),
        }
    }
}

/// How long a waiver lasts when the decision names no expiry.
pub const DEFAULT_WAIVER_DAYS: i64 = 7;

/// The longest waiver a decision may ask for.
pub const MAX_WAIVER_DAYS: i64 = 366;

/// A decision as asked for (the API body, the CLI's arguments).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewDecision {
    /// What is decided.
    pub action: DecisionAction,
    /// Why (shown with the drift and in the audit trail).
    #[serde(default)]
    pub comment: Option<String>,
    /// When a waiver (`accept`) ends; a waiver without one lasts [`DEFAULT_WAIVER_DAYS`].
    /// Refused on the other decisions, which last as long as the drift.
    #[serde(default)]
    pub expires_at: Option<DateTime<Utc>>,
    /// Who decides: the name of the API token, or the user running the CLI. Set by the caller,
    /// never taken from a request body.
    #[serde(skip_deserializing, default)]
    pub actor: String,
}

impl NewDecision {
    /// Checks the decision at `now` and fills in a waiver's default expiry: an expiry in the
    /// past, one further than [`MAX_WAIVER_DAYS`], one on a decision other than `accept`, or a
    /// comment over 2,000 characters is an invalid-input error; an `accept` without a comment
    /// is one too (a waiver has a reason).
    pub fn validate(mut self, now: DateTime<Utc>) -> Result<Self> {
        if self.comment.as_ref().is_some_and(|c| c.chars().count() > 2000) {
            return Err(crate::Error::invalid_input("comment is longer than 2000 characters"));
        }
        if let Some(at) = self.expires_at {
            if at <= now {
                return Err(crate::Error::invalid_input(format!("expires_at {at} is not in the future")));
            }
            if at > now + Duration::days(MAX_WAIVER_DAYS) {
                return Err(crate::Error::invalid_input(format!(
                    "expires_at is more than {MAX_WAIVER_DAYS} days away"
                )));
            }
        }
        if self.action != DecisionAction::Accept && self.expires_at.is_some() {
            return Err(crate::Error::invalid_input(format!(
                "expires_at applies to accept (a waiver) only; an {} lasts as long as the drift",
                self.action.as_str()
            )));
        }
        if self.action == DecisionAction::Accept {
            if self.comment.as_deref().is_none_or(|c| c.trim().is_empty()) {
                return Err(crate::Error::invalid_input("an accept (a waiver) needs a comment saying why"));
            }
            self.expires_at.get_or_insert(now + Duration::days(DEFAULT_WAIVER_DAYS));
        }
        Ok(self)
    }
}

/// A decision as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// Row id.
    pub id: i64,
    /// The drift.
    pub drift_id: i64,
    /// What was decided.
    pub action: DecisionAction,
    /// Why.
    pub comment: Option<String>,
    /// Who.
    pub actor: String,
    /// When.
    pub decided_at: DateTime<Utc>,
    /// When it ends (a waiver).
    pub expires_at: Option<DateTime<Utc>>,
}

/// What a store records in the audit trail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditAction {
    /// A decision about a drift.
    Decision,
    /// A waiver ended by its expiry.
    WaiverExpired,
    /// A waiver ended because the cluster value changed.
    WaiverEnded,
    /// One attempt to deliver a message (its status says how it went).
    Notification,
    /// A scan report was recorded.
    Scan,
    /// A parked delivery was put back in the queue by hand.
    Requeue,
    /// A revert of a drift (status `reverted`, `dry_run`, `would_revert` for self-heal's dry-run
    /// mode, `refused` or `failed`).
    Revert,
    /// A change accepted into Git (status `proposed`, `updated`, `refused` or `failed`).
    Accept,
}

impl AuditAction {
    /// Every action.
    pub const ALL: [AuditAction; 8] = [
        AuditAction::Decision,
        AuditAction::WaiverExpired,
        AuditAction::WaiverEnded,
        AuditAction::Notification,
        AuditAction::Scan,
        AuditAction::Requeue,
        AuditAction::Revert,
        AuditAction::Accept,
    ];

    /// snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditAction::Decision => "decision",
            AuditAction::WaiverExpired => "waiver_expired",
            AuditAction::WaiverEnded => "waiver_ended",
            AuditAction::Notification => "notification",
            AuditAction::Scan => "scan",
            AuditAction::Requeue => "requeue",
            AuditAction::Revert => "revert",
            AuditAction::Accept => "accept",
        }
    }
}

impl FromStr for AuditAction {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self> {
        AuditAction::ALL.into_iter().find(|k| k.as_str() == s).ok_or_else(|| {
            crate::Error::invalid_input(format!(
                "unknown audit action {s:?} (decision, waiver_expired, waiver_ended, notification, scan, requeue)"
            ))
        })
    }
}

/// One entry of the audit trail. Never holds a secret value, token or password: `detail` holds
/// names, counts, statuses and error messages that were redacted before they were written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// Row id.
    pub id: i64,
    /// When.
    pub at: DateTime<Utc>,
    /// What.
    pub action: AuditAction,
    /// Who: a token's name, a CLI user, `scanner`, or `notifier:<name>`.
    pub actor: String,
    /// The drift, when it is about one.
    pub drift_id: Option<i64>,
    /// The scan, when it is about one.
    pub scan_id: Option<String>,
    /// The notifier, for a notification.
    pub notifier: Option<String>,
    /// The event, for a notification.
    pub event_id: Option<String>,
    /// An outcome: the decision's action, a delivery's status, a scan's outcome.
    pub status: String,
    /// Attempts made, for a notification.
    pub attempts: Option<i64>,
    /// The rest: comment, expiry, error, counts.
    pub detail: Value,
}

/// Filters of the audit trail; every field optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditFilter {
    /// Only this action.
    pub action: Option<AuditAction>,
    /// Only about this drift.
    pub drift_id: Option<i64>,
    /// Only by this actor.
    pub actor: Option<String>,
    /// Only about this notifier.
    pub notifier: Option<String>,
    /// Only with this status.
    pub status: Option<String>,
    /// Only at or after this time.
    pub since: Option<DateTime<Utc>>,
}

/// A page of the audit trail, newest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditPage {
    /// The entries.
    pub items: Vec<AuditEntry>,
    /// Cursor for the next page.
    pub next: Option<i64>,
}

/// The six-hour band of the day (UTC) a change fell in: 0 (00–06), 1, 2, 3. Part of what makes
/// two drifts "similar" for [`Learned`].
pub fn hour_band(at: DateTime<Utc>) -> u8 {
    (at.hour() / 6) as u8
}

/// What makes drifts similar for the learned classification: the same field manager,
/// namespace, drift type and band of the day.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Similarity {
    /// Field manager (empty when unknown).
    pub manager: String,
    /// Namespace.
    pub namespace: String,
    /// Drift type.
    pub drift_type: DriftType,
    /// [`hour_band`] of the change (or of the detection when the change time is unknown).
    pub band: u8,
}

impl Similarity {
    /// The similarity key of a stored drift.
    pub fn of(drift: &StoredDrift) -> Self {
        Similarity {
            manager: drift.changed_by.clone().unwrap_or_default(),
            namespace: drift.namespace.clone(),
            drift_type: drift.drift_type,
            band: hour_band(drift.changed_at.unwrap_or(drift.detected_at)),
        }
    }
}

/// The confidence learned from the team's decisions on similar drifts: the share accepted,
/// with a uniform prior (one accepted and one rejected imagined), so that 1 of 1 says 67%,
/// not 100%. Explainable: it says how many decisions it rests on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Learned {
    /// Similar drifts whose last decision was `accept`.
    pub accepted: u32,
    /// Similar drifts whose last decision was `reject`.
    pub rejected: u32,
    /// Probability that such a change is intentional, 0..=1.
    pub intentional: f64,
}

impl Learned {
    /// From counts of similar decisions; `None` without any (nothing learned yet).
    pub fn from_counts(accepted: u32, rejected: u32) -> Option<Self> {
        let n = accepted + rejected;
        (n > 0).then(|| Learned { accepted, rejected, intentional: (f64::from(accepted) + 1.0) / (f64::from(n) + 2.0) })
    }

    /// "likely intentional (75%, 2 of 2 similar changes accepted)".
    pub fn explain(&self) -> String {
        let n = self.accepted + self.rejected;
        let pct = (self.intentional * 100.0).round();
        if self.intentional >= 0.5 {
            format!("likely intentional ({pct}%, {} of {n} similar changes accepted)", self.accepted)
        } else {
            format!("likely unintended ({:.0}%, {} of {n} similar changes rejected)", 100.0 - pct, self.rejected)
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
    /// When to try again after the `attempts`-th failed attempt of a retryable failure;
    /// `None` parks the delivery (a failure that is not retryable is parked at once).
    fn retry_at(&self, attempts: i64, now: DateTime<Utc>, failure: &SendFailure) -> Option<DateTime<Utc>>;
    /// Sends the events of one batch as one message.
    async fn send(&self, events: &[DriftEvent]) -> Result<(), SendFailure>;
}

/// How a notifier routes an event: `Some(due)` takes it, to be sent at `due`; `None` leaves it.
pub type Route<'a> = dyn Fn(&DriftEvent) -> Option<DateTime<Utc>> + Send + Sync + 'a;

/// The side of a store that acts on drift: the outbox and its deliveries, decisions and
/// waivers, the audit trail. Both SQL stores implement it; events are written by
/// [`DriftSink::record`](crate::DriftSink::record) in the transaction of the report.
///
/// Contract (checked by `drift_testkit::act_suite!`):
/// - every event is delivered to every notifier whose routing takes it, at least once;
/// - a claimed delivery is leased to one worker until it settles it or the lease ends: two
///   workers never hold the same delivery at the same time;
/// - deliveries are never deleted by the notifier; a parked one stays until requeued;
/// - a decision, its effect on the drift and its audit entry are written in one transaction.
#[async_trait]
pub trait ActStore: Send + Sync + fmt::Debug {
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
    /// parked); a delivery whose lease `worker` lost is left alone. `Sent` also marks the
    /// drift as notified by `notifier` (for reminders and `resolved`).
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

    /// Ends the waivers that expired at `now`: the drifts count as open again, with a
    /// `waiver_expired` event and an audit entry each. Returns how many.
    async fn expire_waivers(&self, now: DateTime<Utc>) -> Result<usize>;

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

    /// Records a decision about a drift at `now` (already [`NewDecision::validate`]d): the
    /// decision row, its effect (an `accept` waives the drift until it expires, an
    /// `acknowledge` stops reminders, a `reject` recommends a revert), `decision_source =
    /// human`, and an audit entry, in one transaction. `NotFound` for an unknown drift;
    /// `InvalidInput` for a resolved one.
    async fn decide(&self, drift_id: i64, decision: &NewDecision, now: DateTime<Utc>) -> Result<Decision>;

    /// The decisions about a drift, oldest first.
    async fn decisions(&self, drift_id: i64) -> Result<Vec<Decision>>;

    /// What the decisions on drifts similar to this one ([`Similarity`]; the drift's own
    /// decisions left out) teach: how many were last accepted and rejected.
    async fn similar(&self, drift: &StoredDrift) -> Result<Option<Learned>>;

    /// The audit trail, newest first.
    async fn audit(&self, filter: &AuditFilter, page: PageRequest) -> Result<AuditPage>;

    /// Appends one entry to the audit trail at `now` (what the remediation did: a revert, an
    /// accepted change, a refusal), and returns its id. `detail` never holds a Secret value.
    async fn note(&self, entry: &AuditNote, now: DateTime<Utc>) -> Result<i64>;
}

/// An audit entry to append ([`ActStore::note`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditNote {
    /// What.
    pub action: AuditAction,
    /// Who: a token's name, a CLI user, or `heal`.
    pub actor: String,
    /// The drift it is about.
    pub drift_id: Option<i64>,
    /// The outcome.
    pub status: String,
    /// The rest: paths, the pull request, the refusal's reason.
    pub detail: Value,
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn event_ids_are_stable_and_tell_batches_subjects_and_kinds_apart() {
        let a = event_id("scan-1", "7", EventKind::Opened);
        assert_eq!(a, event_id("scan-1", "7", EventKind::Opened));
        assert_eq!(a.len(), 32);
        assert_ne!(a, event_id("scan-1", "7", EventKind::Resolved));
        assert_ne!(a, event_id("scan-17", "", EventKind::Opened), "length-prefixed parts");
        assert_ne!(a, event_id("scan-2", "7", EventKind::Opened));
    }

    #[test]
    fn a_waiver_needs_a_reason_and_gets_a_default_expiry() {
        let now = Utc.with_ymd_and_hms(2026, 12, 1, 9, 0, 0).unwrap();
        let accept = |comment: Option<&str>, expires_at| NewDecision {
            action: DecisionAction::Accept,
            comment: comment.map(str::to_owned),
            expires_at,
            actor: "alice".into(),
        };
        assert!(accept(None, None).validate(now).is_err());
        assert!(accept(Some("  "), None).validate(now).is_err());
        let ok = accept(Some("hotfix"), None).validate(now).unwrap();
        assert_eq!(ok.expires_at, Some(now + Duration::days(DEFAULT_WAIVER_DAYS)));
        assert!(accept(Some("x"), Some(now - Duration::seconds(1))).validate(now).is_err());
        assert!(accept(Some("x"), Some(now + Duration::days(MAX_WAIVER_DAYS + 1))).validate(now).is_err());
        let ack =
            NewDecision { action: DecisionAction::Acknowledge, comment: None, expires_at: None, actor: "a".into() };
        assert_eq!(ack.clone().validate(now).unwrap(), ack, "an acknowledgement needs nothing more");
    }

    #[test]
    fn learned_confidence_has_a_prior_and_explains_itself() {
        assert_eq!(Learned::from_counts(0, 0), None);
        let l = Learned::from_counts(10, 2).unwrap();
        assert!((l.intentional - 11.0 / 14.0).abs() < 1e-9);
        assert_eq!(l.explain(), "likely intentional (79%, 10 of 12 similar changes accepted)");
        let r = Learned::from_counts(1, 5).unwrap();
        assert_eq!(r.explain(), "likely unintended (75%, 5 of 6 similar changes rejected)");
        assert!((Learned::from_counts(1, 0).unwrap().intentional - 2.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn bands_split_the_day_in_four() {
        let at = |h| Utc.with_ymd_and_hms(2026, 12, 1, h, 59, 0).unwrap();
        assert_eq!([0, 5, 6, 11, 12, 18, 23].map(|h| hour_band(at(h))), [0, 0, 1, 1, 2, 3, 3]);
    }

    #[test]
    fn kinds_round_trip_and_unknown_ones_are_named() {
        for k in EventKind::ALL {
            assert_eq!(k.as_str().parse::<EventKind>().unwrap(), k);
            assert_eq!(serde_json::to_value(k).unwrap(), serde_json::json!(k.as_str()));
        }
        assert!("bogus".parse::<EventKind>().unwrap_err().to_string().contains("waiver_expired"));
        for a in AuditAction::ALL {
            assert_eq!(a.as_str().parse::<AuditAction>().unwrap(), a);
        }
    }
}
