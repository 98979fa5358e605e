//! The web page of `drift serve` in a real headless Chromium (Debian's `chromium`, driven by
//! `chromedriver` over WebDriver): against a store seeded by the demo's first pass (8 known
//! drifts), the counts on the page are the API's, a filter narrows the table and is in the
//! address, a drift's page shows its Git and cluster values and its revert patch, the buttons are
//! hidden without a write token, a decision made through the page is in the API, a change made
//! elsewhere appears without a reload, errors are shown in the page, a read token is asked for,
//! the page fits a phone's width, a revert through the page (dry run, then for real) puts the
//! test API server's object back to Git, and an accept through the page puts the cluster's value
//! on a branch of the repository. Screenshots are written under the target folder
//! (`CARGO_TARGET_TMPDIR/ui/`), their paths printed.
//!
//! Skipped with a reason when chromium or chromedriver is missing, unless
//! `DRIFT_REQUIRE_TOOLS=1` (set by scripts/test) makes that a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod webdriver;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{GitRepo, Serve, edit_configmap, get_json, http, kubectl, wait_for};

/// `POST path` with a JSON body and the write token: the status and the answer as JSON.
fn post(addr: &str, path: &str, body: &Value) -> (u16, Value) {
    let (status, text) = common::post_json(addr, path, WRITE_TOKEN, body);
    (status, if text.is_empty() { Value::Null } else { serde_json::from_str(&text).unwrap() })
}
use drift_test_apiserver::{Options, TestApiServer};
use serde_json::{Value, json};
use webdriver::Browser;

const WRITE_TOKEN: &str = "ui-write-Zq7-4c1f9e";
const READ_TOKEN: &str = "ui-read-Rk2-8d03aa";
const LIMIT: Duration = Duration::from_secs(20);

/// `drift serve` over the demo (a folder of manifests and a snapshot of the cluster), SQLite,
/// with its first pass recorded: 8 open drifts.
fn serve(dir: &Path, extra_api: &str, env: &[(&str, &str)]) -> Serve {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cfg = dir.join("drift.yaml");
    std::fs::write(
        &cfg,
        format!(
            "cluster: demo\ninterval: 1h\nwatch: false\ndatabase: sqlite://{}/drift.db\napi:\n  listen: 127.0.0.1:0\n{extra_api}\
             repositories:\n  - name: demo\n    url: {root}/examples/demo/desired\nlive:\n  snapshot: {root}/examples/demo/live\n",
            dir.display(),
            root = root.display(),
        ),
    )
    .unwrap();
    let server = Serve::start(&cfg, env);
    let token = env.iter().find(|(k, _)| *k == "DRIFT_READ_TOKEN").map(|(_, v)| *v);
    wait_for(Duration::from_secs(60), "the first pass", || {
        let (status, body) = http(&server.addr, "GET", "/drifts?status=open", token);
        let v: Value = serde_json::from_str(&body).ok()?;
        (status == 200 && v["items"].as_array()?.len() == 8).then_some(())
    });
    server
}

/// Where the screenshots go: under the target folder.
fn artefact(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ui");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    println!("screenshot: {}", path.display());
    path
}

