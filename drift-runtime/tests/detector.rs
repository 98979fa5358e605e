//! The runtime driven as an integrator would: a detector built from in-memory sources, the
//! reference store and sinks of the test's own, without any process around it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use common::{Recording, cm};
use drift_core::memory::{MemoryDesiredSource, MemoryLiveSource, MemoryStore};
use drift_core::sink::{DriftFilter, DriftStatus, PageRequest, RecordOutcome};
use drift_core::source::{LiveCapabilities, LiveEvent, LiveEventStream};
use drift_core::{
    DesiredSnapshot, DesiredSource, DriftSink, DriftStore, DriftType, LiveSnapshot, LiveSource, ScanReport, Scope,
};
use drift_runtime::{Detector, Store};
#[cfg(feature = "api")]
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{Notify, mpsc};

/// Always fails.
#[derive(Debug)]
struct Broken;

#[async_trait]
impl DriftSink for Broken {
    fn name(&self) -> &str {
        "broken"
    }
    async fn record(&self, _: &ScanReport) -> drift_core::Result<RecordOutcome> {
        Err(drift_core::Error::unavailable("the receiver is down"))
    }
}

async fn next(rx: &mut mpsc::UnboundedReceiver<ScanReport>) -> ScanReport {
    tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.expect("a report within 10 s").expect("open")
}

async fn open_drifts(store: &MemoryStore) -> Vec<(String, DriftType, String)> {
    let filter = DriftFilter { status: Some(DriftStatus::Open), ..Default::default() };
    let page = store.list(&filter, PageRequest { limit: 100, after: None }).await.unwrap();
    let mut v: Vec<_> = page.items.into_iter().map(|d| (d.resource_name, d.drift_type, d.path)).collect();
    v.sort();
    v
}

#[tokio::test]
async fn scan_once_records_in_the_store_and_in_every_extra_sink_even_past_a_broken_one() {
    let store = Arc::new(MemoryStore::new());
    let (tx, mut rx) = mpsc::unbounded_channel();
    let detector = Detector::builder()
        .desired(Arc::new(MemoryDesiredSource::new("platform", vec![cm("a", "fast"), cm("b", "x")])))
        .desired(Arc::new(MemoryDesiredSource::new("apps", vec![cm("c", "y")])))
        .live(Arc::new(MemoryLiveSource::new("homelab", vec![cm("a", "slow"), cm("b", "x"), cm("c", "y")])))
        .store(Store::new(store.clone()))
        .sink(Arc::new(Broken))
        .sink(Arc::new(Recording(tx)))
        .build()
        .unwrap();
    let reports = detector.scan_once().await.unwrap();
    assert_eq!(reports.iter().map(|r| r.repository.as_str()).collect::<Vec<_>>(), ["platform", "apps"]);
    assert_eq!(reports[0].drifts.len(), 1);
    assert!(reports[1].drifts.is_empty());
    let (first, second) = (next(&mut rx).await, next(&mut rx).await);
    assert_eq!(
        (first.scan_id.as_str(), second.scan_id.as_str()),
        (reports[0].scan_id.as_str(), reports[1].scan_id.as_str())
    );
    assert_eq!(open_drifts(&store).await, [("a".to_owned(), DriftType::ConfigmapDrift, "data.mode".to_owned())]);
}

#[tokio::test]
async fn the_builder_names_what_is_missing() {
    let live: Arc<dyn LiveSource> = Arc::new(MemoryLiveSource::new("c", vec![]));
    let store = Store::new(Arc::new(MemoryStore::new()));
    let err = Detector::builder().live(live.clone()).store(store.clone()).build().unwrap_err();
    assert!(err.to_string().contains("desired source"), "{err}");
    let desired: Arc<dyn DesiredSource> = Arc::new(MemoryDesiredSource::new("r", vec![]));
    let err = Detector::builder().desired(desired.clone()).store(store.clone()).build().unwrap_err();
    assert!(err.to_string().contains("live source"), "{err}");
    let err = Detector::builder().desired(desired.clone()).live(live.clone()).build().unwrap_err();
    assert!(err.to_string().contains("store"), "{err}");
    let err = Detector::builder().desired(desired).live(live).store(store).interval(Duration::ZERO).build();
    assert!(err.is_err());
}

