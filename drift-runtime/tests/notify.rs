//! The notifier task over real stores (SQLite in a temporary folder, a throwaway PostgreSQL):
//! one message per batch, `for:` keeps a reverted change quiet, failed attempts back off and
//! park, waivers silence and reopen, reminders stop when acknowledged, and two processes on one
//! PostgreSQL never send the same event twice. The outlet records what it is handed; the real
//! webhook, Slack and email transports are tested in drift-notify and drift-bin.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use drift_core::act::{
    ActStore, DecisionAction, DeliveryStatus, DriftEvent, EventKind, NewDecision, Outlet, SendFailure,
};
use drift_core::sink::{DriftFilter, PageRequest};
use drift_core::{DriftSink, DriftStore, DriftType};
use drift_runtime::notify::Dispatcher;
use drift_testkit::fixtures::{drift, key, report, t};
use serde_json::json;

/// A store that is all three sides.
trait Full: DriftSink + DriftStore + ActStore {}
impl<T: DriftSink + DriftStore + ActStore> Full for T {}

/// What a test runs on: a store, and a way to open another handle on it (another process).
struct Bed {
    store: Arc<dyn Full>,
    url: String,
    _keep: Box<dyn std::any::Any + Send + Sync>,
}

impl Bed {
    async fn sqlite() -> Bed {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("drift.db").display());
        let store = drift_sqlite::SqliteStore::open(&url).await.unwrap();
        Bed { store: Arc::new(store), url, _keep: Box::new(dir) }
    }

    async fn postgres() -> Bed {
        let server = drift_testkit_pg::PgServer::start().expect("a throwaway PostgreSQL");
        let url = server.create_database().await.unwrap();
        let store = drift_postgres::PostgresStore::connect(&url).await.unwrap();
        Bed { store: Arc::new(store), url, _keep: Box::new(server) }
    }

    async fn another(&self) -> Arc<dyn Full> {
        if self.url.starts_with("sqlite:") {
            Arc::new(drift_sqlite::SqliteStore::open(&self.url).await.unwrap())
        } else {
            Arc::new(drift_postgres::PostgresStore::connect(&self.url).await.unwrap())
        }
    }

    fn dispatcher(&self, store: Arc<dyn Full>, outlet: Arc<Recorder>) -> Dispatcher {
        let act: Arc<dyn ActStore> = store.clone() as Arc<dyn ActStore>;
        let read: Arc<dyn DriftStore> = store as Arc<dyn DriftStore>;
        Dispatcher::new(act, read, vec![outlet as Arc<dyn Outlet>])
    }
}

/// An outlet that records every message, fails as told, holds announcements `hold`, retries
/// 10 s later up to `attempts` attempts.
#[derive(Debug, Default)]
struct Recorder {
    hold: Duration,
    reminder: Option<Duration>,
    /// The digest of a day is due from this time of that day on.
    digest_at: Option<chrono::NaiveTime>,
    /// Messages may not go before this time (a rate limit that is exhausted).
    limited_until: Mutex<Option<DateTime<Utc>>>,
    attempts: i64,
    failures: Mutex<VecDeque<SendFailure>>,
    messages: Mutex<Vec<Vec<DriftEvent>>>,
}

impl Recorder {
    fn new() -> Self {
        Recorder { attempts: 3, ..Recorder::default() }
    }
    fn taken(&self) -> Vec<Vec<(EventKind, String)>> {
        let m = std::mem::take(&mut *self.messages.lock().unwrap());
        m.iter()
            .map(|msg| {
                let mut k: Vec<_> = msg
                    .iter()
                    .map(|e| (e.kind, e.drift.as_ref().map(|d| d.resource_name.clone()).unwrap_or_default()))
                    .collect();
                k.sort();
                k
            })
            .collect()
    }
}

