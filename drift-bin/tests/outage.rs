//! Retries that outlast an outage (issue 31, item 3), on both stores: the real webhook notifier
//! with its default policy (`retry_for: 24h`, backoff 2s..10m), the notifier task of `drift
//! serve` ([`Dispatcher`]) and a local receiver that verifies every signature. The store's
//! clock is the time each round is given, so a 30-minute or 2-hour outage takes seconds; the
//! receiver's answers are real HTTP.
//!
//! - A receiver down for 30 minutes gets the notification afterwards, with the same event id
//!   and the same idempotency key on every attempt, without anybody requeueing it.
//! - A receiver down for longer than `retry_for` gets its deliveries parked as an outage, shown
//!   with their reason; while it stays down the probes fail quietly; once it answers, every
//!   parked event is sent, again without anybody's action.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use common::{Answer, Received, Receiver};
use drift_core::act::{ActStore, AuditAction, AuditFilter, DeliveryStatus, Outlet, ParkReason};
use drift_core::sink::PageRequest;
use drift_core::{DriftSink, DriftStore, DriftType};
use drift_runtime::notify::Dispatcher;
use drift_testkit::fixtures::{drift, key, report, t};
use serde_json::json;

const SECRET: &str = "outage-hook-secret-for-tests-only";

/// A store that is all three sides.
trait Full: DriftSink + DriftStore + ActStore {}
impl<T: DriftSink + DriftStore + ActStore> Full for T {}

async fn open(db: &str) -> (Arc<dyn Full>, Box<dyn std::any::Any>) {
    if db == "postgres" {
        let server = drift_testkit_pg::PgServer::start().expect("a throwaway PostgreSQL");
        let url = server.create_database().await.unwrap();
        (Arc::new(drift_postgres::PostgresStore::connect(&url).await.unwrap()), Box::new(server))
    } else {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("drift.db").display());
        (Arc::new(drift_sqlite::SqliteStore::open(&url).await.unwrap()), Box::new(dir))
    }
}

/// The notifier task of a webhook notifier configured with `extra` (YAML lines) to `receiver`.
fn dispatcher(store: &Arc<dyn Full>, receiver: &Receiver, extra: &str) -> Dispatcher {
    let yaml = format!("name: hook\ntype: webhook\nurl: {}/hook\nsecret_env: HOOK_SECRET\n{extra}", receiver.url);
    let config: drift_notify::NotifierConfig = serde_saphyr::from_str(&yaml).unwrap();
    drift_notify::validate(std::slice::from_ref(&config), &|n| (n == "HOOK_SECRET").then(|| SECRET.to_owned()))
        .unwrap();
    let notifier = drift_notify::build_with_env(&config, &|n| (n == "HOOK_SECRET").then(|| SECRET.to_owned())).unwrap();
    let outlet: Arc<dyn Outlet> = Arc::new(drift_notify::NotifierOutlet::new(notifier, None));
    let act: Arc<dyn ActStore> = store.clone() as Arc<dyn ActStore>;
    let read: Arc<dyn DriftStore> = store.clone() as Arc<dyn DriftStore>;
    Dispatcher::new(act, read, vec![outlet])
}

/// Records a scan at `at` that sees replicas drifts of `names`, the ones before the last as
/// they were (no event), and opens the last one; returns its event's id.
async fn open_drift(store: &Arc<dyn Full>, scan: &str, at: DateTime<Utc>, names: &[&str]) -> String {
    let drifts = names
        .iter()
        .map(|n| drift("Deployment", "shop", n, DriftType::ReplicasDrift, "spec.replicas", json!(5)))
        .collect();
    let keys: Vec<_> = names.iter().map(|n| key("Deployment", "shop", n)).collect();
    let outcome = store.record(&report(scan, at, &keys, drifts)).await.unwrap();
    assert_eq!(outcome.events, 1);
    let name = names.last().unwrap();
    // A report's events are its scan's batch: their ids name it, the drift and the kind.
    drift_core::act::event_id(scan, &drift_id(store, name).await.to_string(), drift_core::EventKind::Opened)
}

