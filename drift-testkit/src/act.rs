//! The behaviour of a store that acts on drift ([`ActStore`], docs/notifications.md and
//! docs/decisions.md): the events a report yields, written with it; routing behind a cursor;
//! leased deliveries; settling, parking and requeueing; waivers, their end and the rollups;
//! acknowledgements and reminders; the learned confidence; the audit trail. Written once, run
//! on the in-memory reference store (`drift_model::memory::MemoryStore`), SQLite and
//! PostgreSQL ([`act_suite!`](crate::act_suite)) through their [`StoreHarness`].

use chrono::{DateTime, Duration, Utc};
use drift_model::act::{
    ATTEMPTED, ActStore, AuditAction, AuditFilter, DecisionAction, DeliveryStatus, DriftEvent, EventKind, NewDecision,
    ParkReason, Settle,
};
use drift_model::act::{AuditLog, Decisions, Outbox};
use drift_model::sink::{DriftFilter, DriftStatus, PageRequest};
use drift_model::{Drift, DriftSink, DriftStore, DriftType, ErrorKind, Resolution, ScanReport, Severity};
use serde_json::json;

use crate::fixtures::{drift, key, report, t};
use crate::store::StoreHarness;

/// Expands to one test per case of [`crate::act`], named after the case. `$harness` is an
/// expression of a type implementing [`StoreHarness`] whose store is an [`ActStore`].
#[macro_export]
macro_rules! act_suite {
    ($harness:expr) => {
        $crate::__act_cases!(
            $harness;
            a_report_writes_one_event_per_change_with_stable_ids,
            a_changed_value_or_severity_yields_changed_with_what_was_before,
            a_drift_seen_again_after_it_was_resolved_is_reopened,
            routing_takes_each_event_once_and_a_new_notifier_starts_after_the_newest,
            a_claim_leases_one_batch_to_one_worker_until_it_settles_or_the_lease_ends,
            retries_count_attempts_park_and_requeue_with_an_audit_entry_each,
            an_outage_parks_and_a_probe_or_an_answer_puts_it_back_with_the_same_event,
            a_waiver_takes_a_drift_out_of_the_open_counts_until_its_value_changes,
            an_expired_waiver_reopens_the_drift_with_an_event,
            acknowledged_drifts_get_no_reminders_and_notified_ones_do,
            decisions_are_refused_on_resolved_and_unknown_drifts,
            the_learned_confidence_counts_the_last_decision_of_similar_drifts,
            the_audit_trail_filters_and_pages,
            an_attempt_has_one_outcome_and_the_unfinished_ones_are_listed,
            a_waiver_written_in_git_waives_quietly_and_its_removal_reopens
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __act_cases {
    ($harness:expr; $($case:ident),+) => {
        $(
            #[test]
            fn $case() {
                $crate::__private::run(1, async {
                    let harness = $harness;
                    $crate::act::$case(&harness).await;
                });
            }
        )+
    };
}

fn replicas(name: &str, value: i64) -> Drift {
    drift("Deployment", "shop", name, DriftType::ReplicasDrift, "spec.replicas", json!(value))
}

fn scan(id: &str, minutes: i64, drifts: Vec<Drift>) -> ScanReport {
    let keys = [key("Deployment", "shop", "web"), key("Deployment", "shop", "api")];
    report(id, t(minutes), &keys, drifts)
}

/// Routes every new event to `notifier`, due at once, and claims them all.
async fn take_all<S: ActStore>(store: &S, notifier: &str, now: DateTime<Utc>) -> Vec<DriftEvent> {
    store.route(notifier, &|e| Some(e.at), 10_000).await.expect("route");
    let mut events = Vec::new();
    loop {
        let claimed = store.claim(notifier, "w", now, Duration::minutes(5), 1000).await.expect("claim");
        if claimed.is_empty() {
            return events;
        }
        let sent: Vec<_> = claimed.iter().map(|d| (d.event.id.clone(), Settle::Sent)).collect();
        store.settle(notifier, "w", &sent, now).await.expect("settle");
        events.extend(claimed.into_iter().map(|d| d.event));
    }
}

fn kinds(events: &[DriftEvent]) -> Vec<(EventKind, String)> {
    let mut k: Vec<_> = events
        .iter()
        .map(|e| (e.kind, e.drift.as_ref().map(|d| d.resource_name.clone()).unwrap_or_default()))
        .collect();
    k.sort();
    k
}

async fn open_count<S: DriftStore>(store: &S) -> i64 {
    let stats = store.stats(&DriftFilter::default(), t(1000)).await.expect("stats");
    stats.by_severity.values().sum()
}

/// Opened and resolved events carry the drift as it was, their ids are stable and a replayed
/// report writes none.
pub async fn a_report_writes_one_event_per_change_with_stable_ids<H>(h: &H)
where
    H: StoreHarness,
    H::Store: ActStore,
{
    let store = h.fresh().await;
    // A notifier seen before any event starts at the beginning.
    assert_eq!(take_all(&*store, "hook", t(0)).await.len(), 0);
    let first = scan("s1", 0, vec![replicas("web", 3), replicas("api", 5)]);
    let o = store.record(&first).await.unwrap();
    assert_eq!((o.opened, o.events), (2, 2));
    assert_eq!(store.record(&first).await.unwrap().events, 0, "a replay writes no event");
    let events = take_all(&*store, "hook", t(1)).await;
    assert_eq!(kinds(&events), [(EventKind::Opened, "api".into()), (EventKind::Opened, "web".into())]);
    for e in &events {
        assert_eq!(e.batch, "s1");
        assert_eq!(e.id, drift_model::act::event_id("s1", &e.drift_id().unwrap().to_string(), e.kind));
        assert_eq!(e.drift.as_ref().unwrap().status, DriftStatus::Open);
    }
    let o = store.record(&scan("s2", 1, vec![replicas("web", 3)])).await.unwrap();
    assert_eq!((o.updated, o.resolved, o.events), (1, 1, 1), "web seen again as it was: no event");
    let events = take_all(&*store, "hook", t(2)).await;
    assert_eq!(kinds(&events), [(EventKind::Resolved, "api".into())]);
    let api = events[0].drift.as_ref().unwrap();
    assert_eq!((api.status, api.resolution), (DriftStatus::Resolved, Some(Resolution::Reverted)));
}

/// A new cluster value or severity of an open drift is a `changed` event saying what was
/// there before.
pub async fn a_changed_value_or_severity_yields_changed_with_what_was_before<H>(h: &H)
where
    H: StoreHarness,
    H::Store: ActStore,
{
    let store = h.fresh().await;
    store.record(&scan("s1", 0, vec![replicas("web", 3)])).await.unwrap();
    take_all(&*store, "hook", t(0)).await;
    store.record(&scan("s2", 1, vec![replicas("web", 9)])).await.unwrap();
    let mut critical = replicas("web", 9);
    critical.severity = Severity::Critical;
    store.record(&scan("s3", 2, vec![critical])).await.unwrap();
    let events = take_all(&*store, "hook", t(3)).await;
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(events.iter().all(|e| e.kind == EventKind::Changed));
    let by_batch = |b: &str| events.iter().find(|e| e.batch == b).unwrap();
    let value = by_batch("s2");
    assert_eq!(value.previous.as_ref().unwrap().cluster_value, Some(json!(3)));
    assert_eq!(value.drift.as_ref().unwrap().cluster_value, Some(json!(9)));
    let severity = by_batch("s3");
    assert_eq!(severity.previous.as_ref().unwrap().severity, Severity::Low);
    assert_eq!(severity.drift.as_ref().unwrap().severity, Severity::Critical);
    assert!(h.check_rollups(&store).await || h.count_rows(&store).await.is_none());
}

/// A drift that comes back after it was resolved opens a new row, and says it is back.
pub async fn a_drift_seen_again_after_it_was_resolved_is_reopened<H>(h: &H)
where
    H: StoreHarness,
    H::Store: ActStore,
{
    let store = h.fresh().await;
    take_all(&*store, "hook", t(0)).await;
    store.record(&scan("s1", 0, vec![replicas("web", 3)])).await.unwrap();
    store.record(&scan("s2", 1, vec![])).await.unwrap();
    store.record(&scan("s3", 2, vec![replicas("web", 3), replicas("api", 1)])).await.unwrap();
    let events = take_all(&*store, "hook", t(3)).await;
    let got: Vec<_> = events.iter().take(2).map(|e| (e.batch.as_str(), e.kind)).collect();
    assert_eq!(got, [("s1", EventKind::Opened), ("s2", EventKind::Resolved)], "in outbox order");
    let mut s3: Vec<_> = events.iter().filter(|e| e.batch == "s3").map(|e| e.kind).collect();
    s3.sort();
    assert_eq!(s3, [EventKind::Opened, EventKind::Reopened]);
    let reopened = events.iter().find(|e| e.kind == EventKind::Reopened).unwrap();
    assert_eq!(reopened.drift.as_ref().unwrap().resource_name, "web");
}

/// Routing moves a cursor in the transaction that writes deliveries: routing twice takes
/// nothing twice, events the route declines get no delivery, and a notifier added later
/// starts after the newest event (it does not replay history).
pub async fn routing_takes_each_event_once_and_a_new_notifier_starts_after_the_newest<H>(h: &H)
where
    H: StoreHarness,
    H::Store: ActStore,
{
    let store = h.fresh().await;
    store.route("a", &|e| Some(e.at), 100).await.unwrap();
    store.record(&scan("s1", 0, vec![replicas("web", 3), replicas("api", 5)])).await.unwrap();
    let only_web = |e: &DriftEvent| (e.drift.as_ref()?.resource_name == "web").then_some(e.at);
    assert_eq!(store.route("a", &only_web, 100).await.unwrap(), 2, "two events read");
    assert_eq!(store.route("a", &only_web, 100).await.unwrap(), 0, "and not again");
    let claimed = store.claim("a", "w", t(1), Duration::minutes(1), 100).await.unwrap();
    assert_eq!(claimed.len(), 1, "one delivery: the route declined api");
    store.route("late", &|e| Some(e.at), 100).await.unwrap();
    assert!(store.claim("late", "w", t(1), Duration::minutes(1), 100).await.unwrap().is_empty());
    store.record(&scan("s2", 1, vec![])).await.unwrap();
    assert_eq!(store.route("late", &|e| Some(e.at), 100).await.unwrap(), 2, "the two resolutions of s2");
    // Routing in small steps reads everything once.
    let other = h.reopen(&store).await;
    let (mut n, mut rounds) = (0, 0);
    while let Ok(k @ 1..) = other.route("steps", &|e| Some(e.at), 1).await {
        n += k;
        rounds += 1;
        assert!(rounds < 10);
    }
    assert_eq!(n, 0, "`steps` started after the newest event");
}

/// Two workers never hold the same delivery: a claim leases the oldest due batch; another
/// worker gets nothing until the lease ends; a delivery due later is not claimed early.
pub async fn a_claim_leases_one_batch_to_one_worker_until_it_settles_or_the_lease_ends<H>(h: &H)
where
    H: StoreHarness,
    H::Store: ActStore,
{
    let store = h.fresh().await;
    store.route("n", &|e| Some(e.at), 100).await.unwrap();
    store.record(&scan("s1", 0, vec![replicas("web", 3), replicas("api", 5)])).await.unwrap();
    store.record(&scan("s2", 1, vec![replicas("web", 3)])).await.unwrap();
    // `for: 10m` on opened events.
    store.route("n", &|e| Some(e.at + Duration::minutes(10)), 100).await.unwrap();
    assert!(store.claim("n", "a", t(5), Duration::minutes(1), 100).await.unwrap().is_empty(), "not due yet");
    let other = h.reopen(&store).await;
    let a = store.claim("n", "a", t(11), Duration::minutes(1), 100).await.unwrap();
    assert_eq!(a.len(), 2, "the batch of s1, not the resolution of s2");
    assert!(a.iter().all(|d| d.event.batch == "s1" && d.status == DeliveryStatus::Pending));
    let b = other.claim("n", "b", t(11), Duration::minutes(1), 100).await.unwrap();
    assert_eq!(b.len(), 1, "worker b gets the other batch only");
    assert_eq!(b[0].event.kind, EventKind::Resolved);
    assert!(other.claim("n", "b", t(11), Duration::minutes(1), 100).await.unwrap().is_empty());
    // Worker a died: after its lease, b takes the batch; a late settle by a changes nothing.
    let again = other.claim("n", "b", t(13), Duration::minutes(1), 100).await.unwrap();
    assert_eq!(again.len(), 2);
    let ids: Vec<_> = a.iter().map(|d| (d.event.id.clone(), Settle::Sent)).collect();
    store.settle("n", "a", &ids, t(13)).await.unwrap();
    let page = PageRequest { limit: 100, after: None };
    let pending = store.deliveries(None, Some(DeliveryStatus::Pending), page).await.unwrap();
    assert_eq!(pending.len(), 3, "a lost its lease: its settle is ignored");
    other.settle("n", "b", &ids, t(13)).await.unwrap();
    assert_eq!(store.deliveries(None, Some(DeliveryStatus::Sent), page).await.unwrap().len(), 2);
}

/// A failed attempt is retried at the time given, counting attempts; the last one parks the
/// delivery, which the API lists and a person can requeue. Each attempt is in the audit trail.
pub async fn retries_count_attempts_park_and_requeue_with_an_audit_entry_each<H>(h: &H)
where
    H: StoreHarness,
    H::Store: ActStore,
{
    let store = h.fresh().await;
    store.route("n", &|e| Some(e.at), 100).await.unwrap();
    store.record(&scan("s1", 0, vec![replicas("web", 3)])).await.unwrap();
    store.route("n", &|e| Some(e.at), 100).await.unwrap();
    let d = store.claim("n", "w", t(0), Duration::minutes(1), 10).await.unwrap();
    let id = d[0].event.id.clone();
    let retry = Settle::Retry { at: t(2), error: "HTTP 503".into() };
    store.settle("n", "w", &[(id.clone(), retry)], t(0)).await.unwrap();
    assert!(store.claim("n", "w", t(1), Duration::minutes(1), 10).await.unwrap().is_empty(), "backing off");
    let d = store.claim("n", "w", t(2), Duration::minutes(1), 10).await.unwrap();
    assert_eq!(d[0].attempts, 1);
    assert_eq!(d[0].last_error.as_deref(), Some("HTTP 503"));
    assert_eq!(d[0].failing_since, Some(t(0)), "failing since its first failure");
    let refused = Settle::Parked { error: "HTTP 400".into(), reason: ParkReason::Refused };
    store.settle("n", "w", &[(id.clone(), refused)], t(2)).await.unwrap();
    let page = PageRequest { limit: 10, after: None };
    let parked = store.deliveries(None, Some(DeliveryStatus::Parked), page).await.unwrap();
    assert_eq!((parked.len(), parked[0].attempts, parked[0].event_id.as_str()), (1, 2, id.as_str()));
    assert_eq!((parked[0].park_reason, parked[0].failing_since), (Some(ParkReason::Refused), Some(t(0))));
    assert_eq!(store.probe("n", t(50), 10).await.unwrap(), 0, "a refusal is not probed");
    let counts = store.delivery_counts().await.unwrap();
    assert_eq!(counts.get(&("n".to_owned(), DeliveryStatus::Parked)), Some(&1));
    assert!(store.claim("n", "w", t(100), Duration::minutes(1), 10).await.unwrap().is_empty(), "parked stays");
    assert!(store.requeue(&id, "n", "alice", t(3)).await.unwrap());
    assert!(!store.requeue(&id, "n", "alice", t(3)).await.unwrap(), "not parked any more");
    let again = store.claim("n", "w", t(3), Duration::minutes(1), 10).await.unwrap();
    assert_eq!((again.len(), again[0].failing_since, again[0].park_reason), (1, None, None), "a new start");
    let audit = store
        .audit(&AuditFilter { notifier: Some("n".into()), ..AuditFilter::default() }, PageRequest::default())
        .await
        .unwrap();
    let trail: Vec<_> = audit.items.iter().rev().map(|a| (a.status.as_str(), a.attempts)).collect();
    assert_eq!(trail, [("retry", Some(1)), ("parked", Some(2)), ("pending", None)]);
    assert_eq!(audit.items[0].action, AuditAction::Requeue);
    assert_eq!(audit.items[0].actor, "alice");
}

/// A delivery that fails for longer than its notifier retries is parked as an outage with its
/// error, listed with its reason; a probe puts the oldest parked batch back in the queue keeping
/// its attempts and `failing_since`, and a message the receiver takes puts every other delivery
/// parked by the outage back too, with the same event ids, attempts starting again; a refusal
/// stays parked. Each step is in the audit trail.
pub async fn an_outage_parks_and_a_probe_or_an_answer_puts_it_back_with_the_same_event<H>(h: &H)
where
    H: StoreHarness,
    H::Store: ActStore,
{
    let store = h.fresh().await;
    let page = PageRequest { limit: 10, after: None };
    store.route("n", &|e| Some(e.at), 100).await.unwrap();
    store.route("m", &|e| Some(e.at), 100).await.unwrap();
    let outage = |error: &str| Settle::Parked { error: error.into(), reason: ParkReason::Outage };
    // Three scans, three batches: each fails, is retried, and parked by the outage (the third
    // refused); another notifier's outage is its own.
    let mut ids = Vec::new();
    for (i, name) in ["web", "api", "db"].into_iter().enumerate() {
        let minute = i as i64;
        // Each scan sees the drifts before it unchanged (no event) and opens one more.
        let names = ["web", "api", "db"];
        let keys: Vec<_> = names.iter().map(|n| key("Deployment", "shop", n)).collect();
        let drifts = names[..=i].iter().map(|n| replicas(n, 3)).collect();
        store.record(&report(&format!("s{i}"), t(minute), &keys, drifts)).await.unwrap();
        for n in ["n", "m"] {
            store.route(n, &|e| Some(e.at), 100).await.unwrap();
            let d = store.claim(n, "w", t(minute), Duration::minutes(1), 10).await.unwrap();
            assert_eq!(d.len(), 1, "{n} {name}: {d:?}");
            let retry = Settle::Retry { at: t(minute) + Duration::seconds(10), error: "HTTP 503".into() };
            store.settle(n, "w", &[(d[0].event.id.clone(), retry)], t(minute)).await.unwrap();
            let d = store.claim(n, "w", t(minute) + Duration::seconds(10), Duration::minutes(1), 10).await.unwrap();
            let park = if i == 2 {
                Settle::Parked { error: "HTTP 404".into(), reason: ParkReason::Refused }
            } else {
                outage("HTTP 503 (failing for 24h)")
            };
            store.settle(n, "w", &[(d[0].event.id.clone(), park)], t(minute) + Duration::seconds(10)).await.unwrap();
            if n == "n" {
                ids.push(d[0].event.id.clone());
            }
        }
    }
    let parked = store.deliveries(None, Some(DeliveryStatus::Parked), page).await.unwrap();
    let mine: Vec<_> = parked.iter().filter(|p| p.notifier == "n").collect();
    assert_eq!(mine.len(), 3, "{parked:?}");
    let web = mine.iter().find(|p| p.event_id == ids[0]).unwrap();
    assert_eq!(
        (web.park_reason, web.failing_since, web.attempts, web.last_error.as_deref()),
        (Some(ParkReason::Outage), Some(t(0)), 2, Some("HTTP 503 (failing for 24h)"))
    );
    assert!(store.claim("n", "w", t(100), Duration::minutes(1), 10).await.unwrap().is_empty(), "parked stays");
    // A probe: the oldest batch parked by the outage, only it, as it was.
    assert_eq!(store.probe("n", t(100), 10).await.unwrap(), 1);
    let probe = store.claim("n", "w", t(100), Duration::minutes(1), 10).await.unwrap();
    assert_eq!(probe.len(), 1);
    assert_eq!(
        (probe[0].event.id.as_str(), probe[0].attempts, probe[0].failing_since, probe[0].park_reason),
        (ids[0].as_str(), 2, Some(t(0)), None)
    );
    // The receiver is still down: parked again; the next probe takes the same batch.
    store.settle("n", "w", &[(ids[0].clone(), outage("HTTP 502"))], t(100)).await.unwrap();
    assert_eq!(store.probe("n", t(110), 10).await.unwrap(), 1);
    let probe = store.claim("n", "w", t(110), Duration::minutes(1), 10).await.unwrap();
    assert_eq!((probe[0].event.id.as_str(), probe[0].attempts), (ids[0].as_str(), 3));
    // It answers: sent, and api's delivery, parked by the outage, is due again, counting anew;
    // db's refusal stays parked, and so does notifier m's outage.
    store.settle("n", "w", &[(ids[0].clone(), Settle::Sent)], t(120)).await.unwrap();
    let back = store.claim("n", "w", t(120), Duration::minutes(1), 10).await.unwrap();
    assert_eq!(back.len(), 1);
    assert_eq!(
        (back[0].event.id.as_str(), back[0].attempts, back[0].failing_since, back[0].park_reason),
        (ids[1].as_str(), 0, None, None)
    );
    store.settle("n", "w", &[(ids[1].clone(), Settle::Sent)], t(120)).await.unwrap();
    assert!(store.claim("n", "w", t(200), Duration::minutes(1), 10).await.unwrap().is_empty());
    let parked = store.deliveries(None, Some(DeliveryStatus::Parked), page).await.unwrap();
    let left: Vec<_> = parked.iter().map(|p| (p.notifier.as_str(), p.park_reason)).collect();
    assert_eq!(left.iter().filter(|(n, _)| *n == "m").count(), 3, "{left:?}");
    assert_eq!(left.iter().filter(|(n, _)| *n == "n").collect::<Vec<_>>(), [&("n", Some(ParkReason::Refused))]);
    assert_eq!(store.probe("n", t(300), 10).await.unwrap(), 0, "nothing parked by an outage");
    let sent = store.deliveries(None, Some(DeliveryStatus::Sent), page).await.unwrap();
    let mut sent: Vec<_> = sent.iter().filter(|d| d.notifier == "n").map(|d| d.event_id.clone()).collect();
    sent.sort();
    let mut want = vec![ids[0].clone(), ids[1].clone()];
    want.sort();
    assert_eq!(sent, want, "each event once, with its id");
    let audit = store
        .audit(&AuditFilter { notifier: Some("n".into()), ..AuditFilter::default() }, PageRequest::default())
        .await
        .unwrap();
    let trail: Vec<_> = audit
        .items
        .iter()
        .rev()
        .filter(|a| a.event_id.as_deref() != Some(ids[2].as_str()))
        .map(|a| (a.action, a.status.as_str(), a.actor.as_str()))
        .collect();
    let (note, requeue) = (AuditAction::Notification, AuditAction::Requeue);
    assert_eq!(
        trail,
        [
            (note, "retry", "notifier:n"),
            (note, "parked", "notifier:n"),
            (note, "retry", "notifier:n"),
            (note, "parked", "notifier:n"),
            (requeue, "probe", "notifier:n"),
            (note, "parked", "notifier:n"),
            (requeue, "probe", "notifier:n"),
            (note, "sent", "notifier:n"),
            (requeue, "pending", "notifier:n"),
            (note, "sent", "notifier:n"),
        ]
    );
}

fn accept(comment: &str, until: DateTime<Utc>) -> NewDecision {
    NewDecision {
        action: DecisionAction::Accept,
        comment: Some(comment.into()),
        expires_at: Some(until),
        actor: "alice".into(),
    }
}

/// An accepted drift is waived: recorded, seen again, not counted as open; when its cluster
/// value changes it is open again with a `reopened` event.
pub async fn a_waiver_takes_a_drift_out_of_the_open_counts_until_its_value_changes<H>(h: &H)
where
    H: StoreHarness,
    H::Store: ActStore,
{
    let store = h.fresh().await;
    store.record(&scan("s1", 0, vec![replicas("web", 3), replicas("api", 5)])).await.unwrap();
    take_all(&*store, "n", t(0)).await;
    let web = store.list(&DriftFilter::default(), PageRequest::default()).await.unwrap();
    let web = web.items.iter().find(|d| d.resource_name == "web").unwrap().id;
    let d = store.decide(web, &accept("hotfix for the sale", t(60 * 24)), t(1)).await.unwrap();
    assert_eq!((d.action, d.actor.as_str()), (DecisionAction::Accept, "alice"));
    let row = store.get(web).await.unwrap();
    assert_eq!((row.status, row.waived_until), (DriftStatus::Waived, Some(t(60 * 24))));
    assert_eq!(row.decision_source, drift_model::DecisionSource::Human);
    assert_eq!(open_count(&*store).await, 1);
    let stats = store.stats(&DriftFilter::default(), t(2)).await.unwrap();
    assert_eq!(stats.by_status.get("waived"), Some(&1));
    assert!(h.check_rollups(&store).await || h.count_rows(&store).await.is_none());
    let o = store.record(&scan("s2", 2, vec![replicas("web", 3), replicas("api", 5)])).await.unwrap();
    assert_eq!((o.waived, o.events), (1, 0), "still waived, nothing to tell");
    assert_eq!(store.get(web).await.unwrap().occurrences, 2);
    let o = store.record(&scan("s3", 3, vec![replicas("web", 4), replicas("api", 5)])).await.unwrap();
    assert_eq!((o.waived, o.events), (0, 1));
    let events = take_all(&*store, "n", t(4)).await;
    assert_eq!(kinds(&events), [(EventKind::Reopened, "web".into())]);
    let row = store.get(web).await.unwrap();
    assert_eq!((row.status, row.waived_until), (DriftStatus::Open, None));
    assert_eq!(open_count(&*store).await, 2);
    let ended = AuditFilter { action: Some(AuditAction::WaiverEnded), ..AuditFilter::default() };
    let ended = store.audit(&ended, PageRequest::default()).await.unwrap().items;
    assert_eq!((ended.len(), ended[0].drift_id, ended[0].scan_id.as_deref()), (1, Some(web), Some("s3")));
    assert!(h.check_rollups(&store).await || h.count_rows(&store).await.is_none());
    // A waived drift that goes away is resolved like any other.
    store.decide(web, &accept("again", t(60)), t(5)).await.unwrap();
    store.record(&scan("s4", 6, vec![replicas("api", 5)])).await.unwrap();
    assert_eq!(store.get(web).await.unwrap().status, DriftStatus::Resolved);
    assert!(h.check_rollups(&store).await || h.count_rows(&store).await.is_none());
}

/// A waiver ends by itself at its expiry: the drift is open again, with one
/// `waiver_expired` event however many processes end it.
pub async fn an_expired_waiver_reopens_the_drift_with_an_event<H>(h: &H)
where
    H: StoreHarness,
    H::Store: ActStore,
{
    let store = h.fresh().await;
    store.record(&scan("s1", 0, vec![replicas("web", 3)])).await.unwrap();
    take_all(&*store, "n", t(0)).await;
    let id = store.list(&DriftFilter::default(), PageRequest::default()).await.unwrap().items[0].id;
    store.decide(id, &accept("load test", t(30)), t(1)).await.unwrap();
    assert_eq!(store.expire_waivers(t(29)).await.unwrap(), 0);
    assert_eq!(store.expire_waivers(t(30)).await.unwrap(), 1);
    let other = h.reopen(&store).await;
    assert_eq!(other.expire_waivers(t(31)).await.unwrap(), 0);
    assert_eq!(store.get(id).await.unwrap().status, DriftStatus::Open);
    let events = take_all(&*store, "n", t(31)).await;
    assert_eq!(kinds(&events), [(EventKind::WaiverExpired, "web".into())]);
    assert!(h.check_rollups(&store).await || h.count_rows(&store).await.is_none());
    let trail = store
        .audit(&AuditFilter { drift_id: Some(id), ..AuditFilter::default() }, PageRequest::default())
        .await
        .unwrap();
    let actions: Vec<_> = trail.items.iter().map(|a| a.action).collect();
    assert!(actions.contains(&AuditAction::WaiverExpired) && actions.contains(&AuditAction::Decision));
}

/// Reminders go to open drifts a notifier announced and has not told about since; an
/// acknowledged drift gets none.
pub async fn acknowledged_drifts_get_no_reminders_and_notified_ones_do<H>(h: &H)
where
    H: StoreHarness,
    H::Store: ActStore,
{
    let store = h.fresh().await;
    take_all(&*store, "n", t(0)).await;
    store.record(&scan("s1", 0, vec![replicas("web", 3), replicas("api", 5)])).await.unwrap();
    assert!(store.stale("n", t(100), 10).await.unwrap().is_empty(), "never announced");
    take_all(&*store, "n", t(1)).await;
    let ids: Vec<i64> =
        store.list(&DriftFilter::default(), PageRequest::default()).await.unwrap().items.iter().map(|d| d.id).collect();
    let notified = store.notified("n", &ids).await.unwrap();
    assert_eq!(notified.len(), 2);
    assert!(notified.values().all(|at| *at == t(1)));
    assert_eq!(store.stale("n", t(1), 10).await.unwrap().len(), 0, "told at t(1)");
    assert_eq!(store.stale("n", t(2), 10).await.unwrap().len(), 2);
    let ack = NewDecision { action: DecisionAction::Acknowledge, comment: None, expires_at: None, actor: "bob".into() };
    store.decide(ids[0], &ack, t(2)).await.unwrap();
    let stale = store.stale("n", t(3), 10).await.unwrap();
    assert_eq!(stale.iter().map(|d| d.id).collect::<Vec<_>>(), [ids[1]]);
    assert!(store.get(ids[0]).await.unwrap().acknowledged_at.is_some());
    assert_eq!(open_count(&*store).await, 2, "an acknowledged drift is still open");
}

/// A decision needs a drift that is still there.
pub async fn decisions_are_refused_on_resolved_and_unknown_drifts<H>(h: &H)
where
    H: StoreHarness,
    H::Store: ActStore,
{
    let store = h.fresh().await;
    store.record(&scan("s1", 0, vec![replicas("web", 3)])).await.unwrap();
    store.record(&scan("s2", 1, vec![])).await.unwrap();
    let id = store.list(&DriftFilter::default(), PageRequest::default()).await.unwrap().items[0].id;
    let e = store.decide(id, &accept("x", t(60)), t(2)).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    let e = store.decide(id + 1000, &accept("x", t(60)), t(2)).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    assert!(store.decisions(id).await.unwrap().is_empty(), "nothing written");
}

/// The confidence comes from the last accept or reject of each similar drift (same manager,
/// namespace, type and band of the day), the drift's own decisions left out.
pub async fn the_learned_confidence_counts_the_last_decision_of_similar_drifts<H>(h: &H)
where
    H: StoreHarness,
    H::Store: ActStore,
{
    let store = h.fresh().await;
    let names = ["a", "b", "c", "d"];
    let drifts = names.iter().map(|n| replicas(n, 3)).collect();
    let keys: Vec<_> = names.iter().map(|n| key("Deployment", "shop", n)).collect();
    store.record(&report("s1", t(0), &keys, drifts)).await.unwrap();
    let rows = store.list(&DriftFilter::default(), PageRequest::default()).await.unwrap().items;
    let id = |n: &str| rows.iter().find(|d| d.resource_name == n).unwrap().id;
    let reject = NewDecision { action: DecisionAction::Reject, comment: None, expires_at: None, actor: "a".into() };
    assert_eq!(store.similar(&store.get(id("a")).await.unwrap()).await.unwrap(), None);
    store.decide(id("b"), &reject, t(1)).await.unwrap();
    store.decide(id("b"), &accept("on second thought", t(60)), t(2)).await.unwrap();
    store.decide(id("c"), &accept("fine", t(60)), t(2)).await.unwrap();
    store.decide(id("d"), &reject, t(2)).await.unwrap();
    store.decide(id("a"), &reject, t(2)).await.unwrap();
    let learned = store.similar(&store.get(id("a")).await.unwrap()).await.unwrap().unwrap();
    assert_eq!((learned.accepted, learned.rejected), (2, 1), "b's last decision counts, a's own not");
    assert_eq!(learned.explain(), "likely intentional (60%, 2 of 3 similar changes accepted)");
    let decisions = store.decisions(id("b")).await.unwrap();
    assert_eq!(
        decisions.iter().map(|d| d.action).collect::<Vec<_>>(),
        [DecisionAction::Reject, DecisionAction::Accept]
    );
}

/// The audit trail lists scans, decisions and notifications, newest first, filtered and paged.
pub async fn the_audit_trail_filters_and_pages<H>(h: &H)
where
    H: StoreHarness,
    H::Store: ActStore,
{
    let store = h.fresh().await;
    for i in 0..5 {
        store.record(&scan(&format!("s{i}"), i, vec![replicas("web", 3)])).await.unwrap();
    }
    let scans = AuditFilter { action: Some(AuditAction::Scan), ..AuditFilter::default() };
    let first = store.audit(&scans, PageRequest { limit: 3, after: None }).await.unwrap();
    assert_eq!(first.items.len(), 3);
    assert_eq!(first.items[0].scan_id.as_deref(), Some("s4"), "newest first");
    assert_eq!(first.items[0].detail["drifts"], json!(1));
    let rest = store.audit(&scans, PageRequest { limit: 3, after: first.next }).await.unwrap();
    assert_eq!((rest.items.len(), rest.next), (2, None));
    let since = AuditFilter { since: Some(t(3)), ..scans.clone() };
    assert_eq!(store.audit(&since, PageRequest::default()).await.unwrap().items.len(), 2);
    let by = AuditFilter { actor: Some("nobody".into()), ..AuditFilter::default() };
    assert!(store.audit(&by, PageRequest::default()).await.unwrap().items.is_empty());
    let bad = store.audit(&AuditFilter::default(), PageRequest { limit: 0, after: None }).await.unwrap_err();
    assert_eq!(bad.kind(), ErrorKind::InvalidInput);
    // What the remediation writes: one entry each, read back by action, actor and drift.
    let drift_id = crate::store::rows(&*store).await[0].id;
    let note = |status: &str| drift_model::act::AuditNote {
        action: AuditAction::Revert,
        actor: "heal".into(),
        drift_id: Some(drift_id),
        status: status.into(),
        detail: json!({"paths": ["spec.replicas"]}),
        attempt: None,
    };
    let first = store.note(&note("would_revert"), t(10)).await.unwrap();
    let second = store.note(&note("reverted"), t(11)).await.unwrap();
    assert!(second > first, "ids grow");
    let heal = AuditFilter { action: Some(AuditAction::Revert), actor: Some("heal".into()), ..AuditFilter::default() };
    let got = store.audit(&heal, PageRequest::default()).await.unwrap().items;
    assert_eq!(
        got.iter().map(|e| (e.id, e.status.as_str())).collect::<Vec<_>>(),
        [(second, "reverted"), (first, "would_revert")]
    );
    assert_eq!(
        (got[0].drift_id, got[0].at, &got[0].detail),
        (Some(drift_id), t(11), &json!({"paths": ["spec.replicas"]}))
    );
}

/// An action writes `attempted` before it acts and its outcome names that entry: an attempt
/// has at most one outcome (a second is refused as a conflict and not written), and the
/// attempts without one are listed oldest first until they are closed.
pub async fn an_attempt_has_one_outcome_and_the_unfinished_ones_are_listed<H>(h: &H)
where
    H: StoreHarness,
    H::Store: ActStore,
{
    let store = h.fresh().await;
    store.record(&scan("s1", 0, vec![replicas("web", 3)])).await.unwrap();
    let drift_id = crate::store::rows(&*store).await[0].id;
    let note = |action: AuditAction, status: &str, attempt: Option<i64>| drift_model::act::AuditNote {
        action,
        actor: "alice".into(),
        drift_id: Some(drift_id),
        status: status.into(),
        detail: json!({"object": "Deployment default/web"}),
        attempt,
    };
    assert!(store.unfinished(10).await.unwrap().is_empty());
    let revert = store.note(&note(AuditAction::Revert, ATTEMPTED, None), t(1)).await.unwrap();
    let accept = store.note(&note(AuditAction::Accept, ATTEMPTED, None), t(2)).await.unwrap();
    let open: Vec<(i64, AuditAction)> = store.unfinished(10).await.unwrap().iter().map(|e| (e.id, e.action)).collect();
    assert_eq!(open, [(revert, AuditAction::Revert), (accept, AuditAction::Accept)], "oldest first");
    assert_eq!(store.unfinished(1).await.unwrap().len(), 1, "at most the limit");
    let done = store.note(&note(AuditAction::Revert, "reverted", Some(revert)), t(3)).await.unwrap();
    let again = store.note(&note(AuditAction::Revert, "interrupted", Some(revert)), t(4)).await.unwrap_err();
    assert_eq!(again.kind(), ErrorKind::Conflict, "one outcome per attempt");
    let open: Vec<i64> = store.unfinished(10).await.unwrap().iter().map(|e| e.id).collect();
    assert_eq!(open, [accept]);
    let about = AuditFilter { drift_id: Some(drift_id), ..AuditFilter::default() };
    let trail: Vec<(i64, String, Option<i64>)> = store
        .audit(&about, PageRequest::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| (e.id, e.status, e.attempt))
        .collect();
    assert_eq!(
        trail,
        [
            (done, "reverted".to_owned(), Some(revert)),
            (accept, ATTEMPTED.to_owned(), None),
            (revert, ATTEMPTED.to_owned(), None)
        ],
        "the refused second outcome was not written"
    );
    store.note(&note(AuditAction::Accept, "interrupted", Some(accept)), t(5)).await.unwrap();
    assert!(store.unfinished(10).await.unwrap().is_empty());
}

/// A waiver written in Git waives its drift from the first report, without an event; it is one
/// decision by `git:<owner>` however many scans repeat it (a new expiry is a new decision); the
/// report that shows the drift without it opens it again with a `waiver_expired` event.
pub async fn a_waiver_written_in_git_waives_quietly_and_its_removal_reopens<H>(h: &H)
where
    H: StoreHarness,
    H::Store: ActStore,
{
    let store = h.fresh().await;
    take_all(&*store, "n", t(0)).await;
    let waived = |until: i64| {
        let mut d = replicas("web", 3);
        d.waiver = Some(drift_model::waiver::Waiver {
            path: "spec.replicas".into(),
            owner: "alice".into(),
            reason: "load test".into(),
            expires_at: t(until),
        });
        d
    };
    let o = store.record(&scan("s1", 0, vec![waived(600), replicas("api", 5)])).await.unwrap();
    assert_eq!((o.opened, o.waived, o.events), (2, 1, 1), "only api is told");
    let rows = store.list(&DriftFilter::default(), PageRequest::default()).await.unwrap().items;
    let web = rows.iter().find(|d| d.resource_name == "web").unwrap().clone();
    assert_eq!(
        (web.status, web.waived_by.as_deref(), web.waived_until),
        (DriftStatus::Waived, Some("git:alice"), Some(t(600)))
    );
    assert_eq!(open_count(&*store).await, 1);
    assert!(h.check_rollups(&store).await || h.count_rows(&store).await.is_none());
    store.record(&scan("s2", 1, vec![waived(600), replicas("api", 5)])).await.unwrap();
    store.record(&scan("s3", 2, vec![waived(900), replicas("api", 5)])).await.unwrap();
    let decisions = store.decisions(web.id).await.unwrap();
    let by: Vec<_> = decisions.iter().map(|d| (d.actor.as_str(), d.expires_at)).collect();
    assert_eq!(by, [("git:alice", Some(t(600))), ("git:alice", Some(t(900)))], "one decision per waiver as written");
    assert_eq!(decisions[0].comment.as_deref(), Some("load test"));
    // A new cluster value under a waiver in Git stays waived: the waiver names the path.
    let mut changed = waived(900);
    changed.cluster_value = Some(json!(7));
    let o = store.record(&scan("s4", 3, vec![changed, replicas("api", 5)])).await.unwrap();
    assert_eq!((o.waived, o.events), (1, 0));
    assert_eq!(store.get(web.id).await.unwrap().status, DriftStatus::Waived);
    let o = store.record(&scan("s5", 4, vec![replicas("web", 7), replicas("api", 5)])).await.unwrap();
    assert_eq!((o.waived, o.events), (0, 1));
    let events = take_all(&*store, "n", t(5)).await;
    assert_eq!(kinds(&events), [(EventKind::Opened, "api".into()), (EventKind::WaiverExpired, "web".into())]);
    let row = store.get(web.id).await.unwrap();
    assert_eq!((row.status, row.waived_by), (DriftStatus::Open, None));
    assert!(h.check_rollups(&store).await || h.count_rows(&store).await.is_none());
    let ended = AuditFilter { action: Some(AuditAction::WaiverEnded), ..AuditFilter::default() };
    assert_eq!(store.audit(&ended, PageRequest::default()).await.unwrap().items.len(), 1);
}
