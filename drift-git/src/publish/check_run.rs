//! The answer of `drift check --ref` where a GitHub user reads it: a check run on the head
//! commit, and one comment on the open pull request of the head branch, updated (never
//! duplicated) when the check runs again.
//!
//! 1. `POST /repos/{o}/{r}/check-runs` (`status: completed`, the conclusion, a title and the
//!    summary in markdown). Only GitHub Apps may create check runs (the `GITHUB_TOKEN` of GitHub
//!    Actions is one, with `permissions: checks: write`); a personal access token gets 403, and
//!    then a commit status is set instead: `POST /repos/{o}/{r}/statuses/{sha}` with the
//!    context `drift check`.
//! 2. `GET /repos/{o}/{r}/pulls?head={o}:{branch}&state=open`; for the first one,
//!    `GET .../issues/{n}/comments` and `PATCH .../issues/comments/{id}` of the comment that
//!    carries the marker [`COMMENT_MARKER`], else `POST .../issues/{n}/comments`.

use http::StatusCode;
use serde_json::{Value, json};

use super::github::{GitHubRemote, Write};
use crate::error::SourceError;

/// The hidden line that marks the detector's comment on a pull request.
pub const COMMENT_MARKER: &str = "<!-- drift check -->";

/// The name of the check run and the context of the commit status.
pub const CHECK_NAME: &str = "drift check";

/// How a check ended, as GitHub says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckConclusion {
    /// The merge overwrites no live change.
    Success,
    /// The merge overwrites at least one live change.
    Failure,
    /// A side could not be read completely: the answer is not sure.
    Neutral,
}

impl CheckConclusion {
    fn check_run(self) -> &'static str {
        match self {
            CheckConclusion::Success => "success",
            CheckConclusion::Failure => "failure",
            CheckConclusion::Neutral => "neutral",
        }
    }

    /// Commit statuses have no neutral state: an unsure answer is an error.
    fn status(self) -> &'static str {
        match self {
            CheckConclusion::Success => "success",
            CheckConclusion::Failure => "failure",
            CheckConclusion::Neutral => "error",
        }
    }
}

/// What to report on a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReport {
    /// The commit checked (the head of the pull request).
    pub head_sha: String,
    /// The branch it is the head of (its open pull request gets the comment); `None`: no comment.
    pub head_branch: Option<String>,
    /// The conclusion.
    pub conclusion: CheckConclusion,
    /// One line (the check run's title, the status's description: GitHub keeps 140 characters).
    pub title: String,
    /// The whole answer, in markdown.
    pub summary: String,
}

/// What was reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReported {
    /// The check run's web address, or `None` when a commit status was set instead (the token
    /// may not create check runs).
    pub check_run: Option<String>,
    /// The pull request commented on, and whether its earlier comment was updated.
    pub comment: Option<(u64, bool)>,
}

/// The first `max` characters of `s`.
fn cut(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

impl GitHubRemote {
    /// Reports a check (see the module's documentation).
    pub(crate) async fn report_check(&self, report: &CheckReport) -> Result<CheckReported, SourceError> {
        let what = format!("check run on {}", report.head_sha);
        let run = json!({
            "name": CHECK_NAME,
            "head_sha": report.head_sha,
            "status": "completed",
            "conclusion": report.conclusion.check_run(),
            // GitHub's limits: 65,535 characters of summary.
            "output": {"title": cut(&report.title, 255), "summary": cut(&report.summary, 65_000)},
        });
        let check_run = match self.write(Write::Post, &self.path("/check-runs"), &run, &what).await {
            Ok(answer) => answer.get("html_url").and_then(Value::as_str).map(str::to_owned),
            Err(SourceError::GitHubStatus { status, .. }) if status == StatusCode::FORBIDDEN.as_u16() => {
                let what = format!("commit status on {}", report.head_sha);
                let status = json!({
                    "state": report.conclusion.status(),
                    "context": CHECK_NAME,
                    "description": cut(&report.title, 140),
                });
                self.write(Write::Post, &self.path(&format!("/statuses/{}", report.head_sha)), &status, &what).await?;
                None
            }
            Err(e) => return Err(e),
        };
        let comment = match &report.head_branch {
            Some(branch) => self.comment_on_pull(branch, &format!("{COMMENT_MARKER}\n{}", report.summary)).await?,
            None => None,
        };
        Ok(CheckReported { check_run, comment })
    }

    /// Writes `body` as the detector's comment on the open pull request of `branch`: the earlier
    /// one (with the marker) is updated. `None` when the branch has no open pull request.
    async fn comment_on_pull(&self, branch: &str, body: &str) -> Result<Option<(u64, bool)>, SourceError> {
        let what = format!("pull requests of branch {branch}");
        let open = self.pulls_of(branch, &what).await?;
        let Some(number) = open.first().and_then(|p| p.get("number")).and_then(Value::as_u64) else {
            return Ok(None);
        };
        let what = format!("comments of pull request #{number}");
        let comments = self.get_json(&self.path(&format!("/issues/{number}/comments?per_page=100")), &what).await?;
        let earlier = comments
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c.get("body").and_then(Value::as_str).is_some_and(|b| b.starts_with(COMMENT_MARKER)));
        let body = json!({"body": cut(body, 65_000)});
        match earlier.and_then(|c| c.get("id")).and_then(Value::as_u64) {
            Some(id) => {
                self.write(Write::Patch, &self.path(&format!("/issues/comments/{id}")), &body, &what).await?;
                Ok(Some((number, true)))
            }
            None => {
                self.write(Write::Post, &self.path(&format!("/issues/{number}/comments")), &body, &what).await?;
                Ok(Some((number, false)))
            }
        }
    }
}
