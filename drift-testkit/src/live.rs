//! Conformance of live sources, through a harness that loads the fixtures into the backend.
//!
//! Each case is a public async function that takes a fresh harness; [`crate::live_suite!`]
//! turns every case into a test of its own. The contract checked is the one written on
//! [`LiveSource`] and [`LiveSource::watch`] (see also `docs/sources.md`).

use std::collections::BTreeSet;
use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use drift_model::source::{LiveEvent, LiveEventStream};
use drift_model::*;
use futures::StreamExt as _;
use serde_json::{Value, json};

/// Gives the suite a live source and a way to change what its backend holds.
#[async_trait]
pub trait LiveHarness: Send + Sync {
    /// The source under test.
    fn source(&self) -> &dyn LiveSource;
    /// Creates or replaces an object in the backend (a cluster: apply it; files: write them).
    async fn apply(&self, object: Value);
    /// Deletes an object from the backend.
    async fn delete(&self, key: &ResourceKey);
    /// Closes every watch connection open now, as a network failure or an API server restart
    /// would, and returns how many were closed. `None`: the backend has no connection to drop
    /// (the case that needs it is skipped).
    async fn drop_watches(&self) -> Option<usize> {
        None
    }
}

/// How long a watch case waits for an event before it fails.
pub const WATCH_LIMIT: Duration = Duration::from_secs(20);

/// Prints that a case was skipped and why (the test passes without checking anything).
pub fn skip(case: &str, reason: &str) {
    println!("skipped: {case}: {reason}");
}

/// Loads [`crate::fixtures::live_objects`] into the backend.
pub async fn load(harness: &dyn LiveHarness) {
    for o in crate::fixtures::live_objects() {
        harness.apply(o).await;
    }
}

/// The scope of the fixtures: every (kind, namespace) they occupy.
pub fn fixture_scope() -> Scope {
    let mut scope = Scope::default();
    for r in crate::fixtures::live_resources() {
        scope.insert(r.key.group_kind(), r.key.namespace.clone());
    }
    scope
}

fn configmaps_in(namespace: &str) -> Scope {
    let mut s = Scope::default();
    s.insert(GroupKind::new("", "ConfigMap"), Some(namespace.into()));
    s
}

fn configmap(namespace: &str, name: &str, mode: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": namespace, "labels": {"app": "web"}},
           "data": {"mode": mode}})
}

/// Every object of the scope is read with its content, and every pair is reported complete.
pub async fn reads_every_object_in_scope(harness: &dyn LiveHarness) {
    load(harness).await;
    let source = harness.source();
    let scope = fixture_scope();
    let snap = source.fetch(&scope).await.expect("[reads_every_object_in_scope] fetch of a readable scope");
    assert_eq!(snap.cluster, source.cluster(), "[reads_every_object_in_scope] the snapshot names its cluster");
    for f in crate::fixtures::live_resources() {
        let got = snap.resources.iter().find(|r| r.key == f.key);
        let got = got.unwrap_or_else(|| panic!("[reads_every_object_in_scope] {} is read", f.key));
        assert_eq!(
            got.object.pointer("/metadata/labels/app"),
            Some(&Value::from("web")),
            "[reads_every_object_in_scope] {} content",
            f.key
        );
    }
    for (gk, ns) in scope.pairs() {
        assert!(
            snap.coverage.is_complete(&gk.group, &gk.kind, ns),
            "[reads_every_object_in_scope] {gk} in {ns:?} is reported complete"
        );
    }
}

/// Objects are kept as the backend holds them: managedFields and resourceVersion stay.
pub async fn keeps_objects_as_read(harness: &dyn LiveHarness) {
    load(harness).await;
    let snap = harness.source().fetch(&fixture_scope()).await.expect("[keeps_objects_as_read] fetch");
    assert!(!snap.resources.is_empty(), "[keeps_objects_as_read] the fixtures are read");
    for got in &snap.resources {
        assert!(
            got.object.pointer("/metadata/managedFields").and_then(Value::as_array).is_some_and(|m| !m.is_empty()),
            "[keeps_objects_as_read] {} keeps managedFields",
            got.key
        );
        assert!(
            got.object.pointer("/metadata/resourceVersion").is_some(),
            "[keeps_objects_as_read] {} is not normalised",
            got.key
        );
    }
}

