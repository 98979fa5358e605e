//! Watch mode: re-compare only the objects the cluster changes, within seconds.
//!
//! The desired objects of every repository are indexed by key (kept compact until their live
//! object changes) and one [`LiveSource::watch`] covers their scope. A reader task stamps each event's arrival and queues it (bounded); the
//! loop takes what has arrived, folds it in a [`Batch`] (newest state per object), re-compares
//! each object alone ([`targeted_report`], which may open or resolve drifts of that object
//! only) and records the reports of a batch as one, one store transaction a batch, through the
//! [`Scanner`]. While one batch is written, the events that arrive are folded into the next (the
//! queue keeps emptying): when changes come faster than they are recorded, the batches grow with
//! the time the store takes (up to [`WATCH_BATCH`] events), and only then does the reader wait:
//! nothing is dropped. The index is rebuilt every refresh
//! period (new commits) and when the stream ends.
//!
//! [`LiveSource::watch`]: drift_core::LiveSource::watch

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use drift_core::scan::{discover_cluster_scoped, prepare, targeted_report};
use drift_core::source::{LiveEvent, LiveEventStream};
use drift_core::{CompactResource, Resource, ResourceKey, Scope};
use futures::StreamExt;
use tokio::sync::{mpsc, watch};

use crate::batch::{Batch, Note, Pending};
use crate::scanner::{Scanner, Version, new_scan_id};

/// Events waiting to be handled; beyond this the reader waits (the watch stream buffers). Each
/// `Applied` holds a full live object: a watch's first list announces every object Git holds
/// faster than they are re-compared (docs/benchmarks.md, issue 16).
pub const WATCH_QUEUE: usize = 256;
/// Most events one batch folds (taken from the queue while the batch before it is written).
pub const WATCH_BATCH: usize = 1024;
/// First pause before a watch whose stream ended starts again; it doubles (with jitter) while
/// the watch keeps ending, up to [`MAX_RESTART_PAUSE`].
pub const RESTART_PAUSE: Duration = Duration::from_secs(1);
/// Longest pause between two restarts of a watch that keeps failing.
pub const MAX_RESTART_PAUSE: Duration = Duration::from_secs(60);
/// A watch that ran this long without ending was healthy: the next end starts the backoff over.
pub const HEALTHY_RUN: Duration = Duration::from_secs(30);
/// During an outage, how often a summary of the repeated errors is logged (the first one of a
/// kind is logged at once).
pub const LOG_SUMMARY: Duration = Duration::from_secs(60);

/// The pause before restart number `failures` (from 1): exponential from [`RESTART_PAUSE`],
/// capped at [`MAX_RESTART_PAUSE`], with equal jitter (half fixed, half drawn from `nanos`) so
/// that detectors restarted by one outage do not come back in step.
pub fn restart_pause(failures: u32, nanos: u32) -> Duration {
    let exp = RESTART_PAUSE.saturating_mul(1 << failures.saturating_sub(1).min(16)).min(MAX_RESTART_PAUSE);
    let half = exp / 2;
    let jitter = half.mul_f64(f64::from(nanos % 1_000_000) / 1_000_000.0);
    half + jitter
}

/// Repeated messages of an outage: the first of each kind is logged, then at most one summary
/// per [`LOG_SUMMARY`] with how many were left out.
#[derive(Debug, Default)]
pub struct LogThrottle {
    seen: HashMap<String, (Instant, u64)>,
}

impl LogThrottle {
    /// Whether to log a message of `kind` now; `Some(n)`: yes, with `n` left out since the last
    /// one logged.
    pub fn admit(&mut self, kind: &str, now: Instant) -> Option<u64> {
        match self.seen.get_mut(kind) {
            None => {
                self.seen.insert(kind.to_owned(), (now, 0));
                Some(0)
            }
            Some((last, skipped)) if now.duration_since(*last) >= LOG_SUMMARY => {
                let n = *skipped;
                *last = now;
                *skipped = 0;
                Some(n)
            }
            Some((_, skipped)) => {
                *skipped += 1;
                None
            }
        }
    }

    /// Forgets a kind (the outage is over): its next message is logged at once.
    pub fn clear(&mut self, kind: &str) -> bool {
        self.seen.remove(kind).is_some()
    }
}

