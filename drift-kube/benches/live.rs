//! Benchmarks of the Kubernetes live source through the test API server (not timed tests):
//!
//! - `list N...`: list and convert N ConfigMaps (pages of 500): time, the CPU time of the
//!   server (serialising pages) and of the reading process (HTTP, parsing, conversion), and the
//!   peak RSS of the reading process (the server runs in a child process, so its memory is not
//!   counted);
//! - `watch N`: the watch cache of N objects: its own accounting and the RSS it adds;
//! - `latency K`: K `kubectl scale` commands, time from starting kubectl to the change event
//!   (median, 99th percentile), and kubectl's own run time for comparison; then K changes of
//!   the scale subresource sent with kube-rs from this process, time from sending to the event
//!   (the watch path without kubectl's start-up).
//!
//! `cargo bench -p drift-kube --bench live -- list 1000 10000 100000`
//! (the child mode `serve N` is internal).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use drift_core::source::LiveEvent;
use drift_core::{GroupKind, LiveSource, Scope};
use drift_kube::{K8sConfig, K8sSource};
use futures::StreamExt as _;
use serde_json::json;

fn status_kib(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// User and system CPU time of a process, in seconds (`/proc/PID/stat`, in USER_HZ = 100 ticks
/// per second, which Linux uses for every architecture it reports to user space).
fn cpu_seconds(pid: &str) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name may hold spaces: count the fields after its closing parenthesis.
    let rest = text.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line; the state, field 3, is fields[0].
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    (ticks(11) + ticks(12)) as f64 / 100.0
}

/// Child mode: a server with `n` ConfigMaps in `bulk` and a Deployment `web` in `shop`; prints
/// the kubeconfig path, serves until stdin closes.
fn serve(n: usize) {
    let server = drift_test_apiserver::TestApiServer::start(drift_test_apiserver::Options::default()).unwrap();
    for ns in ["bulk", "shop"] {
        server.create_object(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})).unwrap();
    }
    for i in 0..n {
        server
            .create_object(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm-{i:06}"), "namespace": "bulk", "labels": {"app": "bench", "shard": (i % 16).to_string()}},
                "data": {"mode": "fast", "index": i.to_string()}}))
            .unwrap();
    }
    server
        .create_object(&json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}}))
        .unwrap();
    println!("{}", server.kubeconfig_path().display());
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

struct Server {
    child: Child,
    kubeconfig: String,
    seeded_in: Duration,
}