/// Only the scope is read: one namespace asked, nothing from the other.
pub async fn reads_only_the_scope(harness: &dyn LiveHarness) {
    load(harness).await;
    let snap = harness.source().fetch(&configmaps_in("billing")).await.expect("[reads_only_the_scope] narrow fetch");
    assert!(
        snap.resources.iter().all(|r| r.key.namespace.as_deref() == Some("billing") && r.key.kind == "ConfigMap"),
        "[reads_only_the_scope] nothing outside the scope is returned"
    );
    assert_eq!(snap.resources.len(), 1, "[reads_only_the_scope] the one billing ConfigMap");
}

/// An empty namespace is complete and empty, not an error.
pub async fn an_empty_namespace_is_complete(harness: &dyn LiveHarness) {
    load(harness).await;
    let snap =
        harness.source().fetch(&configmaps_in("nothing-here")).await.expect("[an_empty_namespace_is_complete] fetch");
    assert!(snap.resources.is_empty(), "[an_empty_namespace_is_complete] an empty namespace has no objects");
    assert!(
        snap.coverage.is_complete("", "ConfigMap", Some("nothing-here")),
        "[an_empty_namespace_is_complete] an empty namespace is complete"
    );
}

/// A kind the cluster does not serve is `NotServed` coverage, not an error (sources with
/// discovery).
pub async fn a_kind_not_served_is_reported(harness: &dyn LiveHarness) {
    const CASE: &str = "a_kind_not_served_is_reported";
    if !harness.source().capabilities().discovery {
        return skip(CASE, "the source has no discovery (LiveCapabilities::discovery is false)");
    }
    load(harness).await;
    let snap = harness
        .source()
        .fetch(&unknown_kind_scope())
        .await
        .expect("[a_kind_not_served_is_reported] an unknown kind is coverage, not an error");
    assert!(
        matches!(
            snap.coverage.status("example.invalid", "Nonexistent", Some("shop")),
            Some(CoverageStatus::NotServed { .. })
        ),
        "[a_kind_not_served_is_reported] a kind the cluster does not serve is NotServed"
    );
}

fn unknown_kind_scope() -> Scope {
    let mut s = Scope::default();
    s.insert(GroupKind::new("example.invalid", "Nonexistent"), Some("shop".into()));
    s
}

/// A source without [`LiveCapabilities::watch`](drift_model::source::LiveCapabilities::watch) refuses to watch with
/// [`ErrorKind::Unsupported`].
pub async fn watch_is_refused_without_the_capability(harness: &dyn LiveHarness) {
    const CASE: &str = "watch_is_refused_without_the_capability";
    if harness.source().capabilities().watch {
        return skip(CASE, "the source can watch (LiveCapabilities::watch is true)");
    }
    let refused = harness.source().watch(&fixture_scope()).await.err();
    let kind = refused.map(|e| e.kind());
    assert_eq!(kind, Some(ErrorKind::Unsupported), "[{CASE}] watch without the capability is Unsupported");
}

/// Starts a watch for a case that needs [`LiveCapabilities::watch`](drift_model::source::LiveCapabilities::watch); `None` (and a printed
/// skip) for a source that cannot watch.
async fn start_watch(harness: &dyn LiveHarness, case: &str, scope: &Scope) -> Option<Watching> {
    if !harness.source().capabilities().watch {
        skip(case, "the source cannot watch (LiveCapabilities::watch is false)");
        return None;
    }
    let stream = harness.source().watch(scope).await.unwrap_or_else(|e| panic!("[{case}] watch starts: {e}"));
    Some(Watching { case: case.to_owned(), stream, seen: Vec::new() })
}

/// A watch under test: the stream and every event it gave, for the failure messages.
struct Watching {
    case: String,
    stream: LiveEventStream,
    seen: Vec<LiveEvent>,
}

impl Watching {
    /// The next event, within [`WATCH_LIMIT`].
    async fn next(&mut self) -> LiveEvent {
        let case = &self.case;
        let item = tokio::time::timeout(WATCH_LIMIT, self.stream.next()).await.unwrap_or_else(|_| {
            panic!("[{case}] no event within {WATCH_LIMIT:?}; seen so far: {:#?}", brief(&self.seen))
        });
        let event = item
            .unwrap_or_else(|| panic!("[{case}] the stream ended while held; seen: {:#?}", brief(&self.seen)))
            .unwrap_or_else(|e| panic!("[{case}] the stream failed: {e}"));
        self.seen.push(event.clone());
        event
    }

