//! kube-rs as the client: pagination, watches that resume and relist, bookmarks, 410 Gone,
//! every fault type, authentication, server-side apply and the status subresource.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use drift_test_apiserver::{FaultAction, FaultMatch, FaultRule, Faults, Options, TestApiServer};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher;
use serde_json::{Value, json};

async fn client(server: &TestApiServer) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(server.kubeconfig_path()).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.unwrap();
    kube::Client::try_from(cfg).unwrap()
}

/// A client without kube's default retry of 429, 503 and 504 (it honours Retry-After up to 15
/// times), to see those answers themselves.
async fn client_without_retry(server: &TestApiServer) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(server.kubeconfig_path()).unwrap();
    let mut cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.unwrap();
    cfg.default_retry = false;
    kube::Client::try_from(cfg).unwrap()
}

fn namespace(server: &TestApiServer, name: &str) {
    server.create_object(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})).unwrap();
}

fn configmap(server: &TestApiServer, ns: &str, name: &str, labels: Value) {
    server
        .create_object(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": labels}, "data": {"k": name}}))
        .unwrap();
}

fn rule(matcher: FaultMatch, action: FaultAction, times: Option<u32>) -> FaultRule {
    FaultRule { matcher, action, times }
}

fn on(verb: &str, resource: &str) -> FaultMatch {
    FaultMatch { verb: Some(verb.into()), resource: Some(resource.into()), ..Default::default() }
}

fn api_code(e: &kube::Error) -> u16 {
    match e {
        kube::Error::Api(s) => s.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn count(server: &TestApiServer, pred: impl Fn(&drift_test_apiserver::RecordedRequest) -> bool) -> usize {
    server.requests().iter().filter(|r| pred(r)).count()
}

fn is_watch(r: &drift_test_apiserver::RecordedRequest) -> bool {
    r.path.ends_with("/configmaps") && r.query.get("watch").is_some_and(|w| w == "true")
}

fn is_list(r: &drift_test_apiserver::RecordedRequest) -> bool {
    r.method == "GET" && r.path.ends_with("/configmaps") && !r.query.contains_key("watch")
}

#[tokio::test]
async fn list_paginates_over_ten_thousand_objects() {
    let server = TestApiServer::start(Options::default()).unwrap();
    namespace(&server, "bulk");
    for i in 0..10_000 {
        configmap(&server, "bulk", &format!("cm-{i:05}"), json!({"mod": (i % 7).to_string()}));
    }
    let api: Api<ConfigMap> = Api::namespaced(client(&server).await, "bulk");
    let mut names = Vec::new();
    let mut pages = 0;
    let mut token: Option<String> = None;
    let mut list_rv: Option<String> = None;
    loop {
        let mut lp = ListParams::default().limit(500);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = api.list(&lp).await.unwrap();
        pages += 1;
        assert!(page.items.len() <= 500);
        // Every page reports the version of the first one: one consistent list.
        let rv = page.metadata.resource_version.clone();
        assert!(list_rv.get_or_insert(rv.clone().unwrap()) == rv.as_ref().unwrap());
        names.extend(page.items.iter().map(|c| c.metadata.name.clone().unwrap()));
        match page.metadata.continue_ {
            Some(t) if !t.is_empty() => {
                assert_eq!(page.metadata.remaining_item_count, Some(10_000 - names.len() as i64));
                token = Some(t);
            }
            _ => break,
        }
    }
    assert_eq!(pages, 20);
    assert_eq!(names.len(), 10_000);
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted, names, "names are unique and in order");

    let sevens = api.list(&ListParams::default().labels("mod=3")).await.unwrap();
    assert_eq!(sevens.items.len(), (0..10_000).filter(|i| i % 7 == 3).count());
    let one = api.list(&ListParams::default().fields("metadata.name=cm-00042")).await.unwrap();
    assert_eq!(one.items.len(), 1);
    let none = api.list(&ListParams::default().labels("mod in (7,8)")).await.unwrap();
    assert!(none.items.is_empty());
}

/// Every page of a list, as `namespace/name` in order, and the `remainingItemCount` of each
/// page but the last.
async fn paginate(api: &Api<ConfigMap>, lp: ListParams) -> (Vec<String>, Vec<Option<i64>>) {
    let mut names = Vec::new();
    let mut remaining = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut lp = lp.clone();
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = api.list(&lp).await.unwrap();
        names.extend(page.items.iter().map(|c| {
            let m = &c.metadata;
            format!("{}/{}", m.namespace.clone().unwrap(), m.name.clone().unwrap())
        }));
        match page.metadata.continue_ {
            Some(t) if !t.is_empty() => {
                remaining.push(page.metadata.remaining_item_count);
                token = Some(t);
            }
            _ => {
                assert_eq!(page.metadata.remaining_item_count, None, "the last page has no remaining count");
                return (names, remaining);
            }
        }
    }
}

/// Guards the linear pagination (counts from the continue position, not from a walk over the
/// rest): every object exactly once, in order, with exact remaining counts, in a namespace
/// between others, across namespaces, with selectors, and with changes between pages.
#[tokio::test]
async fn pagination_is_exact_with_namespaces_selectors_and_changes_between_pages() {
    let server = TestApiServer::start(Options::default()).unwrap();
    for ns in ["a", "b", "c"] {
        namespace(&server, ns);
    }
    for i in 0..250 {
        configmap(&server, "a", &format!("cm-{i:03}"), json!({"mod": (i % 5).to_string()}));
        configmap(&server, "c", &format!("cm-{i:03}"), json!({"mod": (i % 5).to_string()}));
    }
    for i in 0..1000 {
        configmap(&server, "b", &format!("cm-{i:04}"), json!({"mod": (i % 5).to_string()}));
    }
    let c = client(&server).await;

    // One namespace, with others before and after it.
    let b: Api<ConfigMap> = Api::namespaced(c.clone(), "b");
    let (names, remaining) = paginate(&b, ListParams::default().limit(300)).await;
    let want: Vec<String> = (0..1000).map(|i| format!("b/cm-{i:04}")).collect();
    assert_eq!(names, want);
    assert_eq!(remaining, vec![Some(700), Some(400), Some(100)]);

    // A page size that divides the count: no empty last page.
    let (names, remaining) = paginate(&b, ListParams::default().limit(500)).await;
    assert_eq!(names.len(), 1000);
    assert_eq!(remaining, vec![Some(500)]);

    // Across namespaces.
    let all: Api<ConfigMap> = Api::all(c.clone());
    let (names, remaining) = paginate(&all, ListParams::default().limit(400)).await;
    assert_eq!(names.len(), 1500);
    assert!(names.windows(2).all(|w| w[0] < w[1]), "in key order, each once");
    assert_eq!(remaining, vec![Some(1100), Some(700), Some(300)]);

    // With a selector: every match once, continue only while one more matches, no count.
    let (names, remaining) = paginate(&b, ListParams::default().limit(100).labels("mod=3")).await;
    let want: Vec<String> = (0..1000).filter(|i| i % 5 == 3).map(|i| format!("b/cm-{i:04}")).collect();
    assert_eq!(names, want);
    assert_eq!(remaining, vec![None]);

    // Changes between pages. Before the position, they change the count but are not listed;
    // after it, they are listed (or not) and counted. Other namespaces do not count.
    let first = b.list(&ListParams::default().limit(300)).await.unwrap();
    assert_eq!(first.items.last().unwrap().metadata.name.as_deref(), Some("cm-0299"));
    assert_eq!(first.metadata.remaining_item_count, Some(700));
    configmap(&server, "b", "cm-0010a", json!({}));
    configmap(&server, "b", "cm-0020a", json!({}));
    b.delete("cm-0005", &Default::default()).await.unwrap();
    configmap(&server, "b", "cm-0500a", json!({}));
    b.delete("cm-0600", &Default::default()).await.unwrap();
    b.delete("cm-0601", &Default::default()).await.unwrap();
    configmap(&server, "a", "cm-zzz", json!({}));
    let lp = ListParams::default().limit(300).continue_token(first.metadata.continue_.as_deref().unwrap());
    let second = b.list(&lp).await.unwrap();
    // Left after the first page: 700 + 1 created - 2 deleted; 1000 in b now, 301 up to and
    // including cm-0299.
    assert_eq!(second.items.len(), 300);
    assert_eq!(second.metadata.remaining_item_count, Some(699 - 300));
    let mut names: Vec<String> = second.items.iter().map(|c| c.metadata.name.clone().unwrap()).collect();
    let mut token = second.metadata.continue_.clone();
    let mut counts = Vec::new();
    while let Some(t) = token.filter(|t| !t.is_empty()) {
        let page = b.list(&ListParams::default().limit(300).continue_token(&t)).await.unwrap();
        names.extend(page.items.iter().map(|c| c.metadata.name.clone().unwrap()));
        counts.push(page.metadata.remaining_item_count);
        token = page.metadata.continue_.clone();
    }
    assert_eq!(counts, vec![Some(99), None]);
    assert_eq!(names.len(), 699);
    assert!(names.contains(&"cm-0500a".to_owned()));
    assert!(!names.iter().any(|n| n == "cm-0600" || n == "cm-0601" || n == "cm-0010a"));
    assert!(names.windows(2).all(|w| w[0] < w[1]));
}

#[tokio::test]
async fn watcher_resumes_after_a_dropped_connection_without_relisting() {
    let server = TestApiServer::start(Options::default()).unwrap();
    namespace(&server, "w");
    server.set_faults(Faults {
        faults: vec![rule(on("watch", "configmaps"), FaultAction::DropWatch { after_events: 2 }, Some(1))],
    });
    let client = client(&server).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "w");
    let mut stream = watcher(api.clone(), watcher::Config::default()).boxed();
    let mut seen = BTreeSet::new();
    let mut second_rv = String::new();
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(30), stream.next()).await.unwrap() {
        match ev.unwrap() {
            watcher::Event::InitDone => {
                for i in 0..5 {
                    let cm = ConfigMap {
                        metadata: kube::api::ObjectMeta { name: Some(format!("c{i}")), ..Default::default() },
                        ..Default::default()
                    };
                    let created = api.create(&PostParams::default(), &cm).await.unwrap();
                    if i == 1 {
                        second_rv = created.metadata.resource_version.unwrap();
                    }
                }
            }
            watcher::Event::Apply(cm) => {
                seen.insert(cm.metadata.name.unwrap());
                if seen.len() == 5 {
                    break;
                }
            }
            _ => {}
        }
    }
    assert_eq!(seen.len(), 5, "no event lost across the dropped connection");
    assert_eq!(count(&server, is_list), 1, "a dropped watch is resumed, not relisted");
    let watches: Vec<_> = server.requests().into_iter().filter(is_watch).collect();
    assert_eq!(watches.len(), 2);
    assert_eq!(watches[1].query.get("resourceVersion"), Some(&second_rv));
}

