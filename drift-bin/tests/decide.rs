//! `drift decide`, `drift drifts get` and `drift audit list` as a user runs them, on drifts that
//! `drift scan` recorded in SQLite from a snapshot of the cluster.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

/// Two ConfigMaps of one namespace whose `mode` someone changed with `kubectl edit` five minutes
/// apart: two similar drifts.
const DESIRED: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: shop}\ndata: {mode: fast}\n---\n\
apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: shop}\ndata: {mode: fast}\n";

fn live_item(name: &str, time: &str) -> String {
    format!(
        "  - apiVersion: v1\n    kind: ConfigMap\n    metadata:\n      name: {name}\n      namespace: shop\n      managedFields:\n\
         \x20       - {{manager: kubectl-edit, operation: Update, apiVersion: v1, time: \"{time}\", fieldsType: FieldsV1, fieldsV1: {{\"f:data\": {{\"f:mode\": {{}}}}}}}}\n\
         \x20   data: {{mode: slow}}\n"
    )
}

struct Setup {
    dir: tempfile::TempDir,
    config: PathBuf,
}

impl Setup {
    /// The files, a configuration, and one `drift scan` recording both drifts.
    fn scanned() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("desired")).unwrap();
        std::fs::create_dir_all(d.join("live")).unwrap();
        std::fs::write(d.join("desired/settings.yaml"), DESIRED).unwrap();
        let live = format!(
            "apiVersion: v1\nkind: List\nitems:\n{}{}",
            live_item("a", "2026-11-30T10:00:00Z"),
            live_item("b", "2026-11-30T10:05:00Z")
        );
        std::fs::write(d.join("live/cluster.yaml"), live).unwrap();
        let config = d.join("drift.yaml");
        std::fs::write(
            &config,
            format!(
                "cluster: test\ndatabase: sqlite://{0}/drift.db\nrepositories:\n  - name: shop\n    url: {0}/desired\nlive:\n  snapshot: {0}/live\n",
                d.display()
            ),
        )
        .unwrap();
        let s = Setup { dir, config };
        let (code, out, err) = s.drift(&["scan"]);
        assert_eq!(code, 1, "two drifts found: {out}{err}");
        s
    }

    /// Runs `drift ARGS --config FILE` with `USER` set to `user` (or unset).
    fn drift_as(&self, args: &[&str], user: Option<&str>) -> (i32, String, String) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_drift"));
        cmd.args(args).arg("--config").arg(&self.config).current_dir(self.dir.path()).env("NO_COLOR", "1");
        match user {
            Some(u) => cmd.env("USER", u),
            None => cmd.env_remove("USER"),
        };
        let out = cmd.output().unwrap();
        (out.status.code().unwrap(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
    }

    /// Runs `drift ARGS --config FILE` as user carol.
    fn drift(&self, args: &[&str]) -> (i32, String, String) {
        self.drift_as(args, Some("carol"))
    }

    fn json(&self, args: &[&str]) -> Value {
        let (code, out, err) = self.drift(args);
        assert_eq!(code, 0, "{args:?}: {err}");
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
    }

    /// The id of ConfigMap `name`'s drift.
    fn id(&self, name: &str) -> String {
        let page = self.json(&["drifts", "list", "--json"]);
        let d = page["items"].as_array().unwrap().iter().find(|d| d["resource_name"] == name).unwrap();
        d["id"].as_i64().unwrap().to_string()
    }
}