    /// Events until one matches `done`, which is included.
    async fn until(&mut self, done: impl Fn(&LiveEvent) -> bool) -> Vec<LiveEvent> {
        let mut got = Vec::new();
        loop {
            let e = self.next().await;
            let last = done(&e);
            got.push(e);
            if last {
                return got;
            }
        }
    }

    /// Events until every pair of `scope` has sent `Synced`.
    async fn until_synced(&mut self, scope: &Scope) -> Vec<LiveEvent> {
        let mut waiting: BTreeSet<(GroupKind, Option<String>)> =
            scope.pairs().map(|(gk, ns)| (gk.clone(), ns.map(str::to_owned))).collect();
        let mut got = Vec::new();
        while !waiting.is_empty() {
            let e = self.next().await;
            if let LiveEvent::Synced { kind, namespace } = &e {
                waiting.remove(&(kind.clone(), namespace.clone()));
            }
            got.push(e);
        }
        got
    }
}

/// The fixtures loaded and a watch of the ConfigMaps of `shop`, past its initial sync.
async fn watch_shop_configmaps(harness: &dyn LiveHarness, case: &str) -> Option<Watching> {
    load(harness).await;
    let scope = configmaps_in("shop");
    let mut w = start_watch(harness, case, &scope).await?;
    w.until_synced(&scope).await;
    Some(w)
}

/// Events as short lines, for failure messages (objects are long).
fn brief(events: &[LiveEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e {
            LiveEvent::Applied(r) => format!("Applied {} {}", r.key, r.object.get("data").unwrap_or(&Value::Null)),
            LiveEvent::Deleted(k) => format!("Deleted {k}"),
            LiveEvent::Desynced { kind, namespace, status } => format!("Desynced {kind} {namespace:?} {status:?}"),
            LiveEvent::Synced { kind, namespace } => format!("Synced {kind} {namespace:?}"),
        })
        .collect()
}

fn applied(events: &[LiveEvent]) -> Vec<&Resource> {
    events
        .iter()
        .filter_map(|e| match e {
            LiveEvent::Applied(r) => Some(r),
            _ => None,
        })
        .collect()
}

fn mode(r: &Resource) -> Option<&str> {
    r.object.pointer("/data/mode").and_then(Value::as_str)
}

/// The watch starts with the initial list: `Applied` for every object of a pair, then `Synced`
/// for the pair; every pair of the scope syncs, an empty one too, and nothing is reported
/// deleted or out of sync.
pub async fn watch_lists_then_syncs(harness: &dyn LiveHarness) {
    const CASE: &str = "watch_lists_then_syncs";
    load(harness).await;
    let mut scope = fixture_scope();
    scope.insert(GroupKind::new("", "ConfigMap"), Some("nothing-here".into()));
    let Some(mut w) = start_watch(harness, CASE, &scope).await else { return };
    let events = w.until_synced(&scope).await;
    for f in crate::fixtures::live_resources() {
        let at = events.iter().position(|e| matches!(e, LiveEvent::Applied(r) if r.key == f.key));
        let at = at.unwrap_or_else(|| panic!("[{CASE}] {} is listed: {:#?}", f.key, brief(&events)));
        let synced = events.iter().position(|e| {
            matches!(e, LiveEvent::Synced { kind, namespace }
                if *kind == f.key.group_kind() && *namespace == f.key.namespace)
        });
        assert!(synced.is_some_and(|s| s > at), "[{CASE}] {} comes before the Synced of its pair", f.key);
        let LiveEvent::Applied(r) = &events[at] else { unreachable!("found as Applied") };
        assert!(
            r.object.pointer("/metadata/managedFields").and_then(Value::as_array).is_some_and(|m| !m.is_empty()),
            "[{CASE}] {} keeps managedFields in its event",
            f.key
        );
    }
    let in_scope = |k: &ResourceKey| scope.contains(&k.group_kind(), k.namespace.as_deref());
    for e in &events {
        match e {
            LiveEvent::Applied(r) => assert!(in_scope(&r.key), "[{CASE}] {} is outside the scope", r.key),
            LiveEvent::Synced { .. } => {}
            other => panic!("[{CASE}] a readable scope gives no {other:?}"),
        }
    }
    assert_eq!(applied(&events).len(), crate::fixtures::live_resources().len(), "[{CASE}] each object once");
}

