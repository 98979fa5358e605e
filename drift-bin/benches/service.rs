//! Whole-service benchmarks of the `drift` binary (release build), written to
//! docs/benchmarks.md:
//!
//! - `full-scan [N]`: `drift scan` of N objects (Deployments, Services, ConfigMaps over 100
//!   namespaces, 1% changed by hand) served by the test API server, from a real git
//!   repository, into a real PostgreSQL: wall time and peak memory (`/usr/bin/time`).
//! - `watch-latency [N]`: `drift serve` in watch mode; N times `kubectl scale` to a new count,
//!   then `GET /drifts` polled every 2 ms until the drift shows the new count: the time from
//!   kubectl's return (and from its start) to the drift being readable, median, 99th
//!   percentile and maximum.
//!
//! - `notify-latency [N]`: `drift serve` in watch mode with a webhook notifier (`for: 0s`) to a
//!   local receiver; N times `kubectl scale`, then the time from kubectl's return to the signed
//!   webhook carrying the new count arriving at the receiver: median, 99th percentile, maximum.
//! - `notify-burst [N]`: one `drift scan` that opens N drifts (every object changed in the
//!   cluster) with two notifiers: the messages each receives, and the time to record the report
//!   with its N events (from the store's log line) and to send.
//!
//! - `serve-memory [LIVE] [DESIRED]`: `drift serve` with watch over LIVE objects in the test API
//!   server (default 100,000), DESIRED of them in Git (default 10,000), on PostgreSQL: resident
//!   memory sampled every second, its peak, and the steady figure after the first pass.
//! - `storm [LIVE] [DESIRED] [RATE] [SECONDS]`: a change storm (issue 33; `scripts/bench-storm`):
//!   `drift serve` with watch over LIVE objects (default 100,000), DESIRED of them in Git
//!   (default 10,000); RATE changes a second (default 1,000) for SECONDS (default 60) to the
//!   objects Git holds, each to a new value, made by HTTP clients of the test API server (merge
//!   patches over keep-alive connections) and, one in `DRIFT_STORM_KUBECTL` (default 200), by
//!   `kubectl scale` / `kubectl patch`. `GET /drifts?since=` is polled to see each value
//!   appear: changes made and recorded, the time from each change (its answer) to its value in
//!   the API (median, p99, max), the resident memory of `drift serve` (peak, sampled every
//!   250 ms), and what the watch did when it fell behind (its lag histogram, out-of-sync
//!   pairs, its warnings).
//!
//! `DRIFT_BENCH_BIN=PATH` runs another build of `drift` (to compare two builds in one run);
//! `DRIFT_BENCH_WRAPPER="heaptrack -o FILE"` puts a profiler in front of every run of it;
//! `DRIFT_BENCH_TLS=1` serves the test API server over TLS, as a real cluster is.
//!
//! `cargo bench -p drift-bin --bench service -- full-scan 10000`
//! `cargo bench -p drift-bin --bench service -- serve-memory 100000 10000`
//! `cargo bench -p drift-bin --bench service -- watch-latency 100`
//! `cargo bench -p drift-bin --bench service -- notify-latency 100`
//! `cargo bench -p drift-bin --bench service -- notify-burst 10000`
//! `cargo bench -p drift-bin --bench service -- storm 100000 10000 1000 60`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "../tests/common/mod.rs"]
mod common;
mod shared;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Answer, GitRepo, Receiver, Serve, get_json, kubectl, wait_for};
use drift_test_apiserver::{Options, TestApiServer};
use drift_testkit_pg::PgServer;
use serde_json::Value;
use shared::{
    all_drifts, database, durable_pg, durable_pg_with, fill, fill_split, object, percentile, psql, rss_kib,
    storm_change, storm_seen,
};

fn config(dir: &Path, repo: &GitRepo, server: &TestApiServer, watch: bool) -> std::path::PathBuf {
    let path = dir.join("drift.yaml");
    std::fs::write(
        &path,
        format!(
            "cluster: bench\ninterval: 1h\nwatch: {watch}\ndatabase_env: BENCH_DATABASE_URL\napi:\n  listen: 127.0.0.1:0\n\
             repositories:\n  - name: bench\n    url: file://{}\n    ref: main\n    cache_dir: {}\nlive:\n  kubeconfig: {}\n",
            repo.dir.display(),
            dir.join("cache").display(),
            server.kubeconfig_path().display()
        ),
    )
    .unwrap();
    path
}