/// A desired source that holds its fetch until the test releases it.
#[derive(Debug)]
struct Held {
    inner: MemoryDesiredSource,
    entered: Arc<Notify>,
    release: Arc<Notify>,
}

#[async_trait]
impl DesiredSource for Held {
    fn name(&self) -> &str {
        self.inner.name()
    }
    async fn fetch(&self) -> drift_core::Result<DesiredSnapshot> {
        self.entered.notify_one();
        self.release.notified().await;
        self.inner.fetch().await
    }
}

#[tokio::test]
async fn passes_never_overlap() {
    let (entered, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let held = Held {
        inner: MemoryDesiredSource::new("r", vec![cm("a", "1")]),
        entered: entered.clone(),
        release: release.clone(),
    };
    let detector = Arc::new(
        Detector::builder()
            .desired(Arc::new(held))
            .live(Arc::new(MemoryLiveSource::new("c", vec![cm("a", "1")])))
            .store(Store::new(Arc::new(MemoryStore::new())))
            .build()
            .unwrap(),
    );
    let d = detector.clone();
    let first = tokio::spawn(async move { d.scan_once().await });
    entered.notified().await;
    assert!(detector.scanner().running().is_some(), "the first pass is running");
    let err = detector.scan_once().await.unwrap_err();
    assert!(err.to_string().contains("already running"), "{err}");
    release.notify_one();
    assert_eq!(first.await.unwrap().unwrap().len(), 1);
    assert!(detector.scanner().running().is_none());
}

/// A live source whose watch stream is fed by the test.
/// A live source whose watch is fed by the test; while `gated`, each fetch waits, once read,
/// for the test's `release` (a pass that reads the cluster and is slow to finish).
#[derive(Debug)]
struct Fed {
    inner: MemoryLiveSource,
    gated: std::sync::atomic::AtomicBool,
    entered: Notify,
    release: Notify,
    events: Mutex<Option<mpsc::UnboundedReceiver<drift_core::Result<LiveEvent>>>>,
}

impl Fed {
    fn new(inner: MemoryLiveSource, events: mpsc::UnboundedReceiver<drift_core::Result<LiveEvent>>) -> Self {
        Fed {
            inner,
            gated: std::sync::atomic::AtomicBool::new(false),
            entered: Notify::new(),
            release: Notify::new(),
            events: Mutex::new(Some(events)),
        }
    }
}

#[async_trait]
impl LiveSource for Fed {
    fn cluster(&self) -> &str {
        self.inner.cluster()
    }
    fn capabilities(&self) -> LiveCapabilities {
        LiveCapabilities { watch: true, discovery: false }
    }
    async fn fetch(&self, scope: &Scope) -> drift_core::Result<LiveSnapshot> {
        let read = self.inner.fetch(scope).await;
        if self.gated.load(std::sync::atomic::Ordering::SeqCst) {
            self.entered.notify_one();
            self.release.notified().await;
        }
        read
    }
    async fn watch(&self, _scope: &Scope) -> drift_core::Result<LiveEventStream> {
        let rx = self.events.lock().unwrap().take().ok_or_else(|| drift_core::Error::unavailable("watched once"))?;
        Ok(common::fed(rx))
    }
}

#[cfg(feature = "api")]
async fn get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes()).await.unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).await.unwrap();
    answer
}

