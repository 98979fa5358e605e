//! Publishing an accepted change: a working copy of the source's repository at its base
//! revision ([`Workspace`]), and the edits made there proposed as a branch ([`Proposal`]) —
//! with a pull request on GitHub, pushed with the git command line anywhere else.
//!
//! - GitHub ([`SourceConfig::Github`]): the working copy is the archive of the ref's commit,
//!   unpacked; publishing goes through the REST API with the source's octocrab client (blobs, a
//!   tree on the base commit's tree, a commit whose parent is the base commit, the branch
//!   created or force-updated, then the open pull request of that branch updated or a new one
//!   opened).
//! - Any other git server ([`SourceConfig::Git`]): a shallow clone with the git command line;
//!   publishing commits the edits with git plumbing on a private index (the working tree is not
//!   touched) and force-pushes the branch. gix 0.90 has no push, hence the git CLI for both.
//! - A folder ([`SourceConfig::Folder`]) has no remote: opening a workspace is refused.
//!
//! Credentials come from the environment only (the source's `token_env`); they reach git
//! through the child's environment (an `http.extraHeader` set with `GIT_CONFIG_COUNT`), never
//! through arguments or URLs, and are removed from every message.

mod check_run;
mod compare;
mod git_cli;
mod github;

use std::path::{Path, PathBuf};

use drift_model::Result;

use crate::config::{Secret, SourceConfig, secret_from_env};
use crate::edit::FileEdit;
use crate::error::SourceError;

pub use check_run::{CHECK_NAME, COMMENT_MARKER, CheckConclusion, CheckReport, CheckReported};
pub use compare::compare_url;

/// Reports a check on a GitHub source's commit: a check run (or a commit status when the token
/// may not create check runs) and the detector's comment on the open pull request of the head
/// branch, updated when there is one already (module `check_run`). The token comes from the
/// source's `token_env`; other sources have nowhere to report to (an error).
pub async fn report_check(config: &SourceConfig, report: &CheckReport) -> Result<CheckReported> {
    let token = match config {
        SourceConfig::Github(c) => secret_from_env(&c.token_env),
        _ => None,
    };
    report_check_with_token(config, token, report).await
}

/// Like [`report_check`], with the token given by the caller.
pub async fn report_check_with_token(
    config: &SourceConfig,
    token: Option<Secret>,
    report: &CheckReport,
) -> Result<CheckReported> {
    config.validate()?;
    match config {
        SourceConfig::Github(c) => Ok(github::GitHubRemote::connect(c, token)?.report_check(report).await?),
        _ => Err(SourceError::Unsupported(
            "a check is reported on GitHub only (a `github:` repository); other sources print it".into(),
        )
        .into()),
    }
}

/// A change to propose: the branch it goes on and what the pull request (or commit) says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    /// The branch, deterministic per object and chosen by the caller (for example
    /// `drift/accept/<hash>`): ASCII letters, digits, `.`, `_`, `-` and `/` only. Publishing the
    /// same branch again replaces its commit and updates its open pull request.
    pub branch: String,
    /// Title of the pull request.
    pub title: String,
    /// Body of the pull request (markdown).
    pub body: String,
    /// Message of the commit.
    pub commit_message: String,
    /// The files written by the commit (whole new contents), on top of the base commit.
    pub edits: Vec<FileEdit>,
    /// Author (and committer) of the commit: name and email.
    pub author: (String, String),
}

/// What publishing did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Published {
    /// A GitHub pull request.
    PullRequest {
        /// The pull request's number.
        number: u64,
        /// Its web address.
        url: String,
        /// An open pull request of that branch existed and was updated (no new one opened).
        updated: bool,
    },
    /// A branch pushed to a git server that has no pull request API here.
    Branch {
        /// The branch name.
        branch: String,
        /// The commit the branch now names.
        commit: String,
        /// Where a person opens the comparison with the base branch (GitHub, GitLab,
        /// Gitea/Forgejo and Bitbucket addresses); `None` for `file://` and unknown hosts.
        compare_url: Option<String>,
        /// The branch existed before and was force-updated.
        updated: bool,
    },
}

/// A working copy of the source's repository at its base revision, on disk, for planning and
/// then publishing a change. The folder is removed when the workspace is dropped.
#[derive(Debug)]
pub struct Workspace {
    /// Keeps the temporary folder alive.
    _dir: tempfile::TempDir,
    root: PathBuf,
    base_commit: String,
    base_branch: String,
    remote: Remote,
}

/// How a workspace publishes.
#[derive(Debug)]
enum Remote {
    Git(git_cli::GitRemote),
    GitHub(Box<github::GitHubRemote>),
}

impl Workspace {
    /// Opens a working copy for a source configuration, reading the token from the variable the
    /// configuration names (`token_env`):
    /// - git: a shallow clone (depth 1) of the configured branch with the git command line;
    /// - GitHub: the archive of the ref's commit through the REST API, unpacked;
    /// - folder: refused, a folder has no remote to propose a change to.
    ///
    /// The ref must name a branch (or be `HEAD`, the default branch): a change is proposed
    /// against a branch, never against a bare commit id.
    pub async fn open(config: &SourceConfig) -> Result<Workspace> {
        let token = match config {
            SourceConfig::Folder(_) => None,
            SourceConfig::Git(c) => match &c.token_env {
                Some(var) => Some(secret_from_env(var).ok_or_else(|| {
                    drift_model::Error::config(format!(
                        "git source {}: environment variable {var} is not set",
                        crate::source::redact_url(&c.url)
                    ))
                })?),
                None => None,
            },
            SourceConfig::Github(c) => secret_from_env(&c.token_env),
        };
        Self::open_with_token(config, token).await
    }

