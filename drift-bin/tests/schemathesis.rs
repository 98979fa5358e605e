//! The API against its own OpenAPI document: schemathesis (PyPI, installed pinned in the tools
//! venv by scripts/install-tools.sh) runs every check against `drift serve` and any failure fails
//! this test. The service is fully configured, so that every endpoint does its real work: the
//! shop applied from a real git repository to the test API server with the real kubectl, three
//! hand changes (open drifts), SQLite (decisions, audit, deliveries), the write token; reverts
//! patch the cluster and accepts push branches to the repository. A second test runs it against
//! a partly configured server (a snapshot file for live state, so revert answers 501; no notifier,
//! no policies): both report 0 failures.
//!
//! Without the venv the test says that it is skipped, unless `DRIFT_REQUIRE_TOOLS=1` (set by
//! scripts/test) makes that a failure. `DRIFT_SCHEMATHESIS_EXAMPLES` (default 25 per operation
//! and phase) and `DRIFT_SCHEMATHESIS_SEED` (default 16) change the run; see docs/api.md.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Answer, GitRepo, Receiver, Serve, edit_configmap, get_json, kubectl, wait_for};
use drift_test_apiserver::{Options, TestApiServer};

const TOKEN: &str = "st-Zq81-contract-token";
/// The whole schemathesis run is killed after this (about 10 seconds per server with the defaults).
const RUN_LIMIT: Duration = Duration::from_secs(540);

/// `$DRIFT_TOOLS_DIR/venv/bin/schemathesis` when it runs; otherwise `None` after saying that the
/// test is skipped, or a failure under `DRIFT_REQUIRE_TOOLS=1`.
fn schemathesis(test: &str) -> Option<PathBuf> {
    let tools =
        std::env::var_os("DRIFT_TOOLS_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/var/tmp/drift-tools"));
    let program = tools.join("venv/bin/schemathesis");
    if Command::new(&program).arg("--version").output().is_ok_and(|o| o.status.success()) {
        return Some(program);
    }
    let reason = format!("{} does not run (scripts/install-tools.sh installs it)", program.display());
    let required = std::env::var("DRIFT_REQUIRE_TOOLS").is_ok_and(|v| v == "1");
    assert!(!required, "{test}: {reason}, and DRIFT_REQUIRE_TOOLS=1");
    println!("skipped: {test}: {reason}");
    None
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().map_or(default, |v| v.parse().unwrap_or_else(|_| panic!("{name}={v:?} is not a number")))
}

