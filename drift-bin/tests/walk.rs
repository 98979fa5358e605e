//! `drift diff` on hostile folders (issue 16): symbolic link cycles, links leaving the folder,
//! links inside it, and a FIFO named like a manifest. Every run must end, with a warning naming
//! each entry it refused.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Runs `drift diff -o json`, killing it (and failing) if it does not end within 60 s.
fn diff(desired: &Path, live: &Path) -> (i32, Value) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_drift"))
        .args(["diff", "--desired"])
        .arg(desired)
        .arg("--live")
        .arg(live)
        .args(["-o", "json"])
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("drift diff did not end within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    let doc = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}{stderr}"));
    (out.status.code().unwrap(), doc)
}

fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn cm(name: &str, value: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: x}}\ndata: {{k: {value}}}\n")
}

/// The (path, message, fatal) of every warning of the report.
fn warnings(doc: &Value) -> Vec<(String, String, bool)> {
    doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["path"].as_str().unwrap_or_default().to_owned(),
                w["message"].as_str().unwrap().to_owned(),
                w["fatal"].as_bool().unwrap(),
            )
        })
        .collect()
}

fn drifted(doc: &Value) -> Vec<String> {
    let mut names: Vec<String> =
        doc["drifts"].as_array().unwrap().iter().map(|d| d["resource"]["name"].as_str().unwrap().to_owned()).collect();
    names.sort();
    names
}

#[test]
fn two_links_up_end_with_a_warning_each() {
    let dir = tempfile::tempdir().unwrap();
    let (d, l) = (dir.path().join("desired"), dir.path().join("live"));
    write(&d.join("a/a.yaml"), &cm("a", "one"));
    write(&d.join("b/b.yaml"), &cm("b", "one"));
    symlink("..", d.join("a/up")).unwrap();
    symlink("..", d.join("b/up")).unwrap();
    write(&l.join("a.yaml"), &cm("a", "one"));
    write(&l.join("b.yaml"), &cm("b", "two"));
    symlink("..", l.join("up")).unwrap(); // outside the live folder
    let (code, doc) = diff(&d, &l);
    assert_eq!(code, 1, "{doc}");
    assert_eq!(drifted(&doc), ["b"], "{doc}");
    let w = warnings(&doc);
    let shown = |p: &Path| p.display().to_string();
    assert_eq!(w.len(), 3, "{w:?}");
    assert!(w.iter().all(|(_, _, fatal)| !fatal), "{w:?}");
    for link in [d.join("a/up"), d.join("b/up")] {
        assert!(w.iter().any(|(p, m, _)| *p == shown(&link) && m.contains("a cycle")), "{link:?}: {w:?}");
    }
    assert!(w.iter().any(|(p, m, _)| *p == shown(&l.join("up")) && m.contains("outside the folder")), "{w:?}");
}

#[test]
fn a_link_outside_is_not_read_and_a_link_inside_is() {
    let dir = tempfile::tempdir().unwrap();
    let (d, l, outside) = (dir.path().join("desired"), dir.path().join("live"), dir.path().join("outside"));
    write(&outside.join("b.yaml"), &cm("b", "one"));
    write(&d.join("a.yaml"), &cm("a", "one"));
    symlink(outside.join("b.yaml"), d.join("b.yaml")).unwrap();
    // Inside the folder, through a hidden folder the walk itself skips: read only through the link.
    write(&d.join(".store/c.yaml"), &cm("c", "one"));
    symlink(".store/c.yaml", d.join("c.yaml")).unwrap();
    write(&l.join("a.yaml"), &cm("a", "one"));
    write(&l.join("c.yaml"), &cm("c", "two"));
    let (code, doc) = diff(&d, &l);
    // `b` (outside) would be missing from the live side if it were read; `c` (inside) drifts.
    assert_eq!(code, 1, "{doc}");
    assert_eq!(drifted(&doc), ["c"], "{doc}");
    let w = warnings(&doc);
    assert_eq!(
        w,
        [(
            d.join("b.yaml").display().to_string(),
            "symbolic link not followed: its target is outside the folder".to_owned(),
            false
        )]
    );
}

#[test]
fn a_fifo_named_like_a_manifest_is_skipped_and_never_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let (d, l) = (dir.path().join("desired"), dir.path().join("live"));
    write(&d.join("a.yaml"), &cm("a", "one"));
    write(&l.join("a.yaml"), &cm("a", "one"));
    let fifo = l.join("x.yaml");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let (code, doc) = diff(&d, &l);
    assert_eq!(code, 0, "{doc}");
    let w = warnings(&doc);
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0].0, fifo.display().to_string());
    assert!(w[0].1.contains("not a regular file") && !w[0].2, "{w:?}");
}
