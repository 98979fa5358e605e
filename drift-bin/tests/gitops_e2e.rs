//! The desired state as the GitOps controllers render it, end to end (issue 30, "done when"):
//! one repository holding every layout a homelab or a platform team uses (plain files,
//! Kustomize, a chart in Git, a Flux Kustomization with substitution, patches and images, Flux
//! HelmReleases of charts from Git, from an HTTP chart repository and from an OCI registry, an
//! Argo CD Application with Kustomize overrides and one with Helm overrides, an ApplicationSet),
//! some of whose Flux objects read a ConfigMap that only the cluster has, as they do in
//! clusters bootstrapped by other tools.
//! What each controller would apply is produced *without drift*, by the real tools (`kubectl
//! apply -k`, `helm template` of a local, an HTTP and an OCI chart) or written out by hand where
//! no tool of the controller runs here (kustomize-controller's substitution), and applied with
//! the real kubectl into the test API server with the controllers' own field managers. Then
//! `drift diff --cluster` and `drift scan` must find nothing, and five hand changes exactly five
//! drifts, each where it was made.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::ClusterHome;
use drift_testkit::charts::{
    ChartServer, Registry, helm, helm_available, helm_push, package_web_charts, registry_available,
};
use serde_json::Value;

/// The namespaces the repository's objects land in.
const NAMESPACES: &[&str] = &[
    "plain",
    "kust",
    "flux-system",
    "flux-web",
    "flux-helm",
    "flux-http",
    "flux-oci",
    "argocd",
    "argo-web",
    "argo-helm",
    "site-dev",
    "site-stage",
];

