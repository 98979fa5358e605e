//! Watch mode: one kube-runtime watcher per (kind, namespace) of the scope, a compact cache of
//! what is in scope, and change events for the scanner.
//!
//! Events, per (kind, namespace):
//!
//! - after the first list: [`LiveEvent::Applied`] for every object, then [`LiveEvent::Synced`];
//! - then [`LiveEvent::Applied`] when an object's content changes (a change of `status` alone,
//!   or of `resourceVersion` alone, is not a change: the comparison never reads them) and
//!   [`LiveEvent::Deleted`] when it goes away;
//! - a dropped connection is resumed from the last resourceVersion by the watcher, so nothing
//!   is missed and nothing is reported;
//! - an error (410 Gone, a refused watch, a failed list, 403) sends [`LiveEvent::Desynced`];
//!   the watch starts again from a fresh list after a pause, and the list is compared with the
//!   cache: objects that changed meanwhile are `Applied`, objects that disappeared are
//!   `Deleted`, and [`LiveEvent::Synced`] closes the relist. Until then nothing of that pair
//!   may be resolved.
//!
//! The cache keeps, per object, its name and the object as compact JSON without `status`,
//! `metadata.resourceVersion` and the managedFields entries of the status subresource: what the
//! comparison (which drops them anyway when normalising) and the attribution need. When the
//! scope names the objects the caller holds (`Scope::only`), only those are cached and
//! announced; the others are dropped as they arrive, before any conversion.

use std::collections::{BTreeMap, BTreeSet};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use drift_model::source::LiveEvent;
use drift_model::{Coverage, CoverageStatus, GroupKind, LiveSnapshot, Provenance, Resource, ResourceKey, Scope};
use futures::{Stream, StreamExt as _};
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher;
use serde_json::Value;

use crate::error::K8sError;
use crate::source::{K8sSource, KindInfo};

type PairKey = (GroupKind, Option<String>);

/// Largest page of a watcher's list. A listing watcher holds its page of full objects until it
/// has announced the ones in scope (waiting for the consumer when the queue is full), and
/// `concurrency` watchers list at once: smaller pages than a fetch's keep that small.
const WATCH_PAGE: u32 = 100;

/// Events waiting for the consumer. Each `Applied` carries a full object (with managedFields,
/// often 10 KiB or more in memory): the first list of a large scope announces every object in
/// it faster than the consumer re-compares them, so this bound is what the queue weighs.
const WATCH_CHANNEL: usize = 256;
type ObjectName = (Option<Box<str>>, Box<str>);

#[derive(Debug)]
struct PairCache {
    api_version: String,
    objects: BTreeMap<ObjectName, Box<[u8]>>,
    status: CoverageStatus,
}

/// The shared state of a watch: the cache and the sync status of each (kind, namespace).
#[derive(Debug, Default)]
struct WatchState {
    pairs: Mutex<BTreeMap<PairKey, PairCache>>,
    /// The objects the caller holds (`Scope::only`): the others are neither cached nor
    /// announced. `None`: every object.
    only: Option<BTreeSet<ResourceKey>>,
}

/// Size of the watch cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Objects held.
    pub objects: usize,
    /// Bytes of the stored objects and their names (heap payload, without map overhead).
    pub payload_bytes: usize,
    /// An estimate of the whole heap held: payload plus about 64 bytes of map node and boxes
    /// per object.
    pub estimated_bytes: usize,
}

/// A running watch: a stream of [`LiveEvent`]s plus a view of the cache. Dropping it stops
/// every watcher.
pub struct K8sWatch {
    rx: tokio::sync::mpsc::Receiver<drift_model::Result<LiveEvent>>,
    state: Arc<WatchState>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    cluster: String,
}

impl std::fmt::Debug for K8sWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("K8sWatch").field("cluster", &self.cluster).field("watchers", &self.tasks.len()).finish()
    }
}

impl Drop for K8sWatch {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Stream for K8sWatch {
    type Item = drift_model::Result<LiveEvent>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

impl K8sWatch {
    /// The coverage now: `complete` for the pairs in sync, the reason for the others.
    pub fn coverage(&self) -> Coverage {
        let pairs = crate::lock(&self.state.pairs);
        let mut c = Coverage::default();
        for ((gk, ns), p) in pairs.iter() {
            c.set(gk, ns.as_deref(), p.status.clone());
        }
        c
    }

