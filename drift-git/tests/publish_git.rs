//! Publishing a change to a plain git server with the git command line: real repositories over
//! `file://` and over smart HTTP (`git http-backend` behind a CGI server demanding a token).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::smart_http::serve;
use common::*;
use drift_core::ErrorKind;
use drift_git::{FileEdit, GitConfig, Proposal, Published, Secret, SourceConfig, Workspace};

const BRANCH: &str = "drift/accept/9f8e7d6c";

fn proposal(value: &str) -> Proposal {
    Proposal {
        branch: BRANCH.into(),
        title: "Accept ConfigMap shop/a".into(),
        body: "body".into(),
        commit_message: format!("Accept the live value of ConfigMap shop/a\n\ndata.value = {value}\n"),
        edits: vec![
            FileEdit {
                path: "apps/a.yaml".into(),
                content: configmap("a", "shop", value).into_bytes(),
                created: false,
            },
            FileEdit { path: "apps/c.yaml".into(), content: configmap("c", "shop", "3").into_bytes(), created: true },
        ],
        author: ("Drift Detector".into(), "drift@example.com".into()),
    }
}

/// An origin with a few commits (so that a shallow clone has history to leave out) and an
/// executable script whose mode must survive.
fn origin() -> Origin {
    let origin = Origin::new();
    origin.write("apps/a.yaml", &configmap("a", "shop", "0"));
    origin.commit("zero");
    origin.write("apps/a.yaml", &configmap("a", "shop", "1"));
    origin.write("apps/b.yaml", &configmap("b", "shop", "1"));
    origin.write("run.sh", "#!/bin/sh\necho hi\n");
    std::fs::set_permissions(origin.work.join("run.sh"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    origin.commit("one");
    origin
}

/// Checks the pushed branch on the origin: one commit on top of `base` with exactly the edits.
fn assert_branch(origin: &Origin, base: &str, commit: &str, value: &str) {
    let bare = &origin.bare;
    let branch = format!("refs/heads/{BRANCH}");
    assert_eq!(git(bare, &["rev-parse", &branch]), commit);
    assert_eq!(git(bare, &["rev-parse", &format!("{branch}^")]), base);
    assert_eq!(git(bare, &["show", "--name-status", "--format=", &branch]), "M\tapps/a.yaml\nA\tapps/c.yaml");
    assert_eq!(git(bare, &["show", &format!("{branch}:apps/a.yaml")]), configmap("a", "shop", value).trim_end());
    assert_eq!(
        git(bare, &["log", "-1", "--format=%an <%ae>|%cn|%s", &branch]),
        "Drift Detector <drift@example.com>|Drift Detector|Accept the live value of ConfigMap shop/a"
    );
    assert!(git(bare, &["ls-tree", &branch, "run.sh"]).starts_with("100755 "), "modes are kept");
    assert_eq!(git(bare, &["rev-parse", "refs/heads/main"]), base, "the base branch is untouched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_over_file_pushes_a_branch_and_force_updates_it() {
    let origin = origin();
    let base = origin.head();
    let cfg = SourceConfig::Git(GitConfig::new(origin.url(), "main"));
    let ws = Workspace::open(&cfg).await.unwrap();
    assert_eq!((ws.base_commit(), ws.base_branch()), (base.as_str(), "main"));
    assert_eq!(std::fs::read_to_string(ws.root().join("apps/a.yaml")).unwrap(), configmap("a", "shop", "1"));
    assert_eq!(git(ws.root(), &["rev-list", "--count", "HEAD"]), "1", "a shallow clone");

    // The planner may have written to the working copy: only the edits enter the commit.
    std::fs::write(ws.root().join("apps/b.yaml"), "scribbled").unwrap();
    let first = ws.publish(&proposal("2")).await.unwrap();
    let Published::Branch { branch, commit, compare_url, updated } = first else { panic!("{first:?}") };
    assert_eq!((branch.as_str(), compare_url, updated), (BRANCH, None, false));
    assert_branch(&origin, &base, &commit, "2");

    let second = ws.publish(&proposal("5")).await.unwrap();
    let Published::Branch { commit: commit2, updated, .. } = second else { panic!("{second:?}") };
    assert!(updated, "the branch existed and was force-updated");
    assert_ne!(commit2, commit);
    assert_branch(&origin, &base, &commit2, "5");

    // The default branch when the ref is HEAD.
    let ws = Workspace::open(&SourceConfig::Git(GitConfig::new(origin.url(), "HEAD"))).await.unwrap();
    assert_eq!((ws.base_commit(), ws.base_branch()), (base.as_str(), "main"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_over_smart_http_with_a_token_and_nothing_leaks() {
    let origin = origin();
    let base = origin.head();
    let server = serve(origin.dir.path().to_path_buf(), Some("s3cret-token")).await;
    let url = format!("{server}/origin.git");
    let cfg = SourceConfig::Git(GitConfig::new(url.clone(), "main"));

    let ws = Workspace::open_with_token(&cfg, Some(Secret::new("s3cret-token"))).await.unwrap();
    assert_eq!(ws.base_commit(), base);
    let first = ws.publish(&proposal("2")).await.unwrap();
    let Published::Branch { commit, updated, compare_url, .. } = first else { panic!("{first:?}") };
    assert!(!updated);
    assert_eq!(compare_url, None, "a loopback address is no known host");
    assert_branch(&origin, &base, &commit, "2");
    let second = ws.publish(&proposal("7")).await.unwrap();
    let Published::Branch { commit, updated, .. } = second else { panic!("{second:?}") };
    assert!(updated);
    assert_branch(&origin, &base, &commit, "7");
    // The token went in a header, never into the clone's configuration.
    let config = std::fs::read_to_string(ws.root().join(".git/config")).unwrap();
    assert!(!config.contains("s3cret") && config.contains(&url), "{config}");

    // A wrong token: refused by the server; the error names the URL, never the token.
    let err = Workspace::open_with_token(&cfg, Some(Secret::new("wrong-token-value"))).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    let text = format!("{err} {err:?}");
    assert!(text.contains(&url) && !text.contains("wrong-token-value"), "{text}");
    assert!(!text.contains("d3JvbmctdG9rZW4tdmFsdWU"), "nor its base64 form: {text}");

    // Credentials written into the URL are taken out of it (and out of messages).
    let in_url = format!("http://x-access-token:wrong-pass-in-url@{}", server.trim_start_matches("http://"));
    let err =
        Workspace::open_with_token(&SourceConfig::Git(GitConfig::new(format!("{in_url}/origin.git"), "main")), None)
            .await
            .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert!(!format!("{err} {err:?}").contains("wrong-pass-in-url"), "{err}");

    // A token is never sent over clear text http to another machine.
    let remote = SourceConfig::Git(GitConfig::new("http://git.example.invalid/org/gitops.git", "main"));
    let err = Workspace::open_with_token(&remote, Some(Secret::new("s3cret-token"))).await.unwrap_err();
    assert!(err.to_string().contains("clear text"), "{err}");
    assert!(!err.to_string().contains("s3cret"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_clear() {
    let origin = origin();
    let ws = Workspace::open(&SourceConfig::Git(GitConfig::new(origin.url(), "main"))).await.unwrap();
    let mut unchanged = proposal("1");
    unchanged.edits.truncate(1);
    let err = ws.publish(&unchanged).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("nothing to propose"), "{err}");
    let mut dir = proposal("2");
    dir.edits[0].path = "apps".into();
    let err = ws.publish(&dir).await.unwrap_err();
    assert!(err.to_string().contains("`apps` is a tree"), "{err}");
    assert_eq!(git(&origin.bare, &["for-each-ref", "refs/heads/drift"]), "", "nothing was pushed");

    let err = Workspace::open(&SourceConfig::Git(GitConfig::new(origin.url(), "no-such-branch"))).await.unwrap_err();
    assert!(err.to_string().contains("no-such-branch"), "{err}");
    let err = Workspace::open(&SourceConfig::Git(GitConfig::new(origin.url(), origin.head()))).await.unwrap_err();
    assert!(err.to_string().contains("must name one"), "{err}");
}
