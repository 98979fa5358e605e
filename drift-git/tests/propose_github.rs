//! The accept flow over GitHub, end to end: `GitProposer::propose` against the fake GitHub
//! server (backed by a real bare git repository). The request is built from real objects: the
//! desired object as the GitHub source renders it, a "live" copy with values changed, the drift
//! paths from the engine and the values read from the live object. The pull request's commit is
//! checked byte for byte, rendered with real `kubectl kustomize` / `helm template`, merged
//! through the fake, and the source's next fetch shows no drift left.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path as FsPath;

use common::fake_github::*;
use common::*;
use drift_core::remedy::{ChangeProposer, ChangeRequest, FieldChange, Proposal};
use drift_core::source::DesiredSource;
use drift_core::{Engine, EngineConfig, Resource, ResourceKey};
use drift_git::{GitHubConfig, GitProposer, RendererKind, Secret, SourceConfig};
use serde_json::{Value, json};

const AUTHOR: (&str, &str) = ("Drift Detector", "drift@example.com");

// --- Kustomize: a production overlay over a base that the dev overlay shares. ---

const BASE_KUSTOMIZATION: &str = "resources:\n  - deployment.yaml\n";
const BASE_DEPLOYMENT: &str = concat!(
    "# The web front end, shared by every environment.\n",
    "apiVersion: apps/v1\n",
    "kind: Deployment\n",
    "metadata:\n",
    "  name: web\n",
    "spec:\n",
    "  replicas: 1\n",
    "  selector:\n",
    "    matchLabels: {app: web}\n",
    "  template:\n",
    "    metadata:\n",
    "      labels: {app: web}\n",
    "    spec:\n",
    "      containers:\n",
    "        - name: web\n",
    "          image: registry.example.com/web:1.0 # pinned\n",
    "          ports:\n",
    "            - containerPort: 8080\n",
);
const PROD_KUSTOMIZATION: &str = "# Production.\nnamespace: prod\nresources:\n  - ../../base\npatches:\n  - path: scale.yaml   # sized for traffic\n";
const PROD_SCALE: &str =
    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3 # three zones\n";
const DEV_KUSTOMIZATION: &str = "namespace: dev\nresources:\n  - ../../base\n";

fn kustomize_origin() -> Origin {
    let origin = Origin::new();
    origin.write("README.md", "# gitops\n");
    origin.write("base/kustomization.yaml", BASE_KUSTOMIZATION);
    origin.write("base/deployment.yaml", BASE_DEPLOYMENT);
    origin.write("overlays/prod/kustomization.yaml", PROD_KUSTOMIZATION);
    origin.write("overlays/prod/scale.yaml", PROD_SCALE);
    origin.write("overlays/dev/kustomization.yaml", DEV_KUSTOMIZATION);
    origin.commit("web in prod and dev");
    origin
}

// --- Helm: a chart with its defaults and a production values file. ---

const CHART: &str = "apiVersion: v2\nname: web\nversion: 0.1.0\n";
const CHART_VALUES: &str =
    "# Defaults for every release.\nreplicaCount: 2\nimage:\n  repository: registry.example.com/web\n  tag: \"1.0\"\n";
const PROD_VALUES: &str = "# Production pins.\nimage:\n  tag: \"1.5\"   # approved 2026-11\n";
const TEMPLATE: &str = concat!(
    "apiVersion: apps/v1\n",
    "kind: Deployment\n",
    "metadata:\n",
    "  name: {{ .Release.Name }}\n",
    "  labels:\n",
    "    tier: front\n",
    "spec:\n",
    "  replicas: {{ .Values.replicaCount }}\n",
    "  selector:\n",
    "    matchLabels: {app: web}\n",
    "  template:\n",
    "    metadata:\n",
    "      labels: {app: web}\n",
    "    spec:\n",
    "      containers:\n",
    "      - name: web\n",
    "        image: \"{{ .Values.image.repository }}:{{ .Values.image.tag }}\"\n",
);

