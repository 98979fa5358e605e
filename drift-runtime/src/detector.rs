//! The detector: a builder that composes desired sources, a live source, the engine (or an
//! integrator's own comparator), a store and any number of extra sinks, and runs them as one
//! service (scheduler, watch loop, notifier, self-heal; the API with the `api` feature).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "api")]
use async_trait::async_trait;
#[cfg(feature = "api")]
use drift_api::{ApiState, ApiToken, ScanTrigger, TriggerOutcome};
use drift_core::sink::RecordOutcome;
use drift_core::{Comparator, DesiredSource, DriftSink, Engine, LiveSource, ScanReport};
use drift_metrics::{Metrics, ScanGate};
#[cfg(feature = "api")]
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::leader::Elector;
use crate::notify::{Dispatcher, Round};
use crate::remedies::{AutoAcceptPolicy, HealPolicy, Remedies};
use crate::scanner::{Recorded, ScanSettings, Scanner, Store, new_scan_id};
use drift_core::act::Outlet;
use drift_core::remedy::{ChangeProposer, ClusterWriter};

/// Waits for a cluster's tasks, told to stop, to end: its running pass finishes (it records
/// nothing once the cluster's lease is no longer held: the scanner checks before writing, and
/// a write already under way completes), the watch and self-heal end at their next step. What
/// has not ended within `limit` (the renew deadline) is aborted, and awaited.
/// What the sharded detector does about one cluster (see [`settle`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settle {
    /// Nothing now (a stop is under way: settled again when it ends; or the tasks run for the
    /// term held).
    Wait,
    /// Start the cluster's tasks for this term.
    Start(u64),
    /// Stop the tasks running (their term ended, or another began: the elector stopped waiting
    /// for them); a term held then starts once they have stopped.
    Stop,
    /// Say this term stopped: it ended with no task of it running here (never started, or
    /// stopped already).
    Stopped(u64),
}

/// Compares a cluster's lease as its elector published it (the term and whether it is held,
/// read together) with the term of the tasks running here and whether they are stopping. Only a
/// term read as ended is said to have stopped: never one that may have begun since (a term read
/// apart from the state, e.g. the last one begun while `leading` still said false, could be a
/// new term whose tasks are about to start, and its release would then not wait for them).
fn settle(lead: crate::leader::Lead, running: Option<u64>, stopping: bool) -> Settle {
    match (lead.held, running, stopping) {
        (_, _, true) => Settle::Wait,
        (true, None, false) => Settle::Start(lead.term),
        (true, Some(t), false) if t == lead.term => Settle::Wait,
        (_, Some(_), false) => Settle::Stop,
        (false, None, false) => Settle::Stopped(lead.term),
    }
}

async fn stop_cluster(cluster: &str, tasks: ClusterTasks, limit: Duration) {
    let (sched, watcher, healer) = tasks;
    let mut tasks: Vec<tokio::task::JoinHandle<()>> = [Some(sched), watcher, healer].into_iter().flatten().collect();
    let aborts: Vec<_> = tasks.iter().map(tokio::task::JoinHandle::abort_handle).collect();
    // One join of them all, awaited again after the aborts: it remembers the tasks that ended
    // within the limit (a finished JoinHandle must not be polled again: that panics).
    let mut all = std::pin::pin!(futures::future::join_all(tasks.iter_mut()));
    if tokio::time::timeout(limit, all.as_mut()).await.is_err() {
        tracing::warn!(%cluster, limit = ?limit, "the cluster's tasks did not stop in time and are aborted");
        for a in &aborts {
            a.abort();
        }
        all.await;
    }
}

