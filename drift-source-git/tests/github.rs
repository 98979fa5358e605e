//! The GitHub source against a fake GitHub REST server on loopback (axum), with octocrab
//! pointed at it. Refs are resolved and archives made by real git from a real repository.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use common::*;
use drift_core::ErrorKind;
use drift_core::source::DesiredSource;
use drift_source_git::{GitHubConfig, GitHubSource, Secret};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Rate {
    Normal,
    /// 403 with `x-ratelimit-remaining: 0` and a reset this many seconds ahead.
    Exhausted(u64),
    /// One 429 with `retry-after`, then normal.
    RetryAfterOnce(u64),
}

struct Fake {
    origin: Origin,
    base: Mutex<String>,
    rate: Mutex<Rate>,
    commits: AtomicUsize,
    not_modified: AtomicUsize,
    tarballs: AtomicUsize,
}

type S = State<Arc<Fake>>;

fn json_error(status: StatusCode, message: &str) -> Response {
    (status, [("content-type", "application/json")], format!(r#"{{"message":"{message}"}}"#)).into_response()
}

fn check(fake: &Fake, headers: &HeaderMap, owner: &str, repo: &str) -> Option<Response> {
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some("Bearer good-token") {
        return Some(json_error(StatusCode::UNAUTHORIZED, "Bad credentials"));
    }
    if (owner, repo) != ("org", "gitops") {
        return Some(json_error(StatusCode::NOT_FOUND, "Not Found"));
    }
    let mut rate = fake.rate.lock().unwrap();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    match *rate {
        Rate::Normal => None,
        Rate::Exhausted(ahead) => Some(
            (
                StatusCode::FORBIDDEN,
                [("x-ratelimit-remaining", "0".to_owned()), ("x-ratelimit-reset", (now + ahead).to_string())],
                r#"{"message":"API rate limit exceeded"}"#,
            )
                .into_response(),
        ),
        Rate::RetryAfterOnce(secs) => {
            *rate = Rate::Normal;
            Some((StatusCode::TOO_MANY_REQUESTS, [("retry-after", secs.to_string())], "slow down").into_response())
        }
    }
}

async fn commits(
    State(fake): S,
    Path((owner, repo, reference)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    fake.commits.fetch_add(1, Ordering::SeqCst);
    if let Some(r) = check(&fake, &headers, &owner, &repo) {
        return r;
    }
    assert_eq!(headers.get("accept").unwrap(), "application/vnd.github.sha");
    let out = std::process::Command::new("git")
        .current_dir(&fake.origin.bare)
        .args(["rev-parse", "--verify", "--quiet", &format!("{reference}^{{commit}}")])
        .output()
        .unwrap();
    if !out.status.success() {
        return json_error(StatusCode::UNPROCESSABLE_ENTITY, &format!("No commit found for SHA: {reference}"));
    }
    let sha = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let etag = format!("\"{sha}\"");
    let limits = [("x-ratelimit-remaining", "4999".to_owned()), ("etag", etag.clone())];
    if headers.get("if-none-match").and_then(|v| v.to_str().ok()) == Some(etag.as_str()) {
        fake.not_modified.fetch_add(1, Ordering::SeqCst);
        return (StatusCode::NOT_MODIFIED, limits).into_response();
    }
    (StatusCode::OK, limits, sha).into_response()
}

async fn tarball(
    State(fake): S,
    Path((owner, repo, sha)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    fake.tarballs.fetch_add(1, Ordering::SeqCst);
    if let Some(r) = check(&fake, &headers, &owner, &repo) {
        return r;
    }
    // Like GitHub: a redirect to the archive host.
    let location = format!("{}/codeload/{sha}", fake.base.lock().unwrap());
    (StatusCode::FOUND, [("location", location)]).into_response()
}

async fn codeload(State(fake): S, Path(sha): Path<String>) -> Response {
    let out = std::process::Command::new("git")
        .current_dir(&fake.origin.bare)
        .args(["archive", "--format=tar.gz", &format!("--prefix=org-gitops-{}/", &sha[..7]), &sha])
        .output()
        .unwrap();
    assert!(out.status.success());
    (StatusCode::OK, [("content-type", "application/x-gzip")], out.stdout).into_response()
}

async fn start(origin: Origin) -> (Arc<Fake>, String) {
    let fake = Arc::new(Fake {
        origin,
        base: Mutex::new(String::new()),
        rate: Mutex::new(Rate::Normal),
        commits: AtomicUsize::new(0),
        not_modified: AtomicUsize::new(0),
        tarballs: AtomicUsize::new(0),
    });
    let api = axum::Router::new()
        .route("/repos/{owner}/{repo}/commits/{*reference}", get(commits))
        .route("/repos/{owner}/{repo}/tarball/{sha}", get(tarball));
    let app = axum::Router::new()
        .nest("/api/v3", api.clone())
        .merge(api)
        .route("/codeload/{sha}", get(codeload))
        .with_state(Arc::clone(&fake));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    *fake.base.lock().unwrap() = base.clone();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (fake, base)
}

fn config(fake: &Fake, base: &str, reference: &str) -> GitHubConfig {
    let mut cfg = GitHubConfig::new("org", "gitops", reference);
    cfg.api_url = base.to_owned();
    cfg.cache_dir = Some(fake.origin.cache());
    cfg
}

fn source(cfg: GitHubConfig) -> GitHubSource {
    GitHubSource::with_token(cfg, Some(Secret::new("good-token"))).unwrap()
}

fn repo_with_two_files() -> Origin {
    let origin = Origin::new();
    origin.write("apps/a.yaml", &configmap("a", "shop", "1"));
    origin.write("apps/b.yaml", &configmap("b", "shop", "1"));
    origin.write("README.md", "# gitops\n");
    origin.commit("one");
    origin
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolves_the_ref_downloads_once_per_commit_and_uses_etags() {
    let (fake, base) = start(repo_with_two_files()).await;
    let c1 = fake.origin.head();
    let src = source(config(&fake, &base, "main"));
    let first = src.fetch().await.unwrap();
    assert_eq!(first.revision.as_deref(), Some(c1.as_str()));
    assert_eq!(keys(&first), vec!["ConfigMap shop/a", "ConfigMap shop/b"]);
    let a = &first.resources[0];
    assert_eq!(a.provenance.path.as_deref(), Some("apps/a.yaml"));
    assert_eq!(a.provenance.revision.as_deref(), Some(c1.as_str()));
    assert_eq!(a.provenance.repository.as_deref(), Some(format!("{base}/org/gitops").as_str()));
    assert_eq!((fake.commits.load(Ordering::SeqCst), fake.tarballs.load(Ordering::SeqCst)), (1, 1));

    // Unchanged: one conditional request answered 304, no download, nothing parsed.
    let again = src.fetch().await.unwrap();
    assert_eq!(again, first);
    assert_eq!(fake.not_modified.load(Ordering::SeqCst), 1);
    assert_eq!(fake.tarballs.load(Ordering::SeqCst), 1);
    let stats = src.stats();
    assert_eq!((stats.requests, stats.downloads, stats.snapshot_cache_hits, stats.files_parsed), (3, 1, 1, 2));

    // A new commit: one more archive; the unchanged file is not parsed again.
    fake.origin.write("apps/a.yaml", &configmap("a", "shop", "2"));
    let c2 = fake.origin.commit("two");
    let third = src.fetch().await.unwrap();
    assert_eq!(third.revision.as_deref(), Some(c2.as_str()));
    assert_eq!(fake.tarballs.load(Ordering::SeqCst), 2);
    let stats = src.stats();
    assert_eq!((stats.files_parsed, stats.file_cache_hits), (3, 1), "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enterprise_base_urls_keep_their_path() {
    let (fake, base) = start(repo_with_two_files()).await;
    let mut cfg = config(&fake, &base, "main");
    cfg.api_url = format!("{base}/api/v3");
    cfg.path = Some("apps".into());
    let snap = source(cfg).fetch().await.unwrap();
    assert_eq!(keys(&snap), vec!["ConfigMap shop/a", "ConfigMap shop/b"]);
    assert_eq!(snap.repository, format!("{base}/org/gitops"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_token_missing_ref_repository_and_path_are_errors_of_the_right_kind() {
    let (fake, base) = start(repo_with_two_files()).await;
    let err = GitHubSource::with_token(config(&fake, &base, "main"), Some(Secret::new("bad-token")))
        .unwrap()
        .fetch()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert!(err.to_string().contains("Bad credentials"), "{err}");
    assert!(!err.to_string().contains("bad-token"));

    let err = source(config(&fake, &base, "no-such-branch")).fetch().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");

    let mut cfg = config(&fake, &base, "main");
    cfg.repo = "missing".into();
    let err = source(cfg).fetch().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");

    let mut cfg = config(&fake, &base, "main");
    cfg.path = Some("clusters/none".into());
    let err = source(cfg).fetch().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert!(err.to_string().contains("clusters/none"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exhausted_rate_limit_is_reported_and_not_hammered() {
    let (fake, base) = start(repo_with_two_files()).await;
    *fake.rate.lock().unwrap() = Rate::Exhausted(3600);
    let src = source(config(&fake, &base, "main"));
    let err = src.fetch().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.is_temporary());
    assert!(err.to_string().contains("rate limit"), "{err}");
    assert_eq!(fake.commits.load(Ordering::SeqCst), 1, "the reset is an hour away: no retry");
    // Until the reset, fetches report the limit without sending anything.
    for _ in 0..3 {
        assert_eq!(src.fetch().await.unwrap_err().kind(), ErrorKind::Unavailable);
    }
    assert_eq!(fake.commits.load(Ordering::SeqCst), 1);
    assert_eq!(fake.tarballs.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_retry_after_is_waited_for_then_retried_once() {
    let (fake, base) = start(repo_with_two_files()).await;
    *fake.rate.lock().unwrap() = Rate::RetryAfterOnce(1);
    let mut cfg = config(&fake, &base, "main");
    cfg.rate_limit_max_wait = Duration::from_secs(10);
    let snap = source(cfg).fetch().await.unwrap();
    assert_eq!(keys(&snap), vec!["ConfigMap shop/a", "ConfigMap shop/b"]);
    assert_eq!(fake.commits.load(Ordering::SeqCst), 2, "one refused request, one retry after the wait");
}
