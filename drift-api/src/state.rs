//! What the handlers share: the store (and its acting side), the scan trigger, the tokens, the
//! metrics and a clock.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use drift_model::ScanReport;
use drift_model::act::ActStore;
use drift_model::sink::DriftStore;

use crate::auth::ApiToken;
use crate::metrics::Metrics;

/// What asking for a scan did.
#[derive(Debug, Clone, PartialEq)]
pub enum TriggerOutcome {
    /// A scan pass started in the background (`POST /scan` answers 202).
    Started {
        /// Id of the pass (the scan id of its reports).
        scan_id: String,
    },
    /// A scan is already running; nothing was started (`POST /scan` answers 409).
    AlreadyRunning {
        /// Id of the running scan, when known.
        scan_id: Option<String>,
    },
    /// The pass ran to its end (`POST /scan?wait=true` answers 200 with the reports).
    Finished {
        /// Id of the pass.
        scan_id: String,
        /// One report per repository, as recorded in the store.
        reports: Vec<ScanReport>,
    },
}

/// Starts scans on behalf of `POST /scan`. The binary implements it over its scheduler.
///
/// Contract:
/// - never runs two scans at once (share a [`crate::ScanGate`] with the scheduler): when one is
///   running, answer
///   [`TriggerOutcome::AlreadyRunning`] at once (do not queue, do not wait);
/// - with `wait == false`, return [`TriggerOutcome::Started`] as soon as the scan is started;
/// - with `wait == true`, return [`TriggerOutcome::Finished`] once the reports are recorded;
/// - an error is for when no scan could be started at all (shutting down:
///   [`drift_model::ErrorKind::Unavailable`]); a scan that fails is a report with outcome
///   `failed`, not an error.
#[async_trait]
pub trait ScanTrigger: Send + Sync + std::fmt::Debug {
    /// Starts a scan pass.
    async fn trigger(&self, wait: bool) -> drift_model::Result<TriggerOutcome>;
}

/// The time as the API sees it (`/ready` ages, the `/stats` trend). Tests use [`ManualClock`].
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Now.
    fn now(&self) -> DateTime<Utc>;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that only moves when told to.
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<DateTime<Utc>>,
}

impl ManualClock {
    /// A clock standing at `now`.
    pub fn new(now: DateTime<Utc>) -> Self {
        ManualClock { now: Mutex::new(now) }
    }
    /// Moves the clock to `now`.
    pub fn set(&self, now: DateTime<Utc>) {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner) = now;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The default readiness limit: three times the default scan interval of 5 minutes.
pub const DEFAULT_MAX_SCAN_AGE: Duration = Duration::from_secs(15 * 60);

/// How long a request waits for the store before answering 503.
pub const DEFAULT_STORE_TIMEOUT: Duration = Duration::from_secs(10);

/// Everything the handlers need. Cheap to clone.
///
/// `Debug` shows neither the tokens (only their names) nor the store (a store's `Debug` may
/// hold a connection string), so the state can be logged.
#[derive(Clone)]
pub struct ApiState {
    pub(crate) store: Arc<dyn DriftStore>,
    pub(crate) act: Option<Arc<dyn ActStore>>,
    pub(crate) remedies: Option<Arc<dyn crate::remediation::Remediate>>,
    pub(crate) trigger: Arc<dyn ScanTrigger>,
    pub(crate) tokens: Arc<[ApiToken]>,
    pub(crate) read_token: Option<Arc<ApiToken>>,
    pub(crate) metrics: Metrics,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) max_scan_age: Duration,
    pub(crate) store_timeout: Duration,
    pub(crate) hosts: Arc<crate::server::AllowedHosts>,
    pub(crate) audit: Option<Arc<dyn drift_model::AuditIntake>>,
    pub(crate) alerts: crate::alerts::AlertSettings,
    pub(crate) merge_check: Option<Arc<dyn crate::check::MergeCheck>>,
    pub(crate) predictor: Option<Arc<dyn drift_model::prediction::Predictor>>,
    pub(crate) cluster_gaps: Option<Arc<dyn ClusterGaps>>,
}

/// The clusters of a detector and what each one's watch does not see now: the (kind,
/// namespace) pairs it lost, by cluster (the runtime's watch gaps). With several clusters,
/// `GET /ready` judges them one by one.
pub trait ClusterGaps: Send + Sync + std::fmt::Debug {
    /// The names of the clusters this detector reads.
    fn clusters(&self) -> Vec<String>;
    /// The clusters whose watch misses pairs now, with how many.
    fn out_of_sync(&self) -> std::collections::BTreeMap<String, usize>;
}

impl std::fmt::Debug for ApiState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.tokens.iter().map(ApiToken::name).collect();
        f.debug_struct("ApiState")
            .field("tokens", &names)
            .field("read_token", &self.read_token.as_ref().map(|_| "<redacted>"))
            .field("decisions", &self.act.is_some())
            .field("remedies", &self.remedies.is_some())
            .field("audit", &self.audit.is_some())
            .field("merge_check", &self.merge_check.is_some())
            .field("trigger", &self.trigger)
            .field("clock", &self.clock)
            .field("max_scan_age", &self.max_scan_age)
            .field("store_timeout", &self.store_timeout)
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

