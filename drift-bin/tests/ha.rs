//! High availability and several clusters, with real processes: `drift serve` replicas sharing
//! one PostgreSQL (drift-testkit-pg) and a Lease on the test API server.
//!
//! - Two replicas: exactly one leads and scans, both serve the API; `kill -9` of the leader and
//!   the other one takes the Lease and scans (after the dead leader's last renewal; how long it
//!   took is printed, not asserted); no two scans ever overlap (the scan records' start and
//!   finish times in the store); SIGTERM releases the Lease so a third replica takes over at once.
//! - The default timings, measured over four `kill -9` rounds (docs/benchmarks.md).
//! - Several clusters: two test API servers, two detectors with different `cluster` names on
//!   one PostgreSQL: a scan of one never resolves the other's drifts, and `GET /drifts?cluster=`
//!   and `GET /stats?cluster=` keep them apart.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use common::{GitRepo, Serve, get_json, http, kubectl};
use drift_core::DriftStore;
use drift_core::sink::ScanRecord;
use drift_postgres::{PostgresConfig, PostgresStore};
use drift_test_apiserver::{Options, TestApiServer};
use drift_testkit_pg::PgServer;
use serde_json::Value;

const TOKEN: &str = "ha-token-51c2e8";
/// The election of these tests: a 6 s lease, renewed every second, given up after 4 s.
const LEASE_SECS: i64 = 6;
const RETRY_SECS: i64 = 1;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// A PostgreSQL database, a git repository with the shop, and a home for kubectl.
struct Shared {
    home: tempfile::TempDir,
    repo: GitRepo,
    _pg: PgServer,
    db_url: String,
}

impl Shared {
    fn start() -> Shared {
        let home = tempfile::tempdir().unwrap();
        let pg = PgServer::start().unwrap();
        let db_url = rt().block_on(pg.create_database()).unwrap();
        let repo = GitRepo::shop(home.path().join("repo"));
        Shared { home, repo, _pg: pg, db_url }
    }

    /// A test API server with the shop applied from the repository by kubectl.
    fn cluster(&self) -> TestApiServer {
        let server = TestApiServer::start(Options::default()).unwrap();
        self.kubectl(&server, &["apply", "-R", "-f", self.repo.dir.join("apps").to_str().unwrap()]);
        server
    }

    fn kubectl(&self, server: &TestApiServer, args: &[&str]) -> String {
        kubectl(server.kubeconfig_path(), self.home.path(), args, &[])
    }

    /// A configuration file for cluster `name` on `server`, scanning every `interval`, with
    /// `extra` appended.
    fn config(&self, file: &str, name: &str, server: &TestApiServer, interval: &str, extra: &str) -> PathBuf {
        let path = self.home.path().join(file);
        std::fs::write(
            &path,
            format!(
                "cluster: {name}\ninterval: {interval}\nwatch: false\ndatabase_env: HA_DATABASE_URL\napi:\n  listen: 127.0.0.1:0\n  token_env: HA_TOKEN\n\
                 repositories:\n  - name: shop\n    url: file://{repo}\n    ref: main\n    path: apps\n    cache_dir: {cache}\n\
                 live:\n  kubeconfig: {kubeconfig}\n{extra}",
                repo = self.repo.dir.display(),
                cache = self.home.path().join(format!("cache-{file}")).display(),
                kubeconfig = server.kubeconfig_path().display(),
            ),
        )
        .unwrap();
        path
    }

    fn serve(&self, config: &Path, pod: &str) -> Serve {
        Serve::start(config, &[("HA_DATABASE_URL", &self.db_url), ("HA_TOKEN", TOKEN), ("POD_NAME", pod)])
    }

    /// Every scan recorded, oldest first.
    fn scans(&self) -> Vec<ScanRecord> {
        rt().block_on(async {
            let store = PostgresStore::from_config(&PostgresConfig::new(&self.db_url)).await.unwrap();
            let mut scans = store.recent_scans(10_000).await.unwrap();
            scans.sort_by_key(|s| (s.started_at, s.finished_at));
            scans
        })
    }
}

fn leader_of(serve: &Serve) -> Option<bool> {
    let (_, body) = http(&serve.addr, "GET", "/ready", None);
    serde_json::from_str::<Value>(&body).ok()?["leader"].as_bool()
}

