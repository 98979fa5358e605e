//! The watch loop under paused tokio time: it starts again after its stream ends, and it
//! re-reads the desired state every refresh period.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use common::{Recording, cm};
use drift_core::memory::{MemoryLiveSource, MemoryStore};
use drift_core::source::{LiveCapabilities, LiveEvent, LiveEventStream};
use drift_core::{DesiredSnapshot, DesiredSource, LiveSnapshot, LiveSource, Resource, ScanReport, Scope};
use drift_runtime::watch::{RESTART_PAUSE, run_watch};
use drift_runtime::{Detector, Store};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

type Events = mpsc::UnboundedSender<drift_core::Result<LiveEvent>>;

/// Desired objects the test can change (a new commit).
#[derive(Debug, Default)]
struct Changing(Mutex<Vec<Resource>>);

#[async_trait]
impl DesiredSource for Changing {
    fn name(&self) -> &str {
        "platform"
    }
    async fn fetch(&self) -> drift_core::Result<DesiredSnapshot> {
        Ok(DesiredSnapshot {
            repository: "platform".into(),
            revision: None,
            resources: self.0.lock().unwrap().clone(),
            warnings: vec![],
        })
    }
}

/// Each watch gets the next stream the test prepared, and says when it was asked.
#[derive(Debug)]
struct Streams {
    inner: MemoryLiveSource,
    next: Mutex<VecDeque<mpsc::UnboundedReceiver<drift_core::Result<LiveEvent>>>>,
    asked: mpsc::UnboundedSender<Instant>,
}

impl Streams {
    fn new(n: usize) -> (Self, Vec<Events>, mpsc::UnboundedReceiver<Instant>) {
        let (senders, receivers): (Vec<_>, VecDeque<_>) = (0..n).map(|_| mpsc::unbounded_channel()).unzip();
        let (asked, asked_rx) = mpsc::unbounded_channel();
        let s = Streams { inner: MemoryLiveSource::new("c", vec![]), next: Mutex::new(receivers), asked };
        (s, senders, asked_rx)
    }
}

#[async_trait]
impl LiveSource for Streams {
    fn cluster(&self) -> &str {
        "c"
    }
    fn capabilities(&self) -> LiveCapabilities {
        LiveCapabilities { watch: true, discovery: false }
    }
    async fn fetch(&self, scope: &Scope) -> drift_core::Result<LiveSnapshot> {
        self.inner.fetch(scope).await
    }
    async fn watch(&self, _scope: &Scope) -> drift_core::Result<LiveEventStream> {
        self.asked.send(Instant::now()).ok();
        let rx = self.next.lock().unwrap().pop_front().ok_or_else(|| drift_core::Error::unavailable("no more"))?;
        Ok(common::fed(rx))
    }
}

