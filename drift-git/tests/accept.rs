//! Accepting a live change into Git (`plan_accept`), for each source shape: the planned files
//! compared byte for byte with the expected text, then the repository with the edits rendered
//! again by the crate's own pipeline (real `kubectl kustomize` / `helm template`) gives the
//! cluster's value at the drift path.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use std::path::Path as FsPath;

use common::*;
use drift_core::path::Path;
use drift_core::source::DesiredSource;
use drift_core::{ErrorKind, ResourceKey};
use drift_git::{
    AcceptPlan, AcceptRequest, FieldChange, FolderConfig, FolderSource, RenderConfig, RendererKind, plan_accept,
};
use serde_json::{Value, json};

fn write(root: &FsPath, files: &[(&str, &str)]) {
    for (path, text) in files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

fn apply(root: &FsPath, plan: &AcceptPlan) {
    for e in &plan.edits {
        let p = root.join(&e.path);
        assert_eq!(e.created, !p.exists(), "{}: `created` says whether the file is new", e.path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, &e.content).unwrap();
    }
}

fn edit<'p>(plan: &'p AcceptPlan, path: &str) -> &'p str {
    let e = plan.edits.iter().find(|e| e.path == path).unwrap_or_else(|| panic!("no edit of {path}: {plan:#?}"));
    std::str::from_utf8(&e.content).unwrap()
}

/// The object `key` as the crate's pipeline renders the folder.
async fn rendered(root: &FsPath, sub: &str, render: &RenderConfig, key: &ResourceKey) -> Value {
    let mut cfg = FolderConfig::new(root);
    cfg.path = (!sub.is_empty()).then(|| sub.to_owned());
    cfg.render = render.clone();
    let snapshot = FolderSource::new(cfg).unwrap().fetch().await.unwrap();
    let fatal: Vec<_> = snapshot.warnings.iter().filter(|w| w.fatal).collect();
    assert!(fatal.is_empty(), "{fatal:?}");
    snapshot
        .resources
        .into_iter()
        .find(|r| &r.key == key)
        .unwrap_or_else(|| panic!("{key} not rendered"))
        .object
        .as_ref()
        .clone()
}

fn at<'v>(object: &'v Value, pointer: &str) -> Option<&'v Value> {
    object.pointer(pointer)
}

fn container(name: &str) -> Path {
    Path::root().field("spec").field("template").field("spec").field("containers").item(
        vec![("name".into(), name.into())],
        vec![false],
        0,
    )
}

fn pod_spec() -> Path {
    Path::root().field("spec").field("template").field("spec")
}

fn change(path: Path, value: Option<Value>) -> FieldChange {
    FieldChange { path, value }
}

fn deployment_key(ns: Option<&str>, name: &str) -> ResourceKey {
    ResourceKey::new("apps", "Deployment", ns, name)
}

