//! The configuration file of `drift scan` and `drift serve` (docs/configuration.md): one YAML
//! file, unknown keys are errors with their line, secrets only from the environment. The
//! adapters' settings are the adapters' own configuration types (`store:` is a
//! [`SqliteConfig`] or a [`PostgresConfig`], `live:` a [`K8sConfig`]), so every key they document
//! can be set here and each default is written once, in the adapter.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use drift_core::ignore::IgnoreRule;
use drift_core::managed::ManagerPolicy;
use drift_core::merge_keys::MergeKeyRule;
use drift_core::{DriftType, EngineConfig, Severity};
use drift_git::{HelmConfig, RenderConfig, RenderRequest, RendererKind, SourceConfig};
use drift_kube::K8sConfig;
use drift_postgres::PostgresConfig;
use drift_sqlite::SqliteConfig;
use serde::Deserialize;
use std::collections::BTreeMap;

/// What validating a configuration builds, used as it is by the commands: the configuration is
/// validated once ([`Config::parse`]), into these values, and nothing is built from it twice.
#[derive(Debug, Clone, Default)]
pub struct Built {
    /// The engine of `ignore`, `severity` and `engine`.
    pub engine: drift_core::Engine,
    /// The policy of `policies`, when `policies.enabled`.
    pub policy: Option<std::sync::Arc<drift_core::policy::Policy>>,
    /// The kinds of `engine.cluster_scoped`.
    pub cluster_scoped: Vec<drift_core::GroupKind>,
}

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// What validation built (not a key of the file).
    #[serde(skip)]
    pub built: Built,
    /// Cluster name recorded with every drift (the single-cluster form; with `clusters`, the
    /// first cluster's name once parsed).
    #[serde(default)]
    pub cluster: String,
    /// Several clusters read by one detector, each with its credentials (instead of `cluster`;
    /// `live` then names the home cluster and the reading settings of all of them).
    #[serde(default)]
    pub clusters: Vec<ClusterEntry>,
    /// Period of full scans (default 5m).
    #[serde(default = "default_interval", with = "humantime_serde")]
    pub interval: Duration,
    /// React to live changes within seconds (default true).
    #[serde(default = "yes")]
    pub watch: bool,
    /// The store: a URL (`sqlite://FILE`, the default `sqlite://drift.db`, or `postgres://...`)
    /// or the store's own settings under a `type` (`sqlite` or `postgres`). `database` is the
    /// same key under its older name.
    #[serde(default, alias = "database")]
    pub store: Option<StoreSetting>,
    /// Name of an environment variable holding the store URL (wins over a URL in `store`).
    #[serde(default)]
    pub database_env: Option<String>,
    /// Days to keep resolved drifts and old scans, for a store given by URL (default: forever).
    #[serde(default)]
    pub retention_days: Option<u32>,
    /// The GitOps repositories.
    pub repositories: Vec<RepositoryConfig>,
    /// Where live state comes from: the Kubernetes source's settings (kubeconfig, context,
    /// concurrency, page size, retries, ...) or `snapshot` files.
    #[serde(default)]
    pub live: K8sConfig,
    /// The REST API.
    #[serde(default)]
    pub api: ApiConfig,
    /// Ignore rules.
    #[serde(default)]
    pub ignore: Vec<IgnoreRule>,
    /// Severity overrides per drift type.
    #[serde(default)]
    pub severity: BTreeMap<DriftType, Severity>,
    /// Advanced engine settings.
    #[serde(default)]
    pub engine: EngineExtras,
    /// Namespace of desired objects that name none (default `default`).
    #[serde(default = "default_namespace")]
    pub default_namespace: String,
    /// Objects in the cluster that Git does not declare (off unless enabled).
    #[serde(default)]
    pub orphans: OrphansConfig,
    /// Policy checks of the desired and live objects (off unless enabled; docs/policies.md).
    #[serde(default)]
    pub policies: drift_core::policy::PolicyConfig,
    /// Notifiers: webhooks, Slack-compatible chats, email (docs/notifications.md).
    #[serde(default)]
    pub notify: Vec<drift_notify::NotifierConfig>,
    /// Settings of the notifier task.
    #[serde(default)]
    pub notifications: NotificationSettings,
    /// Reverts and accepted changes (docs/remediation.md).
    #[serde(default)]
    pub remediation: RemediationSettings,
    /// Self-heal: reverts the detector makes by itself (off unless given; docs/remediation.md).
    #[serde(default)]
    pub heal: Option<drift_runtime::HealPolicy>,
    /// Accepting live changes into Git: `accept.auto` turns automatic pull requests on (off
    /// unless given; docs/remediation.md, "Automatic pull requests").
    #[serde(default)]
    pub accept: AcceptSettings,
    /// The classifier learned from decisions: its prediction is shown always, and used (for
    /// routing, automatic pull requests and whitelist proposals) only as these settings say
    /// (docs/decisions.md, "The classifier, used").
    #[serde(default)]
    pub classify: Option<drift_core::drift_engine::classify::ClassifySettings>,
    /// The Kubernetes audit log, joined with the drifts to name the person behind each change
    /// (`drift serve` only; docs/kubernetes.md, "The person behind a change").
    #[serde(default)]
    pub audit: Option<drift_runtime::identity::AuditSettings>,
    /// The Alertmanager receiver (`POST /alertmanager/webhook`; docs/notifications.md, "Drift
    /// beside the alert").
    #[serde(default)]
    pub alerts: AlertsConfig,
    /// Leader election of replicas of `drift serve` (off by default; docs/deployment.md, "High
    /// availability").
    #[serde(default)]
    pub leader_election: LeaderElectionConfig,
    /// Where the key of the Secret-value hash comes from (default: the store makes and keeps
    /// one; docs/security.md, "Secret values").
    #[serde(default)]
    pub secret_hash: crate::hash_key::SecretHashConfig,
}

/// `alerts:`: how the Alertmanager receiver answers.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertsConfig {
    /// How far before an alert's start drifts and hand changes are looked for (default 1h).
    #[serde(default = "default_alert_window", with = "humantime_serde")]
    pub window: Duration,
    /// Whether the drifts of an alert are also sent to the notifiers (default true).
    #[serde(default = "default_alert_notify")]
    pub notify: bool,
}

