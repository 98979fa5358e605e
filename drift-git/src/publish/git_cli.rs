//! Publishing to any git server with the git command line: a shallow clone for the working
//! copy, a commit made with plumbing on a private index, and a forced push of the branch.
//!
//! gix 0.90 can clone and fetch but has no push (its remote connections only fetch), so the
//! git CLI does both ends here, with one credential mechanism. Every git process runs without
//! the system and global configuration (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`)
//! and without prompts; a token reaches it as an `Authorization: Basic` `http.extraHeader`
//! through `GIT_CONFIG_COUNT` in the child's environment, never in arguments or URLs, and is
//! replaced by `***` in every message taken from git's output.
//!
//! The git processes belong to the action that runs them: dropping the future (an action
//! given up at its timeout, or stopped after the shutdown grace) kills the running one, and
//! where util-linux's `setpriv` is there (it is on Debian, and in the image) each runs under
//! `--pdeathsig KILL`, so that it dies with a process killed outright.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use base64::Engine;

use super::{Proposal, Published, compare_url};
use crate::config::{GitConfig, Secret};
use crate::error::SourceError;
use crate::source::redact_url;

/// The remote of a git workspace and how to reach it.
#[derive(Debug, Clone)]
pub(crate) struct GitRemote {
    /// The URL without credentials (what git is given and what messages name).
    url: String,
    /// The working tree (repository root).
    root: PathBuf,
    /// A folder outside the working tree for the private index.
    scratch: PathBuf,
    /// The `Authorization` header value, when credentials are configured.
    header: Option<Secret>,
    /// Strings that must never appear in a message (the password, the encoded header).
    secrets: Vec<Secret>,
}