#[test]
fn a_waiver_decided_from_the_cli_shows_on_the_drift_and_in_the_audit_trail() {
    let s = Setup::scanned();
    let a = s.id("a");
    let (code, out, err) = s.drift(&[
        "decide",
        &a,
        "accept",
        "--comment",
        "slow mode during the sale",
        "--expires",
        "3d",
        "--as",
        "alice",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with(&format!("decision 1 on drift {a}: accept by alice at ")), "{out}");
    assert!(out.contains("comment: slow mode during the sale") && out.contains("waived until: "), "{out}");

    let (code, out, err) = s.drift(&["drifts", "get", &a]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with(&format!("drift {a}  waived  MEDIUM  configmap_drift\n")), "{out}");
    assert!(out.contains("decided by human"), "{out}");
    assert!(out.contains("accept       alice  until ") && out.contains("\"slow mode during the sale\""), "{out}");
    assert!(out.contains("learned:    nothing yet"), "its own decision is left out: {out}");
    let v = s.json(&["drifts", "get", &a, "-o", "json"]);
    assert_eq!(v["status"], "waived");
    assert_eq!(v["decisions"][0]["actor"], "alice");
    assert_eq!(v["decisions"][0]["action"], "accept");
    let decided: chrono::DateTime<chrono::Utc> = v["decisions"][0]["decided_at"].as_str().unwrap().parse().unwrap();
    let until: chrono::DateTime<chrono::Utc> = v["waived_until"].as_str().unwrap().parse().unwrap();
    assert_eq!(until - decided, chrono::Duration::days(3), "--expires 3d");
    assert_eq!(v["notifications"], Value::Array(vec![]));

    // The similar drift of the other ConfigMap learns from it.
    let b = s.id("b");
    let (_, out, _) = s.drift(&["drifts", "get", &b]);
    assert!(out.contains("learned:    likely intentional (67%, 1 of 1 similar changes accepted)"), "{out}");
    assert!(out.contains("decisions: none"), "{out}");

    let (code, out, err) = s.drift(&["audit", "list"]);
    assert_eq!(code, 0, "{err}");
    let decision_line = out.lines().find(|l| l.contains(" decision ")).unwrap_or_else(|| panic!("{out}"));
    assert!(decision_line.contains("alice") && decision_line.contains("accept"), "{decision_line}");
    assert!(decision_line.contains("comment: slow mode during the sale"), "{decision_line}");
    assert!(out.lines().any(|l| l.contains(" scan ") && l.contains("scanner")), "{out}");
    let page = s.json(&["audit", "list", "--action", "decision", "--output", "json"]);
    let items = page["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["actor"], "alice");
    assert_eq!(items[0]["drift_id"].to_string(), a);
    assert_eq!(s.json(&["audit", "list", "--actor", "bob", "-o", "json"])["items"], Value::Array(vec![]));
    assert_eq!(s.json(&["audit", "list", "--drift", &b, "-o", "json"])["items"], Value::Array(vec![]));
    assert_eq!(s.json(&["audit", "list", "--since", "1h", "-o", "json"])["items"].as_array().unwrap().len(), 2);
    let page = s.json(&["audit", "list", "--limit", "1", "-o", "json"]);
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    let next = page["next"].as_i64().unwrap().to_string();
    let rest = s.json(&["audit", "list", "--after", &next, "-o", "json"]);
    assert_eq!(rest["items"][0]["action"], "scan");
}

#[test]
fn the_actor_is_the_user_and_acknowledge_and_reject_follow() {
    let s = Setup::scanned();
    let b = s.id("b");
    let (code, out, err) = s.drift_as(&["decide", &b, "ack", "-o", "json"], Some("dave"));
    assert_eq!(code, 0, "{err}");
    let d: Value = serde_json::from_str(&out).unwrap();
    assert_eq!((d["action"].as_str(), d["actor"].as_str()), (Some("acknowledge"), Some("dave")), "{out}");
    let (code, out, err) = s.drift_as(&["decide", &b, "reject", "--comment", "put it back"], None);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(": reject by cli at "), "without $USER: {out}");
    let v = s.json(&["drifts", "get", &b, "--output", "json"]);
    assert_eq!(v["status"], "open");
    assert_eq!(v["recommended_action"], "suggest_revert");
    assert!(v["acknowledged_at"].is_string());
    let actors: Vec<&str> = v["decisions"].as_array().unwrap().iter().map(|d| d["actor"].as_str().unwrap()).collect();
    assert_eq!(actors, ["dave", "cli"]);
}

#[test]
fn usage_errors_are_2_and_refusals_1() {
    let s = Setup::scanned();
    let a = s.id("a");
    // A bad --expires names the flag; nothing is recorded.
    let (code, _, err) = s.drift(&["decide", &a, "accept", "--comment", "x", "--expires", "soon"]);
    assert_eq!(code, 2);
    assert!(err.contains("--expires") && err.contains("7d"), "{err}");
    let (code, _, err) = s.drift(&["decide", &a, "accept", "--comment", "x", "--expires", "400d"]);
    assert_eq!(code, 2);
    assert!(err.contains("366"), "{err}");
    let (code, _, err) = s.drift(&["decide", &a, "accept"]);
    assert_eq!(code, 2);
    assert!(err.contains("comment"), "{err}");
    let (code, _, err) = s.drift(&["decide", &a, "approve"]);
    assert_eq!(code, 2);
    assert!(err.contains("acknowledge, accept, reject"), "{err}");
    let (code, _, err) = s.drift(&["decide", "0", "ack"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = s.drift(&["audit", "list", "--action", "vote"]);
    assert_eq!(code, 2);
    assert!(err.contains("--action"), "{err}");
    let (code, _, err) = s.drift(&["audit", "list", "--since", "yesterday"]);
    assert_eq!(code, 2);
    assert!(err.contains("--since"), "{err}");
    assert_eq!(s.json(&["audit", "list", "--action", "decision", "-o", "json"])["items"], Value::Array(vec![]));

    // Refused: no such drift, or a resolved one.
    let (code, _, err) = s.drift(&["decide", "999", "ack"]);
    assert_eq!(code, 1);
    assert!(err.contains("no drift with id 999"), "{err}");
    let (code, _, err) = s.drift(&["drifts", "get", "999"]);
    assert_eq!(code, 1);
    assert!(err.contains("no drift with id 999"), "{err}");
    // Git takes the cluster's value of a: its drift is resolved.
    std::fs::write(s.dir.path().join("desired/settings.yaml"), DESIRED.replacen("mode: fast", "mode: slow", 1))
        .unwrap();
    let (code, out, err) = s.drift(&["scan"]);
    assert_eq!(code, 1, "b is still drifted: {out}{err}");
    assert_eq!(s.json(&["drifts", "get", &a, "-o", "json"])["status"], "resolved");
    let (code, _, err) = s.drift(&["decide", &a, "ack"]);
    assert_eq!(code, 1);
    assert!(err.contains("resolved"), "{err}");
}
