//! The drift-testkit live-source conformance suite, one test per case, for the Kubernetes
//! source against the test API server (`kubernetes::live::*`) and for the snapshot source on
//! files (`snapshot::live::*`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use async_trait::async_trait;
use drift_core::{LiveSource, ResourceKey};
use drift_kube::{K8sSource, SnapshotSource};
use drift_testkit::live::LiveHarness;
use serde_json::Value;

mod kubernetes {
    use super::*;

    /// A test API server per case, changed through kube-rs as a client would.
    pub struct K8sHarness {
        cluster: common::Cluster,
        source: K8sSource,
    }

    impl K8sHarness {
        pub async fn start() -> K8sHarness {
            let cluster = common::Cluster::start();
            let source = cluster.source().await;
            assert!(source.capabilities().discovery && source.capabilities().watch);
            K8sHarness { cluster, source }
        }
    }

    #[async_trait]
    impl LiveHarness for K8sHarness {
        fn source(&self) -> &dyn LiveSource {
            &self.source
        }
        async fn apply(&self, object: Value) {
            common::apply(self.source.client(), &self.cluster, object).await;
        }
        async fn delete(&self, key: &ResourceKey) {
            common::delete(self.source.client(), key).await;
        }
        async fn drop_watches(&self) -> Option<usize> {
            Some(self.cluster.server.drop_watches())
        }
    }

    drift_testkit::live_suite!(K8sHarness::start());
}

mod snapshot {
    use super::*;

    /// A folder of JSON files, one per object.
    pub struct FilesHarness {
        dir: tempfile::TempDir,
        source: SnapshotSource,
        files: Mutex<BTreeMap<ResourceKey, PathBuf>>,
    }

    impl FilesHarness {
        pub async fn start() -> FilesHarness {
            let dir = tempfile::tempdir().unwrap();
            let source = SnapshotSource::new("offline", [dir.path()]);
            FilesHarness { dir, source, files: Mutex::default() }
        }
    }

    #[async_trait]
    impl LiveHarness for FilesHarness {
        fn source(&self) -> &dyn LiveSource {
            &self.source
        }
        async fn apply(&self, object: Value) {
            let key = drift_core::Resource::from_object(object.clone()).unwrap().key;
            let mut files = self.files.lock().unwrap();
            let n = files.len();
            let path = files.entry(key).or_insert_with(|| self.dir.path().join(format!("sub/{n:03}.json")));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, serde_json::to_vec_pretty(&object).unwrap()).unwrap();
        }
        async fn delete(&self, key: &ResourceKey) {
            let path = self.files.lock().unwrap().remove(key).expect("the object was applied");
            std::fs::remove_file(path).unwrap();
        }
    }

    drift_testkit::live_suite!(FilesHarness::start());
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
