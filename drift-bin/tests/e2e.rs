//! End to end, as an operator runs it: `drift serve` over a real git repository, the test API
//! server driven by the real kubectl, and a real PostgreSQL. Objects applied from the
//! repository give no drift; each hand change appears with its type, severity and manager;
//! putting it back (or committing it to Git) resolves it; an API server outage resolves
//! nothing and shows in /ready and the metrics; a restart keeps history; watch mode records a
//! change without waiting for the next scan.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{DEPLOYMENT, GitRepo, Serve, get_json, http, kubectl, wait_for};
use drift_test_apiserver::{FaultAction, FaultRule, Faults, Options, TestApiServer};
use drift_testkit_pg::PgServer;
use serde_json::Value;

const TOKEN: &str = "e2e-token-7f3a9c";

/// A cluster, a repository, a database and a configuration file naming them.
struct World {
    server: TestApiServer,
    home: tempfile::TempDir,
    repo: GitRepo,
    _pg: PgServer,
    db_url: String,
    config: PathBuf,
}

impl World {
    fn start(watch: bool) -> World {
        let home = tempfile::tempdir().unwrap();
        let pg = PgServer::start().unwrap();
        let db_url = tokio::runtime::Runtime::new().unwrap().block_on(pg.create_database()).unwrap();
        let server = TestApiServer::start(Options::default()).unwrap();
        let repo = GitRepo::shop(home.path().join("repo"));
        let config = home.path().join("drift.yaml");
        std::fs::write(
            &config,
            format!(
                "cluster: e2e\ninterval: 1h\nwatch: {watch}\ndatabase_env: E2E_DATABASE_URL\napi:\n  listen: 127.0.0.1:0\n  token_env: E2E_TOKEN\n\
                 repositories:\n  - name: shop\n    url: file://{repo}\n    ref: main\n    path: apps\n    cache_dir: {cache}\n\
                 live:\n  kubeconfig: {kubeconfig}\n",
                repo = repo.dir.display(),
                cache = home.path().join("cache").display(),
                kubeconfig = server.kubeconfig_path().display(),
            ),
        )
        .unwrap();
        let world = World { server, home, repo, _pg: pg, db_url, config };
        world.kubectl(&["apply", "-R", "-f", world.repo.dir.join("apps").to_str().unwrap()]);
        world
    }

    fn kubectl(&self, args: &[&str]) -> String {
        kubectl(self.server.kubeconfig_path(), self.home.path(), args, &[])
    }

    /// `kubectl edit` of the ConfigMap with a sed script as the editor.
    fn edit_configmap(&self, from: &str, to: &str) {
        common::edit_configmap(self.server.kubeconfig_path(), self.home.path(), from, to);
    }

    fn patch_target_port(&self, port: u16) {
        let patch = format!(r#"[{{"op":"replace","path":"/spec/ports/0/targetPort","value":{port}}}]"#);
        self.kubectl(&["patch", "service", "web", "-n", "shop", "--type=json", "-p", &patch]);
    }

    fn serve(&self) -> Serve {
        Serve::start(&self.config, &[("E2E_DATABASE_URL", &self.db_url), ("E2E_TOKEN", TOKEN)])
    }
}

/// `POST /scan?wait=true` with the token: the report of the one repository.
fn scan(serve: &Serve) -> Value {
    let (status, body) = http(&serve.addr, "POST", "/scan?wait=true", Some(TOKEN));
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    v["reports"][0].clone()
}

/// Open (or resolved) drifts as (kind, type, severity, path, manager), sorted.
fn rows(serve: &Serve, status: &str) -> Vec<(String, String, String, String, String)> {
    let page = get_json(&serve.addr, &format!("/drifts?status={status}&limit=500"));
    let s = |d: &Value, k: &str| d[k].as_str().unwrap_or("").to_owned();
    let mut out: Vec<_> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (s(d, "resource_kind"), s(d, "drift_type"), s(d, "severity"), s(d, "path"), s(d, "changed_by")))
        .collect();
    out.sort();
    out
}

fn row(kind: &str, t: &str, sev: &str, path: &str, by: &str) -> (String, String, String, String, String) {
    (kind.into(), t.into(), sev.into(), path.into(), by.into())
}

/// The value of one sample of the Prometheus text, if present.
fn metric(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name_and_labels)?.trim().split(' ').next()?.parse().ok())
}

fn wait_ready(serve: &Serve) {
    wait_for(Duration::from_secs(60), "the first pass to be recorded", || {
        (http(&serve.addr, "GET", "/ready", None).0 == 200).then_some(())
    });
}