impl Server {
    fn start(n: usize) -> Server {
        let started = Instant::now();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["serve", &n.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        Server { child, kubeconfig: line.trim().to_owned(), seeded_in: started.elapsed() }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

async fn source(server: &Server) -> K8sSource {
    K8sSource::connect(K8sConfig { kubeconfig: Some(server.kubeconfig.clone().into()), ..K8sConfig::default() })
        .await
        .unwrap()
}

fn bulk_scope() -> Scope {
    let mut s = Scope::default();
    s.insert(GroupKind::new("", "ConfigMap"), Some("bulk".into()));
    s
}

async fn list(n: usize) {
    let server = Server::start(n);
    let src = source(&server).await;
    let before = status_kib("VmHWM:");
    let server_pid = server.child.id().to_string();
    let (server_cpu, own_cpu) = (cpu_seconds(&server_pid), cpu_seconds("self"));
    let started = Instant::now();
    let snap = src.fetch(&bulk_scope()).await.unwrap();
    let took = started.elapsed();
    let (server_cpu, own_cpu) = (cpu_seconds(&server_pid) - server_cpu, cpu_seconds("self") - own_cpu);
    assert_eq!(snap.resources.len(), n);
    assert!(snap.coverage.is_complete("", "ConfigMap", Some("bulk")));
    let bytes: usize = snap.resources.iter().map(|r| serde_json::to_vec(&r.object).unwrap().len()).sum();
    println!(
        "list {n:>7} objects: {:>8.3} s, {:>9.0} objects/s, CPU server {server_cpu:.2} s / reader {own_cpu:.2} s, peak RSS {:>7} KiB (before {} KiB), JSON {} B/object, server seeded in {:.1} s",
        took.as_secs_f64(),
        n as f64 / took.as_secs_f64(),
        status_kib("VmHWM:"),
        before,
        bytes / n.max(1),
        server.seeded_in.as_secs_f64()
    );
}

async fn watch(n: usize) {
    let server = Server::start(n);
    let src = source(&server).await;
    let rss_before = status_kib("VmRSS:");
    let started = Instant::now();
    let mut w = src.start_watch(&bulk_scope()).await;
    let mut applied = 0;
    while let Some(e) = w.next().await {
        match e.unwrap() {
            LiveEvent::Applied(_) => applied += 1,
            LiveEvent::Synced { .. } => break,
            other => panic!("{other:?}"),
        }
    }
    let took = started.elapsed();
    assert_eq!(applied, n);
    let stats = w.stats();
    let rss_after = status_kib("VmRSS:");
    println!(
        "watch {n:>7} objects: synced in {:.3} s; cache {} objects, payload {} B/object, estimated {} B/object; RSS {} -> {} KiB (+{} B/object, allocator slack included), peak RSS {} KiB",
        took.as_secs_f64(),
        stats.objects,
        stats.payload_bytes / n.max(1),
        stats.estimated_bytes / n.max(1),
        rss_before,
        rss_after,
        (rss_after.saturating_sub(rss_before) * 1024) as usize / n.max(1),
        status_kib("VmHWM:")
    );
}

async fn latency(k: usize) {
    let server = Server::start(0);
    let src = source(&server).await;
    let mut scope = Scope::default();
    scope.insert(GroupKind::new("apps", "Deployment"), Some("shop".into()));
    let mut w = src.start_watch(&scope).await;
    while let Some(e) = w.next().await {
        if matches!(e.unwrap(), LiveEvent::Synced { .. }) {
            break;
        }
    }
    let home = tempfile::tempdir().unwrap();
    let mut to_event = Vec::new();
    let mut kubectl_runs = Vec::new();
    for i in 0..k {
        let replicas = format!("--replicas={}", 2 + i % 2);
        let started = Instant::now();
        let mut child = Command::new("kubectl")
            .args(["--kubeconfig", &server.kubeconfig, "scale", "deployment/web", "-n", "shop", &replicas])
            .env("HOME", home.path())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        loop {
            let e = tokio::time::timeout(Duration::from_secs(10), w.next()).await.unwrap().unwrap().unwrap();
            if matches!(e, LiveEvent::Applied(_)) {
                break;
            }
        }
        to_event.push(started.elapsed());
        assert!(child.wait().unwrap().success());
        kubectl_runs.push(started.elapsed());
    }
    // The same change without starting a process: PATCH .../deployments/web/scale from here.
    let kc = kube::config::Kubeconfig::read_from(&server.kubeconfig).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap();
    let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
        kube::Api::namespaced(kube::Client::try_from(cfg).unwrap(), "shop");
    let mut api_to_event = Vec::new();
    for i in 0..k {
        let patch = kube::api::Patch::Merge(json!({"spec": {"replicas": 4 + i % 2}}));
        let started = Instant::now();
        deployments.patch_scale("web", &kube::api::PatchParams::default(), &patch).await.unwrap();
        loop {
            let e = tokio::time::timeout(Duration::from_secs(10), w.next()).await.unwrap().unwrap().unwrap();
            if matches!(e, LiveEvent::Applied(_)) {
                break;
            }
        }
        api_to_event.push(started.elapsed());
    }
    let pct = |v: &mut Vec<Duration>, p: f64| {
        v.sort();
        v[((v.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1000.0
    };
    println!(
        "latency over {k} kubectl scale: start of kubectl -> event median {:.1} ms, p99 {:.1} ms; kubectl run median {:.1} ms, p99 {:.1} ms; scale PATCH from kube-rs -> event median {:.2} ms, p99 {:.2} ms",
        pct(&mut to_event, 0.5),
        pct(&mut to_event, 0.99),
        pct(&mut kubectl_runs, 0.5),
        pct(&mut kubectl_runs, 0.99),
        pct(&mut api_to_event, 0.5),
        pct(&mut api_to_event, 0.99)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    if args.first().map(String::as_str) == Some("serve") {
        serve(args[1].parse().unwrap());
        return;
    }
    // The program chooses the process-level TLS crypto provider, not the library.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mode = args.first().cloned().unwrap_or_else(|| "list".into());
    let numbers: Vec<usize> = args.iter().skip(1).filter_map(|a| a.parse().ok()).collect();
    rt.block_on(async {
        match mode.as_str() {
            "list" => {
                for n in if numbers.is_empty() { vec![1_000, 10_000] } else { numbers } {
                    list(n).await;
                }
            }
            "watch" => watch(numbers.first().copied().unwrap_or(10_000)).await,
            "latency" => latency(numbers.first().copied().unwrap_or(100)).await,
            other => panic!("unknown mode {other}: list N... | watch N | latency K"),
        }
    });
}
