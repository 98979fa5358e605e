//! `drift render`: read a repository once and print the desired state exactly as the detector
//! sees it, each object with its source file and commit.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use drift_model::progress::Progress;
use drift_model::source::DesiredSource;
use drift_model::{DesiredSnapshot, Result};
use serde_json::{Value, json};

use crate::config::{FolderConfig, GitConfig, GitHubConfig, RenderConfig, RendererKind, SourceConfig};
use crate::{FolderSource, GitHubSource, GitSource};

/// What `drift render --repo URL|PATH [--ref REF] [--path SUBDIR] [--renderer ...]` asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderRequest {
    /// A local folder, a git URL, or `github:OWNER/REPO` for the GitHub API source.
    pub repo: String,
    /// Branch, tag or commit (a local folder without `--ref` is read as it is on disk).
    pub reference: Option<String>,
    /// Sub-folder.
    pub path: Option<String>,
    /// Renderer.
    pub renderer: RendererKind,
    /// Clone cache (default: the user's cache folder).
    pub cache_dir: Option<PathBuf>,
}

impl RenderRequest {
    /// A request for `repo` with defaults (`auto` renderer, default ref).
    pub fn new(repo: impl Into<String>) -> Self {
        RenderRequest { repo: repo.into(), reference: None, path: None, renderer: RendererKind::Auto, cache_dir: None }
    }

    /// The source configuration this request stands for.
    pub fn to_config(&self) -> SourceConfig {
        let render = RenderConfig { renderer: self.renderer, ..RenderConfig::default() };
        if let Some(rest) = self.repo.strip_prefix("github:") {
            let (owner, repo) = rest.split_once('/').unwrap_or((rest, ""));
            let mut c = GitHubConfig::new(owner, repo, self.reference.clone().unwrap_or_else(|| "HEAD".into()));
            c.path = self.path.clone();
            c.cache_dir = self.cache_dir.clone();
            c.render = render;
            return SourceConfig::Github(c);
        }
        let local = Path::new(&self.repo);
        let is_url = self.repo.contains("://") || (self.repo.contains('@') && self.repo.contains(':'));
        if !is_url && self.reference.is_none() {
            let mut c = FolderConfig::new(local);
            c.path = self.path.clone();
            c.render = render;
            return SourceConfig::Folder(c);
        }
        let url = if is_url {
            self.repo.clone()
        } else {
            // A local git repository at a ref: read it through git, over file://.
            let abs = std::path::absolute(local).unwrap_or_else(|_| local.to_path_buf());
            format!("file://{}", abs.display())
        };
        let mut c = GitConfig::new(url, self.reference.clone().unwrap_or_else(|| "HEAD".into()));
        c.path = self.path.clone();
        c.cache_dir = self.cache_dir.clone();
        c.render = render;
        SourceConfig::Git(c)
    }
}

/// Builds the source a configuration names (the one place that knows all three).
pub fn source_from_config(config: SourceConfig) -> Result<Arc<dyn DesiredSource>> {
    source_observed(config, Progress::default())
}

/// [`source_from_config`], counting the files parsed and the renders run into `progress`.
pub fn source_observed(config: SourceConfig, progress: Progress) -> Result<Arc<dyn DesiredSource>> {
    source_opening(config, progress, None)
}

/// [`source_observed`], opening the SOPS-encrypted plain files with `sops` when given
/// (`drift scan` and `drift serve` with an age key in the environment). `drift render` never
/// opens them: it prints what it renders.
pub fn source_opening(
    config: SourceConfig,
    progress: Progress,
    sops: Option<Arc<dyn drift_model::sops::SopsOpener>>,
) -> Result<Arc<dyn DesiredSource>> {
    source_with(config, progress, sops, None)
}

/// [`source_opening`], also reading from the cluster with `cluster` (when given) the
/// ConfigMaps and Secrets that Flux objects name and that are not in Git (`drift scan`,
/// `drift serve` and `drift diff --cluster`).
pub fn source_with(
    config: SourceConfig,
    progress: Progress,
    sops: Option<Arc<dyn drift_model::sops::SopsOpener>>,
    cluster: Option<Arc<dyn drift_model::lookup::ObjectLookup>>,
) -> Result<Arc<dyn DesiredSource>> {
    source_for_cluster(config, progress, sops, cluster, None)
}