struct Running {
    events: Vec<Events>,
    asked: mpsc::UnboundedReceiver<Instant>,
    reports: mpsc::UnboundedReceiver<ScanReport>,
    desired: Arc<Changing>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

fn start(streams: usize, refresh: Duration, desired: Vec<Resource>) -> Running {
    let (live, events, asked) = Streams::new(streams);
    let (tx, reports) = mpsc::unbounded_channel();
    let changing = Arc::new(Changing(Mutex::new(desired)));
    let detector = Detector::builder()
        .desired(changing.clone())
        .live(Arc::new(live))
        .store(Store::new(Arc::new(MemoryStore::new())))
        .sink(Arc::new(Recording(tx)))
        .build()
        .unwrap();
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(run_watch(detector.scanner().clone(), refresh, stop_rx));
    Running { events, asked, reports, desired: changing, stop, task }
}

async fn report(r: &mut mpsc::UnboundedReceiver<ScanReport>) -> ScanReport {
    tokio::time::timeout(Duration::from_secs(3600), r.recv()).await.expect("a report").expect("open")
}

#[tokio::test(start_paused = true)]
async fn a_stream_that_ends_is_watched_again_after_a_pause() {
    let mut run = start(2, Duration::from_secs(3600), vec![cm("a", "1")]);
    let first = run.asked.recv().await.unwrap();
    run.events[0].send(Ok(LiveEvent::Applied(cm("a", "2")))).unwrap();
    assert_eq!(report(&mut run.reports).await.desired[0].name, "a");
    run.events.remove(0); // the first stream ends
    let second = run.asked.recv().await.unwrap();
    // The first pause is RESTART_PAUSE with equal jitter: between half of it and all of it.
    let waited = second - first;
    assert!(
        waited >= RESTART_PAUSE / 2 && waited <= RESTART_PAUSE,
        "restarted after the pause, without spinning: {waited:?}"
    );
    run.events[0].send(Ok(LiveEvent::Deleted(cm("a", "2").key))).unwrap();
    let r = report(&mut run.reports).await;
    assert_eq!(r.drifts[0].drift_type, drift_core::DriftType::MissingResource, "the new stream is handled");
    run.stop.send_replace(true);
    run.task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn the_desired_state_is_read_again_every_refresh_period() {
    let refresh = Duration::from_secs(300);
    let mut run = start(2, refresh, vec![cm("a", "1")]);
    let first = run.asked.recv().await.unwrap();
    // b is not in Git yet: its events are dropped.
    run.events[0].send(Ok(LiveEvent::Applied(cm("b", "x")))).unwrap();
    run.events[0].send(Ok(LiveEvent::Applied(cm("a", "1")))).unwrap();
    assert_eq!(report(&mut run.reports).await.desired[0].name, "a", "only a was re-compared");
    // A new commit adds b; after the refresh period the watch starts again over the new state.
    run.desired.0.lock().unwrap().push(cm("b", "y"));
    let second = run.asked.recv().await.unwrap();
    assert_eq!(second - first, refresh);
    run.events[1].send(Ok(LiveEvent::Applied(cm("b", "x")))).unwrap();
    let r = report(&mut run.reports).await;
    assert_eq!(r.desired[0].name, "b");
    assert_eq!(r.drifts.len(), 1, "b differs from the new commit");
    assert!(run.reports.try_recv().is_err(), "nothing else was recorded");
    run.stop.send_replace(true);
    run.task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_watch_that_cannot_start_is_tried_again_after_the_refresh_period() {
    let refresh = Duration::from_secs(60);
    // No stream prepared: every watch fails.
    let mut run = start(0, refresh, vec![cm("a", "1")]);
    let first = run.asked.recv().await.unwrap();
    let second = run.asked.recv().await.unwrap();
    assert_eq!(second - first, refresh);
    run.stop.send_replace(true);
    run.task.await.unwrap();
    assert!(run.events.is_empty());
}

/// The watch re-checks the policies of the object it re-compares (docs/policies.md): a label
/// removed by hand opens a live finding within the watch, and putting it back resolves it; the
/// desired side is checked too, and stays open while Git lacks the label.
#[tokio::test(start_paused = true)]
async fn the_watch_checks_the_policies_of_the_object_it_re_compares() {
    use drift_core::policy::{Policy, PolicyConfig, Rule, Side};
    use drift_core::sink::{DriftStore, FindingFilter, FindingStatus, PageRequest};
    let labelled = |team: Option<&str>, mode: &str| {
        let mut o = (*cm("a", mode).object).clone();
        if let Some(t) = team {
            o["metadata"]["labels"] = serde_json::json!({"team": t});
        }
        Resource::from_object(o).unwrap()
    };
    let (live, events, mut asked) = Streams::new(1);
    let (tx, mut reports) = mpsc::unbounded_channel();
    let store = Arc::new(MemoryStore::new());
    let config = PolicyConfig { enabled: true, required_labels: vec!["team".into()], ..PolicyConfig::default() };
    let settings = drift_runtime::ScanSettings {
        policy: Some(Arc::new(Policy::new(&config).unwrap())),
        ..drift_runtime::ScanSettings::default()
    };
    let detector = Detector::builder()
        .desired(Arc::new(Changing(Mutex::new(vec![cm("a", "1")]))))
        .live(Arc::new(live))
        .store(Store::new(store.clone()))
        .sink(Arc::new(Recording(tx)))
        .settings(settings)
        .build()
        .unwrap();
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(run_watch(detector.scanner().clone(), Duration::from_secs(3600), stop_rx));
    asked.recv().await.unwrap();
    let open = |side| FindingFilter { status: Some(FindingStatus::Open), side: Some(side), ..FindingFilter::default() };
    let listed = |filter: FindingFilter| {
        let store = store.clone();
        async move { store.findings(&filter, PageRequest::default()).await.unwrap().items }
    };

    events[0].send(Ok(LiveEvent::Applied(labelled(None, "1")))).unwrap();
    let r = report(&mut reports).await;
    assert_eq!(r.policy_sides, [Side::Desired, Side::Live]);
    let found: Vec<_> = r.findings.iter().map(|f| (f.side, f.rule, f.path.as_str())).collect();
    assert_eq!(
        found,
        [
            (Side::Desired, Rule::RequiredLabels, "/metadata/labels/team"),
            (Side::Live, Rule::RequiredLabels, "/metadata/labels/team")
        ]
    );
    assert_eq!(listed(open(Side::Live)).await.len(), 1, "recorded by the watch");

    events[0].send(Ok(LiveEvent::Applied(labelled(Some("shop"), "1")))).unwrap();
    let r = report(&mut reports).await;
    assert_eq!(r.findings.len(), 1, "only Git's object lacks the label now");
    assert!(listed(open(Side::Live)).await.is_empty(), "the live finding is resolved by the watch");
    assert_eq!(listed(open(Side::Desired)).await.len(), 1, "Git still lacks it");
    stop.send_replace(true);
    task.await.unwrap();
}

/// A storm of changes (issue 33): 300 objects changed at once while the watch is busy are
/// recorded in a few store writes, one a batch, not one each (which cannot keep up with 1,000
/// changes a second: each write reads every open drift of the repository and commits), and no
/// change is lost: every object's drift has its newest value, an object the storm did not touch
/// keeps its open drift, and one put back in the storm is resolved.
#[tokio::test(start_paused = true)]
async fn a_storm_of_changes_is_recorded_in_batches_and_nothing_is_lost() {
    use drift_core::sink::{DriftFilter, DriftStatus, DriftStore, PageRequest};
    let n = 300;
    let mut desired: Vec<Resource> = (0..n).map(|i| cm(&format!("o{i}"), "1")).collect();
    desired.push(cm("kept", "1"));
    desired.push(cm("back", "1"));
    let (live, events, mut asked) = Streams::new(1);
    let (tx, mut reports) = mpsc::unbounded_channel();
    let store = Arc::new(MemoryStore::new());
    let detector = Detector::builder()
        .desired(Arc::new(Changing(Mutex::new(desired))))
        .live(Arc::new(live))
        .store(Store::new(store.clone()))
        .sink(Arc::new(Recording(tx)))
        .build()
        .unwrap();
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(run_watch(detector.scanner().clone(), Duration::from_secs(3600), stop_rx));
    asked.recv().await.unwrap();
    for (name, mode) in [("kept", "9"), ("back", "9")] {
        events[0].send(Ok(LiveEvent::Applied(cm(name, mode)))).unwrap();
        assert_eq!(report(&mut reports).await.drifts.len(), 1, "{name} drifts");
    }

    // The storm: every object changed twice (the newest value wins), and `back` put back.
    for round in ["2", "3"] {
        for i in 0..n {
            events[0].send(Ok(LiveEvent::Applied(cm(&format!("o{i}"), round)))).unwrap();
        }
    }
    events[0].send(Ok(LiveEvent::Applied(cm("back", "1")))).unwrap();
    let mut writes = 0;
    let mut covered = std::collections::BTreeSet::new();
    while covered.len() < n + 1 {
        let r = report(&mut reports).await;
        writes += 1;
        assert!(!r.desired_complete, "a batch resolves only its own objects");
        assert!(r.desired.windows(2).all(|w| w[0] < w[1]), "its objects sorted");
        assert_eq!(r.live_versions.len(), 0);
        assert_eq!(r.desired_digests.len(), r.desired.len(), "a digest for each object");
        assert_eq!(r.summary.resources_compared, r.desired.len());
        covered.extend(r.desired.iter().map(|k| k.name.clone()));
    }
    assert!(writes <= 10, "{} changes recorded in {writes} writes: one per batch, not one per object", 2 * n + 1);

    let all = store.list(&DriftFilter::default(), PageRequest { limit: 1000, after: None }).await.unwrap().items;
    let value = |name: &str, status: DriftStatus| {
        all.iter()
            .filter(|d| d.resource_name == name && d.status == status)
            .map(|d| d.cluster_value.clone())
            .collect::<Vec<_>>()
    };
    for i in 0..n {
        assert_eq!(
            value(&format!("o{i}"), DriftStatus::Open),
            [Some(serde_json::json!("3"))],
            "o{i}: its newest value"
        );
    }
    assert_eq!(value("kept", DriftStatus::Open), [Some(serde_json::json!("9"))], "untouched: still open");
    assert_eq!(value("back", DriftStatus::Resolved), [Some(serde_json::json!("9"))], "put back: resolved");
    assert!(value("back", DriftStatus::Open).is_empty());
    stop.send_replace(true);
    task.await.unwrap();
}
