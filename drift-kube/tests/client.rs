//! The source's own HTTP client stack (`drift_kube::client`): over TLS with the
//! kubeconfig's CA and bearer token, list pages and watch events far larger than its bounded
//! read buffer, and clear refusals (an untrusted certificate, a wrong token) that never show
//! the token.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use drift_core::source::LiveEvent;
use drift_core::{CoverageStatus, GroupKind, LiveSource, Scope};
use drift_kube::{K8sConfig, K8sSource, client};
use drift_test_apiserver::Options;
use futures::StreamExt as _;
use serde_json::json;

const TOKEN: &str = "canary-token-7f3a9c2e1b";

fn secure() -> common::Cluster {
    common::Cluster::with(Options { tls: true, token: Some(TOKEN.to_owned()), ..Options::default() })
}

fn configmaps(ns: &str) -> Scope {
    let mut s = Scope::default();
    s.insert(GroupKind::new("", "ConfigMap"), Some(ns.into()));
    s
}

/// A ConfigMap of `size` bytes of data, applied with kubectl (over TLS, with the token).
fn big_configmap(cluster: &common::Cluster, name: &str, size: usize) {
    let data: String = (0..size).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "big"}, "data": {"blob": data}});
    cluster.kubectl_stdin(&["apply", "-f", "-"], &cm.to_string());
}

#[tokio::test]
async fn pages_and_events_larger_than_the_read_buffer_arrive_whole_over_tls() {
    let cluster = secure();
    cluster.namespace("big");
    // Four objects of 300 KB: one list page of about 1.2 MB, 37 times the read buffer.
    let size = 300_000;
    for i in 0..4 {
        big_configmap(&cluster, &format!("blob-{i}"), size);
    }
    assert!(size * 4 > 30 * client::READ_BUFFER_MAX);
    let source = cluster.source().await;
    let snapshot = source.fetch(&configmaps("big")).await.unwrap();
    assert_eq!(snapshot.coverage.status("", "ConfigMap", Some("big")), Some(&CoverageStatus::Complete));
    assert_eq!(snapshot.resources.len(), 4);
    for r in &snapshot.resources {
        assert_eq!(r.object["data"]["blob"].as_str().unwrap().len(), size, "{}", r.key);
    }

    // A watch on the same connection kind: its first list, then a large change as one event.
    let mut watch = source.start_watch(&configmaps("big")).await;
    let limit = Duration::from_secs(20);
    loop {
        let e = tokio::time::timeout(limit, watch.next()).await.expect("an event in time").unwrap().unwrap();
        if matches!(e, LiveEvent::Synced { .. }) {
            break;
        }
    }
    big_configmap(&cluster, "blob-4", 2 * size);
    loop {
        let e = tokio::time::timeout(limit, watch.next()).await.expect("an event in time").unwrap().unwrap();
        if let LiveEvent::Applied(r) = e {
            assert_eq!(r.key.name, "blob-4");
            assert_eq!(r.object["data"]["blob"].as_str().unwrap().len(), 2 * size);
            break;
        }
    }
}

/// A source on a copy of the cluster's kubeconfig changed by `edit`.
async fn source_on_edited_kubeconfig(cluster: &common::Cluster, edit: impl Fn(&str) -> String) -> K8sSource {
    let text = std::fs::read_to_string(cluster.server.kubeconfig_path()).unwrap();
    let edited = edit(&text);
    assert_ne!(edited, text, "the edit changed the kubeconfig");
    let path = cluster.file("edited-kubeconfig", &edited);
    K8sSource::connect(K8sConfig {
        kubeconfig: Some(path),
        retry_backoff: Duration::from_millis(20),
        retries: 1,
        ..K8sConfig::default()
    })
    .await
    .unwrap()
}