fn count(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

/// The number shown by an element, once it shows one.
fn number(b: &Browser, css: &str) -> i64 {
    b.until(LIMIT, &format!("a number in {css}"), |b| b.text(css).trim().parse().ok())
}

/// The ids in the drift table, once it shows what the address asks for.
fn table(b: &Browser) -> Option<Vec<i64>> {
    let ids = b.run(
        "const t = document.getElementById('drift-table');
         const wanted = new URLSearchParams(location.hash.split('?')[1] || '').toString();
         if (!t || t.dataset.query !== wanted) return null;
         return [...t.querySelectorAll('tbody tr')].map((r) => Number(r.dataset.id));",
        json!([]),
    );
    Some(ids.as_array()?.iter().filter_map(Value::as_i64).collect())
}

fn rows(b: &Browser) -> usize {
    table(b).map_or(usize::MAX, |ids| ids.len())
}

/// Console entries at level SEVERE: script errors, CSP violations, failed requests.
fn severe(b: &Browser) -> Vec<Value> {
    b.console().into_iter().filter(|e| e["level"] == "SEVERE").collect()
}

#[test]
fn the_page_shows_the_apis_drifts_filters_them_and_decides_with_a_write_token() {
    let test = "the_page_shows_the_apis_drifts_filters_them_and_decides_with_a_write_token";
    let Some(b) = Browser::start(test, 1280, 1000, false) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path(), "", &[("DRIFT_API_TOKEN", WRITE_TOKEN)]);
    let addr = server.addr.clone();
    let base = format!("http://{addr}/");

    // The overview: the top row is the API's /stats.
    b.goto(&base);
    let stats = get_json(&addr, "/stats");
    let total: i64 = stats["by_status"].as_object().unwrap().values().map(count).sum();
    assert_eq!(number(&b, "#stat-total"), total);
    assert_eq!(number(&b, "#stat-open"), count(&stats["by_status"]["open"]));
    assert_eq!(number(&b, "#stat-critical"), count(&stats["by_severity"]["CRITICAL"]));
    assert_eq!(number(&b, "#stat-high"), count(&stats["by_severity"]["HIGH"]));
    assert_eq!(total, 8, "the demo's 8 drifts");
    // Open by namespace, repository and type: the API's counts, one line each.
    for (list, key) in [("#by-namespace", "by_namespace"), ("#by-repository", "by_repository"), ("#by-type", "by_type")]
    {
        for (name, n) in stats[key].as_object().unwrap() {
            let css = format!("{list} li[data-name=\"{name}\"] .count");
            assert_eq!(number(&b, &css), count(n), "{list} {name}");
        }
    }
    // The trend chart (7 days, drawn as SVG), the last scans and no coverage gap.
    assert_eq!(b.run("return document.querySelectorAll('#trend svg rect.new').length;", json!([])), json!(7));
    let scans = get_json(&addr, "/scans?limit=10");
    let shown = b.until(LIMIT, "the last scans", |b| {
        let n = b.run("return document.querySelectorAll('#scans tbody tr').length;", json!([])).as_u64().unwrap();
        (n > 0).then_some(n)
    });
    assert!(shown as usize <= scans["items"].as_array().unwrap().len());
    assert!(b.text("#gaps").starts_with("None"), "{}", b.text("#gaps"));
    assert!(b.text("#error").is_empty(), "no error: {}", b.text("#error"));
    assert!(severe(&b).is_empty(), "the console: {:?}", severe(&b));
    b.screenshot(&artefact("overview.png"));

    // The table: every drift; a filter narrows it and goes into the address.
    b.click("a[data-nav=drifts]");
    b.until(LIMIT, "8 rows", |b| (rows(b) == 8).then_some(()));
    b.choose("#filter-severity", "HIGH");
    let high = get_json(&addr, "/drifts?severity=HIGH")["items"].as_array().unwrap().len();
    assert!(high > 0 && high < 7, "the filter narrows: {high}");
    b.until(LIMIT, "the HIGH rows", |b| (rows(b) == high && b.url().contains("severity=HIGH")).then_some(()));
    b.type_into("#filter-kind", "Deployment");
    b.click("#filter-apply");
    let both = get_json(&addr, "/drifts?severity=HIGH&kind=Deployment")["items"].as_array().unwrap().len();
    assert!(both > 0 && both < high, "the kind narrows further: {both} of {high}");
    b.until(LIMIT, "the HIGH Deployment rows", |b| {
        (rows(b) == both && b.url().contains("kind=Deployment")).then_some(())
    });
    // The address is a link to share: opened anew, it shows the same filters and rows.
    let shared = b.url();
    b.goto("about:blank");
    b.goto(&shared);
    b.until(LIMIT, "the shared table", |b| (rows(b) == both).then_some(()));
    assert_eq!(b.run("return document.getElementById('filter-severity').value;", json!([])), json!("HIGH"));
    assert_eq!(b.run("return document.getElementById('filter-kind').value;", json!([])), json!("Deployment"));
    assert!(b.find("#page-next").is_none(), "one page holds them");
    b.screenshot(&artefact("drifts.png"));
    // Paging: 3 a page, from a link; the pages hold every drift once, newest first.
    b.goto(&format!("{base}#/drifts?limit=3"));
    let mut seen: Vec<i64> = Vec::new();
    for page in 0..3 {
        let ids: Vec<i64> = b.until(LIMIT, "a page", table);
        assert_eq!(ids.len(), if page < 2 { 3 } else { 2 }, "page {page}: {ids:?}");
        seen.extend(ids);
        if page < 2 {
            b.click("#page-next");
            b.until(LIMIT, "the next page's address", |b| b.url().contains("after=").then_some(()));
        } else {
            assert!(b.find("#page-next").is_none(), "the last page");
            assert!(b.find("#page-first").is_some());
        }
    }
    let api: Vec<i64> =
        get_json(&addr, "/drifts")["items"].as_array().unwrap().iter().map(|d| d["id"].as_i64().unwrap()).collect();
    assert_eq!(seen, api, "every drift once, newest first");

    // A drift: the Git and cluster values side by side, and the revert patch.
    let replicas = &get_json(&addr, "/drifts?drift_type=replicas_drift")["items"][0];
    let id = replicas["id"].as_i64().unwrap();
    b.goto(&format!("{base}#/drifts/{id}"));
    b.until(LIMIT, "the drift's values", |b| (!b.text("#git-value").is_empty()).then_some(()));
    let api = get_json(&addr, &format!("/drifts/{id}"));
    let shown = |css: &str| -> Value { serde_json::from_str(&b.text(css)).unwrap() };
    assert_eq!(shown("#git-value"), api["git_value"]);
    assert_eq!(shown("#cluster-value"), api["cluster_value"]);
    assert_ne!(api["git_value"], api["cluster_value"]);
    b.wait_for("#revert-patch", LIMIT);
    assert_eq!(shown("#revert-patch"), api["revert"]["patch"]);
    assert_eq!(b.text("#revert-command"), api["revert"]["command"].as_str().unwrap());
    assert!(b.text("#drift-facts").contains(api["classification"].as_str().unwrap()));

    // Without a token, no button.
    assert!(b.visible("#actions-disabled"));
    for button in ["#decide-submit", "#revert-dry-run", "#revert-now", "#accept-git"] {
        assert!(!b.visible(button), "{button} is hidden without a write token");
    }
    // With the write token: the buttons; a decision through the page is in the API.
    b.click("#token-button");
    b.type_into("#token-write", WRITE_TOKEN);
    b.click("#token-save");
    b.until(LIMIT, "the buttons", |b| b.visible("#decide-submit").then_some(()));
    b.choose("#decide-action", "acknowledge");
    b.type_into("#decide-comment", "looking at it <b>from the page</b>");
    b.click("#decide-submit");
    let decision = wait_for(LIMIT, "the decision in the API", || {
        let d = get_json(&addr, &format!("/drifts/{id}"));
        d["decisions"].as_array().unwrap().first().cloned()
    });
    assert_eq!(decision["action"], "acknowledge");
    assert_eq!(decision["actor"], "api", "the write token's name is the actor");
    assert_eq!(decision["comment"], "looking at it <b>from the page</b>");
    // The page shows it, as text (the markup in the comment is not markup).
    b.until(LIMIT, "the decision on the page", |b| b.text("#decisions").contains("<b>from the page</b>").then_some(()));
    assert_eq!(b.run("return document.querySelectorAll('#decisions b').length;", json!([])), json!(0));
    assert!(severe(&b).is_empty(), "the console: {:?}", severe(&b));
    b.screenshot(&artefact("drift.png"));
    // A refused action is shown in the page: this service has no cluster writer (a snapshot).
    b.click("#revert-dry-run");
    b.until(LIMIT, "the refusal", |b| b.text("#action-result").contains("not_configured").then_some(()));
    assert!(!b.text("#action-result").contains(WRITE_TOKEN));

    // Updates without a reload: a waiver made elsewhere leaves the open count at the next poll.
    b.goto(&base);
    let open = number(&b, "#stat-open");
    let other = get_json(&addr, "/drifts?drift_type=configmap_drift")["items"][0]["id"].as_i64().unwrap();
    let (status, body) = post(
        &addr,
        &format!("/drifts/{other}/decisions"),
        &json!({"action": "accept", "comment": "waived from elsewhere"}),
    );
    assert_eq!(status, 201, "{body}");
    b.until(LIMIT, "the open count to follow", |b| (number(b, "#stat-open") == open - 1).then_some(()));
    let stats = get_json(&addr, "/stats");
    assert_eq!(number(&b, "#stat-open"), count(&stats["by_status"]["open"]));
    let log = server.stop();
    assert!(!log.contains(WRITE_TOKEN), "the token is never logged");
}