fn helm_origin() -> Origin {
    let origin = Origin::new();
    origin.write("charts/web/Chart.yaml", CHART);
    origin.write("charts/web/values.yaml", CHART_VALUES);
    origin.write("charts/web/templates/deployment.yaml", TEMPLATE);
    origin.write("env/values-prod.yaml", PROD_VALUES);
    origin.commit("the web chart");
    origin
}

fn helm_config(fake: &Fake, base: &str) -> GitHubConfig {
    let mut cfg = config(fake, base, "main");
    cfg.path = Some("charts/web".into());
    cfg.render.renderer = RendererKind::Helm;
    cfg.render.helm.release_name = Some("shop".into());
    cfg.render.helm.namespace = Some("prod".into());
    cfg.render.helm.values_files = vec!["env/values-prod.yaml".into()];
    cfg
}

// --- Helpers. ---

fn proposer(cfg: &GitHubConfig) -> GitProposer {
    GitProposer::new("gitops", SourceConfig::Github(cfg.clone()), (AUTHOR.0.into(), AUTHOR.1.into()))
        .unwrap()
        .with_token(Secret::new("good-token"))
}

/// The object `key` as the GitHub source renders the configured ref, with the snapshot's revision.
async fn desired(cfg: &GitHubConfig, key: &ResourceKey) -> (Resource, String) {
    let snapshot = source(cfg.clone()).fetch().await.unwrap();
    let fatal: Vec<_> = snapshot.warnings.iter().filter(|w| w.fatal).collect();
    assert!(fatal.is_empty(), "{fatal:?}");
    let revision = snapshot.revision.clone().unwrap();
    let r = snapshot.resources.into_iter().find(|r| &r.key == key).unwrap_or_else(|| panic!("{key} not rendered"));
    (r, revision)
}

/// A "live" copy of the desired object with the values at the JSON pointers changed.
fn live(desired: &Resource, changes: &[(&str, Value)]) -> Resource {
    let mut live = desired.clone();
    for (pointer, value) in changes {
        *std::sync::Arc::make_mut(&mut live.object).pointer_mut(pointer).unwrap_or_else(|| panic!("no {pointer}")) =
            value.clone();
    }
    live
}

/// The request the runtime makes: the engine's drift paths, the values the live object has.
fn request(engine: &Engine, desired: &Resource, live: &Resource, title: &str) -> ChangeRequest {
    let drifts = engine.compare_paths(desired, Some(live));
    let changes = drifts
        .iter()
        .map(|(path, _)| FieldChange {
            path: path.clone(),
            value: drift_core::diff::lookup(&live.object, path).cloned(),
        })
        .collect();
    ChangeRequest {
        key: desired.key.clone(),
        api_version: desired.api_version.clone(),
        changes,
        branch: format!("drift/accept/{}-{}-0a1b2c3d", desired.key.kind.to_lowercase(), desired.key.name),
        title: title.into(),
        body: format!(
            "**{}**: changed in the cluster by `kubectl-edit` at 2026-12-01T03:00:00Z.\n\n[drift](https://drift.example.com/drifts/7)\n",
            desired.key
        ),
    }
}

fn paths(request: &ChangeRequest) -> Vec<String> {
    request.changes.iter().map(|c| c.path.to_string()).collect()
}

