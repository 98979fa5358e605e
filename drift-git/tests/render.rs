//! Renderers and GitOps objects: Argo CD Applications, Flux Kustomizations and HelmReleases,
//! Helm through a real `helm template` (skipped, and said so, when helm is not on PATH, unless
//! `DRIFT_REQUIRE_TOOLS=1`), missing programs, and the `drift render` output.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::*;
use drift_core::ErrorKind;
use drift_core::source::DesiredSource;
use drift_git::{
    FolderConfig, FolderSource, GitConfig, GitSource, OutputFormat, RenderRequest, RendererKind, format_snapshot,
    has_errors, render,
};
use drift_testkit::charts::{ChartServer, Registry, helm, helm_push, package_web_charts, registry_available};

fn application(name: &str, repo_url: &str, path: &str, namespace: &str) -> String {
    format!(
        "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: {name}\n  namespace: argocd\nspec:\n  project: default\n  source:\n    repoURL: {repo_url}\n    targetRevision: main\n    path: {path}\n  destination:\n    server: https://kubernetes.default.svc\n    namespace: {namespace}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argo_cd_and_flux_layouts_work_without_extra_configuration() {
    require_kubectl();
    let origin = Origin::new();
    let url = origin.url();
    origin.write("argocd/web.yaml", &application("web", &url, "apps/web", "shop"));
    origin.write("argocd/elsewhere.yaml", &application("x", "https://github.com/other/repo.git", "apps/web", "x"));
    origin.write("apps/web/deploy.yaml", &deployment("web", 2));
    origin.write("apps/web/cm.yaml", &configmap("keeps", "other", "1"));
    origin.write("apps/web/nested/extra.yaml", &configmap("extra", "shop", "1"));
    origin.write(
        "clusters/prod/apps.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: api\n  namespace: flux-system\nspec:\n  interval: 10m\n  path: ./flux/api\n  targetNamespace: prod\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n",
    );
    origin.write("flux/api/kustomization.yaml", "resources:\n  - deploy.yaml\n  - cm.yaml\n");
    origin.write("flux/api/deploy.yaml", &deployment("api", 3));
    origin.write("flux/api/cm.yaml", &configmap("api-settings", "somewhere", "1"));
    origin.commit("layout");
    let mut cfg = GitConfig::new(url, "main");
    cfg.cache_dir = Some(origin.cache());
    let snap = GitSource::new(cfg).unwrap().fetch().await.unwrap();
    assert!(!has_errors(&snap), "{:?}", snap.warnings);
    assert_eq!(
        keys(&snap),
        vec![
            "ConfigMap other/keeps",
            "ConfigMap prod/api-settings",
            "apps/Deployment prod/api",
            "apps/Deployment shop/web",
            "argoproj.io/Application argocd/web",
            "argoproj.io/Application argocd/x",
            "kustomize.toolkit.fluxcd.io/Kustomization flux-system/api",
        ],
        "destination.namespace fills in missing namespaces; targetNamespace overrides; directory.recurse is off"
    );
    let web = snap.resources.iter().find(|r| r.key.name == "web" && r.key.kind == "Deployment").unwrap();
    assert_eq!(web.provenance.path.as_deref(), Some("apps/web/deploy.yaml"));
    assert_eq!(web.object["metadata"]["namespace"], "shop");
    let api = snap.resources.iter().find(|r| r.key.name == "api" && r.key.kind == "Deployment").unwrap();
    assert_eq!(api.provenance.path.as_deref(), Some("flux/api/kustomization.yaml"));
    assert!(snap.warnings.iter().any(|w| !w.fatal && w.message.contains("another repository")));
}

/// A small chart (`charts/web`: a Deployment without a namespace, a ConfigMap in the release
/// namespace, notes and a helper that are not objects), a production values file, a Flux
/// HelmRelease that renders it with inline values on top, and a plain ConfigMap.
fn chart_repository() -> tempfile::TempDir {
    let repo = tempfile::tempdir().unwrap();
    let w = |p: &str, t: &str| put(repo.path(), p, t);
    w("charts/web/Chart.yaml", "apiVersion: v2\nname: web\nversion: 1.0.0\n");
    w("charts/web/values.yaml", "replicas: 1\nimage: {repository: nginx, tag: \"1.27\"}\nmode: default\n");
    w("charts/web/templates/_helpers.tpl", "{{- define \"web.name\" -}}{{ .Release.Name }}-web{{- end -}}\n");
    w("charts/web/templates/NOTES.txt", "Installed {{ .Release.Name }}.\n");
    w(
        "charts/web/templates/deploy.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ include \"web.name\" . }}\nspec:\n  replicas: {{ .Values.replicas }}\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n        - name: web\n          image: \"{{ .Values.image.repository }}:{{ .Values.image.tag }}\"\n",
    );
    w(
        "charts/web/templates/settings.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-settings\n  namespace: {{ .Release.Namespace }}\ndata:\n  mode: {{ .Values.mode | quote }}\n",
    );
    w("charts/web/values-prod.yaml", "replicas: 3\nmode: prod\n");
    w(
        "releases/web.yaml",
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: web\n  namespace: web\nspec:\n  chart:\n    spec:\n      chart: ./charts/web\n      valuesFiles: [charts/web/values-prod.yaml]\n      sourceRef: {kind: GitRepository, name: flux-system}\n  values:\n    image: {tag: v2}\n    mode: inline\n",
    );
    w("plain/cm.yaml", &configmap("plain", "default", "1"));
    repo
}

fn object<'a>(snap: &'a drift_core::DesiredSnapshot, kind: &str, name: &str) -> &'a drift_core::Resource {
    snap.resources.iter().find(|r| r.key.kind == kind && r.key.name == name).unwrap_or_else(|| panic!("{kind} {name}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_template_renders_a_chart_with_release_namespace_and_values() {
    if !helm_available("helm_template_renders_a_chart_with_release_namespace_and_values") {
        return;
    }
    let repo = chart_repository();
    let mut cfg = FolderConfig::new(repo.path());
    let snap = FolderSource::new(cfg.clone()).unwrap().fetch().await.unwrap();
    assert!(!has_errors(&snap), "{:?}", snap.warnings);
    assert_eq!(
        keys(&snap),
        vec![
            "ConfigMap default/plain",
            "ConfigMap web/web-settings",
            "apps/Deployment web/web-web",
            "helm.toolkit.fluxcd.io/HelmRelease web/web",
        ],
        "the release's objects, named after the release; notes and helpers are not objects"
    );
    let deploy = object(&snap, "Deployment", "web-web");
    assert_eq!(deploy.key.namespace.as_deref(), Some("web"), "objects without a namespace land in the release's");
    assert_eq!(deploy.provenance.path.as_deref(), Some("charts/web/Chart.yaml"));
    assert_eq!(deploy.object["spec"]["replicas"], 3, "the HelmRelease's values file is used");
    assert_eq!(
        deploy.object["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:v2",
        "inline values are merged over the chart's values"
    );
    let settings = object(&snap, "ConfigMap", "web-settings");
    assert_eq!(settings.object["data"]["mode"], "inline", "inline values follow the values files");
    assert_eq!(settings.object["metadata"]["namespace"], "web", "helm template got --namespace");
    // The chart's templates are never read as plain YAML, and no stale "chart skipped" note.
    assert!(
        snap.warnings.iter().all(|w| !w.path.as_deref().unwrap_or("").starts_with("charts/")),
        "{:?}",
        snap.warnings
    );

    // renderer: helm on the chart folder itself, with release and namespace from the config and
    // the chart's own values.
    cfg.path = Some("charts/web".into());
    cfg.render.renderer = RendererKind::Helm;
    cfg.render.helm.release_name = Some("site".into());
    cfg.render.helm.namespace = Some("site-ns".into());
    let snap = FolderSource::new(cfg).unwrap().fetch().await.unwrap();
    assert!(!has_errors(&snap), "{:?}", snap.warnings);
    // The ConfigMap names `.Release.Namespace`; the Deployment names no namespace and lands in
    // the release's, as `helm install --namespace` puts it.
    let mut names: Vec<_> = snap.resources.iter().map(|r| (r.key.kind.as_str(), r.key.name.as_str())).collect();
    names.sort();
    assert_eq!(names, vec![("ConfigMap", "site-settings"), ("Deployment", "site-web")]);
    assert_eq!(object(&snap, "ConfigMap", "site-settings").key.namespace.as_deref(), Some("site-ns"));
    let deploy = object(&snap, "Deployment", "site-web");
    assert_eq!(deploy.key.namespace.as_deref(), Some("site-ns"), "objects without a namespace land in the release's");
    assert_eq!(deploy.object["spec"]["replicas"], 1);
    assert_eq!(deploy.object["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.27");
    assert_eq!(object(&snap, "ConfigMap", "site-settings").object["data"]["mode"], "default");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_helm_is_named_and_the_rest_is_read() {
    let repo = chart_repository();
    let mut cfg = FolderConfig::new(repo.path());
    cfg.render.helm.binary = Some("helm-is-not-installed".into());
    let snap = FolderSource::new(cfg).unwrap().fetch().await.unwrap();
    let err = snap.warnings.iter().find(|w| w.fatal).unwrap();
    assert_eq!(err.kind, ErrorKind::Unsupported);
    assert!(err.message.contains("`helm-is-not-installed` was not found"), "{err}");
    assert_eq!(err.path.as_deref(), Some("charts/web"));
    assert_eq!(keys(&snap), vec!["ConfigMap default/plain", "helm.toolkit.fluxcd.io/HelmRelease web/web"]);
}

#[tokio::test]
async fn a_missing_kustomize_program_is_named_and_plain_renderer_skips_kustomizations() {
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(repo.path().join("app")).unwrap();
    std::fs::write(repo.path().join("app/kustomization.yaml"), "resources: [cm.yaml]\n").unwrap();
    std::fs::write(repo.path().join("app/cm.yaml"), configmap("a", "shop", "1")).unwrap();
    std::fs::write(
        repo.path().join("list.yaml"),
        "apiVersion: v1\nkind: List\nitems:\n  - {apiVersion: v1, kind: Secret, metadata: {name: s1, namespace: shop}}\n  - {apiVersion: v1, kind: Secret, metadata: {name: s2, namespace: shop}}\n",
    )
    .unwrap();

    let mut cfg = FolderConfig::new(repo.path());
    cfg.render.kustomize_binary = Some("kustomize-is-not-installed".into());
    let snap = FolderSource::new(cfg.clone()).unwrap().fetch().await.unwrap();
    assert_eq!(keys(&snap), vec!["Secret shop/s1", "Secret shop/s2"], "a List is expanded");
    let err = snap.warnings.iter().find(|w| w.fatal).unwrap();
    assert!(err.message.contains("kustomize-is-not-installed"), "{err}");
    assert_eq!(err.path.as_deref(), Some("app"));

    cfg.render.renderer = RendererKind::Plain;
    let snap = FolderSource::new(cfg).unwrap().fetch().await.unwrap();
    assert_eq!(keys(&snap), vec!["ConfigMap shop/a", "Secret shop/s1", "Secret shop/s2"]);
    assert!(snap.warnings.iter().any(|w| !w.fatal && w.path.as_deref() == Some("app/kustomization.yaml")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_prints_each_object_with_its_file_and_commit() {
    let origin = Origin::new();
    origin.write("apps/a.yaml", &configmap("a", "shop", "1"));
    origin.write("apps/broken.yaml", "kind: [\n");
    let commit = origin.commit("one");

    // A local folder without --ref is read as it is on disk.
    let snap = render(&RenderRequest::new(origin.work.display().to_string())).await.unwrap();
    assert!(snap.revision.as_deref().unwrap().starts_with("sha256:"));
    assert!(has_errors(&snap), "the broken file makes `drift render` exit with 2");

    // The same folder at a ref is read through git.
    let mut req = RenderRequest::new(origin.bare.display().to_string());
    req.reference = Some("main".into());
    req.path = Some("apps".into());
    req.cache_dir = Some(origin.cache());
    let snap = render(&req).await.unwrap();
    assert_eq!(snap.revision.as_deref(), Some(commit.as_str()));

    let yaml = format_snapshot(&snap, OutputFormat::Yaml);
    assert!(yaml.contains("---\n# Source: apps/a.yaml (document 0)\n"), "{yaml}");
    assert!(yaml.contains(&format!("# Revision: {commit}\n")), "{yaml}");
    assert!(yaml.contains("kind: ConfigMap"), "{yaml}");
    assert!(yaml.contains("# error: apps/broken.yaml:1"), "{yaml}");
    let reparsed = drift_core::manifest::parse_manifests(&yaml, "out.yaml");
    assert_eq!(reparsed.resources.len(), 1, "the YAML output is valid manifests again");

    let json: serde_json::Value = serde_json::from_str(&format_snapshot(&snap, OutputFormat::Json)).unwrap();
    assert_eq!(json["revision"], commit.as_str());
    assert_eq!(json["objects"][0]["source"]["path"], "apps/a.yaml");
    assert_eq!(json["objects"][0]["source"]["revision"], commit.as_str());
    assert_eq!(json["objects"][0]["object"]["metadata"]["name"], "a");
    assert_eq!(json["warnings"][0]["path"], "apps/broken.yaml");
    assert!("xml".parse::<OutputFormat>().is_err());
}

/// Live copies of desired objects with some fields changed, as a cluster would hold them.
fn changed(r: &drift_core::Resource, change: impl FnOnce(&mut serde_json::Value)) -> drift_core::Resource {
    let mut object = serde_json::Value::clone(&r.object);
    change(&mut object);
    drift_core::Resource::from_object(object).unwrap()
}

fn drift_paths(
    engine: &drift_core::Engine,
    desired: &drift_core::Resource,
    live: &drift_core::Resource,
) -> Vec<String> {
    use drift_core::Comparator;
    engine.compare(desired, Some(live)).into_iter().map(|d| d.path).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argo_and_flux_ignore_settings_apply_to_their_own_objects_only() {
    if !helm_available("argo_and_flux_ignore_settings_apply_to_their_own_objects_only") {
        return;
    }
    let repo = chart_repository();
    let w = |p: &str, t: &str| put(repo.path(), p, t);
    // An Application as they are commonly written: replicas left to an autoscaler, a sidecar's
    // image left to an injector, a stamp annotation, and one jq program this detector cannot read.
    w(
        "argocd/shop.yaml",
        concat!(
            "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: shop\n  namespace: argocd\n",
            "spec:\n  source:\n    repoURL: https://git.example.com/platform.git\n    path: apps/shop\n  destination:\n    namespace: shop\n",
            "  ignoreDifferences:\n  - group: apps\n    kind: Deployment\n    jsonPointers: [/spec/replicas]\n",
            "    jqPathExpressions:\n    - '.spec.template.spec.containers[] | select(.name == \"app\") | .image'\n",
            "  - kind: ConfigMap\n    name: stamped\n    jqPathExpressions: ['.metadata.annotations[\"example.com/stamp\"]', '.data | keys']\n"
        ),
    );
    w("apps/shop/deploy.yaml", &deployment("shop", 2));
    w(
        "apps/shop/stamped.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: stamped\n  annotations: {example.com/stamp: a}\ndata: {k: v}\n",
    );
    // The same kinds elsewhere, with no rules: still compared in full.
    w("apps/other/deploy.yaml", &deployment("other", 2));
    w(
        "argocd/other.yaml",
        concat!(
            "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: other\n  namespace: argocd\n",
            "spec:\n  source:\n    repoURL: https://git.example.com/platform.git\n    path: apps/other\n  destination:\n    namespace: other\n"
        ),
    );
    // The HelmRelease of chart_repository(), with Flux's drift detection rules.
    w(
        "releases/web.yaml",
        concat!(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: web\n  namespace: web\nspec:\n",
            "  chart:\n    spec:\n      chart: ./charts/web\n      sourceRef: {kind: GitRepository, name: flux-system}\n",
            "  driftDetection:\n    mode: enabled\n    ignore:\n    - paths: [/spec/replicas]\n      target: {kind: Deployment}\n",
            "    - paths: [/data/mode]\n      target: {kind: ConfigMap, labelSelector: 'app=web'}\n"
        ),
    );
    let snap = FolderSource::new(FolderConfig::new(repo.path())).unwrap().fetch().await.unwrap();
    assert!(!has_errors(&snap), "{:?}", snap.warnings);
    let notes: Vec<&str> = snap.warnings.iter().map(|w| w.message.as_str()).collect();
    assert!(notes.iter().any(|n| n.contains("`.data | keys`") && n.contains("not applied")), "{notes:?}");
    assert!(notes.iter().any(|n| n.contains("label or annotation selector")), "{notes:?}");

    let engine = drift_core::Engine::new(&drift_core::EngineConfig::default()).unwrap();
    let scale_and_set = |o: &mut serde_json::Value| {
        o["spec"]["replicas"] = 9.into();
        o["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:9".into();
    };
    let shop = object(&snap, "Deployment", "shop");
    assert_eq!(shop.provenance.ignore.len(), 2, "the Application's rules travel with its objects");
    assert!(drift_paths(&engine, shop, &changed(shop, scale_and_set)).is_empty(), "ignored for the Application");
    let other = object(&snap, "Deployment", "other");
    assert!(other.provenance.ignore.is_empty());
    assert_eq!(
        drift_paths(&engine, other, &changed(other, scale_and_set)),
        ["spec.replicas", "spec.template.spec.containers[name=app].image"],
        "another Application's objects keep every drift"
    );
    let stamped = object(&snap, "ConfigMap", "stamped");
    let restamped = changed(stamped, |o| {
        o["metadata"]["annotations"]["example.com/stamp"] = "b".into();
        o["data"]["k"] = "w".into();
    });
    assert_eq!(drift_paths(&engine, stamped, &restamped), ["data.k"], "the stamp only");

    let web = object(&snap, "Deployment", "web-web");
    assert_eq!(drift_paths(&engine, web, &changed(web, |o| o["spec"]["replicas"] = 9.into())), Vec::<String>::new());
    let settings = object(&snap, "ConfigMap", "web-settings");
    assert_eq!(
        drift_paths(&engine, settings, &changed(settings, |o| o["data"]["mode"] = "x".into())),
        ["data.mode"],
        "a rule with a selector is not applied"
    );
}

/// Flux `postBuild`: variables from `substitute` and from a ConfigMap and a Secret in Git,
/// defaults, a value typed again, a name holding a variable, an object that disables it; and a
/// Kustomization whose ConfigMap is not in Git, whose fields are left out with a note.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flux_post_build_substitution_is_applied_as_kustomize_controller_applies_it() {
    let repo = tempfile::tempdir().unwrap();
    let w = |p: &str, t: &str| put(repo.path(), p, t);
    let kustomization = |name: &str, path: &str, post: &str| {
        format!(
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: {name}\n  namespace: flux-system\nspec:\n  interval: 10m\n  path: {path}\n  sourceRef: {{kind: GitRepository, name: flux-system}}\n  postBuild:\n{post}"
        )
    };
    w(
        "clusters/prod/apps.yaml",
        &kustomization(
            "apps",
            "./apps",
            "    substitute:\n      DOMAIN: example.com\n      REPLICAS: \"3\"\n    substituteFrom:\n      - {kind: ConfigMap, name: cluster-vars}\n      - {kind: Secret, name: cluster-secret-vars}\n      - {kind: Secret, name: absent, optional: true}\n",
        ),
    );
    w(
        "clusters/prod/vars.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cluster-vars, namespace: flux-system}\ndata:\n  ENV: prod\n  DOMAIN: overridden.example\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: cluster-secret-vars, namespace: flux-system}\ndata:\n  TOKEN_NAME: dG9rZW4=\n",
    );
    w(
        "apps/web.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web-${ENV}\n  namespace: shop\nspec:\n  replicas: ${REPLICAS}\n  template:\n    metadata:\n      annotations: {replicas: \"${REPLICAS}\"}\n    spec:\n      containers:\n      - name: web\n        image: nginx\n        env:\n        - {name: HOST, value: \"web.${DOMAIN}\"}\n        - {name: TIER, value: \"${TIER:=frontend}\"}\n        - {name: SECRET, value: \"${TOKEN_NAME}\"}\n        - {name: LITERAL, value: \"$${DOMAIN}\"}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: script\n  namespace: shop\n  annotations: {kustomize.toolkit.fluxcd.io/substitute: disabled}\ndata:\n  run.sh: echo ${DOMAIN}\n",
    );
    w(
        "clusters/prod/other.yaml",
        &kustomization("other", "./other", "    substituteFrom:\n      - {kind: ConfigMap, name: not-in-git}\n"),
    );
    w(
        "other/ingress.yaml",
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: web, namespace: shop}\nspec:\n  rules:\n  - host: web.${DOMAIN}\n    http: {}\n",
    );
    let mut cfg = FolderConfig::new(repo.path());
    cfg.path = Some("clusters/prod".into());
    let snap = FolderSource::new(cfg).unwrap().fetch().await.unwrap();
    assert!(!has_errors(&snap), "{:?}", snap.warnings);

    let web = object(&snap, "Deployment", "web-prod");
    let container = &web.object["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(web.object["spec"]["replicas"], 3, "a value written plain is typed again");
    assert_eq!(web.object["spec"]["template"]["metadata"]["annotations"]["replicas"], "3", "annotations stay strings");
    let env: Vec<(&str, &str)> = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e["value"].as_str().unwrap()))
        .collect();
    assert_eq!(
        env,
        [("HOST", "web.example.com"), ("TIER", "frontend"), ("SECRET", "token"), ("LITERAL", "${DOMAIN}")],
        "substitute wins over substituteFrom; defaults; a Secret's data decoded; $$ escapes"
    );
    assert_eq!(
        object(&snap, "ConfigMap", "script").object["data"]["run.sh"],
        "echo ${DOMAIN}",
        "substitution disabled"
    );

    let ingress = object(&snap, "Ingress", "web");
    assert_eq!(ingress.object["spec"]["rules"][0]["host"], "web.${DOMAIN}", "not substituted: its value is unknown");
    assert!(
        ingress.provenance.ignore.iter().any(|r| r.json_pointers == ["/spec/rules/0/host"]),
        "and left out of the comparison"
    );
    let notes: Vec<&str> = snap.warnings.iter().map(|w| w.message.as_str()).collect();
    assert!(notes.iter().any(|m| m.contains("not-in-git is not in Git")), "{notes:?}");
    assert!(notes.iter().any(|m| m.contains("variable DOMAIN") && m.contains("/spec/rules/0/host")), "{notes:?}");
    assert!(!notes.iter().any(|m| m.contains("absent")), "an optional source that is missing is not worth a note");
}

/// The fields kustomize-controller adds to a Kustomization's build, on a folder with its own
/// kustomization and on one without: `namePrefix`, `nameSuffix`, `images`, `patches` (with a
/// target), `components`, `targetNamespace` and `commonMetadata`, rendered by the real kustomize.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flux_kustomization_fields_are_built_as_kustomize_controller_builds_them() {
    require_kubectl();
    let repo = tempfile::tempdir().unwrap();
    let w = |p: &str, t: &str| put(repo.path(), p, t);
    let spec = "  namePrefix: prod-\n  nameSuffix: -v2\n  targetNamespace: shop\n  images:\n    - {name: nginx, newTag: \"1.29\"}\n  patches:\n    - target: {kind: Deployment, name: web}\n      patch: |\n        - op: replace\n          path: /spec/replicas\n          value: 5\n  commonMetadata:\n    labels: {team: payments}\n    annotations: {owner: ops}\n";
    for (name, path) in [("built", "./apps/built"), ("plain", "./apps/plain")] {
        w(
            &format!("clusters/prod/{name}.yaml"),
            &format!(
                "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: {name}, namespace: flux-system}}\nspec:\n  interval: 10m\n  path: {path}\n  sourceRef: {{kind: GitRepository, name: flux-system}}\n{spec}{}",
                if name == "built" { "  components: [../../components/extra]\n" } else { "" }
            ),
        );
    }
    w("apps/built/kustomization.yaml", "resources: [deploy.yaml]\n");
    w(
        "apps/built/deploy.yaml",
        &deployment("web", 2).replace("nginx:1.27", "nginx:1.27\n          env: [{name: X, value: \"1\"}]"),
    );
    w(
        "components/extra/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources: [cm.yaml]\n",
    );
    w("components/extra/cm.yaml", &configmap("extra", "x", "1"));
    w("apps/plain/deploy.yaml", &deployment("api", 2).replace("name: api\n", "name: api\n  namespace: other\n"));
    w("apps/plain/nested/cm.yaml", &configmap("settings", "other", "1"));

    let mut cfg = FolderConfig::new(repo.path());
    cfg.path = Some("clusters/prod".into());
    let snap = FolderSource::new(cfg).unwrap().fetch().await.unwrap();
    assert!(!has_errors(&snap), "{:?}", snap.warnings);
    let mut got = keys(&snap);
    got.retain(|k| !k.starts_with("kustomize.toolkit"));
    assert_eq!(
        got,
        vec![
            "ConfigMap shop/prod-extra-v2",
            "ConfigMap shop/prod-settings-v2",
            "apps/Deployment shop/prod-api-v2",
            "apps/Deployment shop/prod-web-v2"
        ],
    );
    let web = object(&snap, "Deployment", "prod-web-v2");
    assert_eq!(web.object["spec"]["replicas"], 5, "the patch found its target by the name before the prefix");
    assert_eq!(web.object["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.29");
    assert_eq!(web.object["metadata"]["labels"]["team"], "payments");
    assert_eq!(web.object["metadata"]["annotations"]["owner"], "ops");
    let api = object(&snap, "Deployment", "prod-api-v2");
    assert_eq!(api.object["spec"]["replicas"], 2, "the patch's target is web only");
    assert_eq!(api.object["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.29");
    assert_eq!(object(&snap, "ConfigMap", "prod-settings-v2").object["metadata"]["labels"]["team"], "payments");
    assert!(!repo.path().join(".drift-overlay").exists(), "the overlays are gone: the folder is as it was");

    // An overlay a killed render left behind is not read as the repository's.
    w(".drift-overlay/0123456789abcdef/kustomization.yaml", "resources: [cm.yaml]\n");
    w(".drift-overlay/0123456789abcdef/cm.yaml", &configmap("leftover", "x", "1"));
    let mut cfg = FolderConfig::new(repo.path());
    cfg.path = None;
    let again = FolderSource::new(cfg).unwrap().fetch().await.unwrap();
    assert!(!has_errors(&again), "{:?}", again.warnings);
    assert!(!keys(&again).iter().any(|k| k.contains("leftover")), "{:?}", keys(&again));
    assert!(keys(&again).iter().any(|k| k == "apps/Deployment shop/prod-web-v2"));
}

/// Argo CD's overrides, as its repo server applies them: `source.kustomize` (images, prefix and
/// suffix, common labels and annotations, namespace, patches, replicas) on a kustomize folder,
/// rendered by the real kustomize.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argo_cd_kustomize_overrides_are_applied_as_the_repo_server_applies_them() {
    require_kubectl();
    let repo = tempfile::tempdir().unwrap();
    let w = |p: &str, t: &str| put(repo.path(), p, t);
    w(
        "argocd/web.yaml",
        "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: web, namespace: argocd}\nspec:\n  destination: {namespace: shop}\n  source:\n    repoURL: https://example.com/gitops.git\n    path: apps/web\n    kustomize:\n      namePrefix: prod-\n      nameSuffix: -a\n      images: [\"nginx=registry.example.com/nginx:1.29\"]\n      commonLabels: {team: web}\n      commonAnnotations: {owner: ops}\n      namespace: shop-prod\n      replicas: [{name: web, count: 4}]\n      patches:\n        - target: {kind: ConfigMap, name: settings}\n          patch: '[{\"op\": \"add\", \"path\": \"/data/mode\", \"value\": \"fast\"}]'\n",
    );
    w("apps/web/kustomization.yaml", "resources: [deploy.yaml, cm.yaml]\n");
    w("apps/web/deploy.yaml", &deployment("web", 2));
    w("apps/web/cm.yaml", &configmap("settings", "x", "1"));
    let mut cfg = FolderConfig::new(repo.path());
    cfg.path = Some("argocd".into());
    let snap = FolderSource::new(cfg).unwrap().fetch().await.unwrap();
    assert!(!has_errors(&snap), "{:?}", snap.warnings);
    let mut got = keys(&snap);
    got.retain(|k| !k.starts_with("argoproj"));
    assert_eq!(got, vec!["ConfigMap shop-prod/prod-settings-a", "apps/Deployment shop-prod/prod-web-a"]);
    let web = object(&snap, "Deployment", "prod-web-a");
    assert_eq!(web.object["spec"]["replicas"], 4);
    assert_eq!(web.object["spec"]["template"]["spec"]["containers"][0]["image"], "registry.example.com/nginx:1.29");
    assert_eq!(web.object["metadata"]["labels"]["team"], "web");
    assert_eq!(
        web.object["spec"]["selector"]["matchLabels"]["team"], "web",
        "commonLabels reach selectors, as in kustomize"
    );
    assert_eq!(web.object["metadata"]["annotations"]["owner"], "ops");
    assert_eq!(object(&snap, "ConfigMap", "prod-settings-a").object["data"]["mode"], "fast");
}

/// Argo CD's Helm overrides: a values file from a `ref` source (`$values/...`) of this
/// repository, `parameters` (`--set` and `--set-string`), and CRDs rendered unless `skipCrds`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argo_cd_helm_overrides_are_applied_as_the_repo_server_applies_them() {
    if !helm_available("argo_cd_helm_overrides_are_applied_as_the_repo_server_applies_them") {
        return;
    }
    let repo = tempfile::tempdir().unwrap();
    let w = |p: &str, t: &str| put(repo.path(), p, t);
    let app = |name: &str, skip: bool| {
        format!(
            "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {{name: {name}, namespace: argocd}}\nspec:\n  destination: {{namespace: {name}}}\n  sources:\n    - repoURL: https://example.com/gitops.git\n      path: charts/web\n      helm:\n        releaseName: {name}\n        skipCrds: {skip}\n        valueFiles: [$values/envs/prod.yaml]\n        parameters:\n          - {{name: replicas, value: \"3\"}}\n          - {{name: mode, value: \"0644\", forceString: true}}\n          - {{name: hosts, value: \"a,b\"}}\n    - repoURL: https://example.com/gitops.git\n      ref: values\n"
        )
    };
    w("argocd/web.yaml", &app("web", false));
    w("argocd/nocrd.yaml", &app("nocrd", true));
    w("charts/web/Chart.yaml", "apiVersion: v2\nname: web\nversion: 1.0.0\n");
    w("charts/web/values.yaml", "replicas: 1\nmode: default\nhosts: x\nimage: nginx:1.27\n");
    w(
        "charts/web/crds/widget.yaml",
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\nspec:\n  group: example.com\n  names: {kind: Widget, plural: widgets}\n  scope: Namespaced\n  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]\n",
    );
    w(
        "charts/web/templates/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: \"{{ .Release.Name }}-settings\"}\ndata:\n  replicas: {{ .Values.replicas | quote }}\n  mode: {{ .Values.mode | quote }}\n  kind: {{ kindOf .Values.mode | quote }}\n  hosts: {{ .Values.hosts | quote }}\n  image: {{ .Values.image | quote }}\n",
    );
    w("envs/prod.yaml", "image: nginx:1.29\n");
    let mut cfg = FolderConfig::new(repo.path());
    cfg.path = Some("argocd".into());
    let snap = FolderSource::new(cfg).unwrap().fetch().await.unwrap();
    assert!(!has_errors(&snap), "{:?}", snap.warnings);
    assert!(
        keys(&snap).contains(&"ConfigMap nocrd/nocrd-settings".to_owned()),
        "two applications of one chart: {:?}",
        keys(&snap)
    );
    let data = &object(&snap, "ConfigMap", "web-settings").object["data"];
    assert_eq!(data["replicas"], "3");
    assert_eq!(
        (&data["mode"], &data["kind"]),
        (&serde_json::json!("0644"), &serde_json::json!("string")),
        "--set-string"
    );
    assert_eq!(data["hosts"], "a,b", "a comma is escaped, not a list separator");
    assert_eq!(data["image"], "nginx:1.29", "the values file of the `ref` source");
    let crds: Vec<&str> = snap
        .resources
        .iter()
        .filter(|r| r.key.kind == "CustomResourceDefinition")
        .map(|r| r.key.name.as_str())
        .collect();
    assert_eq!(crds, ["widgets.example.com"], "rendered for web");
    assert!(
        !snap.warnings.iter().any(|w| w.message.contains("widgets.example.com")),
        "skipped for nocrd (else it would be defined twice): {:?}",
        snap.warnings
    );
}

/// ApplicationSets expanded as the ApplicationSet controller expands them: a list generator, a
/// git directory generator (with an exclusion, Go template), a git files generator and a
/// clusters generator over a cluster Secret in Git; each generated Application is rendered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn application_sets_are_expanded_into_their_applications() {
    let repo = tempfile::tempdir().unwrap();
    let w = |p: &str, t: &str| put(repo.path(), p, t);
    let set = |name: &str, generators: &str, go: bool, app_name: &str, path: &str, ns: &str| {
        format!(
            "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata: {{name: {name}, namespace: argocd}}\nspec:\n  goTemplate: {go}\n  generators:\n{generators}  template:\n    metadata: {{name: '{app_name}'}}\n    spec:\n      project: default\n      source: {{repoURL: 'https://example.com/gitops.git', path: '{path}'}}\n      destination: {{server: 'https://kubernetes.default.svc', namespace: '{ns}'}}\n"
        )
    };
    w(
        "argocd/list.yaml",
        &set(
            "envs",
            "    - list:\n        elements:\n          - {env: staging}\n          - {env: prod}\n",
            false,
            "web-{{env}}",
            "envs/{{env}}",
            "web-{{env}}",
        ),
    );
    w(
        "argocd/dirs.yaml",
        &set(
            "dirs",
            "    - git:\n        repoURL: https://example.com/gitops.git\n        revision: HEAD\n        directories:\n          - path: 'services/*'\n          - {path: services/legacy, exclude: true}\n",
            true,
            "{{ .path.basename }}",
            "{{ .path.path }}",
            "{{ .path.basename }}",
        ),
    );
    w(
        "argocd/files.yaml",
        &set(
            "files",
            "    - git:\n        repoURL: https://example.com/gitops.git\n        revision: HEAD\n        files: [{path: 'teams/*/team.json'}]\n",
            false,
            "team-{{team.name}}",
            "teams/{{path.basename}}/app",
            "{{team.namespace}}",
        ),
    );
    w(
        "argocd/clusters.yaml",
        &set(
            "clusters",
            "    - clusters: {selector: {matchLabels: {env: prod}}}\n",
            false,
            "tools-{{name}}",
            "tools",
            "tools-{{nameNormalized}}",
        ),
    );
    w(
        "argocd/cluster-secret.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: prod-cluster\n  namespace: argocd\n  labels: {argocd.argoproj.io/secret-type: cluster, env: prod}\nstringData: {name: Prod_1, server: 'https://prod.example.com'}\n",
    );
    for env in ["staging", "prod"] {
        w(&format!("envs/{env}/cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {a: '1'}\n");
    }
    for svc in ["api", "auth", "legacy"] {
        w(&format!("services/{svc}/cm.yaml"), &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {svc}}}\n"));
    }
    w("teams/blue/team.json", r#"{"team": {"name": "blue", "namespace": "blue-ns"}}"#);
    w("teams/blue/app/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: team}\n");
    w("tools/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: tools}\n");

    let mut cfg = FolderConfig::new(repo.path());
    cfg.path = Some("argocd".into());
    let snap = FolderSource::new(cfg).unwrap().fetch().await.unwrap();
    assert!(!has_errors(&snap), "{:?}", snap.warnings);
    let mut got = keys(&snap);
    got.retain(|k| k.starts_with("ConfigMap"));
    assert_eq!(
        got,
        vec![
            "ConfigMap api/api",
            "ConfigMap auth/auth",
            "ConfigMap blue-ns/team",
            "ConfigMap tools-prod-1/tools",
            "ConfigMap web-prod/web",
            "ConfigMap web-staging/web",
        ],
        "{:?}",
        snap.warnings
    );
}

/// Charts from a Helm chart repository (packaged and indexed by the real helm, served on
/// loopback): a Flux HelmRelease through its HelmRepository and an Argo CD `chart:` source, each
/// rendered with its values; fetched once and then taken from the cache by digest; a chart that
/// does not match the index's digest is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn charts_from_a_helm_repository_are_fetched_verified_cached_and_rendered() {
    if !helm_available("charts_from_a_helm_repository_are_fetched_verified_cached_and_rendered") {
        return;
    }
    install_crypto_provider();
    let work = tempfile::tempdir().unwrap();
    let w = |p: &str, t: &str| put(work.path(), p, t);
    package_web_charts(work.path());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    helm(&["repo", "index", work.path().join("repo").to_str().unwrap(), "--url", &url]);
    let server = ChartServer::start(work.path().join("repo"), listener);

    w(
        "git/flux/repo.yaml",
        &format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata: {{name: charts, namespace: flux-system}}\nspec: {{url: '{}'}}\n",
            server.url
        ),
    );
    w(
        "git/flux/release.yaml",
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: shop}\nspec:\n  chart:\n    spec:\n      chart: web\n      version: 1.0.*\n      valuesFiles: [values-prod.yaml]\n      sourceRef: {kind: HelmRepository, name: charts, namespace: flux-system}\n  values: {other: x}\n",
    );
    w(
        "git/argocd/web.yaml",
        &format!(
            "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {{name: argo-web, namespace: argocd}}\nspec:\n  destination: {{namespace: argo}}\n  source:\n    repoURL: '{}'\n    chart: web\n    targetRevision: 2.0.0\n    helm:\n      parameters: [{{name: mode, value: argo}}]\n",
            server.url
        ),
    );
    w(
        "git/flux/elsewhere.yaml",
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata: {name: gone, namespace: flux-system}\nspec: {url: 'http://127.0.0.1:9'}\n---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: gone, namespace: shop}\nspec:\n  chart:\n    spec:\n      chart: gone\n      sourceRef: {kind: HelmRepository, name: gone, namespace: flux-system}\n",
    );
    let mut cfg = FolderConfig::new(work.path().join("git"));
    cfg.render.chart_cache = Some(work.path().join("cache"));
    let snap = FolderSource::new(cfg.clone()).unwrap().fetch().await.unwrap();
    assert!(!has_errors(&snap), "{:?}", snap.warnings);
    let flux = object(&snap, "ConfigMap", "web-settings");
    assert_eq!(
        (flux.key.namespace.as_deref(), &flux.object["data"]),
        (Some("shop"), &serde_json::json!({"mode": "prod", "chart": "1.0.1"}))
    );
    let argo = object(&snap, "ConfigMap", "argo-web-settings");
    assert_eq!(
        (argo.key.namespace.as_deref(), &argo.object["data"]),
        (Some("argo"), &serde_json::json!({"mode": "argo", "chart": "2.0.0"}))
    );
    assert_eq!((server.fetched("web-1.0.1.tgz"), server.fetched("web-2.0.0.tgz")), (1, 1));
    let unreachable = snap.warnings.iter().find(|w| w.message.contains("chart gone")).expect("a note for the chart");
    assert!(!unreachable.fatal && unreachable.path.as_deref() == Some("flux/elsewhere.yaml"), "{unreachable:?}");

    // Again: the index is read, the charts come from the cache.
    let again = FolderSource::new(cfg.clone()).unwrap().fetch().await.unwrap();
    assert!(!has_errors(&again), "{:?}", again.warnings);
    assert_eq!((server.fetched("web-1.0.1.tgz"), server.fetched("web-2.0.0.tgz")), (1, 1), "cached by digest");

    // A chart that is not the one the index describes is refused.
    let index = work.path().join("repo/index.yaml");
    let text = std::fs::read_to_string(&index).unwrap();
    // One hexadecimal digit of the first digest changed.
    let at = text.find("digest: ").unwrap() + "digest: ".len();
    let digit = if &text[at..=at] == "0" { "1" } else { "0" };
    let tampered = format!("{}{digit}{}", &text[..at], &text[at + 1..]);
    assert_ne!(tampered, text);
    std::fs::write(&index, tampered).unwrap();
    cfg.render.chart_cache = Some(work.path().join("cache-2"));
    let refused = FolderSource::new(cfg).unwrap().fetch().await.unwrap();
    let errors: Vec<(&str, &str)> = refused
        .warnings
        .iter()
        .filter(|w| w.fatal)
        .map(|w| (w.message.as_str(), w.path.as_deref().unwrap_or("")))
        .collect();
    assert!(
        errors.iter().any(|(m, path)| m.contains("does not match the repository index")
            && ["flux/release.yaml", "argocd/web.yaml"].contains(path)),
        "an error at the file that names the chart: {errors:?}"
    );
}