async fn drift_id(store: &Arc<dyn Full>, name: &str) -> i64 {
    let rows = store.list(&Default::default(), PageRequest::default()).await.unwrap();
    rows.items.iter().find(|d| d.resource_name == name).unwrap().id
}

/// Runs a round every `step` from `from` while `now < until` (or until `stop` says so);
/// returns the time after the last round.
async fn rounds(
    d: &Dispatcher,
    from: DateTime<Utc>,
    until: DateTime<Utc>,
    step: Duration,
    stop: impl Fn() -> bool,
) -> DateTime<Utc> {
    let mut now = from;
    while now < until && !stop() {
        d.round(now).await.unwrap();
        now += step;
    }
    now
}

/// Every request's signature is valid, and the event ids the receiver took (answered 200).
fn taken(received: &[Received]) -> Vec<String> {
    let mut ids = Vec::new();
    for r in received {
        let header = r.header("x-drift-signature").expect("signed");
        let at: i64 = header.split(',').find_map(|p| p.strip_prefix("t=")).unwrap().parse().unwrap();
        drift_notify::verify(SECRET.as_bytes(), header, &r.body, at, std::time::Duration::from_secs(1)).unwrap();
        assert_eq!(r.header("idempotency-key"), r.header("x-drift-delivery"));
        if matches!(r.answer, Answer::Ok) {
            ids.extend(r.json()["event_ids"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()));
        }
    }
    ids
}

/// The audit trail's requeues: who put deliveries back in the queue.
async fn requeued_by(store: &Arc<dyn Full>) -> BTreeSet<(String, String)> {
    let filter = AuditFilter { action: Some(AuditAction::Requeue), ..AuditFilter::default() };
    let trail = store.audit(&filter, PageRequest { limit: 1000, after: None }).await.unwrap();
    trail.items.iter().map(|a| (a.actor.clone(), a.status.clone())).collect()
}

async fn a_receiver_down_for_30_minutes_gets_it_afterwards_without_a_requeue(db: &str) {
    let (store, _keep) = open(db).await;
    let receiver = Receiver::start();
    let d = dispatcher(&store, &receiver, "");
    d.register().await.unwrap();
    receiver.answer(Answer::Status(503));
    let event = open_drift(&store, "s1", t(0), &["web"]).await;
    // Down for 30 minutes: a round every 15 s, as `tick` would run them.
    let step = Duration::seconds(15);
    let now = rounds(&d, t(0), t(30), step, || false).await;
    let failed = receiver.received();
    assert!(failed.len() >= 5, "retried through the outage: {} attempts", failed.len());
    assert!(failed.iter().all(|r| matches!(r.answer, Answer::Status(503))));
    let page = PageRequest { limit: 10, after: None };
    assert_eq!(store.deliveries(None, Some(DeliveryStatus::Parked), page).await.unwrap(), vec![], "not parked");
    // It answers again: the next retry (at most backoff.max, 10 minutes, later) delivers it.
    receiver.answer(Answer::Ok);
    rounds(&d, now, now + Duration::minutes(11), step, || {
        receiver.received().iter().any(|r| matches!(r.answer, Answer::Ok))
    })
    .await;
    let received = receiver.received();
    assert_eq!(taken(&received), std::slice::from_ref(&event), "the event, once, with its id");
    let keys: BTreeSet<_> = received.iter().map(|r| r.header("idempotency-key").unwrap().to_owned()).collect();
    assert_eq!(keys.len(), 1, "every attempt carries the same idempotency key: {keys:?}");
    let sent = store.deliveries(None, Some(DeliveryStatus::Sent), page).await.unwrap();
    assert_eq!((sent.len(), sent[0].event_id.as_str(), sent[0].attempts), (1, event.as_str(), received.len() as i64));
    assert_eq!(requeued_by(&store).await, BTreeSet::new(), "nobody requeued it");
}

