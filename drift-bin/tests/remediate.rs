//! Remediation as an operator uses it (docs/remediation.md): a real git repository, the test API
//! server driven by the real kubectl, SQLite. Hand changes are reverted from the CLI (dry run
//! first), through the API, by the printed kubectl command, and by self-heal (after a grace
//! period, under a rate limit, at once after a `reject`, or only written down in dry-run mode);
//! every refusal names its rule; a live change accepted into Git is a pushed branch whose merge
//! resolves the drift as `accepted`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::{GitRepo, SHOP, Serve, get_json, http, kubectl, wait_for};
use drift_test_apiserver::{FaultAction, FaultMatch, FaultRule, Faults, Options, TestApiServer};
use serde_json::{Value, json};

const TOKEN: &str = "fix-token-2b81d4";

const SECRET: &str = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: shop\nstringData:\n  password: git-secret-value-1\n";

struct World {
    server: TestApiServer,
    home: tempfile::TempDir,
    repo: GitRepo,
    config: PathBuf,
}

impl World {
    /// The shop applied from a repository (and a Secret), with a configuration whose end is
    /// `extra` (heal settings).
    fn start(watch: bool, extra: &str) -> World {
        let mut files: Vec<(String, String)> =
            SHOP.iter().map(|(name, text)| (format!("apps/{name}"), (*text).to_owned())).collect();
        files.push(("apps/web/secret.yaml".into(), SECRET.into()));
        let world = World::with_files(&files, watch, &format!("    path: apps\n{extra}"));
        world.kubectl(&["apply", "-R", "-f", world.repo.dir.join("apps").to_str().unwrap()]);
        world
    }

    /// A repository of `files`, the repository entry ending with `source` (its `path`, renderer,
    /// helm settings) followed by the rest of the configuration; nothing applied yet.
    fn with_files(files: &[(String, String)], watch: bool, source: &str) -> World {
        let home = tempfile::tempdir().unwrap();
        let server = TestApiServer::start(Options::default()).unwrap();
        let repo = GitRepo::init(home.path().join("repo"));
        for (name, text) in files {
            repo.write(name, text);
        }
        repo.commit("the desired state");
        let config = home.path().join("drift.yaml");
        std::fs::write(
            &config,
            format!(
                "cluster: fix\ninterval: 1h\nwatch: {watch}\ndatabase: sqlite://{db}\napi:\n  listen: 127.0.0.1:0\n  token_env: FIX_TOKEN\n\
                 live:\n  kubeconfig: {kubeconfig}\n\
                 repositories:\n  - name: shop\n    url: file://{repo}\n    ref: main\n    cache_dir: {cache}\n{source}",
                db = home.path().join("drift.db").display(),
                repo = repo.dir.display(),
                cache = home.path().join("cache").display(),
                kubeconfig = server.kubeconfig_path().display(),
            ),
        )
        .unwrap();
        World { server, home, repo, config }
    }

    fn kubectl(&self, args: &[&str]) -> String {
        kubectl(self.server.kubeconfig_path(), self.home.path(), args, &[])
    }

    fn json_of(&self, args: &[&str]) -> Value {
        serde_json::from_str(&self.kubectl(args)).unwrap()
    }

    /// `kubectl edit` of the ConfigMap with a sed script as the editor.
    fn edit_configmap(&self, from: &str, to: &str) {
        common::edit_configmap(self.server.kubeconfig_path(), self.home.path(), from, to);
    }

    fn mode(&self) -> String {
        self.json_of(&["get", "configmap", "settings", "-n", "shop", "-o", "json"])["data"]["mode"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    fn replicas(&self) -> i64 {
        self.json_of(&["get", "deployment", "web", "-n", "shop", "-o", "json"])["spec"]["replicas"].as_i64().unwrap()
    }

    /// The command `drift ARGS --config FILE` as user carol.
    fn drift_command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_drift"));
        command
            .args(args)
            .arg("--config")
            .arg(&self.config)
            .env("USER", "carol")
            .env("NO_COLOR", "1")
            .env("HOME", self.home.path());
        command
    }

    /// `drift ARGS --config FILE` as user carol: exit code, stdout, stderr.
    fn drift(&self, args: &[&str]) -> (i32, String, String) {
        finished(self.drift_command(args).output().unwrap())
    }

    /// `drift ARGS` started while the test API server holds the first request `hold` matches;
    /// `meanwhile` runs once that request is held, then the request is released: exit code,
    /// stdout, stderr.
    fn drift_held(&self, args: &[&str], hold: FaultMatch, meanwhile: impl FnOnce()) -> (i32, String, String) {
        let held = self.server.holds().arrived;
        self.server.set_faults(Faults {
            faults: vec![FaultRule { matcher: hold, action: FaultAction::Hold, times: Some(1) }],
        });
        let child = self
            .drift_command(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        self.server.wait_held(held + 1);
        meanwhile();
        self.server.release_held();
        self.server.clear_faults();
        finished(child.wait_with_output().unwrap())
    }

    /// `drift ARGS` started while the test API server holds the first request `hold` matches,
    /// returned once that request is held (its standard error goes to a file of its own, read
    /// by [`Held::stderr`]); the request stays held until the test releases it.
    fn drift_holding(&self, args: &[&str], hold: FaultMatch) -> Held {
        let held = self.server.holds().arrived;
        self.server.set_faults(Faults {
            faults: vec![FaultRule { matcher: hold, action: FaultAction::Hold, times: Some(1) }],
        });
        let stderr = self.home.path().join(format!("stderr-{held}"));
        let child = self
            .drift_command(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        self.server.wait_held(held + 1);
        self.server.clear_faults();
        Held { child, stderr }
    }

    /// A pre-receive hook in the repository that holds every push for 10 s and then refuses
    /// it; returns the file it touches when a push reaches it.
    fn hold_pushes(&self) -> PathBuf {
        let marker = self.home.path().join("hook-started");
        common::script(
            &self.repo.dir.join(".git/hooks/pre-receive"),
            &format!(
                "#!/bin/sh\ntouch {}\ni=0\nwhile [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done\nexit 1\n",
                marker.display()
            ),
        );
        marker
    }

    /// The audit entries of `action` about drift `id`, newest first: (id, status, attempt,
    /// detail).
    fn audit_of(&self, action: &str, id: &str) -> Vec<(i64, String, Option<i64>, Value)> {
        let audit = self.drift_json(&["audit", "list", "--action", action, "--drift", id, "-o", "json"]);
        audit["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["id"].as_i64().unwrap(),
                    e["status"].as_str().unwrap().to_owned(),
                    e["attempt"].as_i64(),
                    e["detail"].clone(),
                )
            })
            .collect()
    }

    fn drift_json(&self, args: &[&str]) -> Value {
        let (code, out, err) = self.drift(args);
        assert_eq!(code, 0, "{args:?}: {out}{err}");
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
    }

    /// The drifts with this status, as JSON rows.
    fn rows(&self, status: &str) -> Vec<Value> {
        self.drift_json(&["drifts", "list", "--status", status, "--json"])["items"].as_array().unwrap().clone()
    }

    /// The id of the live drift of `kind` at `path`.
    fn id(&self, kind: &str, path: &str) -> String {
        let rows = self.rows("open");
        let d = rows
            .iter()
            .find(|d| d["resource_kind"] == kind && d["path"] == path)
            .unwrap_or_else(|| panic!("no open drift of {kind} at {path}: {rows:?}"));
        d["id"].as_i64().unwrap().to_string()
    }

    fn serve(&self) -> Serve {
        Serve::start(&self.config, &[("FIX_TOKEN", TOKEN)])
    }
}

/// A `drift` process whose request is held at the test API server.
struct Held {
    child: std::process::Child,
    stderr: PathBuf,
}

impl Held {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill").args([&format!("-{name}"), &self.pid().to_string()]).status().unwrap();
        assert!(status.success());
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Waits until its standard error contains `text`.
    fn wait_for_stderr(&self, text: &str) {
        wait_for(Duration::from_secs(20), text, || self.stderr().contains(text).then_some(()));
    }