/// One folder, two Flux Kustomizations with other variables (environments): two sets of
/// objects, each substituted, and no object defined twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_kustomizations_of_one_folder_with_other_variables_make_two_sets_of_objects() {
    let repo = tempfile::tempdir().unwrap();
    let w = |p: &str, t: &str| put(repo.path(), p, t);
    for env in ["dev", "prod"] {
        w(
            &format!("clusters/all/{env}.yaml"),
            &format!(
                "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: web-{env}, namespace: flux-system}}\nspec:\n  path: ./apps/base\n  sourceRef: {{kind: GitRepository, name: flux-system}}\n  postBuild:\n    substitute: {{ENV: {env}}}\n"
            ),
        );
    }
    w(
        "apps/base/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: 'web-${ENV}', namespace: shop}\ndata: {env: '${ENV}'}\n",
    );
    let mut cfg = FolderConfig::new(repo.path());
    cfg.path = Some("clusters/all".into());
    let snap = FolderSource::new(cfg).unwrap().fetch().await.unwrap();
    assert!(!has_errors(&snap), "{:?}", snap.warnings);
    let mut got = keys(&snap);
    got.retain(|k| k.starts_with("ConfigMap"));
    assert_eq!(got, ["ConfigMap shop/web-dev", "ConfigMap shop/web-prod"], "{:?}", snap.warnings);
    assert_eq!(object(&snap, "ConfigMap", "web-prod").object["data"]["env"], "prod");
}

