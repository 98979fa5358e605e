//! Shared helpers of the integration tests: a store filled through `DriftSink::record`, a scan
//! trigger that behaves like the scheduler, a store that is down, and a request helper.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use drift_model::act::Outbox;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use chrono::{DateTime, Utc};
use drift_api::{ApiState, ApiToken, ManualClock, ScanGate, ScanPermit, ScanTrigger, TriggerOutcome, router};
use drift_model::memory::MemoryStore;
use drift_model::sink::{DriftFilter, DriftPage, DriftStats, DriftStore, PageRequest, ScanRecord, StoredDrift};
use drift_model::{DriftSink, DriftType, ScanReport, Severity};
use drift_testkit::fixtures::{drift, key, report, t};
use serde_json::{Value, json};
use tower::ServiceExt;

pub const TOKEN: &str = "Zx9-test-token-4f1c2a";

/// A scan trigger wired as `drift serve` would: a [`ScanGate`] shared with the scheduler; a
/// started scan holds its permit until [`FakeTrigger::finish`]; `wait` runs the scan to its end.
#[derive(Debug, Default)]
pub struct FakeTrigger {
    pub gate: ScanGate,
    pub running: Mutex<Option<ScanPermit>>,
    pub calls: AtomicUsize,
    pub fail_with: Mutex<Option<drift_model::Error>>,
}

impl FakeTrigger {
    /// The running scan ends.
    pub fn finish(&self) {
        self.running.lock().unwrap().take();
    }
}

#[async_trait]
impl ScanTrigger for FakeTrigger {
    async fn trigger(&self, wait: bool) -> drift_model::Result<TriggerOutcome> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(e) = self.fail_with.lock().unwrap().clone() {
            return Err(e);
        }
        let permit = match self.gate.try_start(format!("api-{n}")) {
            Ok(permit) => permit,
            Err(running) => return Ok(TriggerOutcome::AlreadyRunning { scan_id: Some(running) }),
        };
        let scan_id = permit.scan_id().to_owned();
        if wait {
            let r = report(&scan_id, t(120), &[key("Deployment", "shop", "web")], vec![]);
            drop(permit);
            return Ok(TriggerOutcome::Finished { scan_id, reports: vec![r] });
        }
        *self.running.lock().unwrap() = Some(permit);
        Ok(TriggerOutcome::Started { scan_id })
    }
}

/// A store whose every call fails as an unreachable database would, with a secret in the
/// message (the API must not repeat it).
#[derive(Debug)]
pub struct DownStore;

pub const DOWN_SECRET: &str = "hunter2";

fn down() -> drift_model::Error {
    drift_model::Error::unavailable(format!("connecting to postgres://drift:{DOWN_SECRET}@db:5432/drift: refused"))
}

#[async_trait]
impl DriftStore for DownStore {
    async fn list(&self, _: &DriftFilter, _: PageRequest) -> drift_model::Result<DriftPage> {
        Err(down())
    }
    async fn get(&self, _: i64) -> drift_model::Result<StoredDrift> {
        Err(down())
    }
    async fn stats(&self, _: &DriftFilter, _: DateTime<Utc>) -> drift_model::Result<DriftStats> {
        Err(down())
    }
    async fn recent_scans(&self, _: u32) -> drift_model::Result<Vec<ScanRecord>> {
        Err(down())
    }
    async fn ping(&self) -> drift_model::Result<()> {
        Err(down())
    }
    async fn findings(
        &self,
        _: &drift_model::sink::FindingFilter,
        _: PageRequest,
    ) -> drift_model::Result<drift_model::sink::FindingPage> {
        Err(down())
    }
}

/// A store that never answers.
#[derive(Debug)]
pub struct HangingStore;

#[async_trait]
impl DriftStore for HangingStore {
    async fn list(&self, _: &DriftFilter, _: PageRequest) -> drift_model::Result<DriftPage> {
        std::future::pending().await
    }
    async fn get(&self, _: i64) -> drift_model::Result<StoredDrift> {
        std::future::pending().await
    }
    async fn stats(&self, _: &DriftFilter, _: DateTime<Utc>) -> drift_model::Result<DriftStats> {
        std::future::pending().await
    }
    async fn recent_scans(&self, _: u32) -> drift_model::Result<Vec<ScanRecord>> {
        std::future::pending().await
    }
    async fn ping(&self) -> drift_model::Result<()> {
        std::future::pending().await
    }
    async fn findings(
        &self,
        _: &drift_model::sink::FindingFilter,
        _: PageRequest,
    ) -> drift_model::Result<drift_model::sink::FindingPage> {
        std::future::pending().await
    }
}

fn with(d: drift_model::Drift, severity: Severity) -> drift_model::Drift {
    drift_model::Drift { severity, ..d }
}

