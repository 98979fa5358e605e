//! Watch mode against the test API server, with changes made by the real kubectl: change events
//! with the manager that made them, no event for status-only changes, a dropped watch resumed
//! without loss, and a 410 Gone that desyncs, relists and reports what changed meanwhile.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use drift_core::source::LiveEvent;
use drift_core::{GroupKind, Scope};
use drift_kube::K8sWatch;
use drift_test_apiserver::{FaultAction, FaultMatch, FaultRule, Faults};
use futures::StreamExt as _;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(20);

/// The next event, waiting at most [`LIMIT`].
async fn next(watch: &mut K8sWatch) -> LiveEvent {
    tokio::time::timeout(LIMIT, watch.next()).await.expect("an event in time").expect("stream open").unwrap()
}

/// Events until one matches, returning all of them.
async fn until(watch: &mut K8sWatch, pred: impl Fn(&LiveEvent) -> bool) -> Vec<LiveEvent> {
    let mut seen = Vec::new();
    loop {
        let e = next(watch).await;
        let done = pred(&e);
        seen.push(e);
        if done {
            return seen;
        }
    }
}

fn is_synced(e: &LiveEvent) -> bool {
    matches!(e, LiveEvent::Synced { .. })
}

fn applied_name(e: &LiveEvent) -> Option<&str> {
    match e {
        LiveEvent::Applied(r) => Some(r.key.name.as_str()),
        _ => None,
    }
}

fn managers(e: &LiveEvent) -> Vec<String> {
    match e {
        LiveEvent::Applied(r) => r.object["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["manager"].as_str().unwrap().to_owned())
            .collect(),
        _ => vec![],
    }
}

fn scope(kind: GroupKind, ns: &str) -> Scope {
    let mut s = Scope::default();
    s.insert(kind, Some(ns.into()));
    s
}

#[tokio::test]
async fn kubectl_changes_become_events_with_their_manager() {
    let cluster = common::Cluster::start();
    cluster.namespace("shop");
    cluster.kubectl_stdin(&["apply", "-f", "-"], common::WEB);
    let source = cluster.source().await;
    let mut watch = source.start_watch(&scope(GroupKind::new("apps", "Deployment"), "shop")).await;
    let first = until(&mut watch, is_synced).await;
    assert_eq!(first.iter().filter_map(applied_name).collect::<Vec<_>>(), vec!["web"], "the initial list");
    assert!(watch.is_synced());
    assert_eq!(watch.snapshot().resources.len(), 1);

    // A status-only change is not a change for the comparison: no event.
    cluster.kubectl(&[
        "patch",
        "deployment",
        "web",
        "-n",
        "shop",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"observedGeneration":7}}"#,
    ]);
    cluster.kubectl(&["scale", "deployment", "web", "-n", "shop", "--replicas=5"]);
    let e = next(&mut watch).await;
    let LiveEvent::Applied(r) = &e else { panic!("expected the scale, got {e:?}") };
    assert_eq!(r.object.pointer("/spec/replicas"), Some(&Value::from(5)), "the first event is the scale");
    // kubectl scale sends no fieldManager: the API server names it after the User-Agent.
    assert!(managers(&e).contains(&"kubectl".to_owned()), "{:?}", managers(&e));
    // Events carry the object as read, with a version that grows with each write (the watch
    // of `drift serve` orders its events against a pass with it).
    let version = |e: &LiveEvent| -> u64 {
        let LiveEvent::Applied(r) = e else { panic!("{e:?}") };
        r.object.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap().parse().unwrap()
    };
    let scaled = version(&e);

    cluster.kubectl(&["set", "image", "deployment/web", "-n", "shop", "web=nginx:1.28"]);
    let e = next(&mut watch).await;
    assert!(managers(&e).contains(&"kubectl-set".to_owned()), "{e:?}");
    assert!(version(&e) > scaled, "{} after {scaled}", version(&e));

    cluster.kubectl(&["delete", "deployment", "web", "-n", "shop"]);
    let e = next(&mut watch).await;
    assert!(matches!(&e, LiveEvent::Deleted(k) if k.name == "web"), "{e:?}");
    assert!(watch.snapshot().resources.is_empty());
}

#[tokio::test]
async fn a_dropped_watch_is_resumed_without_losing_a_change() {
    let cluster = common::Cluster::start();
    cluster.configmap("team", "a");
    // The first watch connection is closed after one event.
    cluster.server.set_faults(Faults {
        faults: vec![FaultRule {
            matcher: FaultMatch {
                verb: Some("watch".into()),
                resource: Some("configmaps".into()),
                ..Default::default()
            },
            action: FaultAction::DropWatch { after_events: 1 },
            times: Some(1),
        }],
    });
    let source = cluster.source().await;
    let mut watch = source.start_watch(&scope(GroupKind::new("", "ConfigMap"), "team")).await;
    until(&mut watch, is_synced).await;
    cluster.kubectl(&["label", "configmap", "a", "-n", "team", "first=1"]);
    cluster.kubectl(&["label", "configmap", "a", "-n", "team", "second=2"]);
    let one = next(&mut watch).await;
    let two = next(&mut watch).await;
    let label = |e: &LiveEvent, l: &str| match e {
        LiveEvent::Applied(r) => r.object["metadata"]["labels"].get(l).is_some(),
        _ => false,
    };
    assert!(label(&one, "first") && !label(&one, "second"), "{one:?}");
    assert!(label(&two, "second"), "the change after the drop arrives: {two:?}");
    let watches =
        cluster.server.requests().iter().filter(|r| r.query.get("watch").is_some_and(|w| w == "true")).count();
    assert_eq!(watches, 2, "the watch was opened again");
    assert!(watch.is_synced(), "a resumed watch never lost sync");
}