impl ApiState {
    /// A state over a store and a scan trigger, with no token (write endpoints answer 403 until
    /// one is set; reads are open), no acting side (decisions, audit and notifications answer
    /// 501), fresh metrics, the system clock, [`DEFAULT_MAX_SCAN_AGE`] and
    /// [`DEFAULT_STORE_TIMEOUT`].
    pub fn new(store: Arc<dyn DriftStore>, trigger: Arc<dyn ScanTrigger>) -> Self {
        ApiState {
            store,
            act: None,
            remedies: None,
            trigger,
            tokens: Arc::from(Vec::new()),
            read_token: None,
            metrics: Metrics::new(),
            clock: Arc::new(SystemClock),
            max_scan_age: DEFAULT_MAX_SCAN_AGE,
            store_timeout: DEFAULT_STORE_TIMEOUT,
            hosts: Arc::default(),
            audit: None,
            alerts: crate::alerts::AlertSettings::default(),
            merge_check: None,
            predictor: None,
            cluster_gaps: None,
        }
    }
    /// What predicts the team's decision about a drift, shown by `GET /drifts/{id}` and told
    /// of each decision recorded (the runtime gives `drift_engine::classify::Classifier`);
    /// without it the prediction is `null`.
    pub fn with_predictor(mut self, predictor: Arc<dyn drift_model::prediction::Predictor>) -> Self {
        self.predictor = Some(predictor);
        self
    }
    /// What each cluster's watch does not see (the runtime gives its watch gaps): with several
    /// clusters, `GET /ready` stays ready while one cluster is degraded (its last scan failed, or
    /// its watch lost sync) and lists it in `degraded`; without it only scans are judged per
    /// cluster, and a watch gap anywhere makes the service not ready.
    pub fn with_cluster_gaps(mut self, gaps: Arc<dyn ClusterGaps>) -> Self {
        self.cluster_gaps = Some(gaps);
        self
    }
    /// What `POST /check` asks what merging a branch would do; without it the endpoint answers
    /// 501.
    pub fn with_merge_check(mut self, check: Arc<dyn crate::check::MergeCheck>) -> Self {
        self.merge_check = Some(check);
        self
    }
    /// How `POST /alertmanager/webhook` answers: the window before an alert, and whether the
    /// drifts are sent to the notifiers (default 1h, yes).
    pub fn with_alerts(mut self, alerts: crate::alerts::AlertSettings) -> Self {
        self.alerts = alerts;
        self
    }
    /// Where `POST /audit/webhook` hands the audit events it receives (the audit log join);
    /// without it the endpoint answers 501.
    pub fn with_audit(mut self, audit: Arc<dyn drift_model::AuditIntake>) -> Self {
        self.audit = Some(audit);
        self
    }
    /// The one write token (named [`crate::auth::DEFAULT_TOKEN_NAME`] when made by
    /// [`ApiToken::new`]); `None` disables the write endpoints (403). Replaces the tokens set
    /// before.
    pub fn with_token(self, token: Option<ApiToken>) -> Self {
        self.with_tokens(token.into_iter().collect())
    }
    /// The write tokens (`POST /scan`, decisions, requeues); the name of the token a request
    /// presents is the actor of what it does. None disables the write endpoints (403). Check
    /// them first with [`crate::auth::check_tokens`]: with two tokens of one value, the first
    /// one names the actor.
    pub fn with_tokens(mut self, tokens: Vec<ApiToken>) -> Self {
        self.tokens = Arc::from(tokens);
        self
    }
    /// The read token: when set, every `GET` except `/health`, `/ready` and `/metrics` needs it
    /// or a write token (401 otherwise); when `None`, reads are open.
    pub fn with_read_token(mut self, token: Option<ApiToken>) -> Self {
        self.read_token = token.map(Arc::new);
        self
    }
    /// The acting side of the store: decisions, the audit trail, deliveries (both SQL stores
    /// are one). Without it those endpoints answer 501 and a drift shows no decisions.
    pub fn with_act(mut self, act: Arc<dyn ActStore>) -> Self {
        self.act = Some(act);
        self
    }
    /// Remediation (`POST /drifts/{id}/revert` and `/accept`); without it they answer 501.
    pub fn with_remedies(mut self, remedies: Arc<dyn crate::remediation::Remediate>) -> Self {
        self.remedies = Some(remedies);
        self
    }
    /// The `Host` names the API answers to; any other is answered 421 (default: the names
    /// [`crate::server::AllowedHosts`] always allows).
    pub fn with_allowed_hosts(mut self, hosts: crate::server::AllowedHosts) -> Self {
        self.hosts = Arc::new(hosts);
        self
    }
    /// The metrics to export (keep a clone to record scans).
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = metrics;
        self
    }
    /// The clock.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }
    /// How old the newest scan may be before `/ready` answers 503 (set it to about three scan
    /// intervals).
    pub fn with_max_scan_age(mut self, age: Duration) -> Self {
        self.max_scan_age = age;
        self
    }
    /// How long a request waits for the store before answering 503 (default
    /// [`DEFAULT_STORE_TIMEOUT`]).
    pub fn with_store_timeout(mut self, timeout: Duration) -> Self {
        self.store_timeout = timeout;
        self
    }
    /// The metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }
}
