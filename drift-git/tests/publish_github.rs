//! Publishing a change to GitHub: the fake GitHub REST server (backed by a real bare git
//! repository) receives blobs, a tree, a commit, the branch and a pull request through the
//! workspace's octocrab client; the pull request is merged and the GitHub source sees it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::fake_github::*;
use common::*;
use drift_core::ErrorKind;
use drift_core::source::DesiredSource;
use drift_git::publish::{COMMENT_MARKER, CheckConclusion, CheckReport, CheckReported, report_check_with_token};
use drift_git::{FileEdit, FolderConfig, Proposal, Published, Secret, SourceConfig, Workspace};

fn proposal(title: &str, value: &str) -> Proposal {
    Proposal {
        branch: "drift/accept/0a1b2c3d".into(),
        title: title.into(),
        body: format!("**ConfigMap shop/a**: `data.value` is `\"{value}\"` in the cluster"),
        commit_message: format!("Accept the live value of ConfigMap shop/a\n\ndata.value = {value}\n"),
        edits: vec![
            FileEdit {
                path: "apps/a.yaml".into(),
                content: configmap("a", "shop", value).into_bytes(),
                created: false,
            },
            FileEdit {
                path: "apps/new/c.yaml".into(),
                content: configmap("c", "shop", "3").into_bytes(),
                created: true,
            },
        ],
        author: ("Drift Detector".into(), "drift@example.com".into()),
    }
}

