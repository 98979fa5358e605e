//! `drift diff` as a user runs it: exit codes, the JSON shape, the table, bad input.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn drift(args: &[&str]) -> (i32, String, String) {
    let out =
        Command::new(env!("CARGO_BIN_EXE_drift")).args(args).current_dir(root()).env("NO_COLOR", "1").output().unwrap();
    (out.status.code().unwrap(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn demo_reports_every_seed_drift_type_as_json() {
    let (code, out, err) =
        drift(&["diff", "--desired", "examples/demo/desired", "--live", "examples/demo/live", "--output", "json"]);
    assert_eq!(code, 1, "drift found: {err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    let drifts = doc["drifts"].as_array().unwrap();
    let mut seen: Vec<(String, String, String, String)> = drifts
        .iter()
        .map(|d| {
            (
                d["drift_type"].as_str().unwrap().to_owned(),
                d["severity"].as_str().unwrap().to_owned(),
                d["path"].as_str().unwrap().to_owned(),
                d["changed_by"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    seen.sort();
    let expect = |t: &str, s: &str, p: &str, by: &str| (t.to_owned(), s.to_owned(), p.to_owned(), by.to_owned());
    assert_eq!(
        seen,
        vec![
            expect("configmap_drift", "MEDIUM", "data.FEATURE_CHECKOUT_V2", "kubectl-edit"),
            expect("image_tag_drift", "HIGH", "spec.template.spec.containers[name=web].image", "kubectl-set"),
            expect("missing_resource", "HIGH", "", ""),
            expect("replicas_drift", "LOW", "spec.replicas", "kubectl-scale"),
            expect(
                "resource_limit_drift",
                "HIGH",
                "spec.template.spec.containers[name=web].resources.limits.memory",
                "kubectl-set"
            ),
            expect(
                "resource_request_drift",
                "MEDIUM",
                "spec.template.spec.containers[name=web].resources.requests.cpu",
                "kubectl-set"
            ),
            expect("service_port_drift", "CRITICAL", "spec.ports[port=80].targetPort", "kubectl-patch"),
            expect("spec_drift", "MEDIUM", "spec.template.spec.containers[name=web].env[name=DEBUG]", "kubectl-edit"),
        ]
    );
    // The stable shape of docs/drift-types.md.
    let d = &drifts[0];
    for field in
        ["resource", "drift_type", "severity", "path", "git_value", "cluster_value", "changed_by", "changed_at"]
    {
        assert!(d.get(field).is_some(), "field {field} in {d}");
    }
    for field in ["apiVersion", "kind", "namespace", "name"] {
        assert!(d["resource"].get(field).is_some(), "resource.{field}");
    }
    assert_eq!(doc["summary"]["drifts"], 8);
    // The seed's five kinds of drift (replicas, image tag, resources: limits and requests, Service
    // port, ConfigMap), each with the severity of the seed's table (docs/drift-types.md).
    for (kind, severity) in [
        ("replicas_drift", "LOW"),
        ("image_tag_drift", "HIGH"),
        ("resource_limit_drift", "HIGH"),
        ("resource_request_drift", "MEDIUM"),
        ("service_port_drift", "CRITICAL"),
        ("configmap_drift", "MEDIUM"),
    ] {
        let found: Vec<&str> =
            drifts.iter().filter(|d| d["drift_type"] == kind).map(|d| d["severity"].as_str().unwrap()).collect();
        assert_eq!(found, [severity], "the demo shows {kind} once, as {severity}");
    }
    // Each drift but the missing object carries the patch that restores Git's value, and the
    // kubectl command that sends it (docs/remediation.md).
    for d in drifts {
        let missing = d["drift_type"] == "missing_resource";
        assert_eq!(d.get("revert").is_none(), missing, "{d}");
        if !missing {
            assert!(d["revert"]["command"].as_str().unwrap().starts_with("kubectl patch "), "{d}");
        }
    }
    let port = drifts.iter().find(|d| d["drift_type"] == "service_port_drift").unwrap();
    assert_eq!(
        port["revert"]["patch"],
        serde_json::json!([
            {"op": "test", "path": "/spec/ports/0/targetPort", "value": port["cluster_value"]},
            {"op": "replace", "path": "/spec/ports/0/targetPort", "value": port["git_value"]},
        ])
    );
    let env = drifts.iter().find(|d| d["drift_type"] == "spec_drift").unwrap();
    let ops: Vec<&str> = env["revert"]["patch"].as_array().unwrap().iter().map(|o| o["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["test", "remove"], "a variable only the cluster has is removed: {env}");
    // The autoscaled api's replica count is not drift.
    assert!(!drifts.iter().any(|d| d["resource"]["name"] == "api" && d["drift_type"] == "replicas_drift"));
}

#[test]
fn table_and_yaml_outputs() {
    let (code, out, _) = drift(&["diff", "--desired", "examples/demo/desired", "--live", "examples/demo/live"]);
    assert_eq!(code, 1);
    assert!(out.contains("CRITICAL service_port_drift     spec.ports[port=80].targetPort"), "{out}");
    assert!(out.contains("changed by kubectl-scale at 2026-11-27T22:41:09+00:00"), "{out}");
    assert!(!out.contains('\u{1b}'), "no colour when not a terminal");
    assert!(out.ends_with("8 drift(s) in 4 of 6 object(s): 1 CRITICAL, 3 HIGH, 3 MEDIUM, 1 LOW\n"), "{out}");
    let (code, out, _) =
        drift(&["diff", "--desired", "examples/demo/desired", "--live", "examples/demo/live", "-o", "yaml"]);
    assert_eq!(code, 1);
    assert!(out.contains("drift_type: service_port_drift"), "{out}");
}

#[test]
fn in_sync_is_exit_0() {
    // A real pair whose live side only has what the API server adds (defaults, status).
    let Some(pair) = drift_testkit::corpus::dir("in_sync_is_exit_0", "pairs/ge-smd-deploy-defaults") else { return };
    let file = |f: &str| pair.join(f).display().to_string();
    let (code, out, err) = drift(&["diff", "--desired", &file("desired.yaml"), "--live", &file("live.yaml")]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("0 drift(s)"), "{out}");
}

#[test]
fn the_desired_state_against_itself_is_exit_0() {
    let (code, out, err) = drift(&["diff", "--desired", "examples/demo/desired", "--live", "examples/demo/desired"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("0 drift(s)"), "{out}");
}

#[test]
fn ignore_file_removes_drifts() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("ignore.yaml");
    std::fs::write(&rules, "- kind: Deployment\n  name: web\n  jsonPointers: [/spec/replicas]\n- kind: ConfigMap\n  managers: [kubectl-edit]\n").unwrap();
    let (code, out, _) = drift(&[
        "diff",
        "--desired",
        "examples/demo/desired",
        "--live",
        "examples/demo/live",
        "-o",
        "json",
        "--ignore",
        rules.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["summary"]["drifts"], 6, "the demo's 8 less the two ignored: {out}");
}

#[test]
fn bad_input_is_exit_2_with_file_and_line_and_the_rest_still_compared() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("desired")).unwrap();
    std::fs::write(dir.path().join("desired/bad.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [oops\n")
        .unwrap();
    std::fs::write(
        dir.path().join("desired/good.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: good, namespace: x}\ndata: {a: b}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("live.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: good, namespace: x}\ndata: {a: c}\n",
    )
    .unwrap();
    let d = dir.path().join("desired");
    let l = dir.path().join("live.yaml");
    let (code, out, _) = drift(&["diff", "--desired", d.to_str().unwrap(), "--live", l.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("bad.yaml:4"), "file and line: {out}");
    assert!(out.contains("data.a"), "the good file is still compared: {out}");
    let (code, _, err) = drift(&["diff", "--desired", "/nonexistent", "--live", l.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent"), "{err}");
}

#[test]
fn a_live_file_that_cannot_be_read_makes_nothing_look_missing() {
    let dir = tempfile::tempdir().unwrap();
    let desired = dir.path().join("desired.yaml");
    std::fs::write(&desired, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: x}\ndata: {k: v}\n")
        .unwrap();
    let live = dir.path().join("live.yaml");
    std::fs::write(&live, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [unclosed\n").unwrap();
    let (code, out, err) =
        drift(&["diff", "--desired", desired.to_str().unwrap(), "--live", live.to_str().unwrap(), "-o", "json"]);
    assert_eq!(code, 2, "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["drifts"], serde_json::json!([]), "nothing reported missing: {out}");
    let warnings = doc["warnings"].as_array().unwrap();
    assert!(warnings.iter().any(|w| w["message"].as_str().unwrap().contains("invalid YAML")), "{out}");
    assert_eq!(doc["summary"]["warnings"].as_u64().unwrap() as usize, warnings.len(), "counted in the summary");
}

#[test]
fn a_cluster_dump_over_the_document_bound_is_read_item_by_item() {
    let dir = tempfile::tempdir().unwrap();
    let desired = dir.path().join("desired.yaml");
    std::fs::write(&desired, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-7, namespace: x}\ndata: {k: v}\n")
        .unwrap();
    // `kubectl get -A -o yaml` and `-o json` of a real cluster: one List over 16 MiB.
    let n = 60_000;
    let yaml_items: String = (0..n)
        .map(|i| format!("- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: cm-{i}\n    namespace: x\n  data:\n    k: v\n    pad: {}\n", "p".repeat(220)))
        .collect();
    let yaml = dir.path().join("live.yaml");
    std::fs::write(
        &yaml,
        format!("apiVersion: v1\nitems:\n{yaml_items}kind: List\nmetadata:\n  resourceVersion: \"\"\n"),
    )
    .unwrap();
    let json_items: Vec<Value> = (0..n)
        .map(|i| {
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i}"), "namespace": "x"}, "data": {"k": "v", "pad": "p".repeat(220)}})
        })
        .collect();
    let json = dir.path().join("live.json");
    let list = serde_json::json!({"apiVersion": "v1", "items": json_items, "kind": "List", "metadata": {}});
    std::fs::write(&json, serde_json::to_string_pretty(&list).unwrap()).unwrap();
    for live in [&yaml, &json] {
        assert!(std::fs::metadata(live).unwrap().len() > 16 << 20);
        let (code, out, err) =
            drift(&["diff", "--desired", desired.to_str().unwrap(), "--live", live.to_str().unwrap(), "-o", "json"]);
        assert_eq!(code, 0, "{} in sync: {err} {}", live.display(), &out[..out.len().min(2000)]);
    }
    // A document that large that is not a List is an error of its own, named.
    let big = dir.path().join("big.yaml");
    std::fs::write(
        &big,
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm-7, namespace: x}}\ndata:\n  blob: {}\n",
            "b".repeat(17 << 20)
        ),
    )
    .unwrap();
    let (code, out, _) =
        drift(&["diff", "--desired", desired.to_str().unwrap(), "--live", big.to_str().unwrap(), "-o", "json"]);
    assert_eq!(code, 2);
    assert!(out.contains("larger than the limit"), "{}", &out[..out.len().min(2000)]);
}

#[test]
fn secret_values_never_printed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("d.yaml");
    let l = dir.path().join("l.yaml");
    std::fs::write(
        &d,
        "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: x}\nstringData: {password: correct-horse}\n",
    )
    .unwrap();
    // "battery-staple" in base64
    std::fs::write(
        &l,
        "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: x}\ndata: {password: YmF0dGVyeS1zdGFwbGU=}\n",
    )
    .unwrap();
    for format in ["table", "json", "yaml"] {
        let (code, out, err) =
            drift(&["diff", "--desired", d.to_str().unwrap(), "--live", l.to_str().unwrap(), "-o", format]);
        assert_eq!(code, 1);
        for leak in ["correct-horse", "battery-staple", "YmF0dGVyeS1zdGFwbGU="] {
            assert!(!out.contains(leak) && !err.contains(leak), "{format} leaked {leak}");
        }
        assert!(out.contains("secret_drift") && out.contains("hmac-sha256:"), "{out}");
    }
}

/// Logs to a pipe or a file are plain text: ANSI colour codes only on a terminal (and never with
/// `NO_COLOR`).
#[test]
fn logs_to_a_pipe_carry_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("desired")).unwrap();
    std::fs::create_dir_all(d.join("live")).unwrap();
    std::fs::write(
        d.join("desired/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: shop}\ndata: {mode: fast}\n",
    )
    .unwrap();
    std::fs::write(
        d.join("live/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: shop}\ndata: {mode: fast}\n",
    )
    .unwrap();
    let config = d.join("drift.yaml");
    std::fs::write(
        &config,
        format!(
            "cluster: test\ndatabase: sqlite://{0}/drift.db\nrepositories:\n  - name: shop\n    url: {0}/desired\nlive:\n  snapshot: {0}/live\n",
            d.display()
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_drift"))
        .args(["scan", "--config"])
        .arg(&config)
        .env_remove("NO_COLOR")
        .env("DRIFT_LOG", "info")
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("scan recorded"), "the log is there: {err}");
    assert!(!err.contains('\u{1b}'), "no escape codes in a pipe: {err:?}");
}

/// A token in a git URL's query string (or a password the URL parser cannot read) never reaches
/// the output, the logs, the store or the cache folder's name (issue 16).
#[test]
fn secrets_in_a_git_url_reach_no_output_no_row_and_no_folder_name() {
    for (url, canary) in [
        ("https://127.0.0.1:1/o/r.git?token=CANARY7f3q", "CANARY7f3q"),
        ("https://u:CANARY8k2/w?x@127.0.0.1:1/o/r.git", "CANARY8k2"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("live")).unwrap();
        let config = d.join("drift.yaml");
        std::fs::write(
            &config,
            format!(
                "cluster: c\nstore: sqlite://{0}/drift.db\nrepositories:\n  - name: r\n    url: \"{url}\"\n    cache_dir: {0}/cache\nlive:\n  snapshot: {0}/live\n",
                d.display()
            ),
        )
        .unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_drift"))
            .args(["scan", "--config"])
            .arg(&config)
            .env("DRIFT_LOG", "debug")
            .output()
            .unwrap();
        let shown = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(!shown.contains(canary), "{url}: {shown}");
        assert!(shown.contains("failed") || shown.contains("not a valid URL"), "the scan says what failed: {shown}");
        let (code, checked, _) = {
            let o = Command::new(env!("CARGO_BIN_EXE_drift")).args(["config", "check"]).arg(&config).output().unwrap();
            (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr), ())
        };
        assert!(!checked.contains(canary), "{url}: config check: {checked} ({code:?})");
        let db = std::fs::read(d.join("drift.db")).unwrap_or_default();
        assert!(!db.windows(canary.len()).any(|w| w == canary.as_bytes()), "{url}: the store holds it");
        for entry in walk(&d.join("cache")) {
            assert!(!entry.contains(canary), "{url}: a cache folder is named {entry}");
        }
    }
}

fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        out.push(e.path().display().to_string());
        if e.path().is_dir() {
            out.extend(walk(&e.path()));
        }
    }
    out
}

/// A database password (with an unencoded `?` or `/`, which no URL parser reads) never reaches
/// the output of `config check`, `scan`, `migrate` or `drifts list`, from the file or from
/// `database_env` (issue 16).
#[test]
fn database_passwords_reach_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("desired")).unwrap();
    std::fs::create_dir_all(d.join("live")).unwrap();
    let canary = "CANARY9p?x/y";
    let url = format!("postgres://drift:{canary}@127.0.0.1:1/db");
    let base = format!(
        "cluster: c\nrepositories:\n  - name: r\n    url: {0}/desired\nlive:\n  snapshot: {0}/live\n",
        d.display()
    );
    let in_file = d.join("file.yaml");
    std::fs::write(&in_file, format!("store: \"{url}\"\n{base}")).unwrap();
    let from_env = d.join("env.yaml");
    std::fs::write(&from_env, format!("database_env: DRIFT_TEST_DB\n{base}")).unwrap();
    for config in [&in_file, &from_env] {
        for args in
            [&["config", "check"][..], &["scan", "--config"], &["migrate", "--config"], &["drifts", "list", "--config"]]
        {
            let out = Command::new(env!("CARGO_BIN_EXE_drift"))
                .args(args)
                .arg(config)
                .env("DRIFT_TEST_DB", &url)
                .env("DRIFT_LOG", "debug")
                .output()
                .unwrap();
            let shown = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            for part in ["CANARY9p", "x/y"] {
                assert!(!shown.contains(part), "{args:?} {}: {shown}", config.display());
            }
        }
    }
}
