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
    assert!(out.contains("8 drift(s) in 4 of 6 object(s)"), "{out}");
    // A second scan: the same 8 drifts, now seen twice, no new rows.
    let (code, out, _) = drift(&["scan", "--config", cfg, "-o", "json"], dir.path());
    assert_eq!(code, 1);
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["summary"]["drifts"], 8);
    let (code, out, err) = drift(&["drifts", "list", "--config", cfg, "--json"], dir.path());
    assert_eq!(code, 0, "{err}");
    let page: Value = serde_json::from_str(&out).unwrap();
    let items = page["items"].as_array().unwrap();
    assert_eq!(items.len(), 8, "one row per drift: {out}");
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

/// `policies:` in drift.yaml (docs/policies.md): `drift scan` checks the demo's objects in Git and
/// in the live snapshot and records the findings in SQLite apart from the drifts (the drift count
/// and exit code are the same); a rule disabled in the next scan has its findings resolved, the
/// others are seen again.
#[test]
fn the_demo_with_policies_records_findings_apart_from_drifts() {
    use drift_core::DriftStore;
    use drift_core::policy::Rule;
    use drift_core::sink::{FindingFilter, FindingStatus, PageRequest};
    let dir = tempfile::tempdir().unwrap();
    let cfg = demo_config(dir.path());
    let base = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("{base}policies:\n  enabled: true\n  required_labels: [team]\n")).unwrap();
    let cfg_arg = cfg.to_str().unwrap();
    let (code, out, err) = drift(&["scan", "--config", cfg_arg, "-o", "json"], dir.path());
    assert_eq!(code, 1, "the drifts set the exit code: {err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["summary"]["drifts"], 8, "findings are not drifts");
    let reported = doc["findings"].as_array().unwrap();
    assert!(reported.iter().any(|f| f["rule"] == "required-labels" && f["side"] == "desired"), "{out}");
    assert!(reported.iter().any(|f| f["side"] == "live"), "{out}");
    assert_eq!(doc["findings_summary"]["findings"], reported.len());

    let url = format!("sqlite://{}/drift.db", dir.path().display());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let stored = |status: FindingStatus| {
        runtime.block_on(async {
            let store = drift_sqlite::SqliteStore::open(&url).await.unwrap();
            let filter = FindingFilter { status: Some(status), ..FindingFilter::default() };
            store.findings(&filter, PageRequest { limit: 1000, after: None }).await.unwrap().items
        })
    };
    assert_eq!(stored(FindingStatus::Open).len(), reported.len(), "one row per finding");
    // `drift findings list` shows them, filtered as `GET /findings` filters them.
    let (code, out, err) = drift(&["findings", "list", "--config", cfg_arg, "--json"], dir.path());
    assert_eq!(code, 0, "{err}");
    let listed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed["items"].as_array().unwrap().len(), reported.len(), "{out}");
    let (code, out, err) =
        drift(&["findings", "list", "--config", cfg_arg, "--rule", "required-labels", "--side", "desired"], dir.path());
    assert_eq!(code, 0, "{err}");
    let rows: Vec<&str> = out.lines().skip(1).collect();
    let want = reported.iter().filter(|f| f["rule"] == "required-labels" && f["side"] == "desired").count();
    assert_eq!(rows.len(), want, "{out}");
    assert!(out.lines().next().unwrap().starts_with("    ID  STATUS"), "{out}");
    assert!(
        rows.iter().all(|r| r.contains(" open ") && r.contains("required-labels") && r.contains("desired")),
        "{out}"
    );
    let (code, out, err) = drift(
        &[
            "findings",
            "list",
            "--config",
            cfg_arg,
            "--rule",
            "required-labels",
            "--side",
            "live",
            "--kind",
            "NoSuchKind",
        ],
        dir.path(),
    );
    assert_eq!((code, out.lines().count()), (0, 1), "only the header: {out}");
    assert!(err.contains("no finding matches"), "{err}");
    let (code, _, err) = drift(&["findings", "list", "--config", cfg_arg, "--rule", "no-such-rule"], dir.path());
    assert_eq!(code, 2, "a bad filter is a usage error");
    assert!(err.contains("no-such-rule"), "{err}");

    std::fs::write(
        &cfg,
        format!("{base}policies:\n  enabled: true\n  required_labels: [team]\n  rules: {{required-labels: {{enabled: false}}}}\n"),
    )
    .unwrap();
    let (code, _, err) = drift(&["scan", "--config", cfg_arg], dir.path());
    assert_eq!(code, 1, "{err}");
    let resolved = stored(FindingStatus::Resolved);
    assert!(!resolved.is_empty() && resolved.iter().all(|f| f.rule == Rule::RequiredLabels), "{resolved:?}");
    let open = stored(FindingStatus::Open);
    assert_eq!(open.len() + resolved.len(), reported.len());
    assert!(open.iter().all(|f| f.rule != Rule::RequiredLabels && f.occurrences == 2), "{open:?}");

    // With the checks off, an empty list says how to turn them on.
    std::fs::write(&cfg, &base).unwrap();
    let (code, out, err) = drift(&["findings", "list", "--config", cfg_arg, "--kind", "NoSuchKind"], dir.path());
    assert_eq!((code, out.lines().count()), (0, 1), "only the header: {out}");
    assert!(err.contains("policy checks are off") && err.contains("policies:"), "{err}");
}

