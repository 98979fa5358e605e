//! Publishing to GitHub through the REST API, with the GitHub source's octocrab client (same
//! token, same base URL, Enterprise included):
//!
//! 1. `POST /repos/{o}/{r}/git/blobs`, one per edited file (base64 content);
//! 2. `GET /repos/{o}/{r}/git/commits/{base}`, then `POST .../git/trees` with `base_tree`;
//! 3. `POST .../git/commits` with the base commit as the only parent;
//! 4. `GET .../git/ref/heads/{branch}`: `PATCH .../git/refs/heads/{branch}` (`force`) when the
//!    branch exists, else `POST .../git/refs`;
//! 5. `GET .../pulls?head={owner}:{branch}&state=open`: `PATCH .../pulls/{n}` (title and body)
//!    when one is open, else `POST .../pulls` against the base branch.

use std::collections::BTreeSet;
use std::path::Path;

use base64::Engine;
use http::StatusCode;
use http_body_util::BodyExt;
use serde_json::{Value, json};

use super::{Proposal, Published};
use crate::config::{GitHubConfig, Secret};
use crate::error::SourceError;
use crate::github::{GitHubSource, status_error, unpack};

/// A GitHub repository to publish to.
#[derive(Debug)]
pub(crate) struct GitHubRemote {
    source: GitHubSource,
    owner: String,
    repo: String,
    /// Files that are executable at the base commit (they stay executable when edited).
    executables: BTreeSet<String>,
}

/// The executable files of a GitHub archive (one top folder `owner-repo-sha/`), by path.
fn executables(archive: &[u8]) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(archive));
    let Ok(entries) = tar.entries() else { return found };
    for entry in entries.flatten() {
        let header = entry.header();
        let executable = header.entry_type().is_file() && header.mode().is_ok_and(|m| m & 0o111 != 0);
        if executable
            && let Ok(path) = entry.path()
            && let Some((_, rest)) = path.to_string_lossy().split_once('/')
        {
            found.insert(rest.to_owned());
        }
    }
    found
}

/// The HTTP verbs used for writes.
#[derive(Debug, Clone, Copy)]
pub(super) enum Write {
    Post,
    Patch,
}

