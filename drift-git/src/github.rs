//! GitHub (and GitHub Enterprise) as a desired source, through octocrab's HTTP client.
//!
//! Two requests per changed commit, one per unchanged commit:
//! 1. `GET /repos/{owner}/{repo}/commits/{ref}` with `Accept: application/vnd.github.sha` and
//!    `If-None-Match` (a 304 does not count against the rate limit) resolves the ref;
//! 2. only when the commit changed, `GET /repos/{owner}/{repo}/tarball/{sha}` downloads the
//!    whole tree in one archive.
//!
//! Rate limits are honoured: `x-ratelimit-remaining: 0` with `x-ratelimit-reset`, or a
//! `retry-after`, make the source wait (up to `rate_limit_max_wait`) or report the limit
//! without sending anything until the reset.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use drift_model::progress::Progress;
use drift_model::source::{DesiredCapabilities, DesiredSource};
use drift_model::{DesiredSnapshot, Result, SourceWarning};
use http::{HeaderMap, HeaderValue, StatusCode};
use http_body_util::BodyExt;
use octocrab::Octocrab;
use sha2::{Digest, Sha256};

use crate::config::{GitHubConfig, Secret, default_cache_dir};
use crate::error::SourceError;
use crate::gitops::normalize_repo_url;
use crate::pipeline::{BuildInput, Pipeline, SourceStats, Stats};
use crate::source::LastSnapshot;
use crate::tree::{BlobReader, Checkout, FileEntry, join_relative, normalize_sub, prune_trees};

/// Largest archive accepted (unpacked), and most files in it.
const MAX_ARCHIVE_BYTES: u64 = 1 << 30;
const MAX_ARCHIVE_FILES: usize = 200_000;

/// Reads a GitHub repository through the REST API.
#[derive(Debug)]
pub struct GitHubSource {
    inner: Arc<Inner>,
    state: Arc<tokio::sync::Mutex<State>>,
}

#[derive(Debug)]
struct Inner {
    cfg: GitHubConfig,
    name: String,
    normalized_url: String,
    client: Octocrab,
    sub: String,
    trees_dir: PathBuf,
    pipeline: Pipeline,
    stats: Arc<Stats>,
    last: LastSnapshot,
}

#[derive(Debug, Default)]
struct State {
    /// ETag of the last ref resolution and the commit it named.
    etag: Option<(String, String)>,
    /// No request before this time (an exhausted rate limit).
    blocked_until: Option<SystemTime>,
}

impl GitHubSource {
    /// A GitHub source; the token is read from the variable named by `token_env` (unset: anonymous).
    pub fn new(cfg: GitHubConfig) -> Result<Self> {
        Self::observed(cfg, Progress::default())
    }

    /// The same source, counting the files it parses and the renders it runs into `progress`.
    pub fn observed(cfg: GitHubConfig, progress: Progress) -> Result<Self> {
        let token = crate::config::secret_from_env(&cfg.token_env);
        Self::build(cfg, token, progress)
    }

    /// Like [`GitHubSource::new`], with the token given by the caller instead of `token_env`.
    pub fn with_token(cfg: GitHubConfig, token: Option<Secret>) -> Result<Self> {
        Self::build(cfg, token, Progress::default())
    }

    fn build(cfg: GitHubConfig, token: Option<Secret>, progress: Progress) -> Result<Self> {
        cfg.validate()?;
        let mut builder = Octocrab::builder()
            .base_uri(cfg.api_url.as_str())
            .map_err(|e| drift_model::Error::config(format!("github source: invalid api_url: {e}")))?
            // Our own rate-limit handling decides when to retry; octocrab must not retry behind it.
            .add_retry_config(octocrab::service::middleware::retry::RetryConfig::None)
            .set_connect_timeout(Some(cfg.timeout))
            .set_read_timeout(Some(cfg.timeout));
        if let Some(t) = token {
            builder = builder.personal_token(t.expose().to_owned());
        }
        let client = builder
            .build()
            .map_err(|e| drift_model::Error::config(format!("github source: cannot build the HTTP client: {e}")))?;
        let web = web_url(&cfg);
        let key = hex::encode(&Sha256::digest(web.as_bytes())[..10]);
        let cache_root = cfg.cache_dir.clone().unwrap_or_else(|| default_cache_dir("github"));
        let stats = Arc::new(Stats::observed(progress));
        Ok(GitHubSource {
            inner: Arc::new(Inner {
                name: cfg.name.clone().unwrap_or_else(|| web.clone()),
                normalized_url: normalize_repo_url(&web),
                client,
                sub: normalize_sub(cfg.path.as_deref()),
                trees_dir: cache_root.join(format!("{}-{}-{key}", cfg.owner, cfg.repo)).join("trees"),
                pipeline: Pipeline::new(cfg.render.clone(), Arc::clone(&stats)),
                stats,
                last: LastSnapshot::new(cfg.render.keep_between_fetches),
                cfg,
            }),
            state: Arc::new(tokio::sync::Mutex::new(State::default())),
        })
    }