const PLAIN: &str = concat!(
    "# Shop front end.\n",
    "---\n",
    "apiVersion: v1\n",
    "kind: ConfigMap\n",
    "metadata: {name: web-settings, namespace: shop}\n",
    "data:\n",
    "  mode: 'fast'   # odd quoting on purpose\n",
    "---\n",
    "apiVersion: apps/v1\n",
    "kind: Deployment\n",
    "metadata:\n",
    "  name: web\n",
    "  namespace: shop\n",
    "  annotations:\n",
    "    team: \"storefront\"\n",
    "    note: remove me\n",
    "spec:\n",
    "  replicas: 2 # scaled by hand\n",
    "  template:\n",
    "    spec:\n",
    "      containers:\n",
    "        - name: web\n",
    "          image: \"registry.example.com/web:1.0\"\n",
    "          args: ['--port', \"8080\"]\n",
    "        - name: sidecar\n",
    "          image: 'proxy:2'\n",
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_yaml_is_edited_in_place_and_the_rest_stays_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[("apps/web.yaml", PLAIN), ("apps/other.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")],
    );
    let key = deployment_key(Some("shop"), "web");
    let request = AcceptRequest {
        key: key.clone(),
        api_version: "apps/v1".into(),
        changes: vec![
            change(Path::root().field("spec").field("replicas"), Some(json!(5))),
            change(container("web").field("image"), Some(json!("registry.example.com/web:1.1"))),
            change(container("sidecar").field("resources"), Some(json!({"limits": {"memory": "64Mi"}}))),
            change(Path::root().field("metadata").field("annotations").field("note"), None),
        ],
    };
    let render = RenderConfig::default();
    let plan = plan_accept(dir.path(), "apps", &render, &request).unwrap();
    assert_eq!(plan.edits.len(), 1, "{plan:#?}");
    assert!(plan.unplaced.is_empty());
    assert!(plan.placed.iter().all(|p| p.file == "apps/web.yaml" && p.how == "edited in place"), "{:?}", plan.placed);
    let expected = PLAIN
        .replace("  replicas: 2 # scaled", "  replicas: 5 # scaled")
        .replace("\"registry.example.com/web:1.0\"", "\"registry.example.com/web:1.1\"")
        .replace("    note: remove me\n", "")
        .replace(
            "          image: 'proxy:2'\n",
            "          image: 'proxy:2'\n          resources:\n            limits:\n              memory: 64Mi\n",
        );
    assert_eq!(edit(&plan, "apps/web.yaml"), expected);
    assert!(!plan.edits[0].created);
    apply(dir.path(), &plan);
    let obj = rendered(dir.path(), "apps", &render, &key).await;
    assert_eq!(at(&obj, "/spec/replicas"), Some(&json!(5)));
    assert_eq!(at(&obj, "/spec/template/spec/containers/0/image"), Some(&json!("registry.example.com/web:1.1")));
    assert_eq!(at(&obj, "/spec/template/spec/containers/1/resources/limits/memory"), Some(&json!("64Mi")));
    assert_eq!(at(&obj, "/metadata/annotations"), Some(&json!({"team": "storefront"})));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_files_are_edited_as_json() {
    let text = "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"ConfigMap\",\n  \"metadata\": {\"name\": \"settings\", \"namespace\": \"shop\"},\n  \"data\": {\n    \"level\": \"info\",\n    \"old\": \"x\"\n  }\n}\n";
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &[("cm.json", text)]);
    let key = ResourceKey::new("", "ConfigMap", Some("shop"), "settings");
    let data = Path::root().field("data");
    let request = AcceptRequest {
        key: key.clone(),
        api_version: "v1".into(),
        changes: vec![
            change(data.field("level"), Some(json!("debug"))),
            change(data.field("old"), None),
            change(data.field("extra"), Some(json!("1"))),
        ],
    };
    let render = RenderConfig::default();
    let plan = plan_accept(dir.path(), "", &render, &request).unwrap();
    assert_eq!(
        edit(&plan, "cm.json"),
        "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"ConfigMap\",\n  \"metadata\": {\"name\": \"settings\", \"namespace\": \"shop\"},\n  \"data\": {\n    \"level\": \"debug\",\n    \"extra\": \"1\"\n  }\n}\n"
    );
    apply(dir.path(), &plan);
    let obj = rendered(dir.path(), "", &render, &key).await;
    assert_eq!(obj["data"], json!({"level": "debug", "extra": "1"}));
}

