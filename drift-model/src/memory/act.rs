//! The acting side of the reference store: its outbox (events, cursors, leased deliveries),
//! its decisions and waivers, and its audit trail, as the SQL stores keep them in tables
//! (`drift-sql`'s `act.rs`), here in plain collections under the store's lock.
//! docs/notifications.md and docs/decisions.md describe the behaviour.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};

use super::store::{MemoryStore, MemoryStoreState, position, row_mut};
use crate::act::{
    AuditAction, AuditEntry, AuditFilter, AuditLog, AuditNote, AuditPage, Decision, DecisionAction, Decisions,
    Delivery, DeliveryRecord, DeliveryStatus, DriftEvent, EventKind, Learned, NewDecision, Outbox, ParkReason,
    Previous, Route, Settle, Similarity, event_id, git_waiver_decision,
};
use crate::report::ScanReport;
use crate::sink::{DriftStatus, PageRequest, RecordOutcome, StoredDrift};
use crate::{DecisionSource, Error, RecommendedAction, Result};

/// One drift a report changed, and the event it yields.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Change {
    /// The drift's row id.
    pub(super) drift_id: i64,
    /// What happened to it.
    pub(super) kind: EventKind,
    /// For `changed`: what it had before.
    pub(super) previous: Option<Previous>,
    /// The change ended a waiver (the cluster value of a waived drift changed).
    pub(super) ended_waiver: bool,
}

impl Change {
    /// A drift that simply opened, reopened or resolved.
    pub(super) fn of(drift_id: i64, kind: EventKind) -> Self {
        Change { drift_id, kind, previous: None, ended_waiver: false }
    }
}

/// What writing a report's drifts did: the counts, and the changes that become events.
#[derive(Debug, Default)]
pub(super) struct Written {
    pub(super) outcome: RecordOutcome,
    pub(super) changes: Vec<Change>,
}

/// A delivery as kept: where it stands, and who holds it until when.
#[derive(Debug, Clone)]
struct DeliveryState {
    status: DeliveryStatus,
    attempts: i64,
    due_at: DateTime<Utc>,
    last_error: Option<String>,
    sent_at: Option<DateTime<Utc>>,
    locked_by: Option<String>,
    locked_until: Option<DateTime<Utc>>,
    failing_since: Option<DateTime<Utc>>,
    park_reason: Option<ParkReason>,
}

impl DeliveryState {
    /// Waiting, due at `now`, held by nobody.
    fn pending(due_at: DateTime<Utc>) -> Self {
        DeliveryState {
            status: DeliveryStatus::Pending,
            attempts: 0,
            due_at,
            last_error: None,
            sent_at: None,
            locked_by: None,
            locked_until: None,
            failing_since: None,
            park_reason: None,
        }
    }

    /// Whether a claim at `now` may take it: pending, due, and its lease (if any) over.
    fn due(&self, now: DateTime<Utc>) -> bool {
        self.status == DeliveryStatus::Pending && self.due_at <= now && self.locked_until.is_none_or(|t| t < now)
    }
}

/// A decision as kept: what the API shows, and what made its drift similar to others when it
/// was taken (it outlives the drift's later changes).
#[derive(Debug, Clone)]
struct StoredDecision {
    decision: Decision,
    similarity: Similarity,
}

/// The outbox, the deliveries, the decisions and the audit trail of a [`MemoryStore`].
#[derive(Debug, Default)]
pub(super) struct ActState {
    /// The outbox; an event's `seq` is its position plus one.
    events: Vec<DriftEvent>,
    /// The position (`seq`) of each event, by id.
    seqs: HashMap<String, i64>,
    /// The last event each notifier has routed.
    cursors: HashMap<String, i64>,
    /// The deliveries, by event and notifier.
    deliveries: BTreeMap<(i64, String), DeliveryState>,
    /// When each notifier last sent an event announcing each drift, by drift and notifier.
    notified: HashMap<(i64, String), DateTime<Utc>>,
    /// The decisions; a decision's id is its position plus one.
    decisions: Vec<StoredDecision>,
    /// The audit trail; an entry's id is its position plus one.
    audit: Vec<AuditEntry>,
}

