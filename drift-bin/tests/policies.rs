//! `drift diff --policies` on manifests written here (docs/policies.md): findings in a section of
//! their own in the table and under `findings` in JSON, on both sides, apart from the drifts and
//! their exit code; `--policy-config` changes severities, sides and rules; bad settings are
//! refused with a clear error; `drift config check` validates `policies:`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// Git's objects: a Deployment whose pod runs as root (no securityContext), a DaemonSet on the
/// host's network with a privileged container pinned by digest, and a ConfigMap.
const DESIRED: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels: {app: web, team: storefront}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: nginx:1.27
          resources:
            requests: {cpu: 100m, memory: 64Mi}
            limits: {cpu: 500m, memory: 128Mi}
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
  namespace: shop
  labels: {app: agent, team: platform}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      hostNetwork: true
      securityContext: {runAsUser: 1000}
      containers:
        - name: agent
          image: registry.example:5000/agent@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
          securityContext: {privileged: true}
          resources:
            requests: {cpu: 10m, memory: 32Mi}
            limits: {cpu: 100m, memory: 64Mi}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: shop
data:
  mode: fast
"#;

struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Files {
        Files { dir: tempfile::tempdir().unwrap() }
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

fn drift(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_drift")).args(args).env("NO_COLOR", "1").output().unwrap()
}

fn diff(desired: &Path, live: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["diff", "--desired", desired.to_str().unwrap(), "--live", live.to_str().unwrap()];
    args.extend(extra);
    drift(&args)
}

fn json(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)))
}