    fn finish(self) -> (i32, String, String) {
        let stderr = self.stderr.clone();
        let out = self.child.wait_with_output().unwrap();
        let code = out.status.code().unwrap_or(-1);
        (code, String::from_utf8(out.stdout).unwrap(), std::fs::read_to_string(stderr).unwrap())
    }
}

fn finished(out: std::process::Output) -> (i32, String, String) {
    (out.status.code().unwrap(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

/// The outcomes of the reverts of a drift in the audit trail (not the `attempted` entries
/// written before each revert that writes), newest first: (status, detail).
fn revert_entries(w: &World, id: &str) -> Vec<(String, Value)> {
    w.audit_of("revert", id)
        .into_iter()
        .filter(|e| e.1 != "attempted")
        .map(|(_, status, _, detail)| (status, detail))
        .collect()
}

/// The PATCH requests of the Deployment `web` by drift (not kubectl) that changed something
/// (not dry runs).
fn writes_of_web(w: &World) -> usize {
    w.server
        .requests()
        .iter()
        .filter(|r| {
            r.method == "PATCH"
                && r.path.ends_with("/deployments/web")
                && !r.user_agent.starts_with("kubectl")
                && r.query.get("dryRun").is_none_or(|d| d != "All")
        })
        .count()
}

/// The managers of an object's managedFields, with their operation.
fn managers(object: &Value) -> Vec<(String, String)> {
    object["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["manager"].as_str().unwrap().to_owned(), m["operation"].as_str().unwrap().to_owned()))
        .collect()
}

#[test]
fn a_hand_change_is_reverted_from_the_cli_after_a_dry_run_and_the_next_scan_says_reverted() {
    let w = World::start(false, "");
    w.edit_configmap("fast", "slow");
    w.kubectl(&["scale", "deployment", "web", "-n", "shop", "--replicas=5"]);
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 1, "two drifts: {out}{err}");
    let cm = w.id("ConfigMap", "data.mode");
    let replicas = w.id("Deployment", "spec.replicas");

    // Every drift carries its patch and the command a person can paste.
    let detail = w.drift_json(&["drifts", "get", &cm, "-o", "json"]);
    assert_eq!(
        detail["revert"]["patch"],
        json!([{"op": "test", "path": "/data/mode", "value": "slow"}, {"op": "replace", "path": "/data/mode", "value": "fast"}])
    );
    assert_eq!(
        detail["revert"]["command"],
        r#"kubectl patch configmap settings --namespace shop --type json --field-manager drift-detector -p '[{"op":"test","path":"/data/mode","value":"slow"},{"op":"replace","path":"/data/mode","value":"fast"}]'"#
    );

    // A dry run changes nothing.
    let (code, out, err) = w.drift(&["fix", &cm, "--revert", "--dry-run"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.starts_with(&format!(
            "dry run: the server would revert ConfigMap shop/settings (data.mode) for drift {cm}"
        )),
        "{out}"
    );
    assert_eq!(w.mode(), "slow");

    let (code, out, err) = w.drift(&["fix", &cm, "--revert", "-o", "json"]);
    assert_eq!(code, 0, "{out}{err}");
    let outcome: Value = serde_json::from_str(&out).unwrap();
    assert_eq!((outcome["status"].as_str(), outcome["actor"].as_str()), (Some("reverted"), Some("carol")));
    assert_eq!(outcome["plan"]["apply"]["data"], json!({"mode": "fast"}), "only the drifted field is applied");
    assert_eq!(w.mode(), "fast");
    let object = w.json_of(&["get", "configmap", "settings", "-n", "shop", "-o", "json", "--show-managed-fields"]);
    let managers = managers(&object);
    assert!(managers.contains(&("drift-detector".into(), "Apply".into())), "{managers:?}");
    assert!(
        managers.iter().any(|(m, _)| m == "kubectl-client-side-apply"),
        "the applier keeps its fields: {managers:?}"
    );

    // The printed command works as it is.
    let command =
        w.drift_json(&["drifts", "get", &replicas, "-o", "json"])["revert"]["command"].as_str().unwrap().to_owned();
    let kubeconfig = w.server.kubeconfig_path().display().to_string();
    let out = Command::new("sh")
        .arg("-c")
        .arg(&command)
        .env("KUBECONFIG", &kubeconfig)
        .env("HOME", w.home.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{command}: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(w.replicas(), 2);

    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 0, "nothing left: {out}{err}");
    let resolved = w.rows("resolved");
    assert_eq!(resolved.len(), 2, "{resolved:?}");
    assert!(resolved.iter().all(|d| d["resolution"] == "reverted"), "{resolved:?}");

    let audit = w.drift_json(&["audit", "list", "--action", "revert", "-o", "json"]);
    let entries: Vec<(String, String)> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["actor"].as_str().unwrap().to_owned(), e["status"].as_str().unwrap().to_owned()))
        .collect();
    let carol = |status: &str| ("carol".to_owned(), status.to_owned());
    assert_eq!(entries, [carol("reverted"), carol("attempted"), carol("dry_run")], "a dry run writes no attempt");
    // A drift resolved as reverted is not reverted again: asked again, the answer is the revert
    // done (a retry whose first answer was lost gets it too).
    let (code, out, err) = w.drift(&["fix", &cm, "--revert"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("already reverted ConfigMap shop/settings (data.mode)"), "{out}");
    let statuses = w.audit_of("revert", &cm).into_iter().map(|e| e.1).collect::<Vec<_>>();
    assert_eq!(statuses[..2], ["already_reverted".to_owned(), "attempted".to_owned()]);
}

/// The write of a web Deployment's revert (not its dry run).
fn web_write() -> FaultMatch {
    FaultMatch {
        verb: Some("patch".into()),
        resource: Some("deployments".into()),
        name: Some("web".into()),
        dry_run: Some(false),
        ..FaultMatch::default()
    }
}

/// Regression test of issue 31, item 1: a forced server-side apply without a precondition
/// overwrote a value someone set while the revert was in flight, answered "reverted", and its
/// audit entry did not say what it replaced.
#[test]
fn a_revert_whose_field_changes_while_its_write_is_held_is_refused_as_stale_and_the_newer_value_stays() {
    let w = World::start(false, "");
    w.kubectl(&["scale", "deployment", "web", "-n", "shop", "--replicas=5"]);
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 1, "{out}{err}");
    let id = w.id("Deployment", "spec.replicas");
    let (code, out, err) = w.drift(&["fix", &id, "--revert", "--dry-run"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("  spec.replicas: 5 -> 2\n"), "the dry run names both values: {out}");

    // The revert's write is held at the API server while kubectl scales the same field.
    let (code, out, err) = w.drift_held(&["fix", &id, "--revert"], web_write(), || {
        w.kubectl(&["scale", "deployment", "web", "-n", "shop", "--replicas=7"]);
    });
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert!(err.lines().any(|l| l.starts_with("refused (stale): ")), "{err}");
    assert!(err.contains("planned against 5") && err.contains("the cluster now holds 7"), "both values: {err}");
    assert_eq!(w.replicas(), 7, "the newer value is still in the cluster");
    assert_eq!(writes_of_web(&w), 1, "the held write was the only one, and the API server refused it");

    // The audit trail shows the dry run and the refused attempt, with the values.
    let entries = revert_entries(&w, &id);
    assert_eq!(entries.len(), 2, "{entries:?}");
    assert_eq!(entries[0].0, "refused");
    assert_eq!(
        (&entries[0].1["refusal"], &entries[0].1["planned"], &entries[0].1["found"]),
        (&json!("stale"), &json!(5), &json!(7))
    );
    assert_eq!(entries[1].0, "dry_run");
    assert_eq!((&entries[1].1["replaced"], &entries[1].1["written"]), (&json!(5), &json!(2)));

    // Planned against 5 by the dry run, a revert stays refused while the cluster holds 7; a new
    // dry run plans against 7, and the revert then applies.
    let (code, _, err) = w.drift(&["fix", &id, "--revert"]);
    assert_eq!(code, 1);
    assert!(err.lines().any(|l| l.starts_with("refused (stale): ")), "{err}");
    assert_eq!(w.replicas(), 7);
    let (code, out, err) = w.drift(&["fix", &id, "--revert", "--dry-run"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("  spec.replicas: 7 -> 2\n"), "{out}");
    let (code, out, err) = w.drift(&["fix", &id, "--revert"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(w.replicas(), 2);
    let entries = revert_entries(&w, &id);
    assert_eq!(entries[0].0, "reverted");
    assert_eq!((&entries[0].1["replaced"], &entries[0].1["written"]), (&json!(7), &json!(2)));
}

/// Issue 31, items 1 and 4: a change of another field of the object while a revert is in
/// flight neither blocks it (it was refused as `dry_run_mismatch`) nor is undone by it.
#[test]
fn a_revert_held_while_another_field_changes_applies_and_the_other_change_stays() {
    let w = World::start(false, "");
    w.kubectl(&["scale", "deployment", "web", "-n", "shop", "--replicas=5"]);
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 1, "{out}{err}");
    let id = w.id("Deployment", "spec.replicas");
    let other = || {
        w.kubectl(&["patch", "deployment", "web", "-n", "shop", "-p", r#"{"spec":{"minReadySeconds":9}}"#]);
    };

    // Held at its dry run: the dry run is refused by the API server (another resourceVersion),
    // and the revert reads the object again, finds its field as planned, and goes on.
    let dry_run = FaultMatch { dry_run: Some(true), ..web_write() };
    let (code, out, err) = w.drift_held(&["fix", &id, "--revert", "-o", "json"], dry_run, other);
    assert_eq!(code, 0, "{out}{err}");
    let outcome: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (&outcome["status"], &outcome["replaced"], &outcome["written"]),
        (&json!("reverted"), &json!(5), &json!(2))
    );
    let web = w.json_of(&["get", "deployment", "web", "-n", "shop", "-o", "json"]);
    assert_eq!((web["spec"]["replicas"].as_i64(), web["spec"]["minReadySeconds"].as_i64()), (Some(2), Some(9)));

    // Held at its write: refused by the API server, read again, planned and written again.
    w.kubectl(&["scale", "deployment", "web", "-n", "shop", "--replicas=5"]);
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 1, "{out}{err}");
    let id = w.id("Deployment", "spec.replicas");
    let before = writes_of_web(&w);
    let (code, out, err) = w.drift_held(&["fix", &id, "--revert"], web_write(), || {
        w.kubectl(&["annotate", "deployment", "web", "-n", "shop", "team=checkout"]);
    });
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("  spec.replicas: 5 -> 2\n"), "{out}");
    let web = w.json_of(&["get", "deployment", "web", "-n", "shop", "-o", "json"]);
    assert_eq!(web["spec"]["replicas"].as_i64(), Some(2));
    assert_eq!(web["metadata"]["annotations"]["team"], "checkout", "the other change stays");
    assert_eq!(web["spec"]["minReadySeconds"].as_i64(), Some(9));
    assert_eq!(writes_of_web(&w) - before, 2, "the held write was refused, the second one applied");
    let entries = revert_entries(&w, &id);
    assert_eq!(entries[0].0, "reverted", "{entries:?}");
    assert_eq!((&entries[0].1["replaced"], &entries[0].1["written"]), (&json!(5), &json!(2)));
}

#[test]
fn every_refusal_names_its_rule_and_changes_nothing() {
    // `image-updater` is a controller of Deployments because drift.yaml says so (a name on no
    // list is `unknown`, and reverted: see the test after this one).
    let w = World::start(
        false,
        "engine:\n  managers:\n    controllers:\n      - {manager: image-updater, kinds: [Deployment]}\n",
    );
    w.edit_configmap("fast", "slow");
    w.kubectl(&["patch", "secret", "creds", "-n", "shop", "-p", r#"{"stringData":{"password":"hand-set-secret-2"}}"#]);
    // A controller changes the image.
    w.kubectl(&[
        "patch",
        "deployment",
        "web",
        "-n",
        "shop",
        "--field-manager",
        "image-updater",
        "--type",
        "json",
        "-p",
        r#"[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"nginx:1.99"}]"#,
    ]);
    w.kubectl(&["delete", "service", "web", "-n", "shop"]);
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 1, "{out}{err}");
    let refused = |id: &str, rule: &str| {
        let (code, out, err) = w.drift(&["fix", id, "--revert"]);
        assert_eq!(code, 1, "{out}{err}");
        assert!(err.starts_with(&format!("refused ({rule}): ")), "{rule}: {err}");
        assert!(!err.contains("secret-value") && !err.contains("hand-set-secret"), "no Secret value: {err}");
        err
    };

    let secret = w.id("Secret", "data.password");
    assert!(w.drift_json(&["drifts", "get", &secret, "-o", "json"]).get("revert").is_none(), "no patch for a Secret");
    refused(&secret, "secret");
    let image = w.rows("open").into_iter().find(|d| d["drift_type"] == "image_tag_drift").unwrap()["id"].to_string();
    let err = refused(&image, "controller_managed");
    assert!(err.contains("image-updater"), "{err}");
    let missing = w.id("Service", "");
    refused(&missing, "missing_object");
    let cm = w.id("ConfigMap", "data.mode");
    let (code, _, err) = w.drift(&["decide", &cm, "accept", "--comment", "slow during the sale"]);
    assert_eq!(code, 0, "{err}");
    let err = refused(&cm, "waived");
    assert!(err.contains("under a waiver until "), "{err}");

    // Nothing changed in the cluster.
    assert_eq!(w.mode(), "slow");
    let secret = w.json_of(&["get", "secret", "creds", "-n", "shop", "-o", "json"]);
    assert_ne!(secret["data"]["password"], json!("Z2l0LXNlY3JldC12YWx1ZS0x"), "git-secret-value-1 in base64");
    // Each refusal is in the audit trail, with its rule.
    let audit = w.drift_json(&["audit", "list", "--action", "revert", "--status", "refused", "-o", "json"]);
    let mut rules: Vec<String> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["detail"]["refusal"].as_str().unwrap().to_owned())
        .collect();
    rules.sort();
    assert_eq!(rules, ["controller_managed", "missing_object", "secret", "waived"]);
    let (code, _, err) = w.drift(&["fix", "999", "--revert"]);
    assert_eq!(code, 1);
    assert!(err.contains("no drift with id 999"), "{err}");

    // A detector of another cluster on the same store does not touch this cluster's drift.
    let other = w.home.path().join("other.yaml");
    std::fs::write(&other, std::fs::read_to_string(&w.config).unwrap().replace("cluster: fix\n", "cluster: other\n"))
        .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_drift"))
        .args(["fix", &cm, "--revert", "--config"])
        .arg(&other)
        .env("HOME", w.home.path())
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.starts_with("refused (other_cluster): "), "{err}");
}

/// Regression test of issue 37, item 2: a hand edit made with `kubectl --field-manager
/// my-script` (any name on no list) was classified `controller_managed`, action `observe`, and
/// its revert refused, even for a CRITICAL Service port. A name proves nothing: it is `unknown`
/// now, reverted by `drift fix --revert`; the same name listed as a controller of that kind in
/// drift.yaml is refused again, and a listed controller of another kind is not one here.
#[test]
fn a_hand_edit_with_a_made_up_field_manager_is_unknown_and_reverted() {
    let w = World::start(
        false,
        "engine:\n  managers:\n    controllers:\n      - {manager: my-script, kinds: [Deployment]}\n",
    );
    let target_port =
        || w.json_of(&["get", "service", "web", "-n", "shop", "-o", "json"])["spec"]["ports"][0]["targetPort"].clone();
    w.kubectl(&[
        "patch",
        "service",
        "web",
        "-n",
        "shop",
        "--field-manager",
        "my-script",
        "--type",
        "json",
        "-p",
        r#"[{"op":"replace","path":"/spec/ports/0/targetPort","value":8081}]"#,
    ]);
    let object = w.json_of(&["get", "service", "web", "-n", "shop", "-o", "json", "--show-managed-fields"]);
    assert!(managers(&object).contains(&("my-script".into(), "Update".into())), "{:?}", managers(&object));
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 1, "{out}{err}");
    let id = w.id("Service", "spec.ports[port=80].targetPort");
    let drift = w.drift_json(&["drifts", "get", &id, "-o", "json"]);
    assert_eq!(
        (drift["changed_by"].as_str(), drift["classification"].as_str(), drift["recommended_action"].as_str()),
        (Some("my-script"), Some("unknown"), Some("suggest_revert")),
        "{drift}"
    );
    let (code, out, err) = w.drift(&["fix", &id, "--revert"]);
    assert_eq!(code, 0, "reverted, not refused: {out}{err}");
    assert_eq!(target_port(), json!(8080));
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(w.rows("resolved")[0]["resolution"], "reverted");

    // The same name on a Deployment, whose controller drift.yaml says it is: refused.
    w.kubectl(&[
        "patch",
        "deployment",
        "web",
        "-n",
        "shop",
        "--field-manager",
        "my-script",
        "--type",
        "json",
        "-p",
        r#"[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"nginx:1.99"}]"#,
    ]);
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 1, "{out}{err}");
    let image = w.rows("open").into_iter().find(|d| d["drift_type"] == "image_tag_drift").unwrap();
    assert_eq!(image["classification"], "controller_managed", "{image}");
    let (code, out, err) = w.drift(&["fix", &image["id"].to_string(), "--revert"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.starts_with("refused (controller_managed): "), "{err}");
}

/// Issue 37, item 2: self-heal reverts a hand edit made under a made-up field manager (its
/// default classifications are `manual_change` and `unknown`), as it reverts one by `kubectl
/// edit`.
#[test]
fn self_heal_reverts_a_hand_edit_with_a_made_up_field_manager() {
    let w = World::start(true, "heal:\n  grace: 1s\n  tick: 200ms\n");
    let serve = w.serve();
    wait_for(Duration::from_secs(60), "the first pass", || {
        (http(&serve.addr, "GET", "/ready", None).0 == 200).then_some(())
    });
    w.kubectl(&[
        "patch",
        "configmap",
        "settings",
        "-n",
        "shop",
        "--field-manager",
        "my-script",
        "-p",
        r#"{"data":{"mode":"slow"}}"#,
    ]);
    let reverted = wait_for(Duration::from_secs(30), "self-heal to revert the hand edit", || {
        let audit = get_json(&serve.addr, "/audit?action=revert&actor=heal&status=reverted");
        audit["items"].as_array().unwrap().first().cloned()
    });
    assert_eq!(w.mode(), "fast");
    let id = reverted["drift_id"].as_i64().unwrap();
    let drift = get_json(&serve.addr, &format!("/drifts/{id}"));
    assert_eq!((drift["changed_by"].as_str(), drift["classification"].as_str()), (Some("my-script"), Some("unknown")));
    serve.stop();
}

#[test]
fn a_waiver_written_in_git_since_the_scan_and_an_atomic_selector_refuse_the_revert() {
    let w = World::start(false, "");
    w.kubectl(&["scale", "deployment", "web", "-n", "shop", "--replicas=5"]);
    // A Service selector is replaced whole by server-side apply: reverting `app` alone would
    // drop the key added by hand with it.
    w.kubectl(&["patch", "service", "web", "-n", "shop", "-p", r#"{"spec":{"selector":{"app":"api","extra":"x"}}}"#]);
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 1, "{out}{err}");
    let app = w.id("Service", "spec.selector.app");
    let (code, out, err) = w.drift(&["fix", &app, "--revert"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("refused (dry_run_mismatch): "), "{err}");
    assert!(err.contains("/spec/selector/extra"), "it names what else would change: {err}");
    let selector = w.json_of(&["get", "service", "web", "-n", "shop", "-o", "json"])["spec"]["selector"].clone();
    assert_eq!(selector, json!({"app": "api", "extra": "x"}), "nothing changed");

    // A waiver merged in Git after the scan already protects the drift.
    let replicas = w.id("Deployment", "spec.replicas");
    let waived = common::DEPLOYMENT.replacen(
        "  labels: {app: web}\n",
        "  labels: {app: web}\n  annotations:\n    drift-detector.io/waivers: |\n      - path: spec.replicas\n        owner: alice\n        reason: load test\n        expires: 2099-12-31\n",
        1,
    );
    assert_ne!(waived, common::DEPLOYMENT);
    w.repo.write("apps/web/deployment.yaml", &waived);
    w.repo.commit("waive the replicas");
    let (code, out, err) = w.drift(&["fix", &replicas, "--revert"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("refused (waived): ") && err.contains("a waiver in Git by alice"), "{err}");
    assert_eq!(w.replicas(), 5);
}

#[test]
fn a_drift_gone_from_git_or_from_the_cluster_since_the_scan_is_not_reverted() {
    let w = World::start(false, "");
    w.edit_configmap("fast", "slow");
    w.kubectl(&["scale", "deployment", "web", "-n", "shop", "--replicas=5"]);
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 1, "{out}{err}");
    let cm = w.id("ConfigMap", "data.mode");
    let replicas = w.id("Deployment", "spec.replicas");
    // Put back by hand after the scan: nothing to do, the next scan resolves it.
    w.edit_configmap("slow", "fast");
    let (code, out, err) = w.drift(&["fix", &cm, "--revert"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("refused (no_longer_drifted): "), "{err}");
    // Git no longer declares the Deployment.
    w.repo.git(&["rm", "-q", "apps/web/deployment.yaml"]);
    w.repo.commit("the web Deployment leaves Git");
    let (code, out, err) = w.drift(&["fix", &replicas, "--revert"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("refused (not_in_git): "), "{err}");
    assert_eq!(w.replicas(), 5, "nothing was changed");
}

/// Regression (issue 31, item 4): a drift whose object was then deleted from the cluster was
/// closed as `reverted`; the object is gone, so it is `removed`, and the missing object is the
/// drift left open.
#[test]
fn a_drift_whose_object_is_deleted_from_the_cluster_is_resolved_as_removed_not_reverted() {
    let w = World::start(false, "");
    w.kubectl(&["scale", "deployment", "web", "-n", "shop", "--replicas=5"]);
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 1, "{out}{err}");
    let replicas = w.id("Deployment", "spec.replicas");
    w.kubectl(&["delete", "deployment", "web", "-n", "shop"]);
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 1, "the missing Deployment is a drift: {out}{err}");
    let resolved = w.rows("resolved");
    let row =
        resolved.iter().find(|d| d["id"].as_i64() == replicas.parse().ok()).unwrap_or_else(|| panic!("{resolved:?}"));
    assert_eq!(row["resolution"], "removed", "{row}");
    let open = w.id("Deployment", "");
    let got = w.drift_json(&["drifts", "get", &open, "-o", "json"]);
    assert_eq!(got["drift_type"], "missing_resource", "{got}");
    // Nothing to revert: the drift is closed, and says how.
    let (code, out, err) = w.drift(&["fix", &replicas, "--revert"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("refused (resolved): "), "{err}");
}

/// Regression (issue 31, item 4): an object defined as an item of a `kind: List` file was
/// refused as `not_in_git` (JSON) or unplaceable (YAML) when accepted; the item is its home and
/// is edited in place, and a comment on the key line of a block scalar stays. An accept of a
/// field someone wrote since the scan proposed that newer value under the old one's name; it is
/// refused as `stale`, naming both.
#[test]
fn an_object_of_a_list_file_is_accepted_into_its_item_and_keeps_its_block_scalar_comment() {
    let list = concat!(
        "# Settings of the shop, as one List.\n",
        "apiVersion: v1\n",
        "kind: List\n",
        "items:\n",
        "- apiVersion: v1\n",
        "  kind: ConfigMap\n",
        "  metadata:\n",
        "    name: scripts\n",
        "    namespace: shop\n",
        "  data:\n",
        "    start: |  # run by the init container\n",
        "      echo one\n",
        "- apiVersion: v1\n",
        "  kind: ConfigMap\n",
        "  metadata: {name: flags, namespace: shop}\n",
        "  data: {beta: \"off\"}  # until launch\n",
    );
    let json_list = "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",\n  \"items\": [\n    {\n      \"apiVersion\": \"v1\",\n      \"kind\": \"ConfigMap\",\n      \"metadata\": {\"name\": \"dumped\", \"namespace\": \"shop\"},\n      \"data\": {\"level\": \"info\"}\n    }\n  ]\n}\n";
    let files = [
        file("apps/namespace.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n"),
        file("apps/settings.yaml", list),
        file("apps/dumped.json", json_list),
    ];
    let w = World::with_files(&files, false, "    path: apps\n");
    w.kubectl(&["apply", "-f", w.repo.dir.join("apps/namespace.yaml").to_str().unwrap()]);
    w.kubectl(&["apply", "-f", w.repo.dir.join("apps/settings.yaml").to_str().unwrap()]);
    w.kubectl(&["apply", "-f", w.repo.dir.join("apps/dumped.json").to_str().unwrap()]);
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 0, "no drift yet: {out}{err}");
    w.kubectl(&[
        "patch",
        "configmap",
        "scripts",
        "-n",
        "shop",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"start":"echo two\n"}}"#,
    ]);
    w.kubectl(&[
        "patch",
        "configmap",
        "dumped",
        "-n",
        "shop",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"level":"debug"}}"#,
    ]);
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 1, "{out}{err}");