/// `full-scan N [RUNS]`: RUNS scans (default 4); with `DRIFT_BENCH_SCAN_ONLY=1`, without the
/// `render` and `diff --cluster` runs before them.
fn full_scan(n: usize, runs: usize) {
    let dir = tempfile::tempdir().unwrap();
    let server = TestApiServer::start(api_options()).unwrap();
    let pg = durable_pg();
    let repo = GitRepo::init(dir.path().join("repo"));
    let started = Instant::now();
    // 100 objects per file; 1 object in 100 is changed in the cluster.
    fill(&server, &repo, n, |i| i % 100 == 7);
    repo.commit("bench fixture");
    println!("fixture: {n} objects in git and in the test API server in {:.1?}", started.elapsed());
    let db = database(&pg);
    let cfg = config(dir.path(), &repo, &server, false);
    // The first run migrates the empty database; it is timed too.
    // Where the memory goes: the desired side alone (clone + render), and desired + live with
    // no git and no store.
    let url = format!("file://{}", repo.dir.display());
    if std::env::var("DRIFT_BENCH_SCAN_ONLY").is_err() {
        println!(
            "  desired only (drift render of the repository): {}",
            timed(&["render", "--repo", &url, "--ref", "main", "-o", "json"], &[]).0
        );
        let folder = repo.dir.join("apps");
        let kc = server.kubeconfig_path().to_str().unwrap().to_owned();
        println!(
            "  folder + cluster, no store (drift diff --cluster): {}",
            timed(
                &["diff", "--desired", folder.to_str().unwrap(), "--cluster", "--kubeconfig", &kc, "-o", "json"],
                &[]
            )
            .0
        );
    }
    let cfg = cfg.to_str().unwrap();
    for run in 1..=runs {
        let (timing, out) = timed(&["scan", "--config", cfg, "--output", "json"], &[("BENCH_DATABASE_URL", &db)]);
        let report: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        println!(
            "full-scan run {run}: {timing}; compared {}, drifts {}, exit {:?}",
            report["summary"]["resources_compared"],
            report["summary"]["drifts"],
            out.status.code()
        );
    }
}

/// The test API server's options: plain HTTP, or TLS with `DRIFT_BENCH_TLS=1`.
fn api_options() -> Options {
    Options { tls: std::env::var("DRIFT_BENCH_TLS").is_ok_and(|v| v == "1"), ..Options::default() }
}

