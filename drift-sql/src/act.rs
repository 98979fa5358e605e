//! The acting side of a SQL store ([`drift_model::ActStore`]), written once for both databases:
//! the outbox (events written in the transaction of the report that caused them), routing of
//! events to notifiers behind a locked cursor, leased deliveries, decisions and waivers, and the
//! audit trail. docs/notifications.md and docs/decisions.md describe the behaviour.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, Duration, Utc};
use drift_model::act::{
    AuditAction, AuditEntry, AuditFilter, AuditPage, Decision, DecisionAction, Delivery, DeliveryRecord,
    DeliveryStatus, DriftEvent, EventKind, Learned, NewDecision, Route, Settle, Similarity, event_id,
    git_waiver_decision,
};
use drift_model::sink::{DriftStatus, PageRequest, StoredDrift};
use drift_model::waiver::Waiver;
use drift_model::{CoverageEntry, ScanReport, SourceWarning};
use serde_json::{Value, json};
use sqlx::types::Json;
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, QueryBuilder, Row, Type};

use crate::error::{SqlContext, SqlError};
use crate::{COLUMNS, Change, Dialect, Sql, SqlStore, Written};

/// Events, deliveries and audit rows per multi-row statement (SQLite allows 32,766 parameters).
const ROWS: usize = 500;

/// Row ids per `IN` list read.
const IDS: usize = 5000;

/// The columns of an audit entry, in the order [`Sql::audit_entry`] reads them.
const AUDIT_COLUMNS: &str =
    "SELECT id, at, action, actor, drift_id, scan_id, notifier, event_id, status, attempts, detail, attempt";

/// An audit row to write.
#[derive(Debug, Clone)]
pub(crate) struct NewAudit {
    pub action: AuditAction,
    pub actor: String,
    pub drift_id: Option<i64>,
    pub scan_id: Option<String>,
    pub notifier: Option<String>,
    pub event_id: Option<String>,
    pub status: String,
    pub attempts: Option<i64>,
    pub detail: Value,
}

impl NewAudit {
    fn new(action: AuditAction, actor: impl Into<String>, status: impl Into<String>) -> Self {
        NewAudit {
            action,
            actor: actor.into(),
            drift_id: None,
            scan_id: None,
            notifier: None,
            event_id: None,
            status: status.into(),
            attempts: None,
            detail: json!({}),
        }
    }
}

type Conn<D> = <<D as Dialect>::Db as Database>::Connection;