/// Whether git runs under `setpriv --pdeathsig KILL` (util-linux, Linux only): the kernel
/// then kills it when the thread that started it ends, which is when this process is killed
/// outright (a runtime's worker threads live as long as it). Checked once.
fn dies_with_us() -> bool {
    static WORKS: OnceLock<bool> = OnceLock::new();
    *WORKS.get_or_init(|| {
        std::process::Command::new("setpriv")
            .args(["--pdeathsig", "KILL", "--", "true"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// Whether `url` is `http://` to a loopback address, where a token does not leave the machine.
fn http_to_loopback(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("http://") else { return false };
    let authority = rest.split('/').next().unwrap_or("");
    let host_port = authority.rsplit('@').next().unwrap_or("");
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        host_port.split(':').next().unwrap_or("")
    };
    host == "localhost" || host == "::1" || host.parse::<std::net::Ipv4Addr>().is_ok_and(|a| a.is_loopback())
}

/// User and password written into a URL (`https://user:pass@host/...`), if any.
fn url_credentials(url: &str) -> Option<(String, String)> {
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split('/').next()?;
    let (userinfo, _) = authority.rsplit_once('@')?;
    let (user, pass) = userinfo.split_once(':')?;
    Some((user.to_owned(), pass.to_owned()))
}

impl GitRemote {
    /// Clones the configured branch (depth 1) into `root`; returns the remote, the base commit
    /// and the base branch.
    pub(crate) async fn clone(
        cfg: &GitConfig,
        token: Option<Secret>,
        scratch: PathBuf,
        root: PathBuf,
    ) -> Result<(GitRemote, String, String), SourceError> {
        if crate::git::is_commit_id(&cfg.reference) {
            return Err(SourceError::Publish(format!(
                "git source {}: `ref` is the commit {}; a change is proposed on a branch, so `ref` must name one",
                redact_url(&cfg.url),
                cfg.reference
            )));
        }
        let url = redact_url(&cfg.url);
        let credentials = match (token, url_credentials(&cfg.url)) {
            (Some(t), _) => Some((cfg.username.clone(), t)),
            (None, Some((user, pass))) => Some((user, Secret::new(pass))),
            (None, None) => None,
        };
        let mut secrets = Vec::new();
        let header = match credentials {
            Some((user, password)) => {
                let plain_http = url.starts_with("http://");
                if plain_http && !http_to_loopback(&url) {
                    return Err(SourceError::Publish(format!(
                        "git source {url}: refusing to send credentials over clear text http; use https"
                    )));
                }
                if !(url.starts_with("https://") || plain_http) {
                    tracing::warn!(repository = %url, "a token is only sent over http(s); ignored for this URL");
                    None
                } else {
                    let encoded =
                        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{}", password.expose()));
                    secrets.push(password);
                    secrets.push(Secret::new(encoded.clone()));
                    Some(Secret::new(format!("Authorization: Basic {encoded}")))
                }
            }
            None => None,
        };
        let remote = GitRemote { url, root, scratch, header, secrets };
        let reference = cfg.reference.clone();
        let (base, branch) = remote.clone_branch(&reference).await?;
        Ok((remote, base, branch))
    }

    async fn clone_branch(&self, reference: &str) -> Result<(String, String), SourceError> {
        let root = self.root.to_string_lossy().into_owned();
        let mut args = vec!["clone", "--quiet", "--no-tags", "--single-branch", "--depth", "1"];
        if reference != "HEAD" {
            args.extend(["--branch", reference]);
        }
        args.extend(["--", self.url.as_str(), root.as_str()]);
        self.run(&self.scratch, &args, None, &[], "clone").await?;
        let base = self.run(&self.root, &["rev-parse", "HEAD"], None, &[], "rev-parse").await?;
        let branch = if reference == "HEAD" {
            self.run(&self.root, &["symbolic-ref", "--short", "HEAD"], None, &[], "symbolic-ref").await?
        } else {
            reference.strip_prefix("refs/heads/").unwrap_or(reference).to_owned()
        };
        Ok((base, branch))
    }

    /// Commits the edits on top of `base` and force-pushes the branch.
    pub(crate) async fn publish(
        &self,
        base: &str,
        base_branch: &str,
        proposal: &Proposal,
    ) -> Result<Published, SourceError> {
        let (commit, updated) = self.commit_and_push(base, proposal).await?;
        Ok(Published::Branch {
            branch: proposal.branch.clone(),
            commit,
            compare_url: compare_url(&self.url, base_branch, &proposal.branch),
            updated,
        })
    }

    /// Returns the new commit and whether the branch existed before.
    async fn commit_and_push(&self, base: &str, proposal: &Proposal) -> Result<(String, bool), SourceError> {
        self.run(&self.root, &["check-ref-format", "--branch", &proposal.branch], None, &[], "check-ref-format")
            .await
            .map_err(|_| SourceError::Publish(format!("`{}` is not a valid git branch name", proposal.branch)))?;
        // A private index, so that the working tree (which the planner may have read or
        // written) stays as it is and only the edits enter the commit.
        // One folder per publish, so that two publishes of one workspace never share an index.
        let index_dir = tempfile::Builder::new()
            .prefix("index-")
            .tempdir_in(&self.scratch)
            .map_err(|e| SourceError::io(format!("creating a folder in {}", self.scratch.display()), e))?;
        let index_str = index_dir.path().join("index").to_string_lossy().into_owned();
        let env = [("GIT_INDEX_FILE", index_str.as_str())];
        self.run(&self.root, &["read-tree", base], None, &env, "read-tree").await?;
        for edit in &proposal.edits {
            let blob = self
                .run(&self.root, &["hash-object", "-w", "--stdin"], Some(&edit.content), &env, "hash-object")
                .await?;
            // An existing file keeps its mode (an executable stays executable).
            let listed = self.run(&self.root, &["ls-tree", base, "--", &edit.path], None, &[], "ls-tree").await?;
            let mode = match listed.split_whitespace().collect::<Vec<_>>().as_slice() {
                [mode, "blob", ..] if *mode == "100755" => "100755",
                [_, kind, ..] if *kind != "blob" => {
                    return Err(SourceError::Publish(format!(
                        "`{}` is a {kind} at {base}, not a file; it cannot be replaced by file content",
                        edit.path
                    )));
                }
                _ => "100644",
            };
            let info = format!("{mode},{blob},{}", edit.path);
            self.run(&self.root, &["update-index", "--add", "--cacheinfo", &info], None, &env, "update-index").await?;
        }
        let tree = self.run(&self.root, &["write-tree"], None, &env, "write-tree").await?;
        drop(index_dir);
        let base_tree =
            self.run(&self.root, &["rev-parse", &format!("{base}^{{tree}}")], None, &[], "rev-parse").await?;
        if tree == base_tree {
            return Err(SourceError::Publish(format!(
                "the edits of branch `{}` leave every file as it is at {base}: there is nothing to propose",
                proposal.branch
            )));
        }
        let (name, email) = &proposal.author;
        let identity = [
            ("GIT_AUTHOR_NAME", name.as_str()),
            ("GIT_AUTHOR_EMAIL", email.as_str()),
            ("GIT_COMMITTER_NAME", name.as_str()),
            ("GIT_COMMITTER_EMAIL", email.as_str()),
        ];
        let commit = self
            .run(
                &self.root,
                &["commit-tree", &tree, "-p", base, "-F", "-"],
                Some(proposal.commit_message.as_bytes()),
                &identity,
                "commit-tree",
            )
            .await?;
        let refspec = format!("+{commit}:refs/heads/{}", proposal.branch);
        let out = self.run(&self.root, &["push", "--porcelain", "--", &self.url, &refspec], None, &[], "push").await?;
        // `--porcelain`: one line per ref, `<flag>\t<from>:<to>\t<summary>`; `*` is a new ref.
        let flag = out
            .lines()
            .find(|l| l.contains(&format!(":refs/heads/{}\t", proposal.branch)))
            .and_then(|l| l.chars().next())
            .ok_or_else(|| SourceError::Git {
                operation: "push",
                url: self.url.clone(),
                message: format!("git did not report the branch `{}`: {}", proposal.branch, self.redact(&out)),
            })?;
        if flag == '!' {
            return Err(SourceError::Git { operation: "push", url: self.url.clone(), message: self.redact(&out) });
        }
        Ok((commit, flag != '*'))
    }

    /// Removes every secret from a message.
    fn redact(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for s in &self.secrets {
            if !s.expose().is_empty() {
                text = text.replace(s.expose(), "***");
            }
        }
        text
    }

    /// Runs git in `dir`; returns its trimmed standard output, or an error with git's message
    /// (credentials removed). The process is killed when the future is dropped, and with this
    /// process when it is killed outright ([`dies_with_us`]).
    async fn run(
        &self,
        dir: &Path,
        args: &[&str],
        stdin: Option<&[u8]>,
        env: &[(&str, &str)],
        operation: &'static str,
    ) -> Result<String, SourceError> {
        let mut cmd = if dies_with_us() {
            let mut cmd = Command::new("setpriv");
            cmd.args(["--pdeathsig", "KILL", "--", "git"]);
            cmd
        } else {
            Command::new("git")
        };
        cmd.kill_on_drop(true)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_ASKPASS", "")
            .env("SSH_ASKPASS", "")
            .env("LC_ALL", "C")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .args(["-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null", "-c", "protocol.version=2"])
            .args(args)
            .envs(env.iter().copied())
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        match &self.header {
            Some(h) => {
                cmd.env("GIT_CONFIG_COUNT", "1")
                    .env("GIT_CONFIG_KEY_0", "http.extraHeader")
                    .env("GIT_CONFIG_VALUE_0", h.expose());
            }
            None => {
                cmd.env_remove("GIT_CONFIG_COUNT");
            }
        }
        let failed = |e: std::io::Error| SourceError::Git {
            operation,
            url: self.url.clone(),
            message: format!("cannot run git: {e}"),
        };
        let mut child = cmd.spawn().map_err(failed)?;
        if let (Some(data), Some(mut input)) = (stdin, child.stdin.take()) {
            input.write_all(data).await.map_err(failed)?;
        }
        let out = child.wait_with_output().await.map_err(failed)?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let stdout = String::from_utf8_lossy(&out.stdout);
            let message = format!("{stderr}\n{stdout}")
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join("; ");
            return Err(SourceError::Git { operation, url: self.url.clone(), message: self.redact(&message) });
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_and_url_credentials() {
        assert!(http_to_loopback("http://127.0.0.1:8080/r.git"));
        assert!(http_to_loopback("http://localhost/r.git"));
        assert!(http_to_loopback("http://[::1]:80/r.git"));
        assert!(!http_to_loopback("http://git.example.com/r.git"));
        assert!(!http_to_loopback("https://127.0.0.1/r.git"));
        assert_eq!(
            url_credentials("https://bot:s3cret@git.example.com/r.git"),
            Some(("bot".to_owned(), "s3cret".to_owned()))
        );
        assert_eq!(url_credentials("https://git.example.com/r.git"), None);
    }
}