/// The repository, but for the Flux and Argo CD objects that name the chart servers.
const FILES: &[(&str, &str)] = &[
    // Plain files, in YAML 1.1 forms (`0644`).
    (
        "plain/api.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: api, namespace: plain}\nspec:\n  selector: {app: api}\n  ports: [{name: http, port: 80, targetPort: 8080}]\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api, namespace: plain}\nspec:\n  replicas: 2\n  selector: {matchLabels: {app: api}}\n  template:\n    metadata: {labels: {app: api}}\n    spec:\n      containers: [{name: api, image: 'nginx:1.27', volumeMounts: [{name: conf, mountPath: /etc/api}]}]\n      volumes: [{name: conf, configMap: {name: api, defaultMode: 0644}}]\n",
    ),
    // Kustomize: a base with a generated ConfigMap, an overlay with a prefix, replicas and images.
    (
        "kustomize/base/kustomization.yaml",
        "resources: [deploy.yaml]\nconfigMapGenerator:\n  - name: web-env\n    literals: [MODE=base]\n",
    ),
    (
        "kustomize/base/deploy.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 1\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers:\n        - name: web\n          image: nginx:1.25\n          envFrom: [{configMapRef: {name: web-env}}]\n",
    ),
    (
        "kustomize/prod/kustomization.yaml",
        "namespace: kust\nnamePrefix: prod-\nresources: [../base]\nreplicas: [{name: web, count: 3}]\nimages: [{name: nginx, newTag: '1.27'}]\n",
    ),
    // A chart in Git.
    ("charts/web/Chart.yaml", "apiVersion: v2\nname: web\nversion: 0.1.0\n"),
    ("charts/web/values.yaml", "replicas: 1\nmode: default\n"),
    (
        "charts/web/templates/deploy.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  replicas: {{ .Values.replicas }}\n  selector:\n    matchLabels: {app: {{ .Release.Name }}}\n  template:\n    metadata:\n      labels: {app: {{ .Release.Name }}}\n    spec:\n      containers:\n        - name: web\n          image: nginx:1.27\n",
    ),
    (
        "charts/web/templates/conf.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-conf\ndata:\n  mode: {{ .Values.mode | quote }}\n",
    ),
    // A folder a Flux Kustomization builds (no kustomization.yaml: Flux makes one), with variables.
    (
        "apps/flux-web/web.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  labels: {app: web}\nspec:\n  replicas: ${REPLICAS}\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers:\n        - name: web\n          image: nginx:1.25\n          env:\n            - name: HOST\n              value: web.${DOMAIN}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-settings}\ndata:\n  host: web.${DOMAIN}\n  tier: ${TIER}\n  region: ${REGION}\n  fallback: ${MISSING:=none}\n",
    ),
    // A folder an Argo CD Application builds with Kustomize overrides.
    ("apps/argo-web/kustomization.yaml", "resources: [deploy.yaml]\n"),
    (
        "apps/argo-web/deploy.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 1\n  selector: {matchLabels: {app: argo-web}}\n  template:\n    metadata: {labels: {app: argo-web}}\n    spec:\n      containers: [{name: web, image: 'nginx:1.25'}]\n",
    ),
    // A folder an ApplicationSet deploys to two namespaces.
    (
        "apps/site/site.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: site}\ndata: {greeting: hello}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: site}\nspec:\n  selector: {app: site}\n  ports: [{port: 80}]\n",
    ),
    // Flux.
    (
        "clusters/flux/apps.yaml",
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: flux-system, namespace: flux-system}\nspec: {interval: 1m, url: 'https://git.example/homelab.git', ref: {branch: main}}\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: apps, namespace: flux-system}\nspec:\n  interval: 10m\n  path: ./apps/flux-web\n  prune: true\n  sourceRef: {kind: GitRepository, name: flux-system}\n  targetNamespace: flux-web\n  images: [{name: nginx, newTag: '1.27'}]\n  patches:\n    - target: {kind: Deployment, name: web}\n      patch: |\n        - op: add\n          path: /metadata/labels/patched\n          value: \"yes\"\n  postBuild:\n    substitute: {DOMAIN: example.org, REPLICAS: \"3\"}\n    substituteFrom: [{kind: ConfigMap, name: cluster-vars}, {kind: ConfigMap, name: cluster-info}]\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cluster-vars, namespace: flux-system}\ndata: {TIER: gold}\n",
    ),
    (
        "clusters/flux/web-git.yaml",
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web-git, namespace: flux-helm}\nspec:\n  interval: 10m\n  chart:\n    spec:\n      chart: ./charts/web\n      sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}\n  valuesFrom: [{kind: ConfigMap, name: web-git-values}]\n  values: {replicas: 2}\n",
    ),
    // Argo CD.
    (
        "argocd/web.yaml",
        "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: argo-web, namespace: argocd}\nspec:\n  project: default\n  source:\n    repoURL: https://git.example/homelab.git\n    path: apps/argo-web\n    targetRevision: HEAD\n    kustomize:\n      namePrefix: argo-\n      images: ['nginx:1.27']\n      commonLabels: {team: blue}\n  destination: {server: 'https://kubernetes.default.svc', namespace: argo-web}\n---\napiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: argo-helm, namespace: argocd}\nspec:\n  project: default\n  source:\n    repoURL: https://git.example/homelab.git\n    path: charts/web\n    targetRevision: HEAD\n    helm:\n      releaseName: shop\n      parameters: [{name: replicas, value: '4'}]\n      valuesObject: {mode: argo}\n  destination: {server: 'https://kubernetes.default.svc', namespace: argo-helm}\n",
    ),
    (
        "argocd/sites.yaml",
        "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata: {name: sites, namespace: argocd}\nspec:\n  generators:\n    - list:\n        elements: [{env: dev}, {env: stage}]\n  template:\n    metadata: {name: 'site-{{env}}'}\n    spec:\n      project: default\n      source: {repoURL: 'https://git.example/homelab.git', path: apps/site, targetRevision: HEAD}\n      destination: {server: 'https://kubernetes.default.svc', namespace: 'site-{{env}}'}\n",
    ),
];