impl<D: Dialect> Sql<D>
where
    for<'c> &'c mut <D::Db as Database>::Connection: Executor<'c, Database = D::Db>,
    for<'a> &'a str: ColumnIndex<<D::Db as Database>::Row>,
    String: for<'q> Encode<'q, D::Db> + for<'r> Decode<'r, D::Db> + Type<D::Db>,
    i64: for<'q> Encode<'q, D::Db> + for<'r> Decode<'r, D::Db> + Type<D::Db>,
    Option<String>: for<'q> Encode<'q, D::Db>,
    Option<i64>: for<'q> Encode<'q, D::Db>,
    Option<D::Time>: for<'q> Encode<'q, D::Db>,
    <D::Db as Database>::Arguments: IntoArguments<D::Db>,
    usize: ColumnIndex<<D::Db as Database>::Row>,
    for<'a> Json<&'a [SourceWarning]>: Encode<'a, D::Db> + Type<D::Db>,
    for<'a> Json<&'a [&'a CoverageEntry]>: Encode<'a, D::Db> + Type<D::Db>,
{
    /// Reads the drifts with these ids, by id.
    async fn rows_by_id(conn: &mut Conn<D>, ids: &[i64]) -> Result<HashMap<i64, StoredDrift>, SqlError<D>> {
        let mut rows = HashMap::with_capacity(ids.len());
        for chunk in ids.chunks(IDS) {
            let mut q = QueryBuilder::<D::Db>::new("SELECT ");
            q.push(COLUMNS).push(" FROM drifts WHERE ");
            D::push_ids(&mut q, "id", chunk.to_vec());
            for row in q.build().fetch_all(&mut *conn).await.ctx("reading changed drifts")? {
                let drift = Self::decode(&row)?;
                rows.insert(drift.id, drift);
            }
        }
        Ok(rows)
    }

    /// Writes events to the outbox in the transaction of `conn`, after taking the outbox lock
    /// ([`Dialect::OUTBOX_LOCK`]); an id stored already is skipped. Returns how many were new.
    pub(crate) async fn insert_events(conn: &mut Conn<D>, events: &[DriftEvent]) -> Result<usize, SqlError<D>> {
        if events.is_empty() {
            return Ok(0);
        }
        if let Some(lock) = D::OUTBOX_LOCK {
            sqlx::query(lock).execute(&mut *conn).await.ctx("locking the outbox")?;
        }
        if let Some(written) = D::insert_events(&mut *conn, events) {
            return Ok(written.await? as usize);
        }
        let mut new = 0;
        for chunk in events.chunks(ROWS) {
            let mut q =
                QueryBuilder::<D::Db>::new("INSERT INTO events (id, kind, batch, at, drift_id, notifier, payload) ");
            let mut first = true;
            q.push("VALUES ");
            for e in chunk {
                if !first {
                    q.push(", ");
                }
                first = false;
                q.push("(")
                    .push_bind(e.id.clone())
                    .push(", ")
                    .push_bind(e.kind.as_str().to_owned())
                    .push(", ")
                    .push_bind(e.batch.clone())
                    .push(", ")
                    .push_bind(D::time(e.at))
                    .push(", ")
                    .push_bind(e.drift_id())
                    .push(", ")
                    .push_bind(e.notifier.clone())
                    .push(", ");
                D::push_json(&mut q, serde_json::to_value(e).map_err(|err| SqlError::corrupt(0, "payload", err))?);
                q.push(")");
            }
            q.push(" ON CONFLICT (id) DO NOTHING");
            new += D::rows_affected(&q.build().execute(&mut *conn).await.ctx("writing events")?) as usize;
        }
        Ok(new)
    }

    /// Writes audit rows in the transaction of `conn`.
    pub(crate) async fn insert_audit(
        conn: &mut Conn<D>,
        at: DateTime<Utc>,
        rows: &[NewAudit],
    ) -> Result<(), SqlError<D>> {
        for chunk in rows.chunks(ROWS) {
            let mut q = QueryBuilder::<D::Db>::new(
                "INSERT INTO audit (at, action, actor, drift_id, scan_id, notifier, event_id, status, attempts, detail) \
                 VALUES ",
            );
            for (i, a) in chunk.iter().enumerate() {
                if i > 0 {
                    q.push(", ");
                }
                q.push("(")
                    .push_bind(D::time(at))
                    .push(", ")
                    .push_bind(a.action.as_str().to_owned())
                    .push(", ")
                    .push_bind(a.actor.clone())
                    .push(", ")
                    .push_bind(a.drift_id)
                    .push(", ")
                    .push_bind(a.scan_id.clone())
                    .push(", ")
                    .push_bind(a.notifier.clone())
                    .push(", ")
                    .push_bind(a.event_id.clone())
                    .push(", ")
                    .push_bind(a.status.clone())
                    .push(", ")
                    .push_bind(a.attempts)
                    .push(", ");
                D::push_json(&mut q, a.detail.clone());
                q.push(")");
            }
            q.build().execute(&mut *conn).await.ctx("writing the audit trail")?;
        }
        Ok(())
    }

    /// The events of a report's changes and its audit entry, in the transaction of the report:
    /// what [`Sql::record_once`] adds to the store's own write. Returns how many events.
    pub(crate) async fn enqueue(
        conn: &mut Conn<D>,
        report: &ScanReport,
        changes: &[Change],
        outcome: &drift_model::sink::RecordOutcome,
    ) -> Result<usize, SqlError<D>> {
        let ids: Vec<i64> = changes.iter().map(|c| c.drift_id).collect();
        let mut rows = Self::rows_by_id(conn, &ids).await?;
        let mut events = Vec::with_capacity(changes.len());
        for c in changes {
            let Some(row) = rows.remove(&c.drift_id) else {
                return Err(SqlError::corrupt(c.drift_id, "id", "a drift the report changed is gone"));
            };
            let mut event = DriftEvent::of_drift(c.kind, &report.scan_id, report.finished_at, row);
            event.previous = c.previous.clone();
            events.push(event);
        }
        let written = Self::insert_events(conn, &events).await?;
        let mut audit: Vec<NewAudit> = changes
            .iter()
            .filter(|c| c.ended_waiver)
            .map(|c| {
                let mut a = NewAudit::new(AuditAction::WaiverEnded, "scanner", "open");
                a.drift_id = Some(c.drift_id);
                a.scan_id = Some(report.scan_id.clone());
                a.detail = json!({"reason": "the cluster value changed"});
                a
            })
            .collect();
        let mut scan = NewAudit::new(AuditAction::Scan, "scanner", report.outcome.as_str());
        scan.scan_id = Some(report.scan_id.clone());
        scan.detail = json!({
            "cluster": report.cluster, "repository": report.repository, "revision": report.revision,
            "drifts": report.drifts.len(), "warnings": report.warnings.len(),
            "opened": outcome.opened, "updated": outcome.updated, "resolved": outcome.resolved,
            "waived": outcome.waived, "events": written,
        });
        audit.push(scan);
        Self::insert_audit(conn, report.finished_at, &audit).await?;
        Ok(written)
    }

    /// [`Outbox::emit`](drift_model::act::Outbox::emit).
    pub async fn emit<S: SqlStore<Dialect = D>>(store: &S, events: &[DriftEvent]) -> Result<usize, SqlError<D>> {
        let mut tx = store.begin().await?;
        let n = Self::insert_events(&mut tx, events).await?;
        tx.commit().await.ctx::<D>("committing events")?;
        Ok(n)
    }

    /// [`Outbox::route`](drift_model::act::Outbox::route).
    pub async fn route<S: SqlStore<Dialect = D>>(
        store: &S,
        notifier: &str,
        route: &Route<'_>,
        limit: usize,
    ) -> Result<usize, SqlError<D>> {
        let mut tx = store.begin().await?;
        let mut q = QueryBuilder::<D::Db>::new("INSERT INTO notifier_cursors (notifier, seq) SELECT ");
        q.push_bind(notifier.to_owned());
        q.push(", COALESCE(MAX(seq), 0) FROM events WHERE true ON CONFLICT (notifier) DO NOTHING");
        q.build().execute(&mut *tx).await.ctx::<D>("starting a notifier's cursor")?;
        let mut q = QueryBuilder::<D::Db>::new("SELECT seq FROM notifier_cursors WHERE notifier = ");
        q.push_bind(notifier.to_owned()).push(D::FOR_UPDATE);
        let cursor: i64 = q.build().fetch_one(&mut *tx).await.ctx::<D>("reading a notifier's cursor")?.try_get(0)?;
        let mut q = QueryBuilder::<D::Db>::new("SELECT seq, payload FROM events WHERE seq > ");
        q.push_bind(cursor).push(" ORDER BY seq LIMIT ").push_bind(limit as i64);
        let rows = q.build().fetch_all(&mut *tx).await.ctx::<D>("reading the outbox")?;
        let Some(last) = rows.last().map(|r| r.try_get::<i64, _>(0)).transpose()? else {
            // Commit: a cursor made just now is kept.
            tx.commit().await.ctx::<D>("committing a notifier's cursor")?;
            return Ok(0);
        };
        let mut routed = Vec::new();
        for row in &rows {
            let seq: i64 = row.try_get(0)?;
            let mut event = Self::event_of(row, seq)?;
            event.seq = seq;
            if let Some(due) = route(&event) {
                routed.push((event, due));
            }
        }
        for chunk in routed.chunks(ROWS) {
            let mut q = QueryBuilder::<D::Db>::new(
                "INSERT INTO deliveries (event_seq, notifier, batch, drift_id, kind, status, attempts, due_at) VALUES ",
            );
            for (i, (e, due)) in chunk.iter().enumerate() {
                if i > 0 {
                    q.push(", ");
                }
                q.push("(")
                    .push_bind(e.seq)
                    .push(", ")
                    .push_bind(notifier.to_owned())
                    .push(", ")
                    .push_bind(e.batch.clone())
                    .push(", ")
                    .push_bind(e.drift_id())
                    .push(", ")
                    .push_bind(e.kind.as_str().to_owned())
                    .push(", 'pending', 0, ")
                    .push_bind(D::time(*due))
                    .push(")");
            }
            q.push(" ON CONFLICT (event_seq, notifier) DO NOTHING");
            q.build().execute(&mut *tx).await.ctx::<D>("writing deliveries")?;
        }
        let mut q = QueryBuilder::<D::Db>::new("UPDATE notifier_cursors SET seq = ");
        q.push_bind(last).push(" WHERE notifier = ").push_bind(notifier.to_owned());
        q.build().execute(&mut *tx).await.ctx::<D>("moving a notifier's cursor")?;
        tx.commit().await.ctx::<D>("committing routed events")?;
        Ok(rows.len())
    }

    /// An event from its `payload` column.
    fn event_of(row: &<D::Db as Database>::Row, seq: i64) -> Result<DriftEvent, SqlError<D>> {
        let payload = D::json(row, seq, "payload")?.unwrap_or(Value::Null);
        serde_json::from_value(payload).map_err(|e| SqlError::corrupt(seq, "payload", e))
    }

    /// [`Outbox::claim`](drift_model::act::Outbox::claim).
    pub async fn claim<S: SqlStore<Dialect = D>>(
        store: &S,
        notifier: &str,
        worker: &str,
        now: DateTime<Utc>,
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<Delivery>, SqlError<D>> {
        let mut tx = store.begin().await?;
        if let Some(lock) = D::CLAIM_LOCK {
            sqlx::query(lock).bind(notifier.to_owned()).execute(&mut *tx).await.ctx::<D>("locking the claims")?;
        }
        let due = |q: &mut QueryBuilder<D::Db>| {
            q.push(" WHERE notifier = ").push_bind(notifier.to_owned());
            q.push(" AND status = 'pending' AND due_at <= ").push_bind(D::time(now));
            q.push(" AND (locked_until IS NULL OR locked_until < ").push_bind(D::time(now)).push(")");
        };
        let mut q = QueryBuilder::<D::Db>::new("SELECT batch FROM deliveries");
        due(&mut q);
        q.push(" ORDER BY due_at, event_seq LIMIT 1").push(D::SKIP_LOCKED);
        let Some(row) = q.build().fetch_optional(&mut *tx).await.ctx::<D>("finding due deliveries")? else {
            tx.rollback().await.ctx::<D>("ending a read")?;
            return Ok(Vec::new());
        };
        let batch: String = row.try_get(0)?;
        let mut q = QueryBuilder::<D::Db>::new("SELECT event_seq FROM deliveries");
        due(&mut q);
        q.push(" AND batch = ").push_bind(batch);
        q.push(" ORDER BY event_seq LIMIT ").push_bind(limit as i64).push(D::SKIP_LOCKED);
        let seqs: Vec<i64> = q
            .build()
            .fetch_all(&mut *tx)
            .await
            .ctx::<D>("claiming deliveries")?
            .iter()
            .map(|r| r.try_get(0))
            .collect::<Result<_, _>>()?;
        let mut q = QueryBuilder::<D::Db>::new("UPDATE deliveries SET locked_by = ");
        q.push_bind(worker.to_owned()).push(", locked_until = ").push_bind(D::time(now + lease));
        q.push(" WHERE notifier = ").push_bind(notifier.to_owned()).push(" AND ");
        D::push_ids(&mut q, "event_seq", seqs.clone());
        q.build().execute(&mut *tx).await.ctx::<D>("leasing deliveries")?;
        let deliveries = Self::read_deliveries(&mut tx, Some(notifier), &seqs).await?;
        tx.commit().await.ctx::<D>("committing a claim")?;
        Ok(deliveries)
    }

    /// The deliveries of these events (to `notifier`, or to every notifier), in `seq` order.
    async fn read_deliveries(
        conn: &mut Conn<D>,
        notifier: Option<&str>,
        seqs: &[i64],
    ) -> Result<Vec<Delivery>, SqlError<D>> {
        let mut out = Vec::with_capacity(seqs.len());
        for chunk in seqs.chunks(IDS) {
            let mut q = QueryBuilder::<D::Db>::new(
                "SELECT d.event_seq, d.notifier, d.status, d.attempts, d.due_at, d.last_error, d.sent_at, e.payload, \
                 d.failing_since, d.park_reason FROM deliveries d JOIN events e ON e.seq = d.event_seq WHERE ",
            );
            D::push_ids(&mut q, "d.event_seq", chunk.to_vec());
            if let Some(n) = notifier {
                q.push(" AND d.notifier = ").push_bind(n.to_owned());
            }
            q.push(" ORDER BY d.event_seq");
            for row in q.build().fetch_all(&mut *conn).await.ctx("reading deliveries")? {
                let seq: i64 = row.try_get(0)?;
                let mut event = Self::event_of(&row, seq)?;
                event.seq = seq;
                let status: String = row.try_get(2)?;
                let park_reason: Option<String> = row.try_get(9)?;
                let park_reason = park_reason
                    .map(|r| r.parse().map_err(|_| SqlError::corrupt(seq, "park_reason", &r)))
                    .transpose()?;
                out.push(Delivery {
                    event,
                    notifier: row.try_get(1)?,
                    status: status.parse().map_err(|_| SqlError::corrupt(seq, "status", &status))?,
                    attempts: row.try_get(3)?,
                    due_at: Self::time_at(&row, 4, seq)?,
                    last_error: row.try_get(5)?,
                    sent_at: Self::opt_time_at(&row, 6, seq)?,
                    failing_since: Self::opt_time_at(&row, 8, seq)?,
                    park_reason,
                });
            }
        }
        Ok(out)
    }

    fn time_at(row: &<D::Db as Database>::Row, i: usize, id: i64) -> Result<DateTime<Utc>, SqlError<D>> {
        D::from_time(row.try_get(i)?).ok_or_else(|| SqlError::corrupt(id, "time", "the time is out of range"))
    }

    fn opt_time_at(row: &<D::Db as Database>::Row, i: usize, id: i64) -> Result<Option<DateTime<Utc>>, SqlError<D>> {
        row.try_get::<Option<D::Time>, _>(i)?
            .map(|t| D::from_time(t).ok_or_else(|| SqlError::corrupt(id, "time", "the time is out of range")))
            .transpose()
    }

    /// [`Outbox::settle`](drift_model::act::Outbox::settle).
    pub async fn settle<S: SqlStore<Dialect = D>>(
        store: &S,
        notifier: &str,
        worker: &str,
        outcomes: &[(String, Settle)],
        now: DateTime<Utc>,
    ) -> Result<(), SqlError<D>> {
        if outcomes.is_empty() {
            return Ok(());
        }
        let mut tx = store.begin().await?;
        // The deliveries this worker still holds, by event id.
        let ids: Vec<String> = outcomes.iter().map(|(id, _)| id.clone()).collect();
        let mut held: HashMap<String, (i64, Option<i64>, String, i64)> = HashMap::new();
        for chunk in ids.chunks(IDS) {
            let mut q = QueryBuilder::<D::Db>::new(
                "SELECT e.id, d.event_seq, d.drift_id, d.kind, d.attempts FROM deliveries d \
                 JOIN events e ON e.seq = d.event_seq WHERE d.notifier = ",
            );
            q.push_bind(notifier.to_owned()).push(" AND d.status = 'pending' AND d.locked_by = ");
            q.push_bind(worker.to_owned()).push(" AND ");
            D::push_texts(&mut q, "e.id", chunk.to_vec());
            for row in q.build().fetch_all(&mut *tx).await.ctx::<D>("reading held deliveries")? {
                held.insert(row.try_get(0)?, (row.try_get(1)?, row.try_get(2)?, row.try_get(3)?, row.try_get(4)?));
            }
        }
        // One statement per kind of outcome and value (a message's events share them).
        let mut groups: Vec<(&Settle, Vec<i64>)> = Vec::new();
        let mut audit = Vec::new();
        let mut announced = Vec::new();
        for (id, settle) in outcomes {
            let Some((seq, drift_id, kind, attempts)) = held.get(id) else { continue };
            match groups.iter_mut().find(|(s, _)| *s == settle) {
                Some((_, seqs)) => seqs.push(*seq),
                None => groups.push((settle, vec![*seq])),
            }
            let attempts = attempts + i64::from(!matches!(settle, Settle::Skipped { .. } | Settle::Defer { .. }));
            let (status, detail) = match settle {
                Settle::Sent => ("sent", json!({"kind": kind})),
                Settle::Retry { at, error } => ("retry", json!({"kind": kind, "error": error, "next_attempt_at": at})),
                Settle::Parked { error, reason } => ("parked", json!({"kind": kind, "error": error, "reason": reason})),
                Settle::Skipped { reason } => ("skipped", json!({"kind": kind, "reason": reason})),
                Settle::Defer { .. } => continue,
            };
            if matches!(settle, Settle::Sent)
                && kind.parse::<EventKind>().is_ok_and(|k| k.announces_open() || k == EventKind::Reminder)
            {
                announced.extend(*drift_id);
            }
            let mut a = NewAudit::new(AuditAction::Notification, format!("notifier:{notifier}"), status);
            a.drift_id = *drift_id;
            a.notifier = Some(notifier.to_owned());
            a.event_id = Some(id.clone());
            a.attempts = Some(attempts);
            a.detail = detail;
            audit.push(a);
        }
        for (settle, seqs) in groups {
            let mut q = QueryBuilder::<D::Db>::new("UPDATE deliveries SET locked_by = NULL, locked_until = NULL");
            match settle {
                Settle::Sent => {
                    q.push(", status = 'sent', attempts = attempts + 1, last_error = NULL, failing_since = NULL");
                    q.push(", sent_at = ").push_bind(D::time(now));
                }
                Settle::Retry { at, error } => {
                    q.push(", attempts = attempts + 1, due_at = ").push_bind(D::time(*at));
                    q.push(", last_error = ").push_bind(error.clone());
                    q.push(", failing_since = COALESCE(failing_since, ").push_bind(D::time(now)).push(")");
                }
                Settle::Parked { error, reason } => {
                    q.push(", status = 'parked', attempts = attempts + 1, last_error = ").push_bind(error.clone());
                    q.push(", park_reason = ").push_bind(reason.as_str().to_owned());
                    q.push(", failing_since = COALESCE(failing_since, ").push_bind(D::time(now)).push(")");
                }
                Settle::Skipped { reason } => {
                    q.push(", status = 'skipped', last_error = ").push_bind(reason.clone());
                }
                Settle::Defer { at } => {
                    q.push(", due_at = ").push_bind(D::time(*at));
                }
            }
            q.push(" WHERE notifier = ").push_bind(notifier.to_owned());
            q.push(" AND status = 'pending' AND locked_by = ").push_bind(worker.to_owned()).push(" AND ");
            D::push_ids(&mut q, "event_seq", seqs);
            q.build().execute(&mut *tx).await.ctx::<D>("settling deliveries")?;
        }
        announced.sort_unstable();
        announced.dedup();
        for chunk in announced.chunks(ROWS) {
            let mut q = QueryBuilder::<D::Db>::new("INSERT INTO notified (drift_id, notifier, last_at) VALUES ");
            for (i, id) in chunk.iter().enumerate() {
                if i > 0 {
                    q.push(", ");
                }
                q.push("(").push_bind(*id).push(", ").push_bind(notifier.to_owned());
                q.push(", ").push_bind(D::time(now)).push(")");
            }
            q.push(" ON CONFLICT (drift_id, notifier) DO UPDATE SET last_at = excluded.last_at");
            q.build().execute(&mut *tx).await.ctx::<D>("marking drifts notified")?;
        }
        if outcomes.iter().any(|(id, s)| matches!(s, Settle::Sent) && held.contains_key(id)) {
            // The receiver answers again: what an outage parked goes back in the queue.
            let unparked = Self::unpark(&mut tx, notifier, None, now).await?;
            audit.extend(unparked.into_iter().map(|event_id| {
                let mut a = NewAudit::new(AuditAction::Requeue, format!("notifier:{notifier}"), "pending");
                a.notifier = Some(notifier.to_owned());
                a.event_id = Some(event_id);
                a.detail = json!({"reason": "the receiver answered again"});
                a
            }));
        }
        Self::insert_audit(&mut tx, now, &audit).await?;
        tx.commit().await.ctx::<D>("committing settled deliveries")?;
        Ok(())
    }

    /// Puts the deliveries of `notifier` parked by an outage back in the queue, due at `now`,
    /// and returns their event ids: all of them, for good (attempts and `failing_since` start
    /// again), or, as a probe, those of `probe`'s batch (they keep them).
    async fn unpark(
        conn: &mut Conn<D>,
        notifier: &str,
        probe: Option<(&str, usize)>,
        now: DateTime<Utc>,
    ) -> Result<Vec<String>, SqlError<D>> {
        let mut q = QueryBuilder::<D::Db>::new(
            "SELECT d.event_seq, e.id FROM deliveries d JOIN events e ON e.seq = d.event_seq",
        );
        q.push(" WHERE d.notifier = ").push_bind(notifier.to_owned());
        q.push(" AND d.status = 'parked' AND d.park_reason = 'outage'");
        if let Some((batch, _)) = probe {
            q.push(" AND d.batch = ").push_bind(batch.to_owned());
        }
        q.push(" ORDER BY d.event_seq");
        if let Some((_, limit)) = probe {
            q.push(" LIMIT ").push_bind(limit as i64);
        }
        let rows = q.build().fetch_all(&mut *conn).await.ctx("reading parked deliveries")?;
        let mut found = BTreeMap::new();
        for row in rows {
            found.insert(row.try_get::<i64, _>(0)?, row.try_get::<String, _>(1)?);
        }
        let seqs: Vec<i64> = found.keys().copied().collect();
        // Only what this statement changed is told (another process may have put some back).
        let mut done = Vec::with_capacity(seqs.len());
        for chunk in seqs.chunks(IDS) {
            let mut q = QueryBuilder::<D::Db>::new(
                "UPDATE deliveries SET status = 'pending', park_reason = NULL, locked_by = NULL, locked_until = NULL",
            );
            if probe.is_none() {
                q.push(", attempts = 0, failing_since = NULL");
            }
            q.push(", due_at = ").push_bind(D::time(now));
            q.push(" WHERE notifier = ").push_bind(notifier.to_owned());
            q.push(" AND status = 'parked' AND park_reason = 'outage' AND ");
            D::push_ids(&mut q, "event_seq", chunk.to_vec());
            q.push(" RETURNING event_seq");
            for row in q.build().fetch_all(&mut *conn).await.ctx("putting parked deliveries back")? {
                done.push(row.try_get::<i64, _>(0)?);
            }
        }
        done.sort_unstable();
        Ok(done.iter().filter_map(|seq| found.get(seq).cloned()).collect())
    }

    /// [`Outbox::probe`](drift_model::act::Outbox::probe).
    pub async fn probe<S: SqlStore<Dialect = D>>(
        store: &S,
        notifier: &str,
        now: DateTime<Utc>,
        limit: usize,
    ) -> Result<usize, SqlError<D>> {
        let mut tx = store.begin().await?;
        let mut q = QueryBuilder::<D::Db>::new("SELECT batch FROM deliveries WHERE notifier = ");
        q.push_bind(notifier.to_owned());
        q.push(" AND status = 'parked' AND park_reason = 'outage' ORDER BY event_seq LIMIT 1");
        let Some(row) = q.build().fetch_optional(&mut *tx).await.ctx::<D>("finding parked deliveries")? else {
            tx.rollback().await.ctx::<D>("ending a read")?;
            return Ok(0);
        };
        let batch: String = row.try_get(0)?;
        let ids = Self::unpark(&mut tx, notifier, Some((&batch, limit)), now).await?;
        let audit: Vec<NewAudit> = ids
            .iter()
            .map(|event_id| {
                let mut a = NewAudit::new(AuditAction::Requeue, format!("notifier:{notifier}"), "probe");
                a.notifier = Some(notifier.to_owned());
                a.event_id = Some(event_id.clone());
                a.detail = json!({"reason": "a probe of a receiver that was down"});
                a
            })
            .collect();
        Self::insert_audit(&mut tx, now, &audit).await?;
        tx.commit().await.ctx::<D>("committing a probe")?;
        Ok(ids.len())
    }

    /// [`Outbox::notified`](drift_model::act::Outbox::notified).
    pub async fn notified<S: SqlStore<Dialect = D>>(
        store: &S,
        notifier: &str,
        drift_ids: &[i64],
    ) -> Result<BTreeMap<i64, DateTime<Utc>>, SqlError<D>> {
        let mut out = BTreeMap::new();
        for chunk in drift_ids.chunks(IDS) {
            let mut q = QueryBuilder::<D::Db>::new("SELECT drift_id, last_at FROM notified WHERE notifier = ");
            q.push_bind(notifier.to_owned()).push(" AND ");
            D::push_ids(&mut q, "drift_id", chunk.to_vec());
            for row in q.build().fetch_all(store.reader()).await.ctx::<D>("reading notified drifts")? {
                let id: i64 = row.try_get(0)?;
                out.insert(id, Self::time_at(&row, 1, id)?);
            }
        }
        Ok(out)
    }

    /// [`Outbox::stale`](drift_model::act::Outbox::stale).
    pub async fn stale<S: SqlStore<Dialect = D>>(
        store: &S,
        notifier: &str,
        before: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<StoredDrift>, SqlError<D>> {
        let mut q = QueryBuilder::<D::Db>::new("SELECT ");
        q.push(COLUMNS).push(" FROM drifts WHERE status = 'open' AND acknowledged_at IS NULL AND id IN ");
        q.push("(SELECT drift_id FROM notified WHERE notifier = ").push_bind(notifier.to_owned());
        q.push(" AND last_at < ").push_bind(D::time(before)).push(") ORDER BY id LIMIT ").push_bind(limit as i64);
        let rows = q.build().fetch_all(store.reader()).await.ctx::<D>("finding drifts to remind")?;
        rows.iter().map(Self::decode).collect::<Result<Vec<_>, _>>()
    }

    /// Moves rows `ids` to another status with `set` (an `UPDATE drifts SET ...` tail), keeping
    /// the rollups of stores that keep them by hand ([`SqlStore::rollup_rows`]).
    async fn restatus<S: SqlStore<Dialect = D>>(
        store: &S,
        conn: &mut Conn<D>,
        ids: &[i64],
        set: impl FnOnce(&mut QueryBuilder<D::Db>),
    ) -> Result<(), SqlError<D>> {
        store.rollup_rows(&mut *conn, ids, -1).await?;
        let mut q = QueryBuilder::<D::Db>::new("UPDATE drifts SET ");
        set(&mut q);
        q.push(" WHERE ");
        D::push_ids(&mut q, "id", ids.to_vec());
        q.build().execute(&mut *conn).await.ctx("changing a drift's status")?;
        store.rollup_rows(&mut *conn, ids, 1).await
    }

    /// [`Decisions::expire_waivers`](drift_model::act::Decisions::expire_waivers).
    pub async fn expire_waivers<S: SqlStore<Dialect = D>>(store: &S, now: DateTime<Utc>) -> Result<usize, SqlError<D>> {
        let mut tx = store.begin().await?;
        let mut q = QueryBuilder::<D::Db>::new("SELECT ");
        q.push(COLUMNS).push(" FROM drifts WHERE status = 'waived' AND waived_until <= ").push_bind(D::time(now));
        q.push(" ORDER BY id LIMIT 1000").push(D::FOR_UPDATE);
        let rows = q.build().fetch_all(&mut *tx).await.ctx::<D>("finding expired waivers")?;
        let expired = rows.iter().map(Self::decode).collect::<Result<Vec<_>, _>>()?;
        if expired.is_empty() {
            tx.rollback().await.ctx::<D>("ending a read")?;
            return Ok(0);
        }
        let ids: Vec<i64> = expired.iter().map(|d| d.id).collect();
        Self::restatus(store, &mut tx, &ids, |q| {
            q.push("status = 'open', waived_until = NULL, waived_by = NULL");
        })
        .await?;
        let batch = format!("waivers:{}", now.timestamp());
        let mut events = Vec::new();
        let mut audit = Vec::new();
        for mut d in expired {
            let until = d.waived_until.take().unwrap_or(now);
            d.status = DriftStatus::Open;
            let mut a = NewAudit::new(AuditAction::WaiverExpired, "scheduler", "open");
            a.drift_id = Some(d.id);
            a.detail = json!({"waived_until": until});
            audit.push(a);
            let mut e = DriftEvent::of_drift(EventKind::WaiverExpired, &batch, now, d);
            // One event per waiver whoever ends it: the id names the drift and the expiry.
            e.id = event_id("waiver", &format!("{}:{}", e.drift_id().unwrap_or_default(), until.timestamp()), e.kind);
            events.push(e);
        }
        Self::insert_events(&mut tx, &events).await?;
        Self::insert_audit(&mut tx, now, &audit).await?;
        tx.commit().await.ctx::<D>("committing expired waivers")?;
        Ok(events.len())
    }

    /// [`Outbox::delivery_counts`](drift_model::act::Outbox::delivery_counts): pending and parked
    /// deliveries (the partial indexes keep this cheap; sent ones are counted by the process
    /// that sends them).
    pub async fn delivery_counts<S: SqlStore<Dialect = D>>(
        store: &S,
    ) -> Result<BTreeMap<(String, DeliveryStatus), i64>, SqlError<D>> {
        let q = "SELECT notifier, status, count(*) FROM deliveries WHERE status IN ('pending', 'parked') \
                 GROUP BY notifier, status";
        let rows = sqlx::query(q).fetch_all(store.reader()).await.ctx::<D>("counting deliveries")?;
        let mut out = BTreeMap::new();
        for row in rows {
            let status: String = row.try_get(1)?;
            let status = status.parse().map_err(|_| SqlError::<D>::corrupt(0, "status", &status))?;
            out.insert((row.try_get(0)?, status), row.try_get(2)?);
        }
        Ok(out)
    }

    /// [`Outbox::deliveries`](drift_model::act::Outbox::deliveries).
    pub async fn deliveries<S: SqlStore<Dialect = D>>(
        store: &S,
        drift_id: Option<i64>,
        status: Option<DeliveryStatus>,
        page: PageRequest,
    ) -> Result<Vec<DeliveryRecord>, SqlError<D>> {
        page.validate()?;
        let mut q = QueryBuilder::<D::Db>::new("SELECT event_seq FROM deliveries WHERE true");
        if let Some(id) = drift_id {
            q.push(" AND drift_id = ").push_bind(id);
        }
        if let Some(s) = status {
            q.push(" AND status = ").push_bind(s.as_str().to_owned());
        }
        if let Some(after) = page.after {
            q.push(" AND event_seq < ").push_bind(after);
        }
        q.push(" ORDER BY event_seq DESC LIMIT ").push_bind(i64::from(page.limit));
        let mut conn = store.reader().acquire().await.ctx::<D>("reading deliveries")?;
        let seqs: Vec<i64> = q
            .build()
            .fetch_all(&mut *conn)
            .await
            .ctx::<D>("reading deliveries")?
            .iter()
            .map(|r| r.try_get(0))
            .collect::<Result<_, _>>()?;
        let mut all = Self::read_deliveries(&mut conn, None, &seqs).await?;
        all.retain(|d| status.is_none_or(|s| s == d.status));
        all.reverse();
        Ok(all.iter().map(DeliveryRecord::from).collect())
    }

    /// [`Outbox::requeue`](drift_model::act::Outbox::requeue).
    pub async fn requeue<S: SqlStore<Dialect = D>>(
        store: &S,
        event_id: &str,
        notifier: &str,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, SqlError<D>> {
        let mut tx = store.begin().await?;
        let mut q = QueryBuilder::<D::Db>::new(
            "UPDATE deliveries SET status = 'pending', attempts = 0, locked_by = NULL, locked_until = NULL, \
             failing_since = NULL, park_reason = NULL, due_at = ",
        );
        q.push_bind(D::time(now)).push(" WHERE status = 'parked' AND notifier = ").push_bind(notifier.to_owned());
        q.push(" AND event_seq = (SELECT seq FROM events WHERE id = ").push_bind(event_id.to_owned()).push(")");
        let done = D::rows_affected(&q.build().execute(&mut *tx).await.ctx::<D>("requeueing a delivery")?) > 0;
        if done {
            let mut a = NewAudit::new(AuditAction::Requeue, actor, "pending");
            a.notifier = Some(notifier.to_owned());
            a.event_id = Some(event_id.to_owned());
            Self::insert_audit(&mut tx, now, &[a]).await?;
        }
        tx.commit().await.ctx::<D>("committing a requeue")?;
        Ok(done)
    }

    /// [`AuditLog::note`](drift_model::act::AuditLog::note).
    pub async fn note<S: SqlStore<Dialect = D>>(
        store: &S,
        entry: &drift_model::act::AuditNote,
        now: DateTime<Utc>,
    ) -> Result<i64, SqlError<D>> {
        let mut tx = store.begin().await?;
        let mut q = QueryBuilder::<D::Db>::new(
            "INSERT INTO audit (at, action, actor, drift_id, status, attempt, detail) VALUES (",
        );
        q.push_bind(D::time(now))
            .push(", ")
            .push_bind(entry.action.as_str().to_owned())
            .push(", ")
            .push_bind(entry.actor.clone())
            .push(", ")
            .push_bind(entry.drift_id)
            .push(", ")
            .push_bind(entry.status.clone())
            .push(", ")
            .push_bind(entry.attempt)
            .push(", ");
        D::push_json(&mut q, entry.detail.clone());
        q.push(") RETURNING id");
        let id: i64 = match q.build_query_scalar().fetch_one(&mut *tx).await {
            Ok(id) => id,
            Err(e) => {
                // The unique index on `attempt`: another outcome of the attempt landed first.
                if let (sqlx::Error::Database(db), Some(attempt)) = (&e, entry.attempt)
                    && db.is_unique_violation()
                {
                    let message = format!("the attempt of audit entry {attempt} has an outcome already");
                    return Err(drift_model::Error::conflict(message).into());
                }
                return Err(SqlError::sql("writing an audit entry", e));
            }
        };
        tx.commit().await.ctx::<D>("committing an audit entry")?;
        Ok(id)
    }

    /// [`Decisions::decide`](drift_model::act::Decisions::decide). Tried again (up to 3 times)
    /// when the store says the transaction may succeed on a second try: on PostgreSQL's
    /// partitioned history, a drift resolved while it is being decided moves to its month's
    /// partition and the row lock fails with a serialization error (40001, "tuple to be locked
    /// was already moved to another partition"); the second try reads it resolved and says so.
    pub async fn decide<S: SqlStore<Dialect = D>>(
        store: &S,
        drift_id: i64,
        decision: &NewDecision,
        now: DateTime<Utc>,
    ) -> Result<Decision, SqlError<D>> {
        let mut attempt = 1;
        loop {
            match Self::decide_once(store, drift_id, decision, now).await {
                Err(e) if e.retryable() && attempt < 3 => {
                    tracing::debug!(drift_id, attempt, error = %e, "a decision met a concurrent write; trying again");
                    attempt += 1;
                }
                done => return done,
            }
        }
    }

    async fn decide_once<S: SqlStore<Dialect = D>>(
        store: &S,
        drift_id: i64,
        decision: &NewDecision,
        now: DateTime<Utc>,
    ) -> Result<Decision, SqlError<D>> {
        let mut tx = store.begin().await?;
        let mut q = QueryBuilder::<D::Db>::new("SELECT ");
        q.push(COLUMNS).push(" FROM drifts WHERE id = ").push_bind(drift_id).push(D::FOR_UPDATE);
        let Some(row) = q.build().fetch_optional(&mut *tx).await.ctx::<D>("reading a drift")? else {
            return Err(drift_model::Error::not_found(format!("no drift with id {drift_id}")).into());
        };
        let drift = Self::decode(&row)?;
        if drift.status == DriftStatus::Resolved {
            return Err(
                drift_model::Error::invalid_input(format!("drift {drift_id} is resolved; nothing to decide")).into()
            );
        }
        let decision = Self::apply_decision(store, &mut tx, &drift, decision, now, json!({})).await?;
        tx.commit().await.ctx::<D>("committing a decision")?;
        Ok(decision)
    }

    /// Records a decision about a live drift in the transaction of `conn`: the decision row,
    /// its effect on the drift (with the rollups kept), `decision_source = human`, and its
    /// audit entry (with `detail` added).
    async fn apply_decision<S: SqlStore<Dialect = D>>(
        store: &S,
        conn: &mut Conn<D>,
        drift: &StoredDrift,
        decision: &NewDecision,
        now: DateTime<Utc>,
        detail: Value,
    ) -> Result<Decision, SqlError<D>> {
        let drift_id = drift.id;
        let sim = Similarity::of(drift);
        let mut q = QueryBuilder::<D::Db>::new(
            "INSERT INTO decisions (drift_id, action, comment, actor, decided_at, expires_at, manager, namespace, \
             drift_type, band) VALUES (",
        );
        q.push_bind(drift_id).push(", ").push_bind(decision.action.as_str().to_owned());
        q.push(", ").push_bind(decision.comment.clone()).push(", ").push_bind(decision.actor.clone());
        q.push(", ").push_bind(D::time(now)).push(", ").push_bind(decision.expires_at.map(D::time));
        q.push(", ").push_bind(sim.manager).push(", ").push_bind(sim.namespace);
        q.push(", ").push_bind(sim.drift_type.as_str().to_owned()).push(", ").push_bind(i64::from(sim.band));
        q.push(") RETURNING id");
        let id: i64 = q.build().fetch_one(&mut *conn).await.ctx("recording a decision")?.try_get(0)?;
        let (expires, actor) = (decision.expires_at, decision.actor.clone());
        match decision.action {
            DecisionAction::Accept => {
                Self::restatus(store, conn, &[drift_id], |q| {
                    q.push("decision_source = 'human', status = 'waived', waived_until = ");
                    q.push_bind(expires.map(D::time)).push(", waived_by = ").push_bind(actor);
                })
                .await?
            }
            DecisionAction::Acknowledge => {
                Self::restatus(store, conn, &[drift_id], |q| {
                    q.push("decision_source = 'human', acknowledged_at = ").push_bind(D::time(now));
                })
                .await?
            }
            DecisionAction::Reject => {
                Self::restatus(store, conn, &[drift_id], |q| {
                    q.push(
                        "decision_source = 'human', recommended_action = 'suggest_revert', status = 'open', \
                         waived_until = NULL, waived_by = NULL",
                    );
                })
                .await?
            }
        }
        let mut a = NewAudit::new(AuditAction::Decision, decision.actor.clone(), decision.action.as_str());
        a.drift_id = Some(drift_id);
        let mut d = json!({"comment": decision.comment, "expires_at": decision.expires_at, "decision_id": id});
        if let (Some(d), Value::Object(extra)) = (d.as_object_mut(), detail) {
            d.extend(extra);
        }
        a.detail = d;
        Self::insert_audit(conn, now, &[a]).await?;
        Ok(Decision {
            id,
            drift_id,
            action: decision.action,
            comment: decision.comment.clone(),
            actor: decision.actor.clone(),
            decided_at: now,
            expires_at: decision.expires_at,
        })
    }

    /// The waivers written in Git of a report ([`drift_model::waiver`]), in its transaction,
    /// after the store's write: a drift a waiver covers is waived (an `accept` decision by
    /// `git:<owner>` with the waiver's reason and expiry, when it was not already waived so);
    /// a drift waived from Git that the report shows without its waiver (removed from Git, or
    /// expired) is open again with a `waiver_expired` event. The events of drifts that end up
    /// waived are dropped: a waiver keeps them quiet.
    pub(crate) async fn git_waivers<S: SqlStore<Dialect = D>>(
        store: &S,
        conn: &mut Conn<D>,
        report: &ScanReport,
        written: &mut Written,
    ) -> Result<(), SqlError<D>> {
        let drifts = crate::distinct_drifts(report);
        let waivers: HashMap<&str, &Waiver> =
            drifts.iter().filter_map(|(fp, d)| Some((fp.as_str(), d.waiver.as_ref()?))).collect();
        let seen: HashSet<&str> = drifts.iter().map(|(fp, _)| fp.as_str()).collect();
        // Two index ranges: the waived rows of the scope (few), the live rows of the waivers.
        let mut q = QueryBuilder::<D::Db>::new("SELECT ");
        q.push(COLUMNS).push(" FROM drifts WHERE cluster = ").push_bind(report.cluster.clone());
        q.push(" AND repository = ").push_bind(report.repository.clone());
        q.push(" AND ((status = 'waived' AND waived_by LIKE 'git:%')");
        if !waivers.is_empty() {
            q.push(" OR (status <> 'resolved' AND ");
            D::push_texts(&mut q, "fingerprint", waivers.keys().map(|f| (*f).to_owned()).collect());
            q.push(")");
        }
        q.push(")");
        let rows = q.build().fetch_all(&mut *conn).await.ctx("reading drifts waived in Git")?;
        let (mut quiet, mut ended) = (HashSet::new(), Vec::new());
        for row in &rows {
            let drift = Self::decode(row)?;
            match waivers.get(drift.fingerprint.as_str()) {
                Some(w) => {
                    quiet.insert(drift.id);
                    if let Some((decision, detail)) = git_waiver_decision(w, &drift, &report.scan_id) {
                        written.outcome.waived += usize::from(drift.status != DriftStatus::Waived);
                        Self::apply_decision(store, conn, &drift, &decision, report.finished_at, detail).await?;
                    }
                }
                None if seen.contains(drift.fingerprint.as_str()) && drift.status == DriftStatus::Waived => {
                    ended.push(drift.id)
                }
                None => {}
            }
        }
        written.changes.retain(|c| !(quiet.contains(&c.drift_id) && c.kind != EventKind::Resolved));
        if !ended.is_empty() {
            written.outcome.waived = written.outcome.waived.saturating_sub(ended.len());
            Self::restatus(store, conn, &ended, |q| {
                q.push("status = 'open', waived_until = NULL, waived_by = NULL");
            })
            .await?;
            let audit: Vec<NewAudit> = ended
                .iter()
                .map(|id| {
                    let mut a = NewAudit::new(AuditAction::WaiverEnded, "scanner", "open");
                    a.drift_id = Some(*id);
                    a.scan_id = Some(report.scan_id.clone());
                    a.detail = json!({"reason": "the waiver in Git was removed or has expired"});
                    a
                })
                .collect();
            Self::insert_audit(conn, report.finished_at, &audit).await?;
            written.changes.extend(ended.into_iter().map(|id| Change::of(id, EventKind::WaiverExpired)));
        }
        Ok(())
    }

    /// [`Decisions::decisions`](drift_model::act::Decisions::decisions).
    pub async fn decisions<S: SqlStore<Dialect = D>>(store: &S, drift_id: i64) -> Result<Vec<Decision>, SqlError<D>> {
        let mut q = QueryBuilder::<D::Db>::new(
            "SELECT id, drift_id, action, comment, actor, decided_at, expires_at FROM decisions WHERE drift_id = ",
        );
        q.push_bind(drift_id).push(" ORDER BY id");
        let rows = q.build().fetch_all(store.reader()).await.ctx::<D>("reading decisions")?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let id: i64 = row.try_get(0)?;
            let action: String = row.try_get(2)?;
            out.push(Decision {
                id,
                drift_id: row.try_get(1)?,
                action: action.parse().map_err(|_| SqlError::<D>::corrupt(id, "action", &action))?,
                comment: row.try_get(3)?,
                actor: row.try_get(4)?,
                decided_at: Self::time_at(&row, 5, id)?,
                expires_at: Self::opt_time_at(&row, 6, id)?,
            });
        }
        Ok(out)
    }

    /// [`Decisions::similar`](drift_model::act::Decisions::similar): the last accept or reject of each
    /// similar drift (its own left out).
    pub async fn similar<S: SqlStore<Dialect = D>>(
        store: &S,
        drift: &StoredDrift,
    ) -> Result<Option<Learned>, SqlError<D>> {
        let sim = Similarity::of(drift);
        let mut q = QueryBuilder::<D::Db>::new("SELECT action, count(*) FROM decisions d WHERE manager = ");
        q.push_bind(sim.manager).push(" AND namespace = ").push_bind(sim.namespace);
        q.push(" AND drift_type = ").push_bind(sim.drift_type.as_str().to_owned());
        q.push(" AND band = ").push_bind(i64::from(sim.band)).push(" AND drift_id <> ").push_bind(drift.id);
        q.push(
            " AND action IN ('accept', 'reject') AND id = (SELECT max(id) FROM decisions x \
             WHERE x.drift_id = d.drift_id AND x.action IN ('accept', 'reject')) GROUP BY action",
        );
        let (mut accepted, mut rejected) = (0u32, 0u32);
        for row in q.build().fetch_all(store.reader()).await.ctx::<D>("reading similar decisions")? {
            let (action, n): (String, i64) = (row.try_get(0)?, row.try_get(1)?);
            let n = u32::try_from(n).unwrap_or(u32::MAX);
            match action.as_str() {
                "accept" => accepted = n,
                _ => rejected = n,
            }
        }
        Ok(Learned::from_counts(accepted, rejected))
    }

    /// [`AuditLog::audit`](drift_model::act::AuditLog::audit).
    pub async fn audit<S: SqlStore<Dialect = D>>(
        store: &S,
        filter: &AuditFilter,
        page: PageRequest,
    ) -> Result<AuditPage, SqlError<D>> {
        page.validate()?;
        let mut q = QueryBuilder::<D::Db>::new(AUDIT_COLUMNS);
        q.push(" FROM audit WHERE true");
        if let Some(a) = filter.action {
            q.push(" AND action = ").push_bind(a.as_str().to_owned());
        }
        if let Some(id) = filter.drift_id {
            q.push(" AND drift_id = ").push_bind(id);
        }
        for (column, value) in [("actor", &filter.actor), ("notifier", &filter.notifier), ("status", &filter.status)] {
            if let Some(v) = value {
                q.push(" AND ").push(column).push(" = ").push_bind(v.clone());
            }
        }
        if let Some(t) = filter.since {
            q.push(" AND at >= ").push_bind(D::time(t));
        }
        if let Some(after) = page.after {
            q.push(" AND id < ").push_bind(after);
        }
        q.push(" ORDER BY id DESC LIMIT ").push_bind(page.fetch_limit() as i64);
        let rows = q.build().fetch_all(store.reader()).await.ctx::<D>("reading the audit trail")?;
        let mut items = rows.iter().map(Self::audit_entry).collect::<Result<Vec<_>, _>>()?;
        let more = items.len() > page.limit as usize;
        items.truncate(page.limit as usize);
        let next = if more { items.last().map(|e| e.id) } else { None };
        Ok(AuditPage { items, next })
    }

    /// An audit entry from a row of [`AUDIT_COLUMNS`].
    fn audit_entry(row: &<D::Db as Database>::Row) -> Result<AuditEntry, SqlError<D>> {
        let id: i64 = row.try_get(0)?;
        let action: String = row.try_get(2)?;
        Ok(AuditEntry {
            id,
            at: Self::time_at(row, 1, id)?,
            action: action.parse().map_err(|_| SqlError::<D>::corrupt(id, "action", &action))?,
            actor: row.try_get(3)?,
            drift_id: row.try_get(4)?,
            scan_id: row.try_get(5)?,
            notifier: row.try_get(6)?,
            event_id: row.try_get(7)?,
            status: row.try_get(8)?,
            attempts: row.try_get(9)?,
            detail: D::json(row, id, "detail")?.unwrap_or_else(|| json!({})),
            attempt: row.try_get(11)?,
        })
    }

    /// [`AuditLog::unfinished`](drift_model::act::AuditLog::unfinished): the `attempted`
    /// entries no entry closes, oldest first (the partial index `audit_attempted` and the
    /// unique index `audit_attempt` answer it).
    pub async fn unfinished<S: SqlStore<Dialect = D>>(store: &S, limit: u32) -> Result<Vec<AuditEntry>, SqlError<D>> {
        let mut q = QueryBuilder::<D::Db>::new(AUDIT_COLUMNS);
        q.push(
            " FROM audit a WHERE status = 'attempted' \
             AND NOT EXISTS (SELECT 1 FROM audit b WHERE b.attempt = a.id) ORDER BY id LIMIT ",
        )
        .push_bind(i64::from(limit));
        let rows = q.build().fetch_all(store.reader()).await.ctx::<D>("reading the unfinished actions")?;
        rows.iter().map(Self::audit_entry).collect()
    }

    /// Retention of the acting side, in the transaction of a retention pass: settled deliveries
    /// (sent, skipped) of events older than the cutoff, those events when nothing else refers
    /// to them, and audit entries older than it. Pending and parked deliveries are kept.
    pub(crate) async fn prune_act(conn: &mut Conn<D>, cutoff: DateTime<Utc>) -> Result<u64, SqlError<D>> {
        let mut q = QueryBuilder::<D::Db>::new(
            "DELETE FROM deliveries WHERE status IN ('sent', 'skipped') AND event_seq IN \
             (SELECT seq FROM events WHERE at < ",
        );
        q.push_bind(D::time(cutoff)).push(")");
        q.build().execute(&mut *conn).await.ctx("deleting old deliveries")?;
        let mut q = QueryBuilder::<D::Db>::new("DELETE FROM events WHERE at < ");
        q.push_bind(D::time(cutoff));
        q.push(" AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_seq = events.seq)");
        let events = D::rows_affected(&q.build().execute(&mut *conn).await.ctx("deleting old events")?);
        let mut q = QueryBuilder::<D::Db>::new("DELETE FROM audit WHERE at < ");
        q.push_bind(D::time(cutoff));
        let audit = D::rows_affected(&q.build().execute(&mut *conn).await.ctx("deleting old audit entries")?);
        Ok(events + audit)
    }
}