#[tokio::test]
async fn drop_watches_closes_every_open_stream() {
    let server = TestApiServer::start(Options::default()).unwrap();
    namespace(&server, "w");
    let api: Api<ConfigMap> = Api::namespaced(client(&server).await, "w");
    let from = server.resource_version().to_string();
    let mut stream = api.watch(&WatchParams::default(), &from).await.unwrap().boxed();
    configmap(&server, "w", "a", json!({}));
    let limit = Duration::from_secs(20);
    let first = tokio::time::timeout(limit, stream.next()).await.unwrap().unwrap().unwrap();
    assert!(matches!(&first, WatchEvent::Added(cm) if cm.metadata.name.as_deref() == Some("a")), "{first:?}");
    assert_eq!(server.drop_watches(), 1, "the one open watch");
    let end = tokio::time::timeout(limit, stream.next()).await.unwrap();
    assert!(end.is_none(), "the stream ends, as after a lost connection: {end:?}");
    assert_eq!(server.drop_watches(), 0, "nothing is left open");
}

#[tokio::test]
async fn watcher_relists_after_410_gone() {
    let server = TestApiServer::start(Options::default()).unwrap();
    namespace(&server, "w");
    configmap(&server, "w", "before", json!({}));
    server.set_faults(Faults {
        faults: vec![
            rule(on("watch", "configmaps"), FaultAction::DropWatch { after_events: 0 }, Some(1)),
            rule(on("watch", "configmaps"), FaultAction::Expired, Some(1)),
        ],
    });
    let api: Api<ConfigMap> = Api::namespaced(client(&server).await, "w");
    let mut stream = watcher(api, watcher::Config::default()).boxed();
    let mut inits = 0;
    let mut gone = 0;
    let mut listed = Vec::new();
    while inits < 2 {
        match tokio::time::timeout(Duration::from_secs(30), stream.next()).await.unwrap().unwrap() {
            Ok(watcher::Event::InitApply(cm)) => listed.push(cm.metadata.name.unwrap()),
            Ok(watcher::Event::InitDone) => inits += 1,
            Ok(_) => {}
            Err(watcher::Error::WatchError(s)) => {
                assert_eq!(s.code, 410);
                gone += 1;
            }
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    assert_eq!(gone, 1);
    assert_eq!(listed, vec!["before", "before"]);
    assert_eq!(count(&server, is_list), 2, "410 makes the watcher list again");
}

#[tokio::test]
async fn watch_from_a_compacted_version_is_gone() {
    let server = TestApiServer::start(Options::default()).unwrap();
    namespace(&server, "w");
    configmap(&server, "w", "a", json!({}));
    configmap(&server, "w", "b", json!({}));
    let api: Api<ConfigMap> = Api::namespaced(client(&server).await, "w");
    let first = api.list(&ListParams::default().limit(1)).await.unwrap();
    let old_rv = first.metadata.resource_version.clone().unwrap();
    configmap(&server, "w", "c", json!({}));
    configmap(&server, "w", "d", json!({}));
    // Still within history: the watch replays what happened after the version.
    let mut s = api.watch(&WatchParams::default().disable_bookmarks().timeout(5), &old_rv).await.unwrap().boxed();
    match s.try_next().await.unwrap().unwrap() {
        WatchEvent::Added(cm) => assert_eq!(cm.metadata.name.as_deref(), Some("c")),
        other => panic!("expected ADDED c, got {other:?}"),
    }
    server.compact();
    let mut s = api.watch(&WatchParams::default(), &old_rv).await.unwrap().boxed();
    match s.try_next().await.unwrap().unwrap() {
        WatchEvent::Error(e) => {
            assert_eq!(e.code, 410);
            assert_eq!(e.reason, "Expired");
        }
        other => panic!("expected 410, got {other:?}"),
    }
    let token = first.metadata.continue_.unwrap();
    let err = api.list(&ListParams::default().limit(1).continue_token(&token)).await.unwrap_err();
    assert_eq!(api_code(&err), 410);
}

#[tokio::test]
async fn watch_sends_bookmarks_when_allowed() {
    let server =
        TestApiServer::start(Options { bookmark_interval: Duration::from_millis(20), ..Options::default() }).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client(&server).await, "default");
    let rv = server.resource_version().to_string();
    let mut s = api.watch(&WatchParams::default(), &rv).await.unwrap().boxed();
    let ev = tokio::time::timeout(Duration::from_secs(30), s.try_next()).await.unwrap().unwrap().unwrap();
    match ev {
        WatchEvent::Bookmark(b) => assert_eq!(b.metadata.resource_version, rv),
        other => panic!("expected a bookmark, got {other:?}"),
    }
    // Without bookmarks allowed, the first event is the next change.
    let mut s = api.watch(&WatchParams::default().disable_bookmarks(), &rv).await.unwrap().boxed();
    configmap(&server, "default", "x", json!({}));
    match s.try_next().await.unwrap().unwrap() {
        WatchEvent::Added(cm) => assert_eq!(cm.metadata.name.as_deref(), Some("x")),
        other => panic!("expected ADDED, got {other:?}"),
    }
}

#[tokio::test]
async fn fault_forbidden_per_namespace() {
    let server = TestApiServer::start(Options::default()).unwrap();
    namespace(&server, "team-a");
    server.set_faults(Faults {
        faults: vec![rule(
            FaultMatch { namespace: Some("team-a".into()), resource: Some("ConfigMap".into()), ..Default::default() },
            FaultAction::Error { code: 403, retry_after_seconds: None, message: None },
            None,
        )],
    });
    let c = client(&server).await;
    let denied: Api<ConfigMap> = Api::namespaced(c.clone(), "team-a");
    let err = denied.list(&ListParams::default()).await.unwrap_err();
    assert_eq!(api_code(&err), 403);
    let allowed: Api<ConfigMap> = Api::namespaced(c, "default");
    assert!(allowed.list(&ListParams::default()).await.is_ok());
}

#[tokio::test]
async fn fault_not_found_and_internal_error_then_spent() {
    let server = TestApiServer::start(Options::default()).unwrap();
    configmap(&server, "default", "there", json!({}));
    server.set_faults(Faults {
        faults: vec![
            rule(
                on("get", "configmaps"),
                FaultAction::Error { code: 404, retry_after_seconds: None, message: None },
                Some(1),
            ),
            rule(
                on("get", "configmaps"),
                FaultAction::Error { code: 500, retry_after_seconds: None, message: None },
                Some(1),
            ),
        ],
    });
    let api: Api<ConfigMap> = Api::namespaced(client(&server).await, "default");
    assert_eq!(api_code(&api.get("there").await.unwrap_err()), 404);
    assert_eq!(api_code(&api.get("there").await.unwrap_err()), 500);
    assert_eq!(api.get("there").await.unwrap().metadata.name.as_deref(), Some("there"));
}

#[tokio::test]
async fn fault_too_many_requests_has_retry_after() {
    let server = TestApiServer::start(Options::default()).unwrap();
    let too_many = |times| Faults {
        faults: vec![rule(
            on("list", "configmaps"),
            FaultAction::Error { code: 429, retry_after_seconds: Some(1), message: None },
            times,
        )],
    };
    server.set_faults(too_many(None));
    let c = client_without_retry(&server).await;
    let req =
        axum::http::Request::get("/api/v1/namespaces/default/configmaps").body(kube::client::Body::empty()).unwrap();
    let resp = c.send(req).await.unwrap();
    assert_eq!(resp.status().as_u16(), 429);
    assert_eq!(resp.headers().get("retry-after").unwrap(), "1");
    let api: Api<ConfigMap> = Api::namespaced(c, "default");
    let err = api.list(&ListParams::default()).await.unwrap_err();
    assert_eq!(api_code(&err), 429);
    if let kube::Error::Api(s) = err {
        assert_eq!(s.reason, "TooManyRequests");
        assert_eq!(s.details.unwrap().retry_after_seconds, 1);
    }
    // kube's default client waits Retry-After and tries again: two 429s, then the list.
    server.set_faults(too_many(Some(2)));
    let before = count(&server, is_list);
    let api: Api<ConfigMap> = Api::namespaced(client(&server).await, "default");
    let start = Instant::now();
    api.list(&ListParams::default()).await.unwrap();
    assert_eq!(count(&server, is_list) - before, 3);
    assert!(start.elapsed() >= Duration::from_secs(2), "each retry waited the Retry-After second");
}

#[tokio::test]
async fn fault_latency_delays_the_answer() {
    let server = TestApiServer::start(Options::default()).unwrap();
    server.set_faults(Faults {
        faults: vec![rule(on("list", "configmaps"), FaultAction::Latency { millis: 300 }, Some(1))],
    });
    let api: Api<ConfigMap> = Api::namespaced(client(&server).await, "default");
    let start = Instant::now();
    api.list(&ListParams::default()).await.unwrap();
    // A lower bound only: the server slept at least this long before answering.
    assert!(start.elapsed() >= Duration::from_millis(300));
}

#[tokio::test]
async fn faults_through_the_admin_endpoint() {
    let server = TestApiServer::start(Options::default()).unwrap();
    let c = client_without_retry(&server).await;
    let body = "faults:\n- match: {verb: list, resource: configmaps}\n  action: {type: error, code: 503}\n";
    let req =
        axum::http::Request::post("/_admin/faults").body(kube::client::Body::from(body.as_bytes().to_vec())).unwrap();
    assert_eq!(c.send(req).await.unwrap().status().as_u16(), 200);
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    assert_eq!(api_code(&api.list(&ListParams::default()).await.unwrap_err()), 503);
    let req = axum::http::Request::delete("/_admin/faults").body(kube::client::Body::empty()).unwrap();
    assert_eq!(c.send(req).await.unwrap().status().as_u16(), 200);
    assert!(api.list(&ListParams::default()).await.is_ok());
    // A malformed rule set is refused and changes nothing.
    let req = axum::http::Request::post("/_admin/faults")
        .body(kube::client::Body::from(b"faults: [{action: {type: nope}}]".to_vec()))
        .unwrap();
    assert_eq!(c.send(req).await.unwrap().status().as_u16(), 400);
    assert!(api.list(&ListParams::default()).await.is_ok());
}

#[tokio::test]
async fn bearer_token_is_required_when_set() {
    let server = TestApiServer::start(Options { token: Some("s3cret".into()), ..Options::default() }).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client(&server).await, "default");
    assert!(api.list(&ListParams::default()).await.is_ok(), "the kubeconfig carries the token");
    let anonymous = kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(anonymous, "default");
    assert_eq!(api_code(&api.list(&ListParams::default()).await.unwrap_err()), 401);
    let mut cfg = kube::Config::new(server.url().parse().unwrap());
    cfg.auth_info.token = Some("wrong".to_owned().into());
    let api: Api<ConfigMap> = Api::namespaced(kube::Client::try_from(cfg).unwrap(), "default");
    assert_eq!(api_code(&api.list(&ListParams::default()).await.unwrap_err()), 401);
}

