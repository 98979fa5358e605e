//! A local folder as a desired source (no git): the revision is a content hash of the files.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use drift_model::progress::Progress;
use drift_model::source::{DesiredCapabilities, DesiredSource};
use drift_model::{DesiredSnapshot, Result, SourceWarning};
use sha2::{Digest, Sha256};

use crate::config::FolderConfig;
use crate::error::SourceError;
use crate::pipeline::{BuildInput, Pipeline, SourceStats, Stats};
use crate::source::LastSnapshot;
use crate::tree::{BlobReader, Checkout, FileEntry, normalize_sub};

/// Reads a folder on the local disk.
///
/// The revision is `sha256:` followed by a hash of every file's path and content, so an
/// unchanged folder is not parsed or rendered again.
#[derive(Debug)]
pub struct FolderSource {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    name: String,
    root: PathBuf,
    sub: String,
    pipeline: Pipeline,
    stats: Arc<Stats>,
    last: LastSnapshot,
}

struct MemReader(HashMap<String, Vec<u8>>);

impl BlobReader for MemReader {
    fn read(&self, path: &str) -> Result<Vec<u8>, SourceError> {
        self.0
            .get(path)
            .cloned()
            .ok_or_else(|| SourceError::io(path.to_owned(), std::io::Error::from(std::io::ErrorKind::NotFound)))
    }
}

impl FolderSource {
    /// A folder source; the configuration is validated, the folder is read at each fetch.
    pub fn new(cfg: FolderConfig) -> Result<Self> {
        Self::observed(cfg, Progress::default())
    }