async fn open(fake: &Fake, base: &str, reference: &str) -> Workspace {
    let cfg = config(fake, base, reference);
    Workspace::open_with_token(&SourceConfig::Github(cfg), Some(Secret::new("good-token"))).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_opens_a_pull_request_updates_it_and_a_merge_reaches_the_source() {
    let (fake, base) = start(repo_with_two_files()).await;
    let c1 = fake.origin.head();
    let ws = open(&fake, &base, "main").await;
    assert_eq!(ws.base_commit(), c1);
    assert_eq!(ws.base_branch(), "main");
    assert_eq!(std::fs::read_to_string(ws.root().join("apps/a.yaml")).unwrap(), configmap("a", "shop", "1"));
    assert_eq!(std::fs::read_to_string(ws.root().join("README.md")).unwrap(), "# gitops\n");

    let first = ws.publish(&proposal("Accept ConfigMap shop/a", "2")).await.unwrap();
    assert_eq!(first, Published::PullRequest { number: 1, url: format!("{base}/org/gitops/pull/1"), updated: false });
    {
        let pulls = fake.pulls.lock().unwrap();
        assert_eq!(pulls.len(), 1);
        let p = &pulls[0];
        assert_eq!((p.head.as_str(), p.base.as_str(), p.state.as_str()), ("drift/accept/0a1b2c3d", "main", "open"));
        assert_eq!(p.title, "Accept ConfigMap shop/a");
        assert_eq!(p.body, proposal("", "2").body);
    }
    // The branch's commit: parent = the base commit, files = exactly the edits on top of it.
    let bare = &fake.origin.bare;
    let branch = "refs/heads/drift/accept/0a1b2c3d";
    assert_eq!(git(bare, &["rev-parse", &format!("{branch}^")]), c1);
    assert_eq!(git(bare, &["rev-list", "--count", &format!("{c1}..{branch}")]), "1");
    assert_eq!(git(bare, &["diff", "--name-status", &c1, branch]), "M\tapps/a.yaml\nA\tapps/new/c.yaml");
    assert_eq!(git(bare, &["show", &format!("{branch}:apps/a.yaml")]), configmap("a", "shop", "2").trim_end());
    assert_eq!(
        git(bare, &["log", "-1", "--format=%an <%ae>%n%B", branch]).lines().next(),
        Some("Drift Detector <drift@example.com>")
    );
    assert!(git(bare, &["log", "-1", "--format=%B", branch]).starts_with("Accept the live value of ConfigMap shop/a"));
    assert_eq!(git(bare, &["rev-parse", "refs/heads/main"]), c1, "the base branch is untouched");

    // The same drift again, with a newer value: the branch is replaced, the same PR updated.
    let second = ws.publish(&proposal("Accept ConfigMap shop/a (updated)", "5")).await.unwrap();
    assert_eq!(second, Published::PullRequest { number: 1, url: format!("{base}/org/gitops/pull/1"), updated: true });
    {
        let pulls = fake.pulls.lock().unwrap();
        assert_eq!(pulls.len(), 1, "no second pull request");
        assert_eq!(pulls[0].title, "Accept ConfigMap shop/a (updated)");
        assert!(pulls[0].body.contains("\"5\""));
    }
    assert_eq!(git(bare, &["rev-parse", &format!("{branch}^")]), c1, "force-updated, still on the base commit");
    assert_eq!(git(bare, &["show", &format!("{branch}:apps/a.yaml")]), configmap("a", "shop", "5").trim_end());
    let writes = fake.writes.lock().unwrap().clone();
    assert_eq!(writes.iter().filter(|w| *w == "POST pulls").count(), 1, "{writes:?}");
    assert!(writes.contains(&"POST git/refs refs/heads/drift/accept/0a1b2c3d".to_owned()), "{writes:?}");
    assert!(writes.contains(&"PATCH git/refs refs/heads/drift/accept/0a1b2c3d".to_owned()), "{writes:?}");
    assert!(writes.contains(&"PATCH pulls/1".to_owned()), "{writes:?}");

    // Merged: the GitHub source reads the accepted content from the new commit of main.
    let merged = merge(&fake, 1).unwrap();
    let snapshot = source(config(&fake, &base, "main")).fetch().await.unwrap();
    assert_eq!(snapshot.revision.as_deref(), Some(merged.as_str()));
    assert_eq!(keys(&snapshot), vec!["ConfigMap shop/a", "ConfigMap shop/b", "ConfigMap shop/c"]);
    let a = snapshot.resources.iter().find(|r| r.key.to_string() == "ConfigMap shop/a").unwrap();
    assert_eq!(a.object["data"]["value"], "5");

    // After the merge, a new request for the same branch opens a new pull request.
    let ws = open(&fake, &base, "HEAD").await;
    assert_eq!((ws.base_commit(), ws.base_branch()), (merged.as_str(), "main"));
    let third = ws.publish(&proposal("Accept again", "6")).await.unwrap();
    assert!(matches!(third, Published::PullRequest { number: 2, updated: false, .. }), "{third:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_and_errors_name_the_problem_without_the_token() {
    let (fake, base) = start(repo_with_two_files()).await;

    let err =
        Workspace::open_with_token(&SourceConfig::Github(config(&fake, &base, "main")), Some(Secret::new("bad-token")))
            .await
            .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert!(err.to_string().contains("Bad credentials") && !err.to_string().contains("bad-token"), "{err}");

    let folder = SourceConfig::Folder(FolderConfig::new(fake.origin.work.clone()));
    let err = Workspace::open_with_token(&folder, None).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
    assert!(err.to_string().contains("a folder source has no remote to propose a change to"), "{err}");

    let commit = fake.origin.head();
    let err = Workspace::open_with_token(
        &SourceConfig::Github(config(&fake, &base, &commit)),
        Some(Secret::new("good-token")),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("must name one"), "{err}");

    let ws = open(&fake, &base, "main").await;
    let mut same = proposal("t", "1");
    same.edits.truncate(1); // a.yaml with its current content
    let err = ws.publish(&same).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("nothing to propose"), "{err}");
    let mut escape = proposal("t", "2");
    escape.edits[0].path = "../outside.yaml".into();
    let err = ws.publish(&escape).await.unwrap_err();
    assert!(err.to_string().contains("../outside.yaml"), "{err}");
    assert!(fake.pulls.lock().unwrap().is_empty());
    assert_eq!(git(&fake.origin.bare, &["for-each-ref", "--format=%(refname)", "refs/heads/drift"]), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_executable_stays_executable() {
    let origin = repo_with_two_files();
    origin.write("scripts/check.sh", "#!/bin/sh\nexit 0\n");
    std::fs::set_permissions(origin.work.join("scripts/check.sh"), std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .unwrap();
    origin.commit("a script");
    let (fake, base) = start(origin).await;
    let ws = open(&fake, &base, "main").await;
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(ws.root().join("scripts/check.sh")).unwrap().permissions(),
    );
    assert_eq!(mode & 0o111, 0o111, "unpacked executable");
    let mut p = proposal("t", "2");
    p.edits.push(FileEdit {
        path: "scripts/check.sh".into(),
        content: b"#!/bin/sh\nexit 1\n".to_vec(),
        created: false,
    });
    ws.publish(&p).await.unwrap();
    let bare = &fake.origin.bare;
    assert!(git(bare, &["ls-tree", "refs/heads/drift/accept/0a1b2c3d", "scripts/check.sh"]).starts_with("100755 "));
    assert!(git(bare, &["ls-tree", "refs/heads/drift/accept/0a1b2c3d", "apps/a.yaml"]).starts_with("100644 "));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enterprise_api_url_keeps_its_path_for_writes() {
    let (fake, base) = start(repo_with_two_files()).await;
    let mut cfg = config(&fake, &base, "main");
    cfg.api_url = format!("{base}/api/v3");
    let ws = Workspace::open_with_token(&SourceConfig::Github(cfg), Some(Secret::new("good-token"))).await.unwrap();
    let published = ws.publish(&proposal("Accept", "2")).await.unwrap();
    assert!(matches!(published, Published::PullRequest { number: 1, updated: false, .. }), "{published:?}");
    assert_eq!(fake.pulls.lock().unwrap()[0].head, "drift/accept/0a1b2c3d");
    let writes = fake.writes.lock().unwrap().clone();
    assert!(!writes.is_empty() && writes.iter().all(|w| w.starts_with("/api/v3 ")), "{writes:?}");
}

#[tokio::test]
async fn a_check_is_a_check_run_and_one_comment_on_the_pull_request_updated_when_run_again() {
    let (fake, base) = start(repo_with_two_files()).await;
    let workspace = open(&fake, &base, "main").await;
    let published = workspace.publish(&proposal("Accept", "2")).await.unwrap();
    assert!(matches!(published, Published::PullRequest { number: 1, .. }));
    let head = ref_sha(&fake, "refs/heads/drift/accept/0a1b2c3d").unwrap();
    let source = SourceConfig::Github(config(&fake, &base, "main"));
    let token = || Some(Secret::new("good-token"));
    let report = |conclusion, summary: &str| CheckReport {
        head_sha: head.clone(),
        head_branch: Some("drift/accept/0a1b2c3d".into()),
        conclusion,
        title: "overwrites 1 live change".into(),
        summary: summary.into(),
    };

    let first = report_check_with_token(&source, token(), &report(CheckConclusion::Failure, "first")).await.unwrap();
    assert_eq!(first.comment, Some((1, false)));
    assert!(first.check_run.unwrap().ends_with("/org/gitops/runs/1"));
    let second = report_check_with_token(&source, token(), &report(CheckConclusion::Success, "second")).await.unwrap();
    assert_eq!(second.comment, Some((1, true)), "the earlier comment is updated, not duplicated");
    let comments = fake.comments.lock().unwrap().clone();
    assert_eq!(comments, [(1, 1, format!("{COMMENT_MARKER}\nsecond"))]);
    let checks = fake.checks.lock().unwrap().clone();
    assert_eq!(checks.len(), 2);
    assert_eq!(
        (checks[0]["name"].as_str(), checks[0]["head_sha"].as_str()),
        (Some("drift check"), Some(head.as_str()))
    );
    assert_eq!(
        (checks[0]["conclusion"].as_str(), checks[1]["conclusion"].as_str()),
        (Some("failure"), Some("success"))
    );
    assert_eq!(checks[1]["output"]["summary"], "second");

    // A token that may not create check runs (a personal access token): a commit status.
    fake.check_runs_forbidden.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut unsure = report(CheckConclusion::Neutral, "third");
    unsure.title = "x".repeat(300);
    let third = report_check_with_token(&source, token(), &unsure).await.unwrap();
    assert_eq!(third, CheckReported { check_run: None, comment: Some((1, true)) });
    let status = fake.checks.lock().unwrap()[2].clone();
    assert_eq!((status["kind"].as_str(), status["state"].as_str()), (Some("status"), Some("error")));
    assert_eq!((status["context"].as_str(), status["sha"].as_str()), (Some("drift check"), Some(head.as_str())));
    assert_eq!(status["description"].as_str().unwrap().len(), 140);

    // A branch without a pull request: the check run (status) only.
    let mut no_pull = report(CheckConclusion::Success, "fourth");
    no_pull.head_branch = Some("main".into());
    assert_eq!(report_check_with_token(&source, token(), &no_pull).await.unwrap().comment, None);

    // A bad token is an error that does not quote it; a folder has nowhere to report to.
    let err = report_check_with_token(&source, Some(Secret::new("bad-token")), &no_pull).await.unwrap_err();
    assert!(!err.to_string().contains("bad-token"), "{err}");
    let folder = SourceConfig::Folder(FolderConfig::new(fake.origin.cache()));
    let err = report_check_with_token(&folder, None, &no_pull).await.unwrap_err();
    assert!(err.to_string().contains("GitHub only"), "{err}");
}