fn deployment(replicas: i32) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": "app:1"}]}}}})
}

#[tokio::test]
async fn server_side_apply_owns_fields_and_reports_conflicts() {
    let server = TestApiServer::start(Options::default()).unwrap();
    let api: Api<Deployment> = Api::namespaced(client(&server).await, "default");
    let created = api.patch("web", &PatchParams::apply("alpha"), &Patch::Apply(deployment(2))).await.unwrap();
    assert_eq!(created.spec.as_ref().unwrap().replicas, Some(2));
    // Defaulted on create, owned by nobody.
    assert_eq!(created.spec.as_ref().unwrap().revision_history_limit, Some(10));
    let mf = created.metadata.managed_fields.clone().unwrap();
    assert_eq!(mf.len(), 1);
    assert_eq!(mf[0].manager.as_deref(), Some("alpha"));
    assert_eq!(mf[0].operation.as_deref(), Some("Apply"));
    let owned = serde_json::to_value(&mf[0].fields_v1).unwrap();
    assert!(owned["f:spec"].get("f:revisionHistoryLimit").is_none());
    assert!(owned["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"app\"}"]["f:image"].is_object());

    let err = api.patch("web", &PatchParams::apply("beta"), &Patch::Apply(deployment(5))).await.unwrap_err();
    assert_eq!(api_code(&err), 409);
    if let kube::Error::Api(s) = &err {
        assert!(s.message.contains(r#"conflict with "alpha""#), "{}", s.message);
        assert!(s.message.contains(".spec.replicas"), "{}", s.message);
    }
    let forced = api.patch("web", &PatchParams::apply("beta").force(), &Patch::Apply(deployment(5))).await.unwrap();
    assert_eq!(forced.spec.unwrap().replicas, Some(5));

    // alpha applies again without replicas: it gives the field up, which beta still owns.
    let mut without = deployment(0);
    without["spec"].as_object_mut().unwrap().remove("replicas");
    let after = api.patch("web", &PatchParams::apply("alpha"), &Patch::Apply(without)).await.unwrap();
    assert_eq!(after.spec.unwrap().replicas, Some(5));
}

#[tokio::test]
async fn status_subresource_is_separate_from_the_main_resource() {
    let server = TestApiServer::start(Options::default()).unwrap();
    let api: Api<Deployment> = Api::namespaced(client(&server).await, "default");
    let mut d = deployment(1);
    d["status"] = json!({"replicas": 9});
    let d: Deployment = serde_json::from_value(d).unwrap();
    let created = api.create(&PostParams::default(), &d).await.unwrap();
    assert_eq!(serde_json::to_value(created.status).unwrap(), json!({}), "status is reset on create");
    let pp = PatchParams { field_manager: Some("controller".into()), ..Default::default() };
    let s = api
        .patch_status("web", &pp, &Patch::Merge(json!({"status": {"replicas": 1, "readyReplicas": 1}})))
        .await
        .unwrap();
    assert_eq!(s.status.as_ref().unwrap().ready_replicas, Some(1));
    assert_eq!(s.metadata.generation, Some(1), "status changes do not bump generation");
    let entry =
        s.metadata.managed_fields.unwrap().into_iter().find(|e| e.manager.as_deref() == Some("controller")).unwrap();
    assert_eq!(entry.subresource.as_deref(), Some("status"));
    // A main-resource patch cannot change status.
    let p = api.patch("web", &PatchParams::default(), &Patch::Merge(json!({"status": {"replicas": 7}}))).await.unwrap();
    assert_eq!(p.status.unwrap().replicas, Some(1));
}

#[tokio::test]
async fn dry_run_and_optimistic_concurrency() {
    let server = TestApiServer::start(Options::default()).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client(&server).await, "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "c"}, "data": {"a": "1"}})).unwrap();
    let dry = api.create(&PostParams { dry_run: true, ..Default::default() }, &cm).await.unwrap();
    assert_eq!(dry.metadata.name.as_deref(), Some("c"));
    assert!(server.object("", "configmaps", "default", "c").is_none());
    let created = api.create(&PostParams::default(), &cm).await.unwrap();
    let mut stale = created.clone();
    stale.data = Some([("a".to_owned(), "2".to_owned())].into());
    api.replace("c", &PostParams::default(), &stale).await.unwrap();
    // The same resourceVersion again is now stale.
    let err = api.replace("c", &PostParams::default(), &stale).await.unwrap_err();
    assert_eq!(api_code(&err), 409);
    let err = api.create(&PostParams::default(), &cm).await.unwrap_err();
    assert_eq!(api_code(&err), 409);
}

#[tokio::test]
async fn seeding_through_the_admin_endpoint() {
    let server = TestApiServer::start(Options::default()).unwrap();
    let c = client_without_retry(&server).await;
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "namespace": "default"}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "default"},
         "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
           "spec": {"containers": [{"name": "c", "image": "c"}]}}}},
    ]});
    let req = axum::http::Request::post("/_admin/objects")
        .body(kube::client::Body::from(serde_json::to_vec(&list).unwrap()))
        .unwrap();
    assert_eq!(c.send(req).await.unwrap().status().as_u16(), 201);
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let names: Vec<String> =
        cms.list(&ListParams::default()).await.unwrap().items.into_iter().filter_map(|c| c.metadata.name).collect();
    assert_eq!(names, ["a", "b"]);
    let d: Api<Deployment> = Api::namespaced(c.clone(), "default");
    let d = d.get("d").await.unwrap();
    assert_eq!(d.spec.unwrap().replicas, Some(1), "seeded objects are defaulted");
    assert_eq!(d.metadata.managed_fields.unwrap()[0].manager.as_deref(), Some("drift-test-apiserver"));
    // An object in a missing namespace is refused.
    let bad = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "nope"}});
    let req = axum::http::Request::post("/_admin/objects")
        .body(kube::client::Body::from(serde_json::to_vec(&bad).unwrap()))
        .unwrap();
    assert_eq!(c.send(req).await.unwrap().status().as_u16(), 404);
}