    /// The same source, counting the files it parses and the renders it runs into `progress`.
    pub fn observed(cfg: FolderConfig, progress: Progress) -> Result<Self> {
        cfg.validate()?;
        let stats = Arc::new(Stats::observed(progress));
        let name = cfg.name.clone().unwrap_or_else(|| cfg.root.display().to_string());
        Ok(FolderSource {
            inner: Arc::new(Inner {
                name,
                sub: normalize_sub(cfg.path.as_deref()),
                root: cfg.root,
                last: LastSnapshot::new(cfg.render.keep_between_fetches),
                pipeline: Pipeline::new(cfg.render, Arc::clone(&stats)),
                stats,
            }),
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

    /// Counters (fetches, cache hits, files parsed, renders).
    pub fn stats(&self) -> SourceStats {
        self.inner.stats.snapshot()
    }
}

/// Lists regular files below `root` (not following symbolic links; `.git` skipped); a symbolic
/// link or an entry that is not a regular file (FIFO, socket, device) is a note naming its path.
fn list_files(root: &Path, warnings: &mut Vec<SourceWarning>) -> Result<Vec<(String, PathBuf)>, SourceError> {
    let mut out = Vec::new();
    let mut stack = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| SourceError::io(format!("reading {}", dir.display()), e))?;
        for entry in entries {
            let entry = entry.map_err(|e| SourceError::io(format!("reading {}", dir.display()), e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel_path = if rel.is_empty() { name.clone() } else { format!("{rel}/{name}") };
            let ft = entry.file_type().map_err(|e| SourceError::io(format!("reading {rel_path}"), e))?;
            if ft.is_dir() {
                if name != ".git" {
                    stack.push((entry.path(), rel_path));
                }
            } else if ft.is_file() {
                out.push((rel_path, entry.path()));
            } else if ft.is_symlink() {
                warnings.push(SourceWarning::note("symbolic link not followed").at(rel_path, None, None));
            } else {
                // Never opened (a FIFO would block the read), but said, as `drift diff` says it.
                warnings.push(
                    SourceWarning::note("not a regular file (a FIFO, socket or device): not read")
                        .at(rel_path, None, None),
                );
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Where the object `key` of the folder `root` (read from `sub` with `cfg`, as a folder source
/// would) comes from, rendered the way the source renders it; else the errors of the folder.
/// With `targets`, as that cluster's source renders it (an Argo CD Application going to another
/// cluster renders nothing).
pub(crate) fn locate_in_folder(
    root: &Path,
    sub: &str,
    cfg: &crate::config::RenderConfig,
    targets: Option<&Arc<crate::gitops::ClusterTargets>>,
    key: &drift_model::ResourceKey,
) -> Result<Result<(crate::pipeline::Origin, drift_model::Resource), Vec<SourceWarning>>, SourceError> {
    let mut notes = Vec::new();
    let mut files = BTreeMap::new();
    let mut contents = HashMap::new();
    for (rel, path) in list_files(root, &mut notes)? {
        let data = std::fs::read(&path).map_err(|e| SourceError::io(format!("reading {rel}"), e))?;
        files.insert(rel.clone(), FileEntry { id: hex::encode(Sha256::digest(&data)), size: data.len() as u64 });
        contents.insert(rel, data);
    }
    let reader = MemReader(contents);
    let checkout = Checkout::on_disk(files, &reader, root.to_path_buf());
    let pipeline = Pipeline::new(cfg.clone(), Arc::default());
    if let Some(targets) = targets {
        pipeline.set_targets(Arc::clone(targets));
    }
    let sub = normalize_sub(Some(sub));
    let input = BuildInput {
        checkout: &checkout,
        repository: "accept",
        repo_url: None,
        reference: None,
        other_revision: None,
        revision: "-",
        sub: &sub,
    };
    pipeline.locate(&input, key)
}

fn read_folder(inner: &Inner) -> Result<Arc<DesiredSnapshot>, SourceError> {
    if !inner.root.is_dir() {
        return Err(SourceError::PathNotFound {
            path: inner.root.display().to_string(),
            repository: inner.name.clone(),
            revision: "-".into(),
        });
    }
    let mut notes = Vec::new();
    let listed = list_files(&inner.root, &mut notes)?;
    let mut files = BTreeMap::new();
    let mut contents = HashMap::new();
    let mut revision = Sha256::new();
    for (rel, path) in listed {
        let size = path.metadata().map(|m| m.len()).unwrap_or(0);
        let id = if size > inner.pipeline.cfg.max_file_bytes {
            format!("large:{size}")
        } else {
            let data = std::fs::read(&path).map_err(|e| SourceError::io(format!("reading {rel}"), e))?;
            let id = hex::encode(Sha256::digest(&data));
            contents.insert(rel.clone(), data);
            id
        };
        revision.update(rel.as_bytes());
        revision.update(b"\0");
        revision.update(id.as_bytes());
        revision.update(b"\n");
        files.insert(rel, FileEntry { id, size });
    }
    let revision = format!("sha256:{}", hex::encode(revision.finalize()));
    let key = format!("{revision}\0{}", inner.sub);
    Stats::inc(&inner.stats.fetches);
    if let Some(snapshot) = inner.last.get(&key) {
        Stats::inc(&inner.stats.snapshot_cache_hits);
        return Ok(snapshot);
    }
    Stats::inc(&inner.stats.revisions_read);
    let reader = MemReader(contents);
    let checkout = Checkout::on_disk(files, &reader, inner.root.clone());
    let mut snapshot = inner.pipeline.build(&BuildInput {
        checkout: &checkout,
        repository: &inner.name,
        repo_url: None,
        reference: None,
        other_revision: None,
        revision: &revision,
        sub: &inner.sub,
    })?;
    snapshot.warnings.extend(notes);
    Ok(inner.last.set(key, snapshot, !inner.pipeline.read_beyond_the_revision()))
}

#[async_trait]
impl DesiredSource for FolderSource {
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

impl FolderSource {
    /// Like [`DesiredSource::fetch`], as a shared snapshot: an unchanged folder is not read
    /// again (its objects are expanded from the compact copy the source keeps).
    pub async fn fetch_shared(&self) -> Result<Arc<DesiredSnapshot>> {
        let inner = Arc::clone(&self.inner);
        let span = tracing::debug_span!("folder_fetch", repository = %inner.name);
        let result = tokio::task::spawn_blocking(move || span.in_scope(|| read_folder(&inner)))
            .await
            .map_err(|e| SourceError::Join(e.to_string()))?;
        Ok(result?)
    }
}