fn default_alert_window() -> Duration {
    Duration::from_secs(3600)
}

fn default_alert_notify() -> bool {
    true
}

impl Default for AlertsConfig {
    fn default() -> Self {
        AlertsConfig { window: default_alert_window(), notify: true }
    }
}

impl AlertsConfig {
    /// The API's settings.
    pub fn settings(&self) -> drift_api::alerts::AlertSettings {
        drift_api::alerts::AlertSettings { window: self.window, notify: self.notify }
    }
}

/// `orphans:`: report the live objects of the kinds and namespaces the desired state manages that
/// no desired object declares, as `unmanaged_resource` (docs/drift-types.md).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrphansConfig {
    /// Whether to report them (default false).
    #[serde(default)]
    pub enabled: bool,
}

/// `leader_election:`: replicas of `drift serve` share a `coordination.k8s.io/v1` Lease; only
/// its holder scans, watches, heals and notifies, every replica serves the API.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LeaderElectionConfig {
    /// Turn it on (default false).
    pub enabled: bool,
    /// The Lease's name (default `drift-detector`).
    pub lease: String,
    /// The Lease's namespace; empty (the default) means `$POD_NAMESPACE`, else `default`.
    pub namespace: String,
    /// How long a standby waits after the lease last changed before taking it (default 4s).
    #[serde(with = "humantime_serde")]
    pub lease_duration: Duration,
    /// How long the leader keeps leading without a renewal (default 3s).
    #[serde(with = "humantime_serde")]
    pub renew_deadline: Duration,
    /// How often the leader renews the lease, and a standby that cannot watch it tries to take
    /// it (default 1s).
    #[serde(with = "humantime_serde")]
    pub retry_period: Duration,
}

impl Default for LeaderElectionConfig {
    fn default() -> Self {
        let t = drift_runtime::ElectionTimings::default();
        LeaderElectionConfig {
            enabled: false,
            lease: "drift-detector".to_owned(),
            namespace: String::new(),
            lease_duration: t.lease_duration,
            renew_deadline: t.renew_deadline,
            retry_period: t.retry_period,
        }
    }
}

impl LeaderElectionConfig {
    /// The timings.
    pub fn timings(&self) -> drift_runtime::ElectionTimings {
        drift_runtime::ElectionTimings {
            lease_duration: self.lease_duration,
            renew_deadline: self.renew_deadline,
            retry_period: self.retry_period,
        }
    }

    /// The Lease's namespace: `namespace`, else `$POD_NAMESPACE`, else `default`.
    pub fn namespace_from(&self, pod_namespace: Option<String>) -> String {
        if !self.namespace.is_empty() {
            return self.namespace.clone();
        }
        pod_namespace.filter(|n| !n.is_empty()).unwrap_or_else(|| "default".to_owned())
    }

    /// This replica's identity: `$POD_NAME`, else the host name and the process id.
    pub fn identity_from(pod_name: Option<String>, host: &str, pid: u32) -> String {
        pod_name.filter(|n| !n.is_empty()).unwrap_or_else(|| format!("{host}_{pid}"))
    }

    fn validate(&self) -> Result<()> {
        let name_ok = |n: &str| {
            !n.is_empty()
                && n.len() <= 253
                && n.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
                && n.starts_with(|c: char| c.is_ascii_alphanumeric())
                && n.ends_with(|c: char| c.is_ascii_alphanumeric())
        };
        if !name_ok(&self.lease) {
            bail!(
                "`leader_election.lease` {:?} is not a valid Lease name (lower-case letters, digits, `-` and `.`)",
                self.lease
            );
        }
        if !self.namespace.is_empty() && !name_ok(&self.namespace) {
            bail!("`leader_election.namespace` {:?} is not a valid namespace name", self.namespace);
        }
        self.timings().validate()?;
        Ok(())
    }
}

/// `remediation:`: how reverts and accepted changes are made.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RemediationSettings {
    /// Allow reverting Secrets (default false; a Secret is never accepted into Git).
    pub allow_secrets: bool,
    /// The author of the commits of accepted changes.
    pub author_name: String,
    /// The author's email.
    pub author_email: String,
    /// How long a revert or an accept may run before it is given up, its git processes
    /// stopped and the attempt recorded as `failed` (default 5m).
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
}

impl Default for RemediationSettings {
    fn default() -> Self {
        RemediationSettings {
            allow_secrets: false,
            author_name: "drift-detector".to_owned(),
            author_email: "drift-detector@users.noreply.github.com".to_owned(),
            timeout: drift_runtime::attempt::ACTION_TIMEOUT,
        }
    }
}

/// `notifications:`: how the notifier task runs (docs/notifications.md).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotificationSettings {
    /// Where messages point: a drift links to `{link}/drifts/{id}` (the API, or the web page
    /// in front of it). Default: no link.
    #[serde(default)]
    pub link: Option<url::Url>,
    /// How often the outbox is looked at when no report wakes the task (default 1s).
    #[serde(default = "default_tick", with = "humantime_serde")]
    pub tick: Duration,
    /// How long a delivery claimed by one process stays leased to it (default 60s): what a
    /// process that dies while sending leaves is sent again after it.
    #[serde(default = "default_lease", with = "humantime_serde")]
    pub lease: Duration,
}

impl Default for NotificationSettings {
    fn default() -> Self {
        NotificationSettings { link: None, tick: default_tick(), lease: default_lease() }
    }
}

fn default_tick() -> Duration {
    Duration::from_secs(1)
}

fn default_lease() -> Duration {
    Duration::from_secs(60)
}

/// `store:` as written: a URL, or a store's own settings. `Debug` hides any password.
#[derive(Clone, PartialEq)]
pub enum StoreSetting {
    /// `sqlite://...` or `postgres://...`, with every other setting at its default.
    Url(String),
    /// `{type: sqlite, ...}` or `{type: postgres, ...}`.
    Store(StoreConfig),
}

/// A store and its settings: the adapter's own configuration type.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum StoreConfig {
    /// The embedded SQLite store.
    Sqlite(SqliteConfig),
    /// PostgreSQL.
    Postgres(PostgresConfig),
}