/// An audit entry of `action` by `actor` with `status`, about nothing yet.
fn entry(at: DateTime<Utc>, action: AuditAction, actor: impl Into<String>, status: impl Into<String>) -> AuditEntry {
    AuditEntry {
        id: 0,
        at,
        action,
        actor: actor.into(),
        drift_id: None,
        scan_id: None,
        notifier: None,
        event_id: None,
        status: status.into(),
        attempts: None,
        detail: json!({}),
        attempt: None,
    }
}

/// The event at this position of the outbox.
fn event_at(events: &[DriftEvent], seq: i64) -> Option<&DriftEvent> {
    events.get(usize::try_from(seq - 1).ok()?)
}

impl ActState {
    /// Appends events to the outbox; an id stored already is skipped. Returns how many were new.
    fn insert_events(&mut self, events: impl IntoIterator<Item = DriftEvent>) -> usize {
        let mut new = 0;
        for mut event in events {
            if self.seqs.contains_key(&event.id) {
                continue;
            }
            event.seq = self.events.len() as i64 + 1;
            self.seqs.insert(event.id.clone(), event.seq);
            self.events.push(event);
            new += 1;
        }
        new
    }

    /// Appends an entry to the audit trail and returns its id.
    fn log(&mut self, mut entry: AuditEntry) -> i64 {
        entry.id = self.audit.len() as i64 + 1;
        let id = entry.id;
        self.audit.push(entry);
        id
    }

    /// The delivery of an event to a notifier with its event.
    fn delivery(&self, (seq, notifier): &(i64, String), state: &DeliveryState) -> Option<Delivery> {
        Some(Delivery {
            event: event_at(&self.events, *seq)?.clone(),
            notifier: notifier.clone(),
            status: state.status,
            attempts: state.attempts,
            due_at: state.due_at,
            last_error: state.last_error.clone(),
            sent_at: state.sent_at,
            failing_since: state.failing_since,
            park_reason: state.park_reason,
        })
    }

    /// Records a decision about a live drift: the decision, its effect on the drift,
    /// `decision_source = human`, and its audit entry (with `detail` added).
    fn apply_decision(
        &mut self,
        drift: &mut StoredDrift,
        decision: &NewDecision,
        now: DateTime<Utc>,
        detail: Value,
    ) -> Decision {
        let stored = Decision {
            id: self.decisions.len() as i64 + 1,
            drift_id: drift.id,
            action: decision.action,
            comment: decision.comment.clone(),
            actor: decision.actor.clone(),
            decided_at: now,
            expires_at: decision.expires_at,
        };
        self.decisions.push(StoredDecision { decision: stored.clone(), similarity: Similarity::of(drift) });
        drift.decision_source = DecisionSource::Human;
        match decision.action {
            DecisionAction::Accept => {
                drift.status = DriftStatus::Waived;
                drift.waived_until = decision.expires_at;
                drift.waived_by = Some(decision.actor.clone());
            }
            DecisionAction::Acknowledge => drift.acknowledged_at = Some(now),
            DecisionAction::Reject => {
                drift.recommended_action = RecommendedAction::SuggestRevert;
                drift.status = DriftStatus::Open;
                drift.waived_until = None;
                drift.waived_by = None;
            }
        }
        let mut a = entry(now, AuditAction::Decision, decision.actor.clone(), decision.action.as_str());
        a.drift_id = Some(drift.id);
        a.detail = json!({"comment": decision.comment, "expires_at": decision.expires_at, "decision_id": stored.id});
        if let (Some(d), Value::Object(extra)) = (a.detail.as_object_mut(), detail) {
            d.extend(extra);
        }
        self.log(a);
        stored
    }

