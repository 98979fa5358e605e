//! `drift diff` on files reads, parses and compares on every core (issue 33): the report is the
//! one a single thread gives, byte for byte but the run's times, over a generated tree of many
//! files with drifts, files that do not parse on both sides, objects defined twice in Git, live
//! objects found twice (the later file counts), objects without a namespace, a multi-document
//! file and objects Git does not hold.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn configmap(name: &str, ns: Option<&str>, value: usize) -> String {
    let ns = ns.map(|n| format!("  namespace: {n}\n")).unwrap_or_default();
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n{ns}data:\n  k: \"v{value}\"\n")
}

fn deployment(name: &str, ns: &str, replicas: usize, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  replicas: {replicas}\n  \
         template:\n    spec:\n      containers:\n      - name: app\n        image: {image}\n"
    )
}

/// A tree of 600 desired and 620 live files in two folders; with `broken_live`, live files that
/// do not parse too (then nothing is compared: nothing may look missing).
fn tree(root: &Path, broken_live: bool) {
    for i in 0..600 {
        let ns = format!("ns{}", i % 7);
        let (desired, live) = match i % 6 {
            0 => (configmap(&format!("c{i}"), Some(&ns), 1), configmap(&format!("c{i}"), Some(&ns), 1)),
            1 => (configmap(&format!("c{i}"), Some(&ns), 1), configmap(&format!("c{i}"), Some(&ns), 2)),
            2 => (
                deployment(&format!("d{i}"), &ns, 3, "web:1"),
                deployment(&format!("d{i}"), &ns, 3 + i % 2, if i % 4 == 0 { "web:2" } else { "web:1" }),
            ),
            // Without a namespace in Git: matched to the one live object of its name.
            3 => (configmap(&format!("u{i}"), None, 1), configmap(&format!("u{i}"), Some(&ns), i % 2)),
            // Missing from the cluster.
            4 => (configmap(&format!("m{i}"), Some(&ns), 1), configmap(&format!("other{i}"), Some(&ns), 1)),
            _ => (deployment(&format!("d{i}"), &ns, 2, "api:1"), deployment(&format!("d{i}"), &ns, 2, "api:1")),
        };
        write(&root.join(format!("desired/{:03}/{i:04}.yaml", i / 100)), &desired);
        write(&root.join(format!("live/{:03}/{i:04}.yaml", i / 100)), &live);
    }
    // Files that do not parse.
    for i in 0..5 {
        write(&root.join(format!("desired/broken{i}.yaml")), "apiVersion: v1\nkind: ConfigMap\nmetadata: [\n");
        if broken_live {
            write(&root.join(format!("live/broken{i}.yaml")), "{\"apiVersion\": \"v1\", \"kind\": ");
        }
    }
    // Defined twice in Git (the first definition is used) ...
    for i in (1..600).step_by(60) {
        write(
            &root.join(format!("desired/zz-twice{i}.yaml")),
            &configmap(&format!("c{i}"), Some(&format!("ns{}", i % 7)), 9),
        );
    }
    // ... and live objects found twice: the later file counts.
    for i in (0..600).step_by(6).take(15) {
        write(
            &root.join(format!("live/zz-again{i}.yaml")),
            &configmap(&format!("c{i}"), Some(&format!("ns{}", i % 7)), 5),
        );
    }
    // A multi-document file on each side.
    let docs: Vec<String> = (0..20).map(|j| configmap(&format!("multi{j}"), Some("multi"), j % 3)).collect();
    write(&root.join("desired/multi.yaml"), &docs.join("---\n"));
    let docs: Vec<String> = (0..20).map(|j| configmap(&format!("multi{j}"), Some("multi"), j % 2)).collect();
    write(&root.join("live/multi.yaml"), &docs.join("---\n"));
}

/// `drift diff -o json` on `threads` threads: exit code and the report without its times.
fn diff(root: &Path, threads: Option<&str>) -> (i32, Value) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_drift"));
    cmd.args(["diff", "--desired"])
        .arg(root.join("desired"))
        .arg("--live")
        .arg(root.join("live"))
        .args(["-o", "json"])
        .env("DRIFT_PROGRESS", "never");
    match threads {
        Some(n) => cmd.env("DRIFT_THREADS", n),
        None => cmd.env_remove("DRIFT_THREADS"),
    };
    let out = cmd.output().unwrap();
    let mut report: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    for time in ["started_at", "finished_at"] {
        report.as_object_mut().unwrap().remove(time);
    }
    (out.status.code().unwrap(), report)
}

#[test]
fn the_report_of_every_core_is_the_report_of_one_thread() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path(), false);
    let (code, one) = diff(dir.path(), Some("1"));
    assert_eq!(code, 2, "files that do not parse make the exit code 2");
    // The generator reaches what the law is about.
    let warnings = one["warnings"].as_array().unwrap();
    let said = |what: &str| warnings.iter().filter(|w| w["message"].as_str().unwrap().contains(what)).count();
    assert_eq!(said("defined twice"), 10, "{warnings:#?}");
    assert_eq!(warnings.iter().filter(|w| w["path"].as_str().is_some_and(|p| p.contains("broken"))).count(), 5);
    let drifts = one["drifts"].as_array().unwrap();
    assert!(drifts.len() > 200, "{}", drifts.len());
    assert!(drifts.iter().any(|d| d["drift_type"] == "missing_resource"));
    let again = |name: &str| drifts.iter().any(|d| d["resource"]["name"] == name && d["cluster_value"] == "v5");
    assert!(again("c0") && again("c6"), "the later live object of a key counts");
    for threads in [Some("2"), Some("4"), Some("16"), None] {
        let (other_code, other) = diff(dir.path(), threads);
        assert_eq!(other_code, code, "{threads:?}");
        assert!(other == one, "{threads:?} threads gave another report");
    }
}

#[test]
fn with_live_files_that_do_not_parse_every_core_reports_as_one_thread() {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path(), true);
    let (code, one) = diff(dir.path(), Some("1"));
    assert_eq!(code, 2);
    let broken = one["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["path"].as_str().is_some_and(|p| p.contains("live/broken")));
    assert_eq!(broken.count(), 5, "{one:#}");
    for threads in [Some("2"), Some("4"), None] {
        let (other_code, other) = diff(dir.path(), threads);
        assert_eq!(other_code, code, "{threads:?}");
        assert!(other == one, "{threads:?} threads gave another report");
    }
}