impl std::fmt::Debug for StoreSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreSetting::Url(url) if url.starts_with("sqlite:") => {
                f.debug_tuple("Url").field(&drift_sqlite::redact_url(url)).finish()
            }
            StoreSetting::Url(url) => f.debug_tuple("Url").field(&drift_postgres::redact_url(url)).finish(),
            StoreSetting::Store(store) => f.debug_tuple("Store").field(store).finish(),
        }
    }
}

impl StoreConfig {
    /// The store a URL names, with default settings.
    pub fn from_url(url: &str) -> Result<StoreConfig> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(StoreConfig::Postgres(PostgresConfig::new(url)))
        } else if url.starts_with("sqlite:") {
            Ok(StoreConfig::Sqlite(SqliteConfig::new(url)))
        } else {
            bail!("the store URL must start with sqlite: or postgres://")
        }
    }

    /// Checks the settings without I/O.
    pub fn validate(&self) -> drift_core::Result<()> {
        match self {
            StoreConfig::Sqlite(c) => c.validate(),
            StoreConfig::Postgres(c) => c.validate(),
        }
    }

    /// How to show the store to a person: the URL, any password hidden.
    pub fn display(&self) -> String {
        match self {
            StoreConfig::Sqlite(c) => drift_sqlite::redact_url(&c.url),
            StoreConfig::Postgres(c) => drift_postgres::redact_url(&c.url),
        }
    }

    fn set_retention(&mut self, days: Option<u32>) {
        match self {
            StoreConfig::Sqlite(c) => c.retention_days = days,
            StoreConfig::Postgres(c) => c.retention_days = days,
        }
    }
}

impl<'de> Deserialize<'de> for StoreSetting {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = StoreSetting;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a store URL, or a mapping with `type: sqlite` or `type: postgres`")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<StoreSetting, E> {
                Ok(StoreSetting::Url(v.to_owned()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> std::result::Result<StoreSetting, A::Error> {
                StoreConfig::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(StoreSetting::Store)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// One cluster of `clusters:`: its name and how to reach it (a kubeconfig and context, the
/// pod's service account, or a credentials Secret).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterEntry {
    /// The name recorded with its drifts (lower-case letters, digits, `-` and `.`).
    pub name: String,
    /// A kubeconfig file (`~` expanded); default `$KUBECONFIG`, then `~/.kube/config`, when only
    /// `context` is given.
    #[serde(default)]
    pub kubeconfig: Option<PathBuf>,
    /// The context of the kubeconfig, or of the Secret's kubeconfig (Flux); default its current
    /// context.
    #[serde(default)]
    pub context: Option<String>,
    /// The pod's service account (the cluster the detector runs in).
    #[serde(default)]
    pub in_cluster: bool,
    /// A credentials Secret: an Argo CD cluster Secret or a Flux kubeconfig Secret, from a file
    /// or from the home cluster.
    #[serde(default)]
    pub secret: Option<drift_kube::SecretRef>,
}

impl ClusterEntry {
    fn validate(&self) -> Result<()> {
        let n = &self.name;
        let valid = !n.is_empty()
            && n.len() <= 63
            && n.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
            && n.as_bytes()[0].is_ascii_alphanumeric()
            && n.as_bytes()[n.len() - 1].is_ascii_alphanumeric();
        if !valid {
            bail!(
                "cluster name {n:?}: use 1 to 63 lower-case letters, digits, `-` and `.`, starting and ending with a letter or digit (it names the cluster's Lease)"
            );
        }
        let ways = usize::from(self.kubeconfig.is_some() || (self.context.is_some() && self.secret.is_none()))
            + usize::from(self.in_cluster)
            + usize::from(self.secret.is_some());
        if ways == 0 {
            bail!("cluster `{n}`: say how to reach it: `kubeconfig` and/or `context`, `in_cluster: true`, or `secret`");
        }
        if ways > 1 {
            bail!("cluster `{n}`: give one of `kubeconfig`/`context`, `in_cluster` and `secret`");
        }
        if let Some(secret) = &self.secret {
            secret.validate().with_context(|| format!("cluster `{n}`"))?;
        }
        Ok(())
    }
}

/// One repository.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepositoryConfig {
    /// Name recorded with drifts.
    pub name: String,
    /// `https://`, `ssh://`, `git@host:path`, `file://`, a local folder, or `github:OWNER/REPO`
    /// (GitHub REST API).
    pub url: String,
    /// Branch, tag or commit (a local folder without `ref` is read as it is on disk).
    #[serde(default, rename = "ref")]
    pub reference: Option<String>,
    /// Sub-folder.
    #[serde(default)]
    pub path: Option<String>,
    /// `auto` (default), `plain`, `kustomize` or `helm`.
    #[serde(default)]
    pub renderer: RendererKind,
    /// Name of the environment variable holding the HTTPS or GitHub token.
    #[serde(default)]
    pub token_env: Option<String>,
    /// Helm release name, namespace and values files.
    #[serde(default)]
    pub helm: Option<HelmConfig>,
    /// Clone cache folder.
    #[serde(default)]
    pub cache_dir: Option<PathBuf>,
    /// The clusters of `clusters:` this repository's objects are compared with (default: all).
    #[serde(default)]
    pub clusters: Option<Vec<String>>,
}

impl RepositoryConfig {
    /// Whether this repository targets `cluster` (every cluster when it names none).
    pub fn targets(&self, cluster: &str) -> bool {
        self.clusters.as_ref().is_none_or(|c| c.iter().any(|n| n == cluster))
    }
}

/// `accept:` of drift.yaml.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcceptSettings {
    /// Automatic pull requests (off unless given).
    #[serde(default)]
    pub auto: Option<drift_runtime::AutoAcceptPolicy>,
    /// Whitelist proposals after consistent decisions (off unless given; docs/remediation.md,
    /// "Whitelist proposals").
    #[serde(default)]
    pub propose: Option<drift_runtime::remedies::ProposePolicy>,
}

/// The REST API.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiConfig {
    /// Listen address (default 127.0.0.1:8080).
    #[serde(default = "default_listen")]
    pub listen: String,
    /// Name of the environment variable holding the bearer token of the write endpoints (a
    /// token named `api`).
    #[serde(default = "default_token_env")]
    pub token_env: String,
    /// More write tokens, each with a name: the actor of what a request with it does (the
    /// owner of a waiver). A listed token whose variable is unset is an error.
    #[serde(default)]
    pub tokens: Vec<NamedToken>,
    /// Name of the environment variable holding a token every read but `/health`, `/ready`
    /// and `/metrics` needs (default: reads are open).
    #[serde(default)]
    pub read_token_env: Option<String>,
    /// More `Host` names the API answers to (`drift.example.com`, `*.example.com`, or `*` for
    /// any), next to those it always answers to: IP addresses, `localhost`, one-label names and
    /// Kubernetes Service names. Any other is answered 421 (docs/security.md).
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// How long a request's head may take to arrive, from when the server waits for it
    /// (default 10s): slow headers, silent and unused kept-alive connections are closed after it.
    #[serde(default = "default_header_read_timeout", with = "humantime_serde")]
    pub header_read_timeout: Duration,
    /// How long a connection may go without a byte read or written while no handler works
    /// (default 30s).
    #[serde(default = "default_idle_timeout", with = "humantime_serde")]
    pub idle_timeout: Duration,
    /// Most connections served at once (default 1024); more wait until one closes.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
}