impl GitHubRemote {
    /// Downloads and unpacks the archive of the ref's commit into `root`; returns the remote,
    /// the base commit and the base branch.
    pub(crate) async fn open(
        cfg: &GitHubConfig,
        token: Option<Secret>,
        root: &Path,
    ) -> Result<(GitHubRemote, String, String), SourceError> {
        if crate::git::is_commit_id(&cfg.reference) {
            return Err(SourceError::Publish(format!(
                "github source {}/{}: `ref` is the commit {}; a change is proposed on a branch, so `ref` must name one",
                cfg.owner, cfg.repo, cfg.reference
            )));
        }
        let source = GitHubSource::with_token(cfg.clone(), token).map_err(|e| SourceError::Config(e.to_string()))?;
        let mut remote =
            GitHubRemote { source, owner: cfg.owner.clone(), repo: cfg.repo.clone(), executables: BTreeSet::new() };
        let base_branch = if cfg.reference == "HEAD" {
            let what = format!("repository {}/{}", cfg.owner, cfg.repo);
            let info = remote.get_json(&remote.path(""), &what).await?;
            info.get("default_branch").and_then(Value::as_str).map(str::to_owned).ok_or_else(|| {
                SourceError::GitHubStatus { status: 200, what, message: "the answer names no default_branch".into() }
            })?
        } else {
            cfg.reference.strip_prefix("refs/heads/").unwrap_or(&cfg.reference).to_owned()
        };
        let (sha, archive) = remote.source.archive_of_ref().await?;
        remote.executables = executables(&archive);
        let repository = remote.source.web_url();
        let target = root.to_path_buf();
        let revision = sha.clone();
        let executable = remote.executables.clone();
        tokio::task::spawn_blocking(move || -> Result<(), SourceError> {
            let (files, mut contents, _notes) = unpack(&archive, &repository, &revision)?;
            for path in files.keys() {
                let file = target.join(path);
                if let Some(parent) = file.parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(|e| SourceError::io(format!("creating {}", parent.display()), e))?;
                }
                let data = contents.remove(path).unwrap_or_default();
                std::fs::write(&file, data).map_err(|e| SourceError::io(format!("writing {}", file.display()), e))?;
                #[cfg(unix)]
                if executable.contains(path) {
                    use std::os::unix::fs::PermissionsExt;
                    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755))
                        .map_err(|e| SourceError::io(format!("making {} executable", file.display()), e))?;
                }
            }
            std::fs::create_dir_all(&target).map_err(|e| SourceError::io(format!("creating {}", target.display()), e))
        })
        .await
        .map_err(|e| SourceError::Join(e.to_string()))??;
        Ok((remote, sha, base_branch))
    }

    /// A remote without a working copy (to report on a commit).
    pub(crate) fn connect(cfg: &GitHubConfig, token: Option<Secret>) -> Result<GitHubRemote, SourceError> {
        let source = GitHubSource::with_token(cfg.clone(), token).map_err(|e| SourceError::Config(e.to_string()))?;
        Ok(GitHubRemote { source, owner: cfg.owner.clone(), repo: cfg.repo.clone(), executables: BTreeSet::new() })
    }

    /// `/repos/{owner}/{repo}{rest}`.
    pub(super) fn path(&self, rest: &str) -> String {
        format!("/repos/{}/{}{rest}", self.owner, self.repo)
    }

    /// A GET answered 200 with JSON.
    pub(super) async fn get_json(&self, path: &str, what: &str) -> Result<Value, SourceError> {
        match self.get_optional(path, what).await? {
            Some(v) => Ok(v),
            None => Err(status_error(StatusCode::NOT_FOUND, b"", what)),
        }
    }

    /// A GET whose 404 means "there is none".
    async fn get_optional(&self, path: &str, what: &str) -> Result<Option<Value>, SourceError> {
        let (status, body) = self.source.api_get(path, what).await?;
        if status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(status_error(status, &body, what));
        }
        serde_json::from_slice(&body).map(Some).map_err(|e| SourceError::GitHubStatus {
            status: status.as_u16(),
            what: what.to_owned(),
            message: format!("the answer is not JSON: {e}"),
        })
    }

    /// A POST or PATCH with a JSON body; the answer must be a success with a JSON body.
    pub(super) async fn write(&self, verb: Write, path: &str, body: &Value, what: &str) -> Result<Value, SourceError> {
        let client = self.source.client();
        let sent = match verb {
            Write::Post => client._post(path, Some(body)).await,
            Write::Patch => client._patch(path, Some(body)).await,
        };
        let response =
            sent.map_err(|e| SourceError::GitHubTransport { what: what.to_owned(), message: e.to_string() })?;
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| SourceError::GitHubTransport { what: what.to_owned(), message: e.to_string() })?
            .to_bytes();
        if !status.is_success() {
            return Err(status_error(status, &bytes, what));
        }
        serde_json::from_slice(&bytes).map_err(|e| SourceError::GitHubStatus {
            status: status.as_u16(),
            what: what.to_owned(),
            message: format!("the answer is not JSON: {e}"),
        })
    }

    /// The open pull requests whose head is `branch` (of this repository).
    pub(super) async fn pulls_of(&self, branch: &str, what: &str) -> Result<Vec<Value>, SourceError> {
        let open = self
            .get_json(&self.path(&format!("/pulls?head={}:{branch}&state=open&per_page=100", self.owner)), what)
            .await?;
        Ok(open.as_array().cloned().unwrap_or_default())
    }

    /// Publishes the proposal as a commit on its branch and a pull request of that branch.
    pub(crate) async fn publish(
        &self,
        base: &str,
        base_branch: &str,
        proposal: &Proposal,
    ) -> Result<Published, SourceError> {
        let sha_of = |v: &Value, what: &str| -> Result<String, SourceError> {
            v.get("sha").and_then(Value::as_str).map(str::to_owned).ok_or_else(|| SourceError::GitHubStatus {
                status: 200,
                what: what.to_owned(),
                message: "the answer has no sha".into(),
            })
        };
        let base_commit = self.get_json(&self.path(&format!("/git/commits/{base}")), &format!("commit {base}")).await?;
        let base_tree = base_commit.get("tree").map(|t| sha_of(t, "base tree")).transpose()?.ok_or_else(|| {
            SourceError::GitHubStatus {
                status: 200,
                what: format!("commit {base}"),
                message: "the answer names no tree".into(),
            }
        })?;

        let mut entries = Vec::with_capacity(proposal.edits.len());
        for edit in &proposal.edits {
            let what = format!("blob of {}", edit.path);
            let content = base64::engine::general_purpose::STANDARD.encode(&edit.content);
            let blob = self
                .write(Write::Post, &self.path("/git/blobs"), &json!({"content": content, "encoding": "base64"}), &what)
                .await?;
            let mode = if self.executables.contains(&edit.path) { "100755" } else { "100644" };
            entries.push(json!({"path": edit.path, "mode": mode, "type": "blob", "sha": sha_of(&blob, &what)?}));
        }
        let what = format!("tree of branch {}", proposal.branch);
        let tree = self
            .write(Write::Post, &self.path("/git/trees"), &json!({"base_tree": base_tree, "tree": entries}), &what)
            .await?;
        let tree = sha_of(&tree, &what)?;
        if tree == base_tree {
            return Err(SourceError::Publish(format!(
                "the edits of branch `{}` leave every file as it is at {base}: there is nothing to propose",
                proposal.branch
            )));
        }

        let (name, email) = &proposal.author;
        let what = format!("commit of branch {}", proposal.branch);
        let commit = self
            .write(
                Write::Post,
                &self.path("/git/commits"),
                &json!({
                    "message": proposal.commit_message,
                    "tree": tree,
                    "parents": [base],
                    "author": {"name": name, "email": email},
                }),
                &what,
            )
            .await?;
        let commit = sha_of(&commit, &what)?;

        let branch = &proposal.branch;
        let what = format!("branch {branch}");
        let existing = self.get_optional(&self.path(&format!("/git/ref/heads/{branch}")), &what).await?;
        if existing.is_some() {
            self.write(
                Write::Patch,
                &self.path(&format!("/git/refs/heads/{branch}")),
                &json!({"sha": commit, "force": true}),
                &what,
            )
            .await?;
        } else {
            self.write(
                Write::Post,
                &self.path("/git/refs"),
                &json!({"ref": format!("refs/heads/{branch}"), "sha": commit}),
                &what,
            )
            .await?;
        }

        let what = format!("pull requests of branch {branch}");
        let first = self.pulls_of(branch, &what).await?.into_iter().next();
        let (pull, updated) = match first {
            Some(pr) => {
                let number = pr.get("number").and_then(Value::as_u64).ok_or_else(|| SourceError::GitHubStatus {
                    status: 200,
                    what: what.clone(),
                    message: "a pull request without a number".into(),
                })?;
                let what = format!("pull request #{number}");
                let pr = self
                    .write(
                        Write::Patch,
                        &self.path(&format!("/pulls/{number}")),
                        &json!({"title": proposal.title, "body": proposal.body}),
                        &what,
                    )
                    .await?;
                (pr, true)
            }
            None => {
                let what = format!("new pull request of branch {branch}");
                let pr = self
                    .write(
                        Write::Post,
                        &self.path("/pulls"),
                        &json!({"title": proposal.title, "body": proposal.body, "head": branch, "base": base_branch}),
                        &what,
                    )
                    .await?;
                (pr, false)
            }
        };
        let number = pull.get("number").and_then(Value::as_u64);
        let url = pull.get("html_url").and_then(Value::as_str);
        match (number, url) {
            (Some(number), Some(url)) => Ok(Published::PullRequest { number, url: url.to_owned(), updated }),
            _ => Err(SourceError::GitHubStatus {
                status: 200,
                what: what.clone(),
                message: "the pull request answer has no number or html_url".into(),
            }),
        }
    }
}
