//! A fake GitHub REST server on loopback (axum), backed by a real bare git repository: refs
//! resolved and archives made by real git, and the Git Data API (blobs, trees, commits, refs)
//! and pull requests (list, create, update, merge) written with git plumbing into that
//! repository, so that a merged pull request is what the next archive serves.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use base64::Engine;
use drift_git::{GitHubConfig, GitHubSource, Secret};
use serde_json::{Value, json};

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
    /// Pull requests, numbered from 1 in creation order.
    pub pulls: Mutex<Vec<Pull>>,
    /// Write requests of the Git Data and pulls APIs (method and path), in order.
    pub writes: Mutex<Vec<String>>,
    /// Unique names for the temporary index files of tree creation.
    pub indexes: AtomicUsize,
    /// Check runs and commit statuses posted (the request bodies, with `kind`: `check-run` or
    /// `status` and the status's `sha`), in order.
    pub checks: Mutex<Vec<Value>>,
    /// Whether check runs are refused with 403 (as GitHub does for a token that is not a
    /// GitHub App's, such as a personal access token).
    pub check_runs_forbidden: std::sync::atomic::AtomicBool,
    /// Comments on pull requests: (pull request, comment id, body), ids from 1.
    pub comments: Mutex<Vec<(u64, u64, String)>>,
}

/// A pull request as the fake keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Pull {
    pub number: u64,
    pub head: String,
    pub base: String,
    pub title: String,
    pub body: String,
    pub state: String,
    pub merged: bool,
}