fn metric(serve: &Serve, name: &str) -> Option<f64> {
    let (_, text) = http(&serve.addr, "GET", "/metrics", None);
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

fn lease(shared: &Shared, server: &TestApiServer) -> Value {
    serde_json::from_str(&shared.kubectl(server, &["get", "lease", "drift-detector", "-n", "default", "-o", "json"]))
        .unwrap()
}

fn time_of(v: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(v.as_str().unwrap()).unwrap().with_timezone(&Utc)
}

/// The scans a replica's log says it recorded.
fn recorded_by(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains("scan recorded"))
        .filter_map(|l| l.split("scan_id=").nth(1)?.split([' ', ',']).next().map(str::to_owned))
        .collect()
}

/// No scan started before the one before it finished.
fn assert_no_overlap(scans: &[ScanRecord]) {
    for pair in scans.windows(2) {
        assert!(
            pair[1].started_at >= pair[0].finished_at,
            "scans overlap: {} ran {}..{} and {} started at {}",
            pair[0].scan_id,
            pair[0].started_at,
            pair[0].finished_at,
            pair[1].scan_id,
            pair[1].started_at
        );
    }
}

const ELECTION: &str =
    "leader_election:\n  enabled: true\n  lease_duration: 6s\n  renew_deadline: 4s\n  retry_period: 1s\n";