/// What a failed read says: the fetch's error, or the pair's coverage and the warnings.
async fn failure(source: &K8sSource) -> String {
    match source.fetch(&configmaps("default")).await {
        Err(e) => e.to_string(),
        Ok(snapshot) => {
            let status = snapshot.coverage.status("", "ConfigMap", Some("default")).cloned();
            assert!(!matches!(status, Some(CoverageStatus::Complete)), "the read must fail: {status:?}");
            format!("{status:?}")
        }
    }
}

#[tokio::test]
async fn a_wrong_token_is_refused_clearly_and_no_token_is_shown() {
    let cluster = secure();
    cluster.configmap("default", "one");
    let wrong = "canary-wrong-4d8e0f";
    let source = source_on_edited_kubeconfig(&cluster, |t| t.replace(TOKEN, wrong)).await;
    let said = failure(&source).await;
    assert!(said.contains("401") || said.to_lowercase().contains("unauthorized"), "{said}");
    assert!(!said.contains(wrong) && !said.contains(TOKEN), "a token in: {said}");
}

#[tokio::test]
async fn a_server_certificate_the_kubeconfig_does_not_trust_is_refused() {
    let cluster = secure();
    cluster.configmap("default", "one");
    let source = source_on_edited_kubeconfig(&cluster, |t| {
        t.lines().filter(|l| !l.contains("certificate-authority-data")).map(|l| format!("{l}\n")).collect()
    })
    .await;
    let said = failure(&source).await;
    assert!(said.to_lowercase().contains("certificate"), "{said}");
    assert!(!said.contains(TOKEN), "the token in: {said}");
}

/// How a read of the ConfigMaps of `default` covered them.
async fn listed(source: &K8sSource) -> Option<CoverageStatus> {
    let snapshot = source.fetch(&configmaps("default")).await.unwrap();
    snapshot.coverage.status("", "ConfigMap", Some("default")).cloned()
}

/// Credentials held in memory (a credentials Secret's kubeconfig) whose token is rotated: the
/// old token is refused from then on, the source takes the new one without a new client, and
/// credentials that differ in more than the token are left for a restart.
#[tokio::test]
async fn a_rotated_token_of_credentials_held_in_memory_is_taken_without_a_new_client() {
    let cluster = secure();
    cluster.configmap("default", "one");
    let read = || {
        kube::config::Kubeconfig::from_yaml(&std::fs::read_to_string(cluster.server.kubeconfig_path()).unwrap())
            .unwrap()
    };
    let reading = K8sConfig { retry_backoff: Duration::from_millis(20), retries: 1, ..K8sConfig::default() };
    let source = K8sSource::connect_kubeconfig(read(), None, reading).await.unwrap();
    assert_eq!(listed(&source).await, Some(CoverageStatus::Complete));
    let before = read();
    assert_eq!(source.rotate(&before, None), drift_kube::Rotation::Unchanged);

    let rotated = "canary-rotated-5b7c1d";
    cluster.server.rotate_token(rotated).unwrap();
    let said = failure(&source).await;
    assert!(said.contains("401") || said.to_lowercase().contains("unauthorized"), "the old token refused: {said}");
    assert!(!said.contains(TOKEN) && !said.contains(rotated), "a token in: {said}");
    let after = read();
    assert_eq!(source.rotate(&after, None), drift_kube::Rotation::TokenReplaced);
    assert_eq!(listed(&source).await, Some(CoverageStatus::Complete), "the new token is sent");
    assert_eq!(source.rotate(&after, None), drift_kube::Rotation::Unchanged);

    // Another server in the Secret: kept as it is, for a restart to take.
    let mut moved = after.clone();
    moved.clusters[0].cluster.as_mut().unwrap().server = Some("https://127.0.0.1:1".to_owned());
    assert_eq!(source.rotate(&moved, None), drift_kube::Rotation::NeedsRestart);
    assert_eq!(listed(&source).await, Some(CoverageStatus::Complete), "the source keeps what it has");
    // A source connected from a file: kube reads the file's credentials itself; never rotated here.
    let from_file = cluster.source().await;
    assert_eq!(from_file.rotate(&after, None), drift_kube::Rotation::NeedsRestart);
}