/// What the resident memory of a process is made of: anonymous pages (the heap, stacks) against
/// pages of mapped files (the binary's code), and its thread count.
fn smaps_rollup(pid: u32) -> String {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let wanted = ["Rss:", "Anonymous:", "Shared_Clean:", "Private_Clean:", "Private_Dirty:"];
    let mut out: Vec<String> = rollup
        .lines()
        .filter(|l| wanted.iter().any(|w| l.starts_with(w)))
        .map(|l| l.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
        .collect();
    out.extend(
        status
            .lines()
            .filter(|l| l.starts_with("Threads:"))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")),
    );
    out.join(", ")
}

/// `drift serve` with watch over `live` objects in the test API server, `desired` of them in
/// Git, on PostgreSQL: resident memory sampled every second from the start, the peak, and the
/// steady figure (mean of the last 30 s of 90 s after the first pass).
fn serve_memory(live: usize, desired: usize) {
    let dir = tempfile::tempdir().unwrap();
    let server = TestApiServer::start(api_options()).unwrap();
    let pg = durable_pg();
    let repo = GitRepo::init(dir.path().join("repo"));
    let started = Instant::now();
    fill_split(&server, &repo, live, desired, |i| i % 100 == 7);
    repo.commit("bench fixture");
    println!("fixture: {live} live objects, {desired} of them in git, in {:.1?}", started.elapsed());
    let db = database(&pg);
    let cfg = config(dir.path(), &repo, &server, true);
    let serve = Serve::start(&cfg, &[("BENCH_DATABASE_URL", &db), ("RUST_LOG", "warn")]);
    let pid = serve.pid();
    let t0 = Instant::now();
    let mut ready_at = None;
    let mut samples = Vec::new();
    loop {
        let (rss, _) = rss_kib(pid);
        samples.push((t0.elapsed(), rss));
        if ready_at.is_none() && common::http(&serve.addr, "GET", "/ready", None).0 == 200 {
            ready_at = Some(t0.elapsed());
            println!("first pass done after {:.1?}, RSS {} MiB", t0.elapsed(), rss / 1024);
        }
        if ready_at.is_some_and(|at| t0.elapsed() > at + Duration::from_secs(90)) {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(900), "no first pass in 15 minutes:\n{}", serve.log());
        std::thread::sleep(Duration::from_secs(1));
    }
    let (_, peak) = rss_kib(pid);
    let parts = smaps_rollup(pid);
    let end = t0.elapsed();
    let last: Vec<u64> = samples.iter().filter(|(t, _)| *t + Duration::from_secs(30) >= end).map(|(_, r)| *r).collect();
    let steady = last.iter().sum::<u64>() / last.len().max(1) as u64;
    let stats = get_json(&serve.addr, "/stats");
    println!(
        "serve-memory {live} live / {desired} desired: peak {} MiB, steady {} MiB (mean of the last 30 s), open drifts {}",
        peak / 1024,
        steady / 1024,
        stats["by_status"]["open"]
    );
    println!("  at the end, from /proc/PID/smaps_rollup and status (KiB): {parts}");
    for (t, r) in samples.iter().step_by(5) {
        println!("  t={:>5.1}s rss={} MiB", t.as_secs_f64(), r / 1024);
    }
    serve.stop();
}

/// Runs the `drift` binary under `/usr/bin/time`: its wall time and peak memory line, and its
/// output.
fn timed(args: &[&str], env: &[(&str, &str)]) -> (String, std::process::Output) {
    // `/usr/bin/time` in front of the command `Serve` would run (a profiler, another build).
    let inner = common::drift_command();
    let mut cmd = Command::new("/usr/bin/time");
    cmd.args(["-f", "wall=%e s peak_rss=%M KiB"])
        .arg(inner.get_program())
        .args(inner.get_args())
        .args(args)
        .env("RUST_LOG", "warn");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let timing = stderr.lines().rev().find(|l| l.starts_with("wall=")).unwrap_or_else(|| panic!("no timing: {stderr}"));
    (timing.to_owned(), out)
}

/// The fixture of the latency benchmarks: three objects in a namespace, in Git and applied.
struct Small {
    dir: tempfile::TempDir,
    server: TestApiServer,
    _pg: PgServer,
    repo: GitRepo,
    db: String,
}

impl Small {
    fn start() -> Small {
        let dir = tempfile::tempdir().unwrap();
        let server = TestApiServer::start(api_options()).unwrap();
        let pg = durable_pg();
        let repo = GitRepo::init(dir.path().join("repo"));
        repo.write("apps/00-namespace.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns-0\n");
        for i in [0, 100, 200] {
            repo.write(&format!("apps/app-{i}.yaml"), &serde_json::to_string(&object(i, false)).unwrap());
        }
        repo.commit("bench fixture");
        let apps = repo.dir.join("apps");
        kubectl(server.kubeconfig_path(), dir.path(), &["apply", "-R", "-f", apps.to_str().unwrap()], &[]);
        let db = database(&pg);
        Small { dir, server, _pg: pg, repo, db }
    }
}

fn watch_latency(n: usize) {
    let Small { dir, server, _pg, repo, db } = Small::start();
    let home = dir.path();
    let serve = Serve::start(&config(home, &repo, &server, true), &[("BENCH_DATABASE_URL", &db), ("RUST_LOG", "warn")]);
    wait_for(Duration::from_secs(60), "the first pass", || {
        (common::http(&serve.addr, "GET", "/ready", None).0 == 200).then_some(())
    });
    let mut lags = Vec::with_capacity(n);
    let mut from_start = Vec::with_capacity(n);
    for k in 0..n {
        let replicas = 3 + (k % 50) as u64;
        let launched = Instant::now();
        kubectl(
            server.kubeconfig_path(),
            home,
            &["scale", "deployment/app-0", "-n", "ns-0", &format!("--replicas={replicas}")],
            &[],
        );
        let t0 = Instant::now();
        loop {
            let page = get_json(&serve.addr, "/drifts?status=open&drift_type=replicas_drift");
            if page["items"].as_array().unwrap().iter().any(|d| d["cluster_value"].as_u64() == Some(replicas)) {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(30), "change {k} never recorded:\n{}", serve.log());
            std::thread::sleep(Duration::from_millis(2));
        }
        lags.push(t0.elapsed());
        from_start.push(launched.elapsed());
    }
    for (what, mut sorted) in [
        ("kubectl returned -> GET /drifts shows it (lower bound)", lags),
        ("kubectl started -> GET /drifts shows it (upper bound: includes kubectl's start-up)", from_start),
    ] {
        sorted.sort();
        println!(
            "watch-latency over {n} kubectl scale changes, {what}: median {:.1?}, p99 {:.1?}, max {:.1?}",
            percentile(&sorted, 50.0),
            percentile(&sorted, 99.0),
            sorted[sorted.len() - 1]
        );
    }
    let (_, metrics) = common::http(&serve.addr, "GET", "/metrics", None);
    for line in metrics.lines().filter(|l| l.starts_with("drift_watch_lag_seconds_")) {
        println!("  {line}");
    }
    serve.stop();
}

/// The notifier block of a bench configuration: webhooks to `receivers`, immediate.
fn notify_block(receivers: &[&Receiver]) -> String {
    let mut text = String::from("notify:\n");
    for (i, r) in receivers.iter().enumerate() {
        text.push_str(&format!(
            "  - name: hook-{i}\n    type: webhook\n    url: {}/hook\n    secret_env: BENCH_HOOK_SECRET\n",
            r.url
        ));
    }
    text.push_str("notifications:\n  tick: 1s\n");
    text
}

fn notify_latency(n: usize) {
    let Small { dir, server, _pg, repo, db } = Small::start();
    let home = dir.path();
    let receiver = Receiver::start();
    let cfg = config(home, &repo, &server, true);
    let text = std::fs::read_to_string(&cfg).unwrap() + &notify_block(&[&receiver]);
    std::fs::write(&cfg, text).unwrap();
    let env = [("BENCH_DATABASE_URL", db.as_str()), ("RUST_LOG", "warn"), ("BENCH_HOOK_SECRET", "bench-secret")];
    let serve = Serve::start(&cfg, &env);
    wait_for(Duration::from_secs(60), "the first pass", || {
        (common::http(&serve.addr, "GET", "/ready", None).0 == 200).then_some(())
    });
    let mut lags = Vec::with_capacity(n);
    for k in 0..n {
        let replicas = 3 + (k % 50) as u64;
        kubectl(
            server.kubeconfig_path(),
            home,
            &["scale", "deployment/app-0", "-n", "ns-0", &format!("--replicas={replicas}")],
            &[],
        );
        let t0 = Instant::now();
        let seen = receiver.received().len();
        let arrived = wait_for(Duration::from_secs(30), "the webhook of the change", || {
            receiver.received()[seen..].iter().find_map(|r| {
                let body = r.json();
                let hit =
                    body["events"].as_array()?.iter().any(|e| e["drift"]["cluster_value"].as_u64() == Some(replicas));
                hit.then_some(r.at)
            })
        });
        lags.push(arrived.saturating_duration_since(t0));
    }
    lags.sort();
    println!(
        "notify-latency over {n} kubectl scale changes, kubectl returned -> signed webhook received: median {:.1?}, p99 {:.1?}, max {:.1?}",
        percentile(&lags, 50.0),
        percentile(&lags, 99.0),
        lags[lags.len() - 1]
    );
    assert!(receiver.received().iter().all(|r| r.answer == Answer::Ok));
    serve.stop();
}

fn notify_burst(n: usize) {
    let dir = tempfile::tempdir().unwrap();
    let server = TestApiServer::start(api_options()).unwrap();
    let pg = durable_pg();
    let repo = GitRepo::init(dir.path().join("repo"));
    // Every object changed in the cluster: one drift each (ConfigMaps, Deployments, Services).
    fill(&server, &repo, n, |_| true);
    repo.commit("bench fixture");
    let db = database(&pg);
    let (a, b) = (Receiver::start(), Receiver::start());
    let cfg = config(dir.path(), &repo, &server, false);
    let text = std::fs::read_to_string(&cfg).unwrap() + &notify_block(&[&a, &b]);
    std::fs::write(&cfg, text).unwrap();
    let env = [("BENCH_DATABASE_URL", db.as_str()), ("RUST_LOG", "info"), ("BENCH_HOOK_SECRET", "bench-secret")];
    let (timing, out) = timed(&["scan", "--config", cfg.to_str().unwrap(), "--output", "json"], &env);
    let report: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let log = String::from_utf8_lossy(&out.stderr);
    let recorded = log.lines().find(|l| l.contains("scan recorded")).unwrap_or("no `scan recorded` line").to_owned();
    println!("notify-burst: drift scan of {n} objects, {} drifts: {timing}", report["summary"]["drifts"]);
    println!("  {recorded}");
    for (name, r) in [("hook-0", &a), ("hook-1", &b)] {
        let got = r.received();
        let events: usize = got.iter().map(|m| m.json()["event_ids"].as_array().map_or(0, Vec::len)).sum();
        let bytes: usize = got.iter().map(|m| m.body.len()).sum();
        println!("  {name}: {} messages, {events} event ids, {bytes} bytes", got.len());
    }
}

/// One keep-alive HTTP/1.1 connection to the test API server (the storm's client).
struct Conn {
    addr: String,
    reader: BufReader<TcpStream>,
}

impl Conn {
    fn open(addr: &str) -> Conn {
        let s = TcpStream::connect(addr).unwrap();
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        Conn { addr: addr.to_owned(), reader: BufReader::new(s) }
    }

    /// A merge patch of `path`; the status of the answer.
    fn merge_patch(&mut self, path: &str, body: &str) -> u16 {
        let head = format!(
            "PATCH {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/merge-patch+json\r\nAccept: application/json\r\nContent-Length: {}\r\n\r\n",
            self.addr,
            body.len()
        );
        let s = self.reader.get_mut();
        s.write_all(head.as_bytes()).unwrap();
        s.write_all(body.as_bytes()).unwrap();
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        let status = line.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("answer {line:?}"));
        let (mut length, mut chunked) = (0usize, false);
        loop {
            line.clear();
            self.reader.read_line(&mut line).unwrap();
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            let (name, value) = l.split_once(':').unwrap_or((l, ""));
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap();
            } else if name.eq_ignore_ascii_case("transfer-encoding") && value.trim().eq_ignore_ascii_case("chunked") {
                chunked = true;
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                line.clear();
                self.reader.read_line(&mut line).unwrap();
                let size = usize::from_str_radix(line.trim_end(), 16).unwrap();
                let mut chunk = vec![0; size + 2];
                self.reader.read_exact(&mut chunk).unwrap();
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..size]);
            }
        } else {
            body.resize(length, 0);
            self.reader.read_exact(&mut body).unwrap();
        }
        status
    }
}