#[tokio::test]
async fn a_410_desyncs_relists_and_reports_what_changed_meanwhile() {
    let cluster = common::Cluster::start();
    for n in ["a", "b", "c"] {
        cluster.configmap("team", n);
    }
    let watch_cm = FaultMatch { verb: Some("watch".into()), resource: Some("configmaps".into()), ..Default::default() };
    let list_cm = FaultMatch { verb: Some("list".into()), resource: Some("configmaps".into()), ..Default::default() };
    cluster.server.set_faults(Faults {
        faults: vec![FaultRule {
            matcher: watch_cm.clone(),
            action: FaultAction::DropWatch { after_events: 1 },
            times: Some(1),
        }],
    });
    let source = cluster.source().await;
    let mut watch = source.start_watch(&scope(GroupKind::new("", "ConfigMap"), "team")).await;
    let initial = until(&mut watch, is_synced).await;
    assert_eq!(initial.iter().filter_map(applied_name).count(), 3);

    // From now on: resuming answers 410 Gone, and lists fail, so the relist waits.
    cluster.server.set_faults(Faults {
        faults: vec![
            FaultRule { matcher: watch_cm, action: FaultAction::Expired, times: None },
            FaultRule {
                matcher: list_cm,
                action: FaultAction::Error { code: 500, retry_after_seconds: None, message: None },
                times: None,
            },
        ],
    });
    cluster.kubectl(&["label", "configmap", "a", "-n", "team", "seen=yes"]);
    // The label closes the watch (after one event); resuming gets 410 Gone. The label itself may
    // arrive before the loss of sync or with the relist, but exactly once.
    let before = until(&mut watch, |e| matches!(e, LiveEvent::Desynced { .. })).await;
    let label_before = before.iter().filter(|e| applied_name(e) == Some("a")).count();
    assert!(label_before <= 1 && before.len() == label_before + 1, "{before:?}");
    assert!(!watch.is_synced());
    assert!(!watch.coverage().is_complete("", "ConfigMap", Some("team")), "nothing there may be resolved");
    assert!(watch.snapshot().resources.is_empty(), "a desynced pair offers no objects");

    // Changes while out of sync.
    cluster.kubectl(&["delete", "configmap", "b", "-n", "team"]);
    cluster.kubectl(&["patch", "configmap", "c", "-n", "team", "--type=merge", "-p", r#"{"data":{"k":"edited"}}"#]);
    cluster.server.clear_faults();
    let relist = until(&mut watch, is_synced).await;
    let relist: Vec<&LiveEvent> = relist.iter().filter(|e| !matches!(e, LiveEvent::Desynced { .. })).collect();
    let applied: Vec<&str> = relist.iter().filter_map(|e| applied_name(e)).collect();
    let expect: Vec<&str> = if label_before == 1 { vec!["c"] } else { vec!["a", "c"] };
    assert_eq!(applied, expect, "the edit made while out of sync, and nothing unchanged: {relist:?}");
    let deleted: Vec<&str> = relist
        .iter()
        .filter_map(|e| match e {
            LiveEvent::Deleted(k) => Some(k.name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deleted, vec!["b"], "the deletion made while out of sync");
    assert!(is_synced(relist.last().unwrap()));
    assert!(watch.is_synced());
    let names: Vec<String> = watch.snapshot().resources.into_iter().map(|r| r.key.name).collect();
    assert_eq!(names, vec!["a", "c"]);
}

#[tokio::test]
async fn a_forbidden_watch_says_so_and_recovers() {
    let cluster = common::Cluster::start();
    cluster.configmap("locked", "a");
    cluster.server.set_faults(Faults {
        faults: vec![FaultRule {
            matcher: FaultMatch { verb: Some("list".into()), namespace: Some("locked".into()), ..Default::default() },
            action: FaultAction::Error { code: 403, retry_after_seconds: None, message: None },
            times: None,
        }],
    });
    let source = cluster.source().await;
    let mut watch = source.start_watch(&scope(GroupKind::new("", "ConfigMap"), "locked")).await;
    let e = next(&mut watch).await;
    assert!(matches!(&e, LiveEvent::Desynced { status: drift_core::CoverageStatus::Forbidden { .. }, .. }), "{e:?}");
    cluster.server.clear_faults();
    let events = until(&mut watch, is_synced).await;
    assert_eq!(events.iter().filter_map(applied_name).collect::<Vec<_>>(), vec!["a"]);
}

#[tokio::test]
async fn with_only_the_objects_named_are_cached_and_announced() {
    let cluster = common::Cluster::start();
    for name in ["held", "other-1", "other-2"] {
        cluster.configmap("team", name);
    }
    let source = cluster.source().await;
    let mut scope = scope(GroupKind::new("", "ConfigMap"), "team");
    scope.only = Some([drift_core::ResourceKey::new("", "ConfigMap", Some("team"), "held")].into());
    let mut watch = source.start_watch(&scope).await;
    let first = until(&mut watch, is_synced).await;
    let names: Vec<&str> = first.iter().filter_map(applied_name).collect();
    assert_eq!(names, ["held"], "{first:?}");
    assert_eq!(watch.stats().objects, 1);

    // A change of another object is not announced; a change of the held one is, after it.
    cluster.kubectl(&["label", "configmap", "other-1", "-n", "team", "x=1"]);
    cluster.kubectl(&["delete", "configmap", "other-2", "-n", "team"]);
    cluster.kubectl(&["label", "configmap", "held", "-n", "team", "x=1"]);
    let e = next(&mut watch).await;
    assert_eq!(applied_name(&e), Some("held"), "{e:?}");
}