#[test]
fn drift_serve_conforms_to_its_openapi_document() {
    let Some(schemathesis) = schemathesis("drift_serve_conforms_to_its_openapi_document") else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let server = TestApiServer::start(Options::default()).unwrap();
    let kubeconfig = server.kubeconfig_path();
    let repo = GitRepo::shop(home.path().join("repo"));
    kubectl(kubeconfig, home.path(), &["apply", "-R", "-f", repo.dir.join("apps").to_str().unwrap()], &[]);
    edit_configmap(kubeconfig, home.path(), "fast", "slow");
    kubectl(kubeconfig, home.path(), &["scale", "deployment", "web", "-n", "shop", "--replicas=5"], &[]);
    kubectl(kubeconfig, home.path(), &["label", "service", "web", "-n", "shop", "team=night"], &[]);
    // A webhook receiver that refuses every delivery with 400: the deliveries are parked at
    // once, so that requeue has something to put back.
    let receiver = Receiver::start();
    receiver.answer(Answer::Status(400));
    let cfg = home.path().join("drift.yaml");
    std::fs::write(
        &cfg,
        format!(
            "cluster: contract\ninterval: 1h\nwatch: false\ndatabase: sqlite://{db}\napi:\n  listen: 127.0.0.1:0\n\
             live:\n  kubeconfig: {kubeconfig}\n\
             repositories:\n  - name: shop\n    url: file://{repo}\n    ref: main\n    cache_dir: {cache}\n    path: apps\n\
             notify:\n  - name: hook\n    type: webhook\n    url: {hook}/hook\n    secret_env: CONTRACT_HOOK_SECRET\n\
             notifications:\n  tick: 100ms\npolicies:\n  enabled: true\naudit:\n  tick: 1s\n",
            db = home.path().join("drift.db").display(),
            repo = repo.dir.display(),
            cache = home.path().join("cache").display(),
            kubeconfig = kubeconfig.display(),
            hook = receiver.url,
        ),
    )
    .unwrap();
    let serve = Serve::start(
        &cfg,
        &[("DRIFT_API_TOKEN", TOKEN), ("CONTRACT_HOOK_SECRET", "contract-hook-secret"), ("RUST_LOG", "warn")],
    );
    wait_for(Duration::from_secs(60), "the first pass's drifts", || {
        let v = get_json(&serve.addr, "/drifts?status=open");
        (v["items"].as_array().unwrap().len() >= 3).then_some(())
    });
    // Policies are on: `GET /findings` lists real findings (the shop's containers set no
    // runAsNonRoot), and the reports of `POST /scan?wait=true` carry them.
    wait_for(Duration::from_secs(60), "the first pass's policy findings", || {
        let v = get_json(&serve.addr, "/findings?status=open");
        (!v["items"].as_array().unwrap().is_empty()).then_some(())
    });
    let parked = wait_for(Duration::from_secs(60), "a parked delivery", || {
        let v = get_json(&serve.addr, "/notifications?status=parked");
        v["items"].as_array().unwrap().first().map(|d| d["event_id"].as_str().unwrap().to_owned())
    });
    // The schemathesis configuration: every check as it comes, but for one rule JSON Schema
    // cannot state (an accept's `expires_at` must be in the future and at most 366 days away,
    // relative to now): a schema-valid decision may be refused with 400 for that alone. The
    // requeue is given the parked delivery (no operation of the API creates one).
    std::fs::write(
        home.path().join("schemathesis.toml"),
        format!(
            "[[operations]]\ninclude-operation-id = \"decide\"\n\
             checks.positive_data_acceptance.expected-statuses = [\"2xx\", \"3xx\", \"400\", \"401\", \"403\", \"404\", \"409\", \"429\", \"5xx\"]\n\n\
             [[operations]]\ninclude-operation-id = \"requeueNotification\"\n\
             parameters = {{ event_id = \"{parked}\", notifier = \"hook\" }}\n"
        ),
    )
    .unwrap();

    conforms(&schemathesis, serve, home.path(), "fully configured");
}

/// Runs schemathesis (its configuration written in `dir`) against `serve` and asserts 0 failures
/// over every operation of the document; `label` names the server's configuration.
fn conforms(schemathesis: &std::path::Path, serve: Serve, dir: &std::path::Path, label: &str) {
    let examples = env_or("DRIFT_SCHEMATHESIS_EXAMPLES", 25);
    let seed = env_or("DRIFT_SCHEMATHESIS_SEED", 16);
    let started = Instant::now();
    let mut cmd = Command::new(schemathesis);
    cmd.arg("--config-file")
        .arg(dir.join("schemathesis.toml"))
        .args(["run", &format!("http://{}/openapi.json", serve.addr), "--checks", "all"])
        .args(["--header", &format!("Authorization: Bearer {TOKEN}")])
        .args(["--max-examples", &examples.to_string(), "--seed", &seed.to_string()])
        .args(["--generation-database", "none", "--request-timeout", "30", "--no-color", "--output-sanitize", "true"])
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "120")
        .stdin(Stdio::null());
    // (Both pipes read while it runs, so that neither fills.)
    let ran = drift_testkit::process::output_within(&mut cmd, RUN_LIMIT).unwrap();
    let status = ran.status;
    let [stdout, stderr] = [ran.stdout, ran.stderr].map(|b| String::from_utf8(b).unwrap());
    let output = format!("{stdout}\n{stderr}");
    assert!(!output.contains(TOKEN), "schemathesis printed the write token");
    println!("schemathesis ({label}; {examples} examples per operation, seed {seed}) ran {:?}", started.elapsed());
    let Some(status) = status else {
        panic!("schemathesis ({label}) did not finish within {RUN_LIMIT:?}:\n{output}");
    };
    assert!(
        status.success(),
        "schemathesis found failures ({label}, {status}):\n{output}\nserver log:\n{}",
        serve.log()
    );
    // The run tested every operation of the document (one it cannot read is no pass either).
    let summary = output.rsplit_once("SUMMARY").map_or(output.as_str(), |(_, s)| s);
    println!("{summary}");
    let doc = get_json(&serve.addr, "/openapi.json");
    // Every operation but `GET /openapi.json`, which schemathesis leaves out as the document's own.
    let operations: usize =
        doc["paths"].as_object().unwrap().values().map(|p| p.as_object().unwrap().len()).sum::<usize>() - 1;
    assert!(
        summary.contains(&format!("Tested: {operations}")),
        "not every one of {operations} operations ran ({label}):\n{output}"
    );
    let log = serve.stop();
    assert!(!log.contains(TOKEN), "the token is never logged");
    assert!(!log.contains("panicked"), "{log}");
}

