//! What the whole-service benchmarks share (drift-bin/benches/service.rs and fleet.rs): the
//! fixture of N Deployments, Services and ConfigMaps over 100 namespaces, a durable PostgreSQL,
//! the changes of a storm and how a drift shows them, memory readings, percentiles.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use drift_test_apiserver::TestApiServer;
use drift_testkit_pg::PgServer;
use serde_json::{Value, json};

use crate::common::{GitRepo, get_json};

pub fn deployment(i: usize, replicas: u32) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": format!("app-{i}"), "namespace": format!("ns-{}", i % 100), "labels": {"app": format!("app-{i}")}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": format!("app-{i}")}},
            "template": {"metadata": {"labels": {"app": format!("app-{i}")}},
                "spec": {"containers": [{"name": "app", "image": format!("registry.example/app:{}.0", i % 7),
                    "ports": [{"containerPort": 8080}],
                    "env": [{"name": "MODE", "value": "prod"}],
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                                  "limits": {"cpu": "1", "memory": "1Gi"}}}]}}}})
}

pub fn service(i: usize, target: u16) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": format!("app-{i}"), "namespace": format!("ns-{}", i % 100)},
        "spec": {"selector": {"app": format!("app-{i}")}, "ports": [{"port": 80, "targetPort": target}]}})
}

pub fn configmap(i: usize, mode: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("app-{i}"), "namespace": format!("ns-{}", i % 100)},
        "data": {"mode": mode, "level": "info"}})
}

/// Object `i` of the fixture, as Git has it (`changed = false`) or changed by hand.
pub fn object(i: usize, changed: bool) -> Value {
    match i % 3 {
        0 => deployment(i, if changed { 5 } else { 2 }),
        1 => service(i, if changed { 9090 } else { 8080 }),
        _ => configmap(i, if changed { "debug" } else { "prod" }),
    }
}

/// A throwaway PostgreSQL that writes as a real one does (the test harness turns durability off).
pub fn durable_pg() -> PgServer {
    durable_pg_with(&[])
}

/// [`durable_pg`] with extra settings (what a run is traced with: `pg_stat_statements`,
/// `auto_explain`, slow statements and lock waits logged); durability as a real server's.
pub fn durable_pg_with(extra: &[(&str, &str)]) -> PgServer {
    let mut settings = vec![("fsync", "on"), ("synchronous_commit", "on"), ("full_page_writes", "on")];
    settings.extend_from_slice(extra);
    PgServer::start_with_settings(&settings).unwrap()
}

/// The answer of `psql` to `sql` on the database at `url`: rows of `|`-separated fields. Started
/// by its full path (spawned, not forked: see [`kubectl_path`]).
pub fn psql(url: &str, sql: &str) -> String {
    let bin = drift_testkit_pg::find_bin_dir().expect("PostgreSQL installed").join("psql");
    let out = std::process::Command::new(bin)
        .args(["-X", "-q", "-A", "-t", "-F", "|", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql])
        .env_clear()
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "psql {sql:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn database(pg: &PgServer) -> String {
    tokio::runtime::Runtime::new().unwrap().block_on(pg.create_database()).unwrap()
}

/// N objects over 100 namespaces: in Git, 100 per file (not committed), and in the test API
/// server, changed there where `changed(i)` says so.
pub fn fill(server: &TestApiServer, repo: &GitRepo, n: usize, changed: impl Fn(usize) -> bool) {
    fill_split(server, repo, n, n, changed);
}

/// `live` objects in the test API server, of which the first `desired` are also in Git.
pub fn fill_split(
    server: &TestApiServer,
    repo: &GitRepo,
    live: usize,
    desired: usize,
    changed: impl Fn(usize) -> bool,
) {
    let n = live;
    for ns in 0..100.min(n) {
        server
            .create_object(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("ns-{ns}")}}))
            .unwrap();
    }
    for chunk in 0..n.div_ceil(100) {
        let mut text = String::new();
        for i in chunk * 100..((chunk + 1) * 100).min(n) {
            if i < desired {
                text.push_str("---\n");
                text.push_str(&serde_json::to_string(&object(i, false)).unwrap());
                text.push('\n');
            }
            server.create_object(&object(i, changed(i))).unwrap();
        }
        if !text.is_empty() {
            repo.write(&format!("apps/part-{chunk:04}.yaml"), &text);
        }
    }
}

