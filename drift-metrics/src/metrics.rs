//! Prometheus metrics of the detector.
//!
//! Open-drift gauges (waived drifts are not open: they have their own gauge) and the pending
//! and parked deliveries are read from the store at scrape time (the store is the truth: they
//! survive restarts and follow resolutions). Everything about scans, sources and watch mode is
//! recorded by the runtime (`drift-runtime`) through [`Metrics::record_scan`],
//! [`Metrics::record_source_error`] and [`Metrics::observe_watch_lag`]; the notifier task
//! records its attempts through [`Metrics::record_notification`] and
//! [`Metrics::observe_notification_latency`].
//!
//! This module is the `prometheus` feature; without it, [`crate::Metrics`] keeps only what the
//! runtime reads back.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use chrono::{DateTime, Utc};
use drift_model::act::{ActStore, DeliveryStatus};
use drift_model::sink::{DriftFilter, DriftStatus, DriftStore};
use drift_model::{ErrorKind, ScanOutcome, ScanReport};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

type Labels = Vec<(&'static str, String)>;
type FloatGauge = Gauge<f64, AtomicU64>;

/// The content type of `GET /metrics` (OpenMetrics text, which Prometheus reads).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Upper bounds of the scan duration histogram, in seconds.
pub const SCAN_DURATION_BUCKETS: [f64; 12] = [0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0];

/// Upper bounds of the watch lag histogram, in seconds (the target is under 1 s).
pub const WATCH_LAG_BUCKETS: [f64; 12] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

/// Upper bounds of the notification latency histogram, in seconds (event to the receiver's
/// answer: a `for:` delay and retries count).
pub const NOTIFICATION_LATENCY_BUCKETS: [f64; 14] =
    [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 14400.0];

/// The outcomes of a delivery attempt that `drift_notifications_total` counts.
pub const NOTIFICATION_OUTCOMES: [&str; 4] = ["sent", "retry", "parked", "skipped"];

/// Every metric family the API exports, by its exposed name (histograms add `_bucket`, `_sum`
/// and `_count`). `docs/api.md`, the dashboard and the alert rules use only these.
pub const METRIC_NAMES: [&str; 18] = [
    "drift_open_drifts_by_severity",
    "drift_open_drifts_by_type",
    "drift_open_drifts_by_namespace",
    "drift_open_drifts_by_repository",
    "drift_store_up",
    "drift_scans_total",
    "drift_scan_duration_seconds",
    "drift_last_scan_timestamp_seconds",
    "drift_last_successful_scan_timestamp_seconds",
    "drift_source_errors_total",
    "drift_watch_lag_seconds",
    "drift_watch_out_of_sync",
    "drift_waived_drifts",
    "drift_deliveries",
    "drift_notifications_total",
    "drift_notification_latency_seconds",
    "drift_leader",
    "drift_policy_findings",
];

/// The metrics registry and its handles. Cheap to clone; clones share the same values.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry,
    open_by_severity: Family<Labels, Gauge>,
    open_by_type: Family<Labels, Gauge>,
    open_by_namespace: Family<Labels, Gauge>,
    open_by_repository: Family<Labels, Gauge>,
    store_up: Gauge,
    /// 1 while this replica leads (or leader election is off), 0 while it stands by.
    leader: Gauge,
    scans: Family<Labels, Counter>,
    scan_duration: Histogram,
    last_scan: Family<Labels, FloatGauge>,
    last_success: Family<Labels, FloatGauge>,
    source_errors: Family<Labels, Counter>,
    watch_lag: Histogram,
    /// (kind, namespace) pairs whose changes the watch does not see now.
    watch_out_of_sync: Gauge,
    waived: Family<Labels, Gauge>,
    deliveries: Family<Labels, Gauge>,
    notifications: Family<Labels, Counter>,
    notification_latency: Family<Labels, Histogram, fn() -> Histogram>,
    policy_findings: Family<Labels, Gauge>,
    /// One scrape at a time: a scrape clears and refills the open-drift gauges.
    scrape: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh registry with every metric of [`METRIC_NAMES`].
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let open_by_severity = Family::<Labels, Gauge>::default();
        let open_by_type = Family::<Labels, Gauge>::default();
        let open_by_namespace = Family::<Labels, Gauge>::default();
        let open_by_repository = Family::<Labels, Gauge>::default();
        let store_up = Gauge::default();
        let leader = Gauge::default();
        // A replica without leader election scans: it leads until told otherwise.
        leader.set(1);
        let scans = Family::<Labels, Counter>::default();
        let scan_duration = Histogram::new(SCAN_DURATION_BUCKETS);
        let last_scan = Family::<Labels, FloatGauge>::default();
        let last_success = Family::<Labels, FloatGauge>::default();
        let source_errors = Family::<Labels, Counter>::default();
        let watch_lag = Histogram::new(WATCH_LAG_BUCKETS);
        let watch_out_of_sync = Gauge::default();
        let waived = Family::<Labels, Gauge>::default();
        let deliveries = Family::<Labels, Gauge>::default();
        let notifications = Family::<Labels, Counter>::default();
        let notification_latency: Family<Labels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(|| Histogram::new(NOTIFICATION_LATENCY_BUCKETS));
        registry.register(
            "drift_open_drifts_by_severity",
            "Open drifts by severity, read from the store at scrape time",
            open_by_severity.clone(),
        );
        registry.register(
            "drift_open_drifts_by_type",
            "Open drifts by drift type, read from the store at scrape time",
            open_by_type.clone(),
        );
        registry.register(
            "drift_open_drifts_by_namespace",
            "Open drifts by namespace (empty for cluster-scoped objects), read from the store at scrape time",
            open_by_namespace.clone(),
        );
        registry.register(
            "drift_open_drifts_by_repository",
            "Open drifts by repository, read from the store at scrape time",
            open_by_repository.clone(),
        );
        registry.register("drift_store_up", "1 when the store answered the last scrape, else 0", store_up.clone());
        registry.register(
            "drift_leader",
            "1 when this replica runs the scans (it holds the leader lease, or leader election is off), 0 while it stands by",
            leader.clone(),
        );
        registry.register("drift_scans", "Scans by repository and outcome (success, partial, failed)", scans.clone());
        registry.register_with_unit("drift_scan_duration", "Duration of scans", Unit::Seconds, scan_duration.clone());
        registry.register_with_unit(
            "drift_last_scan_timestamp",
            "Unix time at which the last scan of a repository finished, whatever its outcome",
            Unit::Seconds,
            last_scan.clone(),
        );
        registry.register_with_unit(
            "drift_last_successful_scan_timestamp",
            "Unix time at which the last scan of a repository that did not fail (success or partial) finished",
            Unit::Seconds,
            last_success.clone(),
        );
        registry.register(
            "drift_source_errors",
            "Errors of the desired and live sources by error kind",
            source_errors.clone(),
        );
        registry.register_with_unit(
            "drift_watch_lag",
            "Watch mode: time from a live change event reaching the detector to its drift being committed to the store (queueing included)",
            Unit::Seconds,
            watch_lag.clone(),
        );
        registry.register(
            "drift_watch_out_of_sync",
            "Watch mode: (kind, namespace) pairs whose changes the watch does not see now (their watch lost sync and has not relisted, or the whole watch is restarting); 0 when in sync or not watching",
            watch_out_of_sync.clone(),
        );
        registry.register(
            "drift_waived_drifts",
            "Drifts under a waiver (accepted, not expired): still seen, not counted as open; read from the store at scrape time",
            waived.clone(),
        );
        registry.register(
            "drift_deliveries",
            "Deliveries to notifiers waiting to be sent (pending) or given up for now (parked: an outage longer than retry_for, probed, or a refusal), read from the store at scrape time",
            deliveries.clone(),
        );
        registry.register(
            "drift_notifications",
            "Delivery attempts by notifier and outcome (sent, retry, parked, skipped)",
            notifications.clone(),
        );
        registry.register_with_unit(
            "drift_notification_latency",
            "Time from an event to the receiver's success answer, by notifier",
            Unit::Seconds,
            notification_latency.clone(),
        );
        let policy_findings = Family::<Labels, Gauge>::default();
        registry.register(
            "drift_policy_findings",
            "Open policy findings (docs/policies.md) by rule and severity, read from the store at scrape time; not drifts",
            policy_findings.clone(),
        );
        Metrics {
            inner: Arc::new(Inner {
                registry,
                open_by_severity,
                open_by_type,
                open_by_namespace,
                open_by_repository,
                store_up,
                leader,
                scans,
                scan_duration,
                last_scan,
                last_success,
                source_errors,
                watch_lag,
                watch_out_of_sync,
                waived,
                deliveries,
                notifications,
                notification_latency,
                policy_findings,
                scrape: tokio::sync::Mutex::new(()),
            }),
        }
    }

    /// Says whether this replica leads (`drift_leader`, and `leader` in `GET /ready`).
    pub fn set_leader(&self, leader: bool) {
        self.inner.leader.set(i64::from(leader));
    }

    /// Says how many (kind, namespace) pairs the watch does not see now
    /// (`drift_watch_out_of_sync`; `GET /ready` answers 503 while it is above 0).
    pub fn set_watch_out_of_sync(&self, pairs: usize) {
        self.inner.watch_out_of_sync.set(i64::try_from(pairs).unwrap_or(i64::MAX));
    }

    /// How many (kind, namespace) pairs the watch does not see now.
    pub fn watch_out_of_sync(&self) -> u64 {
        u64::try_from(self.inner.watch_out_of_sync.get()).unwrap_or(0)
    }

    /// Whether this replica leads: true unless leader election said it stands by.
    pub fn is_leader(&self) -> bool {
        self.inner.leader.get() == 1
    }

    /// Records a finished scan: `drift_scans_total{repository,outcome}`, the duration
    /// histogram, the last-scan timestamps, and one `drift_source_errors_total{kind}` per fatal
    /// warning of the report (do not also report those through
    /// [`Metrics::record_source_error`]).
    pub fn record_scan(&self, report: &ScanReport, duration: Duration) {
        let i = &self.inner;
        i.scans
            .get_or_create(&vec![
                ("repository", report.repository.clone()),
                ("outcome", report.outcome.as_str().to_owned()),
            ])
            .inc();
        i.scan_duration.observe(duration.as_secs_f64());
        let at = unix_seconds(report.finished_at);
        let repo = vec![("repository", report.repository.clone())];
        i.last_scan.get_or_create(&repo).set(at);
        if report.outcome != ScanOutcome::Failed {
            i.last_success.get_or_create(&repo).set(at);
        }
        for w in report.warnings.iter().filter(|w| w.fatal) {
            self.record_source_error(w.kind);
        }
    }

    /// Counts a source error that no scan report carries (a watch stream that broke, a Git
    /// fetch between scans).
    pub fn record_source_error(&self, kind: ErrorKind) {
        self.inner.source_errors.get_or_create(&vec![("kind", kind.as_str().to_owned())]).inc();
    }

    /// Observes one watch lag: the time from a live change event reaching the detector to its
    /// drift (or its resolution) being committed to the store.
    pub fn observe_watch_lag(&self, lag: Duration) {
        self.inner.watch_lag.observe(lag.as_secs_f64());
    }

    /// Counts `n` delivery attempts of `notifier` with an outcome of
    /// [`NOTIFICATION_OUTCOMES`] (`sent`, `retry`, `parked`, `skipped`):
    /// `drift_notifications_total{notifier,outcome}`.
    pub fn record_notification(&self, notifier: &str, outcome: &str, n: u64) {
        if !NOTIFICATION_OUTCOMES.contains(&outcome) {
            tracing::warn!(notifier, outcome, "counting a notification outcome that is not documented");
        }
        self.inner
            .notifications
            .get_or_create(&vec![("notifier", notifier.to_owned()), ("outcome", outcome.to_owned())])
            .inc_by(n);
    }

    /// Observes the time from an event (its `at`) to the receiver's success answer:
    /// `drift_notification_latency_seconds{notifier}`. A negative time (clocks apart) counts
    /// as 0.
    pub fn observe_notification_latency(&self, notifier: &str, seconds: f64) {
        self.inner
            .notification_latency
            .get_or_create(&vec![("notifier", notifier.to_owned())])
            .observe(seconds.max(0.0));
    }

    /// [`Metrics::render_with`] a store that keeps no deliveries.
    pub async fn render(&self, store: &dyn DriftStore, now: DateTime<Utc>, timeout: Duration) -> String {
        self.render_with(store, None, now, timeout).await
    }

    /// Refreshes the gauges read from the store (open drifts, waived drifts and, with `act`,
    /// pending and parked deliveries) and encodes every metric as OpenMetrics text. A store
    /// that fails or does not answer within `timeout` sets `drift_store_up` to 0 and drops the
    /// series read from it (rather than exporting stale numbers); the other metrics are still
    /// exported.
    pub async fn render_with(
        &self,
        store: &dyn DriftStore,
        act: Option<&dyn ActStore>,
        now: DateTime<Utc>,
        timeout: Duration,
    ) -> String {
        let i = &self.inner;
        let _one_at_a_time = i.scrape.lock().await;
        let stats = bounded(timeout, store.stats(&DriftFilter::default(), now)).await;
        for family in [
            &i.open_by_severity,
            &i.open_by_type,
            &i.open_by_namespace,
            &i.open_by_repository,
            &i.waived,
            &i.deliveries,
            &i.policy_findings,
        ] {
            family.clear();
        }
        match bounded(timeout, store.open_findings()).await {
            Ok(counts) => {
                for ((rule, severity), n) in counts {
                    i.policy_findings
                        .get_or_create(&vec![
                            ("rule", rule.as_str().to_owned()),
                            ("severity", severity.as_str().to_owned()),
                        ])
                        .set(n);
                }
            }
            // A store that keeps no findings exports no series.
            Err(e) if e.kind() == ErrorKind::Unsupported => {}
            Err(e) => tracing::warn!(error = %e, "the store did not answer the findings of the metrics scrape"),
        }
        if let Some(act) = act {
            match bounded(timeout, act.delivery_counts()).await {
                Ok(counts) => {
                    // Pending and parked of every notifier the store knows, zero included, so
                    // that an alert on parked deliveries has a series to compare with.
                    for (notifier, _) in counts.keys() {
                        for status in [DeliveryStatus::Pending, DeliveryStatus::Parked] {
                            let n = counts.get(&(notifier.clone(), status)).copied().unwrap_or(0);
                            i.deliveries
                                .get_or_create(&vec![
                                    ("notifier", notifier.clone()),
                                    ("status", status.as_str().to_owned()),
                                ])
                                .set(n);
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "the store did not answer the deliveries of the metrics scrape"),
            }
        }
        match stats {
            Ok(stats) => {
                i.store_up.set(1);
                // Open drifts only: by_severity and the others count open drifts, not waived ones.
                i.waived
                    .get_or_create(&vec![])
                    .set(stats.by_status.get(DriftStatus::Waived.as_str()).copied().unwrap_or(0));
                let fill = |family: &Family<Labels, Gauge>,
                            label: &'static str,
                            counts: &std::collections::BTreeMap<String, i64>| {
                    for (value, count) in counts {
                        family.get_or_create(&vec![(label, value.clone())]).set(*count);
                    }
                };
                fill(&i.open_by_severity, "severity", &stats.by_severity);
                fill(&i.open_by_type, "drift_type", &stats.by_type);
                fill(&i.open_by_namespace, "namespace", &stats.by_namespace);
                fill(&i.open_by_repository, "repository", &stats.by_repository);
                // Every severity is exported, zero included, so that alerts on CRITICAL have a
                // series to compare with.
                for s in drift_model::Severity::ALL {
                    drop(i.open_by_severity.get_or_create(&vec![("severity", s.as_str().to_owned())]));
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "the store did not answer the metrics scrape");
                i.store_up.set(0);
            }
        }
        let mut out = String::new();
        // Writing into a String cannot fail; an error here would be a bug in the encoder.
        if let Err(e) = encode(&mut out, &i.registry) {
            tracing::error!(error = %e, "encoding the metrics failed");
        }
        out
    }
}

/// Runs a store call, failing with [`ErrorKind::Unavailable`] when it takes longer than `timeout`
/// (the scrape and every request of the API).
pub async fn bounded<T>(
    timeout: Duration,
    call: impl std::future::Future<Output = drift_model::Result<T>>,
) -> drift_model::Result<T> {
    tokio::time::timeout(timeout, call).await.unwrap_or_else(|_| {
        Err(drift_model::Error::unavailable(format!("the store did not answer within {}s", timeout.as_secs_f64())))
    })
}

fn unix_seconds(t: DateTime<Utc>) -> f64 {
    t.timestamp_millis() as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use drift_model::SourceWarning;
    use drift_model::memory::MemoryStore;

    fn report(outcome: ScanOutcome) -> ScanReport {
        let mut r = ScanReport {
            scan_id: "s1".into(),
            cluster: "c".into(),
            repository: "platform".into(),
            revision: None,
            started_at: DateTime::from_timestamp(1_800_000_000, 0).unwrap(),
            finished_at: DateTime::from_timestamp(1_800_000_060, 0).unwrap(),
            outcome,
            drifts: vec![],
            coverage: Default::default(),
            warnings: vec![],
            desired: vec![],
            desired_digests: Vec::new(),
            desired_complete: true,
            uncomparable: Vec::new(),
            summary: Default::default(),
            findings: Vec::new(),
            policy_sides: Vec::new(),
            live_versions: Vec::new(),
        };
        r.warnings.push(SourceWarning::error(ErrorKind::Unavailable, "API server down"));
        r.warnings.push(SourceWarning::note("skipped a List"));
        r
    }

    #[tokio::test]
    async fn records_scans_and_errors() {
        let m = Metrics::new();
        m.record_scan(&report(ScanOutcome::Success), Duration::from_millis(1500));
        m.record_scan(&report(ScanOutcome::Failed), Duration::from_secs(3));
        m.record_source_error(ErrorKind::PermissionDenied);
        m.observe_watch_lag(Duration::from_millis(250));
        let text = m.render(&MemoryStore::new(), Utc::now(), Duration::from_secs(5)).await;
        for line in [
            r#"drift_scans_total{repository="platform",outcome="success"} 1"#,
            r#"drift_scans_total{repository="platform",outcome="failed"} 1"#,
            "drift_scan_duration_seconds_count 2",
            "drift_scan_duration_seconds_sum 4.5",
            r#"drift_scan_duration_seconds_bucket{le="2.5"} 1"#,
            r#"drift_scan_duration_seconds_bucket{le="5.0"} 2"#,
            r#"drift_last_scan_timestamp_seconds{repository="platform"} 1800000060.0"#,
            r#"drift_last_successful_scan_timestamp_seconds{repository="platform"} 1800000060.0"#,
            // two fatal warnings (one per report), the note is not counted
            r#"drift_source_errors_total{kind="unavailable"} 2"#,
            r#"drift_source_errors_total{kind="permission_denied"} 1"#,
            "drift_watch_lag_seconds_sum 0.25",
            "drift_watch_lag_seconds_count 1",
            r#"drift_watch_lag_seconds_bucket{le="0.1"} 0"#,
            r#"drift_watch_lag_seconds_bucket{le="0.25"} 1"#,
            "drift_store_up 1",
            r#"drift_open_drifts_by_severity{severity="CRITICAL"} 0"#,
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
        }
    }

    #[tokio::test]
    async fn a_failed_scan_does_not_move_the_last_success() {
        let m = Metrics::new();
        let mut ok = report(ScanOutcome::Partial);
        ok.finished_at = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        m.record_scan(&ok, Duration::from_secs(1));
        m.record_scan(&report(ScanOutcome::Failed), Duration::from_secs(1));
        let text = m.render(&MemoryStore::new(), Utc::now(), Duration::from_secs(5)).await;
        assert!(text.contains(r#"drift_last_successful_scan_timestamp_seconds{repository="platform"} 1800000000.0"#));
        assert!(text.contains(r#"drift_last_scan_timestamp_seconds{repository="platform"} 1800000060.0"#));
    }
}
