//! A fleet (issue 35, item 4; `scripts/bench-fleet`, docs/benchmarks.md "A fleet: 10 clusters,
//! 3 replicas (issue 35)"):
//!
//! `cargo bench -p drift-bin --bench fleet -- [CLUSTERS] [OBJECTS] [REPLICAS] [RATE] [SECONDS]`
//!
//! CLUSTERS test API servers (default 10), each holding OBJECTS live objects (default 10,000:
//! Deployments, Services and ConfigMaps over 100 namespaces, the fixture of the service
//! benchmarks), all of them in one git repository that targets every cluster; a PostgreSQL with
//! fsync on; a webhook receiver; REPLICAS `drift serve` processes (default 3; release build) with
//! `clusters:` and `leader_election` in watch mode (a Lease per cluster and one per replica in the
//! first server). It prints:
//!
//! 1. the time until every cluster's Lease is held and its first pass recorded (`GET /scans`),
//!    and each replica's resident memory (peak, and steady: the mean over 20 s after the first
//!    passes) against the clusters it holds: MiB per cluster per replica;
//! 2. detection: RATE changes a second (default 10) for SECONDS (default 60), each by `kubectl
//!    scale` or `kubectl patch` of another object, spread over all clusters; the time from
//!    kubectl's return to the new value readable in `GET /drifts` of one replica (polled every
//!    20 ms; all replicas share the store): median, p90, p99, max, over every change, over every
//!    change outside the handover window (the killed replica's clusters from the kill to their
//!    new holder's first pass), and split by cluster and time;
//! 3. halfway through the stream, `kill -9` of the replica holding the most clusters: the time
//!    until the survivors hold its clusters' Leases, until each of those clusters has a first
//!    pass by its new holder, and what became of the changes made meanwhile;
//! 4. events lost and duplicated: each change must show as its value in `GET /drifts` (lost:
//!    never), and its drift's `opened` event must reach the webhook receiver once (lost: never;
//!    duplicated: more than once; and no event id in two messages).
//!
//! `DRIFT_BENCH_BIN=PATH` runs another build of `drift`; `DRIFT_FLEET_ELECTION=LEASE,RENEW,RETRY`
//! (seconds) sets other election timings than the default 4, 3 and 1. The whole run has a time budget
//! (`DRIFT_FLEET_BUDGET` seconds, default 1,500): past it, the bench stops with what it has.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "../tests/common/mod.rs"]
mod common;
mod shared;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Receiver, Serve};
use drift_test_apiserver::{Options, TestApiServer};
use serde_json::Value;
use shared::{database, durable_pg, fill_live, fill_split, percentile, storm_change, storm_seen};

const SECRET: &str = "fleet-hook-secret-for-benchmarks";
const POLL: Duration = Duration::from_millis(20);

