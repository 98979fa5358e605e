//! Helpers of the integration tests: a test API server per test, the real kubectl against it
//! (HOME in a temporary folder), a source on its kubeconfig, and objects created through kube-rs.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use drift_kube::{K8sConfig, K8sSource};
use drift_test_apiserver::{Options, TestApiServer};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

pub struct Cluster {
    pub server: TestApiServer,
    pub home: tempfile::TempDir,
}

impl Cluster {
    pub fn start() -> Cluster {
        Cluster::with(Options::default())
    }

    pub fn with(opts: Options) -> Cluster {
        let server = TestApiServer::start(opts).expect("test API server starts");
        Cluster { server, home: tempfile::tempdir().unwrap() }
    }

    /// A source on the server's kubeconfig, with quick retries.
    pub async fn source(&self) -> K8sSource {
        self.source_with(K8sConfig::default()).await
    }

    pub async fn source_with(&self, config: K8sConfig) -> K8sSource {
        let config = K8sConfig {
            kubeconfig: Some(self.server.kubeconfig_path().to_owned()),
            cluster: Some("test".into()),
            retry_backoff: Duration::from_millis(20),
            ..config
        };
        K8sSource::connect(config).await.unwrap()
    }

    pub fn kubectl_command(&self, args: &[&str]) -> Command {
        let mut c = Command::new("kubectl");
        c.arg("--kubeconfig")
            .arg(self.server.kubeconfig_path())
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .stdin(Stdio::null());
        c
    }

    /// Runs kubectl, which must succeed; returns stdout.
    pub fn kubectl(&self, args: &[&str]) -> String {
        let out = self.kubectl_command(args).output().expect("kubectl runs");
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// `kubectl <args> -f -` with the document on stdin.
    pub fn kubectl_stdin(&self, args: &[&str], input: &str) -> String {
        let mut child = self
            .kubectl_command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "kubectl {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    pub fn file(&self, name: &str, content: &str) -> PathBuf {
        let p = self.home.path().join(name);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(&p, content).unwrap();
        p
    }

    /// Creates a namespace unless it exists (no HTTP).
    pub fn namespace(&self, name: &str) {
        let _ =
            self.server.create_object(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}));
    }

    /// Seeds a ConfigMap without HTTP.
    pub fn configmap(&self, ns: &str, name: &str) {
        self.namespace(ns);
        self.server
            .create_object(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": ns, "labels": {"app": "web"}}, "data": {"k": name}}))
            .unwrap();
    }
}

/// The object without the fields the server keeps (resourceVersion, uid, managedFields,
/// creationTimestamp, status), its namespace created, and the API to send it to.
fn prepare(client: &kube::Client, cluster: &Cluster, mut object: Value) -> (Api<DynamicObject>, DynamicObject) {
    let meta = object["metadata"].as_object_mut().unwrap();
    for k in ["resourceVersion", "uid", "managedFields", "creationTimestamp"] {
        meta.remove(k);
    }
    let ns = meta.get("namespace").and_then(Value::as_str).map(str::to_owned);
    object.as_object_mut().unwrap().remove("status");
    if let Some(ns) = &ns {
        cluster.namespace(ns);
    }
    let api_version = object["apiVersion"].as_str().unwrap().to_owned();
    let kind = object["kind"].as_str().unwrap().to_owned();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
    let plural = format!("{}s", kind.to_lowercase());
    let ar = ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: api_version.clone(),
        kind: kind.clone(),
        plural,
    };
    let api: Api<DynamicObject> = match &ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    (api, serde_json::from_value(object).unwrap())
}

/// Creates an object through kube-rs (a POST, as a client would), after its namespace; the
/// server-kept fields of a fixture (resourceVersion, uid, managedFields, status) are left out.
pub async fn create(client: &kube::Client, cluster: &Cluster, object: Value) {
    let (api, obj) = prepare(client, cluster, object);
    api.create(&PostParams { field_manager: Some("conformance".into()), ..Default::default() }, &obj).await.unwrap();
}

/// Creates or replaces an object with a server-side apply by the manager `conformance`
/// (forced), after its namespace.
pub async fn apply(client: &kube::Client, cluster: &Cluster, object: Value) {
    let (api, obj) = prepare(client, cluster, object);
    let name = obj.metadata.name.clone().unwrap();
    api.patch(&name, &PatchParams::apply("conformance").force(), &Patch::Apply(&obj)).await.unwrap();
}

/// Deletes an object through kube-rs, its resource found by discovery.
pub async fn delete(client: &kube::Client, key: &drift_core::ResourceKey) {
    let group = kube::discovery::group(client, &key.group).await.unwrap();
    let (ar, _) = group.recommended_kind(&key.kind).expect("the kind is served");
    let api: Api<DynamicObject> = match &key.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    api.delete(&key.name, &DeleteParams::default()).await.unwrap();
}

/// Polls an async condition until it holds, at most `limit`.
pub async fn eventually<T, F, Fut>(limit: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(start.elapsed() < limit, "condition not met within {limit:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[allow(unused_imports)] // not every test binary uses it
pub use drift_testkit::fixtures::SHOP_WEB_DEPLOYMENT as WEB;