fn default_header_read_timeout() -> Duration {
    drift_api::server::DEFAULT_HEADER_READ_TIMEOUT
}
fn default_idle_timeout() -> Duration {
    drift_api::server::DEFAULT_IDLE_TIMEOUT
}
fn default_max_connections() -> usize {
    drift_api::server::DEFAULT_MAX_CONNECTIONS
}

/// A named write token of `api.tokens`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedToken {
    /// The name (1-64 of letters, digits, `. _ @ -`): a person or a system.
    pub name: String,
    /// The environment variable holding the token.
    pub token_env: String,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            listen: default_listen(),
            token_env: default_token_env(),
            tokens: Vec::new(),
            read_token_env: None,
            allowed_hosts: Vec::new(),
            header_read_timeout: default_header_read_timeout(),
            idle_timeout: default_idle_timeout(),
            max_connections: default_max_connections(),
        }
    }
}

impl ApiConfig {
    /// The HTTP server's bounds.
    pub fn server_limits(&self) -> drift_api::server::ServerLimits {
        drift_api::server::ServerLimits {
            header_read_timeout: self.header_read_timeout,
            idle_timeout: self.idle_timeout,
            max_connections: self.max_connections,
        }
    }

    /// The `Host` names the API answers to, `NAME.NAMESPACE` included for the pod's namespace.
    pub fn allowed_hosts(&self, namespace: Option<&str>) -> Result<drift_api::server::AllowedHosts> {
        drift_api::server::AllowedHosts::new(&self.allowed_hosts, namespace).context("`api.allowed_hosts`")
    }

    /// The write tokens and the read token from the environment, checked together (no name or
    /// value twice). Errors name the variable, never a value.
    pub fn tokens(&self) -> Result<(Vec<drift_api::ApiToken>, Option<drift_api::ApiToken>)> {
        let mut write: Vec<drift_api::ApiToken> = drift_api::ApiToken::from_env(&self.token_env)?.into_iter().collect();
        for t in &self.tokens {
            match drift_api::ApiToken::named_from_env(&t.name, &t.token_env)? {
                Some(token) => write.push(token),
                None => bail!("`api.tokens`: token `{}`: the variable {} is not set", t.name, t.token_env),
            }
        }
        let read = match &self.read_token_env {
            Some(var) => match drift_api::ApiToken::named_from_env("read", var)? {
                Some(token) => Some(token),
                None => bail!("`api.read_token_env`: the variable {var} is not set"),
            },
            None => None,
        };
        drift_api::check_tokens(&write, read.as_ref())?;
        Ok((write, read))
    }
}

/// Engine settings beyond `ignore` and `severity`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineExtras {
    /// Field managers that are GitOps appliers, and those that are people.
    #[serde(default)]
    pub managers: ManagerPolicy,
    /// Merge keys of custom resources' lists.
    #[serde(default)]
    pub merge_keys: Vec<MergeKeyRule>,
    /// Report fields only a controller or webhook added.
    #[serde(default)]
    pub report_controller_fields: bool,
    /// `spec.replicas` of a target of an autoscaler in Git is not drift (default true).
    #[serde(default = "yes")]
    pub autoscaler_owns_replicas: bool,
    /// Custom kinds that are cluster-scoped, as `group/Kind`.
    #[serde(default)]
    pub cluster_scoped: Vec<String>,
}

impl Default for EngineExtras {
    fn default() -> Self {
        EngineExtras {
            managers: ManagerPolicy::default(),
            merge_keys: Vec::new(),
            report_controller_fields: false,
            autoscaler_owns_replicas: true,
            cluster_scoped: Vec::new(),
        }
    }
}

fn yes() -> bool {
    true
}
fn default_interval() -> Duration {
    Duration::from_secs(300)
}
fn default_namespace() -> String {
    "default".to_owned()
}
fn default_listen() -> String {
    "127.0.0.1:8080".to_owned()
}
fn default_token_env() -> String {
    "DRIFT_API_TOKEN".to_owned()
}

