//! A fake GitHub REST server on loopback (axum): refs resolved and archives made by real git.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use drift_source_git::{GitHubConfig, GitHubSource, Secret};

use super::{Origin, configmap};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    Normal,
    /// 403 with `x-ratelimit-remaining: 0` and a reset this many seconds ahead.
    Exhausted(u64),
    /// One 429 with `retry-after`, then normal.
    RetryAfterOnce(u64),
}

pub struct Fake {
    pub origin: Origin,
    pub base: Mutex<String>,
    pub rate: Mutex<Rate>,
    pub commits: AtomicUsize,
    pub not_modified: AtomicUsize,
    pub tarballs: AtomicUsize,
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

pub async fn start(origin: Origin) -> (Arc<Fake>, String) {
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

pub fn config(fake: &Fake, base: &str, reference: &str) -> GitHubConfig {
    let mut cfg = GitHubConfig::new("org", "gitops", reference);
    cfg.api_url = base.to_owned();
    cfg.cache_dir = Some(fake.origin.cache());
    cfg
}

pub fn source(cfg: GitHubConfig) -> GitHubSource {
    GitHubSource::with_token(cfg, Some(Secret::new("good-token"))).unwrap()
}

pub fn repo_with_two_files() -> Origin {
    let origin = Origin::new();
    origin.write("apps/a.yaml", &configmap("a", "shop", "1"));
    origin.write("apps/b.yaml", &configmap("b", "shop", "1"));
    origin.write("README.md", "# gitops\n");
    origin.commit("one");
    origin
}