    /// The same source, opening the SOPS-encrypted plain files it reads with `opener`
    /// ([`drift_manifest::sops::open_file`]); without it they stay encrypted and uncomparable.
    pub fn with_sops(self, opener: Arc<dyn drift_model::sops::SopsOpener>) -> Self {
        self.inner.pipeline.set_sops(opener);
        self
    }

    /// The same source, reading the ConfigMaps and Secrets that Flux objects name
    /// (`substituteFrom`, `valuesFrom`) and that are not in Git from the cluster with `lookup`,
    /// as kustomize-controller and helm-controller do; a snapshot that read the cluster is not
    /// kept between fetches.
    pub fn with_cluster(self, lookup: Arc<dyn drift_model::lookup::ObjectLookup>) -> Self {
        self.inner.pipeline.set_cluster(lookup);
        self
    }

    /// With several clusters: the source of `targets.this`, rendering the Argo CD Applications
    /// that go to that cluster only (docs/sources.md, "Several clusters").
    pub fn with_targets(self, targets: Arc<crate::gitops::ClusterTargets>) -> Self {
        self.inner.pipeline.set_targets(targets);
        self
    }

    /// Counters (fetches, requests, downloads, cache hits, renders).
    pub fn stats(&self) -> SourceStats {
        self.inner.stats.snapshot()
    }

    /// The configured octocrab client (base URL, token, timeouts), for the publishing side.
    pub(crate) fn client(&self) -> &Octocrab {
        &self.inner.client
    }

    /// The repository's web address (`https://github.com/owner/repo` or the Enterprise host's).
    pub(crate) fn web_url(&self) -> String {
        web_url(&self.inner.cfg)
    }

    /// Resolves the configured ref and downloads the archive of its commit, with the same rate
    /// limit handling as a fetch: returns the commit id and the `.tar.gz` bytes.
    pub(crate) async fn archive_of_ref(&self) -> Result<(String, bytes::Bytes), SourceError> {
        let mut state = self.state.lock().await;
        // A fresh resolution: the workspace needs the commit, not a 304 against an old ETag.
        state.etag = None;
        let sha = self.inner.resolve(&mut state).await?;
        let archive = self.inner.download(&mut state, &sha).await?;
        Ok((sha, archive))
    }

    /// One GET of the API (rate limits honoured as for a fetch); returns the status and body.
    pub(crate) async fn api_get(&self, path: &str, what: &str) -> Result<(StatusCode, bytes::Bytes), SourceError> {
        let mut state = self.state.lock().await;
        let mut headers = HeaderMap::new();
        headers.insert(http::header::ACCEPT, HeaderValue::from_static("application/vnd.github+json"));
        let answer = self.inner.get(&mut state, path, headers, what).await?;
        Ok((answer.status, answer.body))
    }
}

/// The error for a GitHub answer that is not a success: status and GitHub's `message`.
pub(crate) fn status_error(status: StatusCode, body: &[u8], what: &str) -> SourceError {
    let message = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_owned))
        .unwrap_or_else(|| status.canonical_reason().unwrap_or("error").to_owned());
    SourceError::GitHubStatus { status: status.as_u16(), what: what.to_owned(), message }
}

/// `https://github.com/owner/repo`, or `https://HOST/owner/repo` for Enterprise.
fn web_url(cfg: &GitHubConfig) -> String {
    let api = cfg.api_url.trim_end_matches('/');
    let base = if api == "https://api.github.com" {
        "https://github.com".to_owned()
    } else {
        api.trim_end_matches("/api/v3").to_owned()
    };
    format!("{base}/{}/{}", cfg.owner, cfg.repo)
}