impl Config {
    /// Reads and validates a file: syntax and unknown keys (with their line), then the values.
    pub fn load(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("invalid configuration {}", path.display()))
    }

    /// Parses and validates configuration text.
    pub fn parse(text: &str) -> Result<Config> {
        let mut config: Config = serde_saphyr::from_str(text).map_err(|e| {
            let plain = e.without_snippet();
            let line = plain.location().map(|l| format!("line {}: ", l.line())).unwrap_or_default();
            let msg = plain.render_with_options(serde_saphyr::render_options! {
                snippets: serde_saphyr::SnippetMode::Off,
            });
            anyhow::anyhow!("{line}{}", msg.lines().next().unwrap_or("syntax error"))
        })?;
        config.built = config.validate()?;
        // Commands that read one cluster (`drift scan`'s name for an unreachable cluster,
        // `drift check`, `drift fix`) take the first of `clusters`.
        if let Some(first) = config.clusters.first() {
            config.cluster = first.name.clone();
        }
        Ok(config)
    }

    /// The policy every scan checks, when `policies.enabled`.
    pub fn policy(&self) -> Option<std::sync::Arc<drift_core::policy::Policy>> {
        self.built.policy.clone()
    }

    fn validate(&self) -> Result<Built> {
        self.validate_clusters()?;
        if self.repositories.is_empty() {
            bail!("`repositories` is empty: name at least one");
        }
        if self.interval < Duration::from_secs(10) {
            bail!("`interval` is {:?}; it must be at least 10s", self.interval);
        }
        if self.remediation.timeout < Duration::from_secs(1) {
            bail!("`remediation.timeout` is {:?}; it must be at least 1s", self.remediation.timeout);
        }
        let mut names = std::collections::BTreeSet::new();
        for r in &self.repositories {
            if !names.insert(&r.name) {
                bail!("repository `{}` is named twice", r.name);
            }
            r.source_config().validate().with_context(|| format!("repository `{}`", r.name))?;
        }
        self.live.validate().context("`live`")?;
        if self.live.cluster.is_some() {
            bail!("`live.cluster`: the cluster name is the top-level `cluster`");
        }
        if self.live.server_side {
            bail!(
                "`live.server_side`: server-side review is used by `drift diff --cluster --server-side` only, not yet by scan and serve"
            );
        }
        self.api
            .listen
            .parse::<std::net::SocketAddr>()
            .with_context(|| format!("`api.listen` {:?}", self.api.listen))?;
        self.api.server_limits().validate().context("`api`")?;
        self.api.allowed_hosts(None)?;
        if let Some(StoreSetting::Store(store)) = &self.store {
            if self.database_env.is_some() || self.retention_days.is_some() {
                bail!(
                    "`database_env` and `retention_days` go with a store URL; with `store: {{type: ...}}` set them in the store's own settings (`url`, `password_env`, `retention_days`)"
                );
            }
            store.validate().context("`store`")?;
        }
        if self.retention_days == Some(0) {
            bail!("`retention_days` must be at least 1 (omit it to keep everything)");
        }
        if let Some(StoreSetting::Url(url)) = &self.store {
            let mut store = StoreConfig::from_url(url).context("`store`")?;
            store.set_retention(self.retention_days);
            store.validate().context("`store`")?;
        }
        let engine = drift_core::Engine::new(&self.engine_config()).context("engine settings")?;
        self.policies.validate()?;
        let policy = if self.policies.enabled {
            Some(std::sync::Arc::new(drift_core::policy::Policy::new(&self.policies)?))
        } else {
            None
        };
        // The shape of every notifier; whether its secrets are in the environment is checked
        // when the notifiers are built (`drift serve`, `drift scan`), not by `config check`.
        // The stand-in value is a URL, as a Slack `url_env` variable must hold one.
        drift_notify::validate(&self.notify, &|_| Some("https://set.invalid/".to_owned())).context("`notify`")?;
        if self.notifications.tick.is_zero() || self.notifications.tick > Duration::from_secs(60) {
            bail!("`notifications.tick` must be between 1ms and 60s");
        }
        if self.notifications.lease < Duration::from_secs(2) {
            bail!("`notifications.lease` must be at least 2s");
        }
        if let Some(c) = &self.classify {
            c.validate().context("`classify`")?;
        }
        if let Some(p) = &self.accept.propose {
            p.validate().context("`accept.propose`")?;
        }
        if let Some(auto) = &self.accept.auto {
            auto.validate().context("`accept.auto`")?;
            if auto.asks_prediction() && self.classify.is_none() {
                bail!(
                    "`accept.auto`: a rule with `predicted` needs the classifier's settings (`classify: {{min_confidence: 0.8}}`)"
                );
            }
            if self.live.snapshot.is_some() {
                bail!("`accept.auto` reads the cluster's values; `live.snapshot` cannot be accepted from");
            }
        }
        if let Some(heal) = &self.heal {
            heal.validate().context("`heal`")?;
            if self.live.snapshot.is_some() {
                bail!("`heal` needs a cluster to write to; `live.snapshot` cannot be reverted");
            }
        }
        if let Some(audit) = &self.audit {
            audit.validate().context("`audit`")?;
        }
        self.alerts.settings().validate().context("`alerts`")?;
        self.leader_election.validate()?;
        self.secret_hash.validate()?;
        if self.leader_election.enabled && self.live.snapshot.is_some() {
            bail!(
                "`leader_election` needs a cluster to keep its Lease in; `live.snapshot` files have none (turn it off, or read a cluster)"
            );
        }
        let mut cluster_scoped = Vec::with_capacity(self.engine.cluster_scoped.len());
        for gk in &self.engine.cluster_scoped {
            let Some((group, kind)) = gk.split_once('/') else {
                bail!("`engine.cluster_scoped` entry {gk:?} must be group/Kind");
            };
            cluster_scoped.push(drift_core::GroupKind::new(group, kind));
        }
        Ok(Built { engine, policy, cluster_scoped })
    }

    /// `cluster` or `clusters`, and the clusters each repository targets.
    fn validate_clusters(&self) -> Result<()> {
        if self.clusters.is_empty() {
            if self.cluster.trim().is_empty() {
                bail!("`cluster` is empty: name the cluster (or list several under `clusters`)");
            }
            for r in &self.repositories {
                if let Some(c) = r.clusters.iter().flatten().find(|c| **c != self.cluster) {
                    bail!("repository `{}` targets cluster `{c}`, which is not `cluster` ({})", r.name, self.cluster);
                }
            }
            return Ok(());
        }
        if !self.cluster.is_empty() {
            bail!("give `cluster` (one cluster) or `clusters` (several), not both");
        }
        if self.live.snapshot.is_some() || self.live.cluster.is_some() {
            bail!(
                "with `clusters`, `live` gives the home cluster and the reading settings of every cluster: no `snapshot` nor `cluster` there"
            );
        }
        let mut names = std::collections::BTreeSet::new();
        for c in &self.clusters {
            c.validate().context("`clusters`")?;
            if !names.insert(c.name.as_str()) {
                bail!("`clusters`: cluster `{}` is named twice", c.name);
            }
        }
        for r in &self.repositories {
            if let Some(list) = &r.clusters {
                if list.is_empty() {
                    bail!("repository `{}`: `clusters` is empty (leave it out to target every cluster)", r.name);
                }
                if let Some(c) = list.iter().find(|c| !names.contains(c.as_str())) {
                    bail!("repository `{}` targets cluster `{c}`, which `clusters` does not name", r.name);
                }
            }
        }
        if let Some(c) = self.clusters.iter().find(|c| !self.repositories.iter().any(|r| r.targets(&c.name))) {
            bail!("cluster `{}`: no repository targets it", c.name);
        }
        // `accept.auto` and `accept.propose` work per cluster (each cluster's drifts, proposed
        // through its own reading of the repository); `audit` reads one API server's log.
        if self.clusters.len() > 1 && self.audit.is_some() {
            bail!(
                "`audit` joins one API server's audit log; with several clusters it would name people of another cluster"
            );
        }
        Ok(())
    }

    /// The engine settings.
    pub fn engine_config(&self) -> EngineConfig {
        EngineConfig {
            ignore: self.ignore.clone(),
            severity: self.severity.clone(),
            managers: self.engine.managers.clone(),
            merge_keys: self.engine.merge_keys.clone(),
            report_controller_fields: self.engine.report_controller_fields,
            autoscaler_owns_replicas: self.engine.autoscaler_owns_replicas,
        }
    }

    /// The store and its settings: `store:` as written, or the store of the URL in
    /// `database_env`, `store:` or the SQLite default (`sqlite://drift.db`), with
    /// `retention_days`.
    pub fn store_config(&self) -> Result<StoreConfig> {
        let url = match (&self.database_env, &self.store) {
            (_, Some(StoreSetting::Store(store))) => return Ok(store.clone()),
            (Some(var), _) => {
                std::env::var(var).with_context(|| format!("environment variable {var} (database_env) is not set"))?
            }
            (None, Some(StoreSetting::Url(url))) => url.clone(),
            (None, None) => SqliteConfig::default().url,
        };
        let mut store = StoreConfig::from_url(&url)?;
        store.set_retention(self.retention_days);
        store.validate()?;
        Ok(store)
    }
}