/// The resident memory of a process in KiB (`VmRSS`, `VmHWM`), or `None` once it is gone.
fn rss(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// Requests to a replica's or the home cluster's API that failed (connection refused or reset):
/// counted, printed at the end, and tried again at the next poll.
static FAILED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// One GET over its own connection: the status and body, or `None` when the connection failed.
fn get(addr: &str, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let attempt = || -> std::io::Result<(u16, String)> {
        let mut s = std::net::TcpStream::connect(addr)?;
        s.set_read_timeout(Some(Duration::from_secs(60)))?;
        write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")?;
        let mut out = String::new();
        s.read_to_string(&mut out)?;
        let status = out.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
        Ok((status, body))
    };
    match attempt() {
        Ok(answer) => Some(answer),
        Err(e) => {
            if FAILED.fetch_add(1, Ordering::Relaxed) < 5 {
                println!("  GET {path} of {addr}: {e}");
            }
            None
        }
    }
}

/// Every page of `GET /drifts` with `query`, or `None` when a request failed.
fn drifts(addr: &str, query: &str) -> Option<Vec<Value>> {
    let mut items = Vec::new();
    let mut after = None::<i64>;
    loop {
        let cursor = after.map(|a| format!("&after={a}")).unwrap_or_default();
        let (status, body) = get(addr, &format!("/drifts?limit=1000{query}{cursor}"))?;
        if status != 200 {
            return None;
        }
        let page: Value = serde_json::from_str(&body).ok()?;
        items.extend(page["items"].as_array()?.iter().cloned());
        match page["next"].as_i64() {
            Some(n) => after = Some(n),
            None => return Some(items),
        }
    }
}

/// The passes a replica ran (`drift_scans_total` of its `/metrics`, every outcome).
fn scans_total(addr: &str) -> u64 {
    let (_, body) = get(addr, "/metrics").unwrap_or_default();
    body.lines()
        .filter(|l| l.starts_with("drift_scans_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// The holder of each cluster's Lease, read from the home cluster (the first test API server)
/// over HTTP (not kubectl: this process is gigabytes, see `shared::kubectl_path`).
fn holders(home: &TestApiServer) -> BTreeMap<String, String> {
    let answer = get(&home.addr().to_string(), "/apis/coordination.k8s.io/v1/namespaces/default/leases");
    let mut by_cluster = BTreeMap::new();
    let Some((status, body)) = answer else { return by_cluster };
    if status != 200 {
        return by_cluster;
    }
    let list: Value = serde_json::from_str(&body).unwrap();
    for lease in list["items"].as_array().into_iter().flatten() {
        let name = lease["metadata"]["name"].as_str().unwrap_or_default();
        let Some(cluster) = name.strip_prefix("drift-detector-") else { continue };
        if cluster.starts_with("member-") {
            continue;
        }
        let holder = lease["spec"]["holderIdentity"].as_str().unwrap_or_default();
        if !holder.is_empty() {
            by_cluster.insert(cluster.to_owned(), holder.to_owned());
        }
    }
    by_cluster
}

/// The scans `GET /scans` lists (the newest 100): (cluster, started_at).
fn scans(addr: &str) -> Vec<(String, chrono::DateTime<chrono::Utc>)> {
    let Some((status, body)) = get(addr, "/scans?limit=100") else { return Vec::new() };
    if status != 200 {
        return Vec::new();
    }
    let page: Value = serde_json::from_str(&body).unwrap_or_default();
    page["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| {
            let started = chrono::DateTime::parse_from_rfc3339(s["started_at"].as_str()?).ok()?;
            Some((s["cluster"].as_str()?.to_owned(), started.with_timezone(&chrono::Utc)))
        })
        .collect()
}

fn stats(what: &str, mut lags: Vec<Duration>) {
    if lags.is_empty() {
        println!("  {what}: none");
        return;
    }
    lags.sort();
    println!(
        "  {what} ({}): median {:.0?}, p90 {:.0?}, p99 {:.0?}, max {:.0?}",
        lags.len(),
        percentile(&lags, 50.0),
        percentile(&lags, 90.0),
        percentile(&lags, 99.0),
        lags[lags.len() - 1]
    );
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// A memory sample: its time from the start, and each replica's RSS (KiB; `None` once gone).
type Sample = (Duration, Vec<Option<u64>>);

/// One change of the stream: change `k` of cluster `k % clusters` to an object of its own.
struct Change {
    k: usize,
    cluster: usize,
    started: Instant,
    returned: Instant,
}

/// `DRIFT_FLEET_ELECTION=LEASE,RENEW,RETRY` (seconds): other election timings than the default
/// (4 s, 3 s, 1 s), as `leader_election` keys.
fn election_timings() -> String {
    let Ok(v) = std::env::var("DRIFT_FLEET_ELECTION") else { return String::new() };
    let t: Vec<&str> = v.split(',').map(str::trim).collect();
    assert!(t.len() == 3, "DRIFT_FLEET_ELECTION={v:?}: LEASE,RENEW,RETRY in seconds");
    format!("  lease_duration: {}s\n  renew_deadline: {}s\n  retry_period: {}s\n", t[0], t[1], t[2])
}

fn config(dir: &Path, name: &str, servers: &[TestApiServer], repo: &Path, hook: &str) -> PathBuf {
    let clusters: String = servers
        .iter()
        .enumerate()
        .map(|(i, s)| format!("  - name: c{i}\n    kubeconfig: {}\n", s.kubeconfig_path().display()))
        .collect();
    let path = dir.join(format!("drift-{name}.yaml"));
    std::fs::write(
        &path,
        format!(
            "interval: 1h\nwatch: true\ndatabase_env: FLEET_DATABASE_URL\napi:\n  listen: 127.0.0.1:0\n\
             live:\n  kubeconfig: {home}\n\
             leader_election:\n  enabled: true\n{timings}\
             notifications:\n  tick: 1s\n\
             notify:\n  - name: hook\n    type: webhook\n    url: {hook}/hook\n    secret_env: FLEET_HOOK_SECRET\n\
             clusters:\n{clusters}\
             repositories:\n  - name: fleet\n    url: file://{repo}\n    ref: main\n    cache_dir: {cache}\n",
            home = servers[0].kubeconfig_path().display(),
            timings = election_timings(),
            repo = repo.display(),
            cache = dir.join(format!("cache-{name}")).display(),
        ),
    )
    .unwrap();
    path
}

#[allow(clippy::too_many_lines)]
fn fleet(clusters: usize, objects: usize, replicas: usize, rate: usize, seconds: usize) {
    let budget =
        Duration::from_secs(std::env::var("DRIFT_FLEET_BUDGET").ok().and_then(|v| v.parse().ok()).unwrap_or(1_500));
    let begun = Instant::now();
    let left = || budget.saturating_sub(begun.elapsed());
    let total = rate * seconds;
    assert!(clusters >= 1 && replicas >= 2 && objects >= 3, "at least 1 cluster, 2 replicas and 3 objects");
    assert!(
        (0..total).map(|k| (k % clusters, object_of(k, clusters, objects))).collect::<BTreeSet<_>>().len() == total,
        "{total} changes over {clusters} clusters must each change another object: more objects, or fewer changes"
    );
    assert!(
        total / clusters < objects,
        "{total} changes over {clusters} clusters: more than {objects} objects a cluster"
    );
    let dir = tempfile::tempdir().unwrap();
    let repo = common::GitRepo::init(dir.path().join("repo"));
    let servers: Vec<TestApiServer> =
        (0..clusters).map(|_| TestApiServer::start(Options::default()).unwrap()).collect();
    let started = Instant::now();
    std::thread::scope(|s| {
        for (c, server) in servers.iter().enumerate() {
            let repo = &repo;
            s.spawn(move || {
                if c == 0 {
                    // Nothing differs at the start: every drift of the run is a change of the stream.
                    fill_split(server, repo, objects, objects, |_| false);
                } else {
                    fill_live(server, objects);
                }
            });
        }
    });
    repo.commit("fleet fixture");
    println!(
        "fixture: {clusters} test API servers of {objects} live objects, all in one git repository, in {:.1?}",
        started.elapsed()
    );
    let pg = durable_pg();
    let db = database(&pg);
    let receiver = Receiver::start();
    let names: Vec<String> = (0..replicas).map(|r| format!("r{r}")).collect();
    let start = |name: &String| {
        let cfg = config(dir.path(), name, &servers, &repo.dir, &receiver.url);
        Some(Serve::start(
            &cfg,
            &[
                ("FLEET_DATABASE_URL", db.as_str()),
                ("FLEET_HOOK_SECRET", SECRET),
                ("POD_NAME", name.as_str()),
                ("RUST_LOG", "warn"),
            ],
        ))
    };
    // `DRIFT_FLEET_STAGGER=1`: the first replica alone until it has scanned every cluster and
    // DRIFT_FLEET_SETTLE seconds more (default 60), then the others (the clusters move to them
    // when it is idle).
    let mut serves: Vec<Option<Serve>> = vec![start(&names[0])];
    if std::env::var("DRIFT_FLEET_STAGGER").is_ok_and(|v| v == "1") {
        let first = serves[0].as_ref().unwrap();
        let alone = Instant::now();
        loop {
            assert!(rss(first.pid()).is_some(), "r0 exited:\n{}", first.log());
            let scanned: BTreeSet<String> = scans(&first.addr).into_iter().map(|(c, _)| c).collect();
            if scanned.len() >= clusters {
                break;
            }
            assert!(left() > Duration::from_secs(300), "r0 did not scan every cluster in time");
            std::thread::sleep(Duration::from_millis(250));
        }
        let settle: u64 = std::env::var("DRIFT_FLEET_SETTLE").ok().and_then(|v| v.parse().ok()).unwrap_or(60);
        std::thread::sleep(Duration::from_secs(settle));
        println!(
            "stagger: r0 alone scanned the {clusters} clusters in {:.1?}, then {settle} s (DRIFT_FLEET_SETTLE) for its watches to settle; the others start",
            alone.elapsed()
        );
    }
    serves.extend(names[1..].iter().map(start));
    let t0 = Instant::now();
    let pids: Vec<u32> = serves.iter().map(|s| s.as_ref().unwrap().pid()).collect();
    let addrs: Vec<String> = serves.iter().map(|s| s.as_ref().unwrap().addr.clone()).collect();

    // Resident memory of every replica, every 500 ms, for the whole run.
    let stop = Arc::new(AtomicBool::new(false));
    let samples: Arc<Mutex<Vec<Sample>>> = Arc::default();
    let sampler = {
        let (stop, samples, pids) = (stop.clone(), samples.clone(), pids.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let row = pids.iter().map(|p| rss(*p).map(|(r, _)| r)).collect();
                samples.lock().unwrap().push((t0.elapsed(), row));
                std::thread::sleep(Duration::from_millis(500));
            }
        })
    };

    // 1. Every cluster held where the replicas compute it (each replica stands for its clusters
    // once its view of the members has not changed for a lease duration, the join grace of
    // docs/kubernetes.md), and its first pass by that holder recorded.
    let cluster_names: Vec<String> = (0..clusters).map(|c| format!("c{c}")).collect();
    let expected = drift_runtime::shard::assign(&cluster_names, &names);
    let mut held_at = None;
    // When each cluster was first seen held by its final holder (wall clock, as the scans').
    let mut since: BTreeMap<String, chrono::DateTime<chrono::Utc>> = BTreeMap::new();
    let first_passes = loop {
        for (r, pid) in pids.iter().enumerate() {
            // A replica that exited is a zombie until it is reaped: no VmRSS.
            assert!(rss(*pid).is_some(), "{} exited:\n{}", names[r], serves[r].as_ref().unwrap().log());
        }
        let h = holders(&servers[0]);
        let now = chrono::Utc::now();
        for (c, r) in &h {
            if expected.get(c) == Some(r) {
                since.entry(c.clone()).or_insert(now);
            } else {
                since.remove(c);
            }
        }
        if held_at.is_none() && h == expected {
            held_at = Some(t0.elapsed());
        }
        // A pass that finds nothing new writes no scan record: count each replica's passes
        // (`drift_scans_total`) against the clusters it holds instead.
        let scanned: Vec<(u64, usize)> =
            (0..replicas).map(|r| (scans_total(&addrs[r]), h.values().filter(|x| **x == names[r]).count())).collect();
        if h == expected && scanned.iter().all(|(done, held)| *done >= *held as u64) {
            break t0.elapsed();
        }
        assert!(
            left() > Duration::from_secs(240),
            "not every cluster held and scanned within the budget: held {h:?}, scanned {scanned:?}\n{}",
            serves[0].as_ref().unwrap().log()
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    let spread = holders(&servers[0]);
    let held = |r: &str| spread.values().filter(|h| *h == r).count();
    println!(
        "every cluster's Lease held by the replica the spread gives it after {:.1?}, the first pass of each by that replica recorded after {first_passes:.1?}; clusters per replica: {}",
        held_at.unwrap(),
        names.iter().map(|n| format!("{n} {}", held(n))).collect::<Vec<_>>().join(", ")
    );
    // Steady memory: the mean over 20 s once the first passes are in.
    std::thread::sleep(Duration::from_secs(20));
    let settled = t0.elapsed();
    let steady: Vec<u64> = {
        let s = samples.lock().unwrap();
        (0..replicas)
            .map(|r| {
                let last: Vec<u64> = s
                    .iter()
                    .filter(|(t, _)| *t >= first_passes && *t <= settled)
                    .filter_map(|(_, row)| row[r])
                    .collect();
                last.iter().sum::<u64>() / last.len().max(1) as u64
            })
            .collect()
    };
    let spread = holders(&servers[0]);
    println!("memory after the first passes (steady = mean RSS over the 20 s after them):");
    for (r, name) in names.iter().enumerate() {
        let n = spread.values().filter(|h| *h == name).count();
        let (_, peak) = rss(pids[r]).unwrap();
        println!(
            "  {name}: {n} clusters, peak {:.0} MiB, steady {:.0} MiB, {:.1} MiB per cluster",
            mib(peak),
            mib(steady[r]),
            mib(steady[r]) / n.max(1) as f64
        );
    }

    // 2. and 3. The stream of changes, and the kill halfway.
    let victim_name = names.iter().max_by_key(|n| (held(n), std::cmp::Reverse((*n).clone()))).unwrap().clone();
    let victim = names.iter().position(|n| *n == victim_name).unwrap();
    let moved: Vec<usize> =
        spread.iter().filter(|(_, h)| **h == victim_name).map(|(c, _)| c[1..].parse().unwrap()).collect();
    let watcher = (0..replicas).find(|r| *r != victim).unwrap();
    println!(
        "stream: {rate} changes a second for {seconds} s by kubectl over the {clusters} clusters; GET /drifts of {} polled every {POLL:?}; {victim_name} (clusters {moved:?}) killed after {} s",
        names[watcher],
        seconds / 2
    );
    // When each change (by k) was first seen in the API, and its drift.
    let seen: Arc<Mutex<HashMap<usize, (Instant, Value)>>> = Arc::default();
    let poll_stop = Arc::new(AtomicBool::new(false));
    let poller = {
        let (addr, stop, seen) = (addrs[watcher].clone(), poll_stop.clone(), seen.clone());
        std::thread::spawn(move || {
            let mut cycles = Vec::new();
            let mut last = chrono::Utc::now() - chrono::Duration::seconds(5);
            while !stop.load(Ordering::Relaxed) {
                let begun = Instant::now();
                let now = chrono::Utc::now();
                // A row's last_seen is stamped before its commit: look back a second.
                let since = (last - chrono::Duration::seconds(1)).to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
                let Some(items) = drifts(&addr, &format!("&status=open&since={since}")) else {
                    std::thread::sleep(POLL);
                    continue;
                };
                let at = Instant::now();
                let mut seen = seen.lock().unwrap();
                for item in items {
                    let Some((i, k)) = storm_seen(&item) else { continue };
                    let cluster = item["cluster"].as_str().and_then(|c| c.strip_prefix('c')?.parse::<usize>().ok());
                    if cluster == Some(k % clusters) && i == object_of(k, clusters, objects) {
                        seen.entry(k).or_insert((at, item));
                    }
                }
                drop(seen);
                last = now;
                cycles.push(begun.elapsed());
                std::thread::sleep(POLL);
            }
            cycles
        })
    };
    let kubectl = shared::kubectl_path();
    let (tx, rx) = std::sync::mpsc::channel::<usize>();
    let rx = Arc::new(Mutex::new(rx));
    let kubeconfigs: Vec<PathBuf> = servers.iter().map(|s| s.kubeconfig_path().to_owned()).collect();
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (rx, kubectl, kubeconfigs, home) =
                (rx.clone(), kubectl.clone(), kubeconfigs.clone(), dir.path().to_owned());
            std::thread::spawn(move || {
                let mut made = Vec::new();
                loop {
                    let next = rx.lock().unwrap().recv();
                    let Ok(k) = next else { return made };
                    let (cluster, object) = (k % clusters, object_of(k, clusters, objects));
                    let (_, _, args) = storm_change(object, k);
                    let started = Instant::now();
                    let out = Command::new(&kubectl)
                        .arg("--kubeconfig")
                        .arg(&kubeconfigs[cluster])
                        .args(&args)
                        .env_clear()
                        .env("HOME", &home)
                        .stdin(std::process::Stdio::null())
                        .output()
                        .unwrap();
                    assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
                    made.push(Change { k, cluster, started, returned: Instant::now() });
                }
            })
        })
        .collect();
    let stream_start = Instant::now();
    let scheduler = std::thread::spawn(move || {
        for k in 0..total {
            let due = stream_start + Duration::from_secs_f64(k as f64 / rate as f64);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            tx.send(k).unwrap();
        }
    });
    std::thread::sleep(Duration::from_secs_f64(seconds as f64 / 2.0));
    let victim_log = serves[victim].as_mut().unwrap().kill();
    let killed = Instant::now();
    let killed_wall = chrono::Utc::now();
    let peak_victim = samples.lock().unwrap().iter().filter_map(|(_, row)| row[victim]).max().unwrap_or(0);
    let mut taken = None;
    let mut first_pass: BTreeMap<usize, Duration> = BTreeMap::new();
    while (taken.is_none() || first_pass.len() < moved.len()) && killed.elapsed() < Duration::from_secs(120) {
        if taken.is_none() {
            let h = holders(&servers[0]);
            if moved.iter().all(|c| h.get(&format!("c{c}")).is_some_and(|r| *r != victim_name)) {
                taken = Some((killed.elapsed(), h));
            }
        }
        for (c, at) in scans(&addrs[watcher]) {
            if at >= killed_wall
                && let Some(i) = c.strip_prefix('c').and_then(|n| n.parse::<usize>().ok())
                && moved.contains(&i)
            {
                first_pass.entry(i).or_insert_with(|| killed.elapsed());
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    scheduler.join().unwrap();
    let mut made: Vec<Change> = workers.into_iter().flat_map(|w| w.join().unwrap()).collect();
    made.sort_by_key(|c| c.k);
    let stream_took = stream_start.elapsed();
    println!(
        "stream: {} changes made in {stream_took:.1?} ({:.1}/s); kubectl took median {:.0?} each",
        made.len(),
        made.len() as f64 / stream_took.as_secs_f64(),
        {
            let mut d: Vec<Duration> = made.iter().map(|c| c.returned - c.started).collect();
            d.sort();
            percentile(&d, 50.0)
        }
    );
    match &taken {
        Some((t, h)) => println!(
            "kill -9 of {victim_name} (clusters {moved:?}, peak RSS {:.0} MiB): its Leases held by the survivors after {t:.2?} ({})",
            mib(peak_victim),
            moved.iter().map(|c| format!("c{c} -> {}", h[&format!("c{c}")])).collect::<Vec<_>>().join(", ")
        ),
        None => println!("kill -9 of {victim_name}: its Leases NOT taken within 120 s"),
    }
    println!(
        "  first pass of each moved cluster by its new holder (its scan record readable), after the kill: {}",
        moved
            .iter()
            .map(|c| format!("c{c} {}", first_pass.get(c).map_or("none".to_owned(), |t| format!("{t:.2?}"))))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let handover_end = first_pass.values().max().copied().unwrap_or(Duration::from_secs(120));

    // Every change seen (at most 120 s more).
    let waited = Instant::now();
    while waited.elapsed() < Duration::from_secs(120).min(left()) {
        if made.iter().all(|c| seen.lock().unwrap().contains_key(&c.k)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    poll_stop.store(true, Ordering::Relaxed);
    let mut cycles = poller.join().unwrap();
    cycles.sort();
    let seen = seen.lock().unwrap().clone();
    // The poller looks back a second past its previous poll (a row's last_seen is stamped before
    // its commit): a batch committed later than that is missed by it. A last read of every open
    // drift finds those: recorded, their time unknown (left out of the latencies).
    let mut late: HashMap<usize, Value> = HashMap::new();
    for item in drifts(&addrs[watcher], "&status=open").unwrap_or_default() {
        let Some((i, k)) = storm_seen(&item) else { continue };
        let cluster = item["cluster"].as_str().and_then(|c| c.strip_prefix('c')?.parse::<usize>().ok());
        if cluster == Some(k % clusters) && i == object_of(k, clusters, objects) && !seen.contains_key(&k) {
            late.insert(k, item);
        }
    }
    // The changes of the killed replica's clusters that no replica was watching when kubectl
    // returned: from the kill to the last of their new holders' first passes.
    let during = |c: &Change| moved.contains(&c.cluster) && c.returned >= killed && c.started <= killed + handover_end;
    let lag = |c: &Change| seen.get(&c.k).map(|(at, _)| at.saturating_duration_since(c.returned));
    let lost: Vec<usize> =
        made.iter().filter(|c| !seen.contains_key(&c.k) && !late.contains_key(&c.k)).map(|c| c.k).collect();
    let mut late_ks: Vec<&usize> = late.keys().collect();
    late_ks.sort();
    println!(
        "detection: {} of {} changes with their value in GET /drifts ({} of them missed by the poller and found by the last read of every open drift{}), {} lost{} (waited {:.1?} after the stream; a poll took median {:.0?}, p99 {:.0?})",
        made.len() - lost.len(),
        made.len(),
        late.len(),
        if late.is_empty() { String::new() } else { format!(": {late_ks:?}") },
        lost.len(),
        if lost.is_empty() { String::new() } else { format!(" (first: {:?})", &lost[..lost.len().min(10)]) },
        waited.elapsed(),
        percentile(&cycles, 50.0),
        percentile(&cycles, 99.0),
    );
    println!("kubectl returned -> value in GET /drifts:");
    stats("every change, those made while their cluster had no holder included", made.iter().filter_map(lag).collect());
    stats(
        "every change outside the handover window (all but the killed replica's clusters' changes from the kill to their new holder's first pass)",
        made.iter().filter(|c| !during(c)).filter_map(lag).collect(),
    );
    stats(
        "changes of clusters no replica lost",
        made.iter().filter(|c| !moved.contains(&c.cluster)).filter_map(lag).collect(),
    );
    stats(
        "changes of the killed replica's clusters before the kill",
        made.iter().filter(|c| moved.contains(&c.cluster) && c.returned < killed).filter_map(lag).collect(),
    );
    stats(
        "changes of the killed replica's clusters from the kill to their new holder's first pass",
        made.iter().filter(|c| during(c)).filter_map(lag).collect(),
    );
    stats(
        "the same, from kubectl's start (upper bound)",
        made.iter()
            .filter(|c| during(c))
            .filter_map(|c| seen.get(&c.k).map(|(at, _)| at.saturating_duration_since(c.started)))
            .collect(),
    );
    stats(
        "changes of the killed replica's clusters after their first pass",
        made.iter()
            .filter(|c| moved.contains(&c.cluster) && c.started > killed + handover_end)
            .filter_map(lag)
            .collect(),
    );
    stats(
        "every change, kubectl started -> value (upper bound)",
        made.iter().filter_map(|c| seen.get(&c.k).map(|(at, _)| at.saturating_duration_since(c.started))).collect(),
    );

    // 4. Notifications: each change's drift announced once. Deliveries the killed replica had
    // claimed come back when their lease (60 s) ends: wait for them (at most 150 s).
    let drift_of: HashMap<i64, usize> = seen
        .iter()
        .map(|(k, (_, item))| (k, item))
        .chain(late.iter())
        .filter_map(|(k, item)| Some((item["id"].as_i64()?, *k)))
        .collect();
    let opened = |receiver: &Receiver| {
        let mut per_drift: HashMap<i64, usize> = HashMap::new();
        let mut event_ids: HashMap<String, usize> = HashMap::new();
        let mut messages = 0;
        for r in receiver.received().iter().filter(|r| r.answer == common::Answer::Ok) {
            let header = r.header(drift_notify::SIGNATURE_HEADER).expect("a signature header");
            let now = chrono::Utc::now().timestamp();
            drift_notify::verify(SECRET.as_bytes(), header, &r.body, now, Duration::from_secs(600)).unwrap();
            let m = r.json();
            messages += 1;
            for id in m["event_ids"].as_array().into_iter().flatten() {
                *event_ids.entry(id.to_string()).or_default() += 1;
            }
            for e in m["events"].as_array().into_iter().flatten() {
                if e["kind"] == "opened"
                    && let Some(id) = e["drift"]["id"].as_i64()
                {
                    *per_drift.entry(id).or_default() += 1;
                }
            }
        }
        (per_drift, event_ids, messages)
    };
    let waited = Instant::now();
    while waited.elapsed() < Duration::from_secs(150).min(left()) {
        let (per_drift, _, _) = opened(&receiver);
        if drift_of.keys().all(|id| per_drift.contains_key(id)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let (per_drift, event_ids, messages) = opened(&receiver);
    let never: Vec<usize> = drift_of.iter().filter(|(id, _)| !per_drift.contains_key(id)).map(|(_, k)| *k).collect();
    let twice: Vec<(usize, usize)> =
        drift_of.iter().filter_map(|(id, k)| per_drift.get(id).filter(|n| **n > 1).map(|n| (*k, *n))).collect();
    let ids_twice = event_ids.values().filter(|n| **n > 1).count();
    println!(
        "notifications ({messages} messages, {} event ids; waited {:.1?}): of the {} drifts of the stream, {} announced once, {} never (lost{}), {} more than once (duplicated{}); event ids in more than one message: {ids_twice}",
        event_ids.len(),
        waited.elapsed(),
        drift_of.len(),
        drift_of.len() - never.len() - twice.len(),
        never.len(),
        if never.is_empty() { String::new() } else { format!(", changes {:?}", &never[..never.len().min(10)]) },
        twice.len(),
        if twice.is_empty() { String::new() } else { format!(", (change, times) {:?}", &twice[..twice.len().min(10)]) },
    );

    // Memory of the survivors at the end, against the clusters they hold now.
    stop.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let end = holders(&servers[0]);
    println!("memory at the end (survivors):");
    let samples = samples.lock().unwrap();
    for (r, name) in names.iter().enumerate() {
        if r == victim {
            continue;
        }
        let n = end.values().filter(|h| *h == name).count();
        let (now, peak) = rss(pids[r]).unwrap();
        let stream_peak =
            samples.iter().filter(|(t, _)| *t >= settled).filter_map(|(_, row)| row[r]).max().unwrap_or(0);
        println!(
            "  {name}: {n} clusters, RSS {:.0} MiB ({:.1} MiB per cluster), highest sample during the stream {:.0} MiB, peak {:.0} MiB",
            mib(now),
            mib(now) / n.max(1) as f64,
            mib(stream_peak),
            mib(peak)
        );
    }
    for (t, row) in samples.iter().step_by(20) {
        println!(
            "  t={:>5.1}s rss MiB: {}",
            t.as_secs_f64(),
            row.iter().map(|r| r.map_or("-".to_owned(), |r| format!("{:.0}", mib(r)))).collect::<Vec<_>>().join(" ")
        );
    }
    println!("  requests of the bench that failed (tried again): {}", FAILED.load(Ordering::Relaxed));
    let (_, metrics) = get(&addrs[watcher], "/metrics").unwrap_or_default();
    for line in metrics.lines().filter(|l| l.starts_with("drift_watch_lag_seconds_count")) {
        println!("  {}: {line}", names[watcher]);
    }
    let warn = |log: &str| {
        log.lines()
            .filter(|l| {
                (l.contains("WARN") || l.contains("ERROR")) && !l.contains("/ready") && !l.contains("API token")
            })
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let mut logs = vec![(victim_name.clone(), warn(&victim_log))];
    for (r, serve) in serves.iter_mut().enumerate() {
        if let Some(s) = serve.take().filter(|_| r != victim) {
            logs.push((names[r].clone(), warn(&s.stop())));
        }
    }
    for (name, w) in logs {
        println!("  {name} logged {} warnings and errors", w.len());
        for l in w.iter().take(8) {
            println!("    {l}");
        }
    }
    println!("fleet bench done in {:.1?}", begun.elapsed());
    drop(pg);
}

/// The object change `k` modifies in its cluster (`k % clusters`): another one each time.
fn object_of(k: usize, clusters: usize, objects: usize) -> usize {
    // 7,919 is prime: the n-th change of a cluster visits objects without repeating one (as long
    // as the objects' count is not one of its multiples).
    ((k / clusters) * 7_919) % objects
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .map(|a| a.parse().unwrap_or_else(|_| panic!("{a:?}: CLUSTERS OBJECTS REPLICAS RATE SECONDS are numbers")))
        .collect();
    let arg = |i: usize, d: usize| args.get(i).copied().unwrap_or(d);
    fleet(arg(0, 10), arg(1, 10_000), arg(2, 3), arg(3, 10), arg(4, 60));
}