/// The desired objects of every repository, by key, and the scope they imply.
#[derive(Debug, Default)]
struct DesiredIndex {
    /// Each desired source that could be read.
    all: Vec<Repository>,
    by_key: HashMap<ResourceKey, Vec<(usize, usize)>>,
    scope: Scope,
}

/// One repository's objects as the watch keeps them until the next refresh: compact (JSON
/// text, about a twentieth of a tree), each expanded when its live object changes.
#[derive(Debug)]
struct Repository {
    name: String,
    revision: Option<String>,
    objects: Vec<CompactResource>,
    /// The objects whose drifts depend on others of the repository
    /// ([`drift_core::Comparator::relations`]; `None`: any may): those are compared with the
    /// whole repository expanded, the others alone.
    related: Option<HashSet<ResourceKey>>,
}

impl Repository {
    /// Re-compares object `i` with the live state `live`.
    fn report(&self, i: usize, live: Option<&Resource>, scanner: &Scanner) -> drift_core::ScanReport {
        let desired = self.objects[i].expand();
        let depends = self.related.as_ref().is_none_or(|r| r.contains(&desired.key));
        let whole: Vec<Resource> =
            if depends { self.objects.iter().map(CompactResource::expand).collect() } else { Vec::new() };
        // An object that depends on no other gets the drifts of a comparison alone, whatever
        // the set holds: itself is enough.
        let set = if depends { whole.as_slice() } else { std::slice::from_ref(&desired) };
        let options = scanner.settings().options(format!("watch-{}", new_scan_id()));
        targeted_report(
            set,
            &desired,
            live,
            scanner.comparator(),
            scanner.live().cluster(),
            &self.name,
            self.revision.clone(),
            &options,
        )
    }
}

async fn desired_index(scanner: &Scanner) -> DesiredIndex {
    let mut index = DesiredIndex::default();
    for source in scanner.desired() {
        match source.fetch().await {
            Ok(mut snapshot) => {
                let mut options = scanner.settings().options("");
                discover_cluster_scoped(scanner.live().as_ref(), &snapshot, &mut options).await;
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
                let related = scanner.comparator().relations(&snapshot.resources);
                index.all.push(Repository {
                    name: snapshot.repository,
                    revision: snapshot.revision,
                    objects: snapshot.resources.iter().map(CompactResource::new).collect(),
                    related,
                });
            }
            Err(e) => tracing::warn!(repository = source.name(), error = %e, "watch: desired state unreadable"),
        }
    }
    // Only the objects Git holds are worth caching and announcing: the others are dropped as
    // they arrive (a cluster much larger than Git then costs little memory).
    index.scope.only = Some(index.by_key.keys().cloned().collect());
    index
}

/// Re-compares the objects of a batch against every repository that holds them and records,
/// for each repository, one report of them all (one store transaction a batch, however many
/// objects changed: under a storm of changes the watch keeps up by taking more objects at a
/// time, never by leaving changes out). The watch lag of each object is observed when the
/// store has its report; the extra sinks get the reports afterwards.
async fn recompare(scanner: &Scanner, index: &DesiredIndex, pending: &[Pending]) {
    let begun = Instant::now();
    let mut by_repo: Vec<Vec<drift_core::ScanReport>> = index.all.iter().map(|_| Vec::new()).collect();
    let mut compared = Vec::with_capacity(pending.len());
    for p in pending {
        let Some(places) = index.by_key.get(&p.key) else { continue };
        let version = p.live.as_ref().and_then(Version::of);
        if scanner.pass_saw_newer(&p.key, p.received, version) {
            // A pass recorded a state at least as new as this event (a watch that relists, or
            // queues that waited): the pass's view stands.
            tracing::debug!(object = %p.key, "watch: a pass recorded a newer state; event left out");
            continue;
        }
        scanner.mark_watched(&p.key);
        for &(repo, i) in places {
            by_repo[repo].push(index.all[repo].report(i, p.live.as_ref(), scanner));
        }
        compared.push(p.since);
    }
    // Where a batch's time goes: re-comparing (this process's CPU) and the store's write.
    let compare_ms = millis(begun.elapsed());
    let mut reports = Vec::new();
    for reports_of_repo in by_repo {
        let objects = reports_of_repo.len();
        let Some(report) = merge(reports_of_repo) else { continue };
        let writing = Instant::now();
        let recorded = scanner.record_in_store(&report).await;
        let write_ms = millis(writing.elapsed());
        match recorded {
            Ok(o) => tracing::info!(
                objects, repository = %report.repository, drifts = report.drifts.len(), opened = o.opened,
                resolved = o.resolved, compare_ms, write_ms, "watch: re-compared"
            ),
            Err(e) => {
                tracing::error!(objects, repository = %report.repository, error = %e, write_ms, "watch: store unavailable")
            }
        }
        reports.push(report);
    }
    for since in compared {
        scanner.metrics().observe_watch_lag(since.elapsed());
    }
    for report in &reports {
        scanner.deliver(report).await;
    }
}