/// Regression (issue 31, item 4): an object defined as an item of a `kind: List` file (YAML, or
/// JSON as `kubectl get -o json` writes it) is edited in place in its item; before, the plan
/// found no document of the object (JSON: not found, which the runtime answered `not_in_git`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_item_of_a_list_file_is_edited_in_place() {
    let yaml = concat!(
        "# Both settings.\n",
        "apiVersion: v1\n",
        "kind: List\n",
        "items:\n",
        "- apiVersion: v1\n",
        "  kind: ConfigMap\n",
        "  metadata: {name: settings, namespace: shop}\n",
        "  data:\n",
        "    script: |  # why it runs twice\n",
        "      echo one\n",
        "    mode: fast # for now\n",
        "- apiVersion: v1\n",
        "  kind: ConfigMap\n",
        "  metadata: {name: settings, namespace: other}\n",
        "  data: {mode: fast}\n",
    );
    let json_text = "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",\n  \"items\": [\n    {\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"dumped\", \"namespace\": \"shop\"}, \"data\": {\"level\": \"info\"}}\n  ]\n}\n";
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &[("apps/settings.yaml", yaml), ("apps/dumped.json", json_text)]);
    let render = RenderConfig::default();
    let data = Path::root().field("data");
    let key = ResourceKey::new("", "ConfigMap", Some("shop"), "settings");
    let request = AcceptRequest {
        key: key.clone(),
        api_version: "v1".into(),
        changes: vec![
            change(data.field("script"), Some(json!("echo two\necho three\n"))),
            change(data.field("mode"), Some(json!("slow"))),
        ],
    };
    let plan = plan_accept(dir.path(), "apps", &render, &request).unwrap();
    assert!(plan.placed.iter().all(|p| p.file == "apps/settings.yaml" && p.how == "edited in place"), "{plan:?}");
    let expected = yaml
        .replace("      echo one\n", "      echo two\n      echo three\n")
        .replace("mode: fast # for now", "mode: slow # for now");
    assert_eq!(edit(&plan, "apps/settings.yaml"), expected, "the other item (namespace other) is untouched");
    apply(dir.path(), &plan);
    let obj = rendered(dir.path(), "apps", &render, &key).await;
    assert_eq!(obj["data"], json!({"script": "echo two\necho three\n", "mode": "slow"}));

    let key = ResourceKey::new("", "ConfigMap", Some("shop"), "dumped");
    let request = AcceptRequest {
        key: key.clone(),
        api_version: "v1".into(),
        changes: vec![change(data.field("level"), Some(json!("debug")))],
    };
    let plan = plan_accept(dir.path(), "apps", &render, &request).unwrap();
    assert_eq!(edit(&plan, "apps/dumped.json"), json_text.replace("\"info\"", "\"debug\""));
    apply(dir.path(), &plan);
    assert_eq!(rendered(dir.path(), "apps", &render, &key).await["data"], json!({"level": "debug"}));
}

const BASE_DEPLOY: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: web\n        image: web:1.0\n";
const PROD_KUSTOMIZATION: &str =
    "# Production.\nnamespace: prod\nresources:\n  - ../../base\npatches:\n  - path: replicas.yaml # scale\n";
const PROD_REPLICAS: &str =
    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3 # prod size\n";

