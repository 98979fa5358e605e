//! The hosted-CI workflow (.github/workflows/ci.yml) stays in step with .ci/run: it runs .ci/run
//! and no check of its own, with the toolchain of the workspace's rust-version, and .ci/run runs
//! the test command (which builds the image) and the packaging of every crate.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn rust_version() -> String {
    let manifest = read("Cargo.toml");
    let line = manifest.lines().find(|l| l.starts_with("rust-version = ")).expect("a workspace rust-version");
    line.trim_start_matches("rust-version = ").trim_matches('"').to_owned()
}

fn workflow() -> Value {
    serde_saphyr::from_str(&read(".github/workflows/ci.yml")).expect("the workflow is YAML")
}

/// The shell commands of the workflow's steps, job by job, one command a line.
fn commands(job: &Value) -> Vec<String> {
    job["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["run"].as_str())
        .flat_map(|r| r.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(str::to_owned))
        .collect()
}

#[test]
fn the_workflow_runs_ci_run_and_nothing_else() {
    let wf = workflow();
    let jobs = wf["jobs"].as_object().unwrap();
    assert_eq!(jobs.len(), 1, "one job: {:?}", jobs.keys());
    let job = &jobs["ci"];
    let commands = commands(job);
    // .ci/run as root (scripts/test builds and smoke-tests the image only as root), with the
    // runner's environment and PATH, and nothing more.
    assert_eq!(commands.last().map(String::as_str), Some(r#"sudo -E env "PATH=$PATH" .ci/run"#), "{commands:?}");
    assert_eq!(commands.iter().filter(|c| c.contains(".ci/run")).count(), 1, "{commands:?}");
    let test = read("scripts/test");
    assert!(test.contains("scripts/build-image"), "scripts/test builds the image");
    for c in &commands[..commands.len() - 1] {
        assert!(c.starts_with("rustup "), "the workflow only sets up the toolchain before .ci/run, not `{c}`");
        assert!(!c.contains("cargo"), "a check of its own in the workflow: `{c}`; put it in .ci/run");
    }
    // Every `uses:` is the checkout or the cache: no action that checks anything itself.
    for step in job["steps"].as_array().unwrap() {
        if let Some(uses) = step["uses"].as_str() {
            assert!(uses.starts_with("actions/checkout@") || uses.starts_with("actions/cache@"), "{uses}");
        }
    }
    // .ci/run's own target folder is the one cached.
    let ci_run = read(".ci/run");
    let target = job["env"]["CARGO_TARGET_DIR"].as_str().unwrap();
    assert!(ci_run.contains(&format!("CARGO_TARGET_DIR:-{target}")), "CARGO_TARGET_DIR {target}");
    let cached = job["steps"].as_array().unwrap().iter().find_map(|s| s["with"]["path"].as_str()).unwrap();
    assert!(cached.lines().any(|l| l.trim() == target), "{cached}");
    assert_eq!(job["timeout-minutes"], 90, "the CI limit of the project");
}

#[test]
fn the_workflows_toolchain_is_the_workspaces_rust_version() {
    let msrv = rust_version();
    let wf = workflow();
    let job = &wf["jobs"]["ci"];
    assert_eq!(job["env"]["RUST_TOOLCHAIN"].as_str(), Some(msrv.as_str()));
    let text = read(".github/workflows/ci.yml");
    // No other toolchain is named anywhere in the file.
    for (i, _) in text.match_indices("1.") {
        let version: String = text[i..].chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect::<String>();
        let version = version.trim_end_matches('.');
        if version.split('.').count() >= 2 {
            assert_eq!(version, msrv, "a toolchain version in ci.yml that is not the workspace's rust-version");
        }
    }
    for c in commands(job) {
        if c.starts_with("rustup ") {
            assert!(c.contains("\"$RUST_TOOLCHAIN\""), "{c}");
        }
    }
    // The README states the same minimum.
    assert!(read("README.md").contains(&format!("Rust {msrv} or newer")), "the README states the MSRV {msrv}");
}

#[test]
fn ci_run_packages_every_crate_and_runs_the_test_command() {
    let ci_run = read(".ci/run");
    let lines: Vec<&str> = ci_run.lines().map(str::trim).filter(|l| !l.starts_with('#')).collect();
    let at =
        |needle: &str| lines.iter().position(|l| l.contains(needle)).unwrap_or_else(|| panic!("{needle} in .ci/run"));
    let package = at("cargo package --workspace");
    let publish = at("cargo publish --workspace --dry-run");
    let test = at("scripts/test");
    assert!(package < test && publish < test, "packaging runs before scripts/test");
    assert_eq!(lines.last(), Some(&"scripts/test"), "scripts/test (with the image build) is what .ci/run ends with");
}
