//! The git source over smart HTTP: `git http-backend` behind a small CGI server on loopback.
//! A second server demands Basic authentication: gix refuses to send a token over plain
//! http (only https), which is checked too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::smart_http::serve;
use common::*;
use drift_core::ErrorKind;
use drift_core::source::DesiredSource;
use drift_git::{GitConfig, GitSource, Secret};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clone_and_fetch_over_smart_http() {
    let origin = Origin::new();
    origin.write("apps/a.yaml", &configmap("a", "shop", "1"));
    let c1 = origin.commit("one");
    let base = serve(origin.dir.path().to_path_buf(), None).await;
    let url = format!("{base}/origin.git");

    let mut cfg = GitConfig::new(url.clone(), "main");
    cfg.cache_dir = Some(origin.cache());
    let src = GitSource::new(cfg).unwrap();
    let first = src.fetch().await.unwrap();
    assert_eq!(first.revision.as_deref(), Some(c1.as_str()));
    assert_eq!(keys(&first), vec!["ConfigMap shop/a"]);
    assert_eq!(first.resources[0].provenance.repository.as_deref(), Some(url.as_str()));

    origin.write("apps/b.yaml", &configmap("b", "shop", "1"));
    let c2 = origin.commit("two");
    let second = src.fetch().await.unwrap();
    assert_eq!(second.revision.as_deref(), Some(c2.as_str()));
    assert_eq!(keys(&second), vec!["ConfigMap shop/a", "ConfigMap shop/b"]);
    let stats = src.stats();
    assert_eq!(stats.downloads, 2, "{stats:?}");
    assert_eq!(stats.file_cache_hits, 1, "a.yaml is not parsed again: {stats:?}");

    let third = src.fetch().await.unwrap();
    assert_eq!(third, second);
    let stats = src.stats();
    assert_eq!((stats.downloads, stats.snapshot_cache_hits), (2, 1), "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authentication_failures_are_permission_denied_and_tokens_stay_off_cleartext_http() {
    let origin = Origin::new();
    origin.write("apps/a.yaml", &configmap("a", "shop", "1"));
    origin.commit("one");
    let base = serve(origin.dir.path().to_path_buf(), Some("s3cret")).await;
    let mut cfg = GitConfig::new(format!("{base}/origin.git"), "main");
    cfg.cache_dir = Some(origin.cache());

    // No credentials: the server answers 401.
    let err = GitSource::new(cfg.clone()).unwrap().fetch().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert!(!err.is_temporary());

    // A token is never sent over plain http (only https): refused before anything is sent.
    let err = GitSource::with_token(cfg, Some(Secret::new("s3cret"))).unwrap().fetch().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert!(err.to_string().contains("clear text"), "{err}");
    assert!(!err.to_string().contains("s3cret"), "the token never appears in errors: {err}");
}