#[tokio::test]
async fn streaming_list_watcher_gets_initial_events_and_their_end() {
    let server = TestApiServer::start(Options::default()).unwrap();
    namespace(&server, "s");
    configmap(&server, "s", "one", json!({}));
    configmap(&server, "s", "two", json!({}));
    let api: Api<ConfigMap> = Api::namespaced(client(&server).await, "s");
    let mut stream = watcher(api, watcher::Config::default().streaming_lists()).boxed();
    let mut listed = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(30), stream.next()).await.unwrap().unwrap().unwrap() {
            watcher::Event::InitApply(cm) => listed.push(cm.metadata.name.unwrap()),
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(listed, ["one", "two"]);
    assert_eq!(count(&server, is_list), 0, "a streaming list needs no list request");
    let w = server.requests().into_iter().find(is_watch).unwrap();
    assert_eq!(w.query.get("sendInitialEvents").map(String::as_str), Some("true"));
}

#[tokio::test]
async fn a_short_history_makes_old_versions_gone() {
    let server = TestApiServer::start(Options { history_limit: 3, ..Options::default() }).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client(&server).await, "default");
    let rv = server.resource_version().to_string();
    for i in 0..5 {
        configmap(&server, "default", &format!("c{i}"), json!({}));
    }
    let mut s = api.watch(&WatchParams::default().disable_bookmarks(), &rv).await.unwrap().boxed();
    match s.try_next().await.unwrap().unwrap() {
        WatchEvent::Error(e) => assert_eq!(e.code, 410),
        other => panic!("expected 410, got {other:?}"),
    }
    // The last three changes are still there.
    let recent = (server.resource_version() - 3).to_string();
    let mut s = api.watch(&WatchParams::default().disable_bookmarks(), &recent).await.unwrap().boxed();
    let mut names = Vec::new();
    while names.len() < 3 {
        if let WatchEvent::Added(cm) = s.try_next().await.unwrap().unwrap() {
            names.push(cm.metadata.name.unwrap());
        }
    }
    assert_eq!(names, ["c2", "c3", "c4"]);
}