#[cfg(test)]
mod stop_tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// A desired source whose first fetch waits until it is let go (`release`), after saying it
    /// started (`entered`); later fetches answer at once.
    #[cfg(feature = "api")]
    #[derive(Debug)]
    struct Held {
        entered: Arc<tokio::sync::Notify>,
        release: Arc<tokio::sync::Notify>,
        first: std::sync::atomic::AtomicBool,
    }

    #[cfg(feature = "api")]
    #[async_trait]
    impl DesiredSource for Held {
        fn name(&self) -> &str {
            "held"
        }
        async fn fetch(&self) -> drift_core::Result<drift_core::DesiredSnapshot> {
            if self.first.swap(false, std::sync::atomic::Ordering::SeqCst) {
                self.entered.notify_one();
                self.release.notified().await;
            }
            Ok(drift_core::DesiredSnapshot { repository: "held".into(), ..Default::default() })
        }
    }

    /// `POST /scan?wait=true` raced a pass of one cluster that began after it checked that none
    /// ran: that cluster's pass was refused and its report left out of the answer (a flaky
    /// test of several clusters in CI). The waiting trigger now waits the running pass out and
    /// runs its own after it.
    #[cfg(feature = "api")]
    #[tokio::test]
    async fn a_waiting_scan_runs_its_pass_after_one_that_began_first() {
        let (entered, release) = (Arc::new(tokio::sync::Notify::new()), Arc::new(tokio::sync::Notify::new()));
        let held = Held { entered: entered.clone(), release: release.clone(), first: true.into() };
        let detector = Detector::builder()
            .desired(Arc::new(held))
            .live(Arc::new(drift_core::memory::MemoryLiveSource::new("c", vec![])))
            .store(Store::new(Arc::new(drift_core::memory::MemoryStore::new())))
            .watch(false)
            .build()
            .unwrap();
        let scanner = detector.scanners().next().unwrap().clone();
        let first = tokio::spawn({
            let scanner = scanner.clone();
            async move { scanner.pass("first".into()).await }
        });
        entered.notified().await;
        assert_eq!(scanner.running().as_deref(), Some("first"));
        assert!(scanner.pass("refused".into()).await.is_none(), "passes never overlap");
        let (_stop, shutdown) = watch::channel(false);
        let waiting = tokio::spawn({
            let scanner = scanner.clone();
            async move { pass_after_any_running(&scanner, "second".into(), &shutdown).await }
        });
        tokio::time::sleep(Duration::from_millis(120)).await;
        assert!(!waiting.is_finished(), "it waits while the first pass runs");
        release.notify_one();
        assert!(first.await.unwrap().is_some());
        let second = waiting.await.unwrap().expect("its own pass ran after the first");
        assert_eq!(second[0].report.scan_id, "second");
    }

    /// A cluster whose scheduler stops at once while its watch does not: the watch is aborted at
    /// the limit and the stop returns (a first version polled the finished scheduler's handle
    /// again after the timeout and panicked, taking the replica down on a rebalance).
    #[tokio::test(start_paused = true)]
    async fn a_task_that_does_not_stop_is_aborted_at_the_limit_and_the_finished_ones_are_not_polled_again() {
        let sched = tokio::spawn(async {});
        let (dropped_tx, dropped_rx) = tokio::sync::oneshot::channel::<()>();
        let watcher = tokio::spawn(async move {
            let _guard = dropped_tx;
            std::future::pending::<()>().await;
        });
        let healer = tokio::spawn(tokio::time::sleep(Duration::from_millis(10)));
        tokio::task::yield_now().await;
        let started = tokio::time::Instant::now();
        stop_cluster("east", (sched, Some(watcher), Some(healer)), Duration::from_secs(3)).await;
        assert_eq!(started.elapsed(), Duration::from_secs(3), "waited for the limit, no more");
        assert!(dropped_rx.await.is_err(), "the watch was aborted (its future dropped)");
    }

    /// A live source whose reads never end; when one is dropped (its pass aborted), the time.
    #[derive(Debug)]
    struct Stuck {
        name: String,
        aborted: std::sync::Mutex<Option<tokio::time::Instant>>,
    }

    struct OnDrop<'a>(&'a std::sync::Mutex<Option<tokio::time::Instant>>);

    impl Drop for OnDrop<'_> {
        fn drop(&mut self) {
            if let Ok(mut at) = self.0.lock() {
                at.get_or_insert_with(tokio::time::Instant::now);
            }
        }
    }

    #[async_trait::async_trait]
    impl LiveSource for Stuck {
        fn cluster(&self) -> &str {
            &self.name
        }
        async fn fetch(&self, _scope: &drift_core::Scope) -> drift_core::Result<drift_core::LiveSnapshot> {
            let _guard = OnDrop(&self.aborted);
            std::future::pending().await
        }
    }

    /// A membership whose view the test sets.
    #[derive(Debug)]
    struct Members(std::sync::Mutex<Vec<String>>);

    #[async_trait::async_trait]
    impl crate::shard::Membership for Members {
        fn identity(&self) -> &str {
            "a"
        }
        async fn heartbeat(&self) -> drift_core::Result<Vec<String>> {
            Ok(self.0.lock().map(|v| v.clone()).unwrap_or_default())
        }
        async fn leave(&self) -> drift_core::Result<()> {
            Ok(())
        }
    }

    /// The review's finding: the clusters a replica let go were stopped one after another (each
    /// up to the limit), so a second busy cluster's tasks were still running when its elector
    /// stopped waiting and released its Lease. Stopped together, each is aborted within the
    /// limit, before its Lease goes.
    #[tokio::test(start_paused = true)]
    #[allow(clippy::unwrap_used, clippy::expect_used)]
    async fn clusters_let_go_together_stop_together_each_before_its_lease_is_released() {
        use crate::leader::tests::{MemLock, Shared, Watching};
        let t = crate::leader::ElectionTimings::default();
        let cm = drift_core::Resource::from_object(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "shop"}, "data": {"mode": "fast"}}))
        .unwrap();
        let desired = Arc::new(drift_core::memory::MemoryDesiredSource::new("platform", vec![cm]));
        let members = Arc::new(Members(std::sync::Mutex::new(vec!["a".to_owned()])));
        let mut builder = Detector::builder()
            .store(crate::Store::new(Arc::new(drift_core::memory::MemoryStore::new())))
            .watch(false)
            .interval(Duration::from_secs(300));
        let (mut sources, mut shared, mut locks) = (Vec::new(), Vec::new(), std::collections::BTreeMap::new());
        for name in ["east", "west"] {
            let live = Arc::new(Stuck { name: name.to_owned(), aborted: Default::default() });
            builder = builder.cluster(ClusterParts {
                live: live.clone(),
                desired: vec![desired.clone()],
                writer: None,
                proposers: vec![],
            });
            let s = Arc::new(std::sync::Mutex::new(Shared::default()));
            let lock: Arc<dyn drift_core::lease::LeaseLock> = MemLock::with("a", &s, t.lease_duration, Watching::No);
            locks.insert(name.to_owned(), lock);
            sources.push(live);
            shared.push(s);
        }
        let detector =
            builder.sharding(crate::shard::Sharding::new(members.clone(), locks, t).unwrap()).build().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serve = tokio::spawn(detector.run(async move {
            let _ = stopped.await;
        }));
        // Both held, both passes reading (and never done).
        while sources.iter().any(|s| s.aborted.lock().unwrap().is_some())
            || shared.iter().any(|s| s.lock().unwrap().record.as_ref().and_then(|r| r.holder()) != Some("a"))
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        // Both go at once.
        members.0.lock().unwrap().clear();
        let let_go = tokio::time::Instant::now();
        let mut released: Vec<Option<tokio::time::Instant>> = vec![None, None];
        while released.iter().any(Option::is_none) && let_go.elapsed() < Duration::from_secs(30) {
            for (i, s) in shared.iter().enumerate() {
                if released[i].is_none() && s.lock().unwrap().releases > 0 {
                    released[i] = Some(tokio::time::Instant::now());
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        for (i, source) in sources.iter().enumerate() {
            let aborted = source.aborted.lock().unwrap().expect("the pass was aborted");
            let released = released[i].expect("the lease was released");
            assert!(aborted <= released, "{}: its lease went before its pass was aborted", source.name);
            assert!(
                released - let_go <= t.retry_period * 11 / 10 + t.handover_limit() + Duration::from_millis(100),
                "{}: released {:?} after it was let go",
                source.name,
                released - let_go
            );
        }
        stop.send(()).unwrap();
        serve.await.unwrap();
    }

    /// The review's finding: the detector read `leading` (false) and the term (`Terms::current`)
    /// apart; between the elector's start of a new term and its `leading` turning true, it said
    /// the new term stopped before starting its tasks, so that term's release did not wait for
    /// them. Read together, a term begun meanwhile is started, and said stopped only once its
    /// tasks have stopped. (The elector begins a term and sends `true` with no await between:
    /// a paused single-threaded clock never runs the detector in between, so the interleaving
    /// is replayed here step by step on the real `Terms`.)
    #[tokio::test(start_paused = true)]
    async fn a_term_begun_while_the_last_ones_tasks_stop_is_said_stopped_only_after_its_own_tasks() {
        let terms = crate::leader::Terms::new();
        assert_eq!(settle(terms.lead(), None, false), Settle::Stopped(0), "nothing began");
        terms.begin();
        assert_eq!(settle(terms.lead(), None, false), Settle::Start(1));
        assert_eq!(settle(terms.lead(), Some(1), false), Settle::Wait, "running for the term held");
        terms.end();
        assert_eq!(settle(terms.lead(), Some(1), false), Settle::Stop);
        assert_eq!(settle(terms.lead(), None, true), Settle::Wait, "settled when the stop ends");
        // The tasks of term 1 stopped; the elector takes the lease again at once (term 2) and
        // the detector looks before `leading` turned true.
        terms.stopped(1);
        terms.begin();
        assert_eq!(settle(terms.lead(), None, false), Settle::Start(2), "term 2 starts, not said stopped");
        assert_eq!(terms.last_stopped(), 1);
        // Term 2 given up: its release waits for its tasks.
        terms.end();
        assert_eq!(settle(terms.lead(), Some(2), false), Settle::Stop);
        assert!(!terms.wait(2, Duration::from_secs(1)).await, "term 2 said stopped before its tasks stopped");
        terms.stopped(2);
        assert!(terms.wait(2, Duration::from_secs(1)).await);
        // The elector stopped waiting for the tasks of term 2 and began term 3: they stop first.
        terms.begin();
        assert_eq!(settle(terms.lead(), Some(2), false), Settle::Stop);
        // A term begun and ended while nothing ran here (seen as one change): said stopped.
        terms.end();
        assert_eq!(settle(terms.lead(), None, false), Settle::Stopped(3));
    }

    #[tokio::test(start_paused = true)]
    async fn tasks_that_stop_within_the_limit_are_awaited_without_abort() {
        let sched = tokio::spawn(tokio::time::sleep(Duration::from_millis(500)));
        let watcher = tokio::spawn(tokio::time::sleep(Duration::from_secs(1)));
        let started = tokio::time::Instant::now();
        stop_cluster("east", (sched, Some(watcher), None), Duration::from_secs(3)).await;
        assert_eq!(started.elapsed(), Duration::from_secs(1));
    }
}

/// How long a running pass may take to finish after a stop before it is aborted (its report is
/// one transaction, so an aborted pass writes nothing).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// One cluster of a detector that reads several ([`DetectorBuilder::cluster`]): its live source
/// (whose name is the cluster's), the desired sources of the repositories that target it, and
/// its writer of reverts (none: it is never written to).
#[derive(Debug, Clone)]
pub struct ClusterParts {
    /// The cluster's live source.
    pub live: Arc<dyn LiveSource>,
    /// The repositories that target this cluster (at least one).
    pub desired: Vec<Arc<dyn DesiredSource>>,
    /// The writer of reverts and self-heal on this cluster.
    pub writer: Option<Arc<dyn ClusterWriter>>,
    /// This cluster's own proposers of accepted changes, used before the detector's
    /// ([`DetectorBuilder::proposer`]) for their repository: with several clusters, one that
    /// reads the repository as this cluster's source does (an object Argo CD Applications
    /// render for two clusters is edited in the file of this cluster's Application).
    pub proposers: Vec<Arc<dyn ChangeProposer>>,
}

/// Builds a [`Detector`]. A live source, a store and at least one desired source are required;
/// everything else has a default (the default engine, scans every 5 minutes, watch on).
#[derive(Debug, Default)]
pub struct DetectorBuilder {
    desired: Vec<Arc<dyn DesiredSource>>,
    live: Option<Arc<dyn LiveSource>>,
    /// More clusters, each with its own live source, repositories and writer.
    clusters: Vec<ClusterParts>,
    engine: Option<Engine>,
    comparator: Option<Arc<dyn Comparator>>,
    settings: ScanSettings,
    store: Option<Store>,
    sinks: Vec<Arc<dyn DriftSink>>,
    interval: Option<Duration>,
    watch: Option<bool>,
    #[cfg(feature = "api")]
    tokens: Vec<ApiToken>,
    #[cfg(feature = "api")]
    read_token: Option<ApiToken>,
    #[cfg(feature = "api")]
    server_limits: drift_api::server::ServerLimits,
    #[cfg(feature = "api")]
    allowed_hosts: drift_api::server::AllowedHosts,
    metrics: Option<Metrics>,
    outlets: Vec<Arc<dyn Outlet>>,
    notify_tick: Option<Duration>,
    notify_lease: Option<Duration>,
    writer: Option<Arc<dyn ClusterWriter>>,
    proposers: Vec<Arc<dyn ChangeProposer>>,
    allow_secrets: bool,
    action_timeout: Option<Duration>,
    recorded_values: bool,
    heal: Option<HealPolicy>,
    auto_accept: Option<AutoAcceptPolicy>,
    propose: Option<crate::remedies::ProposePolicy>,
    classifier: Option<Arc<drift_core::drift_engine::classify::Classifier>>,
    link: Option<String>,
    election: Option<Elector>,
    sharding: Option<crate::shard::Sharding>,
    audit: Option<crate::identity::AuditSettings>,
    #[cfg(feature = "api")]
    alerts: drift_api::alerts::AlertSettings,
    #[cfg(feature = "api")]
    merge_check: Option<Arc<dyn drift_api::MergeCheck>>,
}

impl DetectorBuilder {
    /// What `POST /check` asks what merging a branch would do (the service's repositories, from
    /// its configuration); without it the endpoint answers 501.
    #[cfg(feature = "api")]
    pub fn merge_check(mut self, check: Arc<dyn drift_api::MergeCheck>) -> Self {
        self.merge_check = Some(check);
        self
    }

    /// How the API's Alertmanager receiver answers (`POST /alertmanager/webhook`; default:
    /// a window of 1h, drifts sent to the notifiers).
    #[cfg(feature = "api")]
    pub fn alerts(mut self, alerts: drift_api::alerts::AlertSettings) -> Self {
        self.alerts = alerts;
        self
    }

    /// Joins the Kubernetes audit log with the drifts ([`crate::identity`]): the file of
    /// `settings.log` is tailed and, with the `api` feature, `POST /audit/webhook` takes the
    /// audit webhook's event lists. Needs a store that keeps identities
    /// ([`Store::with_identities`]).
    pub fn audit(mut self, settings: crate::identity::AuditSettings) -> Self {
        self.audit = Some(settings);
        self
    }

    /// Adds a desired source (one per repository; each pass scans them in this order).
    pub fn desired(mut self, source: Arc<dyn DesiredSource>) -> Self {
        self.desired.push(source);
        self
    }
    /// Adds desired sources.
    pub fn desired_all(mut self, sources: impl IntoIterator<Item = Arc<dyn DesiredSource>>) -> Self {
        self.desired.extend(sources);
        self
    }
    /// The live source (one cluster).
    pub fn live(mut self, source: Arc<dyn LiveSource>) -> Self {
        self.live = Some(source);
        self
    }
    /// Adds a cluster: the detector then reads several, each with its own live source, scans,
    /// watch, coverage and writer, sharing the store, the API, the notifiers and the engine. A
    /// cluster that cannot be read never stops the others, and its drifts stay as they were
    /// (a scan that did not read a (kind, namespace) resolves nothing there). Without
    /// [`DetectorBuilder::live`], the first cluster added is the first of the detector.
    pub fn cluster(mut self, parts: ClusterParts) -> Self {
        self.clusters.push(parts);
        self
    }
    /// The engine (default: [`Engine::default`]): what passes and the watch compare with
    /// unless a [`DetectorBuilder::comparator`] is given, and what remediation plans its patches
    /// with.
    pub fn engine(mut self, engine: Engine) -> Self {
        self.engine = Some(engine);
        self
    }
    /// What every pass and the watch compare with (default: the engine of
    /// [`DetectorBuilder::engine`]). An integrator's own [`Comparator`] may wrap the engine to
    /// leave drifts out or add rules of its own; it keeps the trait's contract (pure, drifts
    /// sorted by path, no Secret value in clear). Remediation still plans its patches with the
    /// engine: a revert or accept of a drift that only this comparator reports is refused as no
    /// longer drifted.
    pub fn comparator(mut self, comparator: Arc<dyn Comparator>) -> Self {
        self.comparator = Some(comparator);
        self
    }
    /// The namespace rules of every scan (default: `default`, no custom cluster-scoped kind).
    pub fn settings(mut self, settings: ScanSettings) -> Self {
        self.settings = settings;
        self
    }
    /// The store: where every report is recorded first, and what the API reads.
    pub fn store(mut self, store: Store) -> Self {
        self.store = Some(store);
        self
    }
    /// Adds a sink that receives every report after the store (a file, a chat, a ticket
    /// system). A failing extra sink is logged and counted; it never stops the detector.
    pub fn sink(mut self, sink: Arc<dyn DriftSink>) -> Self {
        self.sinks.push(sink);
        self
    }
    /// Period of full scans (default 5 minutes; the watch loop re-reads Git as often).
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = Some(interval);
        self
    }
    /// React to live changes when the live source can watch (default true).
    pub fn watch(mut self, watch: bool) -> Self {
        self.watch = Some(watch);
        self
    }
    /// The bearer token of the API's write endpoints (without one, `POST /scan` and decisions
    /// are refused). Replaces the tokens given before.
    #[cfg(feature = "api")]
    pub fn token(mut self, token: Option<ApiToken>) -> Self {
        self.tokens = token.into_iter().collect();
        self
    }
    /// The write tokens, each with a name: the actor of what a request with it does (a
    /// decision's owner). Replaces the tokens given before.
    #[cfg(feature = "api")]
    pub fn tokens(mut self, tokens: Vec<ApiToken>) -> Self {
        self.tokens = tokens;
        self
    }
    /// A token every read of the API but `/health`, `/ready` and `/metrics` needs (default:
    /// reads are open).
    #[cfg(feature = "api")]
    pub fn read_token(mut self, token: Option<ApiToken>) -> Self {
        self.read_token = token;
        self
    }
    /// The HTTP server's bounds: header-read and idle timeouts, most connections at once
    /// (default: [`drift_api::server::ServerLimits::default`]).
    #[cfg(feature = "api")]
    pub fn server_limits(mut self, limits: drift_api::server::ServerLimits) -> Self {
        self.server_limits = limits;
        self
    }
    /// The `Host` names the API answers to; any other is answered 421 (default: the names
    /// [`drift_api::server::AllowedHosts`] always allows).
    #[cfg(feature = "api")]
    pub fn allowed_hosts(mut self, hosts: drift_api::server::AllowedHosts) -> Self {
        self.allowed_hosts = hosts;
        self
    }
    /// Metrics to share with the caller (default: new ones).
    pub fn metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }
    /// Adds a notifier: the events of every report are delivered to it (the store must keep
    /// an outbox: [`Store::acting`]).
    pub fn notifier(mut self, outlet: Arc<dyn Outlet>) -> Self {
        self.outlets.push(outlet);
        self
    }
    /// How often the notifier task looks at the outbox when nothing wakes it (default 1 s; a
    /// report that writes events wakes it at once).
    pub fn notify_tick(mut self, tick: Duration) -> Self {
        self.notify_tick = Some(tick);
        self
    }
    /// How long a delivery claimed by this process stays leased to it (default 60 s): the
    /// deliveries of a process that died go out again after it.
    pub fn notify_lease(mut self, lease: Duration) -> Self {
        self.notify_lease = Some(lease);
        self
    }

    /// The cluster writer of reverts (`drift-kube`'s `K8sSource`): `POST
    /// /drifts/{id}/revert`, `drift fix --revert` and self-heal need one.
    pub fn cluster_writer(mut self, writer: Arc<dyn ClusterWriter>) -> Self {
        self.writer = Some(writer);
        self
    }
    /// Adds the proposer of a repository's changes (`POST /drifts/{id}/accept`).
    pub fn proposer(mut self, proposer: Arc<dyn ChangeProposer>) -> Self {
        self.proposers.push(proposer);
        self
    }
    /// Accepts propose the values the last scan recorded instead of reading the cluster
    /// ([`Remedies::with_recorded_values`]): for a caller that cannot reach the cluster.
    pub fn recorded_values(mut self, recorded: bool) -> Self {
        self.recorded_values = recorded;
        self
    }
    /// Allows reverting Secrets (off by default).
    pub fn allow_secret_reverts(mut self, allow: bool) -> Self {
        self.allow_secrets = allow;
        self
    }
    /// How long a revert or an accept may run ([`Remedies::with_timeout`]; default
    /// [`crate::attempt::ACTION_TIMEOUT`]).
    pub fn action_timeout(mut self, timeout: Duration) -> Self {
        self.action_timeout = Some(timeout);
        self
    }
    /// Turns self-heal on (off by default) with a policy.
    pub fn heal(mut self, policy: HealPolicy) -> Self {
        self.heal = Some(policy);
        self
    }
    /// Turns automatic pull requests on (off by default) with a policy
    /// ([`crate::remedies::AutoAcceptPolicy`]).
    pub fn auto_accept(mut self, policy: AutoAcceptPolicy) -> Self {
        self.auto_accept = Some(policy);
        self
    }
    /// Turns whitelist proposals on (off by default) with a policy
    /// ([`crate::remedies::ProposePolicy`]).
    pub fn propose(mut self, policy: crate::remedies::ProposePolicy) -> Self {
        self.propose = Some(policy);
        self
    }
    /// Uses the classifier's predictions as `settings` say (`classify:`): routing of the
    /// notifiers, the `predicted` rules of automatic pull requests, whitelist proposals. Without
    /// it predictions are shown (`GET /drifts/{id}`) and never used.
    pub fn classify(mut self, settings: drift_core::drift_engine::classify::ClassifySettings) -> Self {
        self.classifier = Some(Arc::new(drift_core::drift_engine::classify::Classifier::new(Some(settings))));
        self
    }
    /// The address of the API or page, for links back (pull request bodies).
    pub fn link(mut self, link: Option<String>) -> Self {
        self.link = link;
        self
    }

    /// Turns leader election on: of the replicas that share the lease, only the one holding it
    /// runs the scans, the watch, self-heal and the notifier; every replica serves the API.
    pub fn leader_election(mut self, elector: Elector) -> Self {
        self.election = Some(elector);
        self
    }

    /// Turns sharding on (instead of leader election): the clusters are spread over the replicas
    /// alive, each scanned, watched and healed only by the replica holding its lease
    /// ([`crate::shard`]); every replica serves the API and runs the notifier (deliveries are
    /// claimed in the store, so each goes out once).
    pub fn sharding(mut self, sharding: crate::shard::Sharding) -> Self {
        self.sharding = Some(sharding);
        self
    }

    /// Checks what was given and builds the detector.
    pub fn build(self) -> drift_core::Result<Detector> {
        let mut clusters = Vec::with_capacity(self.clusters.len() + 1);
        if let Some(live) = self.live {
            clusters.push(ClusterParts { live, desired: self.desired, writer: self.writer, proposers: Vec::new() });
        } else if !self.desired.is_empty() || self.writer.is_some() {
            return Err(drift_core::Error::config(
                "desired sources and a writer given to the builder need its live source (or give them with a cluster)",
            ));
        }
        clusters.extend(self.clusters);
        if clusters.is_empty() {
            return Err(drift_core::Error::config("the detector needs a live source"));
        }
        let store = self.store.ok_or_else(|| drift_core::Error::config("the detector needs a store"))?;
        let mut seen = std::collections::BTreeSet::new();
        for c in &clusters {
            let name = c.live.cluster();
            if !seen.insert(name.to_owned()) {
                return Err(drift_core::Error::config(format!("two clusters are named {name:?}")));
            }
            if c.desired.is_empty() {
                return Err(drift_core::Error::config(if clusters.len() == 1 {
                    "the detector needs at least one desired source".to_owned()
                } else {
                    format!("cluster {name:?} has no repository that targets it")
                }));
            }
        }
        let interval = self.interval.unwrap_or(Duration::from_secs(300));
        if interval.is_zero() {
            return Err(drift_core::Error::config("the scan interval must be more than 0"));
        }
        let metrics = self.metrics.unwrap_or_default();
        let mut names = std::collections::HashSet::new();
        if let Some(dup) = self.outlets.iter().find(|o| !names.insert(o.name().to_owned())) {
            return Err(drift_core::Error::config(format!("two notifiers are named {:?}", dup.name())));
        }
        let dispatcher = match (&store.act, self.outlets.is_empty()) {
            (_, true) => None,
            (None, false) => {
                return Err(drift_core::Error::config(
                    "notifications need a store that keeps an outbox (sqlite or postgres)",
                ));
            }
            (Some(act), false) => {
                let mut d =
                    Dispatcher::new(act.clone(), store.read.clone(), self.outlets).with_metrics(metrics.clone());
                if let Some(lease) = self.notify_lease {
                    d = d.with_lease(chrono::Duration::from_std(lease).unwrap_or(crate::notify::LEASE));
                }
                if let Some(c) = &self.classifier {
                    d = d.with_classifier(c.clone());
                }
                Some(Arc::new(d))
            }
        };
        if let Some(policy) = &self.heal {
            policy.validate()?;
            if let Some(c) = clusters.iter().find(|c| c.writer.is_none()) {
                return Err(drift_core::Error::config(if clusters.len() == 1 {
                    "heal needs a cluster to write to (live.kubeconfig or in-cluster)".to_owned()
                } else {
                    format!("heal needs a cluster to write to; cluster {:?} cannot be written to", c.live.cluster())
                }));
            }
            if store.act.is_none() {
                return Err(drift_core::Error::config("heal needs a store with an audit trail (sqlite or postgres)"));
            }
        }
        if let Some(c) = self.classifier.as_ref().and_then(|c| c.settings()) {
            c.validate()?;
        }
        // A repository that takes changes: one for every cluster, or one of a cluster's own
        // (with several clusters, each proposes for its own drifts).
        let takes_changes = !self.proposers.is_empty() || clusters.iter().any(|c| !c.proposers.is_empty());
        if let Some(policy) = &self.propose {
            policy.validate()?;
            if !takes_changes {
                return Err(drift_core::Error::config(
                    "accept.propose needs a repository that takes changes (a git remote or github:OWNER/REPO)",
                ));
            }
            if store.act.is_none() {
                return Err(drift_core::Error::config(
                    "accept.propose needs a store with decisions and an audit trail (sqlite or postgres)",
                ));
            }
        }
        if let Some(policy) = &self.auto_accept {
            policy.validate()?;
            if policy.asks_prediction() && self.classifier.is_none() {
                return Err(drift_core::Error::config(
                    "accept.auto: a rule with `predicted` needs the classifier's settings (`classify: {min_confidence: 0.8}`)",
                ));
            }
            if !takes_changes {
                return Err(drift_core::Error::config(
                    "accept.auto needs a repository that takes changes (a git remote or github:OWNER/REPO)",
                ));
            }
            if store.act.is_none() {
                return Err(drift_core::Error::config(
                    "accept.auto needs a store with an audit trail (sqlite or postgres)",
                ));
            }
        }
        // With an election, this replica stands by until it holds the lease.
        let election = self.election.map(|e| (e, watch::channel(false)));
        if election.is_some() {
            metrics.set_leader(false);
        }
        // With sharding, each cluster waits for its own lease.
        if self.sharding.is_some() && election.is_some() {
            return Err(drift_core::Error::config(
                "leader election and sharding are two ways of sharing work: choose one",
            ));
        }
        let mut shard_leading: std::collections::BTreeMap<String, watch::Sender<bool>> = Default::default();
        if let Some(sharding) = &self.sharding {
            let names: std::collections::BTreeSet<&str> = clusters.iter().map(|c| c.live.cluster()).collect();
            let sharded: std::collections::BTreeSet<&str> = sharding.clusters().map(String::as_str).collect();
            if names != sharded {
                return Err(drift_core::Error::config(format!(
                    "sharding has leases for clusters {sharded:?}, the detector reads {names:?}"
                )));
            }
            for name in names {
                shard_leading.insert(name.to_owned(), watch::channel(false).0);
            }
            metrics.set_leader(false);
        }
        let engine = self.engine.unwrap_or_default();
        let comparator = self.comparator.unwrap_or_else(|| Arc::new(engine.clone()));
        let gaps = Arc::new(crate::scanner::WatchGaps::default());
        let leading = election.as_ref().map(|(_, (_, rx))| rx.clone());
        let leading_of = |cluster: &str| match shard_leading.get(cluster) {
            Some(tx) => Some(tx.subscribe()),
            None => leading.clone(),
        };
        let wake = dispatcher.as_ref().map(|d| d.waker());
        let mut units = Vec::with_capacity(clusters.len());
        for parts in clusters {
            let unit_leading = leading_of(parts.live.cluster());
            let scanner = Arc::new(Scanner {
                desired: parts.desired,
                live: parts.live,
                engine: engine.clone(),
                comparator: comparator.clone(),
                settings: self.settings.clone(),
                store: store.clone(),
                sinks: self.sinks.clone(),
                metrics: metrics.clone(),
                gate: ScanGate::new(),
                wake: wake.clone(),
                leading: unit_leading,
                watched: std::sync::Mutex::default(),
                passed: std::sync::Mutex::default(),
                gaps: gaps.clone(),
            });
            let remedies = scanner.store.act.is_some().then(|| {
                let mut r = Remedies::new(scanner.clone())
                    .allow_secrets(self.allow_secrets)
                    .with_recorded_values(self.recorded_values)
                    .with_link(self.link.clone());
                if let Some(w) = parts.writer {
                    r = r.with_writer(w);
                }
                // The cluster's own first: the first proposer of a repository is the one used.
                for p in parts.proposers.iter().chain(&self.proposers) {
                    r = r.with_proposer(p.clone());
                }
                if let Some(h) = &self.heal {
                    r = r.with_heal(h.clone());
                }
                if let Some(a) = &self.auto_accept {
                    r = r.with_auto_accept(a.clone());
                }
                if let Some(p) = &self.propose {
                    r = r.with_propose(p.clone());
                }
                if let Some(c) = &self.classifier {
                    r = r.with_classifier(c.clone());
                }
                if let Some(t) = self.action_timeout {
                    r = r.with_timeout(t);
                }
                Arc::new(r)
            });
            units.push(Unit { scanner, remedies });
        }
        let scanner = units[0].scanner.clone();
        let identifier = match (self.audit, &scanner.store.identities) {
            (None, _) => None,
            (Some(settings), Some(identities)) => Some(Arc::new(crate::identity::Identifier::new(
                settings,
                scanner.store.read.clone(),
                identities.clone(),
            ))),
            (Some(_), None) => {
                return Err(drift_core::Error::config(
                    "`audit` needs a store that keeps who made each change (sqlite or postgres)",
                ));
            }
        };
        Ok(Detector {
            identifier,
            units,
            gaps,
            interval,
            watch: self.watch.unwrap_or(true),
            #[cfg(feature = "api")]
            tokens: self.tokens,
            #[cfg(feature = "api")]
            read_token: self.read_token,
            #[cfg(feature = "api")]
            server_limits: self.server_limits,
            #[cfg(feature = "api")]
            allowed_hosts: self.allowed_hosts,
            #[cfg(feature = "api")]
            alerts: self.alerts,
            #[cfg(feature = "api")]
            merge_check: self.merge_check,
            #[cfg(feature = "api")]
            classifier: self.classifier.unwrap_or_default(),
            passes: Arc::default(),
            dispatcher,
            notify_tick: self.notify_tick.unwrap_or(Duration::from_secs(1)),
            election: election.map(|(e, (tx, _))| (e, tx)),
            sharding: self.sharding.map(|s| (s, shard_leading)),
        })
    }
}