/// A HelmRelease that a Flux Kustomization with `postBuild` renders is followed as Flux applies
/// it: substituted, so its chart is rendered with the substituted values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_helm_release_under_a_substituting_kustomization_is_rendered_substituted() {
    if !helm_available("a_helm_release_under_a_substituting_kustomization_is_rendered_substituted") {
        return;
    }
    let repo = tempfile::tempdir().unwrap();
    let w = |p: &str, t: &str| put(repo.path(), p, t);
    w(
        "clusters/prod/apps.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: apps, namespace: flux-system}\nspec:\n  path: ./apps\n  sourceRef: {kind: GitRepository, name: flux-system}\n  postBuild:\n    substitute: {DOMAIN: example.com}\n",
    );
    w(
        "apps/release.yaml",
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: web}\nspec:\n  chart:\n    spec:\n      chart: ./charts/web\n      sourceRef: {kind: GitRepository, name: flux-system}\n  values:\n    host: web.${DOMAIN}\n",
    );
    w("charts/web/Chart.yaml", "apiVersion: v2\nname: web\nversion: 1.0.0\n");
    w("charts/web/values.yaml", "host: localhost\n");
    w(
        "charts/web/templates/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-host}\ndata:\n  host: {{ .Values.host | quote }}\n",
    );
    let mut cfg = FolderConfig::new(repo.path());
    cfg.path = Some("clusters/prod".into());
    let snap = FolderSource::new(cfg).unwrap().fetch().await.unwrap();
    assert!(!has_errors(&snap), "{:?}", snap.warnings);
    assert_eq!(object(&snap, "ConfigMap", "web-host").object["data"]["host"], "web.example.com");
    assert_eq!(object(&snap, "HelmRelease", "web").object["spec"]["values"]["host"], "web.example.com");
}