#[cfg(feature = "api")]
#[tokio::test]
async fn serve_scans_reacts_to_watch_events_answers_the_api_and_stops() {
    let store = Arc::new(MemoryStore::new());
    let (events, rx_events) = mpsc::unbounded_channel();
    let (tx, mut reports) = mpsc::unbounded_channel();
    let live = Fed::new(MemoryLiveSource::new("homelab", vec![cm("a", "fast")]), rx_events);
    let detector = Detector::builder()
        .desired(Arc::new(MemoryDesiredSource::new("platform", vec![cm("a", "fast"), cm("b", "x")])))
        .live(Arc::new(live))
        .store(Store::new(store.clone()))
        .sink(Arc::new(Recording(tx)))
        .interval(Duration::from_secs(3600))
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(detector.serve(listener, async move {
        stopped.await.ok();
    }));

    // The first pass: b is missing from the cluster.
    let first = next(&mut reports).await;
    assert!(!first.scan_id.starts_with("watch-"));
    assert_eq!(first.drifts.len(), 1);
    assert_eq!(first.drifts[0].drift_type, DriftType::MissingResource);

    // A change of a reaches the store through the watch, re-comparing a alone.
    events.send(Ok(LiveEvent::Applied(cm("a", "slow")))).unwrap();
    let watched = next(&mut reports).await;
    assert!(watched.scan_id.starts_with("watch-"), "{}", watched.scan_id);
    assert_eq!(watched.desired.len(), 1, "only a is re-compared");
    // Objects Git does not hold are not compared; b appears: its drift resolves.
    events.send(Ok(LiveEvent::Applied(cm("stray", "1")))).unwrap();
    events.send(Ok(LiveEvent::Applied(cm("b", "x")))).unwrap();
    let b = next(&mut reports).await;
    assert_eq!(b.desired[0].name, "b");
    assert_eq!(
        open_drifts(&store).await,
        [("a".to_owned(), DriftType::ConfigmapDrift, "data.mode".to_owned())],
        "a drifted, b came back"
    );

    let health = get(addr, "/health").await;
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    let drifts = get(addr, "/drifts?status=open").await;
    assert!(drifts.starts_with("HTTP/1.1 200") && drifts.contains("\"resource_name\":\"a\""), "{drifts}");

    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(30), serving).await.expect("stops").unwrap().unwrap();
    assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "the API no longer listens");
}

/// Regression: `Detector::run` is the service without the API (the `api` feature off, or an
/// integrator who serves nothing): it scans at once, follows the watch and stops.
#[tokio::test]
async fn run_scans_reacts_to_watch_events_and_stops_without_the_api() {
    let store = Arc::new(MemoryStore::new());
    let (events, rx_events) = mpsc::unbounded_channel();
    let (tx, mut reports) = mpsc::unbounded_channel();
    let live = Fed::new(MemoryLiveSource::new("homelab", vec![cm("a", "fast")]), rx_events);
    let detector = Detector::builder()
        .desired(Arc::new(MemoryDesiredSource::new("platform", vec![cm("a", "fast")])))
        .live(Arc::new(live))
        .store(Store::new(store.clone()))
        .sink(Arc::new(Recording(tx)))
        .interval(Duration::from_secs(3600))
        .build()
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(detector.run(async move {
        stopped.await.ok();
    }));
    let first = next(&mut reports).await;
    assert!(!first.scan_id.starts_with("watch-") && first.drifts.is_empty(), "{first:?}");
    events.send(Ok(LiveEvent::Applied(cm("a", "slow")))).unwrap();
    let watched = next(&mut reports).await;
    assert!(watched.scan_id.starts_with("watch-"), "{}", watched.scan_id);
    assert_eq!(open_drifts(&store).await, [("a".to_owned(), DriftType::ConfigmapDrift, "data.mode".to_owned())]);
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(30), running).await.expect("stops").unwrap();
}

#[cfg(feature = "api")]
/// Sets its flag when dropped: the pass that held it was aborted.
struct DropFlag(Arc<std::sync::atomic::AtomicBool>);

#[cfg(feature = "api")]
impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

#[cfg(feature = "api")]
/// A desired source whose fetch never ends.
#[derive(Debug)]
struct Stuck {
    entered: Arc<Notify>,
    dropped: Arc<std::sync::atomic::AtomicBool>,
}