/// `common::wait_for`, with the logs of the replicas in the failure message.
fn wait<T>(limit: Duration, what: &str, replicas: &[&Serve], mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() >= deadline {
            let logs: Vec<String> = replicas.iter().map(|r| r.log()).collect();
            panic!("timed out after {limit:?} waiting for {what}; the replicas logged:\n{}", logs.join("\n-----\n"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn one_replica_leads_and_scans_and_a_standby_takes_over_when_it_dies() {
    let shared = Shared::start();
    let server = shared.cluster();
    let config = shared.config("ha.yaml", "homelab", &server, "10s", ELECTION);
    let a = shared.serve(&config, "drift-a");
    wait(Duration::from_secs(60), "drift-a to lead", &[&a], || (leader_of(&a) == Some(true)).then_some(()));
    let b = shared.serve(&config, "drift-b");
    // Both candidates have tried by now: b stands by.
    wait(Duration::from_secs(30), "drift-b to stand by", &[&a, &b], || {
        b.log().contains("standing by: another replica leads").then_some(())
    });
    wait(Duration::from_secs(60), "a first scan", &[&a, &b], || (!shared.scans().is_empty()).then_some(()));
    assert_eq!((leader_of(&a), leader_of(&b)), (Some(true), Some(false)));
    assert_eq!((metric(&a, "drift_leader"), metric(&b, "drift_leader")), (Some(1.0), Some(0.0)));
    assert_eq!(lease(&shared, &server)["spec"]["holderIdentity"], "drift-a");

    // Both serve the API from the one store; only the leader takes POST /scan.
    shared.kubectl(&server, &["scale", "deployment/web", "-n", "shop", "--replicas=4"]);
    let (status, body) = http(&b.addr, "POST", "/scan?wait=true", Some(TOKEN));
    assert_eq!(status, 503, "a standby refuses scans: {body}");
    assert!(body.contains("scan could not be started"), "{body}");
    let (status, body) = loop {
        let (status, body) = http(&a.addr, "POST", "/scan?wait=true", Some(TOKEN));
        // The scheduled pass may be running: try again when it finished.
        if status != 409 {
            break (status, body);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status, 200, "{body}");
    let drifts_a = get_json(&a.addr, "/drifts?status=open");
    let drifts_b = get_json(&b.addr, "/drifts?status=open");
    assert_eq!(drifts_a, drifts_b, "both replicas answer from the same store");
    assert_eq!(drifts_a["items"][0]["drift_type"], "replicas_drift", "{drifts_a}");
    // b's /ready is 200: the leader's scans are recent.
    assert_eq!(http(&b.addr, "GET", "/ready", None).0, 200);

    // kill -9 the leader: its last renewal is in the Lease.
    let a_log = {
        let mut a = a;
        a.kill()
    };
    let last_renewal = time_of(&lease(&shared, &server)["spec"]["renewTime"]);
    let killed = Instant::now();
    let scans_before = shared.scans();
    let took_over = wait(Duration::from_secs(60), "drift-b to scan", &[&b], || {
        shared.scans().into_iter().find(|s| !scans_before.iter().any(|o| o.scan_id == s.scan_id))
    });
    let waited = killed.elapsed();
    let after_renewal = (took_over.started_at - last_renewal).num_milliseconds();
    eprintln!(
        "takeover: the standby's first scan started {after_renewal} ms after the dead leader's last renewal \
         ({waited:?} after kill -9 was seen; lease {LEASE_SECS}s, retry {RETRY_SECS}s)"
    );
    // The order of events, not their timing: the new term began after the dead leader's last
    // renewal, and its first scan in it.
    let new_term = time_of(&lease(&shared, &server)["spec"]["acquireTime"]);
    assert!(last_renewal < new_term && new_term <= took_over.started_at, "{last_renewal} {new_term} {took_over:?}");
    assert!(recorded_by(&b.log()).contains(&took_over.scan_id), "drift-b recorded it");
    assert_eq!(leader_of(&b), Some(true));
    let taken = lease(&shared, &server);
    assert_eq!(taken["spec"]["holderIdentity"], "drift-b");
    assert_eq!(taken["spec"]["leaseTransitions"], 1);

    // Every scan before the kill was a's, every one after is b's, and none overlap.
    let a_scans = recorded_by(&a_log);
    assert!(!a_scans.is_empty());
    for s in &scans_before {
        assert!(a_scans.contains(&s.scan_id), "scan {} before the kill was made by the leader", s.scan_id);
    }
    // A second scan of b, to see a full cycle under the new leader.
    let (status, body) = loop {
        let (status, body) = http(&b.addr, "POST", "/scan?wait=true", Some(TOKEN));
        if status != 409 {
            break (status, body);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status, 200, "{body}");

    // SIGTERM releases the Lease: a third replica takes over without waiting for it to expire.
    let c = shared.serve(&config, "drift-c");
    wait(Duration::from_secs(30), "drift-c to stand by", &[&b, &c], || {
        c.log().contains("standing by: another replica leads").then_some(())
    });
    let b_log = b.stop();
    assert!(b_log.contains("lease released"), "{b_log}");
    let released = lease(&shared, &server);
    let c_leads = wait(Duration::from_secs(30), "drift-c to lead", &[&c], || {
        let l = lease(&shared, &server);
        (l["spec"]["holderIdentity"] == "drift-c").then_some(l)
    });
    let after_release =
        (time_of(&c_leads["spec"]["acquireTime"]) - time_of(&released["spec"]["renewTime"])).num_milliseconds();
    eprintln!("takeover after SIGTERM: {after_release} ms from the release to the new term");
    assert!(
        after_release < LEASE_SECS * 1000,
        "a released lease is taken before it would have expired: {after_release} ms"
    );
    wait(Duration::from_secs(60), "drift-c to scan", &[&c], || recorded_by(&c.log()).first().cloned());

    let b_scans = recorded_by(&b_log);
    let all = shared.scans();
    assert!(all.len() >= 4, "{all:?}");
    for s in &all {
        let by = [&a_scans, &b_scans, &recorded_by(&c.log())].iter().filter(|l| l.contains(&s.scan_id)).count();
        assert_eq!(by, 1, "scan {} was recorded by exactly one replica", s.scan_id);
    }
    assert_no_overlap(&all);
    drop(c);
}

#[test]
fn several_clusters_share_one_postgresql_without_resolving_each_other() {
    let shared = Shared::start();
    let (east_api, west_api) = (shared.cluster(), shared.cluster());
    let east = shared.serve(&shared.config("east.yaml", "east", &east_api, "1h", ""), "east");
    let west = shared.serve(&shared.config("west.yaml", "west", &west_api, "1h", ""), "west");
    let scan = |serve: &Serve| {
        let (status, body) = loop {
            let (status, body) = http(&serve.addr, "POST", "/scan?wait=true", Some(TOKEN));
            if status != 409 {
                break (status, body);
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        assert_eq!(status, 200, "{body}");
    };
    let open = |serve: &Serve, cluster: &str| -> Vec<(String, String)> {
        let page = get_json(&serve.addr, &format!("/drifts?status=open&cluster={cluster}&limit=500"));
        let mut rows: Vec<(String, String)> = page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                assert_eq!(d["cluster"], cluster, "{d}");
                (d["drift_type"].as_str().unwrap().to_owned(), d["path"].as_str().unwrap().to_owned())
            })
            .collect();
        rows.sort();
        rows
    };
    let replicas = ("replicas_drift".to_owned(), "spec.replicas".to_owned());
    let configmap = ("configmap_drift".to_owned(), "data.mode".to_owned());

    // The same hand change in both clusters: one drift per cluster, not one shared.
    shared.kubectl(&east_api, &["scale", "deployment/web", "-n", "shop", "--replicas=5"]);
    shared.kubectl(&west_api, &["scale", "deployment/web", "-n", "shop", "--replicas=6"]);
    shared.kubectl(
        &west_api,
        &["patch", "configmap", "settings", "-n", "shop", "--type=merge", "-p", r#"{"data":{"mode":"slow"}}"#],
    );
    scan(&east);
    scan(&west);
    assert_eq!(open(&east, "east"), vec![replicas.clone()]);
    assert_eq!(open(&east, "west"), vec![configmap.clone(), replicas.clone()], "either replica serves both");
    let all = get_json(&west.addr, "/drifts?status=open&limit=500");
    assert_eq!(all["items"].as_array().unwrap().len(), 3, "{all}");

    // East is put back: its scan resolves east's drift only.
    shared.kubectl(&east_api, &["scale", "deployment/web", "-n", "shop", "--replicas=2"]);
    scan(&east);
    assert_eq!(open(&east, "east"), vec![]);
    assert_eq!(open(&east, "west"), vec![configmap.clone(), replicas.clone()], "west's drifts stay open");
    let resolved = get_json(&east.addr, "/drifts?status=resolved&cluster=west");
    assert_eq!(resolved["items"].as_array().unwrap().len(), 0, "{resolved}");
    // West scans again: nothing of east comes back or goes away.
    scan(&west);
    assert_eq!(open(&west, "east"), vec![]);
    assert_eq!(open(&west, "west"), vec![configmap, replicas]);

    // /stats?cluster= separates them too.
    let stats = |cluster: &str| get_json(&east.addr, &format!("/stats?cluster={cluster}"));
    let (e, w, both) = (stats("east"), stats("west"), get_json(&east.addr, "/stats"));
    assert_eq!(e["by_status"]["open"].as_i64().unwrap_or(0), 0, "{e}");
    assert_eq!(e["by_status"]["resolved"], 1, "{e}");
    assert_eq!(w["by_status"]["open"], 2, "{w}");
    assert_eq!(w["by_status"].get("resolved").and_then(Value::as_i64).unwrap_or(0), 0, "{w}");
    assert_eq!(w["by_type"]["configmap_drift"], 1, "{w}");
    assert_eq!(both["by_status"]["open"], 2, "{both}");
    assert_eq!(both["by_status"]["resolved"], 1, "{both}");

    // And so does `drift drifts list --cluster`.
    let listed = |cluster: &str| -> Value {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_drift"))
            .args(["drifts", "list", "--status", "open", "--json", "--cluster", cluster, "--config"])
            .arg(shared.home.path().join("east.yaml"))
            .env("HA_DATABASE_URL", &shared.db_url)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    assert_eq!(listed("east")["items"].as_array().unwrap().len(), 0);
    let west_rows = listed("west");
    assert_eq!(west_rows["items"].as_array().unwrap().len(), 2, "{west_rows}");
    assert!(west_rows["items"].as_array().unwrap().iter().all(|d| d["cluster"] == "west"));

    // Each cluster's scans are recorded under its name.
    let scans = shared.scans();
    let count = |c: &str| scans.iter().filter(|s| s.cluster == c).count();
    // Two asked for each, and the pass at start unless an asked-for one was running then.
    assert!((2..=3).contains(&count("east")) && (2..=3).contains(&count("west")), "{scans:?}");
    assert_eq!(count("east") + count("west"), scans.len(), "{scans:?}");
    drop((east, west));
}

/// The Lease's path on the API server (reads, updates; a watch is on the collection).
const LEASE_PATH: &str = "/apis/coordination.k8s.io/v1/namespaces/default/leases/drift-detector";

/// Milliseconds from `from` to `to`.
fn ms(from: DateTime<Utc>, to: DateTime<Utc>) -> i64 {
    (to - from).num_milliseconds()
}

/// The default timings, measured: the leader is killed (SIGKILL) in each of several rounds, at
/// whatever point of its renewal cycle it happens to be, and the standby takes over. Asserted:
/// the order of events (the standby's term begins after the kill and after the dead leader's
/// last renewal, its first scan after that, one transition per round, scans never overlap) and
/// that nobody reads the Lease while the leader renews it (the standby watches);
/// printed: how long each takeover took (docs/benchmarks.md), never asserted, since a loaded
/// machine stretches it.
#[test]
fn a_standby_takes_over_from_a_killed_leader_with_the_default_timings() {
    const ROUNDS: usize = 4;
    let shared = Shared::start();
    let server = shared.cluster();
    let config = shared.config("defaults.yaml", "homelab", &server, "1h", "leader_election:\n  enabled: true\n");
    let mut leader = shared.serve(&config, "drift-r0");
    wait(Duration::from_secs(60), "drift-r0 to lead", &[&leader], || (leader_of(&leader) == Some(true)).then_some(()));
    let mut to_lease = Vec::new();
    let mut to_scan = Vec::new();
    let mut from_renewal = Vec::new();
    for round in 1..=ROUNDS {
        let name = format!("drift-r{round}");
        let standby = shared.serve(&config, &name);
        wait(Duration::from_secs(60), "the new replica to stand by", &[&leader, &standby], || {
            standby.log().contains("standing by: another replica leads").then_some(())
        });
        // The leader's first scan is in, so the standby's is told apart by its id.
        wait(Duration::from_secs(60), "the leader's first scan", &[&leader], || {
            (!recorded_by(&leader.log()).is_empty()).then_some(())
        });
        if round == 1 {
            // While the leader renews, nobody reads the Lease: the leader replaces the copy it
            // wrote, the standby watches.
            let from = server.requests().len();
            let window = wait(Duration::from_secs(60), "three renewals", &[&leader, &standby], || {
                let window = server.requests().split_off(from);
                let renewals = window.iter().filter(|r| r.method == "PUT" && r.path == LEASE_PATH).count();
                (renewals >= 3).then_some(window)
            });
            let reads: Vec<_> = window.iter().filter(|r| r.method == "GET" && r.path == LEASE_PATH).collect();
            assert!(reads.is_empty(), "the Lease was read while the leader renewed it: {reads:?}");
        }
        let before = lease(&shared, &server);
        let transitions = before["spec"]["leaseTransitions"].as_i64().unwrap();
        let scans_before = shared.scans();
        let killed = Utc::now();
        let leader_log = leader.kill();
        let last_renewal = time_of(&lease(&shared, &server)["spec"]["renewTime"]);
        let taken = wait(Duration::from_secs(60), "the standby to take the Lease", &[&standby], || {
            let l = lease(&shared, &server);
            (l["spec"]["holderIdentity"] == name.as_str()).then_some(l)
        });
        let acquired = time_of(&taken["spec"]["acquireTime"]);
        let scan = wait(Duration::from_secs(60), "the standby to scan", &[&standby], || {
            shared.scans().into_iter().find(|s| !scans_before.iter().any(|o| o.scan_id == s.scan_id))
        });
        // The order of events.
        assert!(last_renewal <= killed, "the dead leader renewed before it was killed");
        assert!(acquired > killed, "round {round}: the standby's term began after the kill");
        assert!(scan.started_at >= acquired, "round {round}: its first scan started in its term");
        assert_eq!(taken["spec"]["leaseTransitions"].as_i64().unwrap(), transitions + 1, "one transition");
        assert!(recorded_by(&standby.log()).contains(&scan.scan_id), "round {round}: the standby recorded it");
        assert!(!recorded_by(&leader_log).contains(&scan.scan_id));
        assert_eq!(leader_of(&standby), Some(true));
        from_renewal.push(ms(last_renewal, acquired));
        to_lease.push(ms(killed, acquired));
        to_scan.push(ms(killed, scan.started_at));
        leader = standby;
    }
    assert_no_overlap(&shared.scans());
    let lease_secs = lease(&shared, &server)["spec"]["leaseDurationSeconds"].as_i64().unwrap();
    eprintln!(
        "takeover after kill -9, default timings (lease {lease_secs}s), {ROUNDS} rounds: \
         kill to the new term {to_lease:?} ms, kill to its first scan {to_scan:?} ms, \
         the dead leader's last renewal to the new term {from_renewal:?} ms"
    );
    drop(leader);
}