#[test]
fn with_a_read_token_the_page_asks_for_it_and_fits_a_phone() {
    let test = "with_a_read_token_the_page_asks_for_it_and_fits_a_phone";
    let Some(b) = Browser::start(test, 390, 844, true) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = serve(
        dir.path(),
        "  read_token_env: DRIFT_READ_TOKEN\n",
        &[("DRIFT_API_TOKEN", WRITE_TOKEN), ("DRIFT_READ_TOKEN", READ_TOKEN)],
    );
    let base = format!("http://{}/", server.addr);
    b.goto(&base);
    // The API refuses the page's reads: the page says so and opens the token form.
    b.until(LIMIT, "the token form", |b| b.visible("#token-read").then_some(()));
    assert!(b.text("#token-reason").contains("401"), "{}", b.text("#token-reason"));
    assert!(b.text("#error").contains("token"), "{}", b.text("#error"));
    b.type_into("#token-read", READ_TOKEN);
    b.click("#token-save");
    let (status, body) = http(&server.addr, "GET", "/stats", Some(READ_TOKEN));
    assert_eq!(status, 200);
    let stats: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(number(&b, "#stat-open"), count(&stats["by_status"]["open"]));
    b.until(LIMIT, "the error to go", |b| b.text("#error").is_empty().then_some(()));
    // A phone: nothing wider than the screen.
    let wide = b.run("return document.documentElement.scrollWidth - window.innerWidth;", json!([]));
    assert!(wide.as_i64().unwrap() <= 0, "the page is {wide} px wider than the phone");
    b.screenshot(&artefact("phone-overview.png"));
    // The read token reads and never writes: no button on a drift's page.
    b.goto(&format!("{base}#/drifts/1"));
    b.until(LIMIT, "the drift", |b| (!b.text("#git-value").is_empty()).then_some(()));
    assert!(b.visible("#actions-disabled"));
    assert!(!b.visible("#decide-submit"));
    let wide = b.run("return document.documentElement.scrollWidth - window.innerWidth;", json!([]));
    assert!(wide.as_i64().unwrap() <= 0, "the drift's page is {wide} px wider than the phone");
    b.screenshot(&artefact("phone-drift.png"));
    let log = server.stop();
    assert!(!log.contains(READ_TOKEN), "the token is never logged");
}