#[async_trait]
impl Outlet for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }
    fn route(&self, e: &DriftEvent) -> Option<DateTime<Utc>> {
        Some(if e.kind.announces_open() { e.at + self.hold } else { e.at })
    }
    fn holds(&self) -> bool {
        self.hold > Duration::zero()
    }
    fn reminder(&self) -> Option<Duration> {
        self.reminder
    }
    fn digest_due(&self, now: DateTime<Utc>) -> Option<String> {
        let at = self.digest_at?;
        (now.time() >= at).then(|| now.date_naive().to_string())
    }
    fn admit(&self, now: DateTime<Utc>) -> Result<(), DateTime<Utc>> {
        match *self.limited_until.lock().unwrap() {
            Some(until) if now < until => Err(until),
            _ => Ok(()),
        }
    }
    fn retry_at(&self, attempts: i64, _: DateTime<Utc>, now: DateTime<Utc>, _: &SendFailure) -> Option<DateTime<Utc>> {
        (attempts < self.attempts).then(|| now + Duration::seconds(10))
    }
    async fn send(&self, events: &[DriftEvent]) -> Result<(), SendFailure> {
        if let Some(f) = self.failures.lock().unwrap().pop_front() {
            return Err(f);
        }
        self.messages.lock().unwrap().push(events.to_vec());
        Ok(())
    }
}

fn replicas(name: &str, value: i64) -> drift_core::Drift {
    drift("Deployment", "shop", name, DriftType::ReplicasDrift, "spec.replicas", json!(value))
}

fn scan(id: &str, minutes: i64, drifts: Vec<drift_core::Drift>) -> drift_core::ScanReport {
    report(id, t(minutes), &[key("Deployment", "shop", "web"), key("Deployment", "shop", "api")], drifts)
}

fn at(minutes: i64, seconds: i64) -> DateTime<Utc> {
    t(minutes) + Duration::seconds(seconds)
}

fn opened(names: &[&str]) -> Vec<(EventKind, String)> {
    names.iter().map(|n| (EventKind::Opened, n.to_string())).collect()
}