/// A composed detector: run one pass ([`Detector::scan_once`]), run as a service
/// ([`Detector::run`]) or serve the API too (`Detector::serve`, with the `api` feature).
#[derive(Debug)]
pub struct Detector {
    /// Each cluster's scanner and remediation (one without [`DetectorBuilder::cluster`]).
    units: Vec<Unit>,
    /// What each cluster's watch does not see.
    gaps: Arc<crate::scanner::WatchGaps>,
    interval: Duration,
    watch: bool,
    #[cfg(feature = "api")]
    tokens: Vec<ApiToken>,
    #[cfg(feature = "api")]
    read_token: Option<ApiToken>,
    #[cfg(feature = "api")]
    server_limits: drift_api::server::ServerLimits,
    #[cfg(feature = "api")]
    allowed_hosts: drift_api::server::AllowedHosts,
    /// Passes started by `POST /scan` without waiting, so that shutdown can wait for them.
    passes: Passes,
    /// The notifier task, when notifiers are configured.
    dispatcher: Option<Arc<Dispatcher>>,
    notify_tick: Duration,
    /// Leader election, and where it says whether this replica leads.
    election: Option<(Elector, watch::Sender<bool>)>,
    /// Sharding, and where it says, cluster by cluster, whether this replica holds it.
    sharding: Option<(crate::shard::Sharding, std::collections::BTreeMap<String, watch::Sender<bool>>)>,
    /// The audit log join, when `audit` is configured.
    identifier: Option<Arc<crate::identity::Identifier>>,
    #[cfg(feature = "api")]
    alerts: drift_api::alerts::AlertSettings,
    #[cfg(feature = "api")]
    merge_check: Option<Arc<dyn drift_api::MergeCheck>>,
    /// The classifier `GET /drifts/{id}` shows the predictions of.
    #[cfg(feature = "api")]
    classifier: Arc<drift_core::drift_engine::classify::Classifier>,
}