fn header_u64(headers: &HeaderMap, name: &str) -> Option<u64> {
    headers.get(name)?.to_str().ok()?.trim().parse().ok()
}

/// When the rate limit allows the next request, if the answer says it is exhausted.
fn rate_limit_until(status: StatusCode, headers: &HeaderMap, now: SystemTime) -> Option<SystemTime> {
    if let Some(secs) = header_u64(headers, "retry-after")
        && (status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::FORBIDDEN)
    {
        return Some(now + Duration::from_secs(secs));
    }
    if header_u64(headers, "x-ratelimit-remaining") == Some(0) {
        let reset = header_u64(headers, "x-ratelimit-reset")
            .map_or(now + Duration::from_secs(60), |s| UNIX_EPOCH + Duration::from_secs(s));
        return Some(reset.max(now));
    }
    None
}

fn describe(t: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: bytes::Bytes,
}

impl Inner {
    /// One GET, honouring the rate limit before and after; retried at most once after a wait.
    async fn get(&self, state: &mut State, path: &str, headers: HeaderMap, what: &str) -> Result<Answer, SourceError> {
        for attempt in 0..2 {
            if let Some(until) = state.blocked_until {
                let now = SystemTime::now();
                match until.duration_since(now) {
                    Ok(wait) if wait > self.cfg.rate_limit_max_wait => {
                        return Err(SourceError::RateLimited { what: what.to_owned(), reset: describe(until) });
                    }
                    Ok(wait) => {
                        tracing::info!(repository = %self.name, wait_s = wait.as_secs_f64(), "GitHub rate limit: waiting for the reset");
                        tokio::time::sleep(wait).await;
                    }
                    Err(_) => {}
                }
                state.blocked_until = None;
            }
            Stats::inc(&self.stats.requests);
            let response = self
                .client
                ._get_with_headers(path, Some(headers.clone()))
                .await
                .map_err(|e| SourceError::GitHubTransport { what: what.to_owned(), message: e.to_string() })?;
            let status = response.status();
            let resp_headers = response.headers().clone();
            let limited = rate_limit_until(status, &resp_headers, SystemTime::now());
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| SourceError::GitHubTransport { what: what.to_owned(), message: e.to_string() })?
                .to_bytes();
            if let Some(until) = limited {
                state.blocked_until = Some(until);
                let rejected = status == StatusCode::TOO_MANY_REQUESTS
                    || (status == StatusCode::FORBIDDEN
                        && header_u64(&resp_headers, "x-ratelimit-remaining") == Some(0))
                    || (status == StatusCode::FORBIDDEN && resp_headers.contains_key("retry-after"));
                if rejected {
                    if attempt == 0 {
                        continue; // waits above (or reports) before the one retry
                    }
                    return Err(SourceError::RateLimited { what: what.to_owned(), reset: describe(until) });
                }
            }
            return Ok(Answer { status, headers: resp_headers, body });
        }
        Err(SourceError::RateLimited { what: what.to_owned(), reset: "unknown".into() })
    }

    fn status_error(&self, answer: &Answer, what: &str) -> SourceError {
        status_error(answer.status, &answer.body, what)
    }

    /// Resolves the ref to a commit id (conditional request).
    async fn resolve(&self, state: &mut State) -> Result<String, SourceError> {
        self.resolve_ref(state, &self.cfg.reference, true).await
    }

    /// The commit of a branch, tag or commit id; with `remember`, the answer's ETag is kept and
    /// sent next time (the configured ref); another revision asks afresh.
    async fn resolve_ref(&self, state: &mut State, reference: &str, remember: bool) -> Result<String, SourceError> {
        let path = format!("/repos/{}/{}/commits/{}", self.cfg.owner, self.cfg.repo, reference.replace('#', "%23"));
        let mut headers = HeaderMap::new();
        headers.insert(http::header::ACCEPT, HeaderValue::from_static("application/vnd.github.sha"));
        if remember
            && let Some((etag, _)) = &state.etag
            && let Ok(v) = HeaderValue::from_str(etag)
        {
            headers.insert(http::header::IF_NONE_MATCH, v);
        }
        let what = format!("ref {reference}");
        let answer = self.get(state, &path, headers, &what).await?;
        match answer.status {
            StatusCode::NOT_MODIFIED => match &state.etag {
                Some((_, sha)) => Ok(sha.clone()),
                None => Err(self.status_error(&answer, &what)),
            },
            StatusCode::OK => {
                let sha = String::from_utf8_lossy(&answer.body).trim().to_owned();
                if sha.len() != 40 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(SourceError::GitHubStatus {
                        status: 200,
                        what,
                        message: "the answer is not a commit id".into(),
                    });
                }
                if remember && let Some(etag) = answer.headers.get(http::header::ETAG).and_then(|v| v.to_str().ok()) {
                    state.etag = Some((etag.to_owned(), sha.clone()));
                }
                Ok(sha)
            }
            StatusCode::NOT_FOUND | StatusCode::UNPROCESSABLE_ENTITY => {
                Err(SourceError::RefNotFound { reference: reference.to_owned(), repository: self.name.clone() })
            }
            _ => Err(self.status_error(&answer, &what)),
        }
    }

    async fn download(&self, state: &mut State, sha: &str) -> Result<bytes::Bytes, SourceError> {
        let path = format!("/repos/{}/{}/tarball/{sha}", self.cfg.owner, self.cfg.repo);
        let what = format!("archive of {sha}");
        let answer = self.get(state, &path, HeaderMap::new(), &what).await?;
        if answer.status != StatusCode::OK {
            return Err(self.status_error(&answer, &what));
        }
        Stats::inc(&self.stats.downloads);
        Ok(answer.body)
    }
}