fn kustomize_repo(root: &FsPath) {
    write(
        root,
        &[
            ("base/kustomization.yaml", "resources:\n- deployment.yaml\n"),
            ("base/deployment.yaml", BASE_DEPLOY),
            ("overlays/prod/kustomization.yaml", PROD_KUSTOMIZATION),
            ("overlays/prod/replicas.yaml", PROD_REPLICAS),
            ("overlays/dev/kustomization.yaml", "namespace: dev\nresources:\n- ../../base\n"),
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kustomize_edits_the_overlay_patch_that_sets_the_value_and_adds_a_patch_for_the_rest() {
    require_kubectl();
    let dir = tempfile::tempdir().unwrap();
    kustomize_repo(dir.path());
    let key = deployment_key(Some("prod"), "web");
    let request = AcceptRequest {
        key: key.clone(),
        api_version: "apps/v1".into(),
        changes: vec![
            change(Path::root().field("spec").field("replicas"), Some(json!(4))),
            change(container("web").field("image"), Some(json!("web:1.1"))),
        ],
    };
    let render = RenderConfig::default();
    let plan = plan_accept(dir.path(), "overlays/prod", &render, &request).unwrap();
    assert!(plan.unplaced.is_empty(), "{plan:#?}");
    assert_eq!(edit(&plan, "overlays/prod/replicas.yaml"), PROD_REPLICAS.replace("replicas: 3", "replicas: 4"));
    assert_eq!(
        edit(&plan, "overlays/prod/drift-accept-deployment-web.yaml"),
        "# Accepted from the cluster by drift-detector.\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n        - name: web\n          image: web:1.1\n"
    );
    assert_eq!(
        edit(&plan, "overlays/prod/kustomization.yaml"),
        format!("{PROD_KUSTOMIZATION}  - path: drift-accept-deployment-web.yaml\n")
    );
    assert!(plan.edits.iter().all(|e| e.path.starts_with("overlays/prod/")), "the shared base is never edited");
    let how: Vec<&str> = plan.placed.iter().map(|p| p.how.as_str()).collect();
    assert_eq!(
        how,
        [
            "overlay patch overlays/prod/replicas.yaml",
            "new overlay patch overlays/prod/drift-accept-deployment-web.yaml"
        ]
    );
    apply(dir.path(), &plan);
    let obj = rendered(dir.path(), "overlays/prod", &render, &key).await;
    assert_eq!(at(&obj, "/spec/replicas"), Some(&json!(4)));
    assert_eq!(at(&obj, "/spec/template/spec/containers/0/image"), Some(&json!("web:1.1")));
    let dev = rendered(dir.path(), "overlays/dev", &render, &deployment_key(Some("dev"), "web")).await;
    assert_eq!(
        at(&dev, "/spec/template/spec/containers/0/image"),
        Some(&json!("web:1.0")),
        "the other overlay is untouched"
    );

    // A second acceptance goes into the patch of the first one, which is already listed.
    let again = AcceptRequest {
        key: key.clone(),
        api_version: "apps/v1".into(),
        changes: vec![change(container("web").field("image"), Some(json!("web:1.2")))],
    };
    let plan = plan_accept(dir.path(), "overlays/prod", &render, &again).unwrap();
    assert_eq!(plan.edits.len(), 1, "{plan:#?}");
    assert!(edit(&plan, "overlays/prod/drift-accept-deployment-web.yaml").ends_with("          image: web:1.2\n"));
}

#[test]
fn a_value_only_a_shared_base_sets_is_not_edited_in_the_base() {
    require_kubectl();
    let dir = tempfile::tempdir().unwrap();
    kustomize_repo(dir.path());
    let key = deployment_key(Some("prod"), "web");
    let request = AcceptRequest {
        key,
        api_version: "apps/v1".into(),
        changes: vec![change(
            Path::root().field("spec").field("selector").field("matchLabels").field("tier"),
            Some(json!("front")),
        )],
    };
    let plan = plan_accept(dir.path(), "overlays/prod", &RenderConfig::default(), &request).unwrap();
    assert!(plan.edits.iter().all(|e| !e.path.starts_with("base/")), "{plan:#?}");
    assert_eq!(plan.placed[0].file, "overlays/prod/drift-accept-deployment-web.yaml");
}

const CHART: &str = "apiVersion: v2\nname: web\nversion: 0.1.0\n";
const CHART_VALUES: &str =
    "# Defaults.\nreplicaCount: 1\nautomount: true\nimage:\n  repository: registry.example.com/web\n  tag: \"1.0\"\n";
const PROD_VALUES: &str = "image:\n  tag: \"1.5\" # prod pin\n";
const TEMPLATE: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n  labels:\n    tier: front\nspec:\n  replicas: {{ .Values.replicaCount }}\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      automountServiceAccountToken: {{ .Values.automount }}\n      containers:\n      - name: web\n        image: \"{{ .Values.image.repository }}:{{ .Values.image.tag }}\"\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_values_keys_are_traced_through_a_marked_render() {
    if !helm_available("helm_values_keys_are_traced_through_a_marked_render") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[
            ("charts/web/Chart.yaml", CHART),
            ("charts/web/values.yaml", CHART_VALUES),
            ("charts/web/templates/deployment.yaml", TEMPLATE),
            ("env/values-prod.yaml", PROD_VALUES),
        ],
    );
    let mut render = RenderConfig { renderer: RendererKind::Helm, ..RenderConfig::default() };
    render.helm.release_name = Some("shop".into());
    render.helm.namespace = Some("prod".into());
    render.helm.values_files = vec!["env/values-prod.yaml".into()];
    let key = deployment_key(Some("prod"), "shop");
    let request = AcceptRequest {
        key: key.clone(),
        api_version: "apps/v1".into(),
        changes: vec![
            change(container("web").field("image"), Some(json!("registry.example.com/web:1.6"))),
            change(Path::root().field("spec").field("replicas"), Some(json!(3))),
            change(Path::root().field("metadata").field("labels").field("tier"), Some(json!("back"))),
            change(pod_spec().field("automountServiceAccountToken"), Some(json!(false))),
        ],
    };
    let plan = plan_accept(dir.path(), "charts/web", &render, &request).unwrap();
    // Keys only the chart's defaults set go in the application's own values file: the chart's
    // values.yaml is shared by every application of the chart.
    assert_eq!(
        edit(&plan, "env/values-prod.yaml"),
        "image:\n  tag: \"1.6\" # prod pin\nreplicaCount: 3\nautomount: false\n"
    );
    assert!(plan.edits.iter().all(|e| e.path != "charts/web/values.yaml"), "{plan:#?}");
    let how: Vec<&str> = plan.placed.iter().map(|p| p.how.as_str()).collect();
    assert_eq!(
        how,
        [
            "values key image.tag in env/values-prod.yaml",
            "values key replicaCount in env/values-prod.yaml",
            "values key automount in env/values-prod.yaml"
        ]
    );
    assert_eq!(plan.unplaced.len(), 1, "{plan:#?}");
    let u = &plan.unplaced[0];
    assert_eq!(u.path, "metadata.labels.tier");
    assert_eq!(u.value, Some(json!("back")));
    assert!(u.hint.contains("apps/Deployment prod/shop") && u.hint.contains("`\"back\"`"), "{}", u.hint);
    apply(dir.path(), &plan);
    let obj = rendered(dir.path(), "charts/web", &render, &key).await;
    assert_eq!(at(&obj, "/spec/template/spec/containers/0/image"), Some(&json!("registry.example.com/web:1.6")));
    assert_eq!(at(&obj, "/spec/replicas"), Some(&json!(3)));
    assert_eq!(at(&obj, "/spec/template/spec/automountServiceAccountToken"), Some(&json!(false)));
}

#[test]
fn secrets_are_refused_and_nothing_is_planned() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &[("s.yaml", "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {password: x}\n")]);
    let request = AcceptRequest {
        key: ResourceKey::new("", "Secret", None, "db"),
        api_version: "v1".into(),
        changes: vec![change(Path::root().field("stringData").field("password"), Some(json!("live")))],
    };
    let err = plan_accept(dir.path(), "", &RenderConfig::default(), &request).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);
    assert!(!err.to_string().contains("live"), "the cluster's value is not repeated: {err}");
}

