//! Configuration of the desired sources and renderers.
//!
//! Every struct denies unknown keys, has documented defaults and is validated without I/O by
//! [`SourceConfig::validate`]. Tokens are never part of the configuration: only the *name* of the
//! environment variable that holds one is, and the value is read into a [`Secret`].

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::SourceError;

/// Which desired source, chosen by `type:` in the configuration.
///
/// ```
/// let cfg: drift_git::SourceConfig = serde_json::from_value(serde_json::json!({
///     "type": "git", "url": "https://example.com/org/gitops.git", "ref": "main", "path": "clusters/prod"
/// })).unwrap();
/// cfg.validate().unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SourceConfig {
    /// A folder on the local disk, read as it is (no git).
    Folder(FolderConfig),
    /// A git repository cloned and fetched with gix.
    Git(GitConfig),
    /// A GitHub (or GitHub Enterprise) repository read through the REST API.
    Github(GitHubConfig),
}

impl SourceConfig {
    /// Checks the configuration without touching the disk or the network.
    pub fn validate(&self) -> Result<(), drift_model::Error> {
        match self {
            SourceConfig::Folder(c) => c.validate(),
            SourceConfig::Git(c) => c.validate(),
            SourceConfig::Github(c) => c.validate(),
        }
        .map_err(drift_model::Error::from)
    }
}

/// A local folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FolderConfig {
    /// The folder (the root of the "repository").
    pub root: PathBuf,
    /// Sub-folder to read, relative to `root` (default: the whole folder).
    #[serde(default)]
    pub path: Option<String>,
    /// Name used in reports (default: the folder path).
    #[serde(default)]
    pub name: Option<String>,
    /// How manifests are rendered.
    #[serde(default)]
    pub render: RenderConfig,
}

impl FolderConfig {
    /// A folder source of `root` with defaults.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        FolderConfig { root: root.into(), path: None, name: None, render: RenderConfig::default() }
    }

    pub(crate) fn validate(&self) -> Result<(), SourceError> {
        if self.root.as_os_str().is_empty() {
            return Err(SourceError::Config("folder source: `root` is empty".into()));
        }
        validate_sub_path("path", self.path.as_deref())?;
        self.render.validate()
    }
}

/// A git repository.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitConfig {
    /// `https://`, `http://`, `ssh://`, `git@host:path`, `git://`, `file://` or an absolute path.
    pub url: String,
    /// Branch, tag or full commit id (default `HEAD`, the remote's default branch).
    #[serde(default = "default_ref", rename = "ref")]
    pub reference: String,
    /// Sub-folder to read (default: the whole repository).
    #[serde(default)]
    pub path: Option<String>,
    /// Where clones are kept between scans (default: `$XDG_CACHE_HOME/drift/git`, else
    /// `$HOME/.cache/drift/git`, else the system temporary folder).
    #[serde(default)]
    pub cache_dir: Option<PathBuf>,
    /// Fetch only the commit asked for (depth 1) when the ref is a branch or tag (default true).
    /// A commit id is always fetched with full history, as servers rarely serve unadvertised ids.
    #[serde(default = "default_true")]
    pub shallow: bool,
    /// Name of the environment variable holding an HTTPS token (for example `GIT_TOKEN`). The
    /// token is sent as the password, with `username`.
    #[serde(default)]
    pub token_env: Option<String>,
    /// User name sent with the token (default `x-access-token`, which GitHub, Gitea and GitLab
    /// accept).
    #[serde(default = "default_username")]
    pub username: String,
    /// Name used in reports (default: the URL without credentials).
    #[serde(default)]
    pub name: Option<String>,
    /// How manifests are rendered.
    #[serde(default)]
    pub render: RenderConfig,
}

impl GitConfig {
    /// A git source of `url` at `reference` with defaults.
    pub fn new(url: impl Into<String>, reference: impl Into<String>) -> Self {
        GitConfig {
            url: url.into(),
            reference: reference.into(),
            path: None,
            cache_dir: None,
            shallow: true,
            token_env: None,
            username: default_username(),
            name: None,
            render: RenderConfig::default(),
        }
    }

