//! Reverts sent to the test API server: objects applied as a GitOps applier would (kubectl,
//! server-side, manager `argocd-controller`), changed by hand with kubectl, planned from the
//! engine's drift paths, then sent with [`K8sSource::send_revert`] and read back with kubectl.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Cluster;
use drift_core::remedy::{RevertPlan, revert_plan};
use drift_core::{Engine, ErrorKind, Resource, ResourceKey};
use drift_kube::K8sSource;
use serde_json::{Value, json};

fn git_deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [
                    {"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80}]},
                    {"name": "log", "image": "fluent-bit:3.0"},
                ]},
            },
        },
    })
}

fn git_configmap() -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "shop", "labels": {"app": "web"}},
        "data": {"mode": "fast", "level": "info"}})
}

fn git_service() -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}})
}

fn res(v: Value) -> Resource {
    Resource::from_object(v).unwrap()
}

fn key_of(v: &Value) -> ResourceKey {
    res(v.clone()).key
}

/// Applies Git's objects as the GitOps applier does.
fn gitops_apply(cluster: &Cluster) {
    cluster.kubectl(&["create", "namespace", "shop"]);
    for o in [git_deployment(), git_configmap(), git_service()] {
        cluster.kubectl_stdin(
            &["apply", "--server-side", "--field-manager", "argocd-controller", "-f", "-"],
            &o.to_string(),
        );
    }
}

