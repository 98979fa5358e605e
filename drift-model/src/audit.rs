//! The audit trail: its entries, filters and pages, and the port of a store that keeps it
//! ([`AuditLog`]). docs/decisions.md describes what is recorded.

use std::fmt;
use std::str::FromStr;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Result;
use crate::sink::PageRequest;

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
    /// A revert of a drift (status `attempted` before it writes; then `reverted`,
    /// `already_reverted` (a retry found an earlier attempt's value in place), `would_revert`
    /// for self-heal's dry-run mode, `refused`, `failed` or `interrupted`; `dry_run` for a dry
    /// run, which writes nothing and has no `attempted` entry).
    Revert,
    /// A change accepted into Git (status `attempted` before it acts; then `proposed`,
    /// `updated`, `refused`, `failed` or `interrupted`).
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
                "unknown audit action {s:?} (decision, waiver_expired, waiver_ended, notification, scan, requeue, revert, accept)"
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
    /// For the outcome of an action (a revert or an accept that wrote an `attempted` entry
    /// before it acted): the id of that `attempted` entry. An attempt has at most one outcome.
    #[serde(default)]
    pub attempt: Option<i64>,
}

/// The status of the entry an action writes before it acts ([`AuditLog::unfinished`]).
pub const ATTEMPTED: &str = "attempted";

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

/// An audit entry to append ([`AuditLog::note`]).
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
    /// The `attempted` entry this outcome closes ([`AuditEntry::attempt`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<i64>,
}

/// The audit trail: what people and the detector did (decisions, deliveries, reverts, accepted
/// changes, refusals). Entries are appended, never changed (checked by
/// `drift_testkit::act_suite!` on the in-memory store, SQLite and PostgreSQL).
#[async_trait]
pub trait AuditLog: Send + Sync + fmt::Debug {
    /// The audit trail, newest first.
    async fn audit(&self, filter: &AuditFilter, page: PageRequest) -> Result<AuditPage>;

    /// Appends one entry to the audit trail at `now` (what the remediation did: a revert, an
    /// accepted change, a refusal), and returns its id. `detail` never holds a Secret value.
    /// An entry whose `attempt` is closed already (another entry names it) is refused with
    /// [`ErrorKind::Conflict`](crate::ErrorKind::Conflict) and not written: an attempt has one
    /// outcome.
    async fn note(&self, entry: &AuditNote, now: DateTime<Utc>) -> Result<i64>;

    /// The [`ATTEMPTED`] entries that no entry closes yet (none names them as its `attempt`),
    /// oldest first, at most `limit`: actions running now, or interrupted (their process was
    /// killed) and not yet closed as `interrupted`.
    async fn unfinished(&self, limit: u32) -> Result<Vec<AuditEntry>>;
}