    /// Whether every (kind, namespace) is in sync.
    pub fn is_synced(&self) -> bool {
        crate::lock(&self.state.pairs).values().all(|p| p.status.is_complete())
    }

    /// The cached objects and the coverage, as a snapshot for a full comparison (after a new
    /// desired revision) without listing again. Objects of pairs not in sync are left out, and
    /// their coverage says why.
    pub fn snapshot(&self) -> LiveSnapshot {
        let pairs = crate::lock(&self.state.pairs);
        let mut coverage = Coverage::default();
        let mut resources = Vec::new();
        for ((gk, ns), p) in pairs.iter() {
            coverage.set(gk, ns.as_deref(), p.status.clone());
            if !p.status.is_complete() {
                continue;
            }
            for ((obj_ns, name), body) in &p.objects {
                let Ok(object) = serde_json::from_slice::<Value>(body) else { continue };
                let key = ResourceKey {
                    group: gk.group.clone(),
                    kind: gk.kind.clone(),
                    namespace: obj_ns.as_deref().map(str::to_owned),
                    name: name.to_string(),
                };
                resources.push(Resource {
                    key,
                    api_version: p.api_version.clone(),
                    object: object.into(),
                    provenance: Provenance { cluster: Some(self.cluster.clone()), ..Provenance::default() },
                });
            }
        }
        resources.sort_by(|a, b| a.key.cmp(&b.key));
        LiveSnapshot { cluster: self.cluster.clone(), resources, coverage }
    }

    /// How much the cache holds.
    pub fn stats(&self) -> CacheStats {
        let pairs = crate::lock(&self.state.pairs);
        let mut s = CacheStats::default();
        for p in pairs.values() {
            for ((ns, name), body) in &p.objects {
                s.objects += 1;
                s.payload_bytes += body.len() + name.len() + ns.as_ref().map_or(0, |n| n.len());
            }
        }
        s.estimated_bytes = s.payload_bytes + s.objects * 64;
        s
    }
}

/// The object as the cache stores it: without `status`, `metadata.resourceVersion` and the
/// managedFields entries of the status subresource.
pub fn cache_form(object: &Value) -> Value {
    let mut o = object.clone();
    if let Some(m) = o.as_object_mut() {
        m.remove("status");
        if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
            if let Some(Value::Array(fields)) = meta.get_mut("managedFields") {
                fields.retain(|e| e.get("subresource").and_then(Value::as_str) != Some("status"));
            }
        }
    }
    o
}

struct PairWatcher {
    source: Arc<K8sSource>,
    state: Arc<WatchState>,
    tx: tokio::sync::mpsc::Sender<drift_model::Result<LiveEvent>>,
    gk: GroupKind,
    namespace: Option<String>,
    /// Permits to be listing: a watcher holds one from its list's start to its end, so that
    /// at most `concurrency` pairs hold a page of full objects at once. Without it, every
    /// pair's first page was read at once and waited, whole, for the bounded event queue: a
    /// watch of 100,000 objects held them all as full objects (gigabytes) at its start.
    listing: Arc<tokio::sync::Semaphore>,
}

enum Step {
    /// The consumer is gone: stop.
    Stop,
    /// Start again after a pause.
    Retry(CoverageStatus),
}

impl PairWatcher {
    fn key(&self) -> PairKey {
        (self.gk.clone(), self.namespace.clone())
    }

    async fn send(&self, event: LiveEvent) -> bool {
        self.tx.send(Ok(event)).await.is_ok()
    }

    /// Records a new status; sends `Desynced` when the pair was in sync or its reason changed.
    async fn desync(&self, status: CoverageStatus) -> bool {
        let changed = {
            let mut pairs = crate::lock(&self.state.pairs);
            match pairs.get_mut(&self.key()) {
                Some(p) if p.status == status => false,
                Some(p) => {
                    p.status = status.clone();
                    true
                }
                None => true,
            }
        };
        if !changed {
            return true;
        }
        self.send(LiveEvent::Desynced { kind: self.gk.clone(), namespace: self.namespace.clone(), status }).await
    }

    fn object_name(&self, object: &Value) -> Option<ObjectName> {
        let meta = object.get("metadata")?;
        let name = meta.get("name")?.as_str()?;
        let ns = meta.get("namespace").and_then(Value::as_str).filter(|s| !s.is_empty());
        Some((ns.map(Into::into), name.into()))
    }