#[cfg(feature = "api")]
#[async_trait]
impl DesiredSource for Stuck {
    fn name(&self) -> &str {
        "stuck"
    }
    async fn fetch(&self) -> drift_core::Result<DesiredSnapshot> {
        let _flag = DropFlag(self.dropped.clone());
        self.entered.notify_one();
        std::future::pending::<()>().await;
        unreachable!("never ends")
    }
}

#[cfg(feature = "api")]
#[tokio::test(start_paused = true)]
async fn a_pass_still_running_after_the_grace_is_aborted_and_writes_nothing() {
    let (entered, dropped) = (Arc::new(Notify::new()), Arc::new(std::sync::atomic::AtomicBool::new(false)));
    let store = Arc::new(MemoryStore::new());
    let detector = Detector::builder()
        .desired(Arc::new(Stuck { entered: entered.clone(), dropped: dropped.clone() }))
        .live(Arc::new(MemoryLiveSource::new("c", vec![])))
        .store(Store::new(store.clone()))
        .watch(false)
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let started = tokio::time::Instant::now();
    let serving = tokio::spawn(detector.serve(listener, async move { entered.notified().await }));
    serving.await.unwrap().unwrap();
    assert_eq!(started.elapsed(), drift_runtime::SHUTDOWN_GRACE, "it waited the grace, no more");
    assert!(dropped.load(std::sync::atomic::Ordering::SeqCst), "the stuck pass was aborted, not left running");
    assert!(store.recent_scans(10).await.unwrap().is_empty(), "nothing was written");
}

/// A desired source that can be made unreadable.
#[derive(Debug)]
struct Flaky {
    inner: MemoryDesiredSource,
    down: std::sync::atomic::AtomicBool,
}

#[async_trait]
impl DesiredSource for Flaky {
    fn name(&self) -> &str {
        self.inner.name()
    }
    async fn fetch(&self) -> drift_core::Result<DesiredSnapshot> {
        if self.down.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(drift_core::Error::unavailable("the git server is down"));
        }
        self.inner.fetch().await
    }
}

#[tokio::test]
async fn with_several_repositories_an_object_one_declares_is_not_unmanaged_for_another() {
    let store = Arc::new(MemoryStore::new());
    let apps = Arc::new(Flaky {
        inner: MemoryDesiredSource::new("apps", vec![cm("c", "y")]),
        down: std::sync::atomic::AtomicBool::new(false),
    });
    let detector = Detector::builder()
        .desired(Arc::new(MemoryDesiredSource::new("platform", vec![cm("a", "fast"), cm("b", "x")])))
        .desired(apps.clone())
        .live(Arc::new(MemoryLiveSource::new(
            "homelab",
            vec![cm("a", "fast"), cm("b", "x"), cm("c", "y"), cm("d", "z")],
        )))
        .store(Store::new(store.clone()))
        .settings(drift_runtime::ScanSettings { orphans: true, ..Default::default() })
        .build()
        .unwrap();
    let reports = detector.scan_once().await.unwrap();
    for r in &reports {
        let unmanaged: Vec<_> = r.drifts.iter().map(|d| (d.resource.name.as_str(), d.drift_type)).collect();
        assert_eq!(unmanaged, [("d", DriftType::UnmanagedResource)], "{}: only d, declared by nobody", r.repository);
    }
    assert_eq!(open_drifts(&store).await.len(), 2, "d, once per repository");

    // One repository unreadable: what it declares is unknown, so nothing is judged unmanaged
    // and nothing outside Git is resolved.
    apps.down.store(true, std::sync::atomic::Ordering::SeqCst);
    let reports = detector.scan_once().await.unwrap();
    assert!(reports.iter().all(|r| r.drifts.is_empty()), "{reports:?}");
    assert_eq!(open_drifts(&store).await.len(), 2, "the unmanaged drifts stay open");
    apps.down.store(false, std::sync::atomic::Ordering::SeqCst);
    detector.scan_once().await.unwrap();
    assert_eq!(open_drifts(&store).await.len(), 2);
}