#[tokio::test]
async fn finalizers_hold_a_deleted_object_until_removed() {
    let server = TestApiServer::start(Options::default()).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client(&server).await, "default");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"generateName": "held-", "finalizers": ["example.com/hold"]}}))
            .unwrap();
    let created = api.create(&PostParams::default(), &cm).await.unwrap();
    let name = created.metadata.name.unwrap();
    assert!(name.starts_with("held-") && name.len() == "held-".len() + 5, "{name}");
    api.delete(&name, &Default::default()).await.unwrap();
    let terminating = api.get(&name).await.unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());
    let rv = terminating.metadata.resource_version.unwrap();
    let mut s = api.watch(&WatchParams::default().disable_bookmarks(), &rv).await.unwrap().boxed();
    api.patch(&name, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}}))).await.unwrap();
    match s.try_next().await.unwrap().unwrap() {
        WatchEvent::Deleted(cm) => assert_eq!(cm.metadata.name.as_deref(), Some(name.as_str())),
        other => panic!("expected DELETED, got {other:?}"),
    }
    assert_eq!(api_code(&api.get(&name).await.unwrap_err()), 404);
}

#[tokio::test]
async fn list_items_carry_no_type_for_built_in_kinds() {
    let server = TestApiServer::start(Options::default()).unwrap();
    configmap(&server, "default", "a", json!({}));
    let c = client_without_retry(&server).await;
    let req = axum::http::Request::get("/api/v1/namespaces/default/configmaps").body(Vec::new()).unwrap();
    let list: Value = c.request(req).await.unwrap();
    assert_eq!(list["kind"], "ConfigMapList");
    assert_eq!(list["apiVersion"], "v1");
    assert!(list["items"][0].get("kind").is_none(), "{list}");
    assert!(list["items"][0].get("apiVersion").is_none(), "{list}");
    // A get names its type.
    let req = axum::http::Request::get("/api/v1/namespaces/default/configmaps/a").body(Vec::new()).unwrap();
    let one: Value = c.request(req).await.unwrap();
    assert_eq!(one["kind"], "ConfigMap");
}