/// `VmRSS` and `VmHWM` (peak) of a process, in KiB.
pub fn rss_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    };
    (field("VmRSS:"), field("VmHWM:"))
}

pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Change `round` of storm object `i` (one of the objects Git holds): its value as the drift's
/// `cluster_value`, the merge patch (path, body) that makes it, and the kubectl arguments that
/// make it.
pub fn storm_change(i: usize, round: usize) -> (Value, (String, String), Vec<String>) {
    let ns = format!("ns-{}", i % 100);
    let name = format!("app-{i}");
    match i % 3 {
        0 => {
            let replicas = 10 + round;
            (
                json!(replicas),
                (
                    format!("/apis/apps/v1/namespaces/{ns}/deployments/{name}"),
                    json!({"spec": {"replicas": replicas}}).to_string(),
                ),
                vec!["scale".into(), format!("deployment/{name}"), "-n".into(), ns, format!("--replicas={replicas}")],
            )
        }
        1 => {
            let port = 10_000 + round;
            let patch = json!({"spec": {"ports": [{"port": 80, "targetPort": port}]}}).to_string();
            (
                json!(port),
                (format!("/api/v1/namespaces/{ns}/services/{name}"), patch.clone()),
                vec![
                    "patch".into(),
                    "service".into(),
                    name,
                    "-n".into(),
                    ns,
                    "--type=merge".into(),
                    "-p".into(),
                    patch,
                ],
            )
        }
        _ => {
            let mode = format!("storm-{round}");
            let patch = json!({"data": {"mode": mode}}).to_string();
            (
                json!(mode),
                (format!("/api/v1/namespaces/{ns}/configmaps/{name}"), patch.clone()),
                vec![
                    "patch".into(),
                    "configmap".into(),
                    name,
                    "-n".into(),
                    ns,
                    "--type=merge".into(),
                    "-p".into(),
                    patch,
                ],
            )
        }
    }
}

/// The (object, round) a drift of the storm shows, from its resource and cluster value.
pub fn storm_seen(item: &Value) -> Option<(usize, usize)> {
    let i: usize = item["resource_name"].as_str()?.strip_prefix("app-")?.parse().ok()?;
    let v = &item["cluster_value"];
    let round = match i % 3 {
        0 => v.as_u64()?.checked_sub(10)?,
        1 => v.as_u64()?.checked_sub(10_000)?,
        _ => v.as_str()?.strip_prefix("storm-")?.parse().ok()?,
    };
    Some((i, usize::try_from(round).ok()?))
}

/// Every page of `GET /drifts` with `query`.
pub fn all_drifts(addr: &str, query: &str) -> Vec<Value> {
    let mut items = Vec::new();
    let mut after = None::<i64>;
    loop {
        let cursor = after.map(|a| format!("&after={a}")).unwrap_or_default();
        let page = get_json(addr, &format!("/drifts?limit=1000{query}{cursor}"));
        items.extend(page["items"].as_array().unwrap().iter().cloned());
        match page["next"].as_i64() {
            Some(n) => after = Some(n),
            None => return items,
        }
    }
}

/// N objects over 100 namespaces in the test API server, as Git has them (the live side of
/// [`fill_split`] alone, for a second cluster of the same repository).
pub fn fill_live(server: &TestApiServer, n: usize) {
    for ns in 0..100.min(n) {
        server
            .create_object(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("ns-{ns}")}}))
            .unwrap();
    }
    for i in 0..n {
        server.create_object(&object(i, false)).unwrap();
    }
}

/// kubectl's full path, from PATH. A program looked up in a PATH the command sets makes std
/// fork this process (gigabytes: the test API servers' objects) instead of spawning it, which
/// costs more CPU than the work measured and stalls the API servers while the page tables are
/// copied: start kubectl by this path, with `env_clear()`.
pub fn kubectl_path() -> std::path::PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
        .expect("kubectl on PATH")
}
