//! The live source for a real cluster, and watch mode: re-compare only the objects that change.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use drift_core::scan::{prepare, targeted_report};
use drift_core::source::LiveEvent;
use drift_core::{LiveSource, Resource, ResourceKey, Scope};
use futures::StreamExt;
use tokio::sync::watch;

use crate::cmd::serve::Scanner;
use crate::config::Config;

fn expand_home(path: &std::path::Path) -> std::path::PathBuf {
    match (path.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => std::path::Path::new(&home).join(rest),
        _ => path.to_owned(),
    }
}

/// Connects to the cluster: the kubeconfig and context of the configuration, else the
/// in-cluster service account when running in a pod, else the default kubeconfig.
pub async fn live_source(config: &Config) -> Result<Arc<dyn LiveSource>> {
    let in_cluster = config.live.kubeconfig.is_none()
        && config.live.context.is_none()
        && std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
    let k8s = drift_source_k8s::K8sConfig {
        cluster: Some(config.cluster.clone()),
        kubeconfig: config.live.kubeconfig.as_deref().map(expand_home),
        context: config.live.context.clone(),
        in_cluster,
        ..drift_source_k8s::K8sConfig::default()
    };
    Ok(Arc::new(drift_source_k8s::K8sSource::connect(k8s).await?))
}

/// The desired objects of every repository, by key, and the scope they imply.
struct DesiredIndex {
    all: Vec<(String, Option<String>, Vec<Resource>)>,
    by_key: HashMap<ResourceKey, Vec<(usize, usize)>>,
    scope: Scope,
}

async fn desired_index(scanner: &Scanner) -> DesiredIndex {
    let mut index = DesiredIndex { all: Vec::new(), by_key: HashMap::new(), scope: Scope::default() };
    for source in scanner.desired() {
        match source.fetch().await {
            Ok(mut snapshot) => {
                let options = crate::compose::scan_options(scanner.config());
                let scope = prepare(&mut snapshot, &options);
                for (gk, nss) in scope.entries {
                    for ns in nss {
                        index.scope.insert(gk.clone(), ns);
                    }
                }
                let repo = index.all.len();
                for (i, r) in snapshot.resources.iter().enumerate() {
                    index.by_key.entry(r.key.clone()).or_default().push((repo, i));
                }
                index.all.push((snapshot.repository, snapshot.revision, snapshot.resources));
            }
            Err(e) => tracing::warn!(repository = source.name(), error = %e, "watch: desired state unreadable"),
        }
    }
    index
}

async fn on_event(scanner: &Scanner, index: &DesiredIndex, key: &ResourceKey, live: Option<&Resource>) {
    let Some(places) = index.by_key.get(key) else { return };
    let started = Instant::now();
    for &(repo, i) in places {
        let (repository, revision, resources) = &index.all[repo];
        let mut options = crate::compose::scan_options(scanner.config());
        options.scan_id = format!("watch-{}", options.scan_id);
        let report = targeted_report(
            resources,
            &resources[i],
            live,
            scanner.engine(),
            scanner.live().cluster(),
            repository,
            revision.clone(),
            &options,
        );
        match scanner.store().sink.record(&report).await {
            Ok(o) => {
                tracing::info!(object = %key, drifts = report.drifts.len(), opened = o.opened, resolved = o.resolved, "watch: re-compared")
            }
            Err(e) => {
                scanner.metrics().record_source_error(e.kind());
                tracing::error!(object = %key, error = %e, "watch: store unavailable");
            }
        }
    }
    scanner.metrics().set_watch_lag(started.elapsed());
}

/// Starts watch mode when the live source can watch: each change of an object Git holds is
/// re-compared and recorded at once; the desired state is re-read every interval.
pub fn spawn_watch(scanner: Arc<Scanner>, mut stop: watch::Receiver<bool>) -> Option<tokio::task::JoinHandle<()>> {
    if !scanner.live().capabilities().watch {
        tracing::info!("the live source cannot watch; periodic scans only");
        return None;
    }
    Some(tokio::spawn(async move {
        loop {
            let index = desired_index(&scanner).await;
            let mut stream = match scanner.live().watch(&index.scope).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!(error = %e, "watch could not start; periodic scans only");
                    return;
                }
            };
            let refresh = tokio::time::sleep(scanner.config().interval);
            tokio::pin!(refresh);
            loop {
                tokio::select! {
                    _ = stop.changed() => return,
                    _ = &mut refresh => break,
                    event = stream.next() => match event {
                        None => break,
                        Some(Ok(LiveEvent::Applied(r))) => on_event(&scanner, &index, &r.key.clone(), Some(&r)).await,
                        Some(Ok(LiveEvent::Deleted(key))) => on_event(&scanner, &index, &key, None).await,
                        Some(Ok(LiveEvent::Desynced { kind, namespace, status })) => {
                            tracing::warn!(%kind, ?namespace, status = status.label(), "watch out of sync; nothing there is resolved until it resyncs");
                        }
                        Some(Ok(LiveEvent::Synced { kind, namespace })) => tracing::info!(%kind, ?namespace, "watch in sync"),
                        Some(Err(e)) => {
                            scanner.metrics().record_source_error(e.kind());
                            tracing::warn!(error = %e, "watch error");
                        }
                    },
                }
            }
        }
    }))
}