impl Pull {
    fn json(&self, base_url: &str) -> Value {
        json!({
            "number": self.number,
            "html_url": format!("{base_url}/org/gitops/pull/{}", self.number),
            "state": self.state,
            "merged": self.merged,
            "title": self.title,
            "body": self.body,
            "head": {"ref": self.head, "label": format!("org:{}", self.head)},
            "base": {"ref": self.base},
        })
    }
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

/// Runs git in the fake's bare repository; `None` when git fails.
fn git_in(fake: &Fake, args: &[&str], stdin: Option<&[u8]>, env: &[(&str, &str)]) -> Option<String> {
    let mut child = std::process::Command::new("git")
        .current_dir(&fake.origin.bare)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .envs(env.iter().copied())
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(data) = stdin {
        input.write_all(data).unwrap();
    }
    drop(input);
    let out = child.wait_with_output().unwrap();
    out.status.success().then(|| String::from_utf8(out.stdout).unwrap().trim().to_owned())
}

/// Records a write; those that came through the Enterprise prefix `/api/v3` say so.
fn record(fake: &Fake, headers: &HeaderMap, what: String) {
    let entry = if headers.contains_key("x-fake-enterprise") { format!("/api/v3 {what}") } else { what };
    fake.writes.lock().unwrap().push(entry);
}

async fn repository(State(fake): S, Path((owner, repo)): Path<(String, String)>, headers: HeaderMap) -> Response {
    if let Some(r) = check(&fake, &headers, &owner, &repo) {
        return r;
    }
    let default = git_in(&fake, &["symbolic-ref", "--short", "HEAD"], None, &[]).unwrap();
    Json(json!({"full_name": "org/gitops", "default_branch": default})).into_response()
}

async fn create_blob(
    State(fake): S,
    Path((owner, repo)): Path<(String, String)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if let Some(r) = check(&fake, &headers, &owner, &repo) {
        return r;
    }
    record(&fake, &headers, "POST git/blobs".into());
    let content = body["content"].as_str().unwrap();
    let data = match body["encoding"].as_str() {
        Some("base64") => base64::engine::general_purpose::STANDARD.decode(content).unwrap(),
        _ => content.as_bytes().to_vec(),
    };
    let sha = git_in(&fake, &["hash-object", "-w", "--stdin"], Some(&data), &[]).unwrap();
    (StatusCode::CREATED, Json(json!({"sha": sha}))).into_response()
}

async fn get_commit(
    State(fake): S,
    Path((owner, repo, sha)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = check(&fake, &headers, &owner, &repo) {
        return r;
    }
    let Some(tree) = git_in(&fake, &["rev-parse", "--verify", "--quiet", &format!("{sha}^{{tree}}")], None, &[]) else {
        return json_error(StatusCode::NOT_FOUND, "Not Found");
    };
    let parents = git_in(&fake, &["rev-list", "--parents", "-n", "1", &sha], None, &[]).unwrap();
    let parents: Vec<Value> = parents.split_whitespace().skip(1).map(|p| json!({"sha": p})).collect();
    Json(json!({"sha": sha, "tree": {"sha": tree}, "parents": parents})).into_response()
}

async fn create_tree(
    State(fake): S,
    Path((owner, repo)): Path<(String, String)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if let Some(r) = check(&fake, &headers, &owner, &repo) {
        return r;
    }
    record(&fake, &headers, "POST git/trees".into());
    let n = fake.indexes.fetch_add(1, Ordering::SeqCst);
    let index = fake.origin.dir.path().join(format!("fake-index-{n}"));
    let index = index.to_str().unwrap().to_owned();
    let env = [("GIT_INDEX_FILE", index.as_str())];
    match body["base_tree"].as_str() {
        Some(base) => {
            if git_in(&fake, &["read-tree", base], None, &env).is_none() {
                return json_error(StatusCode::UNPROCESSABLE_ENTITY, "base_tree is not a tree");
            }
        }
        None => {
            git_in(&fake, &["read-tree", "--empty"], None, &env).unwrap();
        }
    }
    for entry in body["tree"].as_array().unwrap() {
        let (path, mode) = (entry["path"].as_str().unwrap(), entry["mode"].as_str().unwrap());
        assert_eq!(entry["type"], "blob", "the fake only takes blobs");
        let sha = match (entry["sha"].as_str(), entry["content"].as_str()) {
            (Some(sha), _) => sha.to_owned(),
            (None, Some(content)) => {
                git_in(&fake, &["hash-object", "-w", "--stdin"], Some(content.as_bytes()), &[]).unwrap()
            }
            (None, None) => return json_error(StatusCode::UNPROCESSABLE_ENTITY, "sha or content required"),
        };
        let info = format!("{mode},{sha},{path}");
        if git_in(&fake, &["update-index", "--add", "--cacheinfo", &info], None, &env).is_none() {
            return json_error(StatusCode::UNPROCESSABLE_ENTITY, "GitRPC::BadObjectState");
        }
    }
    let sha = git_in(&fake, &["write-tree"], None, &env).unwrap();
    std::fs::remove_file(&index).ok();
    (StatusCode::CREATED, Json(json!({"sha": sha}))).into_response()
}

async fn create_commit(
    State(fake): S,
    Path((owner, repo)): Path<(String, String)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if let Some(r) = check(&fake, &headers, &owner, &repo) {
        return r;
    }
    record(&fake, &headers, "POST git/commits".into());
    let tree = body["tree"].as_str().unwrap();
    let mut args = vec!["commit-tree".to_owned(), tree.to_owned()];
    for p in body["parents"].as_array().unwrap() {
        args.extend(["-p".to_owned(), p.as_str().unwrap().to_owned()]);
    }
    args.extend(["-F".to_owned(), "-".to_owned()]);
    let name = body["author"]["name"].as_str().unwrap_or("GitHub");
    let email = body["author"]["email"].as_str().unwrap_or("noreply@github.com");
    let env = [
        ("GIT_AUTHOR_NAME", name),
        ("GIT_AUTHOR_EMAIL", email),
        ("GIT_COMMITTER_NAME", "GitHub"),
        ("GIT_COMMITTER_EMAIL", "noreply@github.com"),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let message = body["message"].as_str().unwrap().as_bytes();
    match git_in(&fake, &args, Some(message), &env) {
        Some(sha) => (StatusCode::CREATED, Json(json!({"sha": sha, "tree": {"sha": tree}}))).into_response(),
        None => json_error(StatusCode::UNPROCESSABLE_ENTITY, "Tree SHA does not exist"),
    }
}

pub fn ref_sha(fake: &Fake, full: &str) -> Option<String> {
    git_in(fake, &["rev-parse", "--verify", "--quiet", full], None, &[])
}

async fn get_ref(
    State(fake): S,
    Path((owner, repo, rest)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = check(&fake, &headers, &owner, &repo) {
        return r;
    }
    let full = format!("refs/{rest}");
    match ref_sha(&fake, &full) {
        Some(sha) => Json(json!({"ref": full, "object": {"sha": sha, "type": "commit"}})).into_response(),
        None => json_error(StatusCode::NOT_FOUND, "Not Found"),
    }
}

async fn create_ref(
    State(fake): S,
    Path((owner, repo)): Path<(String, String)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if let Some(r) = check(&fake, &headers, &owner, &repo) {
        return r;
    }
    let full = body["ref"].as_str().unwrap().to_owned();
    record(&fake, &headers, format!("POST git/refs {full}"));
    if ref_sha(&fake, &full).is_some() {
        return json_error(StatusCode::UNPROCESSABLE_ENTITY, "Reference already exists");
    }
    let sha = body["sha"].as_str().unwrap();
    git_in(&fake, &["update-ref", &full, sha], None, &[]).unwrap();
    (StatusCode::CREATED, Json(json!({"ref": full, "object": {"sha": sha, "type": "commit"}}))).into_response()
}

async fn update_ref(
    State(fake): S,
    Path((owner, repo, rest)): Path<(String, String, String)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if let Some(r) = check(&fake, &headers, &owner, &repo) {
        return r;
    }
    let full = format!("refs/{rest}");
    record(&fake, &headers, format!("PATCH git/refs {full}"));
    let Some(old) = ref_sha(&fake, &full) else {
        return json_error(StatusCode::UNPROCESSABLE_ENTITY, "Reference does not exist");
    };
    let sha = body["sha"].as_str().unwrap();
    let fast_forward = git_in(&fake, &["merge-base", "--is-ancestor", &old, sha], None, &[]).is_some();
    if !fast_forward && body["force"].as_bool() != Some(true) {
        return json_error(StatusCode::UNPROCESSABLE_ENTITY, "Update is not a fast forward");
    }
    git_in(&fake, &["update-ref", &full, sha], None, &[]).unwrap();
    Json(json!({"ref": full, "object": {"sha": sha, "type": "commit"}})).into_response()
}

async fn list_pulls(
    State(fake): S,
    Path((owner, repo)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = check(&fake, &headers, &owner, &repo) {
        return r;
    }
    let base_url = fake.base.lock().unwrap().clone();
    let state = query.get("state").map_or("open", String::as_str);
    let head = query.get("head").map(|h| h.split_once(':').map_or(h.as_str(), |(_, b)| b).to_owned());
    let pulls = fake.pulls.lock().unwrap();
    let list: Vec<Value> = pulls
        .iter()
        .filter(|p| state == "all" || p.state == state)
        .filter(|p| head.as_ref().is_none_or(|h| &p.head == h))
        .map(|p| p.json(&base_url))
        .collect();
    Json(Value::Array(list)).into_response()
}

async fn create_pull(
    State(fake): S,
    Path((owner, repo)): Path<(String, String)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if let Some(r) = check(&fake, &headers, &owner, &repo) {
        return r;
    }
    record(&fake, &headers, "POST pulls".into());
    let head = body["head"].as_str().unwrap().to_owned();
    let base = body["base"].as_str().unwrap().to_owned();
    if ref_sha(&fake, &format!("refs/heads/{head}")).is_none()
        || ref_sha(&fake, &format!("refs/heads/{base}")).is_none()
    {
        return json_error(StatusCode::UNPROCESSABLE_ENTITY, "Validation Failed");
    }
    let mut pulls = fake.pulls.lock().unwrap();
    if pulls.iter().any(|p| p.state == "open" && p.head == head && p.base == base) {
        return json_error(StatusCode::UNPROCESSABLE_ENTITY, "A pull request already exists");
    }
    let pull = Pull {
        number: pulls.len() as u64 + 1,
        head,
        base,
        title: body["title"].as_str().unwrap().to_owned(),
        body: body["body"].as_str().unwrap_or("").to_owned(),
        state: "open".into(),
        merged: false,
    };
    pulls.push(pull.clone());
    (StatusCode::CREATED, Json(pull.json(&fake.base.lock().unwrap()))).into_response()
}

async fn update_pull(
    State(fake): S,
    Path((owner, repo, number)): Path<(String, String, u64)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if let Some(r) = check(&fake, &headers, &owner, &repo) {
        return r;
    }
    record(&fake, &headers, format!("PATCH pulls/{number}"));
    let mut pulls = fake.pulls.lock().unwrap();
    let Some(pull) = pulls.iter_mut().find(|p| p.number == number) else {
        return json_error(StatusCode::NOT_FOUND, "Not Found");
    };
    if let Some(t) = body["title"].as_str() {
        pull.title = t.to_owned();
    }
    if let Some(b) = body["body"].as_str() {
        pull.body = b.to_owned();
    }
    let answer = pull.json(&fake.base.lock().unwrap());
    Json(answer).into_response()
}

async fn merge_pull(
    State(fake): S,
    Path((owner, repo, number)): Path<(String, String, u64)>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = check(&fake, &headers, &owner, &repo) {
        return r;
    }
    match merge(&fake, number) {
        Ok(sha) => Json(json!({"merged": true, "sha": sha})).into_response(),
        Err(message) => json_error(StatusCode::METHOD_NOT_ALLOWED, &message),
    }
}

async fn create_check_run(
    State(fake): S,
    Path((owner, repo)): Path<(String, String)>,
    headers: HeaderMap,
    Json(mut body): Json<Value>,
) -> Response {
    if let Some(r) = check(&fake, &headers, &owner, &repo) {
        return r;
    }
    if fake.check_runs_forbidden.load(Ordering::SeqCst) {
        return json_error(StatusCode::FORBIDDEN, "Resource not accessible by personal access token");
    }
    let valid = ["success", "failure", "neutral"].contains(&body["conclusion"].as_str().unwrap_or(""))
        && body["status"] == "completed"
        && body["output"]["title"].is_string()
        && body["output"]["summary"].is_string()
        && git_in(&fake, &["cat-file", "-e", body["head_sha"].as_str().unwrap_or("x")], None, &[]).is_some();
    if !valid {
        return json_error(StatusCode::UNPROCESSABLE_ENTITY, "Validation Failed");
    }
    let mut checks = fake.checks.lock().unwrap();
    body["kind"] = "check-run".into();
    checks.push(body);
    let url = format!("{}/org/gitops/runs/{}", fake.base.lock().unwrap(), checks.len());
    (StatusCode::CREATED, Json(json!({"id": checks.len(), "html_url": url}))).into_response()
}

async fn create_status(
    State(fake): S,
    Path((owner, repo, sha)): Path<(String, String, String)>,
    headers: HeaderMap,
    Json(mut body): Json<Value>,
) -> Response {
    if let Some(r) = check(&fake, &headers, &owner, &repo) {
        return r;
    }
    let valid = ["success", "failure", "error", "pending"].contains(&body["state"].as_str().unwrap_or(""))
        && body["description"].as_str().is_some_and(|d| d.chars().count() <= 140);
    if !valid || git_in(&fake, &["cat-file", "-e", &sha], None, &[]).is_none() {
        return json_error(StatusCode::UNPROCESSABLE_ENTITY, "Validation Failed");
    }
    body["kind"] = "status".into();
    body["sha"] = sha.into();
    fake.checks.lock().unwrap().push(body);
    (StatusCode::CREATED, Json(json!({"id": 1}))).into_response()
}

async fn list_comments(
    State(fake): S,
    Path((owner, repo, number)): Path<(String, String, u64)>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = check(&fake, &headers, &owner, &repo) {
        return r;
    }
    let comments = fake.comments.lock().unwrap();
    let list: Vec<Value> =
        comments.iter().filter(|c| c.0 == number).map(|(_, id, body)| json!({"id": id, "body": body})).collect();
    Json(Value::Array(list)).into_response()
}

async fn create_comment(
    State(fake): S,
    Path((owner, repo, number)): Path<(String, String, u64)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if let Some(r) = check(&fake, &headers, &owner, &repo) {
        return r;
    }
    if !fake.pulls.lock().unwrap().iter().any(|p| p.number == number) {
        return json_error(StatusCode::NOT_FOUND, "Not Found");
    }
    let mut comments = fake.comments.lock().unwrap();
    let id = comments.len() as u64 + 1;
    comments.push((number, id, body["body"].as_str().unwrap().to_owned()));
    (StatusCode::CREATED, Json(json!({"id": id}))).into_response()
}

async fn update_comment(
    State(fake): S,
    Path((owner, repo, id)): Path<(String, String, u64)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if let Some(r) = check(&fake, &headers, &owner, &repo) {
        return r;
    }
    let mut comments = fake.comments.lock().unwrap();
    let Some(comment) = comments.iter_mut().find(|c| c.1 == id) else {
        return json_error(StatusCode::NOT_FOUND, "Not Found");
    };
    comment.2 = body["body"].as_str().unwrap().to_owned();
    Json(json!({"id": id})).into_response()
}

/// Merges an open pull request the way GitHub's merge button does (a merge commit of the head
/// into the base branch, made with `git merge-tree`); returns the merge commit.
pub fn merge(fake: &Fake, number: u64) -> Result<String, String> {
    let mut pulls = fake.pulls.lock().unwrap();
    let pull = pulls.iter_mut().find(|p| p.number == number).ok_or("no such pull request")?;
    if pull.state != "open" {
        return Err("Pull Request is not mergeable".into());
    }
    let base_ref = format!("refs/heads/{}", pull.base);
    let base = ref_sha(fake, &base_ref).ok_or("base branch missing")?;
    let head = ref_sha(fake, &format!("refs/heads/{}", pull.head)).ok_or("head branch missing")?;
    let tree = git_in(fake, &["merge-tree", "--write-tree", &base, &head], None, &[]).ok_or("Merge conflict")?;
    let tree = tree.lines().next().unwrap().to_owned();
    let message = format!("Merge pull request #{number} from org/{}\n\n{}", pull.head, pull.title);
    let env = [
        ("GIT_AUTHOR_NAME", "GitHub"),
        ("GIT_AUTHOR_EMAIL", "noreply@github.com"),
        ("GIT_COMMITTER_NAME", "GitHub"),
        ("GIT_COMMITTER_EMAIL", "noreply@github.com"),
    ];
    let sha =
        git_in(fake, &["commit-tree", &tree, "-p", &base, "-p", &head, "-F", "-"], Some(message.as_bytes()), &env)
            .ok_or("commit-tree failed")?;
    git_in(fake, &["update-ref", &base_ref, &sha, &base], None, &[]).ok_or("the base branch moved")?;
    pull.state = "closed".into();
    pull.merged = true;
    Ok(sha)
}

pub async fn start(origin: Origin) -> (Arc<Fake>, String) {
    let fake = Arc::new(Fake {
        origin,
        base: Mutex::new(String::new()),
        rate: Mutex::new(Rate::Normal),
        commits: AtomicUsize::new(0),
        not_modified: AtomicUsize::new(0),
        tarballs: AtomicUsize::new(0),
        pulls: Mutex::new(Vec::new()),
        writes: Mutex::new(Vec::new()),
        indexes: AtomicUsize::new(0),
        checks: Mutex::new(Vec::new()),
        check_runs_forbidden: std::sync::atomic::AtomicBool::new(false),
        comments: Mutex::new(Vec::new()),
    });
    let api = axum::Router::new()
        .route("/repos/{owner}/{repo}", get(repository))
        .route("/repos/{owner}/{repo}/commits/{*reference}", get(commits))
        .route("/repos/{owner}/{repo}/tarball/{sha}", get(tarball))
        .route("/repos/{owner}/{repo}/git/blobs", post(create_blob))
        .route("/repos/{owner}/{repo}/git/trees", post(create_tree))
        .route("/repos/{owner}/{repo}/git/commits", post(create_commit))
        .route("/repos/{owner}/{repo}/git/commits/{sha}", get(get_commit))
        .route("/repos/{owner}/{repo}/git/ref/{*rest}", get(get_ref))
        .route("/repos/{owner}/{repo}/git/refs", post(create_ref))
        .route("/repos/{owner}/{repo}/git/refs/{*rest}", axum::routing::patch(update_ref))
        .route("/repos/{owner}/{repo}/pulls", get(list_pulls).post(create_pull))
        .route("/repos/{owner}/{repo}/pulls/{number}", axum::routing::patch(update_pull))
        .route("/repos/{owner}/{repo}/pulls/{number}/merge", put(merge_pull))
        .route("/repos/{owner}/{repo}/check-runs", post(create_check_run))
        .route("/repos/{owner}/{repo}/statuses/{sha}", post(create_status))
        .route("/repos/{owner}/{repo}/issues/{number}/comments", get(list_comments).post(create_comment))
        .route("/repos/{owner}/{repo}/issues/comments/{id}", axum::routing::patch(update_comment));
    let app = axum::Router::new()
        .nest(
            "/api/v3",
            api.clone().layer(axum::middleware::map_request(|mut req: axum::extract::Request| async move {
                req.headers_mut().insert("x-fake-enterprise", axum::http::HeaderValue::from_static("1"));
                req
            })),
        )
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