/// Scan 1 (t(0)) opens six drifts in two namespaces; scan 2 (t(60)) sees all but the billing
/// ConfigMap, which it resolves; scan 3 (t(90)) is another repository in another cluster.
pub fn reports() -> Vec<ScanReport> {
    let desired = [
        key("Deployment", "shop", "web"),
        key("Service", "shop", "web"),
        key("ConfigMap", "shop", "settings"),
        key("ConfigMap", "billing", "settings"),
    ];
    let web_replicas =
        with(drift("Deployment", "shop", "web", DriftType::ReplicasDrift, "spec.replicas", json!(5)), Severity::Medium);
    let web_image = with(
        drift(
            "Deployment",
            "shop",
            "web",
            DriftType::ImageTagDrift,
            "spec.template.spec.containers[name=web].image",
            json!("nginx:1.28"),
        ),
        Severity::High,
    );
    let web_limits = with(
        drift(
            "Deployment",
            "shop",
            "web",
            DriftType::ResourceLimitDrift,
            "spec.template.spec.containers[name=web].resources.limits.cpu",
            json!("2"),
        ),
        Severity::Medium,
    );
    let svc_port = with(
        drift("Service", "shop", "web", DriftType::ServicePortDrift, "spec.ports[port=80].targetPort", json!(9090)),
        Severity::Critical,
    );
    let shop_cm = with(
        drift("ConfigMap", "shop", "settings", DriftType::ConfigmapDrift, "data.mode", json!("slow")),
        Severity::Low,
    );
    let billing_cm = with(
        drift("ConfigMap", "billing", "settings", DriftType::ConfigmapDrift, "data.mode", json!("unsafe")),
        Severity::Low,
    );
    let first = report(
        "scan-1",
        t(0),
        &desired,
        vec![
            web_replicas.clone(),
            web_image.clone(),
            web_limits.clone(),
            svc_port.clone(),
            shop_cm.clone(),
            billing_cm,
        ],
    );
    let second = report("scan-2", t(60), &desired, vec![web_replicas, web_image, web_limits, svc_port, shop_cm]);
    let (first, second) = with_findings(first, second);
    let mut third = report(
        "scan-3",
        t(90),
        &[key("Deployment", "payments", "api")],
        vec![with(
            drift("Deployment", "payments", "api", DriftType::ReplicasDrift, "spec.replicas", json!(0)),
            Severity::Critical,
        )],
    );
    third.repository = "payments-repo".to_owned();
    third.cluster = "edge".to_owned();
    vec![first, second, third]
}

/// Policy findings: scan-1 finds four (image-tag and run-as-root of the web Deployment, on
/// both sides and in Git; required-labels of the billing ConfigMap in Git); scan-2 no longer
/// finds the billing one, which it resolves.
pub fn findings() -> Vec<drift_model::finding::Finding> {
    use drift_model::finding::{Rule, Side};
    use drift_testkit::fixtures::finding;
    let image = "/spec/template/spec/containers/0/image";
    let root = "/spec/template/spec/containers/0/securityContext/runAsNonRoot";
    vec![
        finding("Deployment", "shop", "web", Rule::ImageTag, Side::Desired, Severity::Medium, image),
        finding("Deployment", "shop", "web", Rule::ImageTag, Side::Live, Severity::Medium, image),
        finding("Deployment", "shop", "web", Rule::RunAsRoot, Side::Live, Severity::High, root),
        finding(
            "ConfigMap",
            "billing",
            "settings",
            Rule::RequiredLabels,
            Side::Desired,
            Severity::Low,
            "/metadata/labels/team",
        ),
    ]
}

fn with_findings(mut first: ScanReport, mut second: ScanReport) -> (ScanReport, ScanReport) {
    let sides = vec![drift_model::finding::Side::Desired, drift_model::finding::Side::Live];
    first.findings = findings();
    first.policy_sides = sides.clone();
    second.findings = findings()[..3].to_vec();
    second.policy_sides = sides;
    (first, second)
}

pub async fn filled_store() -> Arc<MemoryStore> {
    let store = Arc::new(MemoryStore::new());
    for r in reports() {
        store.record(&r).await.unwrap();
    }
    store
}

pub struct Harness {
    pub app: Router,
    pub store: Arc<MemoryStore>,
    pub trigger: Arc<FakeTrigger>,
    pub clock: Arc<ManualClock>,
    pub state: ApiState,
}

pub async fn harness() -> Harness {
    let store = filled_store().await;
    let trigger = Arc::new(FakeTrigger::default());
    let clock = Arc::new(ManualClock::new(t(95)));
    let state = ApiState::new(store.clone(), trigger.clone())
        .with_token(Some(ApiToken::new(TOKEN).unwrap()))
        .with_clock(clock.clone());
    Harness { app: router(state.clone()), store, trigger, clock, state }
}

pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub text: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }
    /// The `error` message of a JSON error answer.
    pub fn error(&self) -> String {
        self.json()["error"].as_str().unwrap_or_else(|| panic!("no error message in {}", self.text)).to_owned()
    }
}