    /// Like [`Workspace::open`], with the token given by the caller instead of `token_env`.
    pub async fn open_with_token(config: &SourceConfig, token: Option<Secret>) -> Result<Workspace> {
        config.validate()?;
        let dir = tempfile::Builder::new()
            .prefix("drift-publish-")
            .tempdir()
            .map_err(|e| SourceError::io("creating a temporary folder for the working copy", e))?;
        let root = dir.path().join("repo");
        let (base_commit, base_branch, remote) = match config {
            SourceConfig::Folder(c) => {
                return Err(SourceError::Unsupported(format!(
                    "folder source {}: a folder source has no remote to propose a change to; use a git or github source",
                    c.root.display()
                ))
                .into());
            }
            SourceConfig::Git(c) => {
                let (remote, base_commit, base_branch) =
                    git_cli::GitRemote::clone(c, token, dir.path().to_path_buf(), root.clone()).await?;
                (base_commit, base_branch, Remote::Git(remote))
            }
            SourceConfig::Github(c) => {
                let (remote, base_commit, base_branch) = github::GitHubRemote::open(c, token, &root).await?;
                (base_commit, base_branch, Remote::GitHub(Box::new(remote)))
            }
        };
        tracing::info!(base_commit = %base_commit, base_branch = %base_branch, "working copy opened for a change");
        Ok(Workspace { _dir: dir, root, base_commit, base_branch, remote })
    }

    /// The repository root on disk (the working copy at [`Workspace::base_commit`]).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The commit the working copy holds, on which a published change is based.
    pub fn base_commit(&self) -> &str {
        &self.base_commit
    }

    /// The branch a pull request targets (the configured ref, or the default branch for `HEAD`).
    pub fn base_branch(&self) -> &str {
        &self.base_branch
    }

    /// Publishes the edits as a commit on `proposal.branch` (created, or force-updated: the
    /// branch is the detector's own), based on [`Workspace::base_commit`]. On GitHub the open
    /// pull request of that branch is updated, or one is opened against the base branch; a
    /// second publish of the same branch never opens a second pull request.
    pub async fn publish(&self, proposal: &Proposal) -> Result<Published> {
        validate(proposal)?;
        let published = match &self.remote {
            Remote::Git(remote) => remote.publish(&self.base_commit, &self.base_branch, proposal).await?,
            Remote::GitHub(remote) => remote.publish(&self.base_commit, &self.base_branch, proposal).await?,
        };
        tracing::info!(branch = %proposal.branch, files = proposal.edits.len(), ?published, "change published");
        Ok(published)
    }
}

/// Checks the branch name and the edited paths before anything is sent.
fn validate(proposal: &Proposal) -> Result<(), SourceError> {
    let b = proposal.branch.as_str();
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/');
    if b.is_empty()
        || !b.chars().all(allowed)
        || b.starts_with(['/', '-', '.'])
        || b.ends_with(['/', '.'])
        || b.ends_with(".lock")
        || b.contains("..")
        || b.contains("//")
        || b.split('/').any(|c| c.starts_with('.'))
    {
        return Err(SourceError::Publish(format!(
            "`{b}` is not a usable branch name (letters, digits, `.`, `_`, `-` and `/`, no `..`, no component starting with `.`)"
        )));
    }
    if proposal.edits.is_empty() {
        return Err(SourceError::Publish(format!("the proposal for branch `{b}` has no file edits")));
    }
    let mut seen = std::collections::BTreeSet::new();
    for edit in &proposal.edits {
        let p = edit.path.as_str();
        let bad = p.is_empty()
            || p.starts_with('/')
            || p.contains('\\')
            || p.contains('\0')
            || p.split('/').any(|c| c.is_empty() || c == "." || c == ".." || c.eq_ignore_ascii_case(".git"));
        if bad {
            return Err(SourceError::Publish(format!(
                "`{p}` is not a repository-relative file path (no leading `/`, no `.`/`..`/`.git` components)"
            )));
        }
        if !seen.insert(p) {
            return Err(SourceError::Publish(format!("`{p}` is edited twice in one proposal")));
        }
    }
    let (name, email) = &proposal.author;
    if name.trim().is_empty() || email.trim().is_empty() || format!("{name}{email}").contains(['<', '>', '\n']) {
        return Err(SourceError::Publish(
            "the commit author needs a name and an email without `<`, `>` or newlines".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proposal(branch: &str, path: &str) -> Proposal {
        Proposal {
            branch: branch.into(),
            title: "t".into(),
            body: "b".into(),
            commit_message: "m".into(),
            edits: vec![FileEdit { path: path.into(), content: b"x".to_vec(), created: false }],
            author: ("Drift".into(), "drift@example.com".into()),
        }
    }

    #[test]
    fn branch_names_and_paths_are_checked_before_anything_is_sent() {
        assert!(validate(&proposal("drift/accept/0123abcd", "apps/a.yaml")).is_ok());
        for bad in ["", "-x", "a..b", "a b", "a/.hidden", "x.lock", "a//b", "a/", "ünï", "a:b", "a~1"] {
            assert!(validate(&proposal(bad, "a.yaml")).is_err(), "branch {bad:?}");
        }
        for bad in ["/etc/passwd", "../x", "a/../b", ".git/config", "a//b", "a\\b", "", "./a"] {
            assert!(validate(&proposal("drift/x", bad)).is_err(), "path {bad:?}");
        }
        let mut twice = proposal("drift/x", "a.yaml");
        twice.edits.push(twice.edits[0].clone());
        assert!(validate(&twice).is_err());
        let mut nobody = proposal("drift/x", "a.yaml");
        nobody.author = ("".into(), "x@y".into());
        assert!(validate(&nobody).is_err());
    }
}