    let scripts = w.id("ConfigMap", "data.start");
    let (code, out, err) = w.drift(&["fix", &scripts, "--accept"]);
    assert_eq!(code, 0, "{out}{err}");
    let branch = out.split_whitespace().nth(1).unwrap().to_owned();
    let on_branch = w.repo.git(&["show", &format!("{branch}:apps/settings.yaml")]);
    assert_eq!(
        on_branch,
        list.replace("      echo one\n", "      echo two\n"),
        "the item edited in place, its comment kept"
    );

    // Someone writes the field after the scan: the accept does not propose a value nobody saw.
    let dumped = w.id("ConfigMap", "data.level");
    w.kubectl(&[
        "patch",
        "configmap",
        "dumped",
        "-n",
        "shop",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"level":"trace"}}"#,
    ]);
    let (code, out, err) = w.drift(&["fix", &dumped, "--accept"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("refused (stale): ") && err.contains("\"debug\"") && err.contains("\"trace\""), "{err}");
    let refused = w.drift_json(&["audit", "list", "--action", "accept", "--drift", &dumped, "-o", "json"]);
    let entry = &refused["items"][0];
    assert_eq!((entry["status"].as_str(), entry["detail"]["refusal"].as_str()), (Some("refused"), Some("stale")));
    assert_eq!((&entry["detail"]["planned"], &entry["detail"]["found"]), (&json!("debug"), &json!("trace")));
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 1, "{out}{err}");
    let (code, out, err) = w.drift(&["fix", &dumped, "--accept"]);
    assert_eq!(code, 0, "{out}{err}");
    let json_branch = out.split_whitespace().nth(1).unwrap().to_owned();
    let on_branch = w.repo.git(&["show", &format!("{json_branch}:apps/dumped.json")]);
    assert_eq!(on_branch, json_list.replace("\"info\"", "\"trace\""));

    w.repo.git(&["merge", "-q", "--ff-only", &branch]);
    w.repo.git(&["merge", "-q", "--no-edit", &json_branch]);
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 0, "{out}{err}");
    let resolved = w.rows("resolved");
    assert_eq!(resolved.len(), 2, "{resolved:?}");
    assert!(resolved.iter().all(|d| d["resolution"] == "accepted"), "{resolved:?}");
}