pub async fn call(app: &Router, method: Method, uri: &str, headers: &[(&str, &str)]) -> Answer {
    let mut req = Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let response = app.clone().oneshot(req.body(Body::empty()).unwrap()).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), 16 << 20).await.unwrap();
    Answer { status, headers, text: String::from_utf8(bytes.to_vec()).unwrap() }
}

pub async fn get(app: &Router, uri: &str) -> Answer {
    call(app, Method::GET, uri, &[]).await
}

/// The write tokens of [`sqlite_harness`]: alice's and bob's.
pub const ALICE: &str = "alice-token-8d2f61";
pub const BOB: &str = "bob-token-5c90ae";
/// Its read token.
pub const READER: &str = "reader-token-31b7c4";

/// A notifier of [`sqlite_harness`]: its first batch (scan-1) was claimed; one delivery was
/// parked, the others sent; the later batches are pending.
pub const HOOK: &str = "hook";

/// The API over a real SQLite store (a temporary file) filled with [`reports`], with its acting
/// side, two named write tokens and no read token.
pub struct SqliteHarness {
    pub app: Router,
    pub store: Arc<drift_sqlite::SqliteStore>,
    pub trigger: Arc<FakeTrigger>,
    pub clock: Arc<ManualClock>,
    pub state: ApiState,
    /// The event whose delivery to [`HOOK`] is parked.
    pub parked: String,
    _dir: tempfile::TempDir,
}

impl SqliteHarness {
    /// The id of the drift at `path` of object `name`.
    pub async fn drift_id(&self, name: &str, path: &str) -> i64 {
        let page = self.store.list(&DriftFilter::default(), PageRequest { limit: 1000, after: None }).await.unwrap();
        page.items.iter().find(|d| d.resource_name == name && d.path == path).unwrap().id
    }
}

pub async fn sqlite_harness() -> SqliteHarness {
    use drift_model::act::{ParkReason, Settle};
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("drift.db").display());
    let store = Arc::new(drift_sqlite::SqliteStore::open(&url).await.unwrap());
    // A notifier seen before any event reads them all.
    store.route(HOOK, &|e| Some(e.at), 1000).await.unwrap();
    for r in reports() {
        store.record(&r).await.unwrap();
    }
    store.route(HOOK, &|e| Some(e.at), 1000).await.unwrap();
    let claimed = store.claim(HOOK, "w1", t(91), chrono::Duration::minutes(5), 1000).await.unwrap();
    assert!(claimed.len() > 1, "the first batch");
    let parked = claimed[0].event.id.clone();
    let outcomes: Vec<(String, Settle)> = claimed
        .iter()
        .map(|d| {
            let settle = if d.event.id == parked {
                Settle::Parked { error: "the receiver answered 400".to_owned(), reason: ParkReason::Refused }
            } else {
                Settle::Sent
            };
            (d.event.id.clone(), settle)
        })
        .collect();
    store.settle(HOOK, "w1", &outcomes, t(91)).await.unwrap();
    let clock = Arc::new(ManualClock::new(t(95)));
    let trigger = Arc::new(FakeTrigger::default());
    let state = ApiState::new(store.clone(), trigger.clone())
        .with_tokens(vec![ApiToken::named("alice", ALICE).unwrap(), ApiToken::named("bob", BOB).unwrap()])
        .with_act(store.clone())
        .with_clock(clock.clone())
        // As the runtime gives it: learned from the store, shown, used by nothing (no settings).
        .with_predictor(Arc::new(drift_engine::classify::Classifier::default()));
    SqliteHarness { app: router(state.clone()), store, trigger, clock, state, parked, _dir: dir }
}

/// A request with a JSON body.
pub async fn send(app: &Router, method: Method, uri: &str, token: Option<&str>, body: &str) -> Answer {
    let mut req = Request::builder().method(method).uri(uri).header("content-type", "application/json");
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let response = app.clone().oneshot(req.body(Body::from(body.to_owned())).unwrap()).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), 16 << 20).await.unwrap();
    Answer { status, headers, text: String::from_utf8(bytes.to_vec()).unwrap() }
}

/// Everything logged through `tracing` while the guard lives, at every level.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// Starts capturing the logs of this thread.
    pub fn start() -> (Captured, tracing::subscriber::DefaultGuard) {
        let logs = Captured::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        (logs, tracing::subscriber::set_default(subscriber))
    }

    /// What was logged so far.
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

/// Walks the pages of `base` (a URI with `limit`) by their `next` cursor; the `key` of every
/// item, in order.
pub async fn walk(app: &Router, base: &str, key: &str) -> Vec<i64> {
    let mut seen = Vec::new();
    let mut uri = base.to_owned();
    loop {
        let page = get(app, &uri).await.json();
        seen.extend(page["items"].as_array().unwrap().iter().map(|i| i[key].as_i64().unwrap()));
        match page["next"].as_i64() {
            Some(next) => uri = format!("{base}&after={next}"),
            None => return seen,
        }
    }
}