struct MemBlobs(HashMap<String, Vec<u8>>);

impl BlobReader for MemBlobs {
    fn read(&self, path: &str) -> Result<Vec<u8>, SourceError> {
        self.0
            .get(path)
            .cloned()
            .ok_or_else(|| SourceError::io(path.to_owned(), std::io::Error::from(std::io::ErrorKind::NotFound)))
    }
}

/// Files, their contents and notes about skipped entries.
pub(crate) type Unpacked = (BTreeMap<String, FileEntry>, HashMap<String, Vec<u8>>, Vec<SourceWarning>);

/// Unpacks a `.tar.gz` archive as GitHub serves it (one top folder `owner-repo-sha/`).
pub(crate) fn unpack(archive: &[u8], repository: &str, revision: &str) -> Result<Unpacked, SourceError> {
    let bad = |message: String| SourceError::Archive {
        repository: repository.to_owned(),
        revision: revision.to_owned(),
        message,
    };
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(archive));
    let mut files = BTreeMap::new();
    let mut contents = HashMap::new();
    let mut notes = Vec::new();
    let mut total = 0u64;
    for entry in tar.entries().map_err(|e| bad(e.to_string()))? {
        let mut entry = entry.map_err(|e| bad(e.to_string()))?;
        let raw = entry.path().map_err(|e| bad(e.to_string()))?.to_string_lossy().into_owned();
        // Drop the top folder; refuse anything that would leave the tree.
        let Some((_, rest)) = raw.split_once('/') else { continue };
        if rest.is_empty() {
            continue;
        }
        let Some(path) = join_relative("", rest).filter(|p| !p.is_empty() && !rest.split('/').any(|c| c == ".."))
        else {
            notes.push(SourceWarning::note("archive entry outside the tree skipped").at(raw, None, None));
            continue;
        };
        let kind = entry.header().entry_type();
        if kind.is_symlink() || kind.is_hard_link() {
            notes.push(SourceWarning::note("symbolic link not followed").at(path, None, None));
            continue;
        }
        if !kind.is_file() {
            continue;
        }
        let size = entry.header().size().unwrap_or(0);
        total += size;
        if total > MAX_ARCHIVE_BYTES || files.len() >= MAX_ARCHIVE_FILES {
            return Err(bad("archive larger than 1 GiB or 200,000 files".into()));
        }
        let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        entry.read_to_end(&mut data).map_err(|e| bad(e.to_string()))?;
        let id = hex::encode(Sha256::digest(&data));
        files.insert(path.clone(), FileEntry { id, size: data.len() as u64 });
        contents.insert(path, data);
    }
    Ok((files, contents, notes))
}

#[async_trait]
impl DesiredSource for GitHubSource {
    fn name(&self) -> &str {
        &self.inner.name
    }

    fn capabilities(&self) -> DesiredCapabilities {
        DesiredCapabilities { revisions: true, cached: true }
    }