/// (object name, side, rule, path, container) of every finding of a JSON document.
fn found(doc: &Value) -> Vec<(String, String, String, String, Option<String>)> {
    doc["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("no findings in {doc}"))
        .iter()
        .map(|f| {
            assert_eq!(f["finding_type"], "policy_violation", "{f}");
            (
                f["resource"]["name"].as_str().unwrap().to_owned(),
                f["side"].as_str().unwrap().to_owned(),
                f["rule"].as_str().unwrap().to_owned(),
                f["path"].as_str().unwrap().to_owned(),
                f["container"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

fn row(
    name: &str,
    side: &str,
    rule: &str,
    path: &str,
    container: Option<&str>,
) -> (String, String, String, String, Option<String>) {
    (name.into(), side.into(), rule.into(), path.into(), container.map(str::to_owned))
}

#[test]
fn findings_of_both_sides_are_reported_apart_and_do_not_change_the_exit_code() {
    let files = Files::new();
    let desired = files.write("desired.yaml", DESIRED);
    // The cluster runs what Git says: no drift, findings only.
    let same = files.write("same.yaml", DESIRED);
    let out = diff(&desired, &same, &["--policies", "-o", "json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "findings alone leave the exit code at 0: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json(&out);
    assert_eq!(doc["drifts"], Value::Array(vec![]));
    assert_eq!(doc["summary"]["drifts"], 0, "findings are not counted as drifts");
    let pod = "/spec/template/spec";
    let mut expected = Vec::new();
    for side in ["desired", "live"] {
        expected.push(row(
            "agent",
            side,
            "privileged",
            &format!("{pod}/containers/0/securityContext/privileged"),
            Some("agent"),
        ));
        expected.push(row("agent", side, "host-network", &format!("{pod}/hostNetwork"), None));
    }
    for side in ["desired", "live"] {
        expected.push(row(
            "web",
            side,
            "run-as-root",
            &format!("{pod}/containers/0/securityContext/runAsNonRoot"),
            Some("web"),
        ));
    }
    let mut got = found(&doc);
    got.sort();
    expected.sort();
    assert_eq!(got, expected);
    assert_eq!(doc["findings_summary"]["findings"], 6);
    assert_eq!(doc["findings_summary"]["by_severity"], serde_json::json!({"HIGH": 4, "MEDIUM": 2}));

    // Someone sets `latest` by hand: a drift (exit 1) and a live image-tag finding.
    let live = files.write("live.yaml", &DESIRED.replace("image: nginx:1.27", "image: nginx:latest"));
    let out = diff(&desired, &live, &["--policies", "-o", "json"]);
    assert_eq!(out.status.code(), Some(1), "the drift sets the exit code");
    let doc = json(&out);
    assert_eq!(doc["drifts"].as_array().unwrap().len(), 1);
    assert_eq!(doc["drifts"][0]["drift_type"], "image_tag_drift");
    let tags: Vec<_> = found(&doc).into_iter().filter(|f| f.2 == "image-tag").collect();
    assert_eq!(tags, [row("web", "live", "image-tag", &format!("{pod}/containers/0/image"), Some("web"))]);

    // The table: a section of its own, and a count of its own under the drift count.
    let out = diff(&desired, &live, &["--policies"]);
    let text = String::from_utf8(out.stdout).unwrap();
    let section = text.split("Policy findings\n").nth(1).unwrap_or_else(|| panic!("no section: {text}"));
    assert!(section.contains("  Deployment shop/web  (live)\n"), "{text}");
    assert!(section.contains(&format!("    MEDIUM   image-tag          {pod}/containers/0/image  [web]\n")), "{text}");
    assert!(section.contains("      container \"web\": image \"nginx:latest\" uses the tag `latest`\n"), "{text}");
    assert!(text.contains("1 drift(s) in 1 of 3 object(s): 1 HIGH\n"), "{text}");
    assert!(text.ends_with("7 policy finding(s) (desired and live): 4 HIGH, 3 MEDIUM\n"), "{text}");

    // Without --policies: nothing about policies.
    let out = diff(&desired, &live, &["-o", "json"]);
    let doc = json(&out);
    assert!(doc.get("findings").is_none() && doc.get("findings_summary").is_none(), "{doc}");
    let out = diff(&desired, &live, &[]);
    assert!(!String::from_utf8(out.stdout).unwrap().contains("policy finding"));
}

#[test]
fn policy_settings_change_sides_rules_severities_and_required_labels() {
    let files = Files::new();
    let desired = files.write("desired.yaml", DESIRED);
    let settings = files.write(
        "policies.yaml",
        "on: [desired]\nrequired_labels: [team]\nrules:\n  privileged: {severity: CRITICAL}\n  host-network: {enabled: false}\n  run-as-root: {enabled: false}\n",
    );
    let out = diff(&desired, &desired, &["--policies", "--policy-config", settings.to_str().unwrap(), "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let doc = json(&out);
    let pod = "/spec/template/spec";
    assert_eq!(
        found(&doc),
        [
            row("settings", "desired", "required-labels", "/metadata/labels/team", None),
            row(
                "agent",
                "desired",
                "privileged",
                &format!("{pod}/containers/0/securityContext/privileged"),
                Some("agent")
            ),
        ],
        "sorted by object (group, kind, namespace, name)"
    );
    assert_eq!(doc["findings"][0]["severity"], "LOW");
    assert_eq!(doc["findings"][0]["message"], "label \"team\" is missing");
    assert_eq!(doc["findings"][1]["severity"], "CRITICAL");

    // Bad settings: exit 2 and a message that says what is wrong.
    for (text, says) in [
        ("rules:\n  image-tags: {}\n", "unknown variant `image-tags`"),
        ("rules:\n  image-tag: {level: LOW}\n", "unknown field `level`"),
        ("on: []\n", "`policies.on` is empty"),
        ("required_labels: [\"Team Name\"]\n", "is not a label key"),
    ] {
        let bad = files.write("bad.yaml", text);
        let out = diff(&desired, &desired, &["--policies", "--policy-config", bad.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {stderr}");
        assert!(stderr.contains(says), "{text}: {stderr}");
    }
    let out = diff(&desired, &desired, &["--policy-config", settings.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "--policy-config needs --policies");
}

#[test]
fn config_check_validates_policies() {
    let files = Files::new();
    let base = "cluster: c\nrepositories: [{name: r, url: ./repo}]\nlive: {snapshot: ./live.yaml}\n";
    let good = files.write(
        "good.yaml",
        &format!("{base}policies:\n  enabled: true\n  on: [desired, live]\n  required_labels: [team, app.kubernetes.io/name]\n  rules:\n    image-tag: {{severity: HIGH}}\n    resource-limits: {{enabled: false}}\n"),
    );
    let out = drift(&["config", "check", good.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    for (text, says) in [
        ("policies:\n  enable: true\n", "unknown field `enable`"),
        ("policies:\n  on: [cluster]\n", "unknown variant `cluster`"),
        ("policies:\n  rules: {latest: {}}\n", "unknown variant `latest`"),
        ("policies:\n  required_labels: [team, team]\n", "listed twice"),
    ] {
        let bad = files.write("bad.yaml", &format!("{base}{text}"));
        let out = drift(&["config", "check", bad.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{text}");
        assert!(stderr.contains(says), "{text}: {stderr}");
    }
}