/// The watch's word for a deleted object is the scan's (issue 31, item 4): the deletion event
/// resolves the drift as `removed`, and the API says so.
#[test]
fn the_watch_resolves_a_drift_of_an_object_deleted_from_the_cluster_as_removed() {
    let w = World::start(true, "");
    let serve = w.serve();
    wait_for(Duration::from_secs(60), "the first pass", || {
        (http(&serve.addr, "GET", "/ready", None).0 == 200).then_some(())
    });
    w.edit_configmap("fast", "slow");
    let id = wait_for(Duration::from_secs(30), "the watch to record the drift", || {
        let page = get_json(&serve.addr, "/drifts?status=open");
        page["items"].as_array().unwrap().first().map(|d| d["id"].as_i64().unwrap())
    });
    w.kubectl(&["delete", "configmap", "settings", "-n", "shop"]);
    let resolved = wait_for(Duration::from_secs(30), "the watch to resolve the drift", || {
        let d = get_json(&serve.addr, &format!("/drifts/{id}"));
        (d["status"] == "resolved").then_some(d)
    });
    assert_eq!(resolved["resolution"], "removed", "{resolved}");
    let open = get_json(&serve.addr, "/drifts?status=open");
    let kinds: Vec<(&str, &str)> = open["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["resource_kind"].as_str().unwrap(), d["drift_type"].as_str().unwrap()))
        .collect();
    assert_eq!(kinds, [("ConfigMap", "missing_resource")], "{open}");
}

#[test]
fn the_api_reverts_with_a_write_token_and_the_watch_resolves_it_as_reverted() {
    let w = World::start(true, "");
    let serve = w.serve();
    wait_for(Duration::from_secs(60), "the first pass", || {
        (http(&serve.addr, "GET", "/ready", None).0 == 200).then_some(())
    });
    w.edit_configmap("fast", "slow");
    let id = wait_for(Duration::from_secs(30), "the watch to record the drift", || {
        let page = get_json(&serve.addr, "/drifts?status=open");
        page["items"].as_array().unwrap().first().map(|d| d["id"].as_i64().unwrap())
    });
    let path = format!("/drifts/{id}/revert");
    assert_eq!(http(&serve.addr, "POST", &path, None).0, 401);
    assert_eq!(http(&serve.addr, "POST", &format!("{path}?dry_run=maybe"), Some(TOKEN)).0, 400);
    let (status, body) = http(&serve.addr, "POST", &format!("{path}?dry_run=true"), Some(TOKEN));
    assert_eq!(status, 200, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["status"], "dry_run");
    assert_eq!(w.mode(), "slow");
    let (status, body) = http(&serve.addr, "POST", &path, Some(TOKEN));
    assert_eq!(status, 200, "{body}");
    let outcome: Value = serde_json::from_str(&body).unwrap();
    assert_eq!((outcome["status"].as_str(), outcome["actor"].as_str()), (Some("reverted"), Some("api")));
    assert_eq!(w.mode(), "fast");
    let resolved = wait_for(Duration::from_secs(30), "the watch to resolve the drift", || {
        let d = get_json(&serve.addr, &format!("/drifts/{id}"));
        (d["status"] == "resolved").then_some(d)
    });
    assert_eq!(resolved["resolution"], "reverted");
    // A second request (a retry whose answer was lost) finds the revert done: nothing is
    // written, and the answer names the earlier revert.
    let (status, body) = http(&serve.addr, "POST", &path, Some(TOKEN));
    assert_eq!(status, 200, "{body}");
    let again: Value = serde_json::from_str(&body).unwrap();
    let reverted = get_json(&serve.addr, &format!("/audit?action=revert&drift_id={id}&status=reverted"));
    assert_eq!((&again["status"], &again["earlier"]), (&json!("reverted"), &reverted["items"][0]["id"]));
    assert_eq!(w.mode(), "fast");
    assert_eq!(http(&serve.addr, "POST", "/drifts/424242/revert", Some(TOKEN)).0, 404);
    // Accepting through the API: a branch of the repository, written to the audit trail.
    w.kubectl(&["scale", "deployment", "web", "-n", "shop", "--replicas=5"]);
    let replicas = wait_for(Duration::from_secs(30), "the watch to record the replicas drift", || {
        let page = get_json(&serve.addr, "/drifts?status=open&kind=Deployment");
        page["items"].as_array().unwrap().first().map(|d| d["id"].as_i64().unwrap())
    });
    let (status, body) = http(&serve.addr, "POST", &format!("/drifts/{replicas}/accept"), Some(TOKEN));
    assert_eq!(status, 200, "{body}");
    let outcome: Value = serde_json::from_str(&body).unwrap();
    let branch = outcome["proposal"]["branch"].as_str().unwrap();
    assert_eq!(
        (outcome["drift_ids"].clone(), outcome["proposal"]["updated"].clone()),
        (json!([replicas]), json!(false))
    );
    assert!(w.repo.git(&["show", &format!("{branch}:apps/web/deployment.yaml")]).contains("replicas: 5"));
    let audit = get_json(&serve.addr, &format!("/audit?action=accept&drift_id={replicas}"));
    assert_eq!(audit["items"][0]["actor"], "api");
    assert_eq!(http(&serve.addr, "POST", &format!("/drifts/{replicas}/accept?x=1"), Some(TOKEN)).0, 400);
    serve.stop();
}

#[test]
fn self_heal_reverts_a_rejected_drift_at_once_and_waits_out_the_grace_period_for_the_rest() {
    let w = World::start(true, "heal:\n  grace: 1h\n  tick: 200ms\n");
    let serve = w.serve();
    wait_for(Duration::from_secs(60), "the first pass", || {
        (http(&serve.addr, "GET", "/ready", None).0 == 200).then_some(())
    });
    w.edit_configmap("fast", "slow");
    w.kubectl(&["scale", "deployment", "web", "-n", "shop", "--replicas=5"]);
    let open = |kind: &str| {
        let page = get_json(&serve.addr, "/drifts?status=open");
        page["items"].as_array().unwrap().iter().find(|d| d["resource_kind"] == kind).map(|d| d["id"].as_i64().unwrap())
    };
    let cm = wait_for(Duration::from_secs(30), "the ConfigMap drift", || open("ConfigMap"));
    let deployment = wait_for(Duration::from_secs(30), "the Deployment drift", || open("Deployment"));
    let (status, body) = http_json(&serve.addr, &format!("/drifts/{cm}/decisions"), &json!({"action": "reject"}));
    assert_eq!(status, 201, "{body}");
    wait_for(Duration::from_secs(30), "self-heal to revert the rejected drift", || (w.mode() == "fast").then_some(()));
    let resolved = wait_for(Duration::from_secs(30), "the watch to resolve it", || {
        let d = get_json(&serve.addr, &format!("/drifts/{cm}"));
        (d["status"] == "resolved").then_some(d)
    });
    assert_eq!(resolved["resolution"], "reverted");
    let audit = get_json(&serve.addr, "/audit?action=revert&actor=heal");
    let items = audit["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{items:?}");
    assert_eq!((items[0]["status"].as_str(), items[0]["drift_id"].as_i64()), (Some("reverted"), Some(cm)));
    assert_eq!((items[1]["status"].as_str(), &items[0]["attempt"]), (Some("attempted"), &items[1]["id"]));
    assert_eq!(items[0]["detail"]["rejected"], true);
    // An acknowledged drift (a decision too, of a HIGH manual change the scanner recommends to
    // revert) is not rejected: it waits out the grace period like the other one.
    w.kubectl(&["set", "image", "deployment/web", "-n", "shop", "web=nginx:1.99"]);
    let image = wait_for(Duration::from_secs(30), "the image drift", || {
        let page = get_json(&serve.addr, "/drifts?status=open&drift_type=image_tag_drift");
        page["items"].as_array().unwrap().first().map(|d| d["id"].as_i64().unwrap())
    });
    let (status, body) =
        http_json(&serve.addr, &format!("/drifts/{image}/decisions"), &json!({"action": "acknowledge"}));
    assert_eq!(status, 201, "{body}");
    // The other drifts are within their grace period: left alone.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(w.replicas(), 5);
    let deployment_now = w.json_of(&["get", "deployment", "web", "-n", "shop", "-o", "json"]);
    assert_eq!(deployment_now["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.99");
    assert_eq!(get_json(&serve.addr, &format!("/drifts/{deployment}"))["status"], "open");
    serve.stop();
}

#[test]
fn self_heal_in_dry_run_mode_only_writes_what_it_would_do_once_within_its_rate_limit() {
    let w = World::start(true, "heal:\n  dry_run: true\n  grace: 1s\n  tick: 200ms\n  max: 1\n  per: 1h\n");
    let serve = w.serve();
    wait_for(Duration::from_secs(60), "the first pass", || {
        (http(&serve.addr, "GET", "/ready", None).0 == 200).then_some(())
    });
    w.edit_configmap("fast", "slow");
    w.kubectl(&["scale", "deployment", "web", "-n", "shop", "--replicas=5"]);
    let entries = wait_for(Duration::from_secs(30), "a would_revert entry", || {
        let audit = get_json(&serve.addr, "/audit?action=revert&actor=heal");
        let items = audit["items"].as_array().unwrap().clone();
        (!items.is_empty()).then_some(items)
    });
    // Several more rounds: still one entry (one drift, once; the other is over the limit).
    std::thread::sleep(Duration::from_secs(2));
    let audit = get_json(&serve.addr, "/audit?action=revert&actor=heal");
    assert_eq!(audit["items"].as_array().unwrap().len(), 1, "{audit}");
    assert_eq!(entries[0]["status"], "would_revert");
    assert_eq!((w.mode().as_str(), w.replicas()), ("slow", 5), "nothing was changed");
    assert_eq!(get_json(&serve.addr, "/drifts?status=open")["items"].as_array().unwrap().len(), 2);
    serve.stop();
}

#[test]
fn self_heal_reverts_after_the_grace_period_up_to_its_rate_limit_whatever_it_refused() {
    // Three drifts past a grace period of 1 s and a budget of one revert an hour: one is
    // reverted, whatever self-heal refuses meanwhile (the Service selector's `app` is refused
    // while a hand-added key sits next to it: server-side apply would replace the map whole).
    let w = World::start(true, "heal:\n  grace: 1s\n  tick: 200ms\n  max: 1\n  per: 1h\n  classifications: []\n");
    let serve = w.serve();
    wait_for(Duration::from_secs(60), "the first pass", || {
        (http(&serve.addr, "GET", "/ready", None).0 == 200).then_some(())
    });
    w.kubectl(&["patch", "service", "web", "-n", "shop", "-p", r#"{"spec":{"selector":{"app":"api","extra":"x"}}}"#]);
    w.edit_configmap("fast", "slow");
    w.kubectl(&["scale", "deployment", "web", "-n", "shop", "--replicas=5"]);
    let reverted = wait_for(Duration::from_secs(30), "one revert by self-heal", || {
        let audit = get_json(&serve.addr, "/audit?action=revert&actor=heal&status=reverted");
        let items = audit["items"].as_array().unwrap().clone();
        (!items.is_empty()).then_some(items)
    });
    // Several grace periods later: still one revert, the other drift left by the limit.
    std::thread::sleep(Duration::from_secs(3));
    let audit = get_json(&serve.addr, "/audit?action=revert&actor=heal&status=reverted");
    assert_eq!(audit["items"].as_array().unwrap().len(), 1, "{audit}");
    let healed = reverted[0]["drift_id"].as_i64().unwrap();
    let kind = get_json(&serve.addr, &format!("/drifts/{healed}"))["resource_kind"].as_str().unwrap().to_owned();
    let selector = w.json_of(&["get", "service", "web", "-n", "shop", "-o", "json"])["spec"]["selector"].clone();
    let back = [w.mode() == "fast", w.replicas() == 2, selector != json!({"app": "api", "extra": "x"})];
    assert_eq!(back.iter().filter(|b| **b).count(), 1, "one object changed, the {kind}: {back:?}");
    serve.stop();
}

#[test]
fn a_live_change_accepted_into_git_is_a_branch_whose_merge_resolves_the_drift_as_accepted() {
    let w = World::start(false, "");
    let before = std::fs::read_to_string(w.repo.dir.join("apps/web/configmap.yaml")).unwrap();
    w.edit_configmap("fast", "slow");
    w.kubectl(&["scale", "deployment", "web", "-n", "shop", "--replicas=5"]);
    w.kubectl(&["patch", "secret", "creds", "-n", "shop", "-p", r#"{"stringData":{"password":"hand-set-secret-3"}}"#]);
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 1, "{out}{err}");
    // A Secret's value is never written to Git.
    let secret = w.id("Secret", "data.password");
    let (code, out, err) = w.drift(&["fix", &secret, "--accept"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.starts_with("refused (secret): "), "{err}");
    assert!(!err.contains("hand-set-secret-3"), "{err}");
    let cm = w.id("ConfigMap", "data.mode");
    let (code, out, err) = w.drift(&["fix", &cm, "--accept"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("branch drift/accept/configmap-settings-"), "{out}");
    assert!(out.contains(&format!("for ConfigMap shop/settings (drifts {cm})")), "{out}");
    let branch = out.split_whitespace().nth(1).unwrap().to_owned();
    // The file on the branch: the value edited in place, every other byte as it was.
    let on_branch = w.repo.git(&["show", &format!("{branch}:apps/web/configmap.yaml")]);
    assert_eq!(on_branch, before.replace("mode: fast", "mode: slow"));
    let changed = w.repo.git(&["diff", "--name-only", &format!("main...{branch}")]);
    assert_eq!(changed, "apps/web/configmap.yaml\n");
    // A second request updates the same branch.
    let (code, out, err) = w.drift(&["fix", &cm, "--accept"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with(&format!("branch {branch} updated")), "{out}");
    let audit = w.drift_json(&["audit", "list", "--action", "accept", "--drift", &cm, "-o", "json"]);
    let statuses: Vec<&str> =
        audit["items"].as_array().unwrap().iter().map(|e| e["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["updated", "attempted", "proposed", "attempted"]);
    let replicas = w.id("Deployment", "spec.replicas");
    w.repo.git(&["merge", "-q", "--ff-only", &branch]);
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 1, "the replicas and Secret drifts are left: {out}{err}");
    let resolved = w.rows("resolved");
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    assert_eq!((resolved[0]["id"].to_string(), resolved[0]["resolution"].as_str()), (cm, Some("accepted")));
    assert_eq!(w.id("Deployment", "spec.replicas"), replicas);

    // Two drifts of one object: the second request updates the first one's branch with both.
    w.kubectl(&["set", "image", "deployment/web", "-n", "shop", "web=nginx:1.29"]);
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 1, "{out}{err}");
    let (code, out, err) = w.drift(&["fix", &replicas, "--accept"]);
    assert_eq!(code, 0, "{out}{err}");
    let branch = out.split_whitespace().nth(1).unwrap().to_owned();
    let image = w.id("Deployment", "spec.template.spec.containers[name=web].image");
    let (code, out, err) = w.drift(&["fix", &image, "--accept"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with(&format!("branch {branch} updated for apps/Deployment shop/web (drifts ")), "{out}");
    assert!(out.contains(&replicas) && out.contains(&image), "both drifts in one change: {out}");
    let file = w.repo.git(&["show", &format!("{branch}:apps/web/deployment.yaml")]);
    assert!(file.contains("replicas: 5") && file.contains("image: nginx:1.29"), "{file}");
}

#[test]
fn a_secret_is_reverted_only_when_allowed_and_its_values_are_never_shown() {
    let w = World::start(false, "remediation:\n  allow_secrets: true\n");
    w.kubectl(&["patch", "secret", "creds", "-n", "shop", "-p", r#"{"stringData":{"password":"hand-set-secret-4"}}"#]);
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 1, "{out}{err}");
    let secret = w.id("Secret", "data.password");
    for args in [
        vec!["fix", secret.as_str(), "--revert", "--dry-run", "-o", "json"],
        vec!["fix", secret.as_str(), "--revert", "-o", "json"],
    ] {
        let (code, out, err) = w.drift(&args);
        assert_eq!(code, 0, "{out}{err}");
        for shown in [&out, &err] {
            for value in
                ["git-secret-value-1", "hand-set-secret-4", "Z2l0LXNlY3JldC12YWx1ZS0x", "aGFuZC1zZXQtc2VjcmV0LTQ="]
            {
                assert!(!shown.contains(value), "a Secret value in the output: {shown}");
            }
        }
        let outcome: Value = serde_json::from_str(&out).unwrap();
        assert!(outcome.get("plan").is_none(), "a Secret's plan is not shown: {outcome}");
    }
    let live = w.json_of(&["get", "secret", "creds", "-n", "shop", "-o", "json"]);
    assert_eq!(live["data"]["password"], "Z2l0LXNlY3JldC12YWx1ZS0x", "Git's value is back");
    let audit = w.drift_json(&["audit", "list", "--action", "revert", "-o", "json"]).to_string();
    assert!(!audit.contains("hand-set-secret-4") && !audit.contains("git-secret-value-1"), "{audit}");
}

/// `POST path` with the token and a JSON body.
fn http_json(addr: &str, path: &str, body: &Value) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let text = body.to_string();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

fn file(name: &str, text: &str) -> (String, String) {
    (name.to_owned(), text.to_owned())
}

const BASE_DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n        - name: web\n          image: nginx:1.27\n";

/// The drifts of two objects of a Kustomize overlay accepted into Git: the replicas where the
/// overlay's patch sets them, the ConfigMap's value in a new patch of the overlay; the base,
/// shared with another overlay, untouched; after the merge the scan resolves both as accepted.
#[test]
fn accepted_changes_of_a_kustomize_overlay_land_in_the_overlay_and_resolve_as_accepted_after_the_merge() {
    let replicas_patch =
        "# prod runs three\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n";
    let files = [
        file("base/kustomization.yaml", "resources:\n  - deployment.yaml\n  - configmap.yaml\n"),
        file("base/deployment.yaml", BASE_DEPLOYMENT),
        file(
            "base/configmap.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: fast\n",
        ),
        file(
            "overlays/prod/kustomization.yaml",
            "namespace: shop\nresources:\n  - ../../base\npatches:\n  - path: replicas.yaml\n",
        ),
        file("overlays/prod/replicas.yaml", replicas_patch),
        file("overlays/dev/kustomization.yaml", "namespace: dev\nresources:\n  - ../../base\n"),
    ];
    let w = World::with_files(&files, false, "    path: overlays/prod\n");
    w.kubectl(&["create", "namespace", "shop"]);
    w.kubectl(&["apply", "-k", w.repo.dir.join("overlays/prod").to_str().unwrap()]);
    w.edit_configmap("fast", "slow");
    w.kubectl(&["scale", "deployment", "web", "-n", "shop", "--replicas=5"]);
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 1, "{out}{err}");
    let mut branches = Vec::new();
    for (kind, path) in [("Deployment", "spec.replicas"), ("ConfigMap", "data.mode")] {
        let id = w.id(kind, path);
        let (code, out, err) = w.drift(&["fix", &id, "--accept"]);
        assert_eq!(code, 0, "{out}{err}");
        branches.push(out.split_whitespace().nth(1).unwrap().to_owned());
    }
    let show = |branch: &str, file: &str| w.repo.git(&["show", &format!("{branch}:{file}")]);
    assert_eq!(show(&branches[0], "overlays/prod/replicas.yaml"), replicas_patch.replace("replicas: 3", "replicas: 5"));
    assert_eq!(
        w.repo.git(&["diff", "--name-only", &format!("main...{}", branches[0])]),
        "overlays/prod/replicas.yaml\n"
    );
    let changed = w.repo.git(&["diff", "--name-only", &format!("main...{}", branches[1])]);
    assert!(!changed.contains("base/"), "the shared base is never edited: {changed}");
    assert!(changed.contains("overlays/prod/kustomization.yaml"), "{changed}");
    let kustomization = show(&branches[1], "overlays/prod/kustomization.yaml");
    assert!(
        kustomization.starts_with("namespace: shop\nresources:\n  - ../../base\npatches:\n  - path: replicas.yaml\n"),
        "{kustomization}"
    );
    for branch in &branches {
        w.repo.git(&["merge", "-q", "--no-edit", branch]);
    }
    let rendered = w.kubectl(&["kustomize", w.repo.dir.join("overlays/dev").to_str().unwrap()]);
    assert!(rendered.contains("mode: fast") && rendered.contains("replicas: 1"), "dev is as it was: {rendered}");
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 0, "nothing left after the merge: {out}{err}");
    let resolved = w.rows("resolved");
    assert_eq!(resolved.len(), 2, "{resolved:?}");
    assert!(resolved.iter().all(|d| d["resolution"] == "accepted"), "{resolved:?}");
}

fn helm_available(test: &str) -> bool {
    drift_testkit::charts::helm_available(test)
}

/// A Helm chart's replicas accepted into Git: the values key the value comes from, edited in
/// place in the values file the repository renders with; after the merge, accepted.
#[test]
fn an_accepted_change_of_a_helm_chart_lands_in_its_values_key_and_resolves_as_accepted() {
    if !helm_available("an_accepted_change_of_a_helm_chart_lands_in_its_values_key_and_resolves_as_accepted") {
        return;
    }
    let values = "# how many pods\nreplicaCount: 2 # keep two\nimage:\n  tag: \"1.27\"\n";
    let files = [
        file("chart/Chart.yaml", "apiVersion: v2\nname: web\nversion: 0.1.0\n"),
        file("chart/values.yaml", "replicaCount: 1\nimage:\n  tag: \"1.0\"\n"),
        file(
            "chart/templates/deployment.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  replicas: {{ .Values.replicaCount }}\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n        - name: web\n          image: \"nginx:{{ .Values.image.tag }}\"\n",
        ),
        file("prod-values.yaml", values),
    ];
    let w = World::with_files(
        &files,
        false,
        "    path: chart\n    renderer: helm\n    helm:\n      release_name: web\n      namespace: shop\n      values_files: [prod-values.yaml]\n",
    );
    w.kubectl(&["create", "namespace", "shop"]);
    let dir = &w.repo.dir;
    let out = Command::new("helm")
        .args(["template", "web", dir.join("chart").to_str().unwrap(), "--namespace", "shop", "-f"])
        .arg(dir.join("prod-values.yaml"))
        .env("HOME", w.home.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "helm template: {}", String::from_utf8_lossy(&out.stderr));
    let rendered = String::from_utf8(out.stdout).unwrap();
    let manifest = w.home.path().join("rendered.yaml");
    std::fs::write(&manifest, rendered).unwrap();
    w.kubectl(&["apply", "-n", "shop", "-f", manifest.to_str().unwrap()]);
    w.kubectl(&["scale", "deployment", "web", "-n", "shop", "--replicas=4"]);
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 1, "{out}{err}");
    let id = w.id("Deployment", "spec.replicas");
    let (code, out, err) = w.drift(&["fix", &id, "--accept"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("placed: spec.replicas: prod-values.yaml"), "{out}");
    let branch = out.split_whitespace().nth(1).unwrap().to_owned();
    assert_eq!(
        w.repo.git(&["show", &format!("{branch}:prod-values.yaml")]),
        values.replace("replicaCount: 2", "replicaCount: 4")
    );
    w.repo.git(&["merge", "-q", "--ff-only", &branch]);
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 0, "{out}{err}");
    let resolved = w.rows("resolved");
    assert_eq!((resolved.len(), resolved[0]["resolution"].as_str()), (1, Some("accepted")), "{resolved:?}");
}

/// `drift fix` builds only what it uses (issue 29): the store, the one repository the drift is
/// of, the cluster's client. A notifier whose secret is not in the environment and another
/// repository that cannot be reached, which `drift scan` needs, stop neither a revert nor an
/// accept.
#[test]
fn drift_fix_builds_only_the_repository_of_the_drift_and_no_notifier() {
    let w = World::start(false, "");
    w.edit_configmap("fast", "slow");
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 1, "{out}{err}");
    let cm = w.id("ConfigMap", "data.mode");
    let mut config = std::fs::read_to_string(&w.config).unwrap();
    config.push_str(&format!(
        "  - name: elsewhere\n    url: file://{}\n    ref: main\n\
         notify:\n  - name: chat\n    type: slack\n    url_env: FIX_CHAT_URL_NOT_SET\n",
        w.home.path().join("no-such-repository").display()
    ));
    std::fs::write(&w.config, config).unwrap();
    // What a scan needs is missing: the notifier's secret (and the other repository).
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("FIX_CHAT_URL_NOT_SET"), "{err}");
    // A fix needs neither.
    let (code, out, err) = w.drift(&["fix", &cm, "--revert", "--dry-run"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("dry run: the server would revert ConfigMap shop/settings"), "{out}");
    assert_eq!(w.mode(), "slow", "a dry run changes nothing");
    let (code, out, err) = w.drift(&["fix", &cm, "--accept"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("branch drift/accept/configmap-settings-"), "{out}");
    // A drift id the store does not have is said so, without building anything.
    let (code, out, err) = w.drift(&["fix", "999999", "--revert"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("999999"), "{err}");
}

/// An accept needs the repository, not the cluster (issue 29): without a kubeconfig it proposes
/// the values the last scan recorded, placed in Git's object as it is now, and says so; a revert
/// still needs the cluster.
#[test]
fn an_accept_without_a_kubeconfig_proposes_the_values_the_last_scan_recorded() {
    let w = World::start(false, "");
    let before = std::fs::read_to_string(w.repo.dir.join("apps/web/configmap.yaml")).unwrap();
    w.edit_configmap("fast", "slow");
    w.kubectl(&["set", "image", "deployment/web", "-n", "shop", "web=nginx:1.29"]);
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 1, "{out}{err}");
    let cm = w.id("ConfigMap", "data.mode");
    let image = w.id("Deployment", "spec.template.spec.containers[name=web].image");
    let config = std::fs::read_to_string(&w.config).unwrap();
    let kubeconfig = w.server.kubeconfig_path().display().to_string();
    let gone = w.home.path().join("no-kubeconfig").display().to_string();
    std::fs::write(&w.config, config.replace(&kubeconfig, &gone)).unwrap();
    let (code, out, err) = w.drift(&["fix", &cm, "--revert"]);
    assert_eq!(code, 2, "a revert writes to the cluster: {out}{err}");
    let (code, out, err) = w.drift(&["fix", &cm, "--accept"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("note: the cluster cannot be reached"), "{err}");
    assert!(err.contains("proposing the values the last scan recorded"), "{err}");
    let branch = out.split_whitespace().nth(1).unwrap().to_owned();
    let on_branch = w.repo.git(&["show", &format!("{branch}:apps/web/configmap.yaml")]);
    assert_eq!(on_branch, before.replace("mode: fast", "mode: slow"));
    // A keyed list item, found in Git's object by its key.
    let (code, out, err) = w.drift(&["fix", &image, "--accept"]);
    assert_eq!(code, 0, "{out}{err}");
    let branch = out.split_whitespace().nth(1).unwrap().to_owned();
    let file = w.repo.git(&["show", &format!("{branch}:apps/web/deployment.yaml")]);
    assert!(file.contains("image: nginx:1.29"), "{file}");
    // Once Git says what the cluster had, there is nothing left to accept.
    w.repo.write("apps/web/configmap.yaml", &before.replace("mode: fast", "mode: slow"));
    w.repo.commit("the mode in Git");
    let (code, out, err) = w.drift(&["fix", &cm, "--accept"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("refused (no_longer_drifted): "), "{err}");
}

/// The revert's dry run (the first request of a revert that changes something).
fn web_dry_run() -> FaultMatch {
    FaultMatch { dry_run: Some(true), ..web_write() }
}

/// Issue 31, item 2: a `drift fix` killed outright in the middle of a revert left no audit
/// entry at all. Now its `attempted` entry (written before it acts, naming the process) stays,
/// and the next `drift fix` on the host sees that the process is gone and closes it as
/// `interrupted`, then acts.
#[test]
fn a_revert_killed_mid_action_leaves_its_attempt_and_the_next_start_closes_it_as_interrupted() {
    let w = World::start(false, "");
    w.kubectl(&["scale", "deployment", "web", "-n", "shop", "--replicas=5"]);
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 1, "{out}{err}");
    let id = w.id("Deployment", "spec.replicas");
    let mut held = w.drift_holding(&["fix", &id, "--revert"], web_dry_run());
    let pid = held.pid();
    held.child.kill().unwrap();
    held.child.wait().unwrap();
    w.server.release_held();
    let entries = w.audit_of("revert", &id);
    assert_eq!(entries.len(), 1, "{entries:?}");
    let (attempted, status, attempt, detail) = &entries[0];
    assert_eq!((status.as_str(), *attempt), ("attempted", None));
    assert_eq!((&detail["runner"]["pid"], &detail["planned"], &detail["written"]), (&json!(pid), &json!(5), &json!(2)));
    assert_eq!(detail["path"], "spec.replicas");

    let (code, out, err) = w.drift(&["fix", &id, "--revert"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains("note: 1 action(s) of a process that stopped before they finished are recorded as interrupted"),
        "{err}"
    );
    assert_eq!(w.replicas(), 2);
    assert_eq!(writes_of_web(&w), 1, "the killed revert wrote nothing");
    let entries = w.audit_of("revert", &id);
    let statuses: Vec<(&str, Option<i64>)> = entries.iter().map(|(_, s, a, _)| (s.as_str(), *a)).collect();
    let second = entries[1].0;
    assert_eq!(
        statuses,
        [("reverted", Some(second)), ("attempted", None), ("interrupted", Some(*attempted)), ("attempted", None)]
    );
    let reason = entries[2].3["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("pid {pid} on ")) && reason.contains("stopped before the action finished"),
        "{reason}"
    );
    assert_eq!(entries[2].3["planned"], json!(5), "what it was about");
    // Nothing is left to close; a retry (an answer that was lost) finds the revert done.
    let (code, out, err) = w.drift(&["fix", &id, "--revert"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!err.contains("recorded as interrupted"), "{err}");
    let reverted = entries[0].0;
    assert!(
        out.starts_with(&format!(
            "already reverted apps/Deployment shop/web (spec.replicas) for drift {id} by carol (audit entry {reverted}); nothing was written"
        )),
        "{out}"
    );
    assert_eq!(writes_of_web(&w), 1);
    let entries = w.audit_of("revert", &id);
    assert_eq!((entries[0].1.as_str(), &entries[0].3["earlier"]), ("already_reverted", &json!(reverted)));
}

/// Issue 31, item 2: SIGTERM lets a running revert finish within the shutdown grace (it was
/// killed with its work half done); a second signal stops it at once, recorded as
/// `interrupted`.
#[test]
fn sigterm_lets_a_revert_finish_within_the_grace_and_a_second_signal_records_it_as_interrupted() {
    let w = World::start(false, "");
    w.kubectl(&["scale", "deployment", "web", "-n", "shop", "--replicas=5"]);
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 1, "{out}{err}");
    let id = w.id("Deployment", "spec.replicas");
    let held = w.drift_holding(&["fix", &id, "--revert"], web_write());
    held.signal("TERM");
    held.wait_for_stderr("stopping: the action gets 20s to finish");
    w.server.release_held();
    let (code, out, err) = held.finish();
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("reverted apps/Deployment shop/web (spec.replicas)"), "{out}");
    assert_eq!(w.replicas(), 2);
    let entries = w.audit_of("revert", &id);
    let statuses: Vec<&str> = entries.iter().map(|(_, s, _, _)| s.as_str()).collect();
    assert_eq!(statuses, ["reverted", "attempted"]);
    assert_eq!(entries[0].2, Some(entries[1].0), "the outcome names its attempt");

    w.kubectl(&["scale", "deployment", "web", "-n", "shop", "--replicas=6"]);
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 1, "{out}{err}");
    let id = w.id("Deployment", "spec.replicas");
    let held = w.drift_holding(&["fix", &id, "--revert"], web_write());
    held.signal("TERM");
    held.wait_for_stderr("stopping:");
    held.signal("INT");
    let (code, out, err) = held.finish();
    w.server.release_held();
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert!(err.contains("the process was stopped (SIGTERM or SIGINT)"), "{err}");
    let entries = w.audit_of("revert", &id);
    let (_, status, attempt, detail) = &entries[0];
    assert_eq!((status.as_str(), *attempt), ("interrupted", Some(entries[1].0)), "{entries:?}");
    assert!(detail["reason"].as_str().unwrap().contains("did not finish within the shutdown grace"), "{detail}");
    let (code, _, err) = w.drift(&["fix", &id, "--revert"]);
    assert!(!err.contains("recorded as interrupted"), "closed already: {err}");
    assert!(code == 0 || err.contains("no_longer_drifted") || err.contains("already"), "{err}");
}

/// Issue 31, item 2: a `drift fix --accept` killed before it pushed leaves its `attempted`
/// entry with the branch it was to push, and no branch; the next start closes it as
/// `interrupted` naming the branch, then the accept pushes it.
#[test]
fn an_accept_killed_mid_action_pushes_nothing_and_is_closed_as_interrupted_with_its_branch() {
    let w = World::start(false, "");
    w.edit_configmap("fast", "slow");
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 1, "{out}{err}");
    let id = w.id("ConfigMap", "data.mode");
    let read = FaultMatch {
        verb: Some("get".into()),
        resource: Some("configmaps".into()),
        name: Some("settings".into()),
        ..FaultMatch::default()
    };
    let mut held = w.drift_holding(&["fix", &id, "--accept"], read);
    held.child.kill().unwrap();
    held.child.wait().unwrap();
    w.server.release_held();
    let entries = w.audit_of("accept", &id);
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0].1, "attempted");
    let branch = entries[0].3["branch"].as_str().unwrap().to_owned();
    assert!(branch.starts_with("drift/accept/configmap-settings-"), "{branch}");
    assert_eq!(w.repo.git(&["branch", "--list", "drift/*"]), "", "nothing was pushed");

    let (code, out, err) = w.drift(&["fix", &id, "--accept"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with(&format!("branch {branch} pushed")), "{out}");
    let entries = w.audit_of("accept", &id);
    let statuses: Vec<&str> = entries.iter().map(|(_, s, _, _)| s.as_str()).collect();
    assert_eq!(statuses, ["proposed", "attempted", "interrupted", "attempted"]);
    assert_eq!(entries[2].3["branch"], json!(branch), "the interrupted entry names the branch to look at");
    assert!(entries[2].3["look"].as_str().unwrap().contains("the branch may have been pushed"));
}

/// Issue 31, item 2: the git processes of an accept belong to it. A push held by the
/// repository's pre-receive hook outlasts `remediation.timeout`: the accept is given up and
/// recorded as `failed`, and its `git push` is stopped with it.
#[test]
fn an_accept_given_up_at_its_timeout_stops_its_git_push() {
    let w = World::start(false, "remediation:\n  timeout: 2s\n");
    let marker = w.hold_pushes();
    w.edit_configmap("fast", "slow");
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 1, "{out}{err}");
    let id = w.id("ConfigMap", "data.mode");
    let child = w
        .drift_command(&["fix", &id, "--accept"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (code, out, err) = finished(child.wait_with_output().unwrap());
    assert!(marker.exists(), "the push reached the hook");
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert!(err.contains("did not finish within 2s (remediation.timeout)"), "{err}");
    // No `git push` to the repository is left running: it was killed with the action (an
    // orphan would live on under another parent until the hook gives up, 10 s later).
    let pushes = pushes_to(&w.repo.dir);
    assert!(pushes.is_empty(), "{pushes:?}");
    let entries = w.audit_of("accept", &id);
    let statuses: Vec<(&str, Option<i64>)> = entries.iter().map(|(_, s, a, _)| (s.as_str(), *a)).collect();
    assert_eq!(statuses, [("failed", Some(entries[1].0)), ("attempted", None)]);
}

/// The command lines of the `git push` processes to the repository at `dir` running now.
fn pushes_to(dir: &std::path::Path) -> Vec<String> {
    let repo = dir.display().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| {
            let cmdline = std::fs::read(e.ok()?.path().join("cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            (cmdline.contains("push --porcelain") && cmdline.contains(&repo)).then_some(cmdline)
        })
        .collect()
}

/// Issue 31, item 2: a `drift fix --accept` killed outright while its push is held by the
/// repository's pre-receive hook takes the push with it (`setpriv --pdeathsig`), and leaves
/// its `attempted` entry.
#[test]
fn a_killed_accept_takes_its_git_push_with_it() {
    if !Command::new("setpriv").args(["--pdeathsig", "KILL", "--", "true"]).status().is_ok_and(|s| s.success()) {
        assert!(std::env::var_os("DRIFT_REQUIRE_TOOLS").is_none(), "setpriv (util-linux) is required");
        eprintln!("skipped: no setpriv with --pdeathsig here");
        return;
    }
    let w = World::start(false, "");
    let marker = w.hold_pushes();
    w.edit_configmap("fast", "slow");
    let (code, out, err) = w.drift(&["scan"]);
    assert_eq!(code, 1, "{out}{err}");
    let id = w.id("ConfigMap", "data.mode");
    let mut child = w
        .drift_command(&["fix", &id, "--accept"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for(Duration::from_secs(30), "the push to reach the hook", || marker.exists().then_some(()));
    assert_eq!(pushes_to(&w.repo.dir).len(), 1, "the push runs");
    child.kill().unwrap();
    child.wait().unwrap();
    wait_for(Duration::from_secs(5), "the push to end with its process", || {
        pushes_to(&w.repo.dir).is_empty().then_some(())
    });
    let entries = w.audit_of("accept", &id);
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0].1, "attempted");
}

/// Issue 31: a client that goes away while its revert is in flight (a proxy's timeout) does not
/// stop the revert: it finishes and is recorded, and the client's retry is answered with the
/// revert done, not refused as `no_longer_drifted`.
#[test]
fn a_revert_whose_client_went_away_finishes_and_the_retry_is_answered_done() {
    use std::io::Write;
    let w = World::start(false, "");
    let serve = w.serve();
    wait_for(Duration::from_secs(60), "the first pass", || {
        (http(&serve.addr, "GET", "/ready", None).0 == 200).then_some(())
    });
    w.kubectl(&["scale", "deployment", "web", "-n", "shop", "--replicas=5"]);
    assert_eq!(http(&serve.addr, "POST", "/scan?wait=true", Some(TOKEN)).0, 200);
    let id = w.id("Deployment", "spec.replicas");
    let held = w.server.holds().arrived;
    w.server.set_faults(Faults {
        faults: vec![FaultRule { matcher: web_write(), action: FaultAction::Hold, times: Some(1) }],
    });
    let mut client = std::net::TcpStream::connect(&serve.addr).unwrap();
    write!(
        client,
        "POST /drifts/{id}/revert HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 0\r\n\r\n",
        addr = serve.addr
    )
    .unwrap();
    w.server.wait_held(held + 1);
    drop(client);
    w.server.clear_faults();
    w.server.release_held();
    let entries = wait_for(Duration::from_secs(30), "the revert's outcome", || {
        let entries = w.audit_of("revert", &id);
        (entries.first().is_some_and(|e| e.1 != "attempted")).then_some(entries)
    });
    assert_eq!(entries[0].1, "reverted", "{entries:?}");
    assert_eq!(w.replicas(), 2);
    let (status, body) = http(&serve.addr, "POST", &format!("/drifts/{id}/revert"), Some(TOKEN));
    assert_eq!(status, 200, "{body}");
    let outcome: Value = serde_json::from_str(&body).unwrap();
    assert_eq!((&outcome["status"], &outcome["earlier"]), (&json!("reverted"), &json!(entries[0].0)));
    assert_eq!(writes_of_web(&w), 1, "the retry wrote nothing");
    serve.stop();
}

/// Issue 34, item 1: automatic pull requests (`accept.auto:`). A drift a rule matches is
/// proposed once, by itself, as a branch of its object; changed again, the same branch is
/// updated (never a second one); rounds with nothing new propose nothing; the merge resolves it
/// as `accepted`. A drift no rule matches is never proposed.
#[test]
fn automatic_pull_requests_propose_a_matching_drift_once_update_it_as_it_changes_and_the_merge_resolves_it() {
    let w = World::start(
        true,
        "accept:\n  auto:\n    tick: 200ms\n    rules:\n      - drift_types: [replicas_drift]\n        min_age: 0s\n",
    );
    let serve = w.serve();
    wait_for(Duration::from_secs(60), "the first pass", || {
        (http(&serve.addr, "GET", "/ready", None).0 == 200).then_some(())
    });
    let proposals = |status: &str| -> Vec<Value> {
        let audit = get_json(&serve.addr, &format!("/audit?action=accept&actor=auto&status={status}"));
        audit["items"].as_array().unwrap().clone()
    };
    let branches = || -> Vec<String> {
        let out = w.repo.git(&["for-each-ref", "--format=%(refname:short)", "refs/heads/drift/"]);
        out.lines().map(str::to_owned).collect()
    };
    // Matches (replicas, by hand); the ConfigMap's drift matches no rule.
    w.kubectl(&["patch", "deployment", "web", "-n", "shop", "-p", r#"{"spec":{"replicas":5}}"#]);
    w.edit_configmap("fast", "slow");
    let proposed =
        wait_for(Duration::from_secs(30), "an automatic pull request", || proposals("proposed").first().cloned());
    let branch = proposed["detail"]["branch"].as_str().unwrap().to_owned();
    assert!(branch.starts_with("drift/accept/deployment-web-"), "{proposed}");
    assert_eq!(branches().as_slice(), std::slice::from_ref(&branch));
    let file = |rev: &str| w.repo.git(&["show", &format!("{rev}:apps/web/deployment.yaml")]);
    assert!(file(&branch).contains("replicas: 5"), "{}", file(&branch));
    let replicas = w.id("Deployment", "spec.replicas");
    assert_eq!(proposed["drift_id"].to_string(), replicas);

    // Changed again: the same branch, updated.
    w.kubectl(&["patch", "deployment", "web", "-n", "shop", "-p", r#"{"spec":{"replicas":6}}"#]);
    wait_for(Duration::from_secs(30), "the automatic pull request updated", || proposals("updated").first().cloned());
    assert_eq!(branches().as_slice(), std::slice::from_ref(&branch), "one branch for the object, never a second one");
    assert!(file(&branch).contains("replicas: 6"), "{}", file(&branch));
    // Rounds with nothing new propose nothing (ten ticks).
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!((proposals("proposed").len(), proposals("updated").len()), (1, 1));
    let all = get_json(&serve.addr, "/audit?action=accept&actor=auto");
    let ids: Vec<i64> = all["items"].as_array().unwrap().iter().map(|e| e["drift_id"].as_i64().unwrap()).collect();
    assert!(ids.iter().all(|id| id.to_string() == replicas), "only the matching drift was proposed: {all}");

    // The merge resolves it as accepted.
    w.repo.git(&["merge", "-q", "--ff-only", &branch]);
    let (status, body) = http(&serve.addr, "POST", "/scan?wait=true", Some(TOKEN));
    assert_eq!(status, 200, "{body}");
    let resolved = w.rows("resolved");
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    assert_eq!((resolved[0]["id"].to_string(), resolved[0]["resolution"].as_str()), (replicas, Some("accepted")));
    w.id("ConfigMap", "data.mode");
    serve.stop();
}