/// Charts in an OCI registry (Debian's docker-registry on loopback, charts pushed by the real
/// helm): a Flux HelmRelease through an OCI HelmRepository (a version range), through an
/// OCIRepository `chartRef` (a tag, and a pinned digest), through a HelmChart `chartRef`, and an
/// Argo CD `chart:` source whose repoURL is the registry without a scheme; each rendered with its
/// values; the layer fetched once and then taken from the cache by digest; a layer whose bytes
/// are not the ones its manifest names is refused, and so is a digest the registry does not hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn charts_from_an_oci_registry_are_fetched_verified_cached_and_rendered() {
    let test = "charts_from_an_oci_registry_are_fetched_verified_cached_and_rendered";
    if !helm_available(test) || !registry_available(test) {
        return;
    }
    install_crypto_provider();
    let work = tempfile::tempdir().unwrap();
    let w = |p: &str, t: &str| put(work.path(), p, t);
    package_web_charts(work.path());
    let registry = Registry::start(None);
    let home = work.path().join("helm-home");
    let mut digests = std::collections::BTreeMap::new();
    for version in ["1.0.0", "1.0.1", "2.0.0"] {
        let archive = work.path().join(format!("repo/web-{version}.tgz"));
        digests.insert(version, helm_push(&archive, &registry, &home));
    }
    let host = &registry.host;
    w(
        "git/flux/sources.yaml",
        &format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata: {{name: oci-charts, namespace: flux-system}}\nspec: {{type: oci, url: 'oci://{host}/charts'}}\n---\napiVersion: source.toolkit.fluxcd.io/v1beta2\nkind: OCIRepository\nmetadata: {{name: web-two, namespace: flux-system}}\nspec:\n  url: oci://{host}/charts/web\n  ref: {{tag: 2.0.0}}\n  layerSelector: {{mediaType: application/vnd.cncf.helm.chart.content.v1.tar+gzip, operation: copy}}\n---\napiVersion: source.toolkit.fluxcd.io/v1beta2\nkind: OCIRepository\nmetadata: {{name: web-pinned, namespace: flux-system}}\nspec:\n  url: oci://{host}/charts/web\n  ref: {{digest: '{}'}}\n---\napiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmChart\nmetadata: {{name: web-chart, namespace: flux-system}}\nspec:\n  chart: web\n  version: 1.0.0\n  valuesFiles: [values-prod.yaml]\n  sourceRef: {{kind: HelmRepository, name: oci-charts}}\n",
            digests["1.0.0"]
        ),
    );
    let release = |name: &str, chart: &str| {
        format!(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {{name: {name}, namespace: shop}}\nspec:\n{chart}  values: {{other: x}}\n---\n"
        )
    };
    w(
        "git/flux/releases.yaml",
        &[
            release("ranged", "  chart:\n    spec:\n      chart: web\n      version: 1.0.*\n      valuesFiles: [values-prod.yaml]\n      sourceRef: {kind: HelmRepository, name: oci-charts, namespace: flux-system}\n"),
            release("tagged", "  chartRef: {kind: OCIRepository, name: web-two, namespace: flux-system}\n"),
            release("pinned", "  chartRef: {kind: OCIRepository, name: web-pinned, namespace: flux-system}\n"),
            release("charted", "  chartRef: {kind: HelmChart, name: web-chart, namespace: flux-system}\n"),
        ]
        .concat(),
    );
    w(
        "git/argocd/web.yaml",
        &format!(
            "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {{name: argo-web, namespace: argocd}}\nspec:\n  destination: {{namespace: argo}}\n  source:\n    repoURL: '{host}/charts'\n    chart: web\n    targetRevision: 1.0.1\n    helm:\n      parameters: [{{name: mode, value: argo}}]\n"
        ),
    );
    let mut cfg = FolderConfig::new(work.path().join("git"));
    cfg.render.chart_cache = Some(work.path().join("cache"));
    let snap = FolderSource::new(cfg.clone()).unwrap().fetch().await.unwrap();
    assert!(!has_errors(&snap), "{:?}", snap.warnings);
    let data = |snap: &drift_core::DesiredSnapshot, name: &str| {
        let o = object(snap, "ConfigMap", name);
        (o.key.namespace.clone().unwrap_or_default(), o.object["data"].clone())
    };
    let expect = |ns: &str, mode: &str, chart: &str| (ns.to_owned(), serde_json::json!({"mode": mode, "chart": chart}));
    assert_eq!(data(&snap, "ranged-settings"), expect("shop", "prod", "1.0.1"), "1.0.* is the highest 1.0");
    assert_eq!(data(&snap, "tagged-settings"), expect("shop", "default", "2.0.0"));
    assert_eq!(data(&snap, "pinned-settings"), expect("shop", "default", "1.0.0"));
    assert_eq!(data(&snap, "charted-settings"), expect("shop", "prod", "1.0.0"), "the HelmChart's values file");
    assert_eq!(data(&snap, "argo-web-settings"), expect("argo", "argo", "1.0.1"));
    let cached: Vec<String> = std::fs::read_dir(work.path().join("cache"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(cached.len(), 3, "one cache entry per chart archive: {cached:?}");

    // The registry's copy of 1.0.1's layer is damaged: the cache still has the verified one, a
    // fresh cache refuses it.
    use sha2::Digest as _;
    let layer = hex::encode(sha2::Sha256::digest(std::fs::read(work.path().join("repo/web-1.0.1.tgz")).unwrap()));
    assert!(cached.contains(&layer), "cached under the layer's digest");
    let data_file = registry.storage.join(format!("docker/registry/v2/blobs/sha256/{}/{layer}/data", &layer[..2]));
    let mut bytes = std::fs::read(&data_file).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&data_file, bytes).unwrap();
    let again = FolderSource::new(cfg.clone()).unwrap().fetch().await.unwrap();
    assert!(!has_errors(&again), "{:?}", again.warnings);
    assert_eq!(data(&again, "ranged-settings"), expect("shop", "prod", "1.0.1"));
    cfg.render.chart_cache = Some(work.path().join("cache-2"));
    let refused = FolderSource::new(cfg.clone()).unwrap().fetch().await.unwrap();
    let errors: Vec<(&str, &str)> = refused
        .warnings
        .iter()
        .filter(|w| w.fatal)
        .map(|w| (w.message.as_str(), w.path.as_deref().unwrap_or("")))
        .collect();
    for file in ["flux/releases.yaml", "argocd/web.yaml"] {
        assert!(
            errors.iter().any(|(m, path)| m.contains("its manifest says") && *path == file),
            "an error at {file}: {errors:?}"
        );
    }
    assert_eq!(data(&refused, "tagged-settings"), expect("shop", "default", "2.0.0"), "the others still render");

    // A digest the registry does not hold.
    let sources = std::fs::read_to_string(work.path().join("git/flux/sources.yaml")).unwrap();
    let wrong = format!("sha256:{}", "0".repeat(64));
    std::fs::write(work.path().join("git/flux/sources.yaml"), sources.replace(&digests["1.0.0"], &wrong)).unwrap();
    let missing = FolderSource::new(cfg).unwrap().fetch().await.unwrap();
    assert!(
        missing.warnings.iter().any(|w| w.fatal && w.message.contains("not found in the registry")),
        "{:?}",
        missing.warnings
    );
}