/// What kustomize-controller applies for `apps/flux-web` (written out by hand: the variables
/// substituted, the image and the patch applied, the target namespace set).
const FLUX_WEB_APPLIED: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: flux-web\n  labels: {app: web, patched: \"yes\"}\nspec:\n  replicas: 3\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers:\n        - name: web\n          image: nginx:1.27\n          env: [{name: HOST, value: web.example.org}]\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-settings, namespace: flux-web}\ndata: {host: web.example.org, tier: gold, region: eu-1, fallback: none}\n";

/// The custom resources of Flux and Argo CD, as much of them as their objects need (written for
/// this test): a cluster that runs the controllers has them.
fn gitops_crds() -> String {
    [
        ("source.toolkit.fluxcd.io", "GitRepository", "gitrepositories", "v1"),
        ("source.toolkit.fluxcd.io", "HelmRepository", "helmrepositories", "v1"),
        ("kustomize.toolkit.fluxcd.io", "Kustomization", "kustomizations", "v1"),
        ("helm.toolkit.fluxcd.io", "HelmRelease", "helmreleases", "v2"),
        ("argoproj.io", "Application", "applications", "v1alpha1"),
        ("argoproj.io", "ApplicationSet", "applicationsets", "v1alpha1"),
    ]
    .iter()
    .map(|(group, kind, plural, version)| {
        format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: {plural}.{group}}}\nspec:\n  group: {group}\n  scope: Namespaced\n  names: {{plural: {plural}, singular: {singular}, kind: {kind}, listKind: {kind}List}}\n  versions:\n    - name: {version}\n      served: true\n      storage: true\n      schema:\n        openAPIV3Schema:\n          type: object\n          properties:\n            spec: {{type: object, x-kubernetes-preserve-unknown-fields: true}}\n---\n",
            singular = kind.to_ascii_lowercase()
        )
    })
    .collect()
}

