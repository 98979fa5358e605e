//! `drift diff` on hostile folders (issue 16): symbolic link cycles, links leaving the folder,
//! links inside it, and a FIFO named like a manifest. Every run must end, with a warning naming
//! each entry it refused.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

/// Runs `cmd` (`what`): its status, standard output and error; killed, and the test failed, when
/// it does not end within 60 s.
fn within_a_minute(cmd: &mut Command, what: &str) -> (std::process::ExitStatus, String, String) {
    let ran = drift_testkit::process::output_within(cmd, Duration::from_secs(60)).unwrap();
    let (stdout, stderr) = (String::from_utf8(ran.stdout).unwrap(), String::from_utf8(ran.stderr).unwrap());
    let status = ran.status.unwrap_or_else(|| panic!("{what} did not end within 60 s: {stdout}{stderr}"));
    (status, stdout, stderr)
}

/// Runs `drift diff -o json`, killing it (and failing) if it does not end within 60 s.
fn diff(desired: &Path, live: &Path) -> (i32, Value) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_drift"));
    cmd.args(["diff", "--desired"]).arg(desired).arg("--live").arg(live).args(["-o", "json"]).env("NO_COLOR", "1");
    let (status, stdout, stderr) = within_a_minute(&mut cmd, "drift diff");
    let doc = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}{stderr}"));
    (status.code().unwrap(), doc)
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

#[test]
fn more_files_than_the_bound_stop_the_walk_with_an_error() {
    // Links inside the folder that are no cycle are followed: ten empty files, then five levels
    // of ten links each to the level below, reach 1,111,110 files from 60 entries on disk.
    let dir = tempfile::tempdir().unwrap();
    let (d, l) = (dir.path().join("desired"), dir.path().join("live"));
    write(&d.join("a.yaml"), &cm("a", "one"));
    write(&l.join("a.yaml"), &cm("a", "two"));
    std::fs::create_dir(d.join("m0")).unwrap();
    for i in 0..10 {
        std::fs::File::create(d.join(format!("m0/f{i}.yaml"))).unwrap();
    }
    for level in 1..=5 {
        std::fs::create_dir(d.join(format!("m{level}"))).unwrap();
        for i in 0..10 {
            symlink(format!("../m{}", level - 1), d.join(format!("m{level}/l{i}"))).unwrap();
        }
    }
    let max = drift_manifest::walk::MAX_FILES;
    // `a.yaml`, then all of m0 to m4 (10 + 100 + ... + 100,000), then m5 in path order.
    let before_m5 = 1 + (1..=5).map(|k| 10usize.pow(k)).sum::<usize>();
    let mut rest = max - before_m5;
    let mut stop = d.join("m5");
    for k in (1..=5).rev() {
        let digit = rest / 10usize.pow(k);
        rest %= 10usize.pow(k);
        stop = stop.join(format!("l{digit}"));
    }
    let stop = stop.join(format!("f{rest}.yaml"));
    let (code, doc) = diff(&d, &l);
    assert_eq!(code, 2, "{}", doc["warnings"]);
    assert_eq!(drifted(&doc), ["a"], "the files before the bound are still compared");
    let w = warnings(&doc);
    let message = format!("more than {max} manifest files: the walk stopped here, the rest is not read");
    assert_eq!(w, [(stop.display().to_string(), message, true)]);
}

#[test]
fn more_bytes_than_the_bound_stop_the_walk_before_reading_them() {
    let dir = tempfile::tempdir().unwrap();
    let (d, l) = (dir.path().join("desired"), dir.path().join("live"));
    write(&d.join("a.yaml"), &cm("a", "one"));
    write(&l.join("a.yaml"), &cm("a", "one"));
    // A sparse file: its size counts, it takes no disk, and it is never read.
    let big = l.join("big.yaml");
    std::fs::File::create(&big).unwrap().set_len(drift_manifest::walk::MAX_BYTES + 1).unwrap();
    let (code, doc) = diff(&d, &l);
    assert_eq!(code, 2, "{doc}");
    let w = warnings(&doc);
    assert_eq!(w.len(), 2, "{w:?}");
    let bound = w.iter().find(|(path, _, _)| *path == big.display().to_string()).expect("the refusal names the file");
    assert!(bound.1.starts_with("more than 2147483648 bytes of manifests") && bound.2, "{w:?}");
    // The live side was not read whole: nothing may look missing, nothing is compared.
    assert!(w.iter().any(|(_, m, fatal)| m.starts_with("live ConfigMap in x not read (failed)") && *fatal), "{w:?}");
    assert_eq!(doc["drifts"], serde_json::json!([]));
}

/// Regression (issue 37, item 6): `drift scan` of a folder repository skipped a FIFO without a
/// word, where `drift diff` notes it. Now both name it, and neither blocks on it.
#[test]
fn drift_scan_notes_a_fifo_in_a_folder_repository_as_drift_diff_does() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (d, l) = (root.join("desired"), root.join("live"));
    write(&d.join("a.yaml"), &cm("a", "one"));
    write(&l.join("a.yaml"), &cm("a", "one"));
    assert!(Command::new("mkfifo").arg(d.join("x.yaml")).status().unwrap().success());
    let config = root.join("drift.yaml");
    let yaml = format!(
        "cluster: c\nstore: sqlite://{0}/drift.db\nrepositories:\n  - name: r\n    url: {1}\nlive:\n  snapshot: {2}\n",
        root.display(),
        d.display(),
        l.display()
    );
    std::fs::write(&config, yaml).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_drift"));
    cmd.args(["scan", "-o", "json", "--config"]).arg(&config).env("NO_COLOR", "1");
    let (status, stdout, stderr) = within_a_minute(&mut cmd, "drift scan");
    assert_eq!(status.code(), Some(0), "{stdout}{stderr}");
    let doc: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}{stderr}"));
    let w = warnings(&doc);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].0.ends_with("x.yaml"), "{w:?}");
    assert!(w[0].1.contains("not a regular file") && !w[0].2, "{w:?}");
}