/// A registry that asks for credentials: without them the chart is a note naming the setting
/// that gives them; with the Docker `config.json` that helm itself uses, it renders; with a wrong
/// password it is a note again; and no message carries the password, plainly or in base64.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_that_asks_for_credentials_gets_them_from_the_auth_file_only() {
    use base64::Engine as _;
    let test = "a_registry_that_asks_for_credentials_gets_them_from_the_auth_file_only";
    if !helm_available(test) || !registry_available(test) {
        return;
    }
    install_crypto_provider();
    let work = tempfile::tempdir().unwrap();
    let w = |p: &str, t: &str| put(work.path(), p, t);
    package_web_charts(work.path());
    let password = format!("canary-{}", std::process::id());
    let hash = bcrypt::hash(&password, 4).unwrap();
    let registry = Registry::start(Some(&format!("chartbot:{hash}\n")));
    let home = work.path().join("helm-home");
    let auth_file = |password: &str| {
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("chartbot:{password}"));
        serde_json::json!({"auths": {registry.host.clone(): {"auth": auth}}}).to_string()
    };
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("registry.json"), auth_file(&password)).unwrap();
    helm_push(&work.path().join("repo/web-1.0.0.tgz"), &registry, &home);
    std::fs::write(work.path().join("wrong.json"), auth_file("not-the-password")).unwrap();
    w(
        "git/release.yaml",
        &format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata: {{name: private, namespace: shop}}\nspec: {{type: oci, url: 'oci://{}/charts'}}\n---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {{name: web, namespace: shop}}\nspec:\n  chart:\n    spec: {{chart: web, version: 1.0.0, sourceRef: {{kind: HelmRepository, name: private}}}}\n",
            registry.host
        ),
    );
    let mut cfg = FolderConfig::new(work.path().join("git"));
    cfg.render.chart_cache = Some(work.path().join("cache"));
    let fetch = |auth: Option<std::path::PathBuf>| {
        let mut cfg = cfg.clone();
        cfg.render.registry_auth_file = auth;
        async move { FolderSource::new(cfg).unwrap().fetch().await.unwrap() }
    };
    let secret_forms =
        [password.clone(), base64::engine::general_purpose::STANDARD.encode(format!("chartbot:{password}"))];
    let leaks = |snap: &drift_core::DesiredSnapshot| {
        snap.warnings.iter().filter(|w| secret_forms.iter().any(|s| w.message.contains(s.as_str()))).count()
    };

    let without = fetch(None).await;
    let note = without.warnings.iter().find(|w| w.message.contains("chart web")).expect("a note for the chart");
    assert!(
        !note.fatal && note.message.contains("asks for credentials") && note.message.contains("registry_auth_file"),
        "{note:?}"
    );
    assert!(!without.resources.iter().any(|r| r.key.name == "web-settings"));

    let with = fetch(Some(home.join("registry.json"))).await;
    assert!(!has_errors(&with), "{:?}", with.warnings);
    assert_eq!(object(&with, "ConfigMap", "web-settings").object["data"]["chart"], "1.0.0");

    let wrong = fetch(Some(work.path().join("wrong.json"))).await;
    let refused = wrong.warnings.iter().find(|w| w.message.contains("chart web")).expect("a note for the chart");
    assert!(!refused.fatal && refused.message.contains("were refused"), "{refused:?}");
    assert_eq!((leaks(&without), leaks(&with), leaks(&wrong)), (0, 0, 0), "no message carries the password");

    // A chart repository over HTTP that asks for the same credentials (Basic): the same file.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    helm(&["repo", "index", work.path().join("repo").to_str().unwrap(), "--url", &url]);
    let basic = format!("Basic {}", secret_forms[1]);
    let server = ChartServer::start_guarded(work.path().join("repo"), listener, Some(basic));
    let host = url.trim_start_matches("http://").to_owned();
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("chartbot:{password}"));
    std::fs::write(work.path().join("http.json"), serde_json::json!({"auths": {host: {"auth": auth}}}).to_string())
        .unwrap();
    w(
        "git/release.yaml",
        &format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata: {{name: private, namespace: shop}}\nspec: {{url: '{url}'}}\n---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {{name: web, namespace: shop}}\nspec:\n  chart:\n    spec: {{chart: web, version: 1.0.1, sourceRef: {{kind: HelmRepository, name: private}}}}\n"
        ),
    );
    let without = fetch(None).await;
    let note = without.warnings.iter().find(|w| w.message.contains("chart web")).expect("a note for the chart");
    assert!(
        !note.fatal && note.message.contains("HTTP 401") && note.message.contains("registry_auth_file"),
        "{note:?}"
    );
    let with = fetch(Some(work.path().join("http.json"))).await;
    assert!(!has_errors(&with), "{:?}", with.warnings);
    assert_eq!(object(&with, "ConfigMap", "web-settings").object["data"]["chart"], "1.0.1");
    assert_eq!(server.fetched("web-1.0.1.tgz"), 1, "the archive, with the credentials");
    assert_eq!((leaks(&without), leaks(&with)), (0, 0), "no message carries the password");
}