#[test]
fn a_revert_and_an_accept_through_the_page_change_the_cluster_and_git() {
    let test = "a_revert_and_an_accept_through_the_page_change_the_cluster_and_git";
    let Some(b) = Browser::start(test, 1280, 1000, false) else {
        return;
    };
    // The shop from a real git repository, applied with kubectl to the test API server, then
    // scaled by hand: one replicas drift.
    let home = tempfile::tempdir().unwrap();
    let server = TestApiServer::start(Options::default()).unwrap();
    let kubeconfig = server.kubeconfig_path();
    let repo = GitRepo::shop(home.path().join("repo"));
    kubectl(kubeconfig, home.path(), &["apply", "-R", "-f", repo.dir.join("apps").to_str().unwrap()], &[]);
    kubectl(kubeconfig, home.path(), &["scale", "deployment", "web", "-n", "shop", "--replicas=5"], &[]);
    edit_configmap(kubeconfig, home.path(), "fast", "slow");
    let cfg = home.path().join("drift.yaml");
    std::fs::write(
        &cfg,
        format!(
            "cluster: page\ninterval: 1h\nwatch: false\ndatabase: sqlite://{db}\napi:\n  listen: 127.0.0.1:0\n\
             live:\n  kubeconfig: {kubeconfig}\n\
             repositories:\n  - name: shop\n    url: file://{repo}\n    ref: main\n    cache_dir: {cache}\n    path: apps\n",
            db = home.path().join("drift.db").display(),
            repo = repo.dir.display(),
            cache = home.path().join("cache").display(),
            kubeconfig = kubeconfig.display(),
        ),
    )
    .unwrap();
    let serve = Serve::start(&cfg, &[("DRIFT_API_TOKEN", WRITE_TOKEN)]);
    let addr = serve.addr.clone();
    let id = wait_for(Duration::from_secs(60), "the replicas drift", || {
        get_json(&addr, "/drifts?status=open&drift_type=replicas_drift")["items"][0]["id"].as_i64()
    });

    b.goto(&format!("http://{addr}/#/drifts/{id}"));
    b.click("#token-button");
    b.type_into("#token-write", WRITE_TOKEN);
    b.click("#token-save");
    b.until(LIMIT, "the buttons", |b| b.visible("#revert-dry-run").then_some(()));
    let enabled =
        |b: &Browser| !b.run("return document.getElementById('revert-now').disabled;", json!([])).as_bool().unwrap();
    assert!(!enabled(&b), "no revert before its dry run");
    b.click("#revert-dry-run");
    b.until(LIMIT, "the dry run", |b| b.text("#action-result").starts_with("Dry run").then_some(()));
    assert!(b.text("#action-result").contains("spec.replicas"), "{}", b.text("#action-result"));
    let replicas = || {
        kubectl(
            kubeconfig,
            home.path(),
            &["get", "deployment", "web", "-n", "shop", "-o", "jsonpath={.spec.replicas}"],
            &[],
        )
    };
    assert_eq!(replicas(), "5", "a dry run changes nothing");
    assert!(enabled(&b), "the revert is offered after its dry run");
    b.click("#revert-now");
    b.until(LIMIT, "the revert", |b| b.text("#action-result").starts_with("Reverted").then_some(()));
    assert_eq!(replicas(), "2", "the cluster has Git's value again");
    // The next scan resolves the drift as reverted; the page follows without a reload.
    let (status, body) = http(&addr, "POST", "/scan?wait=true", Some(WRITE_TOKEN));
    assert_eq!(status, 200, "{body}");
    let d = get_json(&addr, &format!("/drifts/{id}"));
    assert_eq!((d["status"].as_str(), d["resolution"].as_str()), (Some("resolved"), Some("reverted")));
    b.until(LIMIT, "the drift resolved on the page", |b| b.text("#drift-head").contains("resolved").then_some(()));
    assert!(b.text("#drift-facts").contains("reverted"), "{}", b.text("#drift-facts"));
    let audit = get_json(&addr, &format!("/audit?action=revert&drift_id={id}"));
    assert_eq!(audit["items"][0]["actor"], "api", "{audit}");
    b.screenshot(&artefact("reverted.png"));

    // Accept into Git through the page: the cluster's value on a branch of the repository.
    let cm = get_json(&addr, "/drifts?status=open&drift_type=configmap_drift")["items"][0]["id"].as_i64().unwrap();
    b.goto(&format!("http://{addr}/#/drifts/{cm}"));
    b.until(LIMIT, "the ConfigMap drift", |b| b.text("#drift-head").contains("ConfigMap").then_some(()));
    b.click("#accept-git");
    b.until(LIMIT, "the proposal", |b| b.text("#action-result").starts_with("Proposed on branch").then_some(()));
    let branch = b.text("#action-result code");
    assert!(branch.starts_with("drift/accept/"), "{branch}");
    let file = repo.git(&["show", &format!("{branch}:apps/web/configmap.yaml")]);
    assert!(file.contains("mode: slow"), "{file}");
    assert!(!serve.stop().contains(WRITE_TOKEN));
}