/// A live source whose fetch, when gated, waits for the test after it has read: it hands back
/// what the cluster held when the pass started, however long the pass takes.
#[tokio::test]
async fn a_full_pass_never_undoes_what_the_watch_saw_after_the_pass_began() {
    let store = Arc::new(MemoryStore::new());
    let (events, rx_events) = mpsc::unbounded_channel();
    let live = Arc::new(Fed::new(MemoryLiveSource::new("homelab", vec![cm("a", "slow"), cm("b", "x")]), rx_events));
    let detector = Arc::new(
        Detector::builder()
            .desired(Arc::new(MemoryDesiredSource::new("platform", vec![cm("a", "fast"), cm("b", "x")])))
            .live(live.clone())
            .store(Store::new(store.clone()))
            .build()
            .unwrap(),
    );
    detector.scan_once().await.unwrap();
    assert_eq!(open_drifts(&store).await.len(), 1, "a drifted");
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let watching =
        tokio::spawn(drift_runtime::watch::run_watch(detector.scanner().clone(), Duration::from_secs(3600), stop_rx));

    // A pass reads the cluster (a still drifted) and is slow to finish; meanwhile a is put back
    // and the watch resolves its drift.
    live.gated.store(true, std::sync::atomic::Ordering::SeqCst);
    let pass = tokio::spawn({
        let detector = detector.clone();
        async move { detector.scan_once().await }
    });
    live.entered.notified().await;
    events.send(Ok(LiveEvent::Applied(cm("a", "fast")))).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !open_drifts(&store).await.is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "the watch resolves a");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    live.release.notify_one();
    let reports = pass.await.unwrap().unwrap();
    assert!(reports[0].drifts.is_empty(), "a is left to the watch: {:?}", reports[0].drifts);
    assert_eq!(reports[0].uncomparable, vec![cm("a", "fast").key]);
    assert!(open_drifts(&store).await.is_empty(), "the pass's older view did not reopen a");

    // A pass that starts after the watch's last look decides again as usual.
    live.gated.store(false, std::sync::atomic::Ordering::SeqCst);
    let reports = detector.scan_once().await.unwrap();
    assert_eq!(reports[0].drifts.len(), 1, "the cluster source still says slow: the next pass sees it");
    stop.send_replace(true);
    watching.await.unwrap();
}

/// A sink that, once armed, holds the first report of the watch until released (a watch busy
/// recording while events queue up behind it).
#[derive(Debug)]
struct HeldWatch {
    inner: Arc<MemoryStore>,
    armed: std::sync::atomic::AtomicBool,
    entered: Notify,
    release: Notify,
}

#[async_trait]
impl DriftSink for HeldWatch {
    fn name(&self) -> &str {
        "held-watch"
    }
    async fn record(&self, report: &ScanReport) -> drift_core::Result<RecordOutcome> {
        if report.scan_id.starts_with("watch-") && self.armed.swap(false, std::sync::atomic::Ordering::SeqCst) {
            self.entered.notify_one();
            self.release.notified().await;
        }
        self.inner.record(report).await
    }
}

