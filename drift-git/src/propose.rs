//! The detector's [`ChangeProposer`] for git and GitHub sources: a working copy of the source at
//! its ref ([`Workspace`]), the edits placed by [`plan_accept`], then a branch (and a pull request
//! on GitHub) by [`Workspace::publish`]. docs/remediation.md describes the whole flow.

use std::sync::Arc;

use async_trait::async_trait;
use drift_model::remedy::{ChangeProposer, ChangeRequest, Proposal};

use crate::accept::{AcceptRequest, plan_accept_for};
use crate::config::{RenderConfig, Secret, SourceConfig};
use crate::publish::{self, Published, Workspace};

/// Proposes accepted changes to one repository.
#[derive(Debug, Clone)]
pub struct GitProposer {
    name: String,
    config: SourceConfig,
    author: (String, String),
    /// A token given by the caller; `None`: the configuration's `token_env` is read.
    token: Option<Secret>,
    /// With several clusters, the cluster whose drifts this proposer accepts.
    targets: Option<Arc<crate::gitops::ClusterTargets>>,
}

impl GitProposer {
    /// A proposer for a source (`name` as reports name the repository); the commits' author is
    /// `author` (name, email). A folder source is refused: it has no remote.
    pub fn new(name: impl Into<String>, config: SourceConfig, author: (String, String)) -> drift_model::Result<Self> {
        if matches!(config, SourceConfig::Folder(_)) {
            return Err(drift_model::Error::config(
                "a folder source has no remote to propose a change to; use a git or github source",
            ));
        }
        config.validate()?;
        Ok(GitProposer { name: name.into(), config, author, token: None, targets: None })
    }

    /// The same proposer with the token given by the caller instead of the configuration's
    /// `token_env` (as [`Workspace::open_with_token`] takes it): for programs that hold the
    /// token already, and for tests.
    pub fn with_token(mut self, token: Secret) -> Self {
        self.token = Some(token);
        self
    }

    /// The same proposer for one of several clusters: it reads the repository as that cluster's
    /// source does ([`crate::source_for_cluster`]), so an object Argo CD Applications render for
    /// two clusters is edited in the file of the drift's cluster's Application.
    pub fn with_targets(mut self, targets: Arc<crate::gitops::ClusterTargets>) -> Self {
        self.targets = Some(targets);
        self
    }

    fn sub_and_render(&self) -> (&str, &RenderConfig) {
        match &self.config {
            SourceConfig::Git(c) => (c.path.as_deref().unwrap_or(""), &c.render),
            SourceConfig::Github(c) => (c.path.as_deref().unwrap_or(""), &c.render),
            SourceConfig::Folder(c) => (c.path.as_deref().unwrap_or(""), &c.render),
        }
    }
}

#[async_trait]
impl ChangeProposer for GitProposer {
    fn repository(&self) -> &str {
        &self.name
    }

    async fn propose(&self, request: &ChangeRequest) -> drift_model::Result<Proposal> {
        let workspace = match &self.token {
            Some(token) => Workspace::open_with_token(&self.config, Some(token.clone())).await?,
            None => Workspace::open(&self.config).await?,
        };
        let (sub, render) = self.sub_and_render();
        let accept = AcceptRequest {
            key: request.key.clone(),
            api_version: request.api_version.clone(),
            changes: request.changes.clone(),
        };
        let root = workspace.root().to_owned();
        let render = render.clone();
        let sub = sub.trim_matches('/').to_owned();
        let targets = self.targets.clone();
        let plan = tokio::task::spawn_blocking(move || plan_accept_for(&root, &sub, &render, targets, &accept))
            .await
            .map_err(|e| drift_model::Error::unavailable(format!("the accept planner stopped: {e}")))??;
        let placed: Vec<String> = plan.placed.iter().map(|p| format!("{}: {}, {}", p.path, p.file, p.how)).collect();
        let unplaced: Vec<String> = plan.unplaced.iter().map(|u| format!("{}: {}", u.path, u.hint)).collect();
        if plan.edits.is_empty() {
            return Ok(Proposal {
                url: None,
                pull_request: None,
                branch: request.branch.clone(),
                updated: false,
                placed: Vec::new(),
                unplaced,
            });
        }
        let mut body = request.body.clone();
        body.push_str("\n### Where\n\n");
        for p in &placed {
            body.push_str(&format!("- {p}\n"));
        }
        if !unplaced.is_empty() {
            body.push_str("\n### Not placed (put these by hand)\n\n");
            for u in &unplaced {
                body.push_str(&format!("- {u}\n"));
            }
        }
        // The body in the commit too: a pushed branch (a remote that is not GitHub) has no pull
        // request to hold the evidence, and the commit stays when the branch is merged.
        let commit_message = format!("{}\n\n{}\n\nProposed by the drift detector.", request.title, body.trim_end());
        let proposal = publish::Proposal {
            branch: request.branch.clone(),
            title: request.title.clone(),
            body,
            commit_message,
            edits: plan.edits,
            author: self.author.clone(),
        };
        let (url, pull_request, updated) = match workspace.publish(&proposal).await? {
            Published::PullRequest { number, url, updated } => (Some(url), Some(number), updated),
            Published::Branch { compare_url, updated, .. } => (compare_url, None, updated),
        };
        Ok(Proposal { url, pull_request, branch: request.branch.clone(), updated, placed, unplaced })
    }
}