macro_rules! on_both {
    ($($name:ident),+) => {
        mod sqlite { $( #[tokio::test] async fn $name() { super::$name(super::Bed::sqlite().await).await } )+ }
        mod postgres { $( #[tokio::test] async fn $name() { super::$name(super::Bed::postgres().await).await } )+ }
    };
}

on_both!(
    a_scan_is_one_message_and_each_event_goes_once,
    for_keeps_a_change_reverted_in_time_quiet_and_resolved_follows_only_what_was_told,
    a_receiver_that_is_down_gets_it_later_and_a_dead_one_parks_it,
    a_waiver_silences_a_drift_until_its_value_changes_and_an_expired_one_tells,
    reminders_repeat_open_drifts_until_someone_acknowledges,
    two_processes_never_send_the_same_event_twice,
    the_digest_goes_once_a_day_and_a_rate_limit_defers_without_dropping,
    a_scan_that_opens_thousands_of_drifts_is_one_message,
    a_drift_predicted_intended_is_not_announced_and_one_predicted_reverted_is
);

async fn a_scan_is_one_message_and_each_event_goes_once(bed: Bed) {
    let outlet = Arc::new(Recorder::new());
    let d = bed.dispatcher(bed.store.clone(), outlet.clone());
    d.round(t(0)).await.unwrap();
    bed.store.record(&scan("s1", 0, vec![replicas("web", 3), replicas("api", 5)])).await.unwrap();
    let round = d.round(at(0, 1)).await.unwrap();
    assert_eq!(round.messages.get("recorder"), Some(&1));
    assert_eq!(outlet.taken(), [opened(&["api", "web"])]);
    d.round(at(0, 2)).await.unwrap();
    assert!(outlet.taken().is_empty(), "nothing twice");
    bed.store.record(&scan("s2", 1, vec![replicas("web", 4)])).await.unwrap();
    d.round(at(1, 1)).await.unwrap();
    assert_eq!(outlet.taken(), [vec![(EventKind::Changed, "web".into()), (EventKind::Resolved, "api".into())]]);
}

async fn for_keeps_a_change_reverted_in_time_quiet_and_resolved_follows_only_what_was_told(bed: Bed) {
    let outlet = Arc::new(Recorder { hold: Duration::minutes(5), ..Recorder::new() });
    let d = bed.dispatcher(bed.store.clone(), outlet.clone());
    d.round(t(0)).await.unwrap();
    bed.store.record(&scan("s1", 0, vec![replicas("web", 3), replicas("api", 5)])).await.unwrap();
    d.round(at(1, 0)).await.unwrap();
    assert!(outlet.taken().is_empty(), "held for 5 minutes");
    // web is put back after 2 minutes: quiet. api stays: told after 5 minutes.
    bed.store.record(&scan("s2", 2, vec![replicas("api", 5)])).await.unwrap();
    let round = d.round(at(2, 1)).await.unwrap();
    assert!(outlet.taken().is_empty());
    assert_eq!(round.deliveries.get("deferred"), Some(&1), "web's resolution waits for its announcement: {round:?}");
    d.round(at(5, 0)).await.unwrap();
    assert_eq!(outlet.taken(), [opened(&["api"])], "web was reverted within for:");
    bed.store.record(&scan("s3", 6, vec![])).await.unwrap();
    d.round(at(6, 1)).await.unwrap();
    assert_eq!(outlet.taken(), [vec![(EventKind::Resolved, "api".into())]]);
    let skipped = bed.store.deliveries(None, Some(DeliveryStatus::Skipped), PageRequest::default()).await.unwrap();
    assert_eq!(skipped.len(), 2, "web's opened and resolved: {skipped:?}");
}

async fn a_receiver_that_is_down_gets_it_later_and_a_dead_one_parks_it(bed: Bed) {
    let outlet = Arc::new(Recorder::new());
    outlet.failures.lock().unwrap().extend([SendFailure::retryable("HTTP 503"), SendFailure::retryable("HTTP 503")]);
    let d = bed.dispatcher(bed.store.clone(), outlet.clone());
    d.round(t(0)).await.unwrap();
    bed.store.record(&scan("s1", 0, vec![replicas("web", 3)])).await.unwrap();
    let r = d.round(at(0, 1)).await.unwrap();
    assert_eq!(r.deliveries.get("retry"), Some(&1), "{r:?}");
    let r = d.round(at(0, 5)).await.unwrap();
    assert!(r.deliveries.is_empty(), "backing off: {r:?}");
    d.round(at(0, 11)).await.unwrap();
    d.round(at(0, 21)).await.unwrap();
    assert_eq!(outlet.taken(), [opened(&["web"])], "sent at the third attempt");
    let trail = bed.store.audit(&Default::default(), PageRequest::default()).await.unwrap();
    let attempts: Vec<_> = trail
        .items
        .iter()
        .rev()
        .filter(|a| a.notifier.is_some())
        .map(|a| (a.status.as_str(), a.attempts.unwrap_or(0)))
        .collect();
    assert_eq!(attempts, [("retry", 1), ("retry", 2), ("sent", 3)]);
    // A receiver that refuses for good: parked after one attempt, not dropped.
    outlet.failures.lock().unwrap().push_back(SendFailure::permanent("HTTP 400: bad payload"));
    bed.store.record(&scan("s2", 1, vec![replicas("web", 3), replicas("api", 1)])).await.unwrap();
    let r = d.round(at(1, 1)).await.unwrap();
    assert_eq!(r.deliveries.get("parked"), Some(&1));
    let parked = bed.store.deliveries(None, Some(DeliveryStatus::Parked), PageRequest::default()).await.unwrap();
    assert_eq!((parked.len(), parked[0].last_error.as_deref()), (1, Some("HTTP 400: bad payload")));
    assert!(bed.store.requeue(&parked[0].event_id, "recorder", "ops", at(1, 2)).await.unwrap());
    d.round(at(1, 3)).await.unwrap();
    assert_eq!(outlet.taken(), [opened(&["api"])]);
}

async fn a_waiver_silences_a_drift_until_its_value_changes_and_an_expired_one_tells(bed: Bed) {
    let outlet = Arc::new(Recorder::new());
    let d = bed.dispatcher(bed.store.clone(), outlet.clone());
    d.round(t(0)).await.unwrap();
    bed.store.record(&scan("s1", 0, vec![replicas("web", 3), replicas("api", 5)])).await.unwrap();
    d.round(at(0, 1)).await.unwrap();
    outlet.taken();
    let rows = bed.store.list(&DriftFilter::default(), PageRequest::default()).await.unwrap().items;
    let id = |n: &str| rows.iter().find(|d| d.resource_name == n).unwrap().id;
    let waiver = |until| NewDecision {
        action: DecisionAction::Accept,
        comment: Some("hotfix".into()),
        expires_at: Some(until),
        actor: "alice".into(),
    };
    bed.store.decide(id("web"), &waiver(t(60)), at(0, 2)).await.unwrap();
    bed.store.decide(id("api"), &waiver(t(10)), at(0, 2)).await.unwrap();
    bed.store.record(&scan("s2", 1, vec![replicas("web", 3), replicas("api", 5)])).await.unwrap();
    d.round(at(1, 1)).await.unwrap();
    assert!(outlet.taken().is_empty(), "waived, same values");
    bed.store.record(&scan("s3", 2, vec![replicas("web", 7), replicas("api", 5)])).await.unwrap();
    d.round(at(2, 1)).await.unwrap();
    assert_eq!(outlet.taken(), [vec![(EventKind::Reopened, "web".into())]]);
    let r = d.round(t(10)).await.unwrap();
    assert_eq!(r.waivers_expired, 1);
    let expired = std::mem::take(&mut *outlet.messages.lock().unwrap());
    assert_eq!(expired.len(), 1);
    let e = &expired[0][0];
    assert_eq!(e.kind, EventKind::WaiverExpired);
    // web, a similar change (same manager, namespace, type, band), was accepted.
    let learned = e.learned.expect("the message says what similar decisions were");
    assert_eq!((learned.accepted, learned.rejected), (1, 0));
}

async fn reminders_repeat_open_drifts_until_someone_acknowledges(bed: Bed) {
    let outlet = Arc::new(Recorder { reminder: Some(Duration::hours(1)), ..Recorder::new() });
    let d = bed.dispatcher(bed.store.clone(), outlet.clone());
    d.round(t(0)).await.unwrap();
    bed.store.record(&scan("s1", 0, vec![replicas("web", 3), replicas("api", 5)])).await.unwrap();
    d.round(at(0, 1)).await.unwrap();
    outlet.taken();
    d.round(t(30)).await.unwrap();
    assert!(outlet.taken().is_empty());
    d.round(t(61)).await.unwrap();
    let reminded = outlet.taken();
    assert_eq!(reminded.len(), 1, "one message for the round: {reminded:?}");
    assert_eq!(reminded[0].iter().filter(|(k, _)| *k == EventKind::Reminder).count(), 2);
    let web = bed.store.list(&DriftFilter::default(), PageRequest::default()).await.unwrap();
    let web = web.items.iter().find(|d| d.resource_name == "web").unwrap().id;
    let ack = NewDecision { action: DecisionAction::Acknowledge, comment: None, expires_at: None, actor: "bob".into() };
    bed.store.decide(web, &ack, t(62)).await.unwrap();
    d.round(t(123)).await.unwrap();
    assert_eq!(outlet.taken(), [vec![(EventKind::Reminder, "api".into())]]);
}

async fn two_processes_never_send_the_same_event_twice(bed: Bed) {
    let outlet = Arc::new(Recorder::new());
    let a = Arc::new(bed.dispatcher(bed.store.clone(), outlet.clone()));
    let b = Arc::new(bed.dispatcher(bed.another().await, outlet.clone()));
    a.round(t(0)).await.unwrap();
    for s in 0..20 {
        let drifts = (0..25).map(|i| replicas(&format!("d{i}"), s)).collect();
        let keys: Vec<_> = (0..25).map(|i| key("Deployment", "shop", &format!("d{i}"))).collect();
        bed.store.record(&report(&format!("s{s}"), t(s), &keys, drifts)).await.unwrap();
    }
    let now = t(30);
    let (ra, rb) = tokio::join!(
        {
            let a = a.clone();
            async move {
                for _ in 0..10 {
                    a.round(now).await.unwrap();
                }
            }
        },
        {
            let b = b.clone();
            async move {
                for _ in 0..10 {
                    b.round(now).await.unwrap();
                }
            }
        }
    );
    let _ = (ra, rb);
    let messages = std::mem::take(&mut *outlet.messages.lock().unwrap());
    let mut seen: HashMap<String, usize> = HashMap::new();
    for e in messages.iter().flatten() {
        *seen.entry(e.id.clone()).or_default() += 1;
    }
    // 25 opened, then 19 scans of 25 changed values.
    assert_eq!(seen.len(), 25 * 20);
    assert!(seen.values().all(|n| *n == 1), "an event was sent twice");
    assert_eq!(messages.len(), 20, "one message per scan");
}

async fn the_digest_goes_once_a_day_and_a_rate_limit_defers_without_dropping(bed: Bed) {
    let outlet = Arc::new(Recorder { digest_at: chrono::NaiveTime::from_hms_opt(14, 0, 0), ..Recorder::new() });
    let d = bed.dispatcher(bed.store.clone(), outlet.clone());
    let day = t(0).date_naive();
    let at = |h: u32, m: u32| day.and_hms_opt(h, m, 0).unwrap().and_utc();
    d.round(at(11, 0)).await.unwrap();
    bed.store.record(&scan("s1", 0, vec![replicas("web", 3)])).await.unwrap();
    // The scan is at 12:00; the rate limit is exhausted until 12:30: the message waits, it is not dropped.
    *outlet.limited_until.lock().unwrap() = Some(at(12, 30));
    let r = d.round(at(12, 10)).await.unwrap();
    assert_eq!(r.deliveries.get("deferred"), Some(&1), "{r:?}");
    d.round(at(12, 20)).await.unwrap();
    assert!(outlet.taken().is_empty());
    d.round(at(12, 30)).await.unwrap();
    assert_eq!(outlet.taken(), [opened(&["web"])]);
    // The digest: not before 14:00, once after, whatever the number of rounds or processes.
    let other = bed.dispatcher(bed.another().await, outlet.clone());
    for round in [at(13, 59), at(14, 0), at(14, 1), at(18, 0)] {
        d.round(round).await.unwrap();
        other.round(round).await.unwrap();
    }
    let messages = std::mem::take(&mut *outlet.messages.lock().unwrap());
    assert_eq!(messages.len(), 1, "one digest: {messages:?}");
    let digest = &messages[0][0];
    assert_eq!(digest.kind, EventKind::Digest);
    let stats = digest.digest.as_ref().expect("the digest carries the statistics");
    assert_eq!(stats.by_status.get("open"), Some(&1));
}

async fn a_scan_that_opens_thousands_of_drifts_is_one_message(bed: Bed) {
    let outlet = Arc::new(Recorder::new());
    let d = bed.dispatcher(bed.store.clone(), outlet.clone());
    d.register().await.unwrap();
    let n = 2_500;
    let drifts = (0..n).map(|i| replicas(&format!("d{i}"), 3)).collect();
    let keys: Vec<_> = (0..n).map(|i| key("Deployment", "shop", &format!("d{i}"))).collect();
    let o = bed.store.record(&report("big", t(0), &keys, drifts)).await.unwrap();
    assert_eq!(o.events, n);
    let r = d.round(t(1)).await.unwrap();
    assert_eq!(r.messages.get("recorder"), Some(&1), "{r:?}");
    let messages = std::mem::take(&mut *outlet.messages.lock().unwrap());
    assert_eq!(messages[0].len(), n);
}

/// `drift scan` on a fresh store: the notifiers are known before the scan, so its events reach
/// them (a notifier seen for the first time otherwise starts after the newest event).
#[tokio::test]
async fn the_first_scan_of_a_detector_reaches_its_notifiers() {
    use drift_core::memory::{MemoryDesiredSource, MemoryLiveSource};
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("drift.db").display());
    let store = Arc::new(drift_sqlite::SqliteStore::open(&url).await.unwrap());
    let cm = |mode: &str| {
        drift_core::Resource::from_object(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "shop"}, "data": {"mode": mode}}))
        .unwrap()
    };
    let outlet = Arc::new(Recorder::new());
    let detector = drift_runtime::Detector::builder()
        .desired(Arc::new(MemoryDesiredSource::new("platform", vec![cm("fast")])))
        .live(Arc::new(MemoryLiveSource::new("homelab", vec![cm("slow")])))
        .store(drift_runtime::Store::acting(store))
        .notifier(outlet.clone())
        .build()
        .unwrap();
    let recorded = detector.scan_once_recorded().await.unwrap();
    assert_eq!(recorded[0].1.events, 1);
    let round = detector.deliver_now().await.unwrap().unwrap();
    assert_eq!(round.messages.get("recorder"), Some(&1));
    assert_eq!(outlet.taken(), [vec![(EventKind::Opened, "settings".to_owned())]]);
}