/// Issue 37, item 1: a Secret hash key the user gives (`secret_hash.key_env`) is what the store's
/// drifts are hashed with; the store keeps its id, so a process given another key, or none,
/// refuses to start rather than re-hash every Secret drift; the key is printed nowhere, not even
/// in debug logs.
#[test]
fn a_secret_hash_key_given_by_the_user_binds_the_store_and_is_never_shown() {
    let dir = tempfile::tempdir().unwrap();
    let plain = demo_config(dir.path());
    let given = dir.path().join("given.yaml");
    let text = std::fs::read_to_string(&plain).unwrap();
    std::fs::write(&given, format!("{text}secret_hash:\n  key_env: DEMO_HASH_KEY\n")).unwrap();
    let (key_a, key_b) = ("a1".repeat(32), "b2".repeat(32));
    let run = |config: &Path, key: &str, args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_drift"))
            .args(args)
            .arg("--config")
            .arg(config)
            .current_dir(dir.path())
            .env("NO_COLOR", "1")
            .env("DRIFT_LOG", "debug")
            .env("DEMO_HASH_KEY", key)
            .output()
            .unwrap();
        (out.status.code().unwrap(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
    };
    let (code, out, err) = run(&given, &key_a, &["scan"]);
    assert_eq!(code, 1, "{out}{err}");
    let (code, id_a, err) = run(&given, &key_a, &["secret-key", "id"]);
    assert_eq!(code, 0, "{err}");
    let id_a = id_a.trim().to_owned();
    assert_eq!(id_a.len(), 16);
    let (code, out, err) = run(&given, &key_b, &["scan"]);
    assert_eq!(code, 2, "another key is refused: {out}{err}");
    assert!(err.contains(&id_a) && err.contains("drift secret-key rotate"), "{err}");
    let (code, out, err) = run(&plain, "", &["scan"]);
    assert_eq!(code, 2, "no key is refused: {out}{err}");
    assert!(err.contains(&id_a) && err.contains("secret_hash.key_env"), "{err}");
    let (code, out, err) = run(&given, "not-a-key", &["scan"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("64 hexadecimal digits") && !err.contains("not-a-key"), "{err}");
    // Switching to a key the store keeps: the rotation reads the old key from the
    // configuration, then the configuration without `secret_hash` starts.
    let (code, out, err) = run(&given, &key_a, &["secret-key", "rotate"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("remove `secret_hash`"), "{out}");
    let (code, out, err) = run(&plain, "", &["scan"]);
    assert_eq!(code, 1, "{out}{err}");
    let (code, out, err) = drift(&["config", "check", given.to_str().unwrap()], dir.path());
    assert_eq!(code, 0, "{out}{err}");
    for (config, key) in [(&given, &key_a), (&given, &key_b), (&plain, &key_a)] {
        for args in [&["scan"][..], &["secret-key", "id"], &["drifts", "list", "--json"]] {
            let (_, out, err) = run(config, key, args);
            for k in [&key_a, &key_b] {
                assert!(!out.contains(k.as_str()) && !err.contains(k.as_str()), "{args:?}: the key shown: {out}{err}");
            }
        }
    }
}