/// The same contract from a partly configured server, as a small homelab runs it: live state read
/// from a snapshot file (no cluster to write to, so revert and accept answer 501), SQLite, the
/// write token, but no notifier and no policies.
#[test]
fn a_partly_configured_drift_serve_conforms_to_its_openapi_document() {
    let Some(schemathesis) = schemathesis("a_partly_configured_drift_serve_conforms_to_its_openapi_document") else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let server = TestApiServer::start(Options::default()).unwrap();
    let kubeconfig = server.kubeconfig_path();
    let repo = GitRepo::shop(home.path().join("repo"));
    kubectl(kubeconfig, home.path(), &["apply", "-R", "-f", repo.dir.join("apps").to_str().unwrap()], &[]);
    edit_configmap(kubeconfig, home.path(), "fast", "slow");
    kubectl(kubeconfig, home.path(), &["scale", "deployment", "web", "-n", "shop", "--replicas=5"], &[]);
    // The live state as a file: the server reads it and never writes to a cluster.
    let snapshot = home.path().join("live.yaml");
    let live =
        kubectl(kubeconfig, home.path(), &["get", "configmaps,deployments,services", "-n", "shop", "-o", "yaml"], &[]);
    std::fs::write(&snapshot, live).unwrap();
    drop(server);
    let cfg = home.path().join("drift.yaml");
    std::fs::write(
        &cfg,
        format!(
            "cluster: homelab\ninterval: 1h\nwatch: false\ndatabase: sqlite://{db}\napi:\n  listen: 127.0.0.1:0\n\
             live:\n  snapshot: {snapshot}\n\
             repositories:\n  - name: shop\n    url: file://{repo}\n    ref: main\n    cache_dir: {cache}\n    path: apps\n",
            db = home.path().join("drift.db").display(),
            repo = repo.dir.display(),
            cache = home.path().join("cache").display(),
            snapshot = snapshot.display(),
        ),
    )
    .unwrap();
    let serve = Serve::start(&cfg, &[("DRIFT_API_TOKEN", TOKEN), ("RUST_LOG", "warn")]);
    wait_for(Duration::from_secs(60), "the first pass's drifts", || {
        let v = get_json(&serve.addr, "/drifts?status=open");
        (v["items"].as_array().unwrap().len() >= 2).then_some(())
    });
    // Revert and accept answer 501 here (`refusal: not_configured`), and the audit webhook (no
    // `audit:`): the document says so and schemathesis checks the body against it; its
    // server-error check allows 501 for these operations only (any other 5xx still fails), as
    // it fails every 5xx, documented or not.
    std::fs::write(
        home.path().join("schemathesis.toml"),
        "[[operations]]\ninclude-operation-id = \"decide\"\n\
         checks.positive_data_acceptance.expected-statuses = [\"2xx\", \"3xx\", \"400\", \"401\", \"403\", \"404\", \"409\", \"429\", \"5xx\"]\n\n\
         [[operations]]\ninclude-operation-id = \"revert\"\n\
         checks.not_a_server_error.expected-statuses = [\"2xx\", \"3xx\", \"4xx\", \"501\"]\n\n\
         [[operations]]\ninclude-operation-id = \"accept\"\n\
         checks.not_a_server_error.expected-statuses = [\"2xx\", \"3xx\", \"4xx\", \"501\"]\n\n\
         [[operations]]\ninclude-operation-id = \"auditWebhook\"\n\
         checks.not_a_server_error.expected-statuses = [\"2xx\", \"3xx\", \"4xx\", \"501\"]\n",
    )
    .unwrap();
    conforms(&schemathesis, serve, home.path(), "partly configured");
}