/// Issue 34, item 2: routing by the classifier (`classify: {quiet_intended: true}`). After the
/// team accepted two hand scalings in `shop` and rejected a ConfigMap edit in `ops`, a third
/// scaling in `shop` is predicted `accept` above the confidence and is not announced (skipped,
/// with the prediction as the reason); a ConfigMap edit in `ops` is predicted `revert` and is
/// announced. Below the confidence set, or without enough decided drifts, both are announced.
async fn a_drift_predicted_intended_is_not_announced_and_one_predicted_reverted_is(bed: Bed) {
    use drift_core::drift_engine::classify::{Classifier, ClassifySettings};
    let keys = [
        key("Deployment", "shop", "web"),
        key("Deployment", "shop", "api"),
        key("Deployment", "shop", "cart"),
        key("ConfigMap", "ops", "settings"),
        key("ConfigMap", "ops", "flags"),
    ];
    let edit = |name: &str| drift("ConfigMap", "ops", name, DriftType::ConfigmapDrift, "data.mode", json!("slow"));
    let outlet = Arc::new(Recorder::new());
    let settings = ClassifySettings { min_confidence: 0.8, min_examples: 3, quiet_intended: true };
    let classifier = Arc::new(Classifier::new(Some(settings)).with_refresh(std::time::Duration::ZERO));
    let d = bed.dispatcher(bed.store.clone(), outlet.clone()).with_classifier(classifier);
    d.round(t(0)).await.unwrap();
    bed.store
        .record(&report("s1", t(0), &keys, vec![replicas("web", 3), replicas("api", 5), edit("settings")]))
        .await
        .unwrap();
    d.round(at(0, 1)).await.unwrap();
    assert_eq!(outlet.taken().len(), 1, "nothing decided yet: all announced");
    let rows = bed.store.list(&DriftFilter::default(), PageRequest::default()).await.unwrap().items;
    let id = |n: &str| rows.iter().find(|d| d.resource_name == n).unwrap().id;
    let decide = |action, actor: &str| NewDecision {
        action,
        comment: Some("decided".into()),
        expires_at: (action == DecisionAction::Accept).then(|| t(600)),
        actor: actor.into(),
    };
    bed.store.decide(id("web"), &decide(DecisionAction::Accept, "alice"), at(0, 2)).await.unwrap();
    bed.store.decide(id("api"), &decide(DecisionAction::Accept, "bob"), at(0, 2)).await.unwrap();
    bed.store.decide(id("settings"), &decide(DecisionAction::Reject, "carol"), at(0, 2)).await.unwrap();

    let drifts = vec![replicas("web", 3), replicas("api", 5), edit("settings"), replicas("cart", 4), edit("flags")];
    bed.store.record(&report("s2", t(1), &keys, drifts)).await.unwrap();
    let round = d.round(at(1, 1)).await.unwrap();
    assert_eq!(outlet.taken(), [opened(&["flags"])], "cart is likely intended: not announced");
    assert_eq!(round.deliveries.get("skipped"), Some(&1), "{round:?}");
    let skipped = bed.store.deliveries(None, Some(DeliveryStatus::Skipped), PageRequest::default()).await.unwrap();
    assert_eq!(skipped.len(), 1);
    let why = skipped[0].last_error.clone().unwrap_or_default();
    assert!(why.starts_with("likely intended, not announced: predicted accept ("), "{skipped:?}");

    // Asking more than the evidence gives: announced as usual.
    let mut keys = keys.to_vec();
    let mut drifts = vec![replicas("web", 3), replicas("api", 5), edit("settings"), replicas("cart", 4), edit("flags")];
    for settings in [
        ClassifySettings { min_confidence: 0.999_999, min_examples: 3, quiet_intended: true },
        ClassifySettings { min_confidence: 0.8, min_examples: 4, quiet_intended: true },
    ] {
        let strict = Arc::new(Classifier::new(Some(settings)));
        let other = Arc::new(Recorder::new());
        let d = bed.dispatcher(bed.store.clone(), other.clone()).with_classifier(strict);
        d.register().await.unwrap();
        let name = format!("new-{}", settings.min_examples);
        keys.push(key("Deployment", "shop", &name));
        drifts.push(replicas(&name, 2));
        bed.store.record(&report(&format!("s-{name}"), t(2), &keys, drifts.clone())).await.unwrap();
        d.round(at(2, 1)).await.unwrap();
        assert_eq!(other.taken(), [opened(&[name.as_str()])], "{settings:?}");
        outlet.taken();
    }
}