#[test]
fn a_file_the_editor_does_not_understand_is_refused_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  x: &v one\n  y: *v\n")],
    );
    let request = AcceptRequest {
        key: ResourceKey::new("", "ConfigMap", None, "a"),
        api_version: "v1".into(),
        changes: vec![change(Path::root().field("data").field("x"), Some(json!("two")))],
    };
    let err = plan_accept(dir.path(), "", &RenderConfig::default(), &request).unwrap_err();
    assert!(err.to_string().contains("cm.yaml") && err.to_string().contains("anchors"), "{err}");
}

const STAGE_KUSTOMIZATION: &str = "namePrefix: stage-\nresources:\n  - ../../base\n  - settings.yaml\npatches:\n  - target:\n      kind: Deployment\n      name: web\n    patch: |-\n      - op: replace\n        path: /spec/replicas\n        value: 2\n";
const STAGE_SETTINGS: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: slow # for now\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kustomize_inline_json_patches_own_resources_and_removals() {
    require_kubectl();
    let dir = tempfile::tempdir().unwrap();
    kustomize_repo(dir.path());
    write(
        dir.path(),
        &[
            (
                "base/deployment.yaml",
                &BASE_DEPLOY.replace("  name: web\n", "  name: web\n  annotations: {owner: shop, note: temporary}\n"),
            ),
            ("overlays/stage/kustomization.yaml", STAGE_KUSTOMIZATION),
            ("overlays/stage/settings.yaml", STAGE_SETTINGS),
        ],
    );
    let render = RenderConfig::default();
    let web = deployment_key(None, "stage-web");
    let request = AcceptRequest {
        key: web.clone(),
        api_version: "apps/v1".into(),
        changes: vec![
            change(Path::root().field("spec").field("replicas"), Some(json!(5))),
            change(Path::root().field("metadata").field("annotations").field("note"), None),
        ],
    };
    let plan = plan_accept(dir.path(), "overlays/stage", &render, &request).unwrap();
    assert_eq!(
        edit(&plan, "overlays/stage/kustomization.yaml"),
        STAGE_KUSTOMIZATION.replace("value: 2", "value: 5") + "  - path: drift-accept-deployment-web.yaml\n"
    );
    assert_eq!(
        edit(&plan, "overlays/stage/drift-accept-deployment-web.yaml"),
        "# Accepted from the cluster by drift-detector.\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  annotations:\n    note: null\n"
    );
    assert_eq!(plan.placed[0].how, "inline patch in overlays/stage/kustomization.yaml");
    apply(dir.path(), &plan);
    let obj = rendered(dir.path(), "overlays/stage", &render, &web).await;
    assert_eq!(at(&obj, "/spec/replicas"), Some(&json!(5)));
    assert_eq!(at(&obj, "/metadata/annotations"), Some(&json!({"owner": "shop"})));

    let settings = ResourceKey::new("", "ConfigMap", None, "stage-settings");
    let request = AcceptRequest {
        key: settings.clone(),
        api_version: "v1".into(),
        changes: vec![change(Path::root().field("data").field("mode"), Some(json!("fast")))],
    };
    let plan = plan_accept(dir.path(), "overlays/stage", &render, &request).unwrap();
    assert_eq!(edit(&plan, "overlays/stage/settings.yaml"), STAGE_SETTINGS.replace("slow", "fast"));
    assert_eq!(plan.placed[0].how, "edited in place");
    apply(dir.path(), &plan);
    let obj = rendered(dir.path(), "overlays/stage", &render, &settings).await;
    assert_eq!(at(&obj, "/data/mode"), Some(&json!("fast")));
}

