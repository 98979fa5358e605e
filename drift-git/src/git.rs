//! A git repository as a desired source, through gix: cloned once into a cache folder, then
//! fetched; a branch, tag or commit; shallow where possible.
//!
//! gix is blocking, so every fetch runs on tokio's blocking pool.

use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use async_trait::async_trait;
use drift_model::progress::Progress;
use drift_model::source::{DesiredCapabilities, DesiredSource};
use drift_model::{DesiredSnapshot, Result, SourceWarning};
use gix::remote::Direction;
use sha2::{Digest, Sha256};

use crate::config::{GitConfig, Secret, default_cache_dir};
use crate::error::SourceError;
use crate::gitops::normalize_repo_url;
use crate::pipeline::{BuildInput, Pipeline, SourceStats, Stats};
use crate::source::{LastSnapshot, redact_url, require_crypto_provider};
use crate::tree::{BlobReader, Checkout, FileEntry, normalize_sub, prune_trees};

/// Reads a git repository through gix.
///
/// The first fetch clones (bare, depth 1 for branches and tags when `shallow`) into
/// `cache_dir/<name>-<hash of the URL and ref>`; later fetches ask the remote for the ref, and when it still
/// names the commit already read, return the earlier snapshot without receiving a pack or
/// rendering anything. A new commit is read from the object database; files and Kustomize/Helm
/// applications whose inputs did not change reuse their earlier results.
///
/// Over `http://` and `https://` the program must have installed a rustls crypto provider
/// first (`rustls::crypto::ring::default_provider().install_default()` in `main`); this crate
/// does not choose one, and building such a source without one is a configuration error.
#[derive(Debug)]
pub struct GitSource {
    inner: Arc<Inner>,
    /// One fetch at a time per source (the clone folder is not shared between fetches).
    lock: tokio::sync::Mutex<()>,
}

#[derive(Debug)]
struct Inner {
    cfg: GitConfig,
    name: String,
    /// The URL with credentials removed.
    url: String,
    normalized_url: String,
    repo_dir: PathBuf,
    trees_dir: PathBuf,
    sub: String,
    token: Option<Secret>,
    pipeline: Pipeline,
    stats: Arc<Stats>,
    last: LastSnapshot,
}

impl GitSource {
    /// A git source. The configuration is validated and the token (when `token_env` is set)
    /// is read from the environment; nothing is fetched until the first [`DesiredSource::fetch`].
    pub fn new(cfg: GitConfig) -> Result<Self> {
        Self::observed(cfg, Progress::default())
    }

    /// The same source, counting the files it parses and the renders it runs into `progress`.
    pub fn observed(cfg: GitConfig, progress: Progress) -> Result<Self> {
        let token = match &cfg.token_env {
            Some(var) => Some(crate::config::secret_from_env(var).ok_or_else(|| {
                drift_model::Error::config(format!(
                    "git source {}: environment variable {var} is not set",
                    redact_url(&cfg.url)
                ))
            })?),
            None => None,
        };
        Self::build(cfg, token, progress)
    }

    /// Like [`GitSource::new`], with the token given by the caller instead of `token_env`
    /// (for embedders that keep secrets elsewhere).
    pub fn with_token(cfg: GitConfig, token: Option<Secret>) -> Result<Self> {
        Self::build(cfg, token, Progress::default())
    }