/// Flux's `valuesFrom`, as helm-controller composes the values: a ConfigMap's `values.yaml`, a
/// Secret's other key, `targetPath`s (typed as `--set` types them, a quoted value kept a string,
/// a `literal` one verbatim), an optional source that is missing, and `spec.values` over all;
/// a source that is not in Git leaves its release unrendered, with a note.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flux_values_from_config_maps_and_secrets_are_composed_as_helm_controller_composes_them() {
    if !helm_available("flux_values_from_config_maps_and_secrets_are_composed_as_helm_controller_composes_them") {
        return;
    }
    use base64::Engine as _;
    let repo = tempfile::tempdir().unwrap();
    let w = |p: &str, t: &str| put(repo.path(), p, t);
    w("charts/show/Chart.yaml", "apiVersion: v2\nname: show\nversion: 0.1.0\n");
    w("charts/show/values.yaml", "replicas: 1\nchartDefault: kept\n");
    w(
        "charts/show/templates/values.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: \"{{ .Release.Name }}-values\"}\ndata:\n  all: {{ toJson .Values | quote }}\n",
    );
    let db = base64::engine::general_purpose::STANDARD.encode("db: {host: db.shop, port: 5432}\n");
    w(
        "releases/sources.yaml",
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: base, namespace: shop}}\ndata:\n  values.yaml: |\n    replicas: 2\n    image: {{repository: nginx, tag: '1.0'}}\n    mode: base\n---\napiVersion: v1\nkind: Secret\nmetadata: {{name: db, namespace: shop}}\ndata: {{db.yaml: {db}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: knobs, namespace: shop}}\ndata:\n  count: '3'\n  zone: '\"010\"'\n  raw: 'a,b={{c}}'\n"
        ),
    );
    let release = |name: &str, from: &str| {
        format!(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {{name: {name}, namespace: shop}}\nspec:\n  chart:\n    spec:\n      chart: ./charts/show\n      sourceRef: {{kind: GitRepository, name: flux-system, namespace: flux-system}}\n  valuesFrom:\n{from}  values:\n    image: {{tag: '2.0'}}\n    mode: inline\n---\n"
        )
    };
    w(
        "releases/releases.yaml",
        &[
            release(
                "composed",
                "    - {kind: ConfigMap, name: base}\n    - {kind: Secret, name: db, valuesKey: db.yaml}\n    - {kind: ConfigMap, name: knobs, valuesKey: count, targetPath: scale.count}\n    - {kind: ConfigMap, name: knobs, valuesKey: zone, targetPath: zone}\n    - {kind: ConfigMap, name: knobs, valuesKey: raw, targetPath: raw.config, literal: true}\n    - {kind: ConfigMap, name: knobs, valuesKey: count, targetPath: mode}\n    - {kind: ConfigMap, name: absent, optional: true}\n",
            ),
            release("missing", "    - {kind: ConfigMap, name: absent}\n"),
        ]
        .concat(),
    );
    let snap = FolderSource::new(FolderConfig::new(repo.path())).unwrap().fetch().await.unwrap();
    assert!(!has_errors(&snap), "{:?}", snap.warnings);
    let all: serde_json::Value =
        serde_json::from_str(object(&snap, "ConfigMap", "composed-values").object["data"]["all"].as_str().unwrap())
            .unwrap();
    assert_eq!(
        all,
        serde_json::json!({
            "replicas": 2,
            "chartDefault": "kept",
            "image": {"repository": "nginx", "tag": "2.0"},
            "mode": "inline",
            "db": {"host": "db.shop", "port": 5432},
            "scale": {"count": 3},
            "zone": "010",
            "raw": {"config": "a,b={c}"}
        }),
        "maps merged in order, targetPaths typed as --set types them, spec.values over all"
    );
    assert!(!snap.resources.iter().any(|r| r.key.name == "missing-values"), "not rendered");
    let note =
        snap.warnings.iter().find(|w| w.message.contains("ConfigMap shop/absent is not in Git")).expect("a note");
    assert!(!note.fatal && note.path.as_deref() == Some("releases/releases.yaml"), "{note:?}");
}