/// A resource file of the overlay's own folder that is a `kind: List` is the object's home too
/// (issue 31, item 4): its item is edited in place, not a new patch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kustomize_overlay_s_own_list_file_is_edited_in_its_item() {
    require_kubectl();
    let dir = tempfile::tempdir().unwrap();
    kustomize_repo(dir.path());
    let list = "# Stage settings.\napiVersion: v1\nkind: List\nitems:\n  - apiVersion: v1\n    kind: ConfigMap\n    metadata:\n      name: settings\n    data:\n      mode: slow # for now\n";
    write(
        dir.path(),
        &[
            ("overlays/lists/kustomization.yaml", "namePrefix: list-\nresources:\n  - ../../base\n  - settings.yaml\n"),
            ("overlays/lists/settings.yaml", list),
        ],
    );
    let render = RenderConfig::default();
    let settings = ResourceKey::new("", "ConfigMap", None, "list-settings");
    let request = AcceptRequest {
        key: settings.clone(),
        api_version: "v1".into(),
        changes: vec![change(Path::root().field("data").field("mode"), Some(json!("fast")))],
    };
    let plan = plan_accept(dir.path(), "overlays/lists", &render, &request).unwrap();
    assert_eq!(plan.edits.len(), 1, "{plan:#?}");
    assert_eq!(edit(&plan, "overlays/lists/settings.yaml"), list.replace("mode: slow", "mode: fast"));
    assert_eq!(plan.placed[0].how, "edited in place");
    apply(dir.path(), &plan);
    let obj = rendered(dir.path(), "overlays/lists", &render, &settings).await;
    assert_eq!(at(&obj, "/data/mode"), Some(&json!("fast")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_of_an_argo_cd_application_is_found_where_the_application_points() {
    let dir = tempfile::tempdir().unwrap();
    let app = "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: web\n  namespace: argocd\nspec:\n  project: default\n  source:\n    repoURL: https://example.com/gitops.git\n    path: apps/web\n  destination:\n    server: https://kubernetes.default.svc\n    namespace: shop\n";
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-settings\ndata:\n  level: info\n";
    write(dir.path(), &[("argocd/web.yaml", app), ("apps/web/cm.yaml", cm)]);
    let key = ResourceKey::new("", "ConfigMap", Some("shop"), "web-settings");
    let request = AcceptRequest {
        key: key.clone(),
        api_version: "v1".into(),
        changes: vec![change(Path::root().field("data").field("level"), Some(json!("debug")))],
    };
    let render = RenderConfig::default();
    let plan = plan_accept(dir.path(), "", &render, &request).unwrap();
    assert_eq!(edit(&plan, "apps/web/cm.yaml"), cm.replace("info", "debug"));
    apply(dir.path(), &plan);
    assert_eq!(rendered(dir.path(), "", &render, &key).await["data"]["level"], "debug");
}

#[test]
fn an_object_the_source_does_not_render_is_an_error_that_says_why() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &[("charts/web/Chart.yaml", CHART), ("charts/web/templates/deployment.yaml", TEMPLATE)]);
    let mut render = RenderConfig { renderer: RendererKind::Helm, ..RenderConfig::default() };
    render.helm.binary = Some("helm-not-installed".into());
    let request = AcceptRequest {
        key: deployment_key(None, "web"),
        api_version: "apps/v1".into(),
        changes: vec![change(Path::root().field("spec").field("replicas"), Some(json!(2)))],
    };
    let err = plan_accept(dir.path(), "charts/web", &render, &request).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    let text = err.to_string();
    assert!(text.contains("apps/Deployment web is not rendered") && text.contains("helm-not-installed"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patches_strategic_merge_file_that_sets_a_container_field_is_edited_by_merge_key() {
    require_kubectl();
    let dir = tempfile::tempdir().unwrap();
    kustomize_repo(dir.path());
    let limits = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n        - name: web\n          resources:\n            limits: {memory: 128Mi, cpu: '1'}\n";
    write(
        dir.path(),
        &[
            ("overlays/qa/kustomization.yaml", "resources:\n- ../../base\npatchesStrategicMerge:\n- limits.yaml\n"),
            ("overlays/qa/limits.yaml", limits),
        ],
    );
    let key = deployment_key(None, "web");
    let request = AcceptRequest {
        key: key.clone(),
        api_version: "apps/v1".into(),
        changes: vec![change(
            container("web").field("resources").field("limits").field("memory"),
            Some(json!("256Mi")),
        )],
    };
    let render = RenderConfig::default();
    let plan = plan_accept(dir.path(), "overlays/qa", &render, &request).unwrap();
    assert_eq!(plan.edits.len(), 1, "{plan:#?}");
    assert_eq!(edit(&plan, "overlays/qa/limits.yaml"), limits.replace("128Mi", "256Mi"));
    apply(dir.path(), &plan);
    let obj = rendered(dir.path(), "overlays/qa", &render, &key).await;
    assert_eq!(
        at(&obj, "/spec/template/spec/containers/0/resources/limits"),
        Some(&json!({"memory": "256Mi", "cpu": "1"}))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_6902_patch_file_in_json_is_edited_as_json() {
    require_kubectl();
    let dir = tempfile::tempdir().unwrap();
    kustomize_repo(dir.path());
    let ops =
        "[\n  {\"op\": \"replace\", \"path\": \"/spec/template/spec/containers/0/image\", \"value\": \"web:2.0\"}\n]\n";
    write(
        dir.path(),
        &[
            (
                "overlays/canary/kustomization.yaml",
                "resources:\n- ../../base\npatchesJson6902:\n- target: {group: apps, version: v1, kind: Deployment, name: web}\n  path: image.json\n",
            ),
            ("overlays/canary/image.json", ops),
        ],
    );
    let key = deployment_key(None, "web");
    let request = AcceptRequest {
        key: key.clone(),
        api_version: "apps/v1".into(),
        changes: vec![change(container("web").field("image"), Some(json!("web:2.1")))],
    };
    let render = RenderConfig::default();
    let plan = plan_accept(dir.path(), "overlays/canary", &render, &request).unwrap();
    assert_eq!(edit(&plan, "overlays/canary/image.json"), ops.replace("web:2.0", "web:2.1"));
    assert_eq!(plan.placed[0].how, "overlay patch overlays/canary/image.json");
    apply(dir.path(), &plan);
    let obj = rendered(dir.path(), "overlays/canary", &render, &key).await;
    assert_eq!(at(&obj, "/spec/template/spec/containers/0/image"), Some(&json!("web:2.1")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flux_target_namespace_that_overrides_the_file_s_namespace_still_finds_the_document() {
    let dir = tempfile::tempdir().unwrap();
    let flux = "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: api\n  namespace: flux-system\nspec:\n  interval: 10m\n  path: ./flux/api\n  targetNamespace: prod\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n";
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: api-settings\n  namespace: somewhere\ndata:\n  level: info\n";
    write(dir.path(), &[("clusters/prod/apps.yaml", flux), ("flux/api/cm.yaml", cm)]);
    let key = ResourceKey::new("", "ConfigMap", Some("prod"), "api-settings");
    let request = AcceptRequest {
        key: key.clone(),
        api_version: "v1".into(),
        changes: vec![change(Path::root().field("data").field("level"), Some(json!("debug")))],
    };
    let render = RenderConfig::default();
    let plan = plan_accept(dir.path(), "", &render, &request).unwrap();
    assert_eq!(edit(&plan, "flux/api/cm.yaml"), cm.replace("info", "debug"));
    apply(dir.path(), &plan);
    assert_eq!(rendered(dir.path(), "", &render, &key).await["data"]["level"], "debug");
}
