//! `drift check --ref`: what merging a branch would do, against the test API server with a real
//! git repository and the real kubectl making the hand changes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Output;

use common::{ClusterHome, GitRepo, Serve, drift_command, http};
use drift_test_apiserver::Options;
use serde_json::Value;

struct World {
    cluster: ClusterHome,
    repo: GitRepo,
    config: std::path::PathBuf,
}

impl World {
    /// The shop in Git (`main`) and applied; the Deployment scaled to 5 and the ConfigMap's
    /// mode edited to `slow` by hand; one `drift scan` recorded those drifts.
    fn start() -> World {
        let cluster = ClusterHome::start(Options::default());
        let repo = GitRepo::shop(cluster.path("repo"));
        let config = cluster.write(
            "drift.yaml",
            &format!(
                "cluster: check\nstore: sqlite://{db}\napi:\n  listen: 127.0.0.1:0\n  token_env: CHECK_TOKEN\nrepositories:\n  - name: shop\n    url: file://{repo}\n    ref: main\n    path: apps\n    cache_dir: {cache}\n\
                 live:\n  kubeconfig: {kubeconfig}\n",
                db = cluster.path("drift.db").display(),
                repo = repo.dir.display(),
                cache = cluster.path("cache").display(),
                kubeconfig = cluster.server.kubeconfig_path().display(),
            ),
        );
        cluster.kubectl(&["apply", "-R", "-f", repo.dir.join("apps").to_str().unwrap()]);
        cluster.kubectl(&["scale", "deployment", "web", "-n", "shop", "--replicas=5"]);
        common::edit_configmap(cluster.server.kubeconfig_path(), cluster.home.path(), "fast", "slow");
        let world = World { cluster, repo, config };
        let scan = world.drift(&["scan", "--config", world.config.to_str().unwrap()]);
        assert_eq!(scan.status.code(), Some(1), "{}", String::from_utf8_lossy(&scan.stderr));
        world
    }

    fn drift(&self, args: &[&str]) -> Output {
        drift_command().args(args).env("HOME", self.cluster.home.path()).output().unwrap()
    }

    /// A branch off `main` with `files` changed, then back to `main`.
    fn branch(&self, name: &str, files: &[(&str, &str)]) {
        self.repo.git(&["checkout", "-q", "-b", name, "main"]);
        for (path, text) in files {
            self.repo.write(path, text);
        }
        self.repo.commit(name);
        self.repo.git(&["checkout", "-q", "main"]);
    }

    fn check(&self, reference: &str, format: &str) -> (Option<i32>, String) {
        let out = self.drift(&["check", "--config", self.config.to_str().unwrap(), "--ref", reference, "-o", format]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.code().is_some_and(|c| c < 2), "drift check: {stderr}");
        (out.status.code(), String::from_utf8(out.stdout).unwrap())
    }

    /// The store's id of the open drift at `path`.
    fn drift_id(&self, path: &str) -> i64 {
        let out = self.drift(&["drifts", "list", "--config", self.config.to_str().unwrap(), "-o", "json"]);
        let page: Value = serde_json::from_slice(&out.stdout).unwrap();
        page["items"].as_array().unwrap().iter().find(|d| d["path"] == path).unwrap()["id"].as_i64().unwrap()
    }
}

