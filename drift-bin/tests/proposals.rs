//! Whitelist proposals (issue 34, item 3; docs/remediation.md, "Whitelist proposals") as an
//! operator meets them: a real git repository, the test API server driven by the real kubectl,
//! SQLite, and the `drift` binary. Three consistent `accept` decisions about one path of one
//! object (by three people) make exactly one proposal: `drift propose` prints the patch that adds
//! the path to the object's `drift-detector.io/ignore` annotation, `drift propose --open` pushes
//! it as the object's branch, with the evidence naming the deciders, once (a second run changes
//! nothing); decisions that disagree make none; the merge makes the detector stop reporting it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{GitRepo, SHOP, Serve, kubectl, wait_for};
use drift_test_apiserver::{Options, TestApiServer};
use serde_json::Value;

struct World {
    server: TestApiServer,
    home: tempfile::TempDir,
    repo: GitRepo,
    config: PathBuf,
}

impl World {
    fn start(extra: &str) -> World {
        let home = tempfile::tempdir().unwrap();
        let server = TestApiServer::start(Options::default()).unwrap();
        let repo = GitRepo::init(home.path().join("repo"));
        for (name, text) in SHOP {
            repo.write(&format!("apps/{name}"), text);
        }
        repo.commit("the desired state");
        let config = home.path().join("drift.yaml");
        std::fs::write(
            &config,
            format!(
                "cluster: home\ninterval: 1h\nwatch: false\ndatabase: sqlite://{db}\n\
                 live:\n  kubeconfig: {kubeconfig}\n\
                 repositories:\n  - name: shop\n    url: file://{repo}\n    ref: main\n    cache_dir: {cache}\n    path: apps\n\
                 accept:\n  propose:\n    after: 3\n{extra}",
                db = home.path().join("drift.db").display(),
                repo = repo.dir.display(),
                cache = home.path().join("cache").display(),
                kubeconfig = server.kubeconfig_path().display(),
            ),
        )
        .unwrap();
        let world = World { server, home, repo, config };
        world.kubectl(&["apply", "-R", "-f", world.repo.dir.join("apps").to_str().unwrap()]);
        world
    }

    fn kubectl(&self, args: &[&str]) -> String {
        kubectl(self.server.kubeconfig_path(), self.home.path(), args, &[])
    }