/// [`source_with`], for one cluster of several when `targets` is given: an Argo CD Application
/// is rendered only when its destination is that cluster (docs/sources.md, "Several clusters").
pub fn source_for_cluster(
    config: SourceConfig,
    progress: Progress,
    sops: Option<Arc<dyn drift_model::sops::SopsOpener>>,
    cluster: Option<Arc<dyn drift_model::lookup::ObjectLookup>>,
    targets: Option<Arc<crate::gitops::ClusterTargets>>,
) -> Result<Arc<dyn DesiredSource>> {
    macro_rules! finish {
        ($source:expr) => {{
            let mut s = $source;
            if let Some(o) = sops {
                s = s.with_sops(o);
            }
            if let Some(c) = cluster {
                s = s.with_cluster(c);
            }
            if let Some(t) = targets {
                s = s.with_targets(t);
            }
            Arc::new(s) as Arc<dyn DesiredSource>
        }};
    }
    Ok(match config {
        SourceConfig::Folder(c) => finish!(FolderSource::observed(c, progress)?),
        SourceConfig::Git(c) => finish!(GitSource::observed(c, progress)?),
        SourceConfig::Github(c) => finish!(GitHubSource::observed(c, progress)?),
    })
}

/// Reads the repository once and returns the snapshot. Per-file and per-application errors
/// are in [`DesiredSnapshot::warnings`]; see [`has_errors`] for the exit code.
pub async fn render(request: &RenderRequest) -> Result<DesiredSnapshot> {
    render_observed(request, Progress::default()).await
}

/// [`render`], counting the files parsed and the renders run into `progress`.
pub async fn render_observed(request: &RenderRequest, progress: Progress) -> Result<DesiredSnapshot> {
    render_reading(request, progress, None).await
}

/// [`render_observed`], reading the ConfigMaps and Secrets that Flux objects name and that are
/// not in the repository from `cluster` when given (`drift diff --cluster`).
pub async fn render_reading(
    request: &RenderRequest,
    progress: Progress,
    cluster: Option<Arc<dyn drift_model::lookup::ObjectLookup>>,
) -> Result<DesiredSnapshot> {
    let mut config = request.to_config();
    // Read once: nothing is worth keeping for a next fetch.
    match &mut config {
        SourceConfig::Folder(c) => c.render.keep_between_fetches = false,
        SourceConfig::Git(c) => c.render.keep_between_fetches = false,
        SourceConfig::Github(c) => c.render.keep_between_fetches = false,
    }
    let source = source_with(config, progress, None, cluster)?;
    source.fetch().await
}

/// Whether something did not render or parse (the CLI exits with 2 then).
pub fn has_errors(snapshot: &DesiredSnapshot) -> bool {
    snapshot.warnings.iter().any(|w| w.fatal)
}

/// Output format of [`format_snapshot`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputFormat {
    /// Multi-document YAML; each object preceded by `# Source:` and `# Revision:` comments;
    /// warnings as comments at the end.
    #[default]
    Yaml,
    /// One JSON document: repository, revision, `objects` with `source`, and `warnings`.
    Json,
}

impl std::str::FromStr for OutputFormat {
    type Err = drift_model::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "yaml" => Ok(OutputFormat::Yaml),
            "json" => Ok(OutputFormat::Json),
            other => Err(drift_model::Error::config(format!("unknown output `{other}` (expected yaml or json)"))),
        }
    }
}

fn source_line(r: &drift_model::Resource) -> String {
    let path = r.provenance.path.as_deref().unwrap_or("?");
    match r.provenance.document {
        Some(d) => format!("{path} (document {d})"),
        None => path.to_owned(),
    }
}

/// Prints a snapshot for people (YAML) or programs (JSON).
pub fn format_snapshot(snapshot: &DesiredSnapshot, format: OutputFormat) -> String {
    match format {
        OutputFormat::Json => {
            let objects: Vec<Value> = snapshot
                .resources
                .iter()
                .map(|r| {
                    json!({
                        "source": {
                            "repository": r.provenance.repository,
                            "path": r.provenance.path,
                            "document": r.provenance.document,
                            "revision": r.provenance.revision,
                        },
                        "object": r.object,
                    })
                })
                .collect();
            let doc = json!({
                "repository": snapshot.repository,
                "revision": snapshot.revision,
                "objects": objects,
                "warnings": snapshot.warnings,
            });
            // Serialising a `Value` cannot fail (its keys are strings).
            serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
        }
        OutputFormat::Yaml => {
            let mut out = String::new();
            out.push_str(&format!("# Repository: {}\n", snapshot.repository));
            out.push_str(&format!("# Revision: {}\n", snapshot.revision.as_deref().unwrap_or("-")));
            for r in &snapshot.resources {
                out.push_str("---\n");
                out.push_str(&format!("# Source: {}\n", source_line(r)));
                out.push_str(&format!("# Revision: {}\n", r.provenance.revision.as_deref().unwrap_or("-")));
                match serde_saphyr::to_string(&r.object) {
                    Ok(text) => out.push_str(&text),
                    Err(e) => out.push_str(&format!("# (cannot print as YAML: {e})\n")),
                }
                if !out.ends_with('\n') {
                    out.push('\n');
                }
            }
            for w in &snapshot.warnings {
                let level = if w.fatal { "error" } else { "note" };
                out.push_str(&format!("# {level}: {w}\n"));
            }
            out
        }
    }
}
