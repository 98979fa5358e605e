//! A credentials Secret rotated while `drift serve` runs (issue 35, item 1; docs/kubernetes.md,
//! "Several clusters"): a cluster reached through a Flux kubeconfig Secret (a file, as a mounted
//! Secret is) over TLS with a bearer token. The API server's token is rotated: the old one is
//! refused, so the next pass cannot read the cluster; the Secret is written again with the new
//! token and the running detector takes it (no restart): passes read the cluster again. A Secret
//! that then names another server is not taken (a restart is needed, said once) and the
//! credentials in hand go on working. No token appears in the log.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{GitRepo, Serve, kubectl};
use drift_test_apiserver::{Options, TestApiServer};

const API_TOKEN: &str = "credentials-api-token-3b8e";
const FIRST: &str = "cluster-token-first-9a41c7";
const ROTATED: &str = "cluster-token-rotated-62d05e";

/// A Flux kubeconfig Secret holding `kubeconfig`, written to `path`.
fn write_secret(path: &Path, kubeconfig: &str) {
    let secret = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "east-kubeconfig", "namespace": "flux-system"},
        "stringData": {"value": kubeconfig},
    });
    std::fs::write(path, secret.to_string()).unwrap();
}

/// A pass over every cluster; the outcome of east's.
fn pass(addr: &str) -> String {
    let report = common::scan_now(addr, API_TOKEN);
    let east = report["reports"].as_array().unwrap().iter().find(|r| r["cluster"] == "east").cloned();
    east.unwrap_or_else(|| panic!("a report of east: {report}"))["outcome"].as_str().unwrap().to_owned()
}

#[test]
fn a_rotated_token_in_a_credentials_secret_is_taken_without_a_restart() {
    let home = tempfile::tempdir().unwrap();
    let repo = GitRepo::shop(home.path().join("repo"));
    let east =
        TestApiServer::start(Options { tls: true, token: Some(FIRST.to_owned()), ..Options::default() }).unwrap();
    kubectl(east.kubeconfig_path(), home.path(), &["apply", "-R", "-f", repo.dir.join("apps").to_str().unwrap()], &[]);
    let secret = home.path().join("east-secret.json");
    write_secret(&secret, &std::fs::read_to_string(east.kubeconfig_path()).unwrap());
    let config = home.path().join("drift.yaml");
    std::fs::write(
        &config,
        format!(
            "interval: 1h\nstore: sqlite://{db}\napi:\n  listen: 127.0.0.1:0\n  token_env: CRED_TOKEN\n\
             live:\n  retries: 1\n  retry_backoff: 20ms\n\
             clusters:\n  - name: east\n    secret: {{file: {secret}, refresh: 200ms}}\n\
             repositories:\n  - name: shop\n    url: file://{repo}\n    ref: main\n    cache_dir: {cache}\n    path: apps\n",
            db = home.path().join("drift.db").display(),
            secret = secret.display(),
            repo = repo.dir.display(),
            cache = home.path().join("cache").display(),
        ),
    )
    .unwrap();
    let serve = Serve::start(&config, &[("CRED_TOKEN", API_TOKEN)]);
    assert_eq!(pass(&serve.addr), "success", "{}", serve.log());

    // The token is rotated on the server: the one in hand is refused.
    east.rotate_token(ROTATED).unwrap();
    assert_ne!(pass(&serve.addr), "success", "the old token must be refused: {}", serve.log());
    // The Secret gets the new token (as `argocd cluster rotate-auth` or a new service account
    // token would write it): the running detector takes it.
    write_secret(&secret, &std::fs::read_to_string(east.kubeconfig_path()).unwrap());
    let started = Instant::now();
    while pass(&serve.addr) != "success" {
        assert!(started.elapsed() < Duration::from_secs(20), "the new token taken: {}", serve.log());
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(serve.log().contains("the cluster's token was rotated in its credentials Secret"), "{}", serve.log());

    // A Secret naming another server: kept for a restart, said once; the credentials in hand work.
    let moved = std::fs::read_to_string(east.kubeconfig_path()).unwrap().replace(&east.url(), "https://127.0.0.1:9");
    write_secret(&secret, &moved);
    let said = "changed in more than its bearer token";
    let started = Instant::now();
    while !serve.log().contains(said) {
        assert!(started.elapsed() < Duration::from_secs(20), "the restart asked for: {}", serve.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(pass(&serve.addr), "success", "{}", serve.log());
    let log = serve.stop();
    assert_eq!(log.matches(said).count(), 1, "said once: {log}");
    for token in [FIRST, ROTATED] {
        assert!(!log.contains(token), "a token in the log: {log}");
    }
}