    pub(crate) fn validate(&self) -> Result<(), SourceError> {
        let url = self.url.trim();
        if url.is_empty() {
            return Err(SourceError::Config("git source: `url` is empty".into()));
        }
        let known = ["https://", "http://", "ssh://", "git://", "file://"];
        let scp_like = !url.contains("://") && url.contains('@') && url.contains(':');
        if !known.iter().any(|p| url.starts_with(p)) && !scp_like && !url.starts_with('/') {
            return Err(SourceError::Config(format!(
                "git source: unsupported url `{}` (use https://, http://, ssh://, git@host:path, git://, file:// or an absolute path)",
                crate::source::redact_url(url)
            )));
        }
        if self.reference.trim().is_empty() {
            return Err(SourceError::Config("git source: `ref` is empty".into()));
        }
        if let Some(name) = &self.token_env {
            validate_env_name(name)?;
        }
        validate_sub_path("path", self.path.as_deref())?;
        self.render.validate()
    }
}

/// A GitHub repository read through the REST API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitHubConfig {
    /// Owner (user or organisation).
    pub owner: String,
    /// Repository name.
    pub repo: String,
    /// Branch, tag or commit id (default `HEAD`, the default branch).
    #[serde(default = "default_ref", rename = "ref")]
    pub reference: String,
    /// Sub-folder to read (default: the whole repository).
    #[serde(default)]
    pub path: Option<String>,
    /// API base URL (default `https://api.github.com`; GitHub Enterprise:
    /// `https://HOST/api/v3`).
    #[serde(default = "default_api_url")]
    pub api_url: String,
    /// Name of the environment variable holding the token (default `GITHUB_TOKEN`). Without a
    /// token the API allows 60 requests an hour.
    #[serde(default = "default_github_token_env")]
    pub token_env: String,
    /// Where downloaded trees are kept (default as for git sources, under `github/`).
    #[serde(default)]
    pub cache_dir: Option<PathBuf>,
    /// Longest wait for a rate-limit reset before the fetch reports the limit instead (default
    /// `60s`).
    #[serde(default = "default_rate_limit_wait", with = "humantime_serde")]
    pub rate_limit_max_wait: Duration,
    /// Timeout of one HTTP request (default `60s`).
    #[serde(default = "default_http_timeout", with = "humantime_serde")]
    pub timeout: Duration,
    /// Name used in reports (default: the repository's web URL).
    #[serde(default)]
    pub name: Option<String>,
    /// How manifests are rendered.
    #[serde(default)]
    pub render: RenderConfig,
}

impl GitHubConfig {
    /// A GitHub source of `owner/repo` at `reference` with defaults.
    pub fn new(owner: impl Into<String>, repo: impl Into<String>, reference: impl Into<String>) -> Self {
        GitHubConfig {
            owner: owner.into(),
            repo: repo.into(),
            reference: reference.into(),
            path: None,
            api_url: default_api_url(),
            token_env: default_github_token_env(),
            cache_dir: None,
            rate_limit_max_wait: default_rate_limit_wait(),
            timeout: default_http_timeout(),
            name: None,
            render: RenderConfig::default(),
        }
    }

    pub(crate) fn validate(&self) -> Result<(), SourceError> {
        let ok = |s: &str| {
            !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) && s != ".."
        };
        if !ok(&self.owner) || !ok(&self.repo) {
            return Err(SourceError::Config(format!(
                "github source: invalid owner/repo `{}/{}`",
                self.owner, self.repo
            )));
        }
        if self.reference.trim().is_empty() || self.reference.contains("..") {
            return Err(SourceError::Config("github source: invalid `ref`".into()));
        }
        if !(self.api_url.starts_with("https://") || self.api_url.starts_with("http://"))
            || self.api_url.parse::<http::Uri>().is_err()
        {
            return Err(SourceError::Config(format!("github source: invalid `api_url` `{}`", self.api_url)));
        }
        validate_env_name(&self.token_env)?;
        validate_sub_path("path", self.path.as_deref())?;
        self.render.validate()
    }
}