#[tokio::test]
async fn the_watch_never_undoes_a_pass_with_an_event_older_than_the_pass() {
    let memory = Arc::new(MemoryStore::new());
    let held = Arc::new(HeldWatch {
        inner: memory.clone(),
        armed: std::sync::atomic::AtomicBool::new(true),
        entered: Notify::new(),
        release: Notify::new(),
    });
    let (events, rx_events) = mpsc::unbounded_channel();
    let live = Arc::new(Fed::new(MemoryLiveSource::new("homelab", vec![cm("a", "slow"), cm("b", "x")]), rx_events));
    let detector = Arc::new(
        Detector::builder()
            .desired(Arc::new(MemoryDesiredSource::new("platform", vec![cm("a", "fast"), cm("b", "x")])))
            .live(live.clone())
            .store(Store { sink: held.clone(), read: memory.clone(), act: None, identities: None })
            .build()
            .unwrap(),
    );
    detector.scan_once().await.unwrap();
    let drifted = [("a".to_owned(), DriftType::ConfigmapDrift, "data.mode".to_owned())];
    assert_eq!(open_drifts(&memory).await, drifted);
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let watching =
        tokio::spawn(drift_runtime::watch::run_watch(detector.scanner().clone(), Duration::from_secs(3600), stop_rx));

    // The watch is busy recording b while an event says a is back in sync: an older state (a
    // watch relisting, or a queue that waited), for a pass then reads a drifted and records it.
    events.send(Ok(LiveEvent::Applied(cm("b", "x")))).unwrap();
    held.entered.notified().await;
    events.send(Ok(LiveEvent::Applied(cm("a", "fast")))).unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    detector.scan_once().await.unwrap();
    assert_eq!(open_drifts(&memory).await, drifted, "the pass keeps a open");
    held.release.notify_one();

    // What the watch does next shows in the store: b drifts. The event of a, older than the
    // pass, was handled before it and left a as the pass recorded it.
    events.send(Ok(LiveEvent::Applied(cm("b", "y")))).unwrap();
    let b = ("b".to_owned(), DriftType::ConfigmapDrift, "data.mode".to_owned());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !open_drifts(&memory).await.contains(&b) {
        assert!(tokio::time::Instant::now() < deadline, "the watch records b");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(open_drifts(&memory).await, [drifted[0].clone(), b.clone()], "a is not falsely resolved");

    // An event that arrives after the pass began is the watch's: a really is put back.
    events.send(Ok(LiveEvent::Applied(cm("a", "fast")))).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while open_drifts(&memory).await != [b.clone()] {
        assert!(tokio::time::Instant::now() < deadline, "the watch resolves a");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.send_replace(true);
    watching.await.unwrap();
}

/// `cm(name, mode)` as the API server hands it out, at `version`.
fn at_version(name: &str, mode: &str, version: &str) -> drift_core::Resource {
    drift_core::Resource::from_object(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "shop", "resourceVersion": version}, "data": {"mode": mode}}))
    .unwrap()
}

#[tokio::test]
async fn an_event_that_comes_late_but_is_older_than_what_the_pass_compared_is_left_out() {
    let store = Arc::new(MemoryStore::new());
    let (tx, mut reports) = mpsc::unbounded_channel();
    let (events, rx_events) = mpsc::unbounded_channel();
    let cluster = vec![at_version("a", "slow", "7"), at_version("b", "x", "3")];
    let live = Arc::new(Fed::new(MemoryLiveSource::new("homelab", cluster), rx_events));
    let detector = Arc::new(
        Detector::builder()
            .desired(Arc::new(MemoryDesiredSource::new("platform", vec![cm("a", "fast"), cm("b", "x")])))
            .live(live.clone())
            .store(Store::new(store.clone()))
            .sink(Arc::new(Recording(tx)))
            .build()
            .unwrap(),
    );
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let watching =
        tokio::spawn(drift_runtime::watch::run_watch(detector.scanner().clone(), Duration::from_secs(3600), stop_rx));
    let pass = detector.scan_once().await.unwrap();
    assert_eq!(pass[0].live_version(&cm("a", "fast").key), Some("7"), "the pass keeps the version it compared");
    assert_eq!(next(&mut reports).await.scan_id, pass[0].scan_id);
    let drifted = [("a".to_owned(), DriftType::ConfigmapDrift, "data.mode".to_owned())];
    assert_eq!(open_drifts(&store).await, drifted);

    // What the watch re-compares for an event of a (the number of a's drifts in each report
    // that holds a), told by the report of an event of b sent after it (the watch handles events
    // in order; both may be recorded in one report of their batch).
    let mut b_version = 3;
    let mut handle = async |a: drift_core::Resource| {
        events.send(Ok(LiveEvent::Applied(a))).unwrap();
        b_version += 1;
        events.send(Ok(LiveEvent::Applied(at_version("b", "x", &b_version.to_string())))).unwrap();
        let mut of_a = Vec::new();
        loop {
            let r = next(&mut reports).await;
            assert!(r.scan_id.starts_with("watch-"), "{}", r.scan_id);
            if r.desired.iter().any(|k| k.name == "a") {
                of_a.push(r.drifts.iter().filter(|d| d.resource.name == "a").count());
            }
            if r.desired.iter().any(|k| k.name == "b") {
                return of_a;
            }
        }
    };

    // The watch, far behind, hands over a's state before the change (version 5), then the state
    // the pass compared (7): both arrive after the pass began, neither is newer than what it
    // recorded, and neither is re-compared.
    assert_eq!(handle(at_version("a", "fast", "5")).await, [0; 0], "an older state is left out");
    assert_eq!(handle(at_version("a", "slow", "7")).await, [0; 0], "so is the state the pass saw");
    let resolved = DriftFilter { status: Some(DriftStatus::Resolved), ..Default::default() };
    let page = store.list(&resolved, PageRequest { limit: 10, after: None }).await.unwrap();
    assert!(page.items.is_empty(), "a was never resolved by its older state: {:?}", page.items);
    assert_eq!(open_drifts(&store).await, drifted);

    // A newer version is the watch's: a really is put back, changed again, and from then on
    // the watch decides alone.
    assert_eq!(handle(at_version("a", "fast", "9")).await, [0]);
    assert!(open_drifts(&store).await.is_empty(), "the watch resolves a");
    assert_eq!(handle(at_version("a", "slow", "10")).await, [1]);
    assert_eq!(open_drifts(&store).await, drifted, "the watch reopens a");
    stop.send_replace(true);
    watching.await.unwrap();
}