    async fn fetch(&self) -> Result<DesiredSnapshot> {
        Ok(Arc::unwrap_or_clone(self.fetch_shared().await?))
    }
}

impl GitHubSource {
    /// Like [`DesiredSource::fetch`], as a shared snapshot: an unchanged commit is not
    /// downloaded again, after one conditional request (its objects are expanded from the
    /// compact copy the source keeps).
    pub async fn fetch_shared(&self) -> Result<Arc<DesiredSnapshot>> {
        let mut state = self.state.lock().await;
        let inner = Arc::clone(&self.inner);
        Stats::inc(&inner.stats.fetches);
        let sha = inner.resolve(&mut state).await?;
        if let Some(snapshot) = inner.last.get(&sha) {
            Stats::inc(&inner.stats.snapshot_cache_hits);
            return Ok(snapshot);
        }
        let archive = inner.download(&mut state, &sha).await?;
        drop(state);
        Stats::inc(&inner.stats.revisions_read);
        let worker = Arc::clone(&inner);
        let sha_for_worker = sha.clone();
        let (shared_state, handle) = (Arc::clone(&self.state), tokio::runtime::Handle::current());
        let snapshot = tokio::task::spawn_blocking(move || -> Result<DesiredSnapshot, SourceError> {
            let inner = worker;
            let (files, contents, notes) = unpack(&archive, &inner.name, &sha_for_worker)?;
            let blobs = MemBlobs(contents);
            // Another revision an Argo CD source tracks: resolved and downloaded as the
            // configured one is, on this blocking thread.
            let other = |reference: &str, render: &mut dyn FnMut(&Checkout<'_>, &str)| -> Result<(), String> {
                let (sha, archive) = {
                    let mut state = shared_state.blocking_lock();
                    let sha =
                        handle.block_on(inner.resolve_ref(&mut state, reference, false)).map_err(|e| e.to_string())?;
                    let archive = handle.block_on(inner.download(&mut state, &sha)).map_err(|e| e.to_string())?;
                    (sha, archive)
                };
                let (files, contents, _) = unpack(&archive, &inner.name, &sha).map_err(|e| e.to_string())?;
                let blobs = MemBlobs(contents);
                let checkout = Checkout::in_store(files, &blobs, inner.trees_dir.join(&sha));
                render(&checkout, &sha);
                Ok(())
            };
            let checkout = Checkout::in_store(files, &blobs, inner.trees_dir.join(&sha_for_worker));
            let mut snapshot = inner.pipeline.build(&BuildInput {
                checkout: &checkout,
                repository: &inner.name,
                repo_url: Some(&inner.normalized_url),
                reference: Some(&inner.cfg.reference),
                other_revision: Some(&other),
                revision: &sha_for_worker,
                sub: &inner.sub,
            })?;
            prune_trees(&inner.trees_dir, &sha_for_worker);
            snapshot.warnings.extend(notes);
            Ok(snapshot)
        })
        .await
        .map_err(|e| SourceError::Join(e.to_string()))??;
        Ok(inner.last.set(sha, snapshot, !inner.pipeline.read_beyond_the_revision()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limit_headers_are_read() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        let mut h = HeaderMap::new();
        h.insert("x-ratelimit-remaining", HeaderValue::from_static("0"));
        h.insert("x-ratelimit-reset", HeaderValue::from_static("1600"));
        assert_eq!(rate_limit_until(StatusCode::OK, &h, now), Some(UNIX_EPOCH + Duration::from_secs(1_600)));
        let mut h = HeaderMap::new();
        h.insert("x-ratelimit-remaining", HeaderValue::from_static("12"));
        assert_eq!(rate_limit_until(StatusCode::OK, &h, now), None);
        h.insert("retry-after", HeaderValue::from_static("7"));
        assert_eq!(rate_limit_until(StatusCode::TOO_MANY_REQUESTS, &h, now), Some(now + Duration::from_secs(7)));
    }

    #[test]
    fn enterprise_web_url() {
        let mut c = GitHubConfig::new("o", "r", "main");
        assert_eq!(web_url(&c), "https://github.com/o/r");
        c.api_url = "https://ghe.example.com/api/v3".into();
        assert_eq!(web_url(&c), "https://ghe.example.com/o/r");
    }
}