/// Which renderer turns a folder into objects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RendererKind {
    /// Detect per folder: a kustomization file means Kustomize, a `Chart.yaml` at the top means
    /// Helm, anything else is read as plain manifests (recursively); Argo CD and Flux objects
    /// found on the way are followed.
    #[default]
    Auto,
    /// Plain YAML/JSON manifests, recursively; kustomization and chart files are skipped.
    Plain,
    /// `kustomize build` (or `kubectl kustomize`) of the folder.
    Kustomize,
    /// `helm template` of the folder (a chart).
    Helm,
}

impl std::str::FromStr for RendererKind {
    type Err = drift_model::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(RendererKind::Auto),
            "plain" => Ok(RendererKind::Plain),
            "kustomize" => Ok(RendererKind::Kustomize),
            "helm" => Ok(RendererKind::Helm),
            other => Err(drift_model::Error::config(format!(
                "unknown renderer `{other}` (expected auto, plain, kustomize or helm)"
            ))),
        }
    }
}

/// Rendering options shared by every source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RenderConfig {
    /// The renderer (default `auto`).
    #[serde(default)]
    pub renderer: RendererKind,
    /// Follow Argo CD `Application` and Flux `Kustomization`/`HelmRelease` objects found in the
    /// repository (default true).
    #[serde(default = "default_true")]
    pub follow_gitops_objects: bool,
    /// Kustomize program: `kustomize` or `kubectl` (default: `kustomize` when on `PATH`, else
    /// `kubectl`). A path may be given.
    #[serde(default)]
    pub kustomize_binary: Option<String>,
    /// Helm options for charts rendered with `helm template`.
    #[serde(default)]
    pub helm: HelmConfig,
    /// Largest file read, in bytes (default 8 MiB); larger files are skipped with a warning.
    #[serde(default = "default_max_file_bytes")]
    pub max_file_bytes: u64,
    /// Longest run of one `kustomize`/`helm` invocation (default `2m`).
    #[serde(default = "default_render_timeout", with = "humantime_serde")]
    pub render_timeout: Duration,
    /// Keep the parsed files, the renders and the last snapshot in memory between fetches
    /// (default true), so that the next fetch of an unchanged commit costs one ref listing and
    /// a new commit re-parses only the files it changed. One-shot callers (`drift scan`,
    /// `drift render`) turn it off: a fetch then hands over its only copy of the objects.
    #[serde(default = "default_true")]
    pub keep_between_fetches: bool,
    /// Where charts fetched from Helm repositories are kept, by digest (default
    /// `$XDG_CACHE_HOME/drift/charts`).
    #[serde(default)]
    pub chart_cache: Option<std::path::PathBuf>,
    /// A Docker `config.json` whose `auths` give the credentials of OCI registries (default: the
    /// file `DRIFT_REGISTRY_AUTH_FILE` names, if any). Its contents are never printed.
    #[serde(default)]
    pub registry_auth_file: Option<std::path::PathBuf>,
}

impl Default for RenderConfig {
    fn default() -> Self {
        RenderConfig {
            renderer: RendererKind::Auto,
            follow_gitops_objects: true,
            kustomize_binary: None,
            helm: HelmConfig::default(),
            max_file_bytes: default_max_file_bytes(),
            render_timeout: default_render_timeout(),
            keep_between_fetches: true,
            chart_cache: None,
            registry_auth_file: None,
        }
    }
}

impl RenderConfig {
    pub(crate) fn validate(&self) -> Result<(), SourceError> {
        if self.max_file_bytes == 0 {
            return Err(SourceError::Config("render: `max_file_bytes` must be positive".into()));
        }
        if self.render_timeout.is_zero() {
            return Err(SourceError::Config("render: `render_timeout` must be positive".into()));
        }
        for f in &self.helm.values_files {
            validate_sub_path("helm.values_files", Some(f))?;
        }
        if let Some(ns) = &self.helm.namespace
            && (ns.is_empty()
                || ns.len() > 63
                || !ns.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
        {
            return Err(SourceError::Config(format!("render: invalid helm namespace `{ns}`")));
        }
        Ok(())
    }
}

/// Options of `helm template`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HelmConfig {
    /// Release name (default: the chart folder's name).
    #[serde(default)]
    pub release_name: Option<String>,
    /// Namespace passed with `--namespace` (default: none, helm's `default`).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Values files, relative to the repository root, applied in order.
    #[serde(default)]
    pub values_files: Vec<String>,
    /// Helm program (default `helm`).
    #[serde(default)]
    pub binary: Option<String>,
}