    fn build(cfg: GitConfig, token: Option<Secret>, progress: Progress) -> Result<Self> {
        cfg.validate()?;
        require_crypto_provider(&cfg.url)?;
        let url = redact_url(&cfg.url);
        let cache_root = cfg.cache_dir.clone().unwrap_or_else(|| default_cache_dir("git"));
        // One clone per (URL, ref): sources of the same repository at different refs never
        // fetch into the same folder at once, and a shallow branch clone never hides the
        // history a commit-id source needs.
        let key = hex::encode(&Sha256::digest(format!("{}\0{}", cfg.url, cfg.reference).as_bytes())[..10]);
        let slug: String = url
            .split(['?', '#'])
            .next()
            .unwrap_or("")
            .rsplit('/')
            .next()
            .unwrap_or("repo")
            .trim_end_matches(".git")
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
            .take(40)
            .collect();
        let base = cache_root.join(format!("{slug}-{key}"));
        let stats = Arc::new(Stats::observed(progress));
        Ok(GitSource {
            inner: Arc::new(Inner {
                name: cfg.name.clone().unwrap_or_else(|| url.clone()),
                normalized_url: normalize_repo_url(&url),
                url,
                repo_dir: base.join("repo.git"),
                trees_dir: base.join("trees"),
                sub: normalize_sub(cfg.path.as_deref()),
                token,
                pipeline: Pipeline::new(cfg.render.clone(), Arc::clone(&stats)),
                stats,
                last: LastSnapshot::new(cfg.render.keep_between_fetches),
                cfg,
            }),
            lock: tokio::sync::Mutex::new(()),
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

    /// Counters (fetches, cache hits, packs received, files parsed, renders).
    pub fn stats(&self) -> SourceStats {
        self.inner.stats.snapshot()
    }

    /// The folder holding the bare clone.
    pub fn cache_path(&self) -> &Path {
        &self.inner.repo_dir
    }
}

fn git_err(operation: &'static str, url: &str, e: impl std::fmt::Display) -> SourceError {
    // `{:#}` prints gix's chain of causes (the root cause says what really happened).
    let message = format!("{e:#}").lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("; ");
    SourceError::Git { operation, url: url.to_owned(), message }
}

pub(crate) fn is_commit_id(reference: &str) -> bool {
    reference.len() == 40 && reference.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The refspecs that fetch `reference`, and whether the fetch may be shallow.
fn refspecs(reference: &str) -> Vec<String> {
    if reference == "HEAD" {
        vec!["+HEAD:refs/remotes/origin/HEAD".to_owned()]
    } else if let Some(rest) = reference.strip_prefix("refs/") {
        vec![format!("+refs/{rest}:refs/drift/{rest}")]
    } else {
        vec![
            format!("+refs/heads/{reference}:refs/remotes/origin/{reference}"),
            format!("+refs/tags/{reference}:refs/tags/{reference}"),
        ]
    }
}

fn open_or_init(dir: &Path, url: &str) -> Result<gix::Repository, SourceError> {
    if dir.join("HEAD").is_file() {
        gix::open(dir).map_err(|e| git_err("open of the cache", url, e))
    } else {
        std::fs::create_dir_all(dir).map_err(|e| SourceError::io(format!("creating {}", dir.display()), e))?;
        gix::init_bare(dir).map_err(|e| git_err("init of the cache", url, e))
    }
}

/// Asks the remote for the configured ref and receives the objects when they are new. Returns
/// the commit.
fn fetch_commit(inner: &Inner, repo: &gix::Repository) -> Result<gix::ObjectId, SourceError> {
    fetch_ref(inner, repo, &inner.cfg.reference)
}

/// [`fetch_commit`] of any branch, tag or commit id.
fn fetch_ref(inner: &Inner, repo: &gix::Repository, reference: &str) -> Result<gix::ObjectId, SourceError> {
    let url = inner.url.as_str();
    let commit_mode = is_commit_id(reference);
    if commit_mode {
        let id = gix::ObjectId::from_hex(reference.as_bytes()).map_err(|e| git_err("parse of the ref", url, e))?;
        if repo.find_object(id).ok().and_then(|o| o.peel_to_commit().ok()).is_some() {
            // A commit id names immutable content: nothing to ask the remote.
            return Ok(id);
        }
    }
    let specs = if commit_mode {
        vec!["+refs/heads/*:refs/remotes/origin/*".to_owned(), "+refs/tags/*:refs/tags/*".to_owned()]
    } else {
        refspecs(reference)
    };
    let remote = repo
        .remote_at(inner.cfg.url.as_str())
        .map_err(|e| git_err("fetch", url, e))?
        .with_refspecs(specs.iter().map(String::as_str), Direction::Fetch)
        .map_err(|e| git_err("fetch", url, e))?;
    let mut connection = remote.connect(Direction::Fetch).map_err(|e| git_err("connect", url, e))?;
    if let Some(token) = &inner.token {
        let username = inner.cfg.username.clone();
        let password = token.expose().to_owned();
        connection.set_credentials(move |action| match action {
            gix::credentials::helper::Action::Get(ctx) => Ok(Some(gix::credentials::protocol::Outcome {
                identity: gix::sec::identity::Account {
                    username: username.clone(),
                    password: password.clone(),
                    oauth_refresh_token: None,
                },
                next: ctx.into(),
            })),
            _ => Ok(None),
        });
    }
    let prepare = connection
        .prepare_fetch(gix::progress::Discard, gix::remote::ref_map::Options::default())
        .map_err(|e| git_err("ref listing", url, e))?;
    let target = if commit_mode {
        None
    } else {
        // Branch before tag, as git resolves an ambiguous short name.
        let mut found = None;
        for spec_index in 0..specs.len() {
            found = prepare.ref_map().mappings.iter().find_map(|m| match m.spec_index {
                gix::remote::fetch::refmap::SpecIndex::ExplicitInRemote(i) if i == spec_index => {
                    m.remote.as_id().map(ToOwned::to_owned)
                }
                _ => None,
            });
            if found.is_some() {
                break;
            }
        }
        let Some(id) = found else {
            return Err(SourceError::RefNotFound { reference: reference.to_owned(), repository: url.to_owned() });
        };
        Some(id)
    };
    if let Some(id) = target
        && repo.has_object(id)
    {
        // Known already (an unchanged ref, or a ref moved back): no pack to receive.
        return Ok(id);
    }
    let mut prepare = prepare;
    if inner.cfg.shallow && !commit_mode {
        prepare = prepare.with_shallow(gix::remote::fetch::Shallow::DepthAtRemote(NonZeroU32::MIN));
    }
    let outcome =
        prepare.receive(gix::progress::Discard, &AtomicBool::new(false)).map_err(|e| git_err("fetch", url, e))?;
    if matches!(outcome.status, gix::remote::fetch::Status::Change { .. }) {
        Stats::inc(&inner.stats.downloads);
    }
    match target {
        Some(id) => Ok(id),
        None => {
            let id = gix::ObjectId::from_hex(reference.as_bytes()).map_err(|e| git_err("parse of the ref", url, e))?;
            if repo.has_object(id) {
                Ok(id)
            } else {
                Err(SourceError::RefNotFound { reference: reference.to_owned(), repository: url.to_owned() })
            }
        }
    }
}

struct GitBlobs<'r> {
    repo: &'r gix::Repository,
    ids: HashMap<String, gix::ObjectId>,
}

impl BlobReader for GitBlobs<'_> {
    fn read(&self, path: &str) -> Result<Vec<u8>, SourceError> {
        let id = self
            .ids
            .get(path)
            .ok_or_else(|| SourceError::io(path.to_owned(), std::io::Error::from(std::io::ErrorKind::NotFound)))?;
        let object = self.repo.find_object(*id).map_err(|e| git_err("read of a blob", path, e))?;
        Ok(object.detach().data)
    }
}

/// The files of a commit (blobs by path, with their ids) and notes of what is not read.
#[allow(clippy::type_complexity)]
fn tree_files<'r>(
    inner: &Inner,
    repo: &'r gix::Repository,
    commit_id: gix::ObjectId,
) -> Result<(String, BTreeMap<String, FileEntry>, GitBlobs<'r>, Vec<SourceWarning>), SourceError> {
    let url = inner.url.as_str();
    let commit = repo
        .find_object(commit_id)
        .and_then(|o| o.peel_to_commit())
        .map_err(|e| git_err("read of the commit", url, e))?;
    let revision = commit.id.to_string();
    let tree = commit.tree().map_err(|e| git_err("read of the tree", url, e))?;
    let mut recorder = gix::traverse::tree::Recorder::default();
    tree.traverse().breadthfirst(&mut recorder).map_err(|e| git_err("tree traversal", url, e))?;
    let mut files = BTreeMap::new();
    let mut ids = HashMap::new();
    let mut notes = Vec::new();
    for entry in recorder.records {
        let path = entry.filepath.to_string();
        if entry.mode.is_blob() {
            let size = repo.find_header(entry.oid).map(|h| h.size()).unwrap_or(0);
            files.insert(path.clone(), FileEntry { id: entry.oid.to_string(), size });
            ids.insert(path, entry.oid);
        } else if entry.mode.is_link() {
            notes.push(SourceWarning::note("symbolic link not followed").at(path, None, None));
        } else if entry.mode.is_commit() {
            notes.push(SourceWarning::note("git submodule not read").at(path, None, None));
        }
    }
    Ok((revision, files, GitBlobs { repo, ids }, notes))
}

fn read_commit(
    inner: &Inner,
    repo: &gix::Repository,
    commit_id: gix::ObjectId,
) -> Result<DesiredSnapshot, SourceError> {
    let (revision, files, blobs, notes) = tree_files(inner, repo, commit_id)?;
    // Another revision an Argo CD source tracks: fetched as the configured one is, its files
    // materialised beside this revision's (pruned with them).
    let other = |reference: &str, render: &mut dyn FnMut(&Checkout<'_>, &str)| -> Result<(), String> {
        let id = fetch_ref(inner, repo, reference).map_err(|e| e.to_string())?;
        let (commit, files, blobs, _) = tree_files(inner, repo, id).map_err(|e| e.to_string())?;
        let checkout = Checkout::in_store(files, &blobs, inner.trees_dir.join(&commit));
        render(&checkout, &commit);
        Ok(())
    };
    let checkout = Checkout::in_store(files, &blobs, inner.trees_dir.join(&revision));
    let mut snapshot = inner.pipeline.build(&BuildInput {
        checkout: &checkout,
        repository: &inner.name,
        repo_url: Some(&inner.normalized_url),
        reference: Some(&inner.cfg.reference),
        other_revision: Some(&other),
        revision: &revision,
        sub: &inner.sub,
    })?;
    prune_trees(&inner.trees_dir, &revision);
    snapshot.warnings.extend(notes);
    Ok(snapshot)
}

fn fetch_blocking(inner: &Inner) -> Result<Arc<DesiredSnapshot>, SourceError> {
    Stats::inc(&inner.stats.fetches);
    let repo = open_or_init(&inner.repo_dir, &inner.url)?;
    let commit = fetch_commit(inner, &repo)?;
    let revision = commit.to_string();
    if let Some(snapshot) = inner.last.get(&revision) {
        Stats::inc(&inner.stats.snapshot_cache_hits);
        tracing::debug!(repository = %inner.name, %revision, "unchanged commit; earlier snapshot reused");
        return Ok(snapshot);
    }
    Stats::inc(&inner.stats.revisions_read);
    tracing::info!(repository = %inner.name, %revision, previous = ?inner.last.revision(), "reading a new commit");
    let snapshot = read_commit(inner, &repo, commit)?;
    Ok(inner.last.set(revision, snapshot, !inner.pipeline.read_beyond_the_revision()))
}

#[async_trait]
impl DesiredSource for GitSource {
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

impl GitSource {
    /// Like [`DesiredSource::fetch`], as a shared snapshot: an unchanged commit is not read
    /// again, so a rescan costs one ref listing and the expansion of the compact copy the
    /// source keeps.
    pub async fn fetch_shared(&self) -> Result<Arc<DesiredSnapshot>> {
        let _guard = self.lock.lock().await;
        let inner = Arc::clone(&self.inner);
        let span = tracing::debug_span!("git_fetch", repository = %inner.name);
        let raw = self.inner.cfg.url.clone();
        let result = tokio::task::spawn_blocking(move || span.in_scope(|| fetch_blocking(&inner)))
            .await
            .map_err(|e| SourceError::Join(e.to_string()))?;
        // gix and reqwest quote the URL they were given, query string included: what leaves the
        // source (warnings, the scans table, logs) says it without its secrets.
        result.map_err(|e| {
            let e = drift_model::Error::from(e);
            drift_model::Error::new(e.kind(), crate::source::redact_in(e.message(), &raw)).temporary(e.is_temporary())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refspecs_cover_branches_and_tags() {
        assert_eq!(refspecs("HEAD"), vec!["+HEAD:refs/remotes/origin/HEAD"]);
        assert_eq!(refspecs("main").len(), 2);
        assert_eq!(refspecs("refs/pull/1/head"), vec!["+refs/pull/1/head:refs/drift/pull/1/head"]);
        assert!(is_commit_id("0123456789abcdef0123456789abcdef01234567"));
        assert!(!is_commit_id("main"));
    }
}