impl RepositoryConfig {
    /// The desired-source configuration of this repository.
    pub fn source_config(&self) -> SourceConfig {
        self.source_config_for(true)
    }

    /// [`RepositoryConfig::source_config`] for a long-running (`keep` the parsed state between
    /// fetches) or a one-shot caller.
    pub fn source_config_for(&self, keep: bool) -> SourceConfig {
        let request = RenderRequest {
            repo: self.url.clone(),
            reference: self.reference.clone(),
            path: self.path.clone(),
            renderer: self.renderer,
            cache_dir: self.cache_dir.clone(),
        };
        let mut config = request.to_config();
        let render = |r: &mut RenderConfig| {
            r.keep_between_fetches = keep;
            if let Some(h) = &self.helm {
                r.helm = h.clone();
            }
        };
        match &mut config {
            SourceConfig::Folder(c) => {
                c.name = Some(self.name.clone());
                render(&mut c.render);
            }
            SourceConfig::Git(c) => {
                c.name = Some(self.name.clone());
                c.token_env = self.token_env.clone();
                render(&mut c.render);
            }
            SourceConfig::Github(c) => {
                c.name = Some(self.name.clone());
                if let Some(t) = &self.token_env {
                    c.token_env = t.clone();
                }
                render(&mut c.render);
            }
        }
        config
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    const BASE: &str = "cluster: homelab\nrepositories:\n  - name: platform\n    url: /tmp/repo\n";

    fn parse(extra: &str) -> Result<Config> {
        Config::parse(&format!("{BASE}{extra}"))
    }

    /// A configuration of several clusters (no top-level `cluster`).
    fn fleet(clusters: &str, repositories: &str) -> Result<Config> {
        Config::parse(&format!("clusters:\n{clusters}repositories:\n{repositories}"))
    }

    const TWO: &str = "  - name: east\n    context: east\n  - name: west\n    secret:\n      name: west-cluster\n      namespace: argocd\n";

    #[test]
    fn several_clusters_each_with_its_credentials_and_the_repositories_they_take() {
        let c = fleet(
            &format!("{TWO}  - name: edge.lab\n    secret:\n      file: /etc/drift/edge.yaml\n    context: edge\n  - name: home\n    in_cluster: true\n"),
            "  - name: platform\n    url: /tmp/p\n  - name: edge-apps\n    url: /tmp/e\n    clusters: [edge.lab, west]\n",
        )
        .unwrap();
        assert_eq!(c.clusters.len(), 4);
        assert_eq!(c.cluster, "east", "commands of one cluster take the first");
        let platform = &c.repositories[0];
        let edge = &c.repositories[1];
        assert!(["east", "west", "edge.lab", "home"].iter().all(|n| platform.targets(n)), "default: every cluster");
        assert!(edge.targets("west") && edge.targets("edge.lab") && !edge.targets("east"));
        let s = c.clusters[1].secret.as_ref().unwrap();
        assert_eq!((s.name.as_deref(), s.namespace.as_deref()), (Some("west-cluster"), Some("argocd")));
        assert_eq!(c.clusters[2].context.as_deref(), Some("edge"), "a context of the Secret's kubeconfig");
    }

    #[test]
    fn bad_cluster_lists_are_refused_with_what_is_wrong() {
        let repo = "  - name: platform\n    url: /tmp/p\n";
        let err = |clusters: &str, repos: &str| format!("{:#}", fleet(clusters, repos).unwrap_err());
        assert!(err("  - name: East\n    context: e\n", repo).contains("cluster name \"East\""));
        assert!(err("  - name: east\n", repo).contains("say how to reach it"));
        assert!(err("  - name: east\n    context: e\n    in_cluster: true\n", repo).contains("give one of"));
        assert!(err("  - name: east\n    secret: {}\n", repo).contains("give `file`"));
        assert!(err("  - name: east\n    secret: {file: /s, name: s}\n", repo).contains("not both"));
        assert!(err("  - name: east\n    context: e\n  - name: east\n    context: f\n", repo).contains("named twice"));
        assert!(err("  - name: east\n    contxt: e\n", repo).contains("contxt"));
        assert!(
            err(TWO, "  - name: platform\n    url: /tmp/p\n    clusters: [north]\n")
                .contains("`north`, which `clusters` does not name")
        );
        assert!(
            err(TWO, "  - name: platform\n    url: /tmp/p\n    clusters: [east]\n")
                .contains("cluster `west`: no repository targets it")
        );
        assert!(err(TWO, "  - name: platform\n    url: /tmp/p\n    clusters: []\n").contains("`clusters` is empty"));
        let both = Config::parse(&format!("cluster: one\nclusters:\n{TWO}repositories:\n{repo}")).unwrap_err();
        assert!(format!("{both:#}").contains("not both"), "{both:#}");
        let snap = Config::parse(&format!("clusters:\n{TWO}live:\n  snapshot: x\nrepositories:\n{repo}")).unwrap_err();
        assert!(format!("{snap:#}").contains("home cluster"), "{snap:#}");
        // Automatic pull requests and whitelist proposals are made per cluster.
        Config::parse(&format!("clusters:\n{TWO}accept:\n  auto:\n    rules: [{{}}]\nrepositories:\n{repo}")).unwrap();
        Config::parse(&format!("clusters:\n{TWO}accept:\n  propose: {{after: 3}}\nrepositories:\n{repo}")).unwrap();
        let audit = Config::parse(&format!("clusters:\n{TWO}audit:\n  log: /var/log/audit.log\nrepositories:\n{repo}"))
            .unwrap_err();
        assert!(format!("{audit:#}").contains("`audit` joins one API server's audit log"), "{audit:#}");
        // The single-cluster form: a repository may only name that cluster.
        parse("").unwrap();
        let err =
            Config::parse("cluster: homelab\nrepositories:\n  - name: p\n    url: /tmp/p\n    clusters: [prod]\n")
                .unwrap_err();
        assert!(format!("{err:#}").contains("not `cluster`"), "{err:#}");
        Config::parse("cluster: homelab\nrepositories:\n  - name: p\n    url: /tmp/p\n    clusters: [homelab]\n")
            .unwrap();
        let err = Config::parse("repositories:\n  - name: p\n    url: /tmp/p\n").unwrap_err();
        assert!(format!("{err:#}").contains("`cluster` is empty"), "{err:#}");
    }

    #[test]
    fn the_classifier_and_proposals_settings_are_checked() {
        let c = parse("classify: {min_confidence: 0.9}\naccept:\n  propose: {after: 4, within: 30d}\n").unwrap();
        assert_eq!(c.classify.map(|s| (s.min_confidence, s.min_examples, s.quiet_intended)), Some((0.9, 20, true)));
        assert_eq!(c.accept.propose.map(|p| (p.after, p.within)), Some((4, Duration::from_secs(30 * 86_400))));
        for (extra, says) in [
            ("classify: {min_confidence: 1.5}\n", "classify.min_confidence 1.5 is not between 0 and 1"),
            ("classify: {min_confidence: 0.8, maybe: 1}\n", "unknown field `maybe`"),
            ("accept:\n  propose: {after: 1}\n", "one decision is not a pattern"),
            (
                "accept:\n  auto:\n    rules: [{predicted: [accept]}]\n",
                "a rule with `predicted` needs the classifier's settings",
            ),
        ] {
            let err = parse(extra).unwrap_err();
            assert!(format!("{err:#}").contains(says), "{extra}: {err:#}");
        }
    }

    #[test]
    fn without_a_store_the_default_is_the_sqlite_file() {
        let store = parse("").unwrap().store_config().unwrap();
        assert_eq!(store, StoreConfig::Sqlite(SqliteConfig::default()));
    }

    #[test]
    fn a_url_is_the_store_with_its_defaults_under_both_names() {
        let pg = parse("store: postgres://drift@db:5432/drift\nretention_days: 30\n").unwrap();
        let StoreConfig::Postgres(c) = pg.store_config().unwrap() else { panic!("postgres") };
        assert_eq!(
            (c.url.as_str(), c.retention_days, c.max_connections),
            ("postgres://drift@db:5432/drift", Some(30), 5)
        );
        let old = parse("database: sqlite://x.db\n").unwrap();
        assert_eq!(old.store_config().unwrap(), StoreConfig::Sqlite(SqliteConfig::new("sqlite://x.db")));
        let err = parse("store: mysql://db/drift\n").unwrap_err();
        assert!(format!("{err:#}").contains("sqlite: or postgres://"), "{err:#}");
    }

    #[test]
    fn every_setting_of_the_adapters_can_be_set() {
        let c = parse("store:\n  type: postgres\n  url: postgres://drift@db/drift\n  password_env: PGPASS\n  max_connections: 12\n  connect_timeout: 3s\n  retention_days: 90\n").unwrap();
        let StoreConfig::Postgres(pg) = c.store_config().unwrap() else { panic!("postgres") };
        assert_eq!(pg.max_connections, 12);
        assert_eq!(pg.connect_timeout, Duration::from_secs(3));
        assert_eq!(pg.password_env.as_deref(), Some("PGPASS"));
        let c = parse(
            "store:\n  type: sqlite\n  url: sqlite:///var/lib/drift.db\n  busy_timeout: 250ms\n  read_connections: 2\n",
        )
        .unwrap();
        let StoreConfig::Sqlite(lite) = c.store_config().unwrap() else { panic!("sqlite") };
        assert_eq!((lite.busy_timeout, lite.read_connections), (Duration::from_millis(250), 2));
        let c = parse("live:\n  context: prod\n  concurrency: 3\n  page_size: 100\n  retry_backoff: 1s\n").unwrap();
        assert_eq!((c.live.concurrency, c.live.page_size), (3, 100));
        assert_eq!(c.live.retry_backoff, Duration::from_secs(1));
        assert_eq!(c.live.context.as_deref(), Some("prod"));
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors_with_their_line() {
        let err = parse("store:\n  type: sqlite\n  busy_timout: 1s\n").unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("line 7") && msg.contains("busy_timout"), "{msg}");
        let err = parse("store:\n  type: oracle\n").unwrap_err();
        assert!(format!("{err:#}").contains("oracle"), "{err:#}");
        let err = parse("live:\n  kubeconfg: /x\n").unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("line 6") && msg.contains("kubeconfg"), "{msg}");
        let err = parse("store:\n  type: postgres\n  url: postgres://h/db\n  max_connections: 0\n").unwrap_err();
        assert!(format!("{err:#}").contains("max_connections"), "{err:#}");
        let err = parse("live:\n  concurrency: 0\n").unwrap_err();
        assert!(format!("{err:#}").contains("concurrency"), "{err:#}");
    }

