//! Configuration of the Kubernetes live source: where the cluster is and how hard to read it.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How to reach a cluster and how to read it.
///
/// Every field has a default; an empty mapping means "the current context of the default
/// kubeconfig (`$KUBECONFIG` or `~/.kube/config`)".
///
/// ```
/// let cfg: drift_kube::K8sConfig = serde_json::from_str(
///     r#"{"kubeconfig": "/etc/drift/kubeconfig", "context": "prod", "concurrency": 4, "retry_backoff": "500ms"}"#,
/// ).unwrap();
/// cfg.validate().unwrap();
/// assert_eq!(cfg.page_size, 500);
/// assert!(serde_json::from_str::<drift_kube::K8sConfig>(r#"{"kubeconfg": "x"}"#).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct K8sConfig {
    /// The cluster name recorded with drifts. Default: the kubeconfig context name, or
    /// `in-cluster`.
    pub cluster: Option<String>,
    /// A kubeconfig file. Default: `$KUBECONFIG`, then `~/.kube/config`.
    pub kubeconfig: Option<PathBuf>,
    /// The context to use. Default: the kubeconfig's current context.
    pub context: Option<String>,
    /// Use the pod's service account (`KUBERNETES_SERVICE_HOST`, the mounted token and CA)
    /// instead of a kubeconfig. Default: false.
    pub in_cluster: bool,
    /// Lists in flight at once. Default: 8.
    pub concurrency: usize,
    /// Objects per page of a list (`limit`, then `continue`). Default: 500.
    pub page_size: u32,
    /// Retries of a request answered 429, 5xx or not at all, before the (kind, namespace) is
    /// reported `failed`. Default: 5.
    pub retries: u32,
    /// First pause between retries, doubled each time (at most 30 s); a `Retry-After` from the
    /// server replaces it. Default: 200ms.
    #[serde(with = "humantime_serde")]
    pub retry_backoff: Duration,
    /// Longest `Retry-After` honoured; longer ones are cut to this. Default: 30s.
    #[serde(with = "humantime_serde")]
    pub max_retry_after: Duration,
    /// Timeout of one request (one page of a list). Default: 30s.
    #[serde(with = "humantime_serde")]
    pub request_timeout: Duration,
    /// Ask the API server for the predicted live object (server-side apply dry run) before
    /// reporting a drift, so that defaults and mutating webhooks are not mistaken for drift.
    /// Default: false (the client-side engine alone).
    pub server_side: bool,
    /// Field manager of the server-side dry runs. Default: `drift-detector`.
    pub field_manager: String,
    /// Read the live state from these files or folders (`kubectl get -A -o yaml` output, see
    /// [`crate::SnapshotSource`]) instead of an API server. Default: none (a cluster).
    pub snapshot: Option<PathBuf>,
}

impl Default for K8sConfig {
    fn default() -> Self {
        K8sConfig {
            cluster: None,
            kubeconfig: None,
            context: None,
            in_cluster: false,
            concurrency: 8,
            page_size: 500,
            retries: 5,
            retry_backoff: Duration::from_millis(200),
            max_retry_after: Duration::from_secs(30),
            request_timeout: Duration::from_secs(30),
            server_side: false,
            field_manager: "drift-detector".to_owned(),
            snapshot: None,
        }
    }
}

/// The live source this configuration names: the snapshot files when `snapshot` is set
/// (recorded as cluster `cluster`, default `snapshot`), else the cluster it connects to.
pub async fn live_source_from_config(
    config: K8sConfig,
) -> drift_model::Result<std::sync::Arc<dyn drift_model::LiveSource>> {
    config.validate()?;
    match &config.snapshot {
        Some(path) => {
            let cluster = config.cluster.clone().unwrap_or_else(|| "snapshot".to_owned());
            Ok(std::sync::Arc::new(crate::SnapshotSource::new(cluster, [path.clone()])))
        }
        None => Ok(std::sync::Arc::new(crate::K8sSource::connect(config).await?)),
    }
}

impl K8sConfig {
    /// Checks the settings without any I/O.
    pub fn validate(&self) -> drift_model::Result<()> {
        let bad = |m: &str| Err(drift_model::Error::config(format!("kubernetes source: {m}")));
        if self.in_cluster && (self.kubeconfig.is_some() || self.context.is_some()) {
            return bad("in_cluster cannot be combined with kubeconfig or context");
        }
        if self.snapshot.is_some() && (self.in_cluster || self.kubeconfig.is_some() || self.context.is_some()) {
            return bad("snapshot reads files; it cannot be combined with kubeconfig, context or in_cluster");
        }
        if self.concurrency == 0 {
            return bad("concurrency must be at least 1");
        }
        if self.page_size == 0 {
            return bad("page_size must be at least 1");
        }
        if self.request_timeout.is_zero() {
            return bad("request_timeout must be positive");
        }
        if self.field_manager.trim().is_empty() || self.field_manager.len() > 128 {
            return bad("field_manager must be 1 to 128 characters");
        }
        if self.cluster.as_deref().is_some_and(|c| c.trim().is_empty()) {
            return bad("cluster must not be empty");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn defaults_are_valid_and_documented_values() {
        let c: K8sConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(c, K8sConfig::default());
        c.validate().unwrap();
        assert_eq!(c.concurrency, 8);
        assert_eq!(c.retries, 5);
        assert!(!c.server_side);
    }

    #[test]
    fn contradictions_are_refused() {
        let c = K8sConfig { in_cluster: true, context: Some("x".into()), ..K8sConfig::default() };
        assert!(c.validate().is_err());
        let c = K8sConfig { concurrency: 0, ..K8sConfig::default() };
        assert!(c.validate().is_err());
        let c = K8sConfig { page_size: 0, ..K8sConfig::default() };
        assert!(c.validate().is_err());
        let c = K8sConfig { field_manager: " ".into(), ..K8sConfig::default() };
        assert!(c.validate().is_err());
        let c = K8sConfig { snapshot: Some("live".into()), context: Some("prod".into()), ..K8sConfig::default() };
        assert!(c.validate().is_err());
        let c = K8sConfig { snapshot: Some("live".into()), ..K8sConfig::default() };
        assert!(c.validate().is_ok());
    }

    #[test]
    fn human_durations_parse() {
        let c: K8sConfig = serde_json::from_str(r#"{"request_timeout": "1m", "retry_backoff": "50ms"}"#).unwrap();
        assert_eq!(c.request_timeout, Duration::from_secs(60));
        assert_eq!(c.retry_backoff, Duration::from_millis(50));
    }
}