/// One cluster of a detector: its scanner and its remediation (with a store that keeps an audit
/// trail).
#[derive(Debug)]
struct Unit {
    scanner: Arc<Scanner>,
    remedies: Option<Arc<Remedies>>,
}

/// One cluster's tasks: its scheduler, its watch and its self-heal.
type ClusterTasks =
    (tokio::task::JoinHandle<()>, Option<tokio::task::JoinHandle<()>>, Option<tokio::task::JoinHandle<()>>);

/// The tasks only a leader runs (all of them without leader election): per cluster, the
/// scheduler, the watch and self-heal; once, the notifier and the audit join.
#[derive(Debug, Default)]
struct LeaderTasks {
    sched: Vec<tokio::task::JoinHandle<()>>,
    watcher: Vec<tokio::task::JoinHandle<()>>,
    notifier: Option<tokio::task::JoinHandle<()>>,
    healer: Vec<tokio::task::JoinHandle<()>>,
    identifier: Option<tokio::task::JoinHandle<()>>,
}

type Passes = Arc<std::sync::Mutex<tokio::task::JoinSet<()>>>;

fn lock(passes: &Passes) -> std::sync::MutexGuard<'_, tokio::task::JoinSet<()>> {
    passes.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Detector {
    /// A builder.
    pub fn builder() -> DetectorBuilder {
        DetectorBuilder::default()
    }

    /// The scanner of the first cluster (the only one without [`DetectorBuilder::cluster`]).
    pub fn scanner(&self) -> &Arc<Scanner> {
        &self.units[0].scanner
    }

    /// The scanner of every cluster, in the order they were given.
    pub fn scanners(&self) -> impl Iterator<Item = &Arc<Scanner>> {
        self.units.iter().map(|u| &u.scanner)
    }

    /// The clusters whose watch does not see every (kind, namespace) pair now, with how many
    /// pairs it misses.
    pub fn watch_gaps(&self) -> std::collections::BTreeMap<String, usize> {
        self.gaps.out_of_sync()
    }

    /// One pass now, every report recorded: the reports, or the first error of the store (an
    /// extra sink's failure is logged, not returned). Fails when a pass is already running.
    pub async fn scan_once(&self) -> drift_core::Result<Vec<ScanReport>> {
        Ok(self.scan_once_recorded().await?.into_iter().map(|(report, _)| report).collect())
    }

    /// [`Detector::scan_once`], with what recording each report did (how many of its drifts
    /// are under a waiver, how many events it wrote).
    pub async fn scan_once_recorded(&self) -> drift_core::Result<Vec<(ScanReport, RecordOutcome)>> {
        self.register_notifiers().await;
        if !self.scanner().is_leading() {
            return Err(drift_core::Error::unavailable(
                "this replica does not hold the leader lease; the leader scans",
            ));
        }
        // The clusters are read at once; one that cannot be read only makes its own reports
        // partial or failed.
        let scan_id = new_scan_id();
        let several = self.units.len() > 1;
        let passes = self.units.iter().map(|u| {
            let id = if several { format!("{scan_id}-{}", u.scanner.cluster()) } else { scan_id.clone() };
            u.scanner.pass(id)
        });
        let mut all = Vec::new();
        for recorded in futures::future::join_all(passes).await {
            let recorded = recorded.ok_or_else(|| drift_core::Error::unavailable("a scan is already running"))?;
            for Recorded { report, outcome } in recorded {
                all.push(outcome.map(|o| (report, o))?);
            }
        }
        Ok(all)
    }

    /// Makes the notifiers known to the store before a first scan, so that its events reach
    /// them; a store that fails here is logged (the scan records anyway, and its events wait
    /// in the outbox).
    async fn register_notifiers(&self) {
        let Some(d) = &self.dispatcher else { return };
        if let Err(e) = d.register().await {
            tracing::warn!(error = %e, "notifiers not registered; this scan's events may not reach new notifiers");
        }
    }

    /// Remediation (reverts, accepts, self-heal) of the first cluster, with a store that keeps
    /// an audit trail.
    pub fn remedies(&self) -> Option<&Arc<Remedies>> {
        self.units[0].remedies.as_ref()
    }

    /// What the API's reverts and accepts go to: the one cluster's remediation, or with several
    /// clusters the remediation of each drift's cluster.
    #[cfg(feature = "api")]
    fn remediate(&self) -> Option<Arc<dyn drift_api::Remediate>> {
        if self.units.len() == 1 {
            return self.units[0].remedies.clone().map(|r| r as Arc<dyn drift_api::Remediate>);
        }
        let by_cluster: std::collections::BTreeMap<String, Arc<Remedies>> =
            self.units.iter().filter_map(|u| Some((u.scanner.cluster().to_owned(), u.remedies.clone()?))).collect();
        (!by_cluster.is_empty()).then(|| {
            Arc::new(ByCluster { read: self.scanner().store.read.clone(), by_cluster }) as Arc<dyn drift_api::Remediate>
        })
    }

    /// The notifier task, when notifiers are configured.
    pub fn dispatcher(&self) -> Option<&Arc<Dispatcher>> {
        self.dispatcher.as_ref()
    }

    /// One round of the notifier task now (what `drift scan` does after its pass): the events
    /// that are due are sent; failures stay queued for the next run. Nothing without
    /// notifiers.
    pub async fn deliver_now(&self) -> drift_core::Result<Option<Round>> {
        match &self.dispatcher {
            Some(d) => d.round(chrono::Utc::now()).await.map(Some),
            None => Ok(None),
        }
    }

    /// The API's state over this detector's store, metrics and scan trigger; `stop` turns true
    /// when the service shuts down (new scans are then refused).
    #[cfg(feature = "api")]
    pub fn api_state(&self, stop: watch::Receiver<bool>) -> ApiState {
        let state = ApiState::new(
            self.scanner().store.read.clone(),
            Arc::new(Trigger {
                scanners: self.scanners().cloned().collect(),
                shutdown: stop,
                passes: self.passes.clone(),
            }),
        )
        .with_tokens(self.tokens.clone())
        .with_read_token(self.read_token.clone())
        .with_allowed_hosts(self.allowed_hosts.clone())
        .with_metrics(self.scanner().metrics.clone())
        .with_alerts(self.alerts)
        .with_max_scan_age(self.interval * 3);
        let state = match &self.scanner().store.act {
            Some(act) => state.with_act(act.clone()),
            None => state,
        };
        let state = match &self.identifier {
            Some(i) => state.with_audit(i.clone()),
            None => state,
        };
        let state = match &self.merge_check {
            Some(c) => state.with_merge_check(c.clone()),
            None => state,
        };
        let view = crate::scanner::ClusterView {
            names: self.units.iter().map(|u| u.scanner.cluster().to_owned()).collect(),
            gaps: self.gaps.clone(),
        };
        let state = state.with_predictor(self.classifier.clone()).with_cluster_gaps(Arc::new(view));
        match self.remediate() {
            Some(r) => state.with_remedies(r),
            None => state,
        }
    }

    /// Serves until `shutdown` completes: the scheduler (a pass now, then every interval plus
    /// jitter), the watch loop (when enabled and the live source can watch) and the REST API on
    /// `listener`, within the server's bounds ([`DetectorBuilder::server_limits`],
    /// [`DetectorBuilder::allowed_hosts`]; [`drift_api::server`]). On shutdown the API stops taking scans, a running pass (scheduled or started
    /// by `POST /scan`) gets [`SHUTDOWN_GRACE`] to finish and is aborted after it (its report,
    /// one transaction, is then not written), then everything stops.
    ///
    /// With leader election ([`DetectorBuilder::leader_election`]) the API is served at once
    /// and everything else runs only while this replica holds the lease; the lease is released
    /// after the leader's tasks stopped.
    ///
    /// Needs the `api` feature (on by default); [`Detector::run`] is the same service without
    /// the API.
    #[cfg(feature = "api")]
    pub async fn serve(self, listener: TcpListener, shutdown: impl Future<Output = ()>) -> std::io::Result<()> {
        let (stop_tx, stop_rx) = watch::channel(false);
        let state = self.api_state(stop_rx.clone());
        self.register_notifiers().await;
        let mut stop_api = stop_rx.clone();
        let server =
            drift_api::server::serve(listener, drift_api::router(state), self.server_limits.clone(), async move {
                // Either a stop was sent or every sender is gone: both mean shut down.
                stop_api.changed().await.ok();
            });
        let server = tokio::spawn(server);
        self.run_until(shutdown, stop_tx, stop_rx).await;
        match server.await {
            Ok(result) => result,
            Err(e) => Err(std::io::Error::other(format!("API server task: {e}"))),
        }
    }

    /// Runs until `shutdown` completes, serving no API: the scheduler (a pass now, then every
    /// interval plus jitter), the watch loop (when enabled and the live source can watch), the
    /// notifier and self-heal, as `Detector::serve` runs them and with the same shutdown (a
    /// running pass gets [`SHUTDOWN_GRACE`] to finish). With leader election, they run only
    /// while this replica holds the lease.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let (stop_tx, stop_rx) = watch::channel(false);
        self.register_notifiers().await;
        self.run_until(shutdown, stop_tx, stop_rx).await;
    }

    /// The service's tasks until `shutdown` completes, then `stop` is sent and they finish.
    async fn run_until(
        mut self,
        shutdown: impl Future<Output = ()>,
        stop_tx: watch::Sender<bool>,
        stop_rx: watch::Receiver<bool>,
    ) {
        if let Some((sharding, leading)) = self.sharding.take() {
            self.run_sharded(sharding, leading, shutdown, &stop_tx).await;
            return;
        }
        match self.election.take() {
            None => {
                let tasks = self.start_tasks(stop_rx);
                shutdown.await;
                tracing::info!("shutting down: the running scan finishes or is abandoned before its report is written");
                stop_tx.send_replace(true);
                self.finish(tasks).await;
            }
            Some((elector, leading)) => self.lead_while_elected(elector, leading, shutdown, &stop_tx).await,
        }
    }

    /// With leader election: runs the election, starts the leader's tasks when this replica
    /// takes the lease and aborts them the moment it may have lost it (a running pass is
    /// dropped before its report is written); at shutdown, finishes them as
    /// `Detector::serve` does and only then releases the lease.
    async fn lead_while_elected(
        &self,
        elector: Elector,
        leading: watch::Sender<bool>,
        shutdown: impl Future<Output = ()>,
        stop_api: &watch::Sender<bool>,
    ) {
        let mut leading_rx = leading.subscribe();
        let (release_tx, release_rx) = watch::channel(false);
        let election = tokio::spawn(elector.run(leading, release_rx));
        let metrics = self.scanner().metrics.clone();
        tokio::pin!(shutdown);
        let mut term: Option<(watch::Sender<bool>, LeaderTasks)> = None;
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                changed = leading_rx.changed() => {
                    if changed.is_err() {
                        tracing::error!("the leader election task ended; this replica stands by until it stops");
                        if let Some((tx, tasks)) = term.take() {
                            tx.send_replace(true);
                            self.abort(tasks);
                        }
                        metrics.set_leader(false);
                        (&mut shutdown).await;
                        break;
                    }
                    let now_leading = *leading_rx.borrow_and_update();
                    metrics.set_leader(now_leading);
                    match (now_leading, term.is_some()) {
                        (true, false) => {
                            let (tx, rx) = watch::channel(false);
                            term = Some((tx, self.start_tasks(rx)));
                        }
                        (false, true) => {
                            if let Some((tx, tasks)) = term.take() {
                                tx.send_replace(true);
                                self.abort(tasks);
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        tracing::info!("shutting down: the running scan finishes or is abandoned, then the lease is released");
        stop_api.send_replace(true);
        if let Some((tx, tasks)) = term.take() {
            tx.send_replace(true);
            self.finish(tasks).await;
        }
        release_tx.send_replace(true);
        if let Err(e) = election.await {
            tracing::error!(error = %e, "the leader election task failed");
        }
        metrics.set_leader(false);
    }

    /// With sharding: runs the membership and the leases of this replica's clusters; each
    /// cluster's tasks start when this replica takes its lease and are aborted the moment it may
    /// have lost it (a pass then records nothing: the scanner checks its lease before writing).
    /// The notifier and the audit join run all along (deliveries are claimed in the store, each
    /// by one replica). At shutdown, the clusters' tasks finish as `Detector::serve`'s do, then
    /// the leases are released and the membership left, so the other replicas take over at once.
    async fn run_sharded(
        &self,
        sharding: crate::shard::Sharding,
        leading: std::collections::BTreeMap<String, watch::Sender<bool>>,
        shutdown: impl Future<Output = ()>,
        stop_api: &watch::Sender<bool>,
    ) {
        let metrics = self.scanner().metrics.clone();
        // Per cluster: the terms of its lease, and which term's tasks have stopped (its lease is
        // released, or taken again, only once the tasks of the term before have stopped).
        let terms: Vec<Arc<crate::leader::Terms>> = self.units.iter().map(|_| crate::leader::Terms::new()).collect();
        let terms_of =
            self.units.iter().zip(&terms).map(|(u, t)| (u.scanner.cluster().to_owned(), t.clone())).collect();
        // Each cluster's lease as its elector publishes it, term and state in one value (after
        // `leading`, so the scanner already sees what the tasks are started or stopped for):
        // which cluster changed; the loop reads the value itself.
        let (changes_tx, mut changes) = tokio::sync::mpsc::channel::<usize>(64);
        let mut forwarders = Vec::new();
        for (i, unit) in self.units.iter().enumerate() {
            if !leading.contains_key(unit.scanner.cluster()) {
                continue;
            }
            let mut rx = terms[i].subscribe();
            let changes_tx = changes_tx.clone();
            forwarders.push(tokio::spawn(async move {
                while rx.changed().await.is_ok() {
                    rx.borrow_and_update();
                    if changes_tx.send(i).await.is_err() {
                        return;
                    }
                }
            }));
        }
        drop(changes_tx);
        // Shorter than the elector's wait for them: what has not stopped is aborted before it.
        let handover = sharding.timings().handover_limit();
        let (release_tx, release_rx) = watch::channel(false);
        let shards = tokio::spawn(sharding.run(leading, terms_of, release_rx));
        let (shared_tx, shared_rx) = watch::channel(false);
        let notifier = self.dispatcher.clone().map(|d| tokio::spawn(d.run(self.notify_tick, shared_rx.clone())));
        let identifier = self.identifier.clone().map(|i| tokio::spawn(i.run(shared_rx.clone())));
        // A cluster's tasks while it is held: the stop of this term's task set, the term, the tasks.
        type Held = (watch::Sender<bool>, u64, ClusterTasks);
        let mut held: Vec<Option<Held>> = self.units.iter().map(|_| None).collect();
        // The clusters whose tasks are stopping, each stop on its own (several clusters let go at
        // once stop together, each within the limit); by task: the cluster, the term, and the
        // tasks' abort handles (a stop that fails leaves none running).
        let mut stopping: tokio::task::JoinSet<()> = tokio::task::JoinSet::new();
        let mut stops: std::collections::HashMap<tokio::task::Id, (usize, u64, Vec<tokio::task::AbortHandle>)> =
            std::collections::HashMap::new();
        let mut is_stopping: Vec<bool> = self.units.iter().map(|_| false).collect();
        tokio::pin!(shutdown);
        loop {
            let i = tokio::select! {
                () = &mut shutdown => break,
                Some(done) = stopping.join_next_with_id(), if !stopping.is_empty() => {
                    let (id, failed) = match done {
                        Ok((id, ())) => (id, None),
                        Err(e) => (e.id(), Some(e)),
                    };
                    let Some((i, term, aborts)) = stops.remove(&id) else { continue };
                    let unit = &self.units[i];
                    let cluster = unit.scanner.cluster();
                    if let Some(e) = failed {
                        tracing::error!(%cluster, error = %e, "a cluster's stop failed; its tasks are aborted");
                        for a in aborts {
                            a.abort();
                        }
                    }
                    is_stopping[i] = false;
                    // A watch stopped early never reaches its own reset: what it did not see is
                    // no longer this replica's to see (nor its 503).
                    unit.scanner.set_out_of_sync(0);
                    tracing::info!(%cluster, term, "the cluster's tasks have stopped; its lease may go");
                    terms[i].stopped(term);
                    i
                }
                change = changes.recv() => {
                    let Some(i) = change else {
                        (&mut shutdown).await;
                        break;
                    };
                    i
                }
            };
            // What the cluster's lease is now against what runs here: tasks run only for the
            // term they were started for, and only a term read as ended with no tasks of it here
            // is said to have stopped (never one that may have begun since).
            match settle(terms[i].lead(), held[i].as_ref().map(|h| h.1), is_stopping[i]) {
                Settle::Wait => {}
                Settle::Start(term) => {
                    let unit = &self.units[i];
                    tracing::info!(cluster = %unit.scanner.cluster(), term, "this replica watches the cluster");
                    let (tx, rx) = watch::channel(false);
                    held[i] = Some((tx, term, self.start_cluster(unit, &rx)));
                }
                Settle::Stop => {
                    if let Some((tx, term, tasks)) = held[i].take() {
                        let cluster = self.units[i].scanner.cluster().to_owned();
                        tracing::warn!(%cluster, term, "the cluster's lease is gone: its scans, watch and self-heal stop here");
                        tx.send_replace(true);
                        is_stopping[i] = true;
                        let (sched, watcher, healer) = &tasks;
                        let aborts = std::iter::once(sched)
                            .chain(watcher)
                            .chain(healer)
                            .map(tokio::task::JoinHandle::abort_handle)
                            .collect();
                        let id = stopping.spawn(async move { stop_cluster(&cluster, tasks, handover).await }).id();
                        stops.insert(id, (i, term, aborts));
                    }
                }
                Settle::Stopped(term) => terms[i].stopped(term),
            }
            metrics.set_leader(held.iter().any(Option::is_some));
        }
        tracing::info!(
            "shutting down: the running scans finish or are abandoned, then the clusters' leases are released"
        );
        stop_api.send_replace(true);
        let mut tasks = LeaderTasks::default();
        for (tx, _, (sched, watcher, healer)) in held.into_iter().flatten() {
            tx.send_replace(true);
            tasks.sched.push(sched);
            tasks.watcher.extend(watcher);
            tasks.healer.extend(healer);
        }
        self.finish(tasks).await;
        while let Some(done) = stopping.join_next_with_id().await {
            if let Err(e) = done
                && let Some((_, _, aborts)) = stops.remove(&e.id())
            {
                aborts.iter().for_each(tokio::task::AbortHandle::abort);
            }
        }
        // No task of any cluster runs here any more, nor starts again: every term, up to any
        // begun until the electors stop, has stopped.
        for t in &terms {
            t.stopped(u64::MAX);
        }
        release_tx.send_replace(true);
        if let Err(e) = shards.await {
            tracing::error!(error = %e, "the sharding task failed");
        }
        for f in forwarders {
            f.abort();
        }
        shared_tx.send_replace(true);
        if let Some(i) = identifier {
            i.abort();
        }
        if let Some(n) = notifier
            && tokio::time::timeout(Duration::from_secs(5), n).await.is_err()
        {
            tracing::warn!("the notifier task did not stop in time; its leased deliveries go out again later");
        }
        metrics.set_leader(false);
    }

    /// Starts the leader's tasks: the scheduler, the watch loop (when enabled and the live
    /// source can watch), the notifier and self-heal, stopped by `stop`.
    fn start_tasks(&self, stop: watch::Receiver<bool>) -> LeaderTasks {
        let mut tasks = LeaderTasks::default();
        for unit in &self.units {
            let (sched, watcher, healer) = self.start_cluster(unit, &stop);
            tasks.sched.push(sched);
            tasks.watcher.extend(watcher);
            tasks.healer.extend(healer);
        }
        tasks.notifier = self.dispatcher.clone().map(|d| tokio::spawn(d.run(self.notify_tick, stop.clone())));
        tasks.identifier = self.identifier.clone().map(|i| tokio::spawn(i.run(stop.clone())));
        tasks
    }

    /// Starts the tasks of one cluster: its scheduler, its watch (when enabled and its live
    /// source can watch) and its self-heal and automatic pull requests, in a span that names
    /// the cluster.
    fn start_cluster(&self, unit: &Unit, stop: &watch::Receiver<bool>) -> ClusterTasks {
        use tracing::Instrument;
        let span = tracing::info_span!("cluster", cluster = %unit.scanner.cluster());
        let sched = {
            let scanner = unit.scanner.clone();
            let remedies = unit.remedies.clone();
            tokio::spawn(
                crate::schedule::run_schedule(self.interval, crate::schedule::clock_jitter, stop.clone(), move || {
                    let scanner = scanner.clone();
                    let remedies = remedies.clone();
                    async move {
                        // Actions of a process that is gone are closed as `interrupted` at the
                        // first pass and after each (crate::attempt).
                        if let Some(r) = remedies
                            && let Err(e) = r.close_interrupted(chrono::Utc::now()).await
                        {
                            tracing::warn!(error = %e, "the unfinished actions could not be looked at");
                        }
                        scanner.pass(new_scan_id()).await.is_some()
                    }
                })
                .instrument(span.clone()),
            )
        };
        let watcher = if !self.watch {
            None
        } else if unit.scanner.live.capabilities().watch {
            Some(tokio::spawn(
                crate::watch::run_watch(unit.scanner.clone(), self.interval, stop.clone()).instrument(span.clone()),
            ))
        } else {
            tracing::info!(cluster = %unit.scanner.cluster(), "the live source cannot watch; periodic scans only");
            None
        };
        // Self-heal, automatic pull requests and whitelist proposals: one task, each loop on its
        // own tick.
        let healer = unit.remedies.clone().and_then(|r| {
            let heal = r.heal().map(|h| h.tick);
            let auto = r.auto_accept().cloned();
            let propose = r.propose().cloned();
            (heal.is_some() || auto.is_some() || propose.is_some()).then(|| {
                let stop = stop.clone();
                tokio::spawn(
                    async move {
                        let heal = async {
                            if let Some(tick) = heal {
                                crate::remedies::run_heal(r.clone(), tick, stop.clone()).await;
                            }
                        };
                        let auto = async {
                            if let Some(policy) = auto {
                                crate::remedies::run_auto_accept(r.clone(), policy, stop.clone()).await;
                            }
                        };
                        let propose = async {
                            if let Some(policy) = propose {
                                let classifier = r.classifier().cloned().unwrap_or_default();
                                crate::remedies::run_proposals(r.clone(), policy, classifier, stop.clone()).await;
                            }
                        };
                        tokio::join!(heal, auto, propose);
                    }
                    .instrument(span),
                )
            })
        });
        (sched, watcher, healer)
    }

    /// Stops the leader's tasks at once (the lease may be lost): every task and every pass
    /// started by `POST /scan` is aborted; a report being written is one transaction, rolled
    /// back; deliveries leased by the notifier go out again after their lease.
    fn abort(&self, tasks: LeaderTasks) {
        for t in tasks.sched.into_iter().chain(tasks.watcher).chain(tasks.healer) {
            t.abort();
        }
        for t in [tasks.notifier, tasks.identifier].into_iter().flatten() {
            t.abort();
        }
        lock(&self.passes).abort_all();
        tracing::warn!("leader tasks stopped: scans, watch, self-heal and notifications wait for the next leader");
    }

    /// Stops the leader's tasks at shutdown (their stop was sent): a running pass gets
    /// [`SHUTDOWN_GRACE`] to finish and is aborted after it.
    async fn finish(&self, tasks: LeaderTasks) {
        let LeaderTasks { sched, watcher, notifier, healer, identifier } = tasks;
        if let Some(i) = identifier {
            i.abort();
        }
        let mut passes = std::mem::take(&mut *lock(&self.passes));
        let sched_abort: Vec<_> = sched.iter().map(tokio::task::JoinHandle::abort_handle).collect();
        // A revert or an accept in flight (self-heal's, or the API's) gets the same grace, then
        // is stopped and recorded as interrupted.
        let drained = futures::future::join_all(
            self.units.iter().filter_map(|u| u.remedies.as_ref()).map(|r| r.drain(SHUTDOWN_GRACE)),
        );
        let (finished, _) = tokio::join!(
            tokio::time::timeout(SHUTDOWN_GRACE, async {
                for s in sched {
                    if let Err(e) = s.await {
                        tracing::error!(error = %e, "the scheduler task failed");
                    }
                }
                while passes.join_next().await.is_some() {}
            }),
            drained
        );
        if finished.is_err() {
            tracing::warn!(
                grace = ?SHUTDOWN_GRACE, "the running scan did not finish in time and is aborted; its report is not written"
            );
            for a in sched_abort {
                a.abort();
            }
            passes.abort_all();
            while passes.join_next().await.is_some() {}
        }
        for w in watcher {
            w.abort();
        }
        for h in healer {
            // The revert in flight has ended or was recorded as interrupted (above); the next
            // process's heal round picks up the rest.
            h.abort();
        }
        if let Some(n) = notifier {
            // A round in flight ends at its next step; a message being sent is sent again by
            // the next process once its lease ends (at least once).
            if tokio::time::timeout(Duration::from_secs(5), n).await.is_err() {
                tracing::warn!("the notifier task did not stop in time; its leased deliveries go out again later");
            }
        }
    }
}

/// A pass of `scanner` for a caller who waits for it: while another pass of the cluster runs,
/// it is waited for (checked every 50 ms) and the pass run after it; `None` when the replica
/// stops leading the cluster or shuts down first.
#[cfg(feature = "api")]
async fn pass_after_any_running(
    scanner: &Scanner,
    scan_id: String,
    shutdown: &watch::Receiver<bool>,
) -> Option<Vec<Recorded>> {
    loop {
        if let Some(recorded) = scanner.pass(scan_id.clone()).await {
            return Some(recorded);
        }
        if !scanner.is_leading() || *shutdown.borrow() {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `POST /scan` of the API: starts a pass of the detector.
#[cfg(feature = "api")]
#[derive(Debug)]
struct Trigger {
    /// Every cluster's scanner.
    scanners: Vec<Arc<Scanner>>,
    shutdown: watch::Receiver<bool>,
    passes: Passes,
}

#[cfg(feature = "api")]
#[async_trait]
impl ScanTrigger for Trigger {
    async fn trigger(&self, wait: bool) -> drift_core::Result<TriggerOutcome> {
        if *self.shutdown.borrow() {
            return Err(drift_core::Error::unavailable("shutting down"));
        }
        if !self.scanners.iter().any(|s| s.is_leading()) {
            return Err(drift_core::Error::unavailable("this replica is a standby; the leader runs the scans"));
        }
        // One cluster's pass running is enough to answer "already running": a pass now would
        // leave that cluster out.
        if let Some(running) = self.scanners.iter().find_map(|s| s.running()) {
            return Ok(TriggerOutcome::AlreadyRunning { scan_id: Some(running) });
        }
        let scan_id = new_scan_id();
        let several = self.scanners.len() > 1;
        let id_of = |s: &Scanner| if several { format!("{scan_id}-{}", s.cluster()) } else { scan_id.clone() };
        // A replica scans the clusters it holds (all of them without sharding).
        let leading: Vec<Arc<Scanner>> = self.scanners.iter().filter(|s| s.is_leading()).cloned().collect();
        if wait {
            // A pass of a cluster that begins between the check above and this one's (a
            // scheduled pass, a resync) is waited out and this one run after it: the answer
            // holds a report of every cluster the replica scans.
            let passes = leading.iter().map(|s| pass_after_any_running(s, id_of(s), &self.shutdown));
            let mut reports = Vec::new();
            let mut ran = false;
            for recorded in futures::future::join_all(passes).await.into_iter().flatten() {
                ran = true;
                reports.extend(recorded.into_iter().map(|r| r.report));
            }
            if !ran {
                return Ok(TriggerOutcome::AlreadyRunning { scan_id: self.scanners.iter().find_map(|s| s.running()) });
            }
            return Ok(TriggerOutcome::Finished { scan_id, reports });
        }
        let mut passes = lock(&self.passes);
        // Finished passes are taken out as new ones come, so the set stays small.
        while passes.try_join_next().is_some() {}
        for scanner in leading {
            let id = id_of(&scanner);
            passes.spawn(async move {
                scanner.pass(id).await;
            });
        }
        Ok(TriggerOutcome::Started { scan_id })
    }
}

/// The API's reverts and accepts of a detector of several clusters: each goes to the
/// remediation of its drift's cluster (read from the store); a drift of a cluster this detector
/// does not read is refused, as one detector refuses another cluster's.
#[cfg(feature = "api")]
#[derive(Debug)]
struct ByCluster {
    read: Arc<dyn drift_core::DriftStore>,
    by_cluster: std::collections::BTreeMap<String, Arc<Remedies>>,
}

#[cfg(feature = "api")]
impl ByCluster {
    async fn of(&self, id: i64) -> Result<&Arc<Remedies>, drift_core::remedy::Fault> {
        use drift_core::remedy::{Fault, Refusal};
        let d = self.read.get(id).await.map_err(Fault::Failed)?;
        self.by_cluster.get(&d.cluster).ok_or_else(|| {
            Fault::refused(
                Refusal::OtherCluster,
                format!(
                    "drift {id} is of cluster {:?}; this detector writes to clusters {:?}",
                    d.cluster,
                    self.by_cluster.keys().collect::<Vec<_>>()
                ),
            )
        })
    }
}

#[cfg(feature = "api")]
#[async_trait]
impl drift_api::Remediate for ByCluster {
    async fn revert(
        &self,
        id: i64,
        actor: &str,
        dry_run: bool,
    ) -> Result<drift_core::remedy::RevertOutcome, drift_core::remedy::Fault> {
        self.of(id).await?.revert(id, actor, dry_run).await
    }
    async fn accept(
        &self,
        ids: &[i64],
        actor: &str,
    ) -> Result<drift_core::remedy::AcceptOutcome, drift_core::remedy::Fault> {
        let Some(first) = ids.first() else {
            return Err(drift_core::remedy::Fault::Failed(drift_core::Error::invalid_input("no drift to accept")));
        };
        self.of(*first).await?.accept(ids, actor).await
    }
}
