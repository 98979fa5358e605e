//! `drift scan`, `drift drifts list`, `drift config check`, `drift migrate` on the demo, recorded
//! in SQLite: what a new user runs first.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn drift(args: &[&str], cwd: &Path) -> (i32, String, String) {
    let out =
        Command::new(env!("CARGO_BIN_EXE_drift")).args(args).current_dir(cwd).env("NO_COLOR", "1").output().unwrap();
    (out.status.code().unwrap(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

fn demo_config(dir: &Path) -> PathBuf {
    let root = root();
    let config = format!(
        "cluster: demo\ndatabase: sqlite://{}/drift.db\nrepositories:\n  - name: demo\n    url: {}/examples/demo/desired\nlive:\n  snapshot: {}/examples/demo/live\n",
        dir.display(),
        root.display(),
        root.display()
    );
    let path = dir.join("drift.yaml");
    std::fs::write(&path, config).unwrap();
    path
}

#[test]
fn the_demo_scans_into_sqlite_and_keeps_history() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = demo_config(dir.path());
    let cfg = cfg.to_str().unwrap();
    let (code, out, err) = drift(&["scan", "--config", cfg], dir.path());
    assert_eq!(code, 1, "drift found: {out}{err}");
    assert!(out.contains("7 drift(s) in 4 of 6 object(s)"), "{out}");
    // A second scan: the same 7 drifts, now seen twice, no new rows.
    let (code, out, _) = drift(&["scan", "--config", cfg, "-o", "json"], dir.path());
    assert_eq!(code, 1);
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["summary"]["drifts"], 7);
    let (code, out, err) = drift(&["drifts", "list", "--config", cfg, "--json"], dir.path());
    assert_eq!(code, 0, "{err}");
    let page: Value = serde_json::from_str(&out).unwrap();
    let items = page["items"].as_array().unwrap();
    assert_eq!(items.len(), 7, "one row per drift: {out}");
    assert!(items.iter().all(|d| d["occurrences"] == 2 && d["status"] == "open"), "{out}");
    let (code, out, _) = drift(&["drifts", "list", "--config", cfg, "--severity", "CRITICAL"], dir.path());
    assert_eq!(code, 0);
    assert!(out.contains("service_port_drift") && !out.contains("replicas_drift"), "{out}");
    let (code, _, err) = drift(&["drifts", "list", "--config", cfg, "--severity", "SEVERE"], dir.path());
    assert_eq!(code, 2, "a bad filter is an error: {err}");
}

#[test]
fn config_check_names_the_line_of_an_unknown_key() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) =
        drift(&["config", "check", root().join("examples/drift.yaml").to_str().unwrap()], dir.path());
    assert_eq!(code, 0, "the annotated example is valid: {out}{err}");
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "cluster: x\nrepositories:\n  - name: a\n    url: .\nintervall: 5m\n").unwrap();
    let (code, _, err) = drift(&["config", "check", bad.to_str().unwrap()], dir.path());
    assert_eq!(code, 2);
    assert!(err.contains("line 5") && err.contains("intervall"), "{err}");
    std::fs::write(&bad, "cluster: x\nrepositories: []\n").unwrap();
    let (code, _, err) = drift(&["config", "check", bad.to_str().unwrap()], dir.path());
    assert_eq!(code, 2);
    assert!(err.contains("repositories"), "{err}");
}

#[test]
fn migrate_creates_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = demo_config(dir.path());
    let (code, out, err) = drift(&["migrate", "--config", cfg.to_str().unwrap()], dir.path());
    assert_eq!(code, 0, "{out}{err}");
    assert!(dir.path().join("drift.db").exists());
}