    /// The waivers written in Git of a report, after its drifts are written: a drift a waiver
    /// covers is waived (an `accept` decision by `git:<owner>` with the waiver's reason and
    /// expiry, when it was not already waived so); a drift waived from Git that the report
    /// shows without its waiver is open again, with a `waiver_expired` event and a
    /// `waiver_ended` audit entry. The events of drifts that end up waived are dropped: a
    /// waiver keeps them quiet.
    pub(super) fn git_waivers(&mut self, rows: &mut [StoredDrift], report: &ScanReport, written: &mut Written) {
        // The waiver of each fingerprint the report lists (the first drift of a fingerprint).
        let mut seen = HashSet::new();
        let mut waivers = HashMap::new();
        for drift in &report.drifts {
            let fp = drift.fingerprint(&report.cluster, &report.repository);
            if seen.insert(fp.clone())
                && let Some(w) = &drift.waiver
            {
                waivers.insert(fp, w);
            }
        }
        let (mut quiet, mut ended) = (HashSet::new(), Vec::new());
        for row in rows.iter_mut().filter(|r| {
            r.status != DriftStatus::Resolved && r.cluster == report.cluster && r.repository == report.repository
        }) {
            match waivers.get(&row.fingerprint) {
                Some(w) => {
                    quiet.insert(row.id);
                    if let Some((decision, detail)) = git_waiver_decision(w, row, &report.scan_id) {
                        written.outcome.waived += usize::from(row.status != DriftStatus::Waived);
                        self.apply_decision(row, &decision, report.finished_at, detail);
                    }
                }
                None if seen.contains(&row.fingerprint)
                    && row.status == DriftStatus::Waived
                    && row.waived_by.as_deref().is_some_and(|by| by.starts_with("git:")) =>
                {
                    row.status = DriftStatus::Open;
                    row.waived_until = None;
                    row.waived_by = None;
                    ended.push(row.id);
                }
                None => {}
            }
        }
        written.changes.retain(|c| !(quiet.contains(&c.drift_id) && c.kind != EventKind::Resolved));
        written.outcome.waived = written.outcome.waived.saturating_sub(ended.len());
        for id in ended {
            let mut a = entry(report.finished_at, AuditAction::WaiverEnded, "scanner", "open");
            a.drift_id = Some(id);
            a.scan_id = Some(report.scan_id.clone());
            a.detail = json!({"reason": "the waiver in Git was removed or has expired"});
            self.log(a);
            written.changes.push(Change::of(id, EventKind::WaiverExpired));
        }
    }

    /// The events of a report's changes (each with its drift as the report left it) and its
    /// audit entries: `waiver_ended` for each waiver a new cluster value ended, then the scan.
    /// Returns how many events were new.
    pub(super) fn enqueue(
        &mut self,
        rows: &[StoredDrift],
        report: &ScanReport,
        changes: &[Change],
        outcome: &RecordOutcome,
    ) -> usize {
        let events: Vec<DriftEvent> = changes
            .iter()
            .filter_map(|c| {
                // Every change names a row the report just wrote.
                let row = rows.get(position(rows, c.drift_id)?)?.clone();
                let mut event = DriftEvent::of_drift(c.kind, &report.scan_id, report.finished_at, row);
                event.previous = c.previous.clone();
                Some(event)
            })
            .collect();
        let written = self.insert_events(events);
        for c in changes.iter().filter(|c| c.ended_waiver) {
            let mut a = entry(report.finished_at, AuditAction::WaiverEnded, "scanner", "open");
            a.drift_id = Some(c.drift_id);
            a.scan_id = Some(report.scan_id.clone());
            a.detail = json!({"reason": "the cluster value changed"});
            self.log(a);
        }
        let mut scan = entry(report.finished_at, AuditAction::Scan, "scanner", report.outcome.as_str());
        scan.scan_id = Some(report.scan_id.clone());
        scan.detail = json!({
            "cluster": report.cluster, "repository": report.repository, "revision": report.revision,
            "drifts": report.drifts.len(), "warnings": report.warnings.len(),
            "opened": outcome.opened, "updated": outcome.updated, "resolved": outcome.resolved,
            "waived": outcome.waived, "events": written,
        });
        self.log(scan);
        written
    }
}

#[async_trait]
impl Outbox for MemoryStore {
    async fn emit(&self, events: &[DriftEvent]) -> Result<usize> {
        Ok(self.state().act.insert_events(events.iter().cloned()))
    }