#[test]
fn a_branch_that_resets_a_hand_change_says_so_and_exits_1_and_one_that_does_not_exits_0() {
    let world = World::start();
    let deployment = common::DEPLOYMENT.replace("nginx:1.27", "nginx:1.28");
    let settings =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: shop\ndata:\n  mode: slow\n";
    let extra = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  namespace: shop\ndata:\n  a: b\n";
    // A new image for the scaled Deployment (its apply puts replicas back to 2), the edited mode
    // taken into Git, and a new ConfigMap.
    world.branch(
        "release",
        &[
            ("apps/web/deployment.yaml", &deployment),
            ("apps/web/configmap.yaml", settings),
            ("apps/web/extra.yaml", extra),
        ],
    );
    let (code, text) = world.check("release", "table");
    println!("{text}");
    let (replicas, mode) = (world.drift_id("spec.replicas"), world.drift_id("data.mode"));
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("overwrites 1 live change(s) made in the cluster:"), "{text}");
    let overwritten = text.lines().find(|l| l.contains("spec.replicas")).unwrap();
    assert!(overwritten.contains("Deployment shop/web  spec.replicas: 5 set by kubectl "), "{overwritten}");
    assert!(overwritten.ends_with(&format!("becomes 2  (drift {replicas})")), "{overwritten}");
    assert!(text.contains(&format!("resolves 1 drift(s) (Git will say what the cluster has):\n    ConfigMap shop/settings  data.mode: slow  (drift {mode})")), "{text}");
    assert!(
        text.contains(
            "Deployment shop/web  spec.template.spec.containers[name=web].image: nginx:1.27 becomes nginx:1.28"
        ),
        "{text}"
    );
    assert!(text.contains("changes 1 field(s) as Git does:\n    Deployment shop/web  spec.template"), "{text}");
    assert!(text.contains("creates 1 object(s):\n    ConfigMap shop/extra"), "{text}");
    assert!(!text.contains("nobody touched"), "the Deployment holds a live change, the ConfigMap is new: {text}");

    let (code, json) = world.check("release", "json");
    assert_eq!(code, Some(1));
    let checks: Value = serde_json::from_str(&json).unwrap();
    let fields = checks[0]["fields"].as_array().unwrap();
    assert_eq!(fields[0]["effect"], "overwrites_live_change");
    assert_eq!(fields[0]["drift"]["changed_by"], "kubectl");
    assert_eq!((fields[0]["drift"]["cluster_value"].clone(), fields[0]["applies"].clone()), (5.into(), 2.into()));

    // A branch that changes only the Service, which nobody touched: nothing live is overwritten.
    let service = common::SHOP.iter().find(|(n, _)| *n == "web/service.yaml").unwrap().1.replace("8080", "9090");
    world.branch("ports", &[("apps/web/service.yaml", &service)]);
    let (code, text) = world.check("ports", "table");
    assert_eq!(code, Some(0), "{text}");
    assert!(!text.contains("overwrites"), "{text}");
    assert!(text.contains("Service shop/web  spec.ports[port=80].targetPort: 8080 becomes 9090"), "{text}");
    assert!(text.contains("changes 1 object(s) nobody touched: Service shop/web"), "{text}");
    assert!(text.contains("leaves 2 drift(s) open (on objects it does not change)"), "{text}");
}

#[test]
fn a_ref_that_does_not_exist_is_an_error_that_names_it() {
    let world = World::start();
    let out = world.drift(&["check", "--config", world.config.to_str().unwrap(), "--ref", "no-such-branch"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("shop: cannot check: no-such-branch could not be read: "), "{stderr}");
    assert!(
        out.stdout.is_empty(),
        "nothing is said of a merge that cannot be read: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// `POST /check` of `drift serve`: the same answer as the command, behind the write token.
#[test]
fn the_api_answers_what_a_merge_would_do() {
    let world = World::start();
    let deployment = common::DEPLOYMENT.replace("nginx:1.27", "nginx:1.28");
    world.branch("release", &[("apps/web/deployment.yaml", &deployment)]);
    let serve = Serve::start(&world.config, &[("CHECK_TOKEN", "check-token-5d1")]);
    let (status, body) = http(&serve.addr, "POST", "/check?ref=release", Some("check-token-5d1"));
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (answer["sure"].as_bool(), answer["overwrites_live_changes"].as_bool()),
        (Some(true), Some(true)),
        "{answer}"
    );
    let fields = answer["checks"][0]["fields"].as_array().unwrap();
    assert_eq!(
        (fields[0]["effect"].as_str(), fields[0]["drift"]["path"].as_str()),
        (Some("overwrites_live_change"), Some("spec.replicas"))
    );
    let replicas = world.drift_id("spec.replicas");
    assert!(
        answer["checks"][0]["drift_ids"].as_object().unwrap().values().any(|id| id.as_i64() == Some(replicas)),
        "{answer}"
    );
    // A ref that does not exist: answered, not sure, nothing made up.
    let (status, body) = http(&serve.addr, "POST", "/check?ref=no-such-branch", Some("check-token-5d1"));
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (answer["sure"].as_bool(), answer["checks"].as_array().map(Vec::len)),
        (Some(false), Some(0)),
        "{answer}"
    );
    assert!(
        answer["reasons"][0].as_str().unwrap().starts_with("shop: cannot check: no-such-branch could not be read"),
        "{answer}"
    );
    // Refused: no token, an option for a ref, an unknown repository.
    assert_eq!(http(&serve.addr, "POST", "/check?ref=release", None).0, 401);
    assert_eq!(http(&serve.addr, "POST", "/check?ref=--upload-pack=x", Some("check-token-5d1")).0, 400);
    assert_eq!(http(&serve.addr, "POST", "/check", Some("check-token-5d1")).0, 400);
    assert_eq!(http(&serve.addr, "POST", "/check?ref=release&repository=other", Some("check-token-5d1")).0, 404);
    serve.stop();
}