/// The repository's tree at `rev` of the fake's bare repository, unpacked into a new folder.
fn checkout(bare: &FsPath, rev: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"git --git-dir="$1" archive --format=tar "$2" | tar -x -C "$3""#)
        .args(["sh", bare.to_str().unwrap(), rev, dir.path().to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success(), "archive of {rev}");
    dir
}

/// Runs a renderer (`kubectl kustomize ...`, `helm template ...`) in `dir`; its standard output.
fn run(dir: &FsPath, program: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(program).current_dir(dir).args(args).output().unwrap();
    assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The documents of a renderer's YAML output.
fn documents(text: &str) -> Vec<Value> {
    text.split("\n---\n").map(|d| serde_saphyr::from_str::<Value>(d).unwrap()).filter(|d| d.is_object()).collect()
}

fn only_deployment(text: &str) -> Value {
    let docs: Vec<Value> = documents(text).into_iter().filter(|d| d["kind"] == "Deployment").collect();
    assert_eq!(docs.len(), 1, "{text}");
    docs.into_iter().next().unwrap()
}

fn with(mut object: Value, changes: &[(&str, Value)]) -> Value {
    for (pointer, value) in changes {
        *object.pointer_mut(pointer).unwrap() = value.clone();
    }
    object
}

fn branch_exists(bare: &FsPath) -> bool {
    !git(bare, &["for-each-ref", "--format=%(refname)", "refs/heads/drift"]).is_empty()
}

// --- Tests. ---

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kustomize_overlay_change_is_proposed_updated_merged_and_then_no_longer_drifts() {
    require_kubectl();
    let (fake, base) = start(kustomize_origin()).await;
    let bare = fake.origin.bare.clone();
    let c1 = fake.origin.head();
    let mut cfg = config(&fake, &base, "main");
    cfg.path = Some("overlays/prod".into());
    let engine = Engine::new(&EngineConfig::default()).unwrap();
    let key = ResourceKey::new("apps", "Deployment", Some("prod"), "web");

    // The request, from the object as the source renders it and a live copy with two changes.
    let (desired_prod, revision) = desired(&cfg, &key).await;
    assert_eq!(revision, c1);
    let changed = [
        ("/spec/replicas", json!(5)),
        ("/spec/template/spec/containers/0/image", json!("registry.example.com/web:1.1")),
    ];
    let live1 = live(&desired_prod, &changed);
    let req = request(&engine, &desired_prod, &live1, "Accept the live web Deployment in prod");
    assert_eq!(paths(&req), ["spec.replicas", "spec.template.spec.containers[name=web].image"]);

    let proposal = proposer(&cfg).propose(&req).await.unwrap();
    let patch = "overlays/prod/drift-accept-deployment-web.yaml";
    let placed = vec![
        "spec.replicas: overlays/prod/scale.yaml, overlay patch overlays/prod/scale.yaml".to_owned(),
        format!("spec.template.spec.containers[name=web].image: {patch}, new overlay patch {patch}"),
    ];
    assert_eq!(
        proposal,
        Proposal {
            url: Some(format!("{base}/org/gitops/pull/1")),
            pull_request: Some(1),
            branch: req.branch.clone(),
            updated: false,
            placed: placed.clone(),
            unplaced: Vec::new(),
        }
    );
    let where_section = format!("\n### Where\n\n- {}\n- {}\n", placed[0], placed[1]);
    {
        let pulls = fake.pulls.lock().unwrap();
        assert_eq!(pulls.len(), 1);
        let p = &pulls[0];
        assert_eq!((p.head.as_str(), p.base.as_str(), p.state.as_str()), (req.branch.as_str(), "main", "open"));
        assert_eq!(p.title, req.title);
        assert_eq!(p.body, format!("{}{where_section}", req.body));
    }

    // The pull request's commit: one commit on the base, only overlay files, exact contents.
    let head = format!("refs/heads/{}", req.branch);
    assert_eq!(git(&bare, &["rev-parse", &format!("{head}^")]), c1);
    assert_eq!(git(&bare, &["rev-list", "--count", &format!("{c1}..{head}")]), "1");
    assert_eq!(
        git(&bare, &["diff", "--name-status", &c1, &head]),
        format!("A\t{patch}\nM\toverlays/prod/kustomization.yaml\nM\toverlays/prod/scale.yaml")
    );
    assert_eq!(git(&bare, &["log", "-1", "--format=%an <%ae>", &head]), "Drift Detector <drift@example.com>");
    assert_eq!(
        git(&bare, &["log", "-1", "--format=%B", &head]),
        format!(
            "{}\n\n{}\n\nProposed by the drift detector.",
            req.title,
            format!("{}{where_section}", req.body).trim_end()
        ),
        "the commit holds the pull request's body too"
    );
    assert_eq!(git(&bare, &["rev-parse", "refs/heads/main"]), c1, "the base branch is untouched");
    let pr1 = checkout(&bare, &head);
    let file = |dir: &tempfile::TempDir, path: &str| std::fs::read_to_string(dir.path().join(path)).unwrap();
    assert_eq!(file(&pr1, "overlays/prod/scale.yaml"), PROD_SCALE.replace("replicas: 3 #", "replicas: 5 #"));
    assert_eq!(
        file(&pr1, "overlays/prod/kustomization.yaml"),
        format!("{PROD_KUSTOMIZATION}  - path: drift-accept-deployment-web.yaml\n")
    );
    assert_eq!(
        file(&pr1, patch),
        "# Accepted from the cluster by drift-detector.\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n        - name: web\n          image: registry.example.com/web:1.1\n"
    );
    assert_eq!(file(&pr1, "base/deployment.yaml"), BASE_DEPLOYMENT);
    assert_eq!(file(&pr1, "base/kustomization.yaml"), BASE_KUSTOMIZATION);

    // Real `kubectl kustomize` at the base and at the pull request's head: prod renders the live
    // values (and nothing else changes), dev renders byte for byte as before.
    let before = checkout(&bare, &c1);
    let prod_before = only_deployment(&run(before.path(), "kubectl", &["kustomize", "overlays/prod"]));
    let prod_after = only_deployment(&run(pr1.path(), "kubectl", &["kustomize", "overlays/prod"]));
    assert_eq!(prod_before["spec"]["replicas"], json!(3));
    assert_eq!(prod_after, with(prod_before, &changed));
    assert_eq!(
        run(pr1.path(), "kubectl", &["kustomize", "overlays/dev"]),
        run(before.path(), "kubectl", &["kustomize", "overlays/dev"])
    );

    // The cluster moves on before the merge: the same request again (same branch) updates the
    // same pull request, with the branch replaced by one commit on the base.
    let changed2 = [
        ("/spec/replicas", json!(5)),
        ("/spec/template/spec/containers/0/image", json!("registry.example.com/web:1.2")),
    ];
    let live2 = live(&desired_prod, &changed2);
    let req2 = request(&engine, &desired_prod, &live2, "Accept the live web Deployment in prod (updated)");
    assert_eq!(req2.branch, req.branch);
    let again = proposer(&cfg).propose(&req2).await.unwrap();
    assert_eq!(
        again,
        Proposal {
            url: Some(format!("{base}/org/gitops/pull/1")),
            pull_request: Some(1),
            branch: req.branch.clone(),
            updated: true,
            placed: placed.clone(),
            unplaced: Vec::new(),
        }
    );
    {
        let pulls = fake.pulls.lock().unwrap();
        assert_eq!(pulls.len(), 1, "no second pull request");
        assert_eq!(pulls[0].title, req2.title);
        assert_eq!(pulls[0].body, format!("{}{where_section}", req2.body));
    }
    let writes = fake.writes.lock().unwrap().clone();
    assert_eq!(writes.iter().filter(|w| *w == "POST pulls").count(), 1, "{writes:?}");
    assert!(writes.contains(&"PATCH pulls/1".to_owned()), "{writes:?}");
    assert_eq!(git(&bare, &["rev-parse", &format!("{head}^")]), c1, "force-updated, still on the base commit");
    let pr2 = checkout(&bare, &head);
    assert_eq!(file(&pr2, "overlays/prod/scale.yaml"), file(&pr1, "overlays/prod/scale.yaml"));
    assert_eq!(file(&pr2, patch), file(&pr1, patch).replace("web:1.1", "web:1.2"));
    let prod_after = only_deployment(&run(pr2.path(), "kubectl", &["kustomize", "overlays/prod"]));
    assert_eq!(prod_after["spec"]["template"]["spec"]["containers"][0]["image"], "registry.example.com/web:1.2");

    // Merged through the fake: the source's fetch of the new commit has no drift against the
    // live object left, so the next scan resolves both drifts as accepted.
    let merged = merge(&fake, 1).unwrap();
    let (desired_after, revision) = desired(&cfg, &key).await;
    assert_eq!(revision, merged);
    assert_eq!(engine.compare_paths(&desired_after, Some(&live2)), Vec::new());
    assert_eq!(engine.compare_paths(&desired_prod, Some(&live2)).len(), 2, "the old commit still drifts");
    let dev_key = ResourceKey::new("apps", "Deployment", Some("dev"), "web");
    let mut dev_cfg = cfg.clone();
    dev_cfg.path = Some("overlays/dev".into());
    let (dev, _) = desired(&dev_cfg, &dev_key).await;
    assert_eq!(dev.object["spec"]["replicas"], json!(1));
    assert_eq!(dev.object["spec"]["template"]["spec"]["containers"][0]["image"], "registry.example.com/web:1.0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traced_helm_value_is_changed_in_its_values_file() {
    if !helm_available("a_traced_helm_value_is_changed_in_its_values_file") {
        return;
    }
    let (fake, base) = start(helm_origin()).await;
    let bare = fake.origin.bare.clone();
    let c1 = fake.origin.head();
    let cfg = helm_config(&fake, &base);
    let engine = Engine::new(&EngineConfig::default()).unwrap();
    let key = ResourceKey::new("apps", "Deployment", Some("prod"), "shop");

    let (desired_prod, _) = desired(&cfg, &key).await;
    assert_eq!(
        desired_prod.object["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.example.com/web:1.5"
    );
    let changed = [("/spec/template/spec/containers/0/image", json!("registry.example.com/web:1.6"))];
    let live1 = live(&desired_prod, &changed);
    let req = request(&engine, &desired_prod, &live1, "Accept the live shop Deployment in prod");
    assert_eq!(paths(&req), ["spec.template.spec.containers[name=web].image"]);

    let proposal = proposer(&cfg).propose(&req).await.unwrap();
    let placed = vec![
        "spec.template.spec.containers[name=web].image: env/values-prod.yaml, values key image.tag in env/values-prod.yaml"
            .to_owned(),
    ];
    assert_eq!(
        proposal,
        Proposal {
            url: Some(format!("{base}/org/gitops/pull/1")),
            pull_request: Some(1),
            branch: req.branch.clone(),
            updated: false,
            placed: placed.clone(),
            unplaced: Vec::new(),
        }
    );
    assert_eq!(fake.pulls.lock().unwrap()[0].body, format!("{}\n### Where\n\n- {}\n", req.body, placed[0]));

    let head = format!("refs/heads/{}", req.branch);
    assert_eq!(git(&bare, &["rev-parse", &format!("{head}^")]), c1);
    assert_eq!(git(&bare, &["diff", "--name-status", &c1, &head]), "M\tenv/values-prod.yaml");
    let pr = checkout(&bare, &head);
    assert_eq!(
        std::fs::read_to_string(pr.path().join("env/values-prod.yaml")).unwrap(),
        "# Production pins.\nimage:\n  tag: \"1.6\"   # approved 2026-11\n"
    );

    // Real `helm template` of the base and of the pull request's head: only the image differs.
    let args = ["template", "shop", "charts/web", "--namespace", "prod", "-f", "env/values-prod.yaml"];
    let before = checkout(&bare, &c1);
    let rendered_before = only_deployment(&run(before.path(), "helm", &args));
    let rendered_after = only_deployment(&run(pr.path(), "helm", &args));
    assert_eq!(rendered_after, with(rendered_before, &changed));

    let merged = merge(&fake, 1).unwrap();
    let (desired_after, revision) = desired(&cfg, &key).await;
    assert_eq!(revision, merged);
    assert_eq!(engine.compare_paths(&desired_after, Some(&live1)), Vec::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untraceable_helm_value_proposes_nothing_and_writes_nothing() {
    if !helm_available("an_untraceable_helm_value_proposes_nothing_and_writes_nothing") {
        return;
    }
    let (fake, base) = start(helm_origin()).await;
    let cfg = helm_config(&fake, &base);
    let engine = Engine::new(&EngineConfig::default()).unwrap();
    let key = ResourceKey::new("apps", "Deployment", Some("prod"), "shop");

    // Without `with_token`, the token comes from `token_env`; unset, GitHub refuses the request.
    let mut no_token = cfg.clone();
    no_token.token_env = "DRIFT_PROPOSE_TEST_UNSET_TOKEN".into();
    assert!(std::env::var_os(&no_token.token_env).is_none());
    let from_env =
        GitProposer::new("gitops", SourceConfig::Github(no_token), (AUTHOR.0.into(), AUTHOR.1.into())).unwrap();
    let probe = ChangeRequest {
        key: key.clone(),
        api_version: "apps/v1".into(),
        changes: Vec::new(),
        branch: "drift/accept/probe".into(),
        title: "t".into(),
        body: "b".into(),
    };
    let err = from_env.propose(&probe).await.unwrap_err();
    assert_eq!(err.kind(), drift_core::ErrorKind::PermissionDenied, "{err}");
    assert!(err.to_string().contains("Bad credentials"), "{err}");

    // `tier: front` is a constant of the template: no values key gives it.
    let (desired_prod, _) = desired(&cfg, &key).await;
    let live1 = live(&desired_prod, &[("/metadata/labels/tier", json!("back"))]);
    let req = request(&engine, &desired_prod, &live1, "Accept the live shop Deployment in prod");
    assert_eq!(paths(&req), ["metadata.labels.tier"]);

    let proposal = proposer(&cfg).propose(&req).await.unwrap();
    let unplaced = "metadata.labels.tier: apps/Deployment prod/shop: cannot place `metadata.labels.tier` in the values of the chart `charts/web` (no values key traces to the field); set it so that the field renders as `\"back\"`";
    assert_eq!(
        proposal,
        Proposal {
            url: None,
            pull_request: None,
            branch: req.branch.clone(),
            updated: false,
            placed: Vec::new(),
            unplaced: vec![unplaced.to_owned()],
        }
    );
    assert!(fake.pulls.lock().unwrap().is_empty());
    assert_eq!(fake.writes.lock().unwrap().clone(), Vec::<String>::new(), "nothing is sent to GitHub");
    assert!(!branch_exists(&fake.origin.bare), "no branch is created");

    // With a traceable change beside it, the pull request carries both: where the one was
    // placed, and the other for a person to make.
    let live2 = live(&desired_prod, &[("/metadata/labels/tier", json!("back")), ("/spec/replicas", json!(4))]);
    let req2 = request(&engine, &desired_prod, &live2, "Accept the live shop Deployment in prod");
    assert_eq!(paths(&req2), ["metadata.labels.tier", "spec.replicas"]);
    let proposal = proposer(&cfg).propose(&req2).await.unwrap();
    // A key only the chart's defaults set goes in the application's own values file.
    let placed = "spec.replicas: env/values-prod.yaml, values key replicaCount in env/values-prod.yaml";
    assert_eq!(proposal.placed, [placed]);
    assert_eq!(proposal.unplaced, [unplaced]);
    assert_eq!(proposal.pull_request, Some(1));
    assert_eq!(
        fake.pulls.lock().unwrap()[0].body,
        format!("{}\n### Where\n\n- {placed}\n\n### Not placed (put these by hand)\n\n- {unplaced}\n", req2.body)
    );
    let head = format!("refs/heads/{}", req2.branch);
    let c1 = fake.origin.head();
    assert_eq!(git(&fake.origin.bare, &["diff", "--name-status", &c1, &head]), "M\tenv/values-prod.yaml");
    assert_eq!(
        git(&fake.origin.bare, &["show", &format!("{head}:env/values-prod.yaml")]),
        format!("{PROD_VALUES}replicaCount: 4").as_str()
    );
}