/// The cluster as Flux reads it: a ConfigMap and a Secret that are only there.
#[derive(Debug)]
struct Cluster {
    objects: drift_model::lookup::StaticLookup,
    reads: std::sync::atomic::AtomicUsize,
    down: bool,
}

impl drift_model::lookup::ObjectLookup for Cluster {
    fn get(&self, kind: &str, namespace: &str, name: &str) -> Result<Option<serde_json::Value>, String> {
        self.reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if self.down {
            return Err("connection refused".into());
        }
        self.objects.get(kind, namespace, name)
    }
}

/// `substituteFrom` and `valuesFrom` sources that are not in Git are read from the cluster when
/// the source has a lookup (as the controllers read them), and a snapshot that read it is read
/// again on the next fetch; a cluster that cannot be read is a note naming the source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flux_value_sources_that_are_only_in_the_cluster_are_read_from_it() {
    if !helm_available("flux_value_sources_that_are_only_in_the_cluster_are_read_from_it") {
        return;
    }
    use base64::Engine as _;
    require_kubectl();
    let repo = tempfile::tempdir().unwrap();
    let w = |p: &str, t: &str| put(repo.path(), p, t);
    w(
        "clusters/apps.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: apps, namespace: flux-system}\nspec:\n  path: ./apps\n  sourceRef: {kind: GitRepository, name: flux-system}\n  postBuild:\n    substituteFrom: [{kind: ConfigMap, name: cluster-vars}]\n---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: show, namespace: shop}\nspec:\n  chart:\n    spec:\n      chart: ./charts/show\n      sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}\n  valuesFrom: [{kind: Secret, name: show-values}]\n",
    );
    w(
        "apps/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: site, namespace: shop}\ndata: {host: 'web.${DOMAIN}'}\n",
    );
    w("charts/show/Chart.yaml", "apiVersion: v2\nname: show\nversion: 0.1.0\n");
    w("charts/show/values.yaml", "mode: default\n");
    w(
        "charts/show/templates/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: show}\ndata: {mode: {{ .Values.mode | quote }}}\n",
    );
    let values = base64::engine::general_purpose::STANDARD.encode("mode: from-the-cluster\n");
    let objects = drift_model::lookup::StaticLookup(vec![
        serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cluster-vars", "namespace": "flux-system"}, "data": {"DOMAIN": "example.org"}}),
        serde_json::json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "show-values", "namespace": "shop"}, "data": {"values.yaml": values}}),
    ]);
    let cluster = std::sync::Arc::new(Cluster { objects: objects.clone(), reads: 0.into(), down: false });
    let source = FolderSource::new(FolderConfig::new(repo.path())).unwrap().with_cluster(cluster.clone());
    let snap = source.fetch().await.unwrap();
    assert!(!has_errors(&snap), "{:?}", snap.warnings);
    assert!(!snap.warnings.iter().any(|w| w.message.contains("not in Git")), "{:?}", snap.warnings);
    assert_eq!(object(&snap, "ConfigMap", "site").object["data"]["host"], "web.example.org");
    assert_eq!(object(&snap, "ConfigMap", "show").object["data"]["mode"], "from-the-cluster");
    let reads = cluster.reads.load(std::sync::atomic::Ordering::Relaxed);
    assert!(reads >= 2, "{reads}");
    let again = source.fetch().await.unwrap();
    assert_eq!(object(&again, "ConfigMap", "site").object["data"]["host"], "web.example.org");
    assert!(
        cluster.reads.load(std::sync::atomic::Ordering::Relaxed) > reads,
        "read again: the cluster may have changed"
    );
    assert_eq!(source.stats().snapshot_cache_hits, 0);

    let down = std::sync::Arc::new(Cluster { objects, reads: 0.into(), down: true });
    let snap = FolderSource::new(FolderConfig::new(repo.path())).unwrap().with_cluster(down).fetch().await.unwrap();
    let notes: Vec<&str> = snap.warnings.iter().map(|w| w.message.as_str()).collect();
    assert!(
        notes.iter().any(|m| m.contains(
            "ConfigMap flux-system/cluster-vars is not in Git and cannot be read from the cluster: connection refused"
        )),
        "{notes:?}"
    );
    assert!(notes.iter().any(|m| m.contains("valuesFrom Secret shop/show-values is not in Git and cannot be read from the cluster")), "{notes:?}");
    assert!(
        !snap.resources.iter().any(|r| r.key.kind == "ConfigMap" && r.key.name == "show"),
        "not rendered, not even with the chart's defaults: {:?}",
        keys(&snap)
    );
}

