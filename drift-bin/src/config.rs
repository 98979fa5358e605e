//! The configuration file of `drift scan` and `drift serve` (DESIGN section 6): one YAML file,
//! unknown keys are errors with their line, secrets only from the environment.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use drift_core::ignore::IgnoreRule;
use drift_core::managed::ManagerPolicy;
use drift_core::merge_keys::MergeKeyRule;
use drift_core::{DriftType, EngineConfig, Severity};
use drift_source_git::{HelmConfig, RenderConfig, RenderRequest, RendererKind, SourceConfig};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Cluster name recorded with every drift.
    pub cluster: String,
    /// Period of full scans (default 5m).
    #[serde(default = "default_interval", with = "humantime_serde")]
    pub interval: Duration,
    /// React to live changes within seconds (default true).
    #[serde(default = "yes")]
    pub watch: bool,
    /// Store URL: `sqlite://FILE` (default `sqlite://drift.db`) or `postgres://...`.
    /// A password in the URL is better given through `database_env`.
    #[serde(default)]
    pub database: Option<String>,
    /// Name of an environment variable holding the store URL (wins over `database`).
    #[serde(default)]
    pub database_env: Option<String>,
    /// Days to keep resolved drifts and old scans (default: forever).
    #[serde(default)]
    pub retention_days: Option<u32>,
    /// The GitOps repositories.
    pub repositories: Vec<RepositoryConfig>,
    /// Where live state comes from.
    #[serde(default)]
    pub live: LiveConfig,
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
}

/// Live state: a cluster (kubeconfig or in-cluster) or snapshot files.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LiveConfig {
    /// Kubeconfig file (omit with `context` for in-cluster).
    #[serde(default)]
    pub kubeconfig: Option<PathBuf>,
    /// Context in the kubeconfig.
    #[serde(default)]
    pub context: Option<String>,
    /// Read live state from these files or folders (`kubectl get -A -o yaml` output) instead.
    #[serde(default)]
    pub snapshot: Option<PathBuf>,
}

/// The REST API.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiConfig {
    /// Listen address (default 127.0.0.1:8080).
    #[serde(default = "default_listen")]
    pub listen: String,
    /// Name of the environment variable holding the bearer token of `POST /scan`.
    #[serde(default = "default_token_env")]
    pub token_env: String,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig { listen: default_listen(), token_env: default_token_env() }
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

/// The default store: an SQLite file next to where `drift` runs.
pub const DEFAULT_DATABASE: &str = "sqlite://drift.db";

impl Config {
    /// Reads and validates a file: syntax and unknown keys (with their line), then the values.
    pub fn load(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("invalid configuration {}", path.display()))
    }

    /// Parses and validates configuration text.
    pub fn parse(text: &str) -> Result<Config> {
        let config: Config = serde_saphyr::from_str(text).map_err(|e| {
            let plain = e.without_snippet();
            let line = plain.location().map(|l| format!("line {}: ", l.line())).unwrap_or_default();
            let msg = plain.render_with_options(serde_saphyr::render_options! {
                snippets: serde_saphyr::SnippetMode::Off,
            });
            anyhow::anyhow!("{line}{}", msg.lines().next().unwrap_or("syntax error"))
        })?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<()> {
        if self.cluster.trim().is_empty() {
            bail!("`cluster` is empty");
        }
        if self.repositories.is_empty() {
            bail!("`repositories` is empty: name at least one");
        }
        if self.interval < Duration::from_secs(10) {
            bail!("`interval` is {:?}; it must be at least 10s", self.interval);
        }
        let mut names = std::collections::BTreeSet::new();
        for r in &self.repositories {
            if !names.insert(&r.name) {
                bail!("repository `{}` is named twice", r.name);
            }
            r.source_config().validate().with_context(|| format!("repository `{}`", r.name))?;
        }
        if self.live.snapshot.is_some() && (self.live.kubeconfig.is_some() || self.live.context.is_some()) {
            bail!("`live.snapshot` reads files; it cannot be combined with `kubeconfig` or `context`");
        }
        self.api
            .listen
            .parse::<std::net::SocketAddr>()
            .with_context(|| format!("`api.listen` {:?}", self.api.listen))?;
        if let Some(url) = &self.database
            && !(url.starts_with("sqlite:") || url.starts_with("postgres://") || url.starts_with("postgresql://"))
        {
            bail!("`database` must start with sqlite: or postgres://");
        }
        drift_core::Engine::new(&self.engine_config()).context("engine settings")?;
        for gk in &self.engine.cluster_scoped {
            if !gk.contains('/') {
                bail!("`engine.cluster_scoped` entry {gk:?} must be group/Kind");
            }
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

    /// The store URL: from `database_env`, else `database`, else the SQLite default.
    pub fn database_url(&self) -> Result<String> {
        if let Some(var) = &self.database_env {
            return std::env::var(var).with_context(|| format!("environment variable {var} (database_env) is not set"));
        }
        Ok(self.database.clone().unwrap_or_else(|| DEFAULT_DATABASE.to_owned()))
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
