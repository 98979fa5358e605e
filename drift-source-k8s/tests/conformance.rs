//! The drift-testkit live-source conformance suite, for the Kubernetes source against the test
//! API server and for the snapshot source on files.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use async_trait::async_trait;
use drift_core::LiveSource;
use drift_source_k8s::{K8sSource, SnapshotSource};
use drift_testkit::live::{LiveHarness, conformance};
use serde_json::Value;

struct K8sHarness {
    cluster: common::Cluster,
    source: K8sSource,
}

#[async_trait]
impl LiveHarness for K8sHarness {
    fn source(&self) -> &dyn LiveSource {
        &self.source
    }
    async fn apply(&self, object: Value) {
        common::create(self.source.client(), &self.cluster, object).await;
    }
}

#[tokio::test]
async fn kubernetes_source_passes_the_live_conformance_suite() {
    let cluster = common::Cluster::start();
    let source = cluster.source().await;
    assert!(source.capabilities().discovery && source.capabilities().watch);
    let harness = K8sHarness { cluster, source };
    conformance(&harness).await;
}

struct FilesHarness {
    dir: tempfile::TempDir,
    source: SnapshotSource,
    count: std::sync::atomic::AtomicUsize,
}

#[async_trait]
impl LiveHarness for FilesHarness {
    fn source(&self) -> &dyn LiveSource {
        &self.source
    }
    async fn apply(&self, object: Value) {
        let n = self.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let path = self.dir.path().join(format!("sub/{n:03}.json"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, serde_json::to_vec_pretty(&object).unwrap()).unwrap();
    }
}

#[tokio::test]
async fn snapshot_source_passes_the_live_conformance_suite() {
    let dir = tempfile::tempdir().unwrap();
    let source = SnapshotSource::new("offline", [dir.path()]);
    let harness = FilesHarness { dir, source, count: Default::default() };
    conformance(&harness).await;
}

#[tokio::test]
async fn snapshot_source_reads_kubectl_get_all_namespaces_output() {
    // The source of a snapshot taken with the real kubectl from the test API server.
    let cluster = common::Cluster::start();
    cluster.namespace("shop");
    cluster.kubectl_stdin(&["apply", "-f", "-"], common::WEB);
    cluster.configmap("shop", "settings");
    let text = cluster.kubectl(&["get", "deployments,configmaps", "-A", "-o", "yaml", "--show-managed-fields"]);
    let file = cluster.file("snapshot/all.yaml", &text);
    let source = SnapshotSource::new("offline", [file.parent().unwrap()]);
    let mut scope = drift_core::Scope::default();
    scope.insert(drift_core::GroupKind::new("apps", "Deployment"), Some("shop".into()));
    let snap = source.fetch(&scope).await.unwrap();
    assert_eq!(snap.resources.len(), 1, "only the Deployment is in scope");
    let web = &snap.resources[0];
    assert_eq!(web.key.name, "web");
    assert!(web.object.pointer("/metadata/managedFields/0/manager").is_some(), "managedFields are kept");
    assert!(snap.coverage.is_complete("apps", "Deployment", Some("shop")));
}