    #[test]
    fn contradictions_are_refused() {
        let err = parse("store: sqlite://x.db\nretention_days: 0\n").unwrap_err();
        assert!(format!("{err:#}").contains("retention_days"), "{err:#}");
        let err = parse("store:\n  type: sqlite\nretention_days: 3\n").unwrap_err();
        assert!(format!("{err:#}").contains("retention_days"), "{err:#}");
        let err = parse("live:\n  snapshot: live\n  context: prod\n").unwrap_err();
        assert!(format!("{err:#}").contains("snapshot"), "{err:#}");
        let err = parse("live:\n  cluster: other\n").unwrap_err();
        assert!(format!("{err:#}").contains("top-level `cluster`"), "{err:#}");
        let err = parse("live:\n  server_side: true\n").unwrap_err();
        assert!(format!("{err:#}").contains("server_side"), "{err:#}");
    }

    #[test]
    fn leader_election_is_off_by_default_and_every_key_can_be_set() {
        let c = parse("").unwrap();
        assert_eq!(c.leader_election, LeaderElectionConfig::default());
        assert!(!c.leader_election.enabled);
        assert_eq!(c.leader_election.timings(), drift_runtime::ElectionTimings::default());
        let c = parse("leader_election:\n  enabled: true\n  lease: drift-prod\n  namespace: drift\n  lease_duration: 30s\n  renew_deadline: 20s\n  retry_period: 5s\n").unwrap();
        let le = &c.leader_election;
        assert!(le.enabled);
        assert_eq!((le.lease.as_str(), le.namespace_from(Some("other".into()))), ("drift-prod", "drift".to_owned()));
        assert_eq!(
            (le.lease_duration, le.renew_deadline, le.retry_period),
            (Duration::from_secs(30), Duration::from_secs(20), Duration::from_secs(5))
        );
    }