/// Runs a program; must succeed; stdout.
fn run(program: &str, args: &[&str], env: &[(&str, &Path)]) -> String {
    let mut c = Command::new(program);
    c.args(args).stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

struct World {
    cluster: ClusterHome,
    repo: std::path::PathBuf,
    _charts: ChartServer,
    _registry: Registry,
}

impl World {
    /// The repository written, the charts served and pushed, and what each controller would
    /// apply applied.
    fn start() -> World {
        let cluster = ClusterHome::start(drift_test_apiserver::Options::default());
        let home = cluster.home.path().to_path_buf();
        let repo = home.join("repo");
        for (path, text) in FILES {
            cluster.write(&format!("repo/{path}"), text);
        }
        // The chart `web` (1.0.0, 1.0.1, 2.0.0) in an HTTP chart repository and an OCI registry.
        package_web_charts(&home.join("charts"));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        helm(&["repo", "index", home.join("charts/repo").to_str().unwrap(), "--url", &url]);
        let charts = ChartServer::start(home.join("charts/repo"), listener);
        let registry = Registry::start(None);
        for version in ["1.0.0", "1.0.1", "2.0.0"] {
            helm_push(&home.join(format!("charts/repo/web-{version}.tgz")), &registry, &home.join("helm-home"));
        }
        cluster.write(
            "repo/clusters/flux/charts.yaml",
            &format!(
                "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata: {{name: http-charts, namespace: flux-system}}\nspec: {{interval: 1h, url: '{url}'}}\n---\napiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata: {{name: oci-charts, namespace: flux-system}}\nspec: {{interval: 1h, type: oci, url: 'oci://{host}/charts'}}\n---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {{name: web-http, namespace: flux-http}}\nspec:\n  interval: 10m\n  chart:\n    spec:\n      chart: web\n      version: 1.0.*\n      sourceRef: {{kind: HelmRepository, name: http-charts, namespace: flux-system}}\n---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {{name: web-oci, namespace: flux-oci}}\nspec:\n  interval: 10m\n  chart:\n    spec:\n      chart: web\n      version: 2.0.0\n      sourceRef: {{kind: HelmRepository, name: oci-charts, namespace: flux-system}}\n  values: {{mode: oci}}\n",
                host = registry.host
            ),
        );
        let world = World { cluster, repo, _charts: charts, _registry: registry };
        world.apply_what_the_controllers_apply(&url);
        world
    }

    fn apply_what_the_controllers_apply(&self, chart_repo: &str) {
        let c = &self.cluster;
        let file = |name: &str, text: &str| c.write(name, text).to_str().unwrap().to_owned();
        let repo = |p: &str| self.repo.join(p).to_str().unwrap().to_owned();
        for ns in NAMESPACES {
            c.kubectl(&["create", "namespace", ns]);
        }
        c.kubectl(&["apply", "-f", &file("oracle/crds.yaml", &gitops_crds())]);
        // What the cluster's bootstrap made, not kept in Git: a variable source of a Flux
        // Kustomization and a values source of a HelmRelease.
        c.kubectl(&["create", "configmap", "cluster-info", "-n", "flux-system", "--from-literal=REGION=eu-1"]);
        c.kubectl(&[
            "create",
            "configmap",
            "web-git-values",
            "-n",
            "flux-helm",
            "--from-literal=values.yaml=mode: cluster",
        ]);
        // The controllers' own objects, as they were bootstrapped.
        c.kubectl(&["apply", "-R", "-f", &repo("clusters"), "-f", &repo("argocd")]);
        // Plain files and Kustomize, by kubectl.
        c.kubectl(&["apply", "-f", &repo("plain")]);
        c.kubectl(&["apply", "-k", &repo("kustomize/prod")]);
        // kustomize-controller: server-side apply of the build, substituted.
        c.kubectl(&[
            "apply",
            "--server-side",
            "--field-manager",
            "kustomize-controller",
            "-f",
            &file("oracle/flux-web.yaml", FLUX_WEB_APPLIED),
        ]);
        // helm-controller: the charts rendered by the real helm (from Git, HTTP and OCI).
        let helm_home = c.path("helm-home");
        let env = [
            ("HELM_REGISTRY_CONFIG", helm_home.join("registry.json")),
            ("HELM_CACHE_HOME", helm_home.join("cache")),
            ("HELM_CONFIG_HOME", helm_home.join("config")),
            ("HELM_DATA_HOME", helm_home.join("data")),
        ];
        let env: Vec<(&str, &Path)> = env.iter().map(|(k, v)| (*k, v.as_path())).collect();
        let oci = format!("oci://{}/charts/web", self._registry.host);
        let local = repo("charts/web");
        let releases: [(&str, &str, Vec<&str>); 4] = [
            ("flux-helm", "web-git", vec![&local, "--set", "replicas=2", "--set", "mode=cluster"]),
            ("flux-http", "web-http", vec!["web", "--repo", chart_repo, "--version", "1.0.1"]),
            ("flux-oci", "web-oci", vec![&oci, "--version", "2.0.0", "--plain-http", "--set", "mode=oci"]),
            // Argo CD's repo server: `helm template` with the Application's parameters.
            ("argo-helm", "shop", vec![&local, "--set", "replicas=4", "--set", "mode=argo"]),
        ];
        for (ns, release, chart) in &releases {
            let mut args = vec!["template", *release];
            args.extend(chart.iter().copied());
            args.extend(["--namespace", ns]);
            let rendered = run("helm", &args, &env);
            let path = file(&format!("oracle/{release}.yaml"), &rendered);
            c.kubectl(&["apply", "--server-side", "--field-manager", "helm-controller", "-n", ns, "-f", &path]);
        }
        // Argo CD's repo server: `kustomize edit` of the Application's overrides, then a build.
        file(
            "oracle/argo-web/kustomization.yaml",
            "resources: [../../repo/apps/argo-web]\nnamePrefix: argo-\nimages: [{name: nginx, newTag: '1.27'}]\ncommonLabels: {team: blue}\n",
        );
        c.kubectl(&["apply", "-n", "argo-web", "-k", c.path("oracle/argo-web").to_str().unwrap()]);
        // The ApplicationSet's two Applications.
        for ns in ["site-dev", "site-stage"] {
            c.kubectl(&["apply", "-n", ns, "-f", &repo("apps/site")]);
        }
    }

    fn drift(&self, args: &[&str]) -> (i32, Value, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_drift"))
            .args(args)
            .env("HOME", self.cluster.home.path())
            .env("XDG_CACHE_HOME", self.cluster.path("cache"))
            .env_remove("KUBECONFIG")
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        let doc = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
        (out.status.code().unwrap(), doc, stderr)
    }

    /// `drift diff --desired REPO --cluster -o json`.
    fn diff(&self) -> (i32, Value, String) {
        let kubeconfig = self.cluster.server.kubeconfig_path().to_str().unwrap().to_owned();
        let repo = self.repo.to_str().unwrap().to_owned();
        self.drift(&["diff", "--desired", &repo, "--cluster", "--kubeconfig", &kubeconfig, "--output", "json"])
    }

    /// `drift scan -o json` of the repository against the cluster, into a fresh SQLite store.
    fn scan(&self, name: &str) -> (i32, Value, String) {
        let config = self.cluster.write(
            &format!("{name}.yaml"),
            &format!(
                "cluster: homelab\ndatabase: sqlite://{home}/{name}.db\nrepositories:\n  - name: homelab\n    url: {repo}\nlive:\n  kubeconfig: {kubeconfig}\n",
                home = self.cluster.home.path().display(),
                repo = self.repo.display(),
                kubeconfig = self.cluster.server.kubeconfig_path().display()
            ),
        );
        self.drift(&["scan", "--config", config.to_str().unwrap(), "--output", "json"])
    }
}

/// (namespace/name, path) of each drift of a `drift diff` document, sorted.
fn diff_drifts(doc: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = doc["drifts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let r = &d["resource"];
            let s = |v: &Value| v.as_str().unwrap_or("").to_owned();
            (format!("{}/{}", s(&r["namespace"]), s(&r["name"])), s(&d["path"]))
        })
        .collect();
    out.sort();
    out
}

