//! One detector, many clusters (issue 35, item 1), with real processes: one `drift serve` over
//! three test API servers, each reached another way (a kubeconfig, an Argo CD cluster Secret in
//! a file, a Flux kubeconfig Secret read from the home cluster), one SQLite store.
//!
//! - Each cluster's hand changes open drifts under its name, seen by its own watch.
//! - One API server stopped for a minute: its drifts stay open through scans that cannot read
//!   it, its scan record says why (coverage failed, the reason), `/ready` names it and stays
//!   200; changes on the other clusters meanwhile (one at once, one 55 s in) are still detected
//!   within seconds.
//! - Started again: its next scan reads it and resolves what was put back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use common::{APPLICATION_CRD, GitRepo, Serve, get_json, http, kubectl, wait_for};
use drift_test_apiserver::{Options, TestApiServer};
use serde_json::Value;

const TOKEN: &str = "clusters-api-token-4d1f";
/// The bearer token the Secret-reached clusters require; never in drift's output.
const CLUSTER_TOKEN: &str = "cluster-bearer-7c9a2e5b-secret";

fn tls_server(listen: std::net::SocketAddr) -> TestApiServer {
    TestApiServer::start(Options { listen, tls: true, token: Some(CLUSTER_TOKEN.to_owned()), ..Options::default() })
        .unwrap()
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// The base64 CA of a test API server's kubeconfig (what Argo CD keeps as `caData`).
fn ca_data(kubeconfig: &Path) -> String {
    let text = std::fs::read_to_string(kubeconfig).unwrap();
    let line = text.lines().find(|l| l.contains("certificate-authority-data")).expect("a CA in the kubeconfig");
    line.split(':').nth(1).unwrap().trim().trim_matches('"').to_owned()
}

/// The objects of the open drifts of `cluster`, as `Kind/name`.
fn open_objects(addr: &str, cluster: &str) -> Vec<String> {
    let page = get_json(addr, &format!("/drifts?status=open&cluster={cluster}&limit=500"));
    let mut rows: Vec<String> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| format!("{}/{}", d["resource_kind"].as_str().unwrap(), d["resource_name"].as_str().unwrap()))
        .collect();
    rows.sort();
    rows
}

/// The open drifts of `cluster`, as (type, path).
fn open(addr: &str, cluster: &str) -> Vec<(String, String)> {
    let page = get_json(addr, &format!("/drifts?status=open&cluster={cluster}&limit=500"));
    let mut rows: Vec<(String, String)> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["drift_type"].as_str().unwrap().to_owned(), d["path"].as_str().unwrap().to_owned()))
        .collect();
    rows.sort();
    rows
}

fn scan(addr: &str) -> Value {
    common::scan_now(addr, TOKEN)
}