    /// Stores an object; returns its name, and the resource to announce when its content
    /// changed.
    fn store(&self, info: &KindInfo, obj: DynamicObject) -> Result<Option<(ObjectName, Option<Resource>)>, K8sError> {
        if let Some(only) = &self.state.only {
            let key = ResourceKey::new(
                &self.gk.group,
                &self.gk.kind,
                obj.metadata.namespace.as_deref().or(self.namespace.as_deref()),
                obj.metadata.name.as_deref().unwrap_or_default(),
            );
            if obj.metadata.name.is_some() && !only.contains(&key) {
                return Ok(None);
            }
        }
        let value = serde_json::to_value(&obj).map_err(|e| K8sError::Decode {
            verb: "watch",
            what: self.gk.to_string(),
            message: e.to_string(),
        })?;
        let resource = self.source.to_resource(info, value)?;
        let Some(name) = self.object_name(&resource.object) else { return Ok(None) };
        let body: Box<[u8]> = serde_json::to_vec(&cache_form(&resource.object)).unwrap_or_default().into();
        let mut pairs = crate::lock(&self.state.pairs);
        let pair = pairs.entry(self.key()).or_insert_with(|| PairCache {
            api_version: info.api_version(),
            objects: BTreeMap::new(),
            status: CoverageStatus::Failed { message: "watch starting".into() },
        });
        pair.api_version = info.api_version();
        let changed = pair.objects.get(&name).is_none_or(|old| **old != *body);
        pair.objects.insert(name.clone(), body);
        Ok(Some((name, changed.then_some(resource))))
    }

    fn remove(&self, name: &ObjectName) -> bool {
        crate::lock(&self.state.pairs).get_mut(&self.key()).is_some_and(|p| p.objects.remove(name).is_some())
    }

    fn resource_key(&self, name: &ObjectName) -> ResourceKey {
        ResourceKey {
            group: self.gk.group.clone(),
            kind: self.gk.kind.clone(),
            namespace: name.0.as_deref().map(str::to_owned),
            name: name.1.to_string(),
        }
    }

    async fn discover(&self) -> Result<KindInfo, CoverageStatus> {
        self.source
            .discover([&self.gk])
            .await
            .remove(&self.gk)
            .unwrap_or_else(|| Err(CoverageStatus::Failed { message: "not discovered".into() }))
    }