/// After the sync, a created and a changed object are `Applied` with their new content, in the
/// order of the changes; changes outside the scope and unchanged objects give no event.
pub async fn watch_reports_applied(harness: &dyn LiveHarness) {
    const CASE: &str = "watch_reports_applied";
    let Some(mut w) = watch_shop_configmaps(harness, CASE).await else { return };
    harness.apply(configmap("billing", "settings", "outside")).await;
    harness.apply(configmap("shop", "extra", "new")).await;
    harness.apply(configmap("shop", "settings", "slow")).await;
    let events = w.until(|e| matches!(e, LiveEvent::Applied(r) if r.key.name == "settings")).await;
    let got: Vec<(String, Option<&str>)> = applied(&events).into_iter().map(|r| (r.key.to_string(), mode(r))).collect();
    let want = vec![
        (ResourceKey::new("", "ConfigMap", Some("shop"), "extra").to_string(), Some("new")),
        (ResourceKey::new("", "ConfigMap", Some("shop"), "settings").to_string(), Some("slow")),
    ];
    assert_eq!(got, want, "[{CASE}] the creation, then the change, nothing else: {:#?}", brief(&events));
    assert!(
        events.iter().all(|e| matches!(e, LiveEvent::Applied(_))),
        "[{CASE}] no other event: {:#?}",
        brief(&events)
    );
}

/// After the sync, a deleted object is `Deleted`, with its key.
pub async fn watch_reports_deleted(harness: &dyn LiveHarness) {
    const CASE: &str = "watch_reports_deleted";
    let Some(mut w) = watch_shop_configmaps(harness, CASE).await else { return };
    let settings = ResourceKey::new("", "ConfigMap", Some("shop"), "settings");
    harness.delete(&settings).await;
    let e = w.next().await;
    assert_eq!(e, LiveEvent::Deleted(settings), "[{CASE}] the deletion is the next event");
}

/// A dropped watch connection is resumed: the changes made after the drop arrive, once each
/// and in order, and nothing unchanged is announced again. A source may instead lose sync
/// and relist (`Desynced`, then `Synced`); the changes it reports are the same.
pub async fn watch_resumes_a_dropped_stream(harness: &dyn LiveHarness) {
    const CASE: &str = "watch_resumes_a_dropped_stream";
    let Some(mut w) = watch_shop_configmaps(harness, CASE).await else { return };
    // A change seen through the watch: the connection to drop is open.
    harness.apply(configmap("shop", "settings", "before-drop")).await;
    w.until(|e| matches!(e, LiveEvent::Applied(r) if mode(r) == Some("before-drop"))).await;
    let Some(dropped) = harness.drop_watches().await else {
        return skip(CASE, "the harness has no watch connection to drop");
    };
    assert!(dropped >= 1, "[{CASE}] the open watch connection was dropped");
    harness.apply(configmap("shop", "after-drop", "new")).await;
    harness.apply(configmap("shop", "settings", "after-drop")).await;
    let events = w.until(|e| matches!(e, LiveEvent::Applied(r) if mode(r) == Some("after-drop"))).await;
    let got: Vec<(String, Option<&str>)> =
        applied(&events).into_iter().map(|r| (r.key.name.clone(), mode(r))).collect();
    assert_eq!(
        got,
        vec![("after-drop".to_owned(), Some("new")), ("settings".to_owned(), Some("after-drop"))],
        "[{CASE}] each change after the drop once, in order, and no unchanged object: {:#?}",
        brief(&events)
    );
    assert!(
        !events.iter().any(|e| matches!(e, LiveEvent::Deleted(_))),
        "[{CASE}] nothing was deleted: {:#?}",
        brief(&events)
    );
    let desynced = events.iter().filter(|e| matches!(e, LiveEvent::Desynced { .. })).count();
    let synced = events.iter().filter(|e| matches!(e, LiveEvent::Synced { .. })).count();
    assert_eq!(desynced, synced, "[{CASE}] a loss of sync is closed by a Synced: {:#?}", brief(&events));
}

