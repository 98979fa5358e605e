//! `-o/--output table|json|yaml` on the commands that list what a scan of the demo recorded in
//! SQLite (`drift drifts list`, `drift findings list`): `--json` prints the same bytes as
//! `-o json`, YAML is the same document, and a format that does not exist is a usage error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

struct Demo {
    dir: tempfile::TempDir,
    config: PathBuf,
}

impl Demo {
    /// The demo in a configuration with policies on, scanned once into SQLite.
    fn scanned() -> Demo {
        let dir = tempfile::tempdir().unwrap();
        let root = root();
        let config = dir.path().join("drift.yaml");
        std::fs::write(
            &config,
            format!(
                "cluster: demo\ndatabase: sqlite://{}/drift.db\nrepositories:\n  - name: demo\n    url: {}/examples/demo/desired\nlive:\n  snapshot: {}/examples/demo/live\npolicies:\n  enabled: true\n  required_labels: [team]\n",
                dir.path().display(),
                root.display(),
                root.display()
            ),
        )
        .unwrap();
        let demo = Demo { dir, config };
        let (code, out, err) = demo.drift(&["scan"]);
        assert_eq!(code, 1, "the demo drifts: {out}{err}");
        demo
    }

    /// Runs `drift ARGS --config FILE`: the exit code, standard output and standard error.
    fn drift(&self, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_drift"))
            .args(args)
            .arg("--config")
            .arg(&self.config)
            .current_dir(self.dir.path())
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        (out.status.code().unwrap(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
    }

    /// Standard output of a command that must succeed.
    fn ok(&self, args: &[&str]) -> String {
        let (code, out, err) = self.drift(args);
        assert_eq!(code, 0, "{args:?}: {err}");
        out
    }
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON: {e}: {text}"))
}

fn yaml(text: &str) -> Value {
    serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("not YAML: {e}: {text}"))
}

#[test]
fn drifts_list_prints_json_yaml_or_a_table_and_json_is_the_old_flag() {
    let demo = Demo::scanned();
    let out = demo.ok(&["drifts", "list", "-o", "json"]);
    let page = json(&out);
    let items = page["items"].as_array().unwrap();
    let mut types: Vec<&str> = items.iter().map(|d| d["drift_type"].as_str().unwrap()).collect();
    types.sort_unstable();
    assert_eq!(
        types,
        [
            "configmap_drift",
            "image_tag_drift",
            "missing_resource",
            "replicas_drift",
            "resource_limit_drift",
            "resource_request_drift",
            "service_port_drift",
            "spec_drift"
        ],
        "{out}"
    );
    assert!(
        items.iter().all(|d| d["status"] == "open" && d["cluster"] == "demo" && d["id"].as_i64() > Some(0)),
        "{out}"
    );
    let port = items.iter().find(|d| d["drift_type"] == "service_port_drift").unwrap();
    assert_eq!((port["severity"].as_str(), port["resource_kind"].as_str()), (Some("CRITICAL"), Some("Service")));

    // `--json`, the flag of earlier versions, prints exactly the same bytes; so does `--output`.
    assert_eq!(demo.ok(&["drifts", "list", "--json"]), out, "--json is -o json");
    assert_eq!(demo.ok(&["drifts", "list", "--output", "json"]), out);
    // The filters apply to every format.
    let critical = json(&demo.ok(&["drifts", "list", "--severity", "CRITICAL", "-o", "json"]));
    assert_eq!(critical["items"].as_array().unwrap().len(), 1, "{critical}");
    assert_eq!(critical["items"][0]["id"], port["id"]);

    // YAML is the same document.
    let text = demo.ok(&["drifts", "list", "-o", "yaml"]);
    assert!(text.starts_with("items:\n"), "{text}");
    assert_eq!(yaml(&text), page, "-o yaml is -o json as YAML");

    // The table: a header and one row per drift; the default.
    let table = demo.ok(&["drifts", "list", "-o", "table"]);
    assert_eq!(demo.ok(&["drifts", "list"]), table, "table is the default");
    let mut lines = table.lines();
    assert!(lines.next().unwrap().starts_with("    ID  STATUS"), "{table}");
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), items.len(), "{table}");
    assert!(rows.iter().any(|r| r.contains("service_port_drift") && r.contains("Service shop/web")), "{table}");
}

#[test]
fn findings_list_prints_json_and_yaml_and_json_is_the_old_flag() {
    let demo = Demo::scanned();
    let out = demo.ok(&["findings", "list", "-o", "json"]);
    let page = json(&out);
    let items = page["items"].as_array().unwrap();
    assert!(items.iter().any(|f| f["rule"] == "required-labels" && f["side"] == "desired"), "{out}");
    assert!(items.iter().any(|f| f["side"] == "live"), "{out}");
    assert!(
        items.iter().all(|f| f["status"] == "open" && f["message"].as_str().is_some_and(|m| !m.is_empty())),
        "{out}"
    );
    assert_eq!(demo.ok(&["findings", "list", "--json"]), out, "--json is -o json");
    let labels = json(&demo.ok(&["findings", "list", "--rule", "required-labels", "-o", "json"]));
    let labels = labels["items"].as_array().unwrap();
    assert!(!labels.is_empty() && labels.len() < items.len(), "{labels:?}");
    assert!(labels.iter().all(|f| f["rule"] == "required-labels"), "{labels:?}");
    assert_eq!(yaml(&demo.ok(&["findings", "list", "-o", "yaml"])), page, "-o yaml is -o json as YAML");
    let table = demo.ok(&["findings", "list", "-o", "table"]);
    assert!(table.starts_with("    ID  STATUS"), "{table}");
    assert_eq!(table.lines().count(), items.len() + 1, "{table}");
}

#[test]
fn a_format_that_does_not_exist_is_a_usage_error() {
    let demo = Demo::scanned();
    for command in [&["drifts", "list"][..], &["findings", "list"], &["audit", "list"]] {
        let args = [command, &["-o", "xml"]].concat();
        let (code, out, err) = demo.drift(&args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(out.is_empty(), "{args:?}: nothing on standard output: {out}");
        assert!(err.contains("invalid value 'xml'") && err.contains("table, json, yaml"), "{args:?}: {err}");
    }
    // `--json` with another format is a contradiction, not a choice.
    let (code, out, err) = demo.drift(&["drifts", "list", "--json", "-o", "yaml"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("--json") && err.contains("--output"), "{err}");
}

#[test]
fn render_takes_the_same_formats() {
    let run = |format: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_drift"))
            .args(["render", "--repo", "examples/demo/desired", "-o", format])
            .current_dir(root())
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        (out.status.code().unwrap(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
    };
    let (code, out, err) = run("json");
    assert_eq!(code, 0, "{err}");
    let objects = json(&out)["objects"].as_array().unwrap().len();
    assert_eq!(objects, 6, "{out}");
    let (code, table, err) = run("table");
    assert_eq!(code, 0, "{err}");
    assert!(table.starts_with("KIND "), "{table}");
    assert!(
        table.lines().any(|l| l.starts_with("Service ") && l.contains("shop/web") && l.contains("shop/web.yaml#1")),
        "{table}"
    );
    assert!(table.lines().last().unwrap().starts_with("6 object(s) from "), "{table}");
    let (code, out, err) = run("xml");
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert!(err.contains("table, json, yaml"), "{err}");
}