/// The hand changes: replicas, an image, a label, a data key and a port only the cluster has.
fn hand_changes(cluster: &Cluster) {
    cluster.kubectl(&["scale", "deployment/web", "-n", "shop", "--replicas=5"]);
    cluster.kubectl(&["set", "image", "deployment/web", "-n", "shop", "web=nginx:1.28"]);
    cluster.kubectl(&["label", "configmap/settings", "-n", "shop", "owner=alice"]);
    cluster.kubectl(&["patch", "configmap/settings", "-n", "shop", "-p", r#"{"data":{"level":"debug","trace":"on"}}"#]);
    cluster.kubectl(&[
        "patch",
        "service/web",
        "-n",
        "shop",
        "--type",
        "json",
        "-p",
        r#"[{"op":"add","path":"/spec/ports/-","value":{"name":"debug","port":9000,"targetPort":9000}}]"#,
    ]);
}

/// `kubectl get -o json` of an object.
fn kubectl_get(cluster: &Cluster, kind: &str, name: &str) -> Value {
    serde_json::from_str(&cluster.kubectl(&["get", kind, name, "-n", "shop", "-o", "json", "--show-managed-fields"]))
        .unwrap()
}

async fn read(source: &K8sSource, git: &Value) -> Resource {
    source.get_object(git["apiVersion"].as_str().unwrap(), &key_of(git)).await.unwrap().expect("the object exists")
}

fn drift_paths(engine: &Engine, git: &Value, live: &Resource) -> Vec<String> {
    let mut v: Vec<String> =
        engine.compare_paths(&res(git.clone()), Some(live)).into_iter().map(|(p, _)| p.to_string()).collect();
    v.sort();
    v
}

fn plan(engine: &Engine, git: &Value, live: &Resource) -> RevertPlan {
    let desired = res(git.clone());
    let paths: Vec<_> = engine.compare_paths(&desired, Some(live)).into_iter().map(|(p, _)| p).collect();
    revert_plan(&desired, live, &paths).unwrap()
}

/// The fieldsV1 of a manager's entry with an operation, if any.
fn fields_of(object: &Value, manager: &str, operation: &str) -> Option<Value> {
    object["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == manager && e["operation"] == operation)
        .map(|e| e["fieldsV1"].clone())
}

/// The managedFields entries other than drift-detector's, without their times.
fn other_managers(object: &Value) -> Vec<Value> {
    object["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["manager"] != "drift-detector")
        .map(|e| {
            let mut e = e.clone();
            e.as_object_mut().unwrap().remove("time");
            e
        })
        .collect()
}

const WEB_CONTAINER: &str = r#"k:{"name":"web"}"#;

#[tokio::test]
async fn a_dry_run_shows_gits_values_and_changes_nothing() {
    let cluster = Cluster::start();
    gitops_apply(&cluster);
    hand_changes(&cluster);
    let source = cluster.source().await;
    let engine = Engine::default();
    for (git, kind, name) in [
        (git_deployment(), "deployment", "web"),
        (git_configmap(), "configmap", "settings"),
        (git_service(), "service", "web"),
    ] {
        let before = kubectl_get(&cluster, kind, name);
        let live = read(&source, &git).await;
        assert!(!drift_paths(&engine, &git, &live).is_empty(), "{kind} drifted by hand");
        let plan = plan(&engine, &git, &live);
        let answer = source.send_revert(&plan, &live, true).await.unwrap();
        assert_eq!(drift_paths(&engine, &git, &answer), Vec::<String>::new(), "{kind}: the answer shows Git's values");
        assert_eq!(kubectl_get(&cluster, kind, name), before, "{kind}: a dry run changes nothing");
    }
    let dry_runs: Vec<_> = cluster
        .server
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH" && r.query.get("fieldManager").map(String::as_str) == Some("drift-detector"))
        .collect();
    // Deployment: apply only; ConfigMap: removal and apply; Service: removal only.
    assert_eq!(dry_runs.len(), 4, "{dry_runs:?}");
    assert!(dry_runs.iter().all(|r| r.query.get("dryRun").map(String::as_str) == Some("All")), "{dry_runs:?}");
}

#[tokio::test]
async fn a_revert_puts_back_only_the_drifted_fields_under_drift_detector() {
    let cluster = Cluster::start();
    gitops_apply(&cluster);
    hand_changes(&cluster);
    let source = cluster.source().await;
    let engine = Engine::default();

    // Deployment: replicas and the web container's image.
    let live = read(&source, &git_deployment()).await;
    assert_eq!(
        drift_paths(&engine, &git_deployment(), &live),
        vec!["spec.replicas".to_owned(), "spec.template.spec.containers[name=web].image".to_owned()]
    );
    let before = kubectl_get(&cluster, "deployment", "web");
    let answer = source.send_revert(&plan(&engine, &git_deployment(), &live), &live, false).await.unwrap();
    let after = kubectl_get(&cluster, "deployment", "web");
    assert_eq!(answer.object["metadata"]["resourceVersion"], after["metadata"]["resourceVersion"]);
    assert_eq!(after["spec"]["replicas"], 2);
    assert_eq!(after["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.27");
    assert_eq!(drift_paths(&engine, &git_deployment(), &res(after.clone())), Vec::<String>::new());
    assert_eq!(
        fields_of(&after, "drift-detector", "Apply"),
        Some(json!({"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
            WEB_CONTAINER: {".": {}, "f:image": {}, "f:name": {}}}}}}}))
    );
    // Other fields untouched: everything but replicas, the web image and managedFields.
    let strip = |mut o: Value| {
        o["spec"].as_object_mut().unwrap().remove("replicas");
        o["spec"]["template"]["spec"]["containers"][0].as_object_mut().unwrap().remove("image");
        let meta = o["metadata"].as_object_mut().unwrap();
        for k in ["managedFields", "resourceVersion", "generation"] {
            meta.remove(k);
        }
        o.as_object_mut().unwrap().remove("status");
        o
    };
    assert_eq!(strip(after.clone()), strip(before.clone()));
    // The applier keeps every field it owned; the hand changes' managers lost only what was reverted.
    let argo_before = fields_of(&before, "argocd-controller", "Apply").unwrap();
    let argo_after = fields_of(&after, "argocd-controller", "Apply").unwrap();
    assert_eq!(argo_after, argo_before);
    assert!(argo_after["f:spec"]["f:template"]["f:spec"]["f:containers"][r#"k:{"name":"log"}"#]["f:image"].is_object());
    let managers = |o: &Value| {
        let mut v: Vec<String> = other_managers(o).iter().map(|e| e["manager"].as_str().unwrap().to_owned()).collect();
        v.sort();
        v
    };
    assert!(managers(&before).iter().any(|m| m.starts_with("kubectl")), "{:?}", managers(&before));
    // The hand changes' managers owned only the reverted fields: their entries are gone; the
    // applier's entry is as it was.
    assert_eq!(managers(&before), vec!["argocd-controller", "kubectl", "kubectl-set"]);
    let applier_before: Vec<Value> =
        other_managers(&before).into_iter().filter(|e| e["manager"] == "argocd-controller").collect();
    assert_eq!(other_managers(&after), applier_before);

    // ConfigMap: a value changed by hand (level), a data key and a label only the cluster has.
    let live = read(&source, &git_configmap()).await;
    assert_eq!(
        drift_paths(&engine, &git_configmap(), &live),
        vec!["data.level".to_owned(), "data.trace".to_owned(), "metadata.labels.owner".to_owned()]
    );
    source.send_revert(&plan(&engine, &git_configmap(), &live), &live, false).await.unwrap();
    let after = kubectl_get(&cluster, "configmap", "settings");
    assert_eq!(after["data"], json!({"mode": "fast", "level": "info"}), "trace is removed, level is Git's");
    assert_eq!(after["metadata"]["labels"], json!({"app": "web"}), "the hand label is removed");
    assert_eq!(fields_of(&after, "drift-detector", "Apply"), Some(json!({"f:data": {"f:level": {}}})));
    assert_eq!(drift_paths(&engine, &git_configmap(), &res(after.clone())), Vec::<String>::new());
    assert_eq!(
        fields_of(&after, "argocd-controller", "Apply").unwrap()["f:data"],
        json!({"f:mode": {}}),
        "the applier lost level to the hand change and nothing else"
    );

    // Service: a port only the cluster has; removals only, no apply.
    let live = read(&source, &git_service()).await;
    assert_eq!(drift_paths(&engine, &git_service(), &live), vec!["spec.ports[port=9000]".to_owned()]);
    let service_plan = plan(&engine, &git_service(), &live);
    assert!(service_plan.apply.is_none());
    let answer = source.send_revert(&service_plan, &live, false).await.unwrap();
    let after = kubectl_get(&cluster, "service", "web");
    assert_eq!(answer.object["spec"]["ports"], after["spec"]["ports"]);
    assert_eq!(after["spec"]["ports"].as_array().unwrap().len(), 1);
    assert_eq!(after["spec"]["ports"][0]["name"], "http");
    assert_eq!(drift_paths(&engine, &git_service(), &res(after.clone())), Vec::<String>::new());
    assert_eq!(fields_of(&after, "drift-detector", "Apply"), None, "nothing applied");
    assert!(fields_of(&after, "argocd-controller", "Apply").is_some());
}

#[tokio::test]
async fn a_second_revert_keeps_what_the_first_one_set() {
    let cluster = Cluster::start();
    gitops_apply(&cluster);
    let source = cluster.source().await;
    let engine = Engine::default();
    let git = git_deployment();

    cluster.kubectl(&["scale", "deployment/web", "-n", "shop", "--replicas=5"]);
    let live = read(&source, &git).await;
    assert_eq!(drift_paths(&engine, &git, &live), vec!["spec.replicas".to_owned()]);
    source.send_revert(&plan(&engine, &git, &live), &live, false).await.unwrap();
    let first = kubectl_get(&cluster, "deployment", "web");
    assert_eq!(first["spec"]["replicas"], 2);
    // Only drift-detector owns replicas now: an apply without it would drop the field.
    let owners: Vec<&str> = first["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["fieldsV1"]["f:spec"].get("f:replicas").is_some())
        .map(|e| e["manager"].as_str().unwrap())
        .collect();
    assert_eq!(owners, vec!["drift-detector"]);

    cluster.kubectl(&["set", "image", "deployment/web", "-n", "shop", "web=nginx:1.28"]);
    let live = read(&source, &git).await;
    assert_eq!(drift_paths(&engine, &git, &live), vec!["spec.template.spec.containers[name=web].image".to_owned()]);
    let second = plan(&engine, &git, &live);
    assert!(second.apply.as_ref().unwrap()["spec"].get("replicas").is_none(), "the plan covers the image only");
    // The dry run already shows both fields kept.
    let dry = source.send_revert(&second, &live, true).await.unwrap();
    assert_eq!(dry.object["spec"]["replicas"], 2);
    source.send_revert(&second, &live, false).await.unwrap();
    let after = kubectl_get(&cluster, "deployment", "web");
    assert_eq!(after["spec"]["replicas"], 2, "the first revert's field is kept");
    assert_eq!(after["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.27");
    assert_eq!(drift_paths(&engine, &git, &res(after.clone())), Vec::<String>::new());
    assert_eq!(
        fields_of(&after, "drift-detector", "Apply"),
        Some(json!({"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
            WEB_CONTAINER: {".": {}, "f:image": {}, "f:name": {}}}}}}}))
    );
}

#[tokio::test]
async fn a_stale_plan_fails_on_its_test_and_changes_nothing() {
    let cluster = Cluster::start();
    gitops_apply(&cluster);
    hand_changes(&cluster);
    let source = cluster.source().await;
    let engine = Engine::default();
    let live = read(&source, &git_configmap()).await;
    let stale = plan(&engine, &git_configmap(), &live);
    // Somebody changes the field again after the reading.
    cluster.kubectl(&["patch", "configmap/settings", "-n", "shop", "-p", r#"{"data":{"trace":"off"}}"#]);
    let before = kubectl_get(&cluster, "configmap", "settings");
    let err = source.send_revert(&stale, &live, false).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    let text = err.to_string();
    assert!(text.contains("ConfigMap shop/settings"), "{text}");
    assert!(text.contains("changed since it was read") && text.contains("`test`"), "{text}");
    assert!(text.contains("HTTP 422"), "{text}");
    assert_eq!(kubectl_get(&cluster, "configmap", "settings"), before, "nothing was changed");
    // Read again, plan anew: it goes through.
    let live = read(&source, &git_configmap()).await;
    source.send_revert(&plan(&engine, &git_configmap(), &live), &live, false).await.unwrap();
    assert_eq!(kubectl_get(&cluster, "configmap", "settings")["data"], json!({"mode": "fast", "level": "info"}));
}

/// Issue 31, item 1: the forced apply of Git's values carried no precondition, and overwrote a
/// value set after the plan was made. Now it carries the resourceVersion the plan was made from.
#[tokio::test]
async fn an_apply_planned_from_an_older_version_is_a_conflict_and_changes_nothing() {
    let cluster = Cluster::start();
    gitops_apply(&cluster);
    hand_changes(&cluster);
    let source = cluster.source().await;
    let engine = Engine::default();
    let live = read(&source, &git_deployment()).await;
    let old = plan(&engine, &git_deployment(), &live);
    assert!(old.remove.0.is_empty() && old.apply.is_some(), "an apply only: {old:?}");
    assert_eq!(old.resource_version.as_deref(), live.object["metadata"]["resourceVersion"].as_str());
    // Somebody scales it again after the reading.
    cluster.kubectl(&["scale", "deployment/web", "-n", "shop", "--replicas=7"]);
    let before = kubectl_get(&cluster, "deployment", "web");
    for dry_run in [true, false] {
        let err = source.send_revert(&old, &live, dry_run).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
        let text = err.to_string();
        assert!(text.contains("HTTP 409") && text.contains("changed since it was read"), "{text}");
    }
    assert_eq!(kubectl_get(&cluster, "deployment", "web"), before, "nothing was changed");
    assert_eq!(before["spec"]["replicas"], 7);
    // Read again, plan anew: it goes through.
    let live = read(&source, &git_deployment()).await;
    source.send_revert(&plan(&engine, &git_deployment(), &live), &live, false).await.unwrap();
    assert_eq!(kubectl_get(&cluster, "deployment", "web")["spec"]["replicas"], 2);
}

#[tokio::test]
async fn a_missing_object_is_a_clear_error_and_is_not_created() {
    let cluster = Cluster::start();
    gitops_apply(&cluster);
    hand_changes(&cluster);
    let source = cluster.source().await;
    let engine = Engine::default();
    // One plan with removals first (the JSON patch meets the absence), one with an apply only.
    let cm = read(&source, &git_configmap()).await;
    let cm_plan = plan(&engine, &git_configmap(), &cm);
    let dep = read(&source, &git_deployment()).await;
    let dep_plan = plan(&engine, &git_deployment(), &dep);
    assert!(dep_plan.remove.0.is_empty() && !cm_plan.remove.0.is_empty());
    cluster.kubectl(&["delete", "configmap/settings", "deployment/web", "-n", "shop"]);
    assert_eq!(source.get_object("v1", &cm.key).await.unwrap(), None);
    for (plan, live, what) in
        [(&cm_plan, &cm, "ConfigMap shop/settings"), (&dep_plan, &dep, "apps/Deployment shop/web")]
    {
        for dry_run in [true, false] {
            let err = source.send_revert(plan, live, dry_run).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
            let text = err.to_string();
            assert!(text.contains(what) && text.contains("does not exist in the cluster"), "{text}");
        }
    }
    let out = cluster.kubectl_command(&["get", "deployment/web", "-n", "shop"]).output().unwrap();
    assert!(!out.status.success(), "the revert did not create the object");
}

fn git_secret() -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "db", "namespace": "shop"},
        "type": "Opaque", "stringData": {"password": "git-pass"}})
}