/// A pair that cannot be watched (a kind the cluster does not serve) is `Desynced` with the
/// reason, and never `Synced` (sources with discovery).
pub async fn watch_desyncs_a_kind_not_served(harness: &dyn LiveHarness) {
    const CASE: &str = "watch_desyncs_a_kind_not_served";
    if !harness.source().capabilities().discovery {
        return skip(CASE, "the source has no discovery (LiveCapabilities::discovery is false)");
    }
    load(harness).await;
    let mut scope = unknown_kind_scope();
    scope.insert(GroupKind::new("", "ConfigMap"), Some("shop".into()));
    let Some(mut w) = start_watch(harness, CASE, &scope).await else { return };
    let unknown = GroupKind::new("example.invalid", "Nonexistent");
    // Until the unknown kind lost sync and the readable pair synced, in either order.
    let (mut desynced, mut synced) = (false, false);
    while !(desynced && synced) {
        match w.next().await {
            LiveEvent::Desynced { kind, .. } if kind == unknown => desynced = true,
            LiveEvent::Synced { kind, .. } if kind.kind == "ConfigMap" => synced = true,
            _ => {}
        }
    }
    let events = w.seen.clone();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, LiveEvent::Desynced { kind, namespace, status: CoverageStatus::NotServed { .. } }
            if *kind == unknown && namespace.as_deref() == Some("shop"))),
        "[{CASE}] the unknown kind is Desynced as NotServed: {:#?}",
        brief(&events)
    );
    assert!(
        !events.iter().any(|e| matches!(e, LiveEvent::Synced { kind, .. } if *kind == unknown)),
        "[{CASE}] the unknown kind never syncs: {:#?}",
        brief(&events)
    );
}

/// Runs every case in order, each on a fresh harness from `fresh` (for callers outside a test
/// runner; tests use [`crate::live_suite!`], which gives each case a test of its own).
pub async fn conformance<H, F, Fut>(fresh: F)
where
    H: LiveHarness,
    F: Fn() -> Fut,
    Fut: Future<Output = H>,
{
    crate::__live_cases!(__cases_in_sequence, live, fresh);
}

/// One test per case of the live-source suite, in a module `live`: `live::reads_only_the_scope`
/// and so on. The argument is an expression that gives a future of a fresh [`LiveHarness`];
/// it is evaluated once per case. A case whose capability the source lacks prints
/// `skipped: <case>: <reason>` and passes.
///
/// ```
/// use drift_model::{LiveSource, Resource, ResourceKey, memory::MemoryLiveSource};
/// use drift_testkit::live::LiveHarness;
///
/// struct Memory(MemoryLiveSource);
///
/// #[async_trait::async_trait]
/// impl LiveHarness for Memory {
///     fn source(&self) -> &dyn LiveSource {
///         &self.0
///     }
///     async fn apply(&self, object: serde_json::Value) {
///         self.0.apply(Resource::from_object(object).unwrap());
///     }
///     async fn delete(&self, key: &ResourceKey) {
///         self.0.delete(key);
///     }
/// }
///
/// // Tests `live::reads_only_the_scope`, `live::watch_reports_applied`, ...
/// drift_testkit::live_suite!(async { Memory(MemoryLiveSource::new("mem", vec![])) });
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! live_suite {
    ($harness:expr $(,)?) => {
        mod live {
            #[allow(unused_imports)]
            use super::*;
            $crate::__live_cases!(__case_tests, live, $harness);
        }
    };
}

/// The cases of the live suite, written once: calls `$crate::$then!` with them.
#[doc(hidden)]
#[macro_export]
macro_rules! __live_cases {
    ($then:ident, $($args:tt)*) => {
        $crate::$then!(($($args)*)
            reads_every_object_in_scope,
            keeps_objects_as_read,
            reads_only_the_scope,
            an_empty_namespace_is_complete,
            a_kind_not_served_is_reported,
            watch_is_refused_without_the_capability,
            watch_lists_then_syncs,
            watch_reports_applied,
            watch_reports_deleted,
            watch_resumes_a_dropped_stream,
            watch_desyncs_a_kind_not_served,
        );
    };
}