#[test]
fn what_the_controllers_apply_is_no_drift_and_five_hand_changes_are_five() {
    let test = "what_the_controllers_apply_is_no_drift_and_five_hand_changes_are_five";
    if !helm_available(test) || !registry_available(test) {
        return;
    }
    let world = World::start();

    let (code, doc, err) = world.diff();
    assert_eq!((code, diff_drifts(&doc)), (0, vec![]), "nothing after the controllers applied: {doc} {err}");
    // Every object is compared, none left out with a note: plain 2, kust 2, flux-system 5,
    // flux-web 2, the HelmReleases 3, flux-helm 2, flux-http 1, flux-oci 1, argocd 3, argo-web 1,
    // argo-helm 2, site-dev 2, site-stage 2.
    assert_eq!((&doc["summary"]["resources_compared"], &doc["summary"]["warnings"]), (&28.into(), &0.into()), "{doc}");
    let (code, scanned, err) = world.scan("before");
    assert_eq!((code, diff_drifts(&scanned)), (0, vec![]), "drift scan finds nothing either: {scanned} {err}");

    let c = &world.cluster;
    c.kubectl(&[
        "patch",
        "service",
        "api",
        "-n",
        "plain",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/ports/0/port","value":81}]"#,
    ]);
    c.kubectl(&["scale", "deployment", "prod-web", "-n", "kust", "--replicas=5"]);
    c.kubectl(&[
        "patch",
        "configmap",
        "web-settings",
        "-n",
        "flux-web",
        "--type=merge",
        "-p",
        r#"{"data":{"host":"web.example.net"}}"#,
    ]);
    c.kubectl(&[
        "patch",
        "configmap",
        "web-oci-settings",
        "-n",
        "flux-oci",
        "--type=merge",
        "-p",
        r#"{"data":{"mode":"hand"}}"#,
    ]);
    c.kubectl(&["set", "image", "deployment/argo-web", "-n", "argo-web", "web=nginx:1.28"]);

    let (code, doc, err) = world.diff();
    assert_eq!(code, 1, "{err}");
    assert_eq!(
        diff_drifts(&doc),
        [
            ("argo-web/argo-web", "spec.template.spec.containers[name=web].image"),
            ("flux-oci/web-oci-settings", "data.mode"),
            ("flux-web/web-settings", "data.host"),
            ("kust/prod-web", "spec.replicas"),
            ("plain/api", "spec.ports[port=80].port"),
        ]
        .map(|(o, p)| (o.to_owned(), p.to_owned())),
        "{doc}"
    );
    let (code, scanned, err) = world.scan("after");
    assert_eq!((code, diff_drifts(&scanned)), (1, diff_drifts(&doc)), "drift scan finds the same five: {err}");
}