    /// A notifier seen for the first time starts after the newest event. `route` is called
    /// under the store's lock: it must not call the store.
    async fn route(&self, notifier: &str, route: &Route<'_>, limit: usize) -> Result<usize> {
        let mut state = self.state();
        let act = &mut state.act;
        let newest = act.events.len() as i64;
        let cursor = *act.cursors.entry(notifier.to_owned()).or_insert(newest);
        let from = usize::try_from(cursor).unwrap_or(0);
        let read: Vec<(i64, Option<DateTime<Utc>>)> =
            act.events.iter().skip(from).take(limit).map(|e| (e.seq, route(e))).collect();
        let Some(&(last, _)) = read.last() else { return Ok(0) };
        for (seq, due) in &read {
            if let Some(due) = due {
                act.deliveries.entry((*seq, notifier.to_owned())).or_insert_with(|| DeliveryState::pending(*due));
            }
        }
        act.cursors.insert(notifier.to_owned(), last);
        Ok(read.len())
    }

    /// The due deliveries of the batch of the oldest due one (by due time, then position),
    /// leased to `worker` until `now + lease`, at most `limit`, in outbox order.
    async fn claim(
        &self,
        notifier: &str,
        worker: &str,
        now: DateTime<Utc>,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<Delivery>> {
        let mut state = self.state();
        let act = &mut state.act;
        let due = |(_, n): &(i64, String), d: &DeliveryState| n == notifier && d.due(now);
        let Some((first, _)) =
            act.deliveries.iter().filter(|(k, d)| due(k, d)).min_by_key(|((seq, _), d)| (d.due_at, *seq))
        else {
            return Ok(Vec::new());
        };
        let batch_of = |seq: i64| event_at(&act.events, seq).map(|e| &e.batch);
        let batch = batch_of(first.0).cloned();
        let keys: Vec<(i64, String)> = act
            .deliveries
            .iter()
            .filter(|(k, d)| due(k, d) && batch_of(k.0) == batch.as_ref())
            .map(|(k, _)| k.clone())
            .take(limit)
            .collect();
        let mut claimed = Vec::with_capacity(keys.len());
        for key in keys {
            if let Some(d) = act.deliveries.get_mut(&key) {
                d.locked_by = Some(worker.to_owned());
                d.locked_until = Some(now + lease);
            }
            claimed.extend(act.deliveries.get(&key).and_then(|d| act.delivery(&key, d)));
        }
        Ok(claimed)
    }

    /// Only deliveries `worker` still holds (pending, leased to it) are settled; each outcome
    /// but a deferral is an audit entry, and a sent announcement or reminder marks its drift
    /// notified.
    async fn settle(
        &self,
        notifier: &str,
        worker: &str,
        outcomes: &[(String, Settle)],
        now: DateTime<Utc>,
    ) -> Result<()> {
        let mut state = self.state();
        let act = &mut state.act;
        let mut answered = false;
        for (id, settle) in outcomes {
            let Some(&seq) = act.seqs.get(id) else { continue };
            let Some(event) = event_at(&act.events, seq) else { continue };
            let (kind, drift_id) = (event.kind, event.drift_id());
            let held =
                |d: &&mut DeliveryState| d.status == DeliveryStatus::Pending && d.locked_by.as_deref() == Some(worker);
            let Some(d) = act.deliveries.get_mut(&(seq, notifier.to_owned())).filter(held) else { continue };
            (d.locked_by, d.locked_until) = (None, None);
            let (status, detail) = match settle {
                Settle::Sent => {
                    (d.status, d.attempts, d.last_error, d.sent_at, d.failing_since) =
                        (DeliveryStatus::Sent, d.attempts + 1, None, Some(now), None);
                    answered = true;
                    ("sent", json!({"kind": kind}))
                }
                Settle::Retry { at, error } => {
                    (d.attempts, d.due_at, d.last_error) = (d.attempts + 1, *at, Some(error.clone()));
                    d.failing_since = Some(d.failing_since.unwrap_or(now));
                    ("retry", json!({"kind": kind, "error": error, "next_attempt_at": at}))
                }
                Settle::Parked { error, reason } => {
                    (d.status, d.attempts, d.last_error, d.park_reason) =
                        (DeliveryStatus::Parked, d.attempts + 1, Some(error.clone()), Some(*reason));
                    d.failing_since = Some(d.failing_since.unwrap_or(now));
                    ("parked", json!({"kind": kind, "error": error, "reason": reason}))
                }
                Settle::Skipped { reason } => {
                    (d.status, d.last_error) = (DeliveryStatus::Skipped, Some(reason.clone()));
                    ("skipped", json!({"kind": kind, "reason": reason}))
                }
                Settle::Defer { at } => {
                    d.due_at = *at;
                    continue;
                }
            };
            let attempts = d.attempts;
            if matches!(settle, Settle::Sent)
                && (kind.announces_open() || kind == EventKind::Reminder)
                && let Some(drift_id) = drift_id
            {
                act.notified.insert((drift_id, notifier.to_owned()), now);
            }
            let mut a = entry(now, AuditAction::Notification, format!("notifier:{notifier}"), status);
            a.drift_id = drift_id;
            a.notifier = Some(notifier.to_owned());
            a.event_id = Some(id.clone());
            a.attempts = Some(attempts);
            a.detail = detail;
            act.log(a);
        }
        if answered {
            // The receiver answers again: what an outage parked goes back in the queue.
            let keys: Vec<(i64, String)> = act
                .deliveries
                .iter()
                .filter(|((_, n), d)| {
                    n == notifier && d.status == DeliveryStatus::Parked && d.park_reason == Some(ParkReason::Outage)
                })
                .map(|(k, _)| k.clone())
                .collect();
            unpark(act, notifier, &keys, now, true);
        }
        Ok(())
    }

    async fn notified(&self, notifier: &str, drift_ids: &[i64]) -> Result<BTreeMap<i64, DateTime<Utc>>> {
        let state = self.state();
        Ok(drift_ids
            .iter()
            .filter_map(|id| Some((*id, *state.act.notified.get(&(*id, notifier.to_owned()))?)))
            .collect())
    }

    /// Open drifts, not acknowledged, that `notifier` last announced before `before`, in id
    /// order.
    async fn stale(&self, notifier: &str, before: DateTime<Utc>, limit: usize) -> Result<Vec<StoredDrift>> {
        let state = self.state();
        let told_before = |id: i64| state.act.notified.get(&(id, notifier.to_owned())).is_some_and(|at| *at < before);
        Ok(state
            .rows
            .iter()
            .filter(|r| r.status == DriftStatus::Open && r.acknowledged_at.is_none() && told_before(r.id))
            .take(limit)
            .cloned()
            .collect())
    }

    /// Pending and parked deliveries, by notifier and status.
    async fn delivery_counts(&self) -> Result<BTreeMap<(String, DeliveryStatus), i64>> {
        let mut counts = BTreeMap::new();
        for ((_, notifier), d) in &self.state().act.deliveries {
            if matches!(d.status, DeliveryStatus::Pending | DeliveryStatus::Parked) {
                *counts.entry((notifier.clone(), d.status)).or_default() += 1;
            }
        }
        Ok(counts)
    }

    /// As the SQL stores page them: the events of the newest `limit` deliveries that match
    /// (positions before `page.after`), with every matching delivery of those events, newest
    /// first.
    async fn deliveries(
        &self,
        drift_id: Option<i64>,
        status: Option<DeliveryStatus>,
        page: PageRequest,
    ) -> Result<Vec<DeliveryRecord>> {
        page.validate()?;
        let state = self.state();
        let act = &state.act;
        let matching: Vec<(&(i64, String), &DeliveryState)> = act
            .deliveries
            .iter()
            .rev()
            .filter(|((seq, _), d)| {
                let event_drift = event_at(&act.events, *seq).and_then(DriftEvent::drift_id);
                drift_id.is_none_or(|id| event_drift == Some(id)) && status.is_none_or(|s| s == d.status)
            })
            .collect();
        let below = |seq: i64| page.after.is_none_or(|a| seq < a);
        let events: BTreeSet<i64> =
            matching.iter().map(|((seq, _), _)| *seq).filter(|s| below(*s)).take(page.limit as usize).collect();
        Ok(matching
            .into_iter()
            .filter(|((seq, _), _)| events.contains(seq))
            .filter_map(|(k, d)| act.delivery(k, d))
            .map(|d| DeliveryRecord::from(&d))
            .collect())
    }

    async fn probe(&self, notifier: &str, now: DateTime<Utc>, limit: usize) -> Result<usize> {
        let mut state = self.state();
        let act = &mut state.act;
        let outage = |(_, n): &(i64, String), d: &DeliveryState| {
            n == notifier && d.status == DeliveryStatus::Parked && d.park_reason == Some(ParkReason::Outage)
        };
        let Some(((first, _), _)) = act.deliveries.iter().find(|(k, d)| outage(k, d)) else { return Ok(0) };
        let batch_of = |seq: i64| event_at(&act.events, seq).map(|e| &e.batch);
        let batch = batch_of(*first).cloned();
        let keys: Vec<(i64, String)> = act
            .deliveries
            .iter()
            .filter(|(k, d)| outage(k, d) && batch_of(k.0) == batch.as_ref())
            .map(|(k, _)| k.clone())
            .take(limit)
            .collect();
        unpark(act, notifier, &keys, now, false);
        Ok(keys.len())
    }

    async fn requeue(&self, event_id: &str, notifier: &str, actor: &str, now: DateTime<Utc>) -> Result<bool> {
        let mut state = self.state();
        let act = &mut state.act;
        let Some(&seq) = act.seqs.get(event_id) else { return Ok(false) };
        let Some(d) = act.deliveries.get_mut(&(seq, notifier.to_owned())) else { return Ok(false) };
        if d.status != DeliveryStatus::Parked {
            return Ok(false);
        }
        *d = DeliveryState { last_error: d.last_error.take(), sent_at: d.sent_at, ..DeliveryState::pending(now) };
        let mut a = entry(now, AuditAction::Requeue, actor, "pending");
        a.notifier = Some(notifier.to_owned());
        a.event_id = Some(event_id.to_owned());
        act.log(a);
        Ok(true)
    }
}

/// Puts parked deliveries back in the queue, due at `now`, each with an audit entry by the
/// notifier: for good when the receiver `answered` (attempts and `failing_since` start again),
/// or as a probe (they keep them: one more failure parks them again).
fn unpark(act: &mut ActState, notifier: &str, keys: &[(i64, String)], now: DateTime<Utc>, answered: bool) {
    for key in keys {
        let Some(d) = act.deliveries.get_mut(key) else { continue };
        (d.status, d.due_at, d.park_reason, d.locked_by, d.locked_until) =
            (DeliveryStatus::Pending, now, None, None, None);
        if answered {
            (d.attempts, d.failing_since) = (0, None);
        }
        let event_id = event_at(&act.events, key.0).map(|e| e.id.clone());
        let status = if answered { "pending" } else { "probe" };
        let mut a = entry(now, AuditAction::Requeue, format!("notifier:{notifier}"), status);
        a.notifier = Some(notifier.to_owned());
        a.event_id = event_id;
        a.detail = json!({"reason": if answered { "the receiver answered again" } else { "a probe of a receiver that was down" }});
        act.log(a);
    }
}

#[async_trait]
impl Decisions for MemoryStore {
    /// At most 1,000 waivers per call, in id order; each is one `waiver_expired` event whose id
    /// names the drift and the expiry, so whoever ends it, it is told once.
    async fn expire_waivers(&self, now: DateTime<Utc>) -> Result<usize> {
        let mut state = self.state();
        let MemoryStoreState { rows, act, .. } = &mut *state;
        let batch = format!("waivers:{}", now.timestamp());
        let mut events = Vec::new();
        for row in rows
            .iter_mut()
            .filter(|r| r.status == DriftStatus::Waived && r.waived_until.is_some_and(|u| u <= now))
            .take(1000)
        {
            let until = row.waived_until.unwrap_or(now);
            // The event's drift is the row as the SQL stores tell it: open, no longer waived
            // until, still saying whose waiver ended.
            let mut told = row.clone();
            (told.status, told.waived_until) = (DriftStatus::Open, None);
            (row.status, row.waived_until, row.waived_by) = (DriftStatus::Open, None, None);
            let mut e = DriftEvent::of_drift(EventKind::WaiverExpired, &batch, now, told);
            e.id = event_id("waiver", &format!("{}:{}", row.id, until.timestamp()), e.kind);
            events.push(e);
            let mut a = entry(now, AuditAction::WaiverExpired, "scheduler", "open");
            a.drift_id = Some(row.id);
            a.detail = json!({"waived_until": until});
            act.log(a);
        }
        let expired = events.len();
        act.insert_events(events);
        Ok(expired)
    }

