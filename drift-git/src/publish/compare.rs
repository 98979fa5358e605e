//! The web address where a person compares a pushed branch with its base, derived from the
//! remote's URL for the hosts whose address scheme is known.

/// The compare address of `branch` against `base` for a repository URL, for GitHub, GitLab,
/// Gitea/Forgejo and Bitbucket (by host name: `github.com`, `gitlab.com`, `codeberg.org`,
/// `gitea.com`, `bitbucket.org`, or a host whose name contains `github`, `gitlab`, `gitea`,
/// `forgejo` or `bitbucket`); `None` for `file://`, local paths and unknown hosts.
///
/// ```
/// use drift_git::publish::compare_url;
/// assert_eq!(
///     compare_url("git@gitlab.com:team/gitops.git", "main", "drift/accept/1").as_deref(),
///     Some("https://gitlab.com/team/gitops/-/compare/main...drift/accept/1"),
/// );
/// assert_eq!(compare_url("file:///srv/git/gitops.git", "main", "drift/accept/1"), None);
/// ```
pub fn compare_url(url: &str, base: &str, branch: &str) -> Option<String> {
    let (host, path) = host_and_path(url)?;
    let host = host.to_ascii_lowercase();
    let path = path.trim_matches('/').trim_end_matches(".git").trim_matches('/');
    if path.is_empty() || !path.contains('/') {
        return None;
    }
    let web = format!("https://{host}/{path}");
    let has = |s: &str| host.contains(s);
    if has("gitlab") {
        Some(format!("{web}/-/compare/{base}...{branch}"))
    } else if has("bitbucket") {
        // Bitbucket's own scheme: source branch, then `%0D`, then the destination.
        Some(format!("{web}/branches/compare/{branch}%0D{base}"))
    } else if has("github") || has("gitea") || has("forgejo") || host == "codeberg.org" {
        Some(format!("{web}/compare/{base}...{branch}"))
    } else {
        None
    }
}

/// Host (without user or port) and path of `https://`, `http://`, `ssh://`, `git://` and
/// scp-like (`user@host:path`) URLs.
fn host_and_path(url: &str) -> Option<(&str, &str)> {
    if let Some((scheme, rest)) = url.split_once("://") {
        if !matches!(scheme, "https" | "http" | "ssh" | "git") {
            return None;
        }
        let (authority, path) = rest.split_once('/')?;
        let host = authority.rsplit('@').next()?;
        let host = host.split(':').next()?;
        Some((host, path))
    } else {
        let (user_host, path) = url.split_once(':')?;
        let host = user_host.rsplit('@').next()?;
        if host.is_empty() || host.contains('/') {
            return None;
        }
        Some((host, path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_hosts_get_a_compare_address() {
        let c = |u: &str| compare_url(u, "main", "drift/accept/ab12");
        assert_eq!(
            c("https://github.com/org/gitops.git").as_deref(),
            Some("https://github.com/org/gitops/compare/main...drift/accept/ab12")
        );
        assert_eq!(
            c("https://x-access-token:secret@github.example.com:8443/org/gitops").as_deref(),
            Some("https://github.example.com/org/gitops/compare/main...drift/accept/ab12")
        );
        assert_eq!(
            c("ssh://git@gitlab.example.com:2222/group/sub/gitops.git").as_deref(),
            Some("https://gitlab.example.com/group/sub/gitops/-/compare/main...drift/accept/ab12")
        );
        assert_eq!(
            c("git@codeberg.org:org/gitops.git").as_deref(),
            Some("https://codeberg.org/org/gitops/compare/main...drift/accept/ab12")
        );
        assert_eq!(
            c("https://gitea.internal/org/gitops.git").as_deref(),
            Some("https://gitea.internal/org/gitops/compare/main...drift/accept/ab12")
        );
        assert_eq!(
            c("https://bitbucket.org/ws/gitops.git").as_deref(),
            Some("https://bitbucket.org/ws/gitops/branches/compare/drift/accept/ab12%0Dmain")
        );
        assert_eq!(c("https://git.example.com/org/gitops.git"), None);
        assert_eq!(c("file:///srv/gitops.git"), None);
        assert_eq!(c("/srv/gitops.git"), None);
        assert_eq!(c("http://127.0.0.1:8080/origin.git"), None);
    }
}
