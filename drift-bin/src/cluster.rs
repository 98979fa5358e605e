//! The live source for a real cluster, and watch mode: re-compare only the objects that change.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use drift_core::scan::{prepare, targeted_report};
use drift_core::source::{LiveEvent, LiveEventStream};
use drift_core::{LiveSource, Resource, ResourceKey, Scope};
use futures::StreamExt;
use tokio::sync::{mpsc, watch};

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

/// Re-compares one object and records the result; `received` is when its newest event reached
/// the detector (the watch lag runs from there to the commit).
async fn on_event(
    scanner: &Scanner,
    index: &DesiredIndex,
    key: &ResourceKey,
    live: Option<&Resource>,
    received: Instant,
) {
    let Some(places) = index.by_key.get(key) else { return };
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
    scanner.metrics().observe_watch_lag(received.elapsed());
}

/// Events waiting to be handled; beyond this the reader waits (the watch stream buffers).
const WATCH_QUEUE: usize = 4096;
/// Most events taken from the queue at once (coalesced per object).
const WATCH_BATCH: usize = 1024;

/// Moves events from the stream to the queue, stamped with the time they arrived.
async fn read_events(mut stream: LiveEventStream, tx: mpsc::Sender<(Instant, drift_core::Result<LiveEvent>)>) {
    while let Some(event) = stream.next().await {
        if tx.send((Instant::now(), event)).await.is_err() {
            return;
        }
    }
}

/// Handles what arrived together: the newest state of each object is re-compared once, in
/// arrival order of the objects.
async fn handle_batch(scanner: &Scanner, index: &DesiredIndex, batch: Vec<(Instant, drift_core::Result<LiveEvent>)>) {
    let mut latest: Vec<(ResourceKey, Option<Resource>, Instant)> = Vec::new();
    let mut slot: HashMap<ResourceKey, usize> = HashMap::new();
    for (received, event) in batch {
        let (key, live) = match event {
            Ok(LiveEvent::Applied(r)) => (r.key.clone(), Some(r)),
            Ok(LiveEvent::Deleted(key)) => (key, None),
            Ok(LiveEvent::Desynced { kind, namespace, status }) => {
                tracing::warn!(%kind, ?namespace, status = status.label(), "watch out of sync; nothing there is resolved until it resyncs");
                continue;
            }
            Ok(LiveEvent::Synced { kind, namespace }) => {
                tracing::info!(%kind, ?namespace, "watch in sync");
                continue;
            }
            Err(e) => {
                scanner.metrics().record_source_error(e.kind());
                tracing::warn!(error = %e, "watch error");
                continue;
            }
        };
        if !index.by_key.contains_key(&key) {
            continue;
        }
        match slot.get(&key) {
            // The newest state wins; the lag still counts from the first event of the object.
            Some(&i) => latest[i].1 = live,
            None => {
                slot.insert(key.clone(), latest.len());
                latest.push((key, live, received));
            }
        }
    }
    for (key, live, received) in &latest {
        on_event(scanner, index, key, live.as_ref(), *received).await;
    }
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
            let stream = match scanner.live().watch(&index.scope).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!(error = %e, "watch could not start; periodic scans only");
                    return;
                }
            };
            let (tx, mut rx) = mpsc::channel(WATCH_QUEUE);
            let reader = tokio::spawn(read_events(stream, tx));
            let refresh = tokio::time::sleep(scanner.config().interval);
            tokio::pin!(refresh);
            let mut stream_ended = false;
            loop {
                tokio::select! {
                    _ = stop.changed() => {
                        reader.abort();
                        return;
                    }
                    _ = &mut refresh => break,
                    first = rx.recv() => {
                        let Some(first) = first else {
                            stream_ended = true;
                            break;
                        };
                        let mut batch = vec![first];
                        while batch.len() < WATCH_BATCH {
                            match rx.try_recv() {
                                Ok(next) => batch.push(next),
                                Err(_) => break,
                            }
                        }
                        handle_batch(&scanner, &index, batch).await;
                    }
                }
            }
            reader.abort();
            if stream_ended {
                // The source gave up (it resumes by itself after drops and 410s): start again,
                // without spinning if it keeps ending.
                tracing::warn!("watch stream ended; restarting in 1 s");
                tokio::select! {
                    _ = stop.changed() => return,
                    _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
                }
            }
        }
    }))
}
