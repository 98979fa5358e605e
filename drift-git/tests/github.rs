//! The GitHub source against a fake GitHub REST server on loopback (axum), with octocrab
//! pointed at it. Refs are resolved and archives made by real git from a real repository.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::fake_github::*;
use common::*;
use drift_core::ErrorKind;
use drift_core::source::DesiredSource;
use drift_git::{GitHubSource, Secret};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolves_the_ref_downloads_once_per_commit_and_uses_etags() {
    let (fake, base) = start(repo_with_two_files()).await;
    let c1 = fake.origin.head();
    let src = source(config(&fake, &base, "main"));
    let first = src.fetch().await.unwrap();
    assert_eq!(first.revision.as_deref(), Some(c1.as_str()));
    assert_eq!(keys(&first), vec!["ConfigMap shop/a", "ConfigMap shop/b"]);
    let a = &first.resources[0];
    assert_eq!(a.provenance.path.as_deref(), Some("apps/a.yaml"));
    assert_eq!(a.provenance.revision.as_deref(), Some(c1.as_str()));
    assert_eq!(a.provenance.repository.as_deref(), Some(format!("{base}/org/gitops").as_str()));
    assert_eq!((fake.commits.load(Ordering::SeqCst), fake.tarballs.load(Ordering::SeqCst)), (1, 1));

    // Unchanged: one conditional request answered 304, no download, nothing parsed.
    let again = src.fetch().await.unwrap();
    assert_eq!(again, first);
    assert_eq!(fake.not_modified.load(Ordering::SeqCst), 1);
    assert_eq!(fake.tarballs.load(Ordering::SeqCst), 1);
    let stats = src.stats();
    assert_eq!((stats.requests, stats.downloads, stats.snapshot_cache_hits, stats.files_parsed), (3, 1, 1, 2));

    // A new commit: one more archive; the unchanged file is not parsed again.
    fake.origin.write("apps/a.yaml", &configmap("a", "shop", "2"));
    let c2 = fake.origin.commit("two");
    let third = src.fetch().await.unwrap();
    assert_eq!(third.revision.as_deref(), Some(c2.as_str()));
    assert_eq!(fake.tarballs.load(Ordering::SeqCst), 2);
    let stats = src.stats();
    assert_eq!((stats.files_parsed, stats.file_cache_hits), (3, 1), "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enterprise_base_urls_keep_their_path() {
    let (fake, base) = start(repo_with_two_files()).await;
    let mut cfg = config(&fake, &base, "main");
    cfg.api_url = format!("{base}/api/v3");
    cfg.path = Some("apps".into());
    let snap = source(cfg).fetch().await.unwrap();
    assert_eq!(keys(&snap), vec!["ConfigMap shop/a", "ConfigMap shop/b"]);
    assert_eq!(snap.repository, format!("{base}/org/gitops"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_token_missing_ref_repository_and_path_are_errors_of_the_right_kind() {
    let (fake, base) = start(repo_with_two_files()).await;
    let err = GitHubSource::with_token(config(&fake, &base, "main"), Some(Secret::new("bad-token")))
        .unwrap()
        .fetch()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert!(err.to_string().contains("Bad credentials"), "{err}");
    assert!(!err.to_string().contains("bad-token"));

    let err = source(config(&fake, &base, "no-such-branch")).fetch().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");

    let mut cfg = config(&fake, &base, "main");
    cfg.repo = "missing".into();
    let err = source(cfg).fetch().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");

    let mut cfg = config(&fake, &base, "main");
    cfg.path = Some("clusters/none".into());
    let err = source(cfg).fetch().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert!(err.to_string().contains("clusters/none"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exhausted_rate_limit_is_reported_and_not_hammered() {
    let (fake, base) = start(repo_with_two_files()).await;
    *fake.rate.lock().unwrap() = Rate::Exhausted(3600);
    let src = source(config(&fake, &base, "main"));
    let err = src.fetch().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.is_temporary());
    assert!(err.to_string().contains("rate limit"), "{err}");
    assert_eq!(fake.commits.load(Ordering::SeqCst), 1, "the reset is an hour away: no retry");
    // Until the reset, fetches report the limit without sending anything.
    for _ in 0..3 {
        assert_eq!(src.fetch().await.unwrap_err().kind(), ErrorKind::Unavailable);
    }
    assert_eq!(fake.commits.load(Ordering::SeqCst), 1);
    assert_eq!(fake.tarballs.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_retry_after_is_waited_for_then_retried_once() {
    let (fake, base) = start(repo_with_two_files()).await;
    *fake.rate.lock().unwrap() = Rate::RetryAfterOnce(1);
    let mut cfg = config(&fake, &base, "main");
    cfg.rate_limit_max_wait = Duration::from_secs(10);
    let snap = source(cfg).fetch().await.unwrap();
    assert_eq!(keys(&snap), vec!["ConfigMap shop/a", "ConfigMap shop/b"]);
    assert_eq!(fake.commits.load(Ordering::SeqCst), 2, "one refused request, one retry after the wait");
}

/// An Argo CD Application that tracks another revision than the one the source reads is rendered
/// from it, resolved and downloaded through the API as the configured ref is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argo_cd_sources_that_track_another_revision_are_rendered_from_it() {
    let (fake, base) = start(Origin::new()).await;
    let commits = write_revisions(&fake.origin, &format!("{base}/org/gitops"));
    let source = source(config(&fake, &base, "main"));
    let snap = source.fetch().await.unwrap();
    check_revisions(&snap, &commits);
}
