//! The one place that knows every adapter: builds the store, the desired sources, the live
//! source and the engine from the configuration.

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use drift_core::scan::ScanOptions;
use drift_core::{DesiredSource, DriftSink, DriftStore, Engine, GroupKind, LiveSource};

use crate::config::Config;

/// A store seen as a sink (writes) and as the read side.
#[derive(Debug, Clone)]
pub struct Store {
    pub sink: Arc<dyn DriftSink>,
    pub read: Arc<dyn DriftStore>,
}

/// Opens the store a URL names (migrations run on open).
pub async fn open_store(url: &str, retention_days: Option<u32>) -> Result<Store> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let mut config = drift_sink_postgres::PostgresConfig::new(url);
        if let Some(d) = retention_days {
            config = config.with_retention_days(d);
        }
        let sink = Arc::new(
            drift_sink_postgres::PostgresSink::from_config(&config)
                .await
                .with_context(|| format!("opening {}", drift_sink_postgres::redact_url(url)))?,
        );
        Ok(Store { sink: sink.clone(), read: sink })
    } else if url.starts_with("sqlite:") {
        let mut config = drift_sink_sqlite::SqliteConfig::new(url);
        if let Some(d) = retention_days {
            config = config.with_retention_days(d);
        }
        let sink = Arc::new(
            drift_sink_sqlite::SqliteSink::from_config(&config).await.with_context(|| format!("opening {url}"))?,
        );
        Ok(Store { sink: sink.clone(), read: sink })
    } else {
        bail!("unsupported database URL (sqlite:... or postgres://...)")
    }
}

/// The desired sources, one per repository. A long-running caller (`drift serve`) keeps the
/// parsed state between fetches; a one-shot caller (`drift scan`) does not, which saves two
/// copies of every desired object.
pub fn desired_sources(config: &Config, long_running: bool) -> Result<Vec<Arc<dyn DesiredSource>>> {
    config
        .repositories
        .iter()
        .map(|r| {
            drift_source_git::source_from_config(r.source_config_for(long_running))
                .with_context(|| format!("repository `{}`", r.name))
        })
        .collect()
}

/// The live source: snapshot files, or the cluster.
pub async fn live_source(config: &Config) -> Result<Arc<dyn LiveSource>> {
    match &config.live.snapshot {
        Some(path) => Ok(Arc::new(drift_source_k8s::SnapshotSource::new(config.cluster.clone(), [path.clone()]))),
        None => crate::cluster::live_source(config).await,
    }
}

/// The engine.
pub fn engine(config: &Config) -> Result<Engine> {
    Ok(Engine::new(&config.engine_config())?)
}

/// Options of one scan.
pub fn scan_options(config: &Config) -> ScanOptions {
    let mut options = ScanOptions::new(new_scan_id());
    options.default_namespace = config.default_namespace.clone();
    options.cluster_scoped = config
        .engine
        .cluster_scoped
        .iter()
        .filter_map(|gk| gk.split_once('/').map(|(g, k)| GroupKind::new(g, k)))
        .collect();
    options
}

/// A new scan id.
pub fn new_scan_id() -> String {
    uuid::Uuid::new_v4().to_string()
}