/// The overview lists the parked notifications and why (issue 31, item 3): a webhook whose
/// receiver refuses connections, retried for 1 s only, parks the demo's batch as an outage;
/// the page shows each delivery with its notifier, its reason and its last error.
#[test]
fn the_overview_shows_what_is_parked_and_why() {
    let test = "the_overview_shows_what_is_parked_and_why";
    let Some(b) = Browser::start(test, 1280, 1000, false) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let notify = format!(
        "notify:\n  - name: hook\n    type: webhook\n    url: http://127.0.0.1:{port}/hook\n    secret_env: UI_HOOK_SECRET\n    \
         retry_for: 1s\n    backoff: {{initial: 1s, max: 1h}}\n"
    );
    let env = [("DRIFT_API_TOKEN", WRITE_TOKEN), ("UI_HOOK_SECRET", "ui-hook-secret-for-tests")];
    let server = serve(dir.path(), &notify, &env);
    let addr = server.addr.clone();
    let parked = wait_for(Duration::from_secs(60), "the demo's 8 deliveries parked", || {
        let items = get_json(&addr, "/notifications?status=parked")["items"].as_array()?.clone();
        (items.len() == 8).then_some(items)
    });
    assert!(parked.iter().all(|p| p["park_reason"] == "outage" && p["failing_since"].is_string()), "{parked:?}");
    b.goto(&format!("http://{addr}/"));
    let shown = b.until(LIMIT, "the parked notifications", |b| {
        let n = b.run("return document.querySelectorAll('#parked tbody tr').length;", json!([])).as_u64().unwrap();
        (n > 0).then_some(n)
    });
    assert_eq!(shown, 8);
    let text = b.text("#parked");
    assert!(text.contains("hook") && text.contains("outage: retried until it answers"), "{text}");
    assert!(text.contains("failing since"), "the last error says since when: {text}");
    assert!(b.text("#error").is_empty(), "no error: {}", b.text("#error"));
    assert!(severe(&b).is_empty(), "the console: {:?}", severe(&b));
    b.screenshot(&artefact("parked.png"));
    server.stop();
}
