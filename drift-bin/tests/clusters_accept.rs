//! Changes taken into Git with several clusters (issue 35; docs/remediation.md): whitelist
//! proposals (`drift propose`, `accept.propose:`) and automatic pull requests (`accept.auto:`)
//! are made per cluster, each from that cluster's drifts and decisions, and each edits the file
//! its cluster's Argo CD Application renders: two test API servers, a real git repository whose
//! Applications send one folder to each cluster (the same object in both), SQLite, the `drift`
//! binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{APPLICATION_CRD, GitRepo, Serve, kubectl};
use drift_test_apiserver::{Options, TestApiServer};
use serde_json::Value;

struct World {
    east: TestApiServer,
    west: TestApiServer,
    home: tempfile::TempDir,
    repo: GitRepo,
}

/// The one object both Applications render, each from its own folder.
fn settings(mode: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: shop\ndata:\n  mode: {mode}\n  level: low\n"
    )
}

impl World {
    fn start() -> World {
        let home = tempfile::tempdir().unwrap();
        let east = TestApiServer::start(Options::default()).unwrap();
        let west = TestApiServer::start(Options::default()).unwrap();
        let repo = GitRepo::init(home.path().join("repo"));
        let url = format!("file://{}", repo.dir.display());
        for cluster in ["east", "west"] {
            repo.write(
                &format!("argo/{cluster}.yaml"),
                &format!(
                    "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {{name: to-{cluster}, namespace: argocd}}\n\
                     spec:\n  project: default\n  source: {{repoURL: '{url}', path: {cluster}, targetRevision: HEAD}}\n  \
                     destination: {{name: {cluster}, namespace: shop}}\n"
                ),
            );
            repo.write(&format!("{cluster}/settings.yaml"), &settings("fast"));
        }
        repo.commit("two clusters");
        // A second repository, a folder (no remote: nothing is proposed to it), on both
        // clusters: `drift propose` looks at each repository on each cluster.
        let local = home.path().join("local");
        std::fs::create_dir_all(&local).unwrap();
        std::fs::write(
            local.join("extra.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra, namespace: shop}\ndata: {a: b}\n",
        )
        .unwrap();
        let world = World { east, west, home, repo };
        let live = world.home.path().join("live.yaml");
        std::fs::write(
            &live,
            format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: shop}}\n---\n{}", settings("fast")),
        )
        .unwrap();
        for server in [&world.east, &world.west] {
            world.kubectl(server, &["apply", "-f", live.to_str().unwrap()]);
        }
        // Argo CD runs on east, the home cluster: its Applications are there, and only there.
        let argo = world.home.path().join("argo.yaml");
        std::fs::write(&argo, APPLICATION_CRD).unwrap();
        world.kubectl(&world.east, &["apply", "-f", argo.to_str().unwrap()]);
        world.kubectl(&world.east, &["create", "namespace", "argocd"]);
        world.kubectl(&world.east, &["apply", "-f", world.repo.dir.join("argo").to_str().unwrap()]);
        world
    }

    /// A configuration of both clusters (`live:` is east: the home cluster) with `accept`.
    fn config(&self, name: &str, accept: &str, api: bool) -> PathBuf {
        let path = self.home.path().join(name);
        let api = if api { "api:\n  listen: 127.0.0.1:0\n  token_env: ACCEPT_TOKEN\n" } else { "" };
        std::fs::write(
            &path,
            format!(
                "interval: 1h\nwatch: false\nstore: sqlite://{db}\n{api}live:\n  kubeconfig: {east}\n\
                 clusters:\n  - name: east\n    kubeconfig: {east}\n  - name: west\n    kubeconfig: {west}\n\
                 repositories:\n  - name: fleet\n    url: file://{repo}\n    ref: main\n    cache_dir: {cache}\n\
                 \x20 - name: local\n    url: {local}\n\
                 accept:\n{accept}",
                local = self.home.path().join("local").display(),
                db = self.home.path().join("drift.db").display(),
                east = self.east.kubeconfig_path().display(),
                west = self.west.kubeconfig_path().display(),
                repo = self.repo.dir.display(),
                cache = self.home.path().join("cache").display(),
            ),
        )
        .unwrap();
        path
    }

    fn kubectl(&self, server: &TestApiServer, args: &[&str]) -> String {
        kubectl(server.kubeconfig_path(), self.home.path(), args, &[])
    }

    fn set(&self, server: &TestApiServer, key: &str, value: &str) {
        let patch = format!(r#"{{"data":{{"{key}":"{value}"}}}}"#);
        self.kubectl(server, &["patch", "configmap", "settings", "-n", "shop", "--type=merge", "-p", &patch]);
    }

    /// `drift ARGS --config FILE`: exit code, stdout, stderr.
    fn drift(&self, config: &Path, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_drift"))
            .args(args)
            .arg("--config")
            .arg(config)
            .env("NO_COLOR", "1")
            .env("HOME", self.home.path())
            .env_remove("KUBECONFIG")
            .output()
            .unwrap();
        (out.status.code().unwrap(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
    }

    fn ok(&self, config: &Path, args: &[&str]) -> String {
        let (code, out, err) = self.drift(config, args);
        assert_eq!(code, 0, "drift {args:?}\n{out}\n{err}");
        out
    }

    /// A scan of both clusters recorded in the store (exit 1: drift found).
    fn scan(&self, config: &Path) {
        let (code, out, err) = self.drift(config, &["scan"]);
        assert!(code == 0 || code == 1, "drift scan: {code}\n{out}\n{err}");
    }

    /// The open drift of the ConfigMap's mode on `cluster`.
    fn mode_drift(&self, config: &Path, cluster: &str) -> String {
        let rows: Value = serde_json::from_str(&self.ok(config, &["drifts", "list", "--json"])).unwrap();
        let d = rows["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["cluster"] == cluster && d["resource_kind"] == "ConfigMap" && d["path"] == "data.mode")
            .unwrap_or_else(|| panic!("no drift of the mode on {cluster}: {rows}"))
            .clone();
        d["id"].as_i64().unwrap().to_string()
    }

    fn branches(&self, prefix: &str) -> Vec<String> {
        let out = self.repo.git(&["for-each-ref", "--format=%(refname:short)", &format!("refs/heads/{prefix}")]);
        out.lines().map(str::to_owned).collect()
    }

    /// The one file a branch changes, and its text there.
    fn changed(&self, branch: &str) -> (String, String) {
        let files = self.repo.git(&["diff", "--name-only", "main", branch]);
        let file = files.trim().to_owned();
        assert!(!file.is_empty() && !file.contains('\n'), "{branch} changes one file: {files}");
        let text = self.repo.git(&["show", &format!("{branch}:{file}")]);
        (file, text)
    }
}

#[test]
fn whitelist_proposals_and_automatic_pull_requests_are_made_per_cluster_in_its_own_file() {
    let w = World::start();
    let config = w.config("drift.yaml", "  propose:\n    after: 3\n", false);
    // East's mode, changed by hand three times, accepted each time by someone else; west's
    // changed once and not decided.
    for (mode, who) in [("slow", "alice"), ("slower", "bob"), ("slowest", "carol")] {
        w.set(&w.east, "mode", mode);
        w.scan(&config);
        let id = w.mode_drift(&config, "east");
        w.ok(&config, &["decide", &id, "accept", "--comment", &format!("{who} says accept"), "--as", who]);
    }
    w.set(&w.west, "mode", "west-hand");
    w.scan(&config);

    // The patch, printed: east's pattern, in the file east's Application renders.
    let printed = w.ok(&config, &["propose"]);
    assert_eq!(printed.matches("+++ b/").count(), 1, "one proposal: {printed}");
    assert!(printed.contains("+++ b/east/settings.yaml"), "east's file, not west's: {printed}");
    assert!(printed.contains("+    drift-detector.io/ignore: /data/mode"), "{printed}");
    assert!(printed.contains("accepted by alice at"), "{printed}");
    // Opened: one branch, with the annotation in east's file only.
    let out = w.ok(&config, &["propose", "--open"]);
    assert!(out.contains("1 proposed"), "{out}");
    let proposed = w.branches("drift/propose/");
    assert_eq!(proposed.len(), 1, "{proposed:?}");
    let (file, text) = w.changed(&proposed[0]);
    assert_eq!(file, "east/settings.yaml");
    assert!(text.contains("drift-detector.io/ignore: /data/mode"), "{text}");

    // `drift serve` with `accept.auto`: each cluster's open drifts are proposed, each cluster's
    // on its own branch, with its own values, in its own file. East's level is the candidate;
    // its mode, accepted by decision (waived until Git has it), goes with it into the object's
    // change; none of east's values reaches west's file, nor west's east's.
    w.set(&w.east, "level", "east-high");
    let auto = w.config(
        "auto.yaml",
        "  auto:\n    tick: 200ms\n    rules:\n      - drift_types: [configmap_drift]\n        min_age: 0s\n",
        true,
    );
    let serve = Serve::start(&auto, &[("ACCEPT_TOKEN", "accept-token-5e2")]);
    let started = std::time::Instant::now();
    let branches = loop {
        let b = w.branches("drift/accept/");
        if b.len() >= 2 {
            break b;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "an automatic pull request for each cluster: {b:?}\n{}",
            serve.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(branches.len(), 2, "{branches:?}\n{}", serve.log());
    let mut seen: Vec<(String, String, String)> = branches
        .iter()
        .map(|b| {
            let (file, text) = w.changed(b);
            let data = serde_saphyr::from_str::<Value>(&text).unwrap()["data"].clone();
            (file, data["mode"].as_str().unwrap().to_owned(), data["level"].as_str().unwrap().to_owned())
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        vec![
            ("east/settings.yaml".to_owned(), "slowest".to_owned(), "east-high".to_owned()),
            ("west/settings.yaml".to_owned(), "west-hand".to_owned(), "low".to_owned()),
        ],
        "{}",
        serve.log()
    );
    serve.stop();
}