/// With several clusters, one kustomization folder of two Applications: `root` goes to the home
/// cluster (rendered on east for the child Applications it holds only, and kept with its Argo CD
/// objects only, docs/sources.md "Several clusters"), `shop` goes to east (all its objects).
/// Their renders are kept apart between fetches: shop, added after root's render was kept, is
/// rendered anew, never given the render cut down to root's Application objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_rendered_for_a_root_going_home_and_for_an_application_here_keeps_two_renders() {
    require_kubectl();
    let repo = tempfile::tempdir().unwrap();
    let w = |p: &str, t: &str| put(repo.path(), p, t);
    let app = |name: &str, path: &str, destination: &str| {
        format!(
            "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {{name: {name}, namespace: argocd}}\n\
             spec:\n  source: {{repoURL: https://git.example/r.git, path: {path}}}\n  destination: {destination}\n"
        )
    };
    let cm = |name: &str| format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: shop}}\n");
    w("argo/root.yaml", &app("root", "apps", "{server: 'https://kubernetes.default.svc', namespace: argocd}"));
    w("apps/kustomization.yaml", "resources: [cm.yaml, child.yaml]\n");
    w("apps/cm.yaml", &cm("apps-cm"));
    w("apps/child.yaml", &app("child", "east", "{name: east, namespace: shop}"));
    w("east/cm.yaml", &cm("e"));
    let cluster = |name: &str, home: bool| drift_git::TargetCluster {
        name: name.into(),
        aliases: Vec::new(),
        server: Some(format!("https://{name}.example:6443")),
        home,
    };
    let targets = drift_git::ClusterTargets {
        clusters: vec![cluster("east", false), cluster("home", true)],
        this: "east".into(),
        targeted: vec!["east".into(), "home".into()],
        report: true,
    };
    let mut cfg = FolderConfig::new(repo.path());
    cfg.path = Some("argo".into());
    let source = FolderSource::new(cfg).unwrap().with_targets(std::sync::Arc::new(targets));
    let objects = |snap: &drift_core::DesiredSnapshot| {
        let mut got = keys(snap);
        got.retain(|k| k.starts_with("ConfigMap") || k.contains("Application"));
        got
    };
    let snap = source.fetch().await.unwrap();
    assert!(!has_errors(&snap), "{:?}", snap.warnings);
    assert_eq!(objects(&snap), ["ConfigMap shop/e"], "root's own objects are home's: {:?}", snap.warnings);
    let first = source.stats();
    assert_eq!((first.renders, first.render_cache_hits), (1, 0), "{first:?}");
    // shop, going to east, renders the same folder: a render of its own, whole.
    w("argo/shop.yaml", &app("shop", "apps", "{name: east, namespace: shop}"));
    let snap = source.fetch().await.unwrap();
    assert!(!has_errors(&snap), "{:?}", snap.warnings);
    assert_eq!(
        objects(&snap),
        ["ConfigMap shop/apps-cm", "ConfigMap shop/e", "argoproj.io/Application argocd/child"],
        "shop's objects, its child Application a plain object of east: {:?}",
        snap.warnings
    );
    let second = source.stats();
    assert_eq!((second.renders, second.render_cache_hits), (2, 1), "root's render from the cache: {second:?}");
}