async fn an_outage_longer_than_retry_for_parks_and_the_receiver_gets_everything_when_it_answers(db: &str) {
    let (store, _keep) = open(db).await;
    let receiver = Receiver::start();
    let d = dispatcher(&store, &receiver, "retry_for: 1h\n");
    d.register().await.unwrap();
    receiver.answer(Answer::Status(503));
    let first = open_drift(&store, "s1", t(0), &["web"]).await;
    let step = Duration::seconds(30);
    // Retried for an hour, then parked as an outage, with the error and since when.
    let now = rounds(&d, t(0), t(75), step, || false).await;
    let page = PageRequest { limit: 10, after: None };
    let parked = store.deliveries(None, Some(DeliveryStatus::Parked), page).await.unwrap();
    assert_eq!(parked.len(), 1, "{parked:?}");
    assert_eq!((parked[0].event_id.as_str(), parked[0].park_reason), (first.as_str(), Some(ParkReason::Outage)));
    assert_eq!(parked[0].failing_since, Some(t(0)));
    let error = parked[0].last_error.as_deref().unwrap();
    assert!(error.contains("503") && error.contains("failing since"), "{error}");
    // Still down: a second drift opens; the probes of the first fail and park it again.
    let second = open_drift(&store, "s2", now, &["web", "api"]).await;
    let now = rounds(&d, now, t(120), step, || false).await;
    let trail = requeued_by(&store).await;
    assert_eq!(trail, BTreeSet::from([("notifier:hook".to_owned(), "probe".to_owned())]), "probed while down");
    assert_eq!(store.deliveries(None, Some(DeliveryStatus::Parked), page).await.unwrap().len(), 1);
    assert!(receiver.received().iter().all(|r| matches!(r.answer, Answer::Status(503))));
    // It answers: within one probe period both events arrive, nobody requeueing anything.
    receiver.answer(Answer::Ok);
    let both = || {
        let got: BTreeSet<String> = taken(&receiver.received()).into_iter().collect();
        got.contains(&first) && got.contains(&second)
    };
    rounds(&d, now, now + Duration::minutes(11), step, both).await;
    let got = taken(&receiver.received());
    let unique: BTreeSet<&String> = got.iter().collect();
    assert_eq!(unique, BTreeSet::from([&first, &second]), "{got:?}");
    assert_eq!(store.deliveries(None, Some(DeliveryStatus::Parked), page).await.unwrap(), vec![]);
    assert!(requeued_by(&store).await.iter().all(|(actor, _)| actor == "notifier:hook"), "nobody requeued");
    // Each message keeps its idempotency key across its attempts.
    let mut by_key: std::collections::BTreeMap<String, BTreeSet<Vec<String>>> = Default::default();
    for r in receiver.received() {
        let ids: Vec<String> =
            r.json()["event_ids"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect();
        by_key.entry(r.header("idempotency-key").unwrap().to_owned()).or_default().insert(ids);
    }
    assert!(by_key.values().all(|ids| ids.len() == 1), "one key, one set of events: {by_key:?}");
}

fn run<F: std::future::Future<Output = ()>>(f: F) {
    // The binary's TLS provider, as `drift serve` installs it (the notifiers' HTTP client needs one).
    let _ = rustls::crypto::ring::default_provider().install_default();
    tokio::runtime::Runtime::new().unwrap().block_on(f);
}

#[test]
fn sqlite_a_receiver_down_for_30_minutes_gets_it_afterwards_without_a_requeue() {
    run(a_receiver_down_for_30_minutes_gets_it_afterwards_without_a_requeue("sqlite"));
}

#[test]
fn postgres_a_receiver_down_for_30_minutes_gets_it_afterwards_without_a_requeue() {
    run(a_receiver_down_for_30_minutes_gets_it_afterwards_without_a_requeue("postgres"));
}

#[test]
fn sqlite_an_outage_longer_than_retry_for_parks_and_the_receiver_gets_everything_when_it_answers() {
    run(an_outage_longer_than_retry_for_parks_and_the_receiver_gets_everything_when_it_answers("sqlite"));
}

#[test]
fn postgres_an_outage_longer_than_retry_for_parks_and_the_receiver_gets_everything_when_it_answers() {
    run(an_outage_longer_than_retry_for_parks_and_the_receiver_gets_everything_when_it_answers("postgres"));
}