/// Whole milliseconds of a duration, for a log field.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The reports of one object each (of one repository, [`targeted_report`]) as one report: its
/// objects, their drifts and findings, and their coverage together, so that it opens, changes
/// and resolves exactly what the reports would one after the other (each names only its own
/// object and `desired_complete` is false, so none resolves another's drifts). `None` for no
/// report.
fn merge(mut reports: Vec<drift_core::ScanReport>) -> Option<drift_core::ScanReport> {
    if reports.len() <= 1 {
        return reports.pop();
    }
    // `desired` stays sorted: the objects of a batch are distinct.
    reports.sort_by(|a, b| a.desired.cmp(&b.desired));
    let mut rest = reports.into_iter();
    let mut merged = rest.next()?;
    merged.scan_id = format!("watch-{}", new_scan_id());
    let aligned = |r: &drift_core::ScanReport| {
        let n = r.desired.len();
        let pad = |v: &[String]| (0..n).map(|j| v.get(j).cloned().unwrap_or_default()).collect::<Vec<_>>();
        (pad(&r.desired_digests), pad(&r.live_versions))
    };
    let (mut digests, mut versions) = aligned(&merged);
    let mut compared = merged.summary.resources_compared;
    for r in rest {
        let (d, v) = aligned(&r);
        digests.extend(d);
        versions.extend(v);
        compared += r.summary.resources_compared;
        merged.started_at = merged.started_at.min(r.started_at);
        merged.finished_at = merged.finished_at.max(r.finished_at);
        merged.outcome = worse(merged.outcome, r.outcome);
        merged.drifts.extend(r.drifts);
        for e in r.coverage.entries {
            let kind = drift_core::GroupKind::new(&e.group, &e.kind);
            merged.coverage.set(&kind, e.namespace.as_deref(), e.status);
        }
        merged.warnings.extend(r.warnings);
        merged.desired.extend(r.desired);
        merged.desired_complete &= r.desired_complete;
        merged.uncomparable.extend(r.uncomparable);
        merged.findings.extend(r.findings);
        for side in r.policy_sides {
            if !merged.policy_sides.contains(&side) {
                merged.policy_sides.push(side);
            }
        }
    }
    merged.uncomparable.sort();
    // An empty list means "unknown" for every object, as in a report of one.
    merged.desired_digests = if digests.iter().all(String::is_empty) { Vec::new() } else { digests };
    merged.live_versions = if versions.iter().all(String::is_empty) { Vec::new() } else { versions };
    merged.summary = drift_core::Summary::of(&merged.drifts, compared, merged.warnings.len());
    Some(merged)
}

