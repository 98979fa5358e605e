//! `drift serve` as an operator runs it: the first pass is recorded, the API answers, POST /scan
//! needs the token, metrics are served, SIGTERM stops it cleanly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::http;

/// A drift.yaml in `dir` that serves the demo's desired state (examples/demo) with a SQLite
/// store in `dir`, no watch, the API on a free port with `api_extra` (lines of its own), and
/// the live state of `live` (the lines under `live:`; the demo's snapshot when `None`).
fn demo_config(dir: &Path, api_extra: &str, live: Option<&str>) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let snapshot = format!("  snapshot: {}/examples/demo/live\n", root.display());
    let cfg = dir.join("drift.yaml");
    std::fs::write(
        &cfg,
        format!(
            "cluster: demo\nwatch: false\ndatabase: sqlite://{}/drift.db\napi:\n  listen: 127.0.0.1:0\n{api_extra}repositories:\n  - name: demo\n    url: {}/examples/demo/desired\nlive:\n{}",
            dir.display(),
            root.display(),
            live.unwrap_or(&snapshot),
        ),
    )
    .unwrap();
    cfg
}

#[test]
fn serve_records_the_first_pass_and_answers_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = demo_config(dir.path(), "", None);
    let mut child = Command::new(env!("CARGO_BIN_EXE_drift"))
        .args(["serve", "--config", cfg.to_str().unwrap()])
        .env("DRIFT_API_TOKEN", "s3cret-token-value")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().strip_prefix("listening on ").expect("address line").to_owned();

    assert_eq!(http(&addr, "GET", "/health", None).0, 200);
    // The first pass runs at start; wait for its 8 drifts (bounded).
    let deadline = Instant::now() + Duration::from_secs(60);
    let body = loop {
        let (status, body) = http(&addr, "GET", "/drifts?status=open", None);
        assert_eq!(status, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        if v["items"].as_array().unwrap().len() == 8 {
            break body;
        }
        assert!(Instant::now() < deadline, "first pass not recorded: {body}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(body.contains("service_port_drift"), "{body}");
    assert_eq!(http(&addr, "GET", "/drifts?severity=SEVERE", None).0, 400);
    assert_eq!(http(&addr, "POST", "/scan", None).0, 401);
    assert_eq!(http(&addr, "POST", "/scan", Some("wrong")).0, 401);
    let (status, body) = http(&addr, "POST", "/scan?wait=true", Some("s3cret-token-value"));
    assert_eq!(status, 200, "{body}");
    assert!(!body.contains("s3cret-token-value"));
    let (status, metrics) = http(&addr, "GET", "/metrics", None);
    assert_eq!(status, 200);
    assert!(metrics.contains("drift_open_drifts_by_severity"), "{metrics}");
    assert!(metrics.contains("drift_scans_total"), "{metrics}");

    let status = drift_testkit::process::terminate(&mut child, Duration::from_secs(60)).unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "clean exit on SIGTERM: {status:?} {err}");
    assert!(!err.contains("s3cret-token-value"), "the token is never logged");
}

/// `drift serve` with the `api` settings of issue 37, item 5: a `Host` it does not answer to is
/// 421, one listed in `api.allowed_hosts` is served, and a connection that sends its headers
/// slowly is closed after `api.header_read_timeout` while `/health` answers.
#[test]
fn serve_answers_421_to_other_hosts_and_closes_slow_headers_after_the_configured_timeout() {
    use std::io::Write;
    use std::net::TcpStream;
    let dir = tempfile::tempdir().unwrap();
    let cfg = demo_config(
        dir.path(),
        "  allowed_hosts: [drift.example.com]\n  header_read_timeout: 500ms\n  idle_timeout: 1s\n",
        None,
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_drift"))
        .args(["serve", "--config", cfg.to_str().unwrap()])
        .env_remove("POD_NAMESPACE")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().strip_prefix("listening on ").expect("address line").to_owned();
    let ask = |host: &str| {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(s, "GET /drifts HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out.split(' ').nth(1).unwrap().parse::<u16>().unwrap()
    };
    assert_eq!(ask("attacker.example"), 421);
    assert_eq!(ask("drift.example.com"), 200);
    assert_eq!(ask(&addr), 200);
    assert_eq!(ask("localhost"), 200);

    let mut slow = TcpStream::connect(&addr).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    slow.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n").unwrap();
    assert_eq!(http(&addr, "GET", "/health", None).0, 200, "answered while a slow client waits");
    let mut buf = [0u8; 16];
    // Closed without an answer (a read timeout would be an error: never closed).
    assert_eq!(slow.read(&mut buf).unwrap(), 0, "the slow connection is closed");

    assert!(drift_testkit::process::terminate(&mut child, Duration::from_secs(60)).unwrap().success());
}

/// A SIGTERM the moment `drift serve` says where it listens stops it cleanly (exit 0, after its
/// shutdown), every time. Its signals were listened for only once the service first waited for
/// one, after the line was printed: until then a SIGTERM killed it outright (35 of 40 runs did
/// so when this test was written), and one arriving while tokio turned delivery on could be
/// lost, leaving the server running after its SIGTERM.
#[test]
fn a_sigterm_as_soon_as_it_listens_stops_it_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = demo_config(dir.path(), "", None);
    for run in 0..10 {
        // (`stop` sends SIGTERM at once and asserts a clean exit within a minute.)
        let log = common::Serve::start(&cfg, &[]).stop();
        assert!(log.contains("shutting down"), "run {run}: the service shut down as it does on SIGTERM:\n{log}");
    }
}

/// The stop is bounded: SIGTERM while a pass is stuck (its LIST held by the API server) starts
/// the shutdown, which gives the pass its grace (it is still running a second later); a second
/// signal then ends the process at once, with exit code 2 and a line that says why.
#[test]
fn a_second_signal_during_the_shutdown_ends_it_at_once() {
    use drift_test_apiserver::{FaultAction, FaultMatch, FaultRule, Faults};
    let cluster = common::ClusterHome::start(drift_test_apiserver::Options::default());
    let live = format!("  kubeconfig: {}\n", cluster.server.kubeconfig_path().display());
    let config = demo_config(cluster.home.path(), "", Some(&live));
    let held = cluster.server.holds().arrived;
    let list = FaultMatch { verb: Some("list".into()), ..FaultMatch::default() };
    cluster
        .server
        .set_faults(Faults { faults: vec![FaultRule { matcher: list, action: FaultAction::Hold, times: Some(1) }] });
    let mut serve = common::Serve::start(&config, &[]);
    cluster.server.wait_held(held + 1);
    serve.signal("TERM");
    assert!(serve.exited_within(Duration::from_secs(1)).is_none(), "the held pass has its grace:\n{}", serve.log());
    assert!(serve.log().contains("shutting down"), "{}", serve.log());
    serve.signal("INT");
    let status = serve.exited_within(Duration::from_secs(20));
    cluster.server.release_held();
    let log = serve.kill();
    assert_eq!(status.and_then(|s| s.code()), Some(2), "exited at once on the second signal:\n{log}");
    assert!(log.contains("a second signal: exiting now"), "{log}");
}