#[test]
fn one_cluster_down_keeps_its_drifts_and_says_why_while_the_others_are_watched() {
    let home = tempfile::tempdir().unwrap();
    let repo = GitRepo::shop(home.path().join("repo"));
    let k = |server: &TestApiServer, args: &[&str]| kubectl(server.kubeconfig_path(), home.path(), args, &[]);
    let apps = repo.dir.join("apps");
    let apply = |server: &TestApiServer| k(server, &["apply", "-R", "-f", apps.to_str().unwrap()]);

    // east: a kubeconfig (and the home cluster); west: an Argo CD cluster Secret in a file;
    // north: a Flux kubeconfig Secret kept in the home cluster.
    let east = TestApiServer::start(Options::default()).unwrap();
    let west = tls_server("127.0.0.1:0".parse().unwrap());
    let north = tls_server("127.0.0.1:0".parse().unwrap());
    for s in [&east, &west, &north] {
        apply(s);
    }
    let argo = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "west", "namespace": "argocd", "labels": {"argocd.argoproj.io/secret-type": "cluster"}},
        "type": "Opaque",
        "data": {
            "name": b64("west"),
            "server": b64(&west.url()),
            "config": b64(&format!(
                r#"{{"bearerToken":"{CLUSTER_TOKEN}","tlsClientConfig":{{"insecure":false,"caData":"{}"}}}}"#,
                ca_data(west.kubeconfig_path())
            )),
        },
    });
    let argo_file = home.path().join("west-secret.json");
    std::fs::write(&argo_file, argo.to_string()).unwrap();
    k(
        &east,
        &[
            "create",
            "secret",
            "generic",
            "north-kubeconfig",
            "-n",
            "default",
            &format!("--from-file=value={}", north.kubeconfig_path().display()),
        ],
    );

    let config = home.path().join("drift.yaml");
    std::fs::write(
        &config,
        format!(
            "interval: 1h\nstore: sqlite://{db}\napi:\n  listen: 127.0.0.1:0\n  token_env: CL_TOKEN\n\
             live:\n  kubeconfig: {east}\n  retries: 1\n  retry_backoff: 50ms\n  request_timeout: 3s\n\
             clusters:\n  - name: east\n    kubeconfig: {east}\n  - name: west\n    secret:\n      file: {argo}\n\
             \x20 - name: north\n    secret:\n      name: north-kubeconfig\n\
             repositories:\n  - name: shop\n    url: file://{repo}\n    ref: main\n    path: apps\n    cache_dir: {cache}\n",
            db = home.path().join("drift.db").display(),
            east = east.kubeconfig_path().display(),
            argo = argo_file.display(),
            repo = repo.dir.display(),
            cache = home.path().join("cache").display(),
        ),
    )
    .unwrap();
    let serve = Serve::start(&config, &[("CL_TOKEN", TOKEN)]);
    let addr = serve.addr.clone();

    // A first pass of every cluster, then the watch sees hand changes in each.
    wait_for(Duration::from_secs(30), "a scan of every cluster", || {
        let (_, body) = http(&addr, "GET", "/ready", None);
        let ready: Value = serde_json::from_str(&body).ok()?;
        let clusters: Vec<&str> = ready["scans"].as_array()?.iter().filter_map(|s| s["cluster"].as_str()).collect();
        (clusters.len() == 3).then_some(())
    });
    k(&east, &["scale", "deployment/web", "-n", "shop", "--replicas=5"]);
    k(&west, &["scale", "deployment/web", "-n", "shop", "--replicas=6"]);
    k(&north, &["scale", "deployment/web", "-n", "shop", "--replicas=7"]);
    let replicas = ("replicas_drift".to_owned(), "spec.replicas".to_owned());
    let configmap = ("configmap_drift".to_owned(), "data.mode".to_owned());
    for c in ["east", "west", "north"] {
        wait_for(Duration::from_secs(20), &format!("the watch of {c} opens its drift"), || {
            (open(&addr, c) == vec![replicas.clone()]).then_some(())
        });
    }

    // West's API server stops, for a minute.
    let west_addr = west.addr();
    west.shutdown();
    let down = std::time::Instant::now();
    let report = scan(&addr);
    let west_report = report["reports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["cluster"] == "west")
        .unwrap_or_else(|| panic!("a report of west: {report}"))
        .clone();
    assert_ne!(west_report["outcome"], "success", "{west_report}");
    let entries = west_report["coverage"]["entries"].as_array().unwrap();
    assert!(!entries.is_empty(), "{west_report}");
    for e in entries {
        assert_eq!(e["status"], "failed", "{e}");
        assert!(e["message"].as_str().unwrap().contains("Connection refused"), "the reason: {e}");
    }
    assert_eq!(open(&addr, "west"), vec![replicas.clone()], "a scan that could not read west resolves nothing there");
    // Its scan record says why.
    let scans = get_json(&addr, "/scans?limit=20");
    let last_west = scans["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["cluster"] == "west")
        .unwrap_or_else(|| panic!("a scan of west: {scans}"))
        .clone();
    assert_ne!(last_west["outcome"], "success", "{last_west}");
    let gaps = last_west["coverage_gaps"].as_array().unwrap();
    assert!(!gaps.is_empty(), "the coverage gaps of west's scan: {last_west}");
    assert!(gaps.iter().all(|g| g["status"] == "failed"), "{last_west}");
    // One cluster down is not the whole service down: ready, west listed as degraded.
    let (status, body) = http(&addr, "GET", "/ready", None);
    assert_eq!(status, 200, "{body}");
    let ready: Value = serde_json::from_str(&body).unwrap();
    let degraded: Vec<&str> =
        ready["degraded"].as_array().unwrap().iter().filter_map(|d| d["cluster"].as_str()).collect();
    assert_eq!(degraded, ["west"], "/ready names the cluster: {body}");

    // The other clusters are still watched: a change on north is seen within seconds.
    k(&north, &["patch", "configmap", "settings", "-n", "shop", "--type=merge", "-p", r#"{"data":{"mode":"slow"}}"#]);
    wait_for(Duration::from_secs(20), "north's change detected while west is down", || {
        (open(&addr, "north") == vec![configmap.clone(), replicas.clone()]).then_some(())
    });
    assert_eq!(open(&addr, "east"), vec![replicas.clone()]);
    assert_eq!(open(&addr, "west"), vec![replicas.clone()], "still open while west is down");

    // `drift fix` acts on the drift's own cluster: north's revert plan is made on north (reached
    // through its Secret), west's cannot be while west is down.
    let id_of = |cluster: &str| -> i64 {
        let page = get_json(&addr, &format!("/drifts?status=open&cluster={cluster}&limit=500"));
        page["items"].as_array().unwrap().iter().find(|d| d["path"] == "spec.replicas").unwrap()["id"].as_i64().unwrap()
    };
    let fix = |id: i64| {
        common::drift_command()
            .args(["fix", &id.to_string(), "--revert", "--dry-run", "--as", "tester", "--config"])
            .arg(&config)
            .env("NO_COLOR", "1")
            .env_remove("KUBECONFIG")
            .output()
            .unwrap()
    };
    let out = fix(id_of("north"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "drift fix --revert --dry-run of north's drift: {text}");
    assert!(!text.contains(CLUSTER_TOKEN), "{text}");
    let out = fix(id_of("west"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "west is down: {text}");
    assert!(text.contains("cluster=west") && text.contains("unavailable"), "{text}");
    assert_eq!(open(&addr, "north")[1], replicas, "a dry run changes nothing");

    // The rest of the minute: west's watch keeps failing (its restarts back off), and a change
    // on east made near its end is still seen within seconds, west's drift still open.
    std::thread::sleep(Duration::from_secs(55).saturating_sub(down.elapsed()));
    k(&east, &["patch", "configmap", "settings", "-n", "shop", "--type=merge", "-p", r#"{"data":{"mode":"late"}}"#]);
    wait_for(Duration::from_secs(20), "east's change detected a minute into west's outage", || {
        (open(&addr, "east") == vec![configmap.clone(), replicas.clone()]).then_some(())
    });
    assert!(down.elapsed() >= Duration::from_secs(55), "{:?}", down.elapsed());
    std::thread::sleep(Duration::from_secs(60).saturating_sub(down.elapsed()));
    let report = scan(&addr);
    let west_report = report["reports"].as_array().unwrap().iter().find(|r| r["cluster"] == "west").unwrap().clone();
    assert_ne!(west_report["outcome"], "success", "still down after a minute: {west_report}");
    assert_eq!(open(&addr, "west"), vec![replicas.clone()], "still open after a minute of outage");
    let (status, body) = http(&addr, "GET", "/ready", None);
    assert_eq!(status, 200, "one cluster down a minute is not the service down: {body}");

    // West comes back (a fresh server on the same address, as Git has it): its next scan reads
    // it and resolves its drift.
    let west = tls_server(west_addr);
    apply(&west);
    scan(&addr);
    assert_eq!(open(&addr, "west"), vec![], "resolved once west is read again");
    assert_eq!(open(&addr, "east"), vec![configmap.clone(), replicas.clone()]);
    assert_eq!(open(&addr, "north"), vec![configmap, replicas]);

    // Each cluster after the first reads the repository through a clone of its own (their
    // passes fetch at once).
    for c in ["west", "north"] {
        assert!(home.path().join("cache/clusters").join(c).is_dir(), "the clone of {c}");
    }
    let log = serve.stop();
    assert!(!log.contains(CLUSTER_TOKEN), "a cluster token in the log");
    assert!(log.contains("cluster credentials read from a Secret"), "{log}");
    drop(west);
}

/// An Argo CD Application in a repository shown to several clusters is compared with the
/// cluster its `spec.destination` names only (by the name in drift.yaml, by the API server URL,
/// `https://kubernetes.default.svc` for the home cluster); one going to no cluster of the
/// detector is a warning of the first cluster's scan, naming it and its destination. An app of
/// apps across clusters: a root going to the home cluster renders, through a kustomization, the
/// Applications of beta and gamma, whose objects beta and gamma compare. The Application
/// objects are the home cluster's only (beta serves the CRD too, and holds none).
#[test]
fn argo_applications_are_compared_with_the_cluster_their_destination_names_only() {
    let home = tempfile::tempdir().unwrap();
    let alpha = TestApiServer::start(Options::default()).unwrap();
    let beta = TestApiServer::start(Options::default()).unwrap();
    let gamma = TestApiServer::start(Options::default()).unwrap();
    let k = |server: &TestApiServer, args: &[&str]| kubectl(server.kubeconfig_path(), home.path(), args, &[]);
    let repo = GitRepo::init(home.path().join("repo"));
    let url = format!("file://{}", repo.dir.display());
    let app = |name: &str, path: &str, destination: &str| {
        format!(
            "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {{name: {name}, namespace: argocd}}\n\
             spec:\n  project: default\n  source: {{repoURL: '{url}', path: {path}, targetRevision: HEAD}}\n  \
             destination: {destination}\n"
        )
    };
    let cm = |name: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: shop}}\ndata: {{mode: fast}}\n")
    };
    repo.write("namespace.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n");
    repo.write("argo/beta.yaml", &app("to-beta", "beta", "{name: beta, namespace: shop}"));
    // Gamma by its URL, written as people do (a trailing slash).
    repo.write(
        "argo/gamma.yaml",
        &app("to-gamma", "gamma", &format!("{{server: '{}/', namespace: shop}}", gamma.url())),
    );
    // The home cluster (`live:` is alpha's API server).
    repo.write(
        "argo/home.yaml",
        &app("to-home", "home", "{server: 'https://kubernetes.default.svc', namespace: shop}"),
    );
    repo.write("argo/mars.yaml", &app("to-mars", "mars", "{name: mars, namespace: shop}"));
    for folder in ["beta", "gamma", "home", "mars"] {
        repo.write(&format!("{folder}/settings.yaml"), &cm(&format!("{folder}-settings")));
    }
    // The app of apps: the children are in the root's rendering only (a kustomization), their
    // objects get their namespace from their Application only.
    repo.write("argo/root.yaml", &app("root", "root", "{name: in-cluster, namespace: argocd}"));
    repo.write("root/kustomization.yaml", "resources: [beta.yaml, gamma.yaml]\n");
    repo.write("root/beta.yaml", &app("child-beta", "child-beta", "{name: beta, namespace: shop}"));
    repo.write(
        "root/gamma.yaml",
        &app("child-gamma", "child-gamma", &format!("{{server: '{}', namespace: shop}}", gamma.url())),
    );
    for child in ["beta", "gamma"] {
        repo.write(
            &format!("child-{child}/settings.yaml"),
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {child}-child}}\ndata: {{mode: fast}}\n"),
        );
    }
    // One object that beta's and gamma's Applications both render, each its own way.
    let shared = |mode: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: shared, namespace: shop}}\ndata: {{mode: {mode}}}\n"
        )
    };
    repo.write("beta/shared.yaml", &shared("beta-mode"));
    repo.write("gamma/shared.yaml", &shared("gamma-mode"));
    repo.commit("three clusters");
    // Each cluster holds what goes to it, and nothing of the others.
    let manifests = home.path().join("live");
    std::fs::create_dir_all(&manifests).unwrap();
    let apply = |server: &TestApiServer, name: &str| {
        let file = manifests.join(format!("{name}.yaml"));
        std::fs::write(&file, format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: shop}}\n---\n{}", cm(name)))
            .unwrap();
        k(server, &["apply", "-f", file.to_str().unwrap()]);
    };
    apply(&alpha, "home-settings");
    apply(&beta, "beta-settings");
    apply(&gamma, "gamma-settings");
    apply(&beta, "beta-child");
    apply(&gamma, "gamma-child");
    // Argo CD runs on alpha (the home cluster): the Applications are there, as the repository
    // and the root write them. Beta serves the CRD too, with no Application.
    let crd = manifests.join("crd.yaml");
    std::fs::write(&crd, APPLICATION_CRD).unwrap();
    k(&beta, &["apply", "-f", crd.to_str().unwrap()]);
    k(&alpha, &["apply", "-f", crd.to_str().unwrap()]);
    k(&alpha, &["create", "namespace", "argocd"]);
    k(&alpha, &["apply", "-f", repo.dir.join("argo").to_str().unwrap()]);
    for child in ["beta", "gamma"] {
        k(&alpha, &["apply", "-f", repo.dir.join(format!("root/{child}.yaml")).to_str().unwrap()]);
    }
    for (server, mode) in [(&beta, "beta-mode"), (&gamma, "gamma-mode")] {
        let file = manifests.join(format!("{mode}.yaml"));
        std::fs::write(&file, shared(mode)).unwrap();
        k(server, &["apply", "-f", file.to_str().unwrap()]);
    }

    let config = home.path().join("drift.yaml");
    std::fs::write(
        &config,
        format!(
            "interval: 1h\nstore: sqlite://{db}\napi:\n  listen: 127.0.0.1:0\n  token_env: CL_TOKEN\n\
             live:\n  kubeconfig: {alpha}\n\
             clusters:\n  - name: alpha\n    kubeconfig: {alpha}\n  - name: beta\n    kubeconfig: {beta}\n\
             \x20 - name: gamma\n    kubeconfig: {gamma}\n\
             repositories:\n  - name: fleet\n    url: {url}\n    ref: main\n    cache_dir: {cache}\n",
            db = home.path().join("drift.db").display(),
            alpha = alpha.kubeconfig_path().display(),
            beta = beta.kubeconfig_path().display(),
            gamma = gamma.kubeconfig_path().display(),
            cache = home.path().join("cache").display(),
        ),
    )
    .unwrap();
    let serve = Serve::start(&config, &[("CL_TOKEN", TOKEN)]);
    let addr = serve.addr.clone();

    let report = scan(&addr);
    for c in ["alpha", "beta", "gamma"] {
        assert_eq!(open(&addr, c), vec![], "{c} holds what its Applications render and nothing else is asked of it");
    }
    // A change on beta to an object of the Application going to beta is a drift of beta; the
    // same object, absent from alpha and gamma, is not missing there.
    k(
        &beta,
        &["patch", "configmap", "beta-settings", "-n", "shop", "--type=merge", "-p", r#"{"data":{"mode":"slow"}}"#],
    );
    k(
        &alpha,
        &["patch", "configmap", "home-settings", "-n", "shop", "--type=merge", "-p", r#"{"data":{"mode":"slow"}}"#],
    );
    scan(&addr);
    let changed = vec![("configmap_drift".to_owned(), "data.mode".to_owned())];
    assert_eq!(open(&addr, "beta"), changed, "beta's change");
    assert_eq!(open(&addr, "alpha"), changed, "the home cluster's (kubernetes.default.svc)");
    assert_eq!(open(&addr, "gamma"), vec![], "nothing of beta's or the home's Application on gamma");

    // The children of the root: each compared by its own cluster; an Application object is a
    // drift of the home cluster.
    k(&beta, &["patch", "configmap", "beta-child", "-n", "shop", "--type=merge", "-p", r#"{"data":{"mode":"slow"}}"#]);
    k(
        &gamma,
        &["patch", "configmap", "gamma-child", "-n", "shop", "--type=merge", "-p", r#"{"data":{"mode":"slow"}}"#],
    );
    k(
        &alpha,
        &["patch", "application", "child-beta", "-n", "argocd", "--type=merge", "-p", r#"{"spec":{"project":"hand"}}"#],
    );
    scan(&addr);
    assert_eq!(open_objects(&addr, "beta"), ["ConfigMap/beta-child", "ConfigMap/beta-settings"]);
    assert_eq!(open_objects(&addr, "gamma"), ["ConfigMap/gamma-child"]);
    assert_eq!(open_objects(&addr, "alpha"), ["Application/child-beta", "ConfigMap/home-settings"]);

    // A revert of beta's change puts back what beta's Application renders, not gamma's version
    // of the same object (the value beta's scan recorded).
    k(&beta, &["patch", "configmap", "shared", "-n", "shop", "--type=merge", "-p", r#"{"data":{"mode":"hand"}}"#]);
    scan(&addr);
    // The open drift of `shared` on a cluster, and `drift fix ID ARGS` of it (success, output).
    let shared_drift = |cluster: &str| {
        let page = get_json(&addr, &format!("/drifts?status=open&cluster={cluster}&limit=500"));
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["resource_name"] == "shared")
            .unwrap_or_else(|| panic!("{cluster}'s shared drift: {page}"))["id"]
            .as_i64()
            .unwrap()
    };
    let fix = |id: i64, args: &[&str]| {
        let out = common::drift_command()
            .args(["fix", &id.to_string()])
            .args(args)
            .args(["--as", "tester", "--config"])
            .arg(&config)
            .env("NO_COLOR", "1")
            .env_remove("KUBECONFIG")
            .output()
            .unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "drift fix {id} {args:?}: {text}");
        (String::from_utf8_lossy(&out.stdout).into_owned(), text)
    };
    let (_, text) = fix(shared_drift("beta"), &["--revert", "--dry-run"]);
    assert!(text.contains("beta-mode") && !text.contains("gamma-mode"), "{text}");

    // An accept of gamma's change edits the file of the Application going to gamma, not the
    // first file that renders the object (beta's).
    k(
        &gamma,
        &["patch", "configmap", "shared", "-n", "shop", "--type=merge", "-p", r#"{"data":{"mode":"gamma-hand"}}"#],
    );
    scan(&addr);
    let id = shared_drift("gamma");
    let on_gamma_only = |branch: &str, how: &str| {
        let changed = repo.git(&["diff", "--name-only", "main", branch]);
        assert_eq!(changed.trim(), "gamma/shared.yaml", "{how}");
        assert!(repo.git(&["show", &format!("{branch}:gamma/shared.yaml")]).contains("gamma-hand"), "{how}");
    };
    // Through the API of `drift serve` (its proposers of gamma's repositories)...
    let (status, body) = common::http(&addr, "POST", &format!("/drifts/{id}/accept"), Some(TOKEN));
    assert_eq!(status, 200, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    let branch = answer["proposal"]["branch"].as_str().unwrap_or_else(|| panic!("a branch: {body}")).to_owned();
    on_gamma_only(&branch, &body);
    repo.git(&["branch", "-D", &branch]);
    // ... and `drift fix` (its own, of the drift's cluster).
    let (stdout, text) = fix(id, &["--accept"]);
    let branch = stdout.split_whitespace().nth(1).unwrap_or_else(|| panic!("a branch: {text}")).to_owned();
    on_gamma_only(&branch, &text);
    // ... and `drift fix` when gamma cannot be opened (its kubeconfig names a CA file that is not
    // there): the values the last scan recorded are proposed, and gamma's API server, which its
    // Application names, is read from the kubeconfig without a request.
    repo.git(&["branch", "-D", &branch]);
    let gamma_kubeconfig = gamma.kubeconfig_path().display().to_string();
    let text = std::fs::read_to_string(&gamma_kubeconfig).unwrap();
    let broken = text.replacen("    server:", "    certificate-authority: /nonexistent/drift-ca.crt\n    server:", 1);
    assert_ne!(broken, text);
    let unopenable = home.path().join("gamma-unopenable.kubeconfig");
    std::fs::write(&unopenable, broken).unwrap();
    let offline = home.path().join("offline.yaml");
    let offline_config =
        std::fs::read_to_string(&config).unwrap().replace(&gamma_kubeconfig, &unopenable.display().to_string());
    std::fs::write(&offline, offline_config).unwrap();
    let out = common::drift_command()
        .args(["fix", &id.to_string(), "--accept", "--as", "tester", "--config"])
        .arg(&offline)
        .env("NO_COLOR", "1")
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stderr.contains("proposing the values the last scan recorded"), "{stderr}");
    let branch = stdout.split_whitespace().nth(1).unwrap_or_else(|| panic!("a branch: {stdout}")).to_owned();
    on_gamma_only(&branch, &stdout);

    // The Application going nowhere: a warning of the first cluster's scan (once per round).
    let warned = |cluster: &str| -> Vec<String> {
        let r = report["reports"].as_array().unwrap().iter().find(|r| r["cluster"] == cluster).unwrap();
        r["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|w| w["message"].as_str())
            .filter(|m| m.contains("destination"))
            .map(str::to_owned)
            .collect()
    };
    let alpha_warnings = warned("alpha");
    assert_eq!(alpha_warnings.len(), 1, "{report}");
    assert!(
        alpha_warnings[0].contains("Application argocd/to-mars")
            && alpha_warnings[0].contains("name `mars`")
            && alpha_warnings[0].contains("compared with no cluster"),
        "{alpha_warnings:?}"
    );
    assert!(warned("beta").is_empty() && warned("gamma").is_empty(), "said once: {report}");
    let log = serve.stop();
    assert!(log.contains("to-mars"), "the warning is logged: {log}");
}