    /// `drift ARGS --config FILE`: exit code, stdout, stderr.
    fn drift(&self, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_drift"))
            .args(args)
            .arg("--config")
            .arg(&self.config)
            .env("NO_COLOR", "1")
            .env("HOME", self.home.path())
            .output()
            .unwrap();
        (out.status.code().unwrap(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
    }

    fn ok(&self, args: &[&str]) -> String {
        let (code, out, err) = self.drift(args);
        assert_eq!(code, 0, "drift {args:?}\n{out}\n{err}");
        out
    }

    /// A scan recorded in the store (exit 1: drift found).
    fn scan(&self) {
        let (code, out, err) = self.drift(&["scan"]);
        assert!(code == 0 || code == 1, "drift scan: {code}\n{out}\n{err}");
    }

    fn id(&self, kind: &str, path: &str) -> String {
        let rows: Value = serde_json::from_str(&self.ok(&["drifts", "list", "--json"])).unwrap();
        let d = rows["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["resource_kind"] == kind && d["path"] == path)
            .unwrap_or_else(|| panic!("no drift of {kind} at {path}: {rows}"))
            .clone();
        d["id"].as_i64().unwrap().to_string()
    }

    fn decide(&self, id: &str, action: &str, who: &str) {
        self.ok(&["decide", id, action, "--comment", &format!("{who} says {action}"), "--as", who]);
    }

    fn proposals(&self) -> Vec<Value> {
        let audit: Value =
            serde_json::from_str(&self.ok(&["audit", "list", "--action", "accept", "-o", "json"])).unwrap();
        audit["items"].as_array().unwrap().iter().filter(|e| e["actor"] == "propose").cloned().collect()
    }

    fn branches(&self) -> Vec<String> {
        let out = self.repo.git(&["for-each-ref", "--format=%(refname:short)", "refs/heads/drift/"]);
        out.lines().map(str::to_owned).collect()
    }
}

#[test]
fn three_consistent_accepts_make_one_proposal_naming_the_deciders_and_disagreement_makes_none() {
    let w = World::start("");
    // The replicas of web, scaled by hand three times, accepted each time by someone else.
    for (replicas, who) in [(5, "alice"), (6, "bob"), (7, "carol")] {
        w.kubectl(&["scale", "deployment", "web", "-n", "shop", &format!("--replicas={replicas}")]);
        w.scan();
        w.decide(&w.id("Deployment", "spec.replicas"), "accept", who);
    }
    // The ConfigMap's mode: accepted, rejected, accepted: not consistent.
    for (mode, who, action) in
        [("slow", "alice", "accept"), ("slower", "bob", "reject"), ("slowest", "carol", "accept")]
    {
        w.kubectl(&[
            "patch",
            "configmap",
            "settings",
            "-n",
            "shop",
            "-p",
            &format!(r#"{{"data":{{"mode":"{mode}"}}}}"#),
        ]);
        w.scan();
        w.decide(&w.id("ConfigMap", "data.mode"), action, who);
    }

    // The prediction, shown (no `classify:`: not used); the replicas drift's own decisions are
    // not its evidence, the ConfigMap's are.
    let shown = w.ok(&["drifts", "get", &w.id("Deployment", "spec.replicas")]);
    assert!(shown.contains("  predicted:  "), "{shown}");
    let shown = w.ok(&["drifts", "get", &w.id("ConfigMap", "data.mode")]);
    assert!(
        shown.contains("learned from 1 decided drift(s); shown only: no `classify:` settings"),
        "learned from the replicas drift, not from its own decisions: {shown}"
    );

    // The patch, printed: only the Deployment, its annotation added; nothing written.
    let printed = w.ok(&["propose"]);
    assert_eq!(printed.matches("+++ b/").count(), 1, "one file, one proposal: {printed}");
    assert!(printed.contains("+++ b/apps/web/deployment.yaml"), "{printed}");
    assert!(printed.contains("+    drift-detector.io/ignore: /spec/replicas"), "{printed}");
    assert!(printed.contains("spec.replicas (/spec/replicas): accepted by alice at"), "{printed}");
    assert!(printed.contains("bob at") && printed.contains("carol at"), "{printed}");
    assert!(!printed.contains("settings"), "the ConfigMap's decisions disagree: {printed}");
    assert!(w.branches().is_empty() && w.proposals().is_empty(), "printing writes nothing");

    // Opened: one branch, the annotation in it, the evidence in the audit trail.
    let out = w.ok(&["propose", "--open"]);
    assert!(out.contains("1 proposed"), "{out}");
    let branches = w.branches();
    assert_eq!(branches.len(), 1, "{branches:?}");
    assert!(branches[0].starts_with("drift/propose/deployment-web-"), "{branches:?}");
    let file = w.repo.git(&["show", &format!("{}:apps/web/deployment.yaml", branches[0])]);
    let object: Value = serde_saphyr::from_str(&file).unwrap();
    assert_eq!(object["metadata"]["annotations"]["drift-detector.io/ignore"], "/spec/replicas", "{file}");
    let before: Value = serde_saphyr::from_str(&w.repo.git(&["show", "main:apps/web/deployment.yaml"])).unwrap();
    let mut without = object.clone();
    without["metadata"].as_object_mut().unwrap().remove("annotations");
    assert_eq!(without, before, "only the annotation changes: {file}");
    let proposals = w.proposals();
    assert_eq!(proposals.len(), 1, "{proposals:?}");
    assert_eq!(proposals[0]["status"], "proposed");
    let body = proposals[0]["detail"]["body"].as_str().unwrap();
    assert!(body.contains("Decided by: alice, bob, carol."), "{body}");
    for who in ["alice", "bob", "carol"] {
        assert!(body.contains(&format!("| accept | {who} |")), "{body}");
        assert!(body.contains(&format!("{who} says accept")), "the comment is evidence: {body}");
    }
    assert!(!body.contains("settings"), "{body}");
    // A plain git remote has no pull request: the branch's commit holds the evidence.
    let message = w.repo.git(&["log", "-1", "--format=%B", &branches[0]]);
    assert!(message.contains("Decided by: alice, bob, carol."), "{message}");
    assert!(message.contains("| accept | carol |"), "{message}");

    // Once per pattern: a second round proposes nothing new.
    let out = w.ok(&["propose", "--open"]);
    assert!(out.contains("0 proposed, 0 updated, 1 unchanged"), "{out}");
    assert_eq!((w.branches().len(), w.proposals().len()), (1, 1));

    // Merged, the path is ignored: the next scan no longer reports it, and nothing qualifies.
    w.repo.git(&["merge", "-q", "--ff-only", &branches[0]]);
    w.scan();
    let all: Value = serde_json::from_str(&w.ok(&["drifts", "list", "--json"])).unwrap();
    let replicas: Vec<&Value> =
        all["items"].as_array().unwrap().iter().filter(|d| d["path"] == "spec.replicas").collect();
    assert!(!replicas.is_empty() && replicas.iter().all(|d| d["status"] == "resolved"), "ignored once merged: {all}");
    let (code, out, err) = w.drift(&["propose"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.is_empty() && err.contains("no whitelist proposal"), "{out}{err}");
}

/// `drift serve` with `accept.propose:` proposes by itself, once, on its own tick.
#[test]
fn drift_serve_proposes_by_itself_once() {
    let w = World::start("    tick: 200ms\napi:\n  listen: 127.0.0.1:0\n  token_env: PROPOSE_TOKEN\n");
    for (replicas, who) in [(5, "alice"), (6, "bob"), (7, "carol")] {
        w.kubectl(&["scale", "deployment", "web", "-n", "shop", &format!("--replicas={replicas}")]);
        w.scan();
        w.decide(&w.id("Deployment", "spec.replicas"), "accept", who);
    }
    let serve = Serve::start(&w.config, &[("PROPOSE_TOKEN", "propose-token-7c1")]);
    let proposed = wait_for(std::time::Duration::from_secs(30), "a proposal by drift serve", || {
        w.proposals().into_iter().find(|e| e["status"] == "proposed")
    });
    assert!(proposed["detail"]["body"].as_str().unwrap().contains("Decided by: alice, bob, carol."), "{proposed}");
    // Ten more rounds: nothing new.
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert_eq!((w.proposals().len(), w.branches().len()), (1, 1), "{}", serve.log());
    serve.stop();
}