    async fn decide(&self, drift_id: i64, decision: &NewDecision, now: DateTime<Utc>) -> Result<Decision> {
        let mut state = self.state();
        let MemoryStoreState { rows, act, .. } = &mut *state;
        let drift = row_mut(rows, drift_id).ok_or_else(|| Error::not_found(format!("no drift with id {drift_id}")))?;
        if drift.status == DriftStatus::Resolved {
            return Err(Error::invalid_input(format!("drift {drift_id} is resolved; nothing to decide")));
        }
        Ok(act.apply_decision(drift, decision, now, json!({})))
    }

    async fn decisions(&self, drift_id: i64) -> Result<Vec<Decision>> {
        let state = self.state();
        Ok(state.act.decisions.iter().filter(|d| d.decision.drift_id == drift_id).map(|d| d.decision.clone()).collect())
    }

    /// The last accept or reject of each other drift, counted when that drift was similar to
    /// this one when it was decided.
    async fn similar(&self, drift: &StoredDrift) -> Result<Option<Learned>> {
        let state = self.state();
        let mut last = HashMap::new();
        for d in &state.act.decisions {
            if d.decision.action != DecisionAction::Acknowledge {
                last.insert(d.decision.drift_id, d);
            }
        }
        let sim = Similarity::of(drift);
        let (mut accepted, mut rejected) = (0u32, 0u32);
        for d in last.values().filter(|d| d.decision.drift_id != drift.id && d.similarity == sim) {
            match d.decision.action {
                DecisionAction::Accept => accepted += 1,
                _ => rejected += 1,
            }
        }
        Ok(Learned::from_counts(accepted, rejected))
    }
}

#[async_trait]
impl AuditLog for MemoryStore {
    async fn audit(&self, filter: &AuditFilter, page: PageRequest) -> Result<AuditPage> {
        page.validate()?;
        let state = self.state();
        let mut items: Vec<AuditEntry> = state
            .act
            .audit
            .iter()
            .rev()
            .filter(|a| {
                filter.action.is_none_or(|x| x == a.action)
                    && filter.drift_id.is_none_or(|x| Some(x) == a.drift_id)
                    && filter.actor.as_ref().is_none_or(|x| *x == a.actor)
                    && filter.notifier.as_ref().is_none_or(|x| Some(x) == a.notifier.as_ref())
                    && filter.status.as_ref().is_none_or(|x| *x == a.status)
                    && filter.since.is_none_or(|x| a.at >= x)
                    && page.after.is_none_or(|x| a.id < x)
            })
            .take(page.fetch_limit())
            .cloned()
            .collect();
        let more = items.len() > page.limit as usize;
        items.truncate(page.limit as usize);
        let next = if more { items.last().map(|e| e.id) } else { None };
        Ok(AuditPage { items, next })
    }

    async fn note(&self, note: &AuditNote, now: DateTime<Utc>) -> Result<i64> {
        let mut a = entry(now, note.action, note.actor.clone(), note.status.clone());
        a.drift_id = note.drift_id;
        a.detail = note.detail.clone();
        a.attempt = note.attempt;
        let mut state = self.state();
        if let Some(attempt) = note.attempt
            && state.act.audit.iter().any(|e| e.attempt == Some(attempt))
        {
            return Err(crate::Error::conflict(format!("the attempt of audit entry {attempt} has an outcome already")));
        }
        Ok(state.act.log(a))
    }

    async fn unfinished(&self, limit: u32) -> Result<Vec<AuditEntry>> {
        let state = self.state();
        let closed: std::collections::HashSet<i64> = state.act.audit.iter().filter_map(|e| e.attempt).collect();
        Ok(state
            .act
            .audit
            .iter()
            .filter(|e| e.status == crate::audit::ATTEMPTED && !closed.contains(&e.id))
            .take(limit as usize)
            .cloned()
            .collect())
    }
}
