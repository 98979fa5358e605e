//! Watch mode: re-compare only the objects the cluster changes, within seconds.
//!
//! The desired objects of every repository are indexed by key and one [`LiveSource::watch`]
//! covers their scope. A reader task stamps each event's arrival and queues it (bounded); the
//! loop takes what has arrived, folds it in a [`Batch`] (newest state per object), re-compares
//! each object alone ([`targeted_report`], which may open or resolve drifts of that object
//! only) and records the report through the [`Scanner`]. The index is rebuilt every refresh
//! period (new commits) and when the stream ends.
//!
//! [`LiveSource::watch`]: drift_core::LiveSource::watch

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use drift_core::scan::{prepare, targeted_report};
use drift_core::source::{LiveEvent, LiveEventStream};
use drift_core::{Resource, ResourceKey, Scope};
use futures::StreamExt;
use tokio::sync::{mpsc, watch};

use crate::batch::{Batch, Note, Pending};
use crate::scanner::{Scanner, new_scan_id};

/// Events waiting to be handled; beyond this the reader waits (the watch stream buffers).
pub const WATCH_QUEUE: usize = 4096;
/// Most events taken from the queue at once.
pub const WATCH_BATCH: usize = 1024;
/// Pause before a watch whose stream ended starts again.
pub const RESTART_PAUSE: Duration = Duration::from_secs(1);

/// The desired objects of every repository, by key, and the scope they imply.
#[derive(Debug, Default)]
struct DesiredIndex {
    /// Repository, revision and objects of each desired source that could be read.
    all: Vec<(String, Option<String>, Vec<Resource>)>,
    by_key: HashMap<ResourceKey, Vec<(usize, usize)>>,
    scope: Scope,
}

async fn desired_index(scanner: &Scanner) -> DesiredIndex {
    let mut index = DesiredIndex::default();
    for source in scanner.desired() {
        match source.fetch().await {
            Ok(mut snapshot) => {
                let scope = prepare(&mut snapshot, &scanner.settings().options(""));
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

/// Re-compares one object against every repository that holds it and records the reports.
/// The watch lag is observed when the store has them; the extra sinks get them afterwards.
async fn recompare(scanner: &Scanner, index: &DesiredIndex, pending: &Pending) {
    let Some(places) = index.by_key.get(&pending.key) else { return };
    let mut reports = Vec::with_capacity(places.len());
    for &(repo, i) in places {
        let (repository, revision, resources) = &index.all[repo];
        let options = scanner.settings().options(format!("watch-{}", new_scan_id()));
        let report = targeted_report(
            resources,
            &resources[i],
            pending.live.as_ref(),
            scanner.engine(),
            scanner.live().cluster(),
            repository,
            revision.clone(),
            &options,
        );
        match scanner.record_in_store(&report).await {
            Ok(o) => tracing::info!(
                object = %pending.key, drifts = report.drifts.len(), opened = o.opened, resolved = o.resolved,
                "watch: re-compared"
            ),
            Err(e) => tracing::error!(object = %pending.key, error = %e, "watch: store unavailable"),
        }
        reports.push(report);
    }
    scanner.metrics().observe_watch_lag(pending.since.elapsed());
    for report in &reports {
        scanner.deliver(report).await;
    }
}

/// Moves events from the stream to the queue, stamped with the time they arrived.
async fn read_events(mut stream: LiveEventStream, tx: mpsc::Sender<(Instant, drift_core::Result<LiveEvent>)>) {
    while let Some(event) = stream.next().await {
        if tx.send((Instant::now(), event)).await.is_err() {
            return;
        }
    }
}

async fn handle(scanner: &Scanner, index: &DesiredIndex, batch: Batch) {
    let (pending, notes) = batch.finish();
    for note in notes {
        match note {
            Note::Desynced { kind, namespace, status } => tracing::warn!(
                %kind, ?namespace, status = status.label(),
                "watch out of sync; nothing there is resolved until it resyncs"
            ),
            Note::Synced { kind, namespace } => tracing::info!(%kind, ?namespace, "watch in sync"),
            Note::Error(e) => {
                scanner.metrics().record_source_error(e.kind());
                tracing::warn!(error = %e, "watch error");
            }
        }
    }
    for p in &pending {
        recompare(scanner, index, p).await;
    }
}

/// How one watch ended.
enum Ended {
    Stopped,
    Refresh,
    StreamClosed,
}

async fn watch_once(scanner: &Scanner, refresh: Duration, stop: &mut watch::Receiver<bool>) -> Ended {
    let index = desired_index(scanner).await;
    let stream = match scanner.live().watch(&index.scope).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "watch could not start; trying again after the refresh period");
            return tokio::select! {
                _ = stop.changed() => Ended::Stopped,
                _ = tokio::time::sleep(refresh) => Ended::Refresh,
            };
        }
    };
    let (tx, mut rx) = mpsc::channel(WATCH_QUEUE);
    let reader = tokio::spawn(read_events(stream, tx));
    let refresh = tokio::time::sleep(refresh);
    tokio::pin!(refresh);
    let ended = loop {
        tokio::select! {
            _ = stop.changed() => break Ended::Stopped,
            _ = &mut refresh => break Ended::Refresh,
            first = rx.recv() => {
                let Some((received, event)) = first else { break Ended::StreamClosed };
                let held = |k: &ResourceKey| index.by_key.contains_key(k);
                let mut batch = Batch::new();
                batch.push(received, event, held);
                while batch.events() < WATCH_BATCH {
                    match rx.try_recv() {
                        Ok((received, event)) => batch.push(received, event, held),
                        Err(_) => break,
                    }
                }
                handle(scanner, &index, batch).await;
            }
        }
    };
    reader.abort();
    ended
}

/// Watches until `stop` turns true (or its sender is dropped): each change of an object Git
/// holds is re-compared and recorded at once; the desired state is re-read every `refresh`.
pub async fn run_watch(scanner: Arc<Scanner>, refresh: Duration, mut stop: watch::Receiver<bool>) {
    loop {
        if *stop.borrow() {
            return;
        }
        match watch_once(&scanner, refresh, &mut stop).await {
            Ended::Stopped => return,
            Ended::Refresh => {}
            Ended::StreamClosed => {
                // The source gave up (it resumes by itself after drops and 410s): start again,
                // without spinning if it keeps ending.
                tracing::warn!(pause = ?RESTART_PAUSE, "watch stream ended; restarting");
                tokio::select! {
                    _ = stop.changed() => return,
                    _ = tokio::time::sleep(RESTART_PAUSE) => {}
                }
            }
        }
    }
}