fn deployment(name: &str, replicas: u32, image: &str) -> drift_core::Resource {
    drift_core::Resource::from_object(serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "app", "image": image}]}}}}))
    .unwrap()
}

#[tokio::test]
async fn the_watch_compares_an_autoscaled_object_with_its_autoscaler_and_the_others_alone() {
    let hpa = drift_core::Resource::from_object(serde_json::json!({"apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "minReplicas": 2, "maxReplicas": 9}}))
    .unwrap();
    let store = Arc::new(MemoryStore::new());
    let (tx, mut reports) = mpsc::unbounded_channel();
    let (events, rx_events) = mpsc::unbounded_channel();
    let git = vec![deployment("web", 2, "app:1"), deployment("api", 2, "app:1"), hpa.clone()];
    let live = Arc::new(Fed::new(MemoryLiveSource::new("homelab", git.clone()), rx_events));
    let detector = Arc::new(
        Detector::builder()
            .desired(Arc::new(MemoryDesiredSource::new("platform", git)))
            .live(live)
            .store(Store::new(store.clone()))
            .sink(Arc::new(Recording(tx)))
            .build()
            .unwrap(),
    );
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let watching =
        tokio::spawn(drift_runtime::watch::run_watch(detector.scanner().clone(), Duration::from_secs(3600), stop_rx));
    let pass = detector.scan_once().await.unwrap();
    assert!(pass[0].drifts.is_empty());
    next(&mut reports).await;

    // The autoscaler scaled web: its replicas are the autoscaler's, not a drift; api scaled by
    // hand is one. Each is re-compared from the index's compact copy.
    events.send(Ok(LiveEvent::Applied(deployment("web", 7, "app:1")))).unwrap();
    assert!(next(&mut reports).await.drifts.is_empty(), "web's replicas belong to its autoscaler");
    events.send(Ok(LiveEvent::Applied(deployment("api", 7, "app:1")))).unwrap();
    let api = next(&mut reports).await;
    assert_eq!(api.drifts.iter().map(|d| d.path.as_str()).collect::<Vec<_>>(), ["spec.replicas"]);
    // Another field of web is a drift as usual.
    events.send(Ok(LiveEvent::Applied(deployment("web", 7, "app:2")))).unwrap();
    let web = next(&mut reports).await;
    assert_eq!(web.drifts.len(), 1, "{:?}", web.drifts);
    assert!(web.drifts[0].path.contains("image"), "{:?}", web.drifts);
    stop.send_replace(true);
    watching.await.unwrap();
}

#[tokio::test]
async fn the_watch_says_how_much_of_the_cluster_it_does_not_see() {
    let (events, rx_events) = mpsc::unbounded_channel();
    let live = Arc::new(Fed::new(MemoryLiveSource::new("homelab", vec![cm("a", "fast")]), rx_events));
    let detector = Detector::builder()
        .desired(Arc::new(MemoryDesiredSource::new("platform", vec![cm("a", "fast")])))
        .live(live)
        .store(Store::new(Arc::new(MemoryStore::new())))
        .build()
        .unwrap();
    let metrics = detector.scanner().metrics().clone();
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let watching =
        tokio::spawn(drift_runtime::watch::run_watch(detector.scanner().clone(), Duration::from_secs(3600), stop_rx));
    let until = |want: u64| {
        let metrics = metrics.clone();
        async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            while metrics.watch_out_of_sync() != want {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "out of sync: {} (want {want})",
                    metrics.watch_out_of_sync()
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    let shop = || (drift_core::GroupKind::new("", "ConfigMap"), Some("shop".to_owned()));
    let failed = || drift_core::CoverageStatus::Failed { message: "connection refused".to_owned() };
    events.send(Ok(LiveEvent::Desynced { kind: shop().0, namespace: shop().1, status: failed() })).unwrap();
    until(1).await;
    // Said again while it lasts: still one pair.
    events.send(Ok(LiveEvent::Desynced { kind: shop().0, namespace: shop().1, status: failed() })).unwrap();
    events.send(Ok(LiveEvent::Synced { kind: shop().0, namespace: shop().1 })).unwrap();
    until(0).await;
    // The stream ends (the source gave up): the whole scope is unseen until the watch is back.
    drop(events);
    until(1).await;
    stop.send_replace(true);
    watching.await.unwrap();
    assert_eq!(metrics.watch_out_of_sync(), 0, "a stopped watch is not an outage");
}

/// The engine, with the drifts of `data.mode` left out: an integrator's own comparator.
#[derive(Debug)]
struct ModeIgnored(drift_core::Engine);

impl drift_core::Comparator for ModeIgnored {
    fn compare(&self, desired: &drift_core::Resource, live: Option<&drift_core::Resource>) -> Vec<drift_core::Drift> {
        let mut drifts = self.0.compare(desired, live);
        drifts.retain(|d| d.path != "data.mode");
        drifts
    }
}

#[tokio::test]
async fn the_comparator_given_to_the_builder_judges_passes_and_the_watch() {
    let (events, rx_events) = mpsc::unbounded_channel();
    let (tx, mut reports) = mpsc::unbounded_channel();
    let live = Fed::new(MemoryLiveSource::new("homelab", vec![cm("a", "slow"), cm("b", "x")]), rx_events);
    let detector = Detector::builder()
        .desired(Arc::new(MemoryDesiredSource::new("platform", vec![cm("a", "fast"), cm("b", "x")])))
        .live(Arc::new(live))
        .store(Store::new(Arc::new(MemoryStore::new())))
        .sink(Arc::new(Recording(tx)))
        .comparator(Arc::new(ModeIgnored(drift_core::Engine::default())))
        .build()
        .unwrap();
    let pass = detector.scan_once().await.unwrap();
    assert!(pass[0].drifts.is_empty(), "data.mode is left out: {:?}", pass[0].drifts);
    assert_eq!(next(&mut reports).await.scan_id, pass[0].scan_id);
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let watching =
        tokio::spawn(drift_runtime::watch::run_watch(detector.scanner().clone(), Duration::from_secs(3600), stop_rx));
    events.send(Ok(LiveEvent::Applied(cm("b", "y")))).unwrap();
    let watched = next(&mut reports).await;
    assert_eq!(watched.desired[0].name, "b");
    assert!(watched.drifts.is_empty(), "the watch compares with it too: {:?}", watched.drifts);
    stop.send_replace(true);
    watching.await.unwrap();
}