    /// One life of the watcher, from a fresh list to its first error.
    async fn run_once(&self) -> Step {
        let info = match self.discover().await {
            Ok(i) => i,
            Err(status) => return Step::Retry(status),
        };
        if !info.namespaced && self.namespace.is_some() {
            return Step::Retry(CoverageStatus::NotServed {
                message: format!("{} is cluster-scoped: it has no namespace", self.gk),
            });
        }
        let ar = info.api_resource();
        let client = self.source.client.clone();
        let api: Api<DynamicObject> = match self.namespace.as_deref().filter(|_| info.namespaced) {
            Some(ns) => Api::namespaced_with(client, ns, &ar),
            None => Api::all_with(client, &ar),
        };
        let config = watcher::Config::default().page_size(self.source.config.page_size.min(WATCH_PAGE));
        let Ok(mut permit) = Arc::clone(&self.listing).acquire_owned().await.map(Some) else { return Step::Stop };
        let mut stream = std::pin::pin!(watcher::watcher(api, config));
        let mut listed: BTreeSet<ObjectName> = BTreeSet::new();
        while let Some(event) = stream.next().await {
            let event = match event {
                Ok(e) => e,
                Err(e) => {
                    let err = match e {
                        watcher::Error::InitialListFailed(k)
                        | watcher::Error::WatchStartFailed(k)
                        | watcher::Error::WatchFailed(k) => K8sError::from_kube("watch", self.gk.to_string(), k),
                        watcher::Error::WatchError(s) => {
                            K8sError::from_kube("watch", self.gk.to_string(), kube::Error::Api(s))
                        }
                        other => {
                            K8sError::Transport { verb: "watch", what: self.gk.to_string(), message: other.to_string() }
                        }
                    };
                    tracing::info!(cluster = %self.source.cluster, kind = %self.gk, namespace = ?self.namespace, error = %err, "watch lost sync");
                    return Step::Retry(err.coverage());
                }
            };
            let announce = match event {
                watcher::Event::Init => {
                    // A relist after the watch's history expired lists again: take a permit.
                    if permit.is_none() {
                        let Ok(p) = Arc::clone(&self.listing).acquire_owned().await else { return Step::Stop };
                        permit = Some(p);
                    }
                    listed.clear();
                    continue;
                }
                watcher::Event::InitApply(obj) => match self.store(&info, obj) {
                    Ok(Some((name, changed))) => {
                        listed.insert(name);
                        changed.map(LiveEvent::Applied)
                    }
                    Ok(None) => None,
                    Err(e) => return Step::Retry(CoverageStatus::Failed { message: e.to_string() }),
                },
                watcher::Event::InitDone => {
                    permit = None;
                    let gone: Vec<ObjectName> = {
                        let mut pairs = crate::lock(&self.state.pairs);
                        let pair = pairs.entry(self.key()).or_insert_with(|| PairCache {
                            api_version: info.api_version(),
                            objects: BTreeMap::new(),
                            status: CoverageStatus::Complete,
                        });
                        let gone: Vec<ObjectName> =
                            pair.objects.keys().filter(|k| !listed.contains(*k)).cloned().collect();
                        for k in &gone {
                            pair.objects.remove(k);
                        }
                        pair.status = CoverageStatus::Complete;
                        gone
                    };
                    for name in gone {
                        if !self.send(LiveEvent::Deleted(self.resource_key(&name))).await {
                            return Step::Stop;
                        }
                    }
                    listed.clear();
                    Some(LiveEvent::Synced { kind: self.gk.clone(), namespace: self.namespace.clone() })
                }
                watcher::Event::Apply(obj) => match self.store(&info, obj) {
                    Ok(Some((_, changed))) => changed.map(LiveEvent::Applied),
                    Ok(None) => None,
                    Err(e) => return Step::Retry(CoverageStatus::Failed { message: e.to_string() }),
                },
                watcher::Event::Delete(obj) => {
                    let value = serde_json::to_value(&obj).unwrap_or(Value::Null);
                    match self.object_name(&value) {
                        Some(name) if self.remove(&name) => Some(LiveEvent::Deleted(self.resource_key(&name))),
                        _ => None,
                    }
                }
            };
            if let Some(ev) = announce
                && !self.send(ev).await
            {
                return Step::Stop;
            }
        }
        Step::Retry(CoverageStatus::Failed { message: "watch stream ended".into() })
    }

    async fn run(self) {
        let mut pause = self.source.config.retry_backoff.max(Duration::from_millis(50));
        loop {
            match self.run_once().await {
                Step::Stop => return,
                Step::Retry(status) => {
                    let was_synced =
                        crate::lock(&self.state.pairs).get(&self.key()).is_some_and(|p| p.status.is_complete());
                    if was_synced {
                        pause = self.source.config.retry_backoff.max(Duration::from_millis(50));
                    }
                    if !self.desync(status).await {
                        return;
                    }
                }
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(30));
        }
    }
}

impl K8sSource {
    /// Starts watching a scope: one watcher per (kind, namespace), sharing this source's client
    /// and settings; with `scope.only`, only those objects are cached and announced. Must be
    /// called inside a tokio runtime.
    pub async fn start_watch(&self, scope: &Scope) -> K8sWatch {
        let (tx, rx) = tokio::sync::mpsc::channel(WATCH_CHANNEL);
        let state = Arc::new(WatchState { only: scope.only.clone(), ..WatchState::default() });
        let source = Arc::new(K8sSource::from_client(self.client.clone(), self.cluster.clone(), self.config.clone()));
        let mut tasks = Vec::new();
        let listing = Arc::new(tokio::sync::Semaphore::new(self.config.concurrency.max(1)));
        for (gk, ns) in scope.pairs() {
            crate::lock(&state.pairs).insert(
                (gk.clone(), ns.map(str::to_owned)),
                PairCache {
                    api_version: String::new(),
                    objects: BTreeMap::new(),
                    status: CoverageStatus::Failed { message: "watch starting".into() },
                },
            );
            let w = PairWatcher {
                source: source.clone(),
                state: state.clone(),
                tx: tx.clone(),
                gk: gk.clone(),
                namespace: ns.map(str::to_owned),
                listing: Arc::clone(&listing),
            };
            tasks.push(tokio::spawn(w.run()));
        }
        K8sWatch { rx, state, tasks, cluster: self.cluster.clone() }
    }
}