    #[test]
    fn leader_election_namespace_and_identity_come_from_the_pod() {
        let le = LeaderElectionConfig::default();
        assert_eq!(le.namespace_from(Some("drift".into())), "drift");
        assert_eq!(le.namespace_from(None), "default");
        assert_eq!(le.namespace_from(Some(String::new())), "default");
        assert_eq!(LeaderElectionConfig::identity_from(Some("drift-0".into()), "node", 7), "drift-0");
        assert_eq!(LeaderElectionConfig::identity_from(None, "node", 7), "node_7");
    }

    #[test]
    fn leader_election_refuses_snapshots_bad_names_and_timings() {
        let err = parse("live:\n  snapshot: live\nleader_election:\n  enabled: true\n").unwrap_err();
        assert!(format!("{err:#}").contains("`leader_election` needs a cluster"), "{err:#}");
        // Off, the block does not stand in the way of snapshots.
        parse("live:\n  snapshot: live\nleader_election:\n  enabled: false\n").unwrap();
        let err = parse("leader_election:\n  lease: Drift_Lease\n").unwrap_err();
        assert!(format!("{err:#}").contains("leader_election.lease"), "{err:#}");
        let err = parse("leader_election:\n  lease_duration: 10s\n  renew_deadline: 10s\n").unwrap_err();
        assert!(format!("{err:#}").contains("lease_duration"), "{err:#}");
        let err = parse("leader_election:\n  renew_deadlin: 10s\n").unwrap_err();
        assert!(format!("{err:#}").contains("renew_deadlin"), "{err:#}");
    }

    #[test]
    fn a_password_is_never_shown() {
        let c = parse("store: postgres://drift:s3cret-canary@db/drift\n").unwrap();
        let shown = c.store_config().unwrap().display();
        assert!(!shown.contains("s3cret-canary"), "{shown}");
        assert!(!format!("{c:?}").contains("s3cret-canary"), "Debug of the configuration hides it too");
    }

    #[test]
    fn the_http_server_s_bounds_and_host_names() {
        let c = parse("").unwrap();
        assert_eq!(c.api.server_limits(), drift_api::server::ServerLimits::default());
        assert!(!c.api.allowed_hosts(None).unwrap().allows("drift.example.com"));
        let c = parse("api:\n  allowed_hosts: [drift.example.com]\n  header_read_timeout: 2s\n  idle_timeout: 5s\n  max_connections: 100\n").unwrap();
        let limits = c.api.server_limits();
        assert_eq!(
            (limits.header_read_timeout, limits.idle_timeout, limits.max_connections),
            (Duration::from_secs(2), Duration::from_secs(5), 100)
        );
        let hosts = c.api.allowed_hosts(Some("drift")).unwrap();
        assert!(hosts.allows("drift.example.com:443") && hosts.allows("drift-detector.drift"));
        for bad in [
            "api:\n  allowed_hosts: [\"drift.example.com:8080\"]\n",
            "api:\n  max_connections: 0\n",
            "api:\n  idle_timeout: 0s\n",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    /// Regression: a Slack notifier's `url_env` was checked against a stand-in value that is
    /// not a URL, so `drift config check` refused every configuration that named one.
    #[test]
    fn a_slack_url_from_the_environment_passes_the_check_without_the_environment() {
        let c = parse("notify:\n  - type: slack\n    url_env: DRIFT_TEST_UNSET_SLACK_URL\n").unwrap();
        assert_eq!(c.notify.len(), 1);
    }

    #[test]
    fn the_shipped_configurations_are_valid() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        Config::load(&root.join("examples/demo/drift.yaml")).unwrap();
        let cm = std::fs::read_to_string(root.join("deploy/kubernetes/configmap.yaml")).unwrap();
        let embedded = cm.split_once("drift.yaml: |\n").expect("the ConfigMap embeds drift.yaml").1;
        let text: String = embedded.lines().map(|l| l.strip_prefix("    ").unwrap_or(l)).collect::<Vec<_>>().join("\n");
        Config::parse(&text).unwrap();
    }
}