#[test]
fn kubectl_changes_are_recorded_with_type_severity_and_manager_and_resolved_when_put_back() {
    let world = World::start(false);
    let serve = world.serve();
    wait_ready(&serve);
    assert!(rows(&serve, "open").is_empty(), "nothing after kubectl apply from the repository");

    assert_eq!(http(&serve.addr, "POST", "/scan", None).0, 401);
    assert_eq!(http(&serve.addr, "POST", "/scan", Some("not-the-token")).0, 401);

    world.kubectl(&["scale", "deployment/web", "-n", "shop", "--replicas=5"]);
    world.kubectl(&["set", "image", "deployment/web", "-n", "shop", "web=nginx:1.28"]);
    world.kubectl(&["set", "resources", "deployment/web", "-n", "shop", "--limits=memory=512Mi"]);
    world.patch_target_port(9090);
    world.edit_configmap("fast", "slow");
    let report = scan(&serve);
    assert_eq!(report["outcome"], "success", "{report}");
    let expected = vec![
        row("ConfigMap", "configmap_drift", "MEDIUM", "data.mode", "kubectl-edit"),
        row("Deployment", "image_tag_drift", "HIGH", "spec.template.spec.containers[name=web].image", "kubectl-set"),
        row("Deployment", "replicas_drift", "LOW", "spec.replicas", "kubectl"),
        row(
            "Deployment",
            "resource_limit_drift",
            "HIGH",
            "spec.template.spec.containers[name=web].resources.limits.memory",
            "kubectl-set",
        ),
        row("Service", "service_port_drift", "CRITICAL", "spec.ports[port=80].targetPort", "kubectl-patch"),
    ];
    assert_eq!(rows(&serve, "open"), expected);
    let image = get_json(&serve.addr, "/drifts?status=open&drift_type=image_tag_drift");
    let image = &image["items"][0];
    assert_eq!(
        (image["git_value"].as_str(), image["cluster_value"].as_str()),
        (Some("nginx:1.27"), Some("nginx:1.28"))
    );

    let (_, metrics) = http(&serve.addr, "GET", "/metrics", None);
    for (sev, n) in [("CRITICAL", 1.0), ("HIGH", 2.0), ("MEDIUM", 1.0), ("LOW", 1.0)] {
        let sample = format!("drift_open_drifts_by_severity{{severity=\"{sev}\"}}");
        assert_eq!(metric(&metrics, &sample), Some(n), "{sample} in\n{metrics}");
    }

    // Seen again: the same rows, one more occurrence each, no duplicates.
    scan(&serve);
    let page = get_json(&serve.addr, "/drifts?status=open");
    assert_eq!(page["items"].as_array().unwrap().len(), 5);
    assert!(page["items"].as_array().unwrap().iter().all(|d| d["occurrences"] == 2), "{page}");

    // Put back by hand, except the image, which Git then accepts in a new commit.
    world.kubectl(&["scale", "deployment/web", "-n", "shop", "--replicas=2"]);
    world.kubectl(&["set", "resources", "deployment/web", "-n", "shop", "--limits=memory=256Mi"]);
    world.patch_target_port(8080);
    world.edit_configmap("slow", "fast");
    scan(&serve);
    assert_eq!(rows(&serve, "open"), vec![expected[1].clone()], "only the image is still open");
    world.repo.write("apps/web/deployment.yaml", &DEPLOYMENT.replace("nginx:1.27", "nginx:1.28"));
    let accepted_in = world.repo.commit("web: accept nginx 1.28");
    let report = scan(&serve);
    assert_eq!(report["revision"].as_str(), Some(accepted_in.as_str()), "{report}");
    assert!(rows(&serve, "open").is_empty(), "{:?}", rows(&serve, "open"));
    assert_eq!(rows(&serve, "resolved"), expected);
    let resolved = get_json(&serve.addr, "/drifts?status=resolved");
    assert!(resolved["items"].as_array().unwrap().iter().all(|d| d["resolved_at"].is_string()), "{resolved}");
    // The image went into Git: accepted; the rest was put back by hand: reverted.
    let mut how: Vec<(String, String)> = resolved["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["drift_type"].as_str().unwrap().to_owned(), d["resolution"].as_str().unwrap_or("").to_owned()))
        .collect();
    how.sort();
    let pair = |t: &str, r: &str| (t.to_owned(), r.to_owned());
    assert_eq!(
        how,
        vec![
            pair("configmap_drift", "reverted"),
            pair("image_tag_drift", "accepted"),
            pair("replicas_drift", "reverted"),
            pair("resource_limit_drift", "reverted"),
            pair("service_port_drift", "reverted"),
        ]
    );

    // `drift drifts list` says the same from the command line.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_drift"))
        .args(["drifts", "list", "--status", "resolved", "--config"])
        .arg(&world.config)
        .env("E2E_DATABASE_URL", &world.db_url)
        .output()
        .unwrap();
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let line = |t: &str| table.lines().find(|l| l.contains(t)).unwrap_or_else(|| panic!("{t} in\n{table}")).to_owned();
    assert!(line("image_tag_drift").contains("resolved:accepted"), "{table}");
    assert!(line("replicas_drift").contains("resolved:reverted"), "{table}");

    // A restart keeps history: the same rows, and its first pass opens nothing.
    let ids = |v: &Value| -> Vec<i64> {
        let mut ids: Vec<i64> = v["items"].as_array().unwrap().iter().map(|d| d["id"].as_i64().unwrap()).collect();
        ids.sort_unstable();
        ids
    };
    let log = serve.stop();
    assert!(!log.contains(TOKEN), "the token is never logged");
    let serve = world.serve();
    wait_ready(&serve);
    let after = get_json(&serve.addr, "/drifts?status=resolved");
    assert_eq!(ids(&after), ids(&resolved));
    assert!(rows(&serve, "open").is_empty());
    let stats = get_json(&serve.addr, "/stats");
    assert_eq!(stats["by_status"]["resolved"], 5, "{stats}");
    serve.stop();
}

#[test]
fn an_api_server_outage_resolves_nothing_and_shows_in_ready_and_metrics() {
    let world = World::start(false);
    let serve = world.serve();
    wait_ready(&serve);
    world.kubectl(&["scale", "deployment/web", "-n", "shop", "--replicas=4"]);
    scan(&serve);
    let before = get_json(&serve.addr, "/drifts?status=open");
    assert_eq!(before["items"].as_array().unwrap().len(), 1, "{before}");

    // Every request of the API server fails.
    world.server.set_faults(Faults {
        faults: vec![FaultRule {
            matcher: Default::default(),
            action: FaultAction::Error { code: 503, retry_after_seconds: None, message: None },
            times: None,
        }],
    });
    let report = scan(&serve);
    assert_eq!(report["outcome"], "failed", "{report}");
    let during = get_json(&serve.addr, "/drifts?status=open");
    assert_eq!(during["items"], before["items"], "an outage resolves nothing and counts nothing");
    let (status, ready) = http(&serve.addr, "GET", "/ready", None);
    assert_eq!(status, 503, "{ready}");
    assert!(ready.contains("failed"), "{ready}");
    let (_, metrics) = http(&serve.addr, "GET", "/metrics", None);
    assert_eq!(metric(&metrics, r#"drift_scans_total{repository="shop",outcome="failed"}"#), Some(1.0), "{metrics}");
    assert!(metric(&metrics, r#"drift_source_errors_total{kind="unavailable"}"#).unwrap_or(0.0) >= 1.0, "{metrics}");

    // The API server is back and the change is put back: resolved, and ready again.
    world.server.clear_faults();
    world.kubectl(&["scale", "deployment/web", "-n", "shop", "--replicas=2"]);
    assert_eq!(scan(&serve)["outcome"], "success");
    assert!(rows(&serve, "open").is_empty());
    assert_eq!(http(&serve.addr, "GET", "/ready", None).0, 200);
    serve.stop();
}

#[test]
fn watch_mode_records_a_change_and_its_revert_without_a_scan() {
    let world = World::start(true);
    let serve = world.serve();
    wait_ready(&serve);
    assert!(rows(&serve, "open").is_empty());
    let full_scans = |serve: &Serve| {
        let (_, metrics) = http(&serve.addr, "GET", "/metrics", None);
        metric(&metrics, r#"drift_scans_total{repository="shop",outcome="success"}"#)
    };
    let scans_before = full_scans(&serve);

    world.kubectl(&["scale", "deployment/web", "-n", "shop", "--replicas=7"]);
    let open = wait_for(Duration::from_secs(30), "the watched change to be recorded", || {
        let r = rows(&serve, "open");
        (!r.is_empty()).then_some(r)
    });
    assert_eq!(open, vec![row("Deployment", "replicas_drift", "LOW", "spec.replicas", "kubectl")]);
    world.kubectl(&["scale", "deployment/web", "-n", "shop", "--replicas=2"]);
    wait_for(Duration::from_secs(30), "the revert to be recorded", || rows(&serve, "open").is_empty().then_some(()));
    assert_eq!(rows(&serve, "resolved").len(), 1);

    let (_, metrics) = http(&serve.addr, "GET", "/metrics", None);
    let count = metric(&metrics, "drift_watch_lag_seconds_count").unwrap_or(0.0);
    assert!(count >= 2.0, "two changes went through watch mode: {metrics}");
    // No full scan ran meanwhile (the interval is an hour): watch mode did it alone.
    assert_eq!(full_scans(&serve), scans_before);
    serve.stop();
}