#[tokio::test]
async fn a_secret_written_with_string_data_is_reverted_and_its_values_stay_out_of_errors() {
    let cluster = Cluster::start();
    gitops_apply(&cluster);
    cluster.kubectl_stdin(
        &["apply", "--server-side", "--field-manager", "argocd-controller", "-f", "-"],
        &git_secret().to_string(),
    );
    cluster.kubectl(&["patch", "secret/db", "-n", "shop", "-p", r#"{"stringData":{"password":"hand-pass"}}"#]);
    let source = cluster.source().await;
    let engine = Engine::default();
    let live = read(&source, &git_secret()).await;
    assert_eq!(drift_paths(&engine, &git_secret(), &live), vec!["data.password".to_owned()]);
    let secret_plan = plan(&engine, &git_secret(), &live);

    // An API server that refuses the apply: the error says so and quotes no value.
    cluster.server.set_faults(
        serde_json::from_value(json!({"faults": [{"match": {"verb": "patch", "resource": "secrets"},
            "action": {"type": "error", "code": 422,
                "message": "Secret \"db\" is invalid: data[password]: Invalid value: \"git-pass\""}}]}))
        .unwrap(),
    );
    let err = source.send_revert(&secret_plan, &live, false).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    let text = err.to_string();
    assert!(text.contains("Secret shop/db") && text.contains("HTTP 422") && text.contains("invalid"), "{text}");
    assert!(!text.contains("git-pass") && !text.contains("hand-pass"), "no Secret value in errors: {text}");
    cluster.server.clear_faults();

    // The revert puts Git's value back as the API server stores it, in `data`.
    source.send_revert(&secret_plan, &live, false).await.unwrap();
    let after = kubectl_get(&cluster, "secret", "db");
    assert_eq!(after["data"]["password"], "Z2l0LXBhc3M=", "base64 of git-pass");
    assert_eq!(drift_paths(&engine, &git_secret(), &res(after)), Vec::<String>::new());
}

#[tokio::test]
async fn conflicts_and_invalid_objects_are_errors_that_say_so() {
    let cluster = Cluster::start();
    gitops_apply(&cluster);
    hand_changes(&cluster);
    let source = cluster.source().await;
    let engine = Engine::default();
    let dep = read(&source, &git_deployment()).await;
    let dep_plan = plan(&engine, &git_deployment(), &dep);
    cluster.server.set_faults(
        serde_json::from_value(json!({"faults": [{"match": {"verb": "patch", "resource": "deployments"},
            "action": {"type": "error", "code": 409, "message": "Operation cannot be fulfilled"}}]}))
        .unwrap(),
    );
    let err = source.send_revert(&dep_plan, &dep, false).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    let text = err.to_string();
    assert!(
        text.contains("apps/Deployment shop/web") && text.contains("HTTP 409") && text.contains("conflict"),
        "{text}"
    );
    assert!(text.contains("Operation cannot be fulfilled"), "the server's message is shown for other kinds: {text}");

    cluster.server.set_faults(
        serde_json::from_value(json!({"faults": [{"match": {"verb": "patch", "resource": "deployments"},
            "action": {"type": "error", "code": 422, "message": "spec.replicas: Invalid value: -1"}}]}))
        .unwrap(),
    );
    let err = source.send_revert(&dep_plan, &dep, true).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    let text = err.to_string();
    assert!(text.contains("dry run of the revert of apps/Deployment shop/web") && text.contains("HTTP 422"), "{text}");
    assert!(text.contains("spec.replicas: Invalid value"), "{text}");
    cluster.server.clear_faults();
    assert_eq!(kubectl_get(&cluster, "deployment", "web")["spec"]["replicas"], 5, "nothing was changed");
}

#[tokio::test]
async fn a_field_git_dropped_after_the_detector_set_it_is_removed_in_the_dry_run_and_for_real() {
    let cluster = Cluster::start();
    gitops_apply(&cluster);
    let source = cluster.source().await;
    let engine = Engine::default();
    // A first revert: drift-detector takes `level` from the hand change.
    cluster.kubectl(&["patch", "configmap/settings", "-n", "shop", "-p", r#"{"data":{"level":"debug"}}"#]);
    let live = read(&source, &git_configmap()).await;
    source.send_revert(&plan(&engine, &git_configmap(), &live), &live, false).await.unwrap();
    assert_eq!(
        fields_of(&kubectl_get(&cluster, "configmap", "settings"), "drift-detector", "Apply"),
        Some(json!({"f:data": {"f:level": {}}}))
    );
    // Git drops `level`; somebody changes `mode` by hand.
    let mut git = git_configmap();
    git["data"].as_object_mut().unwrap().remove("level");
    cluster.kubectl(&["patch", "configmap/settings", "-n", "shop", "-p", r#"{"data":{"mode":"slow"}}"#]);
    let live = read(&source, &git).await;
    // drift-detector is an applier (its reverts write Git's values): a field only the cluster
    // has that it set, and that Git dropped since, is drift like one the GitOps applier left.
    assert_eq!(drift_paths(&engine, &git, &live), vec!["data.level".to_owned(), "data.mode".to_owned()]);
    let desired = res(git.clone());
    let paths: Vec<_> = engine.compare_paths(&desired, Some(&live)).into_iter().map(|(p, _)| p).collect();
    let both = revert_plan(&desired, &live, &paths).unwrap();
    assert!(both.apply.is_some() && !both.remove.0.is_empty());
    let before = kubectl_get(&cluster, "configmap", "settings");
    let dry = source.send_revert(&both, &live, true).await.unwrap();
    assert_eq!(dry.object["data"], json!({"mode": "fast"}));
    assert_eq!(kubectl_get(&cluster, "configmap", "settings"), before);
    let done = source.send_revert(&both, &live, false).await.unwrap();
    let after = kubectl_get(&cluster, "configmap", "settings");
    assert_eq!(after["data"], json!({"mode": "fast"}));
    assert_eq!(done.object["data"], after["data"]);
    assert_eq!(fields_of(&after, "drift-detector", "Apply"), Some(json!({"f:data": {"f:mode": {}}})));
    assert_eq!(drift_paths(&engine, &git, &res(after)), Vec::<String>::new());
}

#[tokio::test]
async fn a_cluster_scoped_object_is_reverted_too() {
    let cluster = Cluster::start();
    let git = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"team": "a"}}});
    cluster.kubectl_stdin(
        &["apply", "--server-side", "--field-manager", "argocd-controller", "-f", "-"],
        &git.to_string(),
    );
    cluster.kubectl(&["label", "namespace/team-a", "team=b", "--overwrite"]);
    let source = cluster.source().await;
    let engine = Engine::default();
    let live = read(&source, &git).await;
    assert_eq!(live.key.namespace, None);
    assert_eq!(drift_paths(&engine, &git, &live), vec!["metadata.labels.team".to_owned()]);
    let ns_plan = plan(&engine, &git, &live);
    assert!(ns_plan.apply.as_ref().unwrap()["metadata"].get("namespace").is_none());
    source.send_revert(&ns_plan, &live, false).await.unwrap();
    let after: Value =
        serde_json::from_str(&cluster.kubectl(&["get", "namespace", "team-a", "-o", "json", "--show-managed-fields"]))
            .unwrap();
    assert_eq!(after["metadata"]["labels"]["team"], "a");
    assert_eq!(fields_of(&after, "drift-detector", "Apply"), Some(json!({"f:metadata": {"f:labels": {"f:team": {}}}})));
    // Nothing left to revert: an empty plan is refused, not sent.
    let live = read(&source, &git).await;
    let empty = plan(&engine, &git, &live);
    assert!(empty.is_empty());
    let requests = cluster.server.requests().len();
    let err = source.send_revert(&empty, &live, false).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.to_string().contains("changes nothing"), "{err}");
    assert_eq!(cluster.server.requests().len(), requests, "no request");
}