/// How often the storm's sweeper reads every open drift, to find a value whose batch committed
/// later than the polls looked back.
const SWEEP: Duration = Duration::from_secs(5);

/// What the storm's poller gives back: the time each poll took, the longest look-back it used,
/// how many full reads the sweeper made.
struct Polled {
    cycles: Vec<Duration>,
    lookback: Duration,
    sweeps: usize,
}

/// When each (object, round) was first seen in the API, and whether only the sweeper saw it.
type Seen = Mutex<std::collections::HashMap<(usize, usize), (Instant, bool)>>;

/// The value of a drift of the storm, and how long after its `last_seen` stamp it was read.
fn stamped(item: &Value, read: chrono::DateTime<chrono::Utc>) -> Option<((usize, usize), Option<Duration>)> {
    let key = storm_seen(item)?;
    let stamp = item["last_seen"].as_str().and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
    Some((key, stamp.and_then(|t| (read - t.with_timezone(&chrono::Utc)).to_std().ok())))
}

/// Polls `GET /drifts?status=open&since=` every `poll` and notes when each (object, round) was
/// first seen, until `stop`; a sweeper thread beside it reads every open drift every [`SWEEP`].
///
/// A row's `last_seen` is stamped when its batch is built, before the batch's transaction
/// commits, so a poll that asked only for rows seen since its previous poll would never see a
/// batch that took longer to commit than it looked back. Each poll looks back from the start of
/// the previous one by at least half a second and twice the longest time any value took from
/// its `last_seen` to the poll that first saw it. The sweeper finds whatever a slower commit
/// still hid from the polls: a value no poll will read any more (stamped before the window of
/// the next poll) is noted with the sweeper's time and marked (the look-back grows to cover it);
/// the others are left to the polls, so a sweep never delays a poll. Values are deduplicated by
/// (object, round): reading a row again changes nothing.
fn poll_storm(addr: &str, poll: Duration, stop: &AtomicBool, seen: &Seen) -> Polled {
    // The look-back, and the window's start of the next poll.
    let window = Mutex::new((Duration::from_millis(500), chrono::Utc::now() - chrono::Duration::seconds(5)));
    std::thread::scope(|scope| {
        let sweeper = scope.spawn(|| {
            let mut sweeps = 0;
            let mut next = Instant::now() + SWEEP;
            while !stop.load(Ordering::Relaxed) {
                if Instant::now() < next {
                    std::thread::sleep(poll);
                    continue;
                }
                next = Instant::now() + SWEEP;
                sweeps += 1;
                let items = all_drifts(addr, "&status=open");
                let (at, read) = (Instant::now(), chrono::Utc::now());
                let mut seen = seen.lock().unwrap();
                let mut window = window.lock().unwrap();
                for (key, late) in items.iter().filter_map(|i| stamped(i, read)) {
                    let polls_will_read =
                        late.is_some_and(|l| read - chrono::Duration::from_std(l).unwrap() >= window.1);
                    if seen.contains_key(&key) || polls_will_read {
                        continue;
                    }
                    seen.insert(key, (at, true));
                    if let Some(late) = late {
                        window.0 = window.0.max(late);
                    }
                }
            }
            sweeps
        });
        let mut cycles = Vec::new();
        let mut last = chrono::Utc::now() - chrono::Duration::seconds(5);
        while !stop.load(Ordering::Relaxed) {
            let begun = Instant::now();
            let now = chrono::Utc::now();
            let since = {
                let mut window = window.lock().unwrap();
                window.1 = last - chrono::Duration::from_std(window.0).unwrap();
                window.1
            };
            let query = format!("&status=open&since={}", since.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
            let items = all_drifts(addr, &query);
            let (at, read) = (Instant::now(), chrono::Utc::now());
            let mut seen = seen.lock().unwrap();
            let mut window = window.lock().unwrap();
            for (key, late) in items.iter().filter_map(|i| stamped(i, read)) {
                if seen.contains_key(&key) {
                    continue;
                }
                seen.insert(key, (at, false));
                // How long after its stamp the value became readable, at most: the look-back
                // must exceed it.
                if let Some(late) = late {
                    window.0 = window.0.max(late * 2);
                }
            }
            // The next poll looks back from this one's start.
            last = now;
            window.1 = last - chrono::Duration::from_std(window.0).unwrap();
            drop((seen, window));
            cycles.push(begun.elapsed());
            std::thread::sleep(poll);
        }
        let sweeps = sweeper.join().unwrap();
        let lookback = window.lock().unwrap().0;
        Polled { cycles, lookback, sweeps }
    })
}

/// What `drift serve` logged of its watch batches (`watch: re-compared`): how many, the objects
/// each held, the time re-comparing them took and the time the store took to record them.
fn batches(log: &str) {
    let field = |line: &str, name: &str| -> Option<u64> {
        line.split_whitespace().find_map(|w| w.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
    };
    let (mut objects, mut compare, mut write) = (Vec::new(), Vec::new(), Vec::new());
    for line in log.lines().filter(|l| l.contains("watch: re-compared")) {
        objects.extend(field(line, "objects"));
        compare.extend(field(line, "compare_ms"));
        write.extend(field(line, "write_ms"));
    }
    let show = |name: &str, v: &mut Vec<u64>| {
        if v.is_empty() {
            return;
        }
        v.sort_unstable();
        let at = |p: f64| v[(((p / 100.0) * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        println!(
            "    {name}: median {}, p90 {}, p99 {}, max {}, sum {}",
            at(50.0),
            at(90.0),
            at(99.0),
            v[v.len() - 1],
            v.iter().sum::<u64>()
        );
    };
    println!("  watch batches written from the storm's start: {}", objects.len());
    show("objects a batch", &mut objects);
    show("re-comparing a batch (ms)", &mut compare);
    show("writing a batch to the store (ms)", &mut write);
}

/// PostgreSQL's settings of a traced storm (`DRIFT_STORM_PG_TRACE=1`): statement statistics
/// (those the triggers run too), plans of slow statements with their row counts (not their
/// timings, which cost every statement), lock waits over 100 ms, checkpoints, autovacuum.
const PG_TRACE: &[(&str, &str)] = &[
    ("shared_preload_libraries", "pg_stat_statements,auto_explain"),
    ("pg_stat_statements.track", "all"),
    ("auto_explain.log_min_duration", "300ms"),
    ("auto_explain.log_nested_statements", "on"),
    ("auto_explain.log_analyze", "on"),
    ("auto_explain.log_timing", "off"),
    ("auto_explain.log_buffers", "on"),
    ("log_min_duration_statement", "300ms"),
    ("log_lock_waits", "on"),
    ("deadlock_timeout", "100ms"),
    ("log_checkpoints", "on"),
    ("log_autovacuum_min_duration", "0"),
    ("track_io_timing", "on"),
    ("track_wal_io_timing", "on"),
];

/// What PostgreSQL did during a traced storm: its busiest statements, the tables' updates (HOT
/// or not) and dead rows, WAL and fsyncs, commits, and its log of slow statements and lock waits.
fn pg_report(db: &str, log: &str) {
    let show = |title: &str, sql: &str| {
        println!("  PostgreSQL, {title}:");
        for line in psql(db, sql).lines() {
            println!("    {line}");
        }
    };
    show(
        "statements by total time (calls|total ms|mean ms|max ms|rows|top level|query)",
        "SELECT calls, round(total_exec_time), round(mean_exec_time::numeric, 2), round(max_exec_time), rows, \
         toplevel, left(regexp_replace(query, '\\s+', ' ', 'g'), 160) FROM pg_stat_statements \
         WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
         ORDER BY total_exec_time DESC LIMIT 30",
    );
    show(
        "statements by their first 40 characters (calls|total ms|rows|statements)",
        "SELECT sum(calls), round(sum(total_exec_time)), sum(rows), count(*), \
         left(regexp_replace(query, '\\s+', ' ', 'g'), 40) AS q FROM pg_stat_statements \
         WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND toplevel \
         GROUP BY q ORDER BY 2 DESC LIMIT 15",
    );
    show(
        "tables (name|inserted|updated|HOT updated|deleted|live|dead|autovacuums|autoanalyzes|seq scans|rows seq read|index scans)",
        "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del, n_live_tup, n_dead_tup, autovacuum_count, \
         autoanalyze_count, seq_scan, seq_tup_read, idx_scan FROM pg_stat_user_tables \
         WHERE n_tup_ins + n_tup_upd + n_tup_del + seq_scan > 0 ORDER BY n_tup_ins + n_tup_upd DESC LIMIT 20",
    );
    show(
        "WAL (records|full pages|bytes|writes|syncs|write ms|sync ms)",
        "SELECT wal_records, wal_fpi, pg_size_pretty(wal_bytes), wal_write, wal_sync, round(wal_write_time), \
         round(wal_sync_time) FROM pg_stat_wal",
    );
    show(
        "this database (commits|rollbacks|blocks read|blocks hit|rows returned|rows fetched|rows updated)",
        "SELECT xact_commit, xact_rollback, blks_read, blks_hit, tup_returned, tup_fetched, tup_updated \
         FROM pg_stat_database WHERE datname = current_database()",
    );
    let slow: Vec<&str> = log.lines().filter(|l| l.contains("duration:")).collect();
    let waits: Vec<&str> = log.lines().filter(|l| l.contains("still waiting") || l.contains("acquired")).collect();
    let other: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("checkpoint") || l.contains("automatic vacuum") || l.contains("automatic analyze"))
        .collect();
    println!(
        "  PostgreSQL log during the storm: {} slow statements (over 300 ms), {} lock-wait lines, {} checkpoint/autovacuum lines",
        slow.len(),
        waits.len(),
        other.len()
    );
    for l in slow.iter().take(15).chain(waits.iter().take(10)).chain(other.iter().take(10)) {
        println!("    {}", l.chars().take(300).collect::<String>());
    }
}

/// `storm LIVE DESIRED RATE SECONDS` (see the crate docs).
fn storm(live: usize, desired: usize, rate: usize, seconds: usize) {
    let kubectl_every: usize = std::env::var("DRIFT_STORM_KUBECTL").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let clients: usize = std::env::var("DRIFT_STORM_CLIENTS").ok().and_then(|v| v.parse().ok()).unwrap_or(4);
    let trace = std::env::var("DRIFT_STORM_PG_TRACE").is_ok_and(|v| v == "1");
    let poll = Duration::from_millis(20);
    let dir = tempfile::tempdir().unwrap();
    let server = TestApiServer::start(api_options()).unwrap();
    let pg = if trace { durable_pg_with(PG_TRACE) } else { durable_pg() };
    let repo = GitRepo::init(dir.path().join("repo"));
    let started = Instant::now();
    // Nothing differs at the start: every drift of the run is a change of the storm.
    fill_split(&server, &repo, live, desired, |_| false);
    repo.commit("bench fixture");
    println!("fixture: {live} live objects, {desired} of them in git, in {:.1?}", started.elapsed());
    let db = database(&pg);
    if trace {
        psql(&db, "CREATE EXTENSION pg_stat_statements");
        println!("PostgreSQL traced: {db}, log {}", pg.dir().join("postgres.log").display());
    }
    let cfg = config(dir.path(), &repo, &server, true);
    let serve = Serve::start(&cfg, &[("BENCH_DATABASE_URL", &db), ("RUST_LOG", "warn")]);
    let pid = serve.pid();
    let t0 = Instant::now();
    wait_for(Duration::from_secs(900), "the first pass", || {
        (common::http(&serve.addr, "GET", "/ready", None).0 == 200).then_some(())
    });
    println!("first pass done after {:.1?}, RSS {} MiB", t0.elapsed(), rss_kib(pid).0 / 1024);
    // The watch lists every (kind, namespace) when it starts: let it settle before the storm.
    std::thread::sleep(Duration::from_secs(20));
    let (rss_before, peak_before) = rss_kib(pid);
    println!("before the storm: RSS {} MiB, peak so far {} MiB", rss_before / 1024, peak_before / 1024);

    if trace {
        psql(
            &db,
            "SELECT pg_stat_statements_reset(); SELECT pg_stat_reset(); SELECT pg_stat_reset_shared('wal'); \
             SELECT pg_stat_reset_shared('bgwriter')",
        );
    }
    let (log_before, pg_log_before) = (serve.log().len(), pg.log().len());

    let total = rate * seconds;
    let stop = Arc::new(AtomicBool::new(false));
    // When each (object, round) was first seen in the API, and whether only the sweeper saw it.
    let seen: Arc<Seen> = Arc::default();
    let poller = {
        let (addr, stop, seen) = (serve.addr.clone(), stop.clone(), seen.clone());
        std::thread::spawn(move || poll_storm(&addr, poll, &stop, &seen))
    };
    let sampler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut samples = Vec::new();
            let begun = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                samples.push((begun.elapsed(), rss_kib(pid).0));
                std::thread::sleep(Duration::from_millis(250));
            }
            samples
        })
    };
    // kubectl makes one change in `kubectl_every`, two at a time. Started by its full path: a
    // program looked up in a PATH the command sets makes std fork this process (gigabytes: the
    // test API server's objects) instead of spawning, which cost more CPU than the API server's
    // requests and stalled them while the page tables were copied.
    let kubectl_path = shared::kubectl_path();
    let (ktx, krx) = std::sync::mpsc::channel::<(usize, Vec<String>)>();
    let krx = Arc::new(Mutex::new(krx));
    let kubectls: Vec<_> = (0..2)
        .map(|_| {
            let (krx, kubeconfig, home) = (krx.clone(), server.kubeconfig_path().to_owned(), dir.path().to_owned());
            let kubectl = kubectl_path.clone();
            std::thread::spawn(move || {
                let mut made = Vec::new();
                loop {
                    let next = krx.lock().unwrap().recv();
                    let Ok((k, args)) = next else { return made };
                    let out = Command::new(&kubectl)
                        .arg("--kubeconfig")
                        .arg(&kubeconfig)
                        .args(&args)
                        .env_clear()
                        .env("HOME", &home)
                        .stdin(std::process::Stdio::null())
                        .output()
                        .unwrap();
                    assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
                    made.push((k, Instant::now()));
                }
            })
        })
        .collect();
    let storm_start = Instant::now();
    let writers: Vec<_> = (0..clients)
        .map(|c| {
            let addr = server.addr().to_string();
            let ktx = ktx.clone();
            std::thread::spawn(move || {
                let mut conn = Conn::open(&addr);
                let mut made = Vec::new();
                let mut failed = 0usize;
                for k in (c..total).step_by(clients) {
                    let due = storm_start + Duration::from_secs_f64(k as f64 / rate as f64);
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    let (_, (path, body), args) = storm_change(k % desired, k / desired);
                    if k % kubectl_every == kubectl_every - 1 {
                        ktx.send((k, args)).unwrap();
                        continue;
                    }
                    let status = conn.merge_patch(&path, &body);
                    if status == 200 {
                        made.push((k, Instant::now()));
                    } else {
                        failed += 1;
                    }
                }
                (made, failed)
            })
        })
        .collect();
    drop(ktx);
    let mut made: Vec<(usize, Instant)> = Vec::with_capacity(total);
    let mut failed = 0;
    for w in writers {
        let (m, f) = w.join().unwrap();
        made.extend(m);
        failed += f;
    }
    let writers_done = storm_start.elapsed();
    let by_kubectl: usize = kubectls
        .into_iter()
        .map(|k| k.join().unwrap())
        .map(|m| {
            let n = m.len();
            made.extend(m);
            n
        })
        .sum();
    let storm_took = storm_start.elapsed();
    println!(
        "storm: {} changes made in {:.1?} ({:.0}/s; clients done after {:.1?}), {by_kubectl} of them by kubectl, {failed} refused",
        made.len(),
        storm_took,
        made.len() as f64 / storm_took.as_secs_f64(),
        writers_done
    );
    // The newest change of each object: the value its drift must end with.
    let mut newest: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
    for &(k, _) in &made {
        let (i, round) = (k % desired, k / desired);
        let r = newest.entry(i).or_insert(round);
        *r = (*r).max(round);
    }
    // Wait (at most 120 s) until every object's newest value was seen.
    let waited = Instant::now();
    while waited.elapsed() < Duration::from_secs(120) {
        let s = seen.lock().unwrap();
        if newest.iter().all(|(&i, &r)| s.contains_key(&(i, r))) {
            break;
        }
        drop(s);
        std::thread::sleep(Duration::from_millis(100));
    }
    println!("the last change was seen {:.1?} after the storm", waited.elapsed());
    stop.store(true, Ordering::Relaxed);
    let Polled { mut cycles, lookback, sweeps } = poller.join().unwrap();
    let samples = sampler.join().unwrap();
    let (_, peak) = rss_kib(pid);
    // Every change: seen with its own value, or superseded by a later change of its object
    // that was seen (taken together in one batch), or missed.
    let seen = seen.lock().unwrap().clone();
    let (mut exact, mut superseded, mut missed, mut by_sweep) = (Vec::new(), 0usize, Vec::new(), 0usize);
    for &(k, at) in &made {
        let (i, round) = (k % desired, k / desired);
        match seen.get(&(i, round)) {
            Some(&(s, swept)) => {
                by_sweep += usize::from(swept);
                exact.push(s.saturating_duration_since(at));
            }
            None if seen.keys().any(|&(j, r)| j == i && r > round) => superseded += 1,
            None => missed.push(k),
        }
    }
    // The end state, read whole: each changed object's open drift has its newest value.
    let open = all_drifts(&serve.addr, "&status=open");
    let mut end: std::collections::HashMap<usize, Vec<usize>> = std::collections::HashMap::new();
    for item in &open {
        if let Some((i, r)) = storm_seen(item) {
            end.entry(i).or_default().push(r);
        }
    }
    let right = newest.iter().filter(|(i, r)| end.get(i).is_some_and(|v| v.contains(r))).count();
    exact.sort();
    cycles.sort();
    println!(
        "recorded: {} of {} changes seen with their own value, {superseded} superseded by a later change of the object before it was read, {} missed{}",
        exact.len(),
        made.len(),
        missed.len(),
        if missed.is_empty() { String::new() } else { format!(" (first: {:?})", &missed[..missed.len().min(10)]) }
    );
    println!(
        "  the polls looked back up to {lookback:.1?} before the previous poll; {by_sweep} of the values seen were missed by the polls and found by the sweeper's read of every open drift ({sweeps} reads, one every {SWEEP:?}; their time is an upper bound)"
    );
    println!(
        "end state: {right} of {} changed objects show their newest value in GET /drifts ({} open drifts)",
        newest.len(),
        open.len()
    );
    if !exact.is_empty() {
        println!(
            "change answered -> value in GET /drifts: median {:.1?}, p90 {:.1?}, p99 {:.1?}, max {:.1?} (the API polled every {poll:?}; a poll took median {:.1?}, p99 {:.1?})",
            percentile(&exact, 50.0),
            percentile(&exact, 90.0),
            percentile(&exact, 99.0),
            exact[exact.len() - 1],
            percentile(&cycles, 50.0),
            percentile(&cycles, 99.0),
        );
    }
    let storm_peak = samples.iter().map(|(_, r)| *r).max().unwrap_or(0);
    println!(
        "memory of drift serve: peak {} MiB (VmHWM; {} MiB before the storm), highest sample during the storm {} MiB, RSS at the end {} MiB",
        peak / 1024,
        peak_before / 1024,
        storm_peak / 1024,
        rss_kib(pid).0 / 1024
    );
    println!("  at the end, from /proc/PID/smaps_rollup and status (KiB): {}", smaps_rollup(pid));
    for (t, r) in samples.iter().step_by(20) {
        println!("  storm t={:>5.1}s rss={} MiB", t.as_secs_f64(), r / 1024);
    }
    let (_, metrics) = common::http(&serve.addr, "GET", "/metrics", None);
    for line in metrics.lines().filter(|l| {
        l.starts_with("drift_watch_lag_seconds")
            || l.starts_with("drift_watch_out_of_sync")
            || l.starts_with("drift_source_errors")
    }) {
        println!("  {line}");
    }
    if trace {
        pg_report(&db, &pg.log()[pg_log_before..]);
    }
    let log = serve.stop();
    batches(&log[log_before.min(log.len())..]);
    // The logs whole, to read afterwards (the run's folders are removed at its end).
    if let Some(keep) = std::env::var_os("DRIFT_STORM_LOGS") {
        let keep = Path::new(&keep);
        std::fs::create_dir_all(keep).unwrap();
        std::fs::write(keep.join("serve.log"), &log).unwrap();
        std::fs::write(keep.join("postgres.log"), pg.log()).unwrap();
        println!("  logs kept in {}", keep.display());
    }
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| (l.contains("WARN") || l.contains("ERROR")) && !l.contains("/ready") && !l.contains("API token"))
        .collect();
    println!("  drift serve logged {} warnings and errors", warnings.len());
    for l in warnings.iter().take(20) {
        println!("    {l}");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let n = |default: usize| args.get(1).and_then(|s| s.parse().ok()).unwrap_or(default);
    match args.first().map(String::as_str) {
        Some("full-scan") => full_scan(n(10_000), args.get(2).and_then(|s| s.parse().ok()).unwrap_or(4)),
        Some("watch-latency") => watch_latency(n(100)),
        Some("serve-memory") => serve_memory(n(100_000), args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10_000)),
        Some("notify-latency") => notify_latency(n(100)),
        Some("notify-burst") => notify_burst(n(10_000)),
        Some("storm") => {
            let arg = |i: usize, d: usize| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
            storm(n(100_000), arg(2, 10_000), arg(3, 1_000), arg(4, 60));
        }
        None => {
            full_scan(n(10_000), 4);
            watch_latency(n(100));
        }
        Some(other) => panic!(
            "unknown benchmark {other:?} (full-scan [N] | watch-latency [N] | notify-latency [N] | notify-burst [N] | serve-memory [LIVE] [DESIRED] | storm [LIVE] [DESIRED] [RATE] [SECONDS])"
        ),
    }
}
