//! # drift-git
//!
//! The desired state of the drift detector, read from Git the way Argo CD or Flux would render
//! it: three [`DesiredSource`](drift_model::source::DesiredSource)s and the renderers they share.
//!
//! - [`FolderSource`]: a local folder, no git (revision = a content hash of the files);
//! - [`GitSource`]: any git server through gix (clone once into a cache, then fetch; branch,
//!   tag or commit; shallow; https with a token from the environment, ssh, `file://`);
//! - [`GitHubSource`]: GitHub or GitHub Enterprise through octocrab (ref -> commit with a
//!   conditional request, then one tarball per new commit; rate limits honoured).
//!
//! Rendering ([`RendererKind`]): plain manifests (multi-document YAML/JSON, `List`), Kustomize
//! (`kustomize build` or `kubectl kustomize`), Helm (`helm template`), or `auto` detection.
//! Argo CD `Application` and Flux `Kustomization`/`HelmRelease` objects found in the
//! repository are followed. Broken files and failed renders are warnings with path and line;
//! the rest is still read. Every object carries its provenance (repository, path, document,
//! revision). An unchanged commit is neither read nor rendered again, and in a new commit only
//! the files and applications whose inputs changed are ([`SourceStats`]).
//!
//! Accepting a live change into Git ([`plan_accept`]): the file edits that make the source say
//! what the cluster has, placed where the value comes from (the plain file, the Kustomize
//! overlay's patch or a new one, the Helm values key traced with marked renders), written
//! byte for byte around the changed values.
//!
//! The TLS crypto provider is the program's choice: a binary that reads git over HTTP(S)
//! installs rustls' process-level provider before building a [`GitSource`] (the detector's
//! `drift` binary installs ring); the library never installs one. [`GitHubSource`] falls back to
//! ring when none is installed.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), drift_model::Error> {
//! use drift_model::source::DesiredSource;
//! use drift_git::{FolderConfig, FolderSource, OutputFormat, format_snapshot};
//!
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(
//!     dir.path().join("cm.yaml"),
//!     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: shop}\ndata: {a: '1'}\n",
//! ).unwrap();
//! let source = FolderSource::new(FolderConfig::new(dir.path()))?;
//! let snapshot = source.fetch().await?;
//! assert_eq!(snapshot.resources.len(), 1);
//! assert_eq!(snapshot.resources[0].provenance.path.as_deref(), Some("cm.yaml"));
//! assert!(snapshot.revision.as_deref().unwrap().starts_with("sha256:"));
//! assert!(format_snapshot(&snapshot, OutputFormat::Yaml).contains("# Source: cm.yaml (document 0)"));
//! # Ok(()) }
//! ```
#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod accept;
mod appset;
mod charts;
mod cluster;
mod config;
mod edit;
mod error;
mod flux;
mod folder;
mod git;
mod github;
mod gitops;
mod ignore_rules;
mod oci;
mod output;
mod pipeline;
mod propose;
pub mod publish;
mod render;
mod source;
mod tree;

pub use accept::{AcceptPlan, AcceptRequest, FieldChange, Placed, Unplaced, plan_accept, plan_accept_for};
pub use config::{FolderConfig, GitConfig, GitHubConfig, HelmConfig, RenderConfig, RendererKind, Secret, SourceConfig};
pub use edit::FileEdit;
pub use folder::FolderSource;
pub use git::GitSource;
pub use github::GitHubSource;
pub use gitops::{ClusterTargets, TargetCluster, is_gitops_key, is_gitops_object, normalize_server};
pub use output::{
    OutputFormat, RenderRequest, format_snapshot, has_errors, render, render_observed, render_reading,
    source_for_cluster, source_from_config, source_observed, source_opening, source_with,
};
pub use pipeline::SourceStats;
pub use propose::GitProposer;
pub use publish::{Proposal, Published, Workspace};

/// The examples of the crate's README.md, compiled and run as doctests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