pub use drift_model::secret::Secret;

/// The secret in the environment variable `name`, trimmed; `None` when unset or empty.
pub fn secret_from_env(name: &str) -> Option<Secret> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty()).map(|v| Secret::new(v.trim()))
}

fn validate_env_name(name: &str) -> Result<(), SourceError> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(SourceError::Config(format!("invalid environment variable name `{name}`")));
    }
    Ok(())
}

/// A repository-relative path: no absolute paths, no `..`.
fn validate_sub_path(field: &str, path: Option<&str>) -> Result<(), SourceError> {
    if let Some(p) = path
        && (p.starts_with('/') || p.split('/').any(|c| c == "..") || p.contains('\\'))
    {
        return Err(SourceError::Config(format!(
            "`{field}` must be relative to the repository root without `..`: `{p}`"
        )));
    }
    Ok(())
}

/// The default cache folder (no I/O: only environment variables are read).
pub(crate) fn default_cache_dir(kind: &str) -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").filter(|v| !v.is_empty()).map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("drift").join(kind)
}

fn default_ref() -> String {
    "HEAD".into()
}
fn default_true() -> bool {
    true
}
fn default_username() -> String {
    "x-access-token".into()
}
fn default_api_url() -> String {
    "https://api.github.com".into()
}
fn default_github_token_env() -> String {
    "GITHUB_TOKEN".into()
}
fn default_rate_limit_wait() -> Duration {
    Duration::from_secs(60)
}
fn default_http_timeout() -> Duration {
    Duration::from_secs(60)
}
fn default_max_file_bytes() -> u64 {
    8 << 20
}
fn default_render_timeout() -> Duration {
    Duration::from_secs(120)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_configuration_parses_and_validates() {
        let text = include_str!("../examples/sources.yaml");
        let configs: Vec<SourceConfig> = serde_saphyr::from_str(text).unwrap();
        assert_eq!(configs.len(), 3);
        for c in &configs {
            c.validate().unwrap();
        }
        match &configs[1] {
            SourceConfig::Git(g) => {
                assert_eq!(g.reference, "main");
                assert!(g.shallow);
                assert_eq!(g.render.renderer, RendererKind::Kustomize);
            }
            other => panic!("expected git, got {other:?}"),
        }
        match &configs[2] {
            SourceConfig::Github(g) => assert_eq!(g.rate_limit_max_wait, Duration::from_secs(30)),
            other => panic!("expected github, got {other:?}"),
        }
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let text = "type: git\nurl: https://h/r.git\nbranch: main\n";
        assert!(serde_saphyr::from_str::<SourceConfig>(text).is_err());
        let text = "type: folder\nroot: /x\nrender: {renderer: plain, colour: red}\n";
        assert!(serde_saphyr::from_str::<SourceConfig>(text).is_err());
    }

    #[test]
    fn invalid_values_are_rejected_without_io() {
        let mut g = GitConfig::new("ftp://h/r", "main");
        assert!(g.validate().is_err());
        g.url = "https://h/r.git".into();
        g.path = Some("../etc".into());
        assert!(g.validate().is_err());
        g.path = Some("clusters/prod".into());
        g.token_env = Some("BAD NAME".into());
        assert!(g.validate().is_err());
        g.token_env = Some("GIT_TOKEN".into());
        g.validate().unwrap();
        let h = GitHubConfig::new("org", "repo/../x", "main");
        assert!(h.validate().is_err());
        assert!("yaml".parse::<RendererKind>().is_err());
        assert_eq!("helm".parse::<RendererKind>().unwrap(), RendererKind::Helm);
    }

    #[test]
    fn secrets_never_show_in_debug() {
        let s = Secret::new("ghp_very_secret");
        assert_eq!(format!("{s:?}"), "Secret(***)");
        assert_eq!(format!("{s}"), "***");
        assert_eq!(s.expose(), "ghp_very_secret");
    }
}