/// The worse of two outcomes.
fn worse(a: drift_core::ScanOutcome, b: drift_core::ScanOutcome) -> drift_core::ScanOutcome {
    use drift_core::ScanOutcome::{Failed, Partial, Success};
    match (a, b) {
        (Failed, _) | (_, Failed) => Failed,
        (Partial, _) | (_, Partial) => Partial,
        (Success, Success) => Success,
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

/// The (kind, namespace) pairs whose watch lost sync and has not relisted yet.
type OutOfSync = std::collections::HashSet<(drift_core::GroupKind, Option<String>)>;

/// A batch being handled: its future gives back the log throttle and the out-of-sync pairs it
/// updated.
type Writing<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = (LogThrottle, OutOfSync)> + Send + 'a>>;

async fn handle(
    scanner: &Scanner,
    index: &DesiredIndex,
    batch: Batch,
    mut throttle: LogThrottle,
    mut out_of_sync: OutOfSync,
) -> (LogThrottle, OutOfSync) {
    let (pending, notes) = batch.finish();
    for note in notes {
        match note {
            Note::Desynced { kind, namespace, status } => {
                out_of_sync.insert((kind.clone(), namespace.clone()));
                scanner.set_out_of_sync(out_of_sync.len());
                let pair = format!("desynced {kind} {namespace:?}");
                if let Some(left_out) = throttle.admit(&pair, Instant::now()) {
                    tracing::warn!(
                        %kind, ?namespace, status = status.label(), left_out,
                        "watch out of sync; nothing there is resolved until it resyncs"
                    );
                }
            }
            Note::Synced { kind, namespace } => {
                out_of_sync.remove(&(kind.clone(), namespace.clone()));
                scanner.set_out_of_sync(out_of_sync.len());
                throttle.clear(&format!("desynced {kind} {namespace:?}"));
                tracing::info!(%kind, ?namespace, "watch in sync");
            }
            Note::Error(e) => {
                // Counted every time; logged once, then as a summary while it lasts.
                scanner.metrics().record_source_error(e.kind());
                if let Some(left_out) = throttle.admit(e.kind().as_str(), Instant::now()) {
                    tracing::warn!(error = %e, left_out, "watch error");
                }
            }
        }
    }
    recompare(scanner, index, &pending).await;
    (throttle, out_of_sync)
}

/// How one watch ended.
enum Ended {
    Stopped,
    Refresh,
    StreamClosed,
}

/// The number of (kind, namespace) pairs of a scope.
fn pairs(scope: &Scope) -> usize {
    scope.entries.values().map(std::collections::BTreeSet::len).sum()
}

/// Watches once, from a fresh read of the desired state; returns how it ended and how many
/// (kind, namespace) pairs it watched.
async fn watch_once(
    scanner: &Scanner,
    refresh: Duration,
    stop: &mut watch::Receiver<bool>,
    throttle: &mut LogThrottle,
) -> (Ended, usize) {
    // Reading the desired state and starting the watch (its first lists) take seconds on a big
    // cluster: a stop (the cluster handed to another replica) ends them at once.
    let index = tokio::select! {
        index = desired_index(scanner) => index,
        _ = stop.changed() => return (Ended::Stopped, 0),
    };
    let watched = pairs(&index.scope);
    let started = tokio::select! {
        started = scanner.live().watch(&index.scope) => started,
        _ = stop.changed() => return (Ended::Stopped, watched),
    };
    let stream = match started {
        Ok(s) => s,
        Err(e) => {
            if let Some(left_out) = throttle.admit("watch-start", Instant::now()) {
                tracing::error!(error = %e, left_out, "watch could not start; trying again after the refresh period");
            }
            // Nothing of the scope is seen until it starts.
            scanner.set_out_of_sync(watched);
            let ended = tokio::select! {
                _ = stop.changed() => Ended::Stopped,
                _ = tokio::time::sleep(refresh) => Ended::Refresh,
            };
            return (ended, watched);
        }
    };
    // A new watch lists every pair first: none has lost sync yet.
    scanner.set_out_of_sync(0);
    let (tx, mut rx) = mpsc::channel(WATCH_QUEUE);
    let reader = tokio::spawn(read_events(stream, tx));
    let refresh = tokio::time::sleep(refresh);
    tokio::pin!(refresh);
    // Two batches at a time: the one being written and the next, which folds every event that
    // arrives meanwhile (up to WATCH_BATCH events). The queue is emptied while a batch is written,
    // so the next batch grows with the time the store takes instead of stopping at the queue's
    // size; the reader (and the stream behind it) waits only while the next batch is full.
    let held = |k: &ResourceKey| index.by_key.contains_key(k);
    let mut kept = Some((std::mem::take(throttle), OutOfSync::new()));
    let mut writing: Option<Writing<'_>> = None;
    let mut next = Batch::new();
    let mut closed = false;
    let ended = loop {
        if writing.is_none() && !next.is_empty() {
            while next.events() < WATCH_BATCH {
                match rx.try_recv() {
                    Ok((received, event)) => next.push(received, event, held),
                    Err(_) => break,
                }
            }
            if let Some((throttle, out_of_sync)) = kept.take() {
                writing = Some(Box::pin(handle(scanner, &index, std::mem::take(&mut next), throttle, out_of_sync)));
            }
        }
        if closed && writing.is_none() && next.is_empty() {
            break Ended::StreamClosed;
        }
        tokio::select! {
            _ = stop.changed() => break Ended::Stopped,
            _ = &mut refresh => break Ended::Refresh,
            done = async {
                match writing.as_mut() {
                    Some(w) => w.await,
                    None => std::future::pending().await,
                }
            }, if writing.is_some() => {
                writing = None;
                kept = Some(done);
            }
            event = rx.recv(), if !closed && next.events() < WATCH_BATCH => match event {
                Some((received, event)) => next.push(received, event, held),
                None => closed = true,
            },
        }
    };
    // A batch being written is written to the end (its transaction, its lag, its sinks); the
    // events of the next one are left, as a stopped or refreshed watch leaves its queue (the next
    // watch lists every object again).
    if let Some(w) = writing {
        kept = Some(w.await);
    }
    if let Some((kept_throttle, _)) = kept {
        *throttle = kept_throttle;
    }
    reader.abort();
    (ended, watched)
}

/// Watches until `stop` turns true (or its sender is dropped): each change of an object Git
/// holds is re-compared and recorded at once; the desired state is re-read every `refresh`.
pub async fn run_watch(scanner: Arc<Scanner>, refresh: Duration, mut stop: watch::Receiver<bool>) {
    let mut throttle = LogThrottle::default();
    let mut failures = 0u32;
    loop {
        if *stop.borrow() {
            return;
        }
        let started = Instant::now();
        let (ended, watched) = watch_once(&scanner, refresh, &mut stop, &mut throttle).await;
        match ended {
            Ended::Stopped => {
                scanner.set_out_of_sync(0);
                return;
            }
            Ended::Refresh => {
                failures = 0;
                if throttle.clear("watch-start") {
                    tracing::info!("watch started again");
                }
            }
            Ended::StreamClosed => {
                // The source gave up (it resumes by itself after drops and 410s): start again,
                // backing off while it keeps ending (an API server or a repository that is
                // gone), and logging the change of state once, then a summary a minute.
                failures = if started.elapsed() >= HEALTHY_RUN { 1 } else { failures.saturating_add(1) };
                let nanos =
                    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
                let pause = restart_pause(failures, nanos);
                // Until it starts again the watch sees nothing of its scope.
                scanner.set_out_of_sync(watched);
                if let Some(left_out) = throttle.admit("stream-ended", Instant::now()) {
                    tracing::warn!(?pause, failures, left_out, "watch stream ended; restarting after a pause");
                }
                tokio::select! {
                    _ = stop.changed() => {
                        scanner.set_out_of_sync(0);
                        return;
                    }
                    _ = tokio::time::sleep(pause) => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restarts_back_off_exponentially_with_jitter_up_to_a_cap() {
        let low: Vec<Duration> = (1..=9).map(|f| restart_pause(f, 0)).collect();
        let high: Vec<Duration> = (1..=9).map(|f| restart_pause(f, 999_999)).collect();
        assert_eq!(low[0], Duration::from_millis(500), "half of the first pause is fixed");
        assert!(high[0] < Duration::from_secs(1) && high[0] > Duration::from_millis(990));
        for w in low.windows(2) {
            assert!(w[1] >= w[0], "never shorter: {low:?}");
        }
        assert_eq!(low[8], MAX_RESTART_PAUSE / 2, "capped");
        assert!(high[8] <= MAX_RESTART_PAUSE);
        assert_eq!(restart_pause(u32::MAX, 0), MAX_RESTART_PAUSE / 2, "no overflow");
        // 75 s of a watch that ends at once: a handful of restarts, not one a second.
        let mut t = Duration::ZERO;
        let mut restarts = 0;
        while t < Duration::from_secs(75) {
            restarts += 1;
            t += restart_pause(restarts, 0);
        }
        assert!(restarts <= 8, "{restarts} restarts in 75 s");
    }

    #[test]
    fn an_outage_is_logged_once_then_summarised() {
        let mut th = LogThrottle::default();
        let t0 = Instant::now();
        assert_eq!(th.admit("unavailable", t0), Some(0));
        for i in 1..=50 {
            assert_eq!(th.admit("unavailable", t0 + Duration::from_millis(100 * i)), None);
        }
        assert_eq!(th.admit("other", t0), Some(0), "each kind on its own");
        assert_eq!(th.admit("unavailable", t0 + LOG_SUMMARY), Some(50), "a summary says how many were left out");
        assert!(th.clear("unavailable"));
        assert_eq!(th.admit("unavailable", t0 + LOG_SUMMARY), Some(0), "after the outage, at once");
    }
}
