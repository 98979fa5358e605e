//! Simulated mutating admission, driven by the real kubectl and kube-rs: rules apply on
//! create, update, patch and server-side apply of the main resource, on `--dry-run=server`
//! exactly as on real writes (which store nothing), not on the scale subresource; their changes
//! are owned by no manager; the rules are set by `Options`, the admin endpoint and
//! `--admission FILE`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Kubectl, fields_of};
use drift_test_apiserver::{Admission, Options, TestApiServer};
use serde_json::Value;

/// An "always pull images" policy and an injected annotation, on Deployments in `shop`.
const RULES: &str = r#"
mutations:
  - name: always-pull
    match: {resource: Deployment, group: apps, namespace: shop}
    set:
      - {path: "spec.template.spec.containers[*].imagePullPolicy", value: Always}
  - name: stamp
    match: {resource: deployments, namespace: shop, operations: [CREATE]}
    set:
      - {path: "metadata.annotations.policy\\.example\\.com/checked", value: "yes"}
"#;

fn deployment(replicas: u32, image: &str) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: shop}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - {{name: web, image: "{image}", imagePullPolicy: IfNotPresent}}
"#
    )
}

fn pull_policy(d: &Value) -> &str {
    d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"].as_str().unwrap()
}

#[test]
fn mutations_apply_on_writes_and_server_dry_runs_but_not_on_scale() {
    let k = Kubectl::with(Options { admission: Admission::from_yaml(RULES).unwrap(), ..Options::default() });
    k.ok(&["create", "namespace", "shop"]);
    k.stdin(&["apply", "-f", "-"], &deployment(2, "nginx:1.27"));
    let d = k.get("deployment/web", "shop");
    assert_eq!(pull_policy(&d), "Always", "CREATE through kubectl apply");
    assert_eq!(d["metadata"]["annotations"]["policy.example.com/checked"], "yes");
    assert_eq!(d["metadata"]["generation"], 1);
    // The applier keeps the field it set, with the mutated value; the injected annotation is
    // owned by nobody.
    let owned = fields_of(&d, "kubectl-client-side-apply", "Update").to_string();
    assert!(owned.contains("f:imagePullPolicy"), "{owned}");
    assert!(!owned.contains("policy.example.com"), "{owned}");

    // A server-side dry run answers with the mutation and stores nothing.
    let rv = d["metadata"]["resourceVersion"].clone();
    let out = k.stdin(
        &["apply", "--server-side", "--force-conflicts", "--dry-run=server", "-o", "json", "-f", "-"],
        &deployment(3, "nginx:1.28"),
    );
    let predicted: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(pull_policy(&predicted), "Always");
    assert_eq!(predicted["spec"]["replicas"], 3);
    let d = k.get("deployment/web", "shop");
    assert_eq!(d["metadata"]["resourceVersion"], rv, "the dry run stored nothing");
    assert_eq!(d["spec"]["replicas"], 2);

    // UPDATE: the policy applies again on a patch; the CREATE-only rule does not.
    k.ok(&["annotate", "deployment", "web", "-n", "shop", "policy.example.com/checked-"]);
    k.ok(&[
        "patch",
        "deployment",
        "web",
        "-n",
        "shop",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/template/spec/containers/0/imagePullPolicy","value":"Never"}]"#,
    ]);
    let d = k.get("deployment/web", "shop");
    assert_eq!(pull_policy(&d), "Always");
    assert!(d["metadata"]["annotations"].get("policy.example.com/checked").is_none());
    assert_eq!(d["metadata"]["generation"], 1, "the mutation undid the change: nothing new to roll out");

    // The scale subresource is not the deployments resource: a rule on it is not called.
    k.server.set_admission(
        Admission::from_yaml("mutations:\n- match: {resource: Deployment}\n  set: [{path: spec.replicas, value: 9}]\n")
            .unwrap(),
    );
    k.ok(&["scale", "deployment/web", "-n", "shop", "--replicas=4"]);
    assert_eq!(k.get("deployment/web", "shop")["spec"]["replicas"], 4);
    k.ok(&["label", "deployment", "web", "-n", "shop", "tier=front"]);
    assert_eq!(k.get("deployment/web", "shop")["spec"]["replicas"], 9, "an update of the main resource is");

    // Without rules, nothing is mutated.
    k.server.clear_admission();
    k.ok(&["set", "image", "deployment/web", "-n", "shop", "web=nginx:1.28"]);
    k.ok(&[
        "patch",
        "deployment",
        "web",
        "-n",
        "shop",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/template/spec/containers/0/imagePullPolicy","value":"Never"}]"#,
    ]);
    assert_eq!(pull_policy(&k.get("deployment/web", "shop")), "Never");
}

async fn send(client: &kube::Client, method: &str, body: &str) -> (u16, Value) {
    let req = axum::http::Request::builder()
        .method(method)
        .uri("/_admin/admission")
        .body(kube::client::Body::from(body.as_bytes().to_vec()))
        .unwrap();
    let res = client.send(req).await.unwrap();
    let code = res.status().as_u16();
    let bytes = res.into_body().collect_bytes().await.unwrap();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test]
async fn rules_through_the_admin_endpoint() {
    let server = TestApiServer::start(Options::default()).unwrap();
    let kc = kube::config::Kubeconfig::read_from(server.kubeconfig_path()).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap();
    let client = kube::Client::try_from(cfg).unwrap();
    let body =
        "mutations:\n- match: {resource: configmaps}\n  set: [{path: data.injected, value: 'yes', ifAbsent: true}]\n";
    let (code, doc) = send(&client, "POST", body).await;
    assert_eq!(code, 200);
    assert_eq!(doc["mutations"][0]["set"][0]["ifAbsent"], true);
    assert_eq!(send(&client, "GET", "").await.1, doc);

    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(client.clone(), "default");
    let cm = serde_json::from_value(serde_json::json!({"metadata": {"name": "a"}, "data": {"k": "v"}})).unwrap();
    let created = api.create(&Default::default(), &cm).await.unwrap();
    assert_eq!(created.data.unwrap().get("injected").map(String::as_str), Some("yes"));

    // A rule set that does not parse, or with a path that cannot be used, is refused and the
    // rules stay as they were.
    for bad in ["mutations: [{set: [{path: 'data[*]', value: 1}]}]", "mutations: [{nope: 1, set: []}]"] {
        assert_eq!(send(&client, "POST", bad).await.0, 400, "{bad}");
    }
    assert_eq!(send(&client, "GET", "").await.1, doc);

    assert_eq!(send(&client, "DELETE", "").await.0, 200);
    let cm = serde_json::from_value(serde_json::json!({"metadata": {"name": "b"}, "data": {"k": "v"}})).unwrap();
    let created = api.create(&Default::default(), &cm).await.unwrap();
    assert!(!created.data.unwrap().contains_key("injected"));
}
