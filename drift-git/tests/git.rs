//! The git source against real repositories made by the git command line, read over file://.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use drift_core::ErrorKind;
use drift_core::source::DesiredSource;
use drift_git::{GitConfig, GitSource};

fn source(origin: &Origin, reference: &str) -> GitSource {
    let mut cfg = GitConfig::new(origin.url(), reference);
    cfg.cache_dir = Some(origin.cache());
    GitSource::new(cfg).unwrap()
}

fn value_of(snapshot: &drift_core::DesiredSnapshot, name: &str) -> String {
    let r = snapshot.resources.iter().find(|r| r.key.name == name).unwrap_or_else(|| panic!("{name} missing"));
    r.object["data"]["value"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn branches_tags_and_commits_are_read_with_provenance() {
    let origin = Origin::new();
    origin.write("apps/settings.yaml", &configmap("settings", "shop", "one"));
    let c1 = origin.commit("one");
    git(&origin.work, &["tag", "-a", "v1", "-m", "release one"]);
    git(&origin.work, &["push", "-q", "origin", "v1"]);
    origin.write("apps/settings.yaml", &configmap("settings", "shop", "two"));
    let c2 = origin.commit("two");
    git(&origin.work, &["checkout", "-q", "-b", "feature"]);
    origin.write("apps/settings.yaml", &configmap("settings", "shop", "feature"));
    let c3 = origin.commit("feature");

    let main = source(&origin, "main").fetch().await.unwrap();
    assert_eq!(main.revision.as_deref(), Some(c2.as_str()));
    assert_eq!(value_of(&main, "settings"), "two");
    let r = &main.resources[0];
    assert_eq!(r.provenance.path.as_deref(), Some("apps/settings.yaml"));
    assert_eq!(r.provenance.document, Some(0));
    assert_eq!(r.provenance.revision.as_deref(), Some(c2.as_str()));
    assert_eq!(r.provenance.repository.as_deref(), Some(origin.url().as_str()));

    let tag = source(&origin, "v1").fetch().await.unwrap();
    assert_eq!(tag.revision.as_deref(), Some(c1.as_str()), "an annotated tag is peeled to its commit");
    assert_eq!(value_of(&tag, "settings"), "one");

    let commit = source(&origin, &c1).fetch().await.unwrap();
    assert_eq!(commit.revision.as_deref(), Some(c1.as_str()));

    let feature = source(&origin, "feature").fetch().await.unwrap();
    assert_eq!(feature.revision.as_deref(), Some(c3.as_str()));
    assert_eq!(value_of(&feature, "settings"), "feature");

    let err = source(&origin, "no-such-branch").fetch().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
}

#[tokio::test]
async fn unchanged_commit_is_not_read_twice_and_new_commit_rerenders_only_what_changed() {
    require_kubectl();
    let origin = Origin::new();
    origin.write("plain/a.yaml", &configmap("a", "shop", "1"));
    origin.write("plain/b.yaml", &configmap("b", "shop", "1"));
    origin.write("kust/kustomization.yaml", "resources:\n  - deploy.yaml\nnamespace: web\n");
    origin.write("kust/deploy.yaml", &deployment("web", 2));
    origin.commit("first");
    let src = source(&origin, "main");

    let first = src.fetch().await.unwrap();
    assert_eq!(keys(&first), vec!["ConfigMap shop/a", "ConfigMap shop/b", "apps/Deployment web/web"]);
    let s1 = src.stats();
    assert_eq!((s1.files_parsed, s1.renders, s1.downloads), (2, 1, 1), "{s1:?}");

    let again = src.fetch().await.unwrap();
    assert_eq!(again, first);
    let s2 = src.stats();
    assert_eq!(s2.snapshot_cache_hits, 1, "{s2:?}");
    assert_eq!((s2.files_parsed, s2.renders, s2.downloads), (2, 1, 1), "nothing read, rendered or received: {s2:?}");

    origin.write("plain/a.yaml", &configmap("a", "shop", "2"));
    let c2 = origin.commit("change a");
    let third = src.fetch().await.unwrap();
    assert_eq!(third.revision.as_deref(), Some(c2.as_str()));
    assert_eq!(value_of(&third, "a"), "2");
    let s3 = src.stats();
    assert_eq!(s3.files_parsed, 3, "only the changed file is parsed again: {s3:?}");
    assert_eq!(s3.file_cache_hits, 1, "{s3:?}");
    assert_eq!(s3.renders, 1, "the unchanged Kustomize folder is not rendered again: {s3:?}");
    assert_eq!(s3.render_cache_hits, 1, "{s3:?}");
    assert_eq!(s3.downloads, 2, "{s3:?}");
    // Provenance follows the new commit even for reused objects.
    assert!(third.resources.iter().all(|r| r.provenance.revision.as_deref() == Some(c2.as_str())));

    origin.write("kust/deploy.yaml", &deployment("web", 5));
    origin.commit("scale web");
    let fourth = src.fetch().await.unwrap();
    let web = fourth.resources.iter().find(|r| r.key.name == "web").unwrap();
    assert_eq!(web.object["spec"]["replicas"], 5);
    assert_eq!(web.key.namespace.as_deref(), Some("web"));
    assert_eq!(web.provenance.path.as_deref(), Some("kust/kustomization.yaml"));
    let s4 = src.stats();
    assert_eq!((s4.renders, s4.files_parsed), (2, 3), "{s4:?}");
}

#[tokio::test]
async fn a_force_push_is_followed() {
    let origin = Origin::new();
    origin.write("a.yaml", &configmap("a", "shop", "before"));
    origin.commit("one");
    origin.write("a.yaml", &configmap("a", "shop", "wrong"));
    let bad = origin.commit("two");
    let src = source(&origin, "main");
    assert_eq!(src.fetch().await.unwrap().revision.as_deref(), Some(bad.as_str()));

    git(&origin.work, &["reset", "-q", "--hard", "HEAD~1"]);
    origin.write("a.yaml", &configmap("a", "shop", "rewritten"));
    git(&origin.work, &["commit", "-qam", "rewritten"]);
    git(&origin.work, &["push", "-q", "--force", "origin", "main"]);
    let rewritten = origin.head();
    assert_ne!(rewritten, bad);
    let snap = src.fetch().await.unwrap();
    assert_eq!(snap.revision.as_deref(), Some(rewritten.as_str()));
    assert_eq!(value_of(&snap, "a"), "rewritten");
}

#[tokio::test]
async fn branch_clones_are_shallow_and_sub_folders_are_honoured() {
    let origin = Origin::new();
    origin.write("clusters/prod/a.yaml", &configmap("a", "prod", "1"));
    origin.write("clusters/dev/a.yaml", &configmap("a", "dev", "1"));
    origin.commit("one");
    origin.write("clusters/prod/b.yaml", &configmap("b", "prod", "1"));
    origin.commit("two");
    let mut cfg = GitConfig::new(origin.url(), "main");
    cfg.cache_dir = Some(origin.cache());
    cfg.path = Some("clusters/prod".into());
    let src = GitSource::new(cfg.clone()).unwrap();
    let snap = src.fetch().await.unwrap();
    assert_eq!(keys(&snap), vec!["ConfigMap prod/a", "ConfigMap prod/b"]);
    let shallow = src.cache_path().join("shallow");
    assert!(shallow.is_file(), "a depth-1 clone records its shallow boundary");
    assert_eq!(std::fs::read_to_string(shallow).unwrap().lines().count(), 1);

    cfg.path = Some("clusters/missing".into());
    let err = GitSource::new(cfg).unwrap().fetch().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "a missing path is an error, not an empty snapshot: {err}");
}

#[tokio::test]
async fn a_broken_file_is_a_warning_with_path_and_line_and_the_rest_is_read() {
    let origin = Origin::new();
    origin.write("apps/good.yaml", &configmap("good", "shop", "1"));
    origin.write(
        "apps/broken.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: broken\n  labels: [unclosed\ndata:\n  a: b\n",
    );
    origin.write(
        "apps/also-good.json",
        r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"svc","namespace":"shop"}}"#,
    );
    origin.write(".github/workflows/ci.yaml", "name: ci\non: [push]\njobs: {}\n");
    origin.commit("mixed");
    let snap = source(&origin, "main").fetch().await.unwrap();
    assert_eq!(keys(&snap), vec!["ConfigMap shop/good", "Service shop/svc"]);
    let broken = snap.warnings.iter().find(|w| w.path.as_deref() == Some("apps/broken.yaml")).unwrap();
    assert!(broken.fatal);
    assert!(broken.line.is_some_and(|l| l >= 5), "{broken}");
    let ci = snap.warnings.iter().find(|w| w.path.as_deref() == Some(".github/workflows/ci.yaml")).unwrap();
    assert!(!ci.fatal, "a CI workflow is left out with a note: {ci}");
    assert!(drift_git::has_errors(&snap));
}

#[tokio::test]
async fn a_missing_token_variable_is_a_configuration_error() {
    let mut cfg = GitConfig::new("https://example.invalid/org/repo.git", "main");
    cfg.token_env = Some("DRIFT_TEST_TOKEN_THAT_IS_NEVER_SET".into());
    let err = GitSource::new(cfg).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ConfigInvalid);
    assert!(err.to_string().contains("DRIFT_TEST_TOKEN_THAT_IS_NEVER_SET"));
}

#[tokio::test]
async fn the_default_ref_is_the_remote_head() {
    let origin = Origin::new();
    origin.write("a.yaml", &configmap("a", "shop", "1"));
    let c1 = origin.commit("one");
    let mut cfg = GitConfig::new(origin.url(), "main");
    cfg.cache_dir = Some(origin.cache());
    cfg.reference = serde_json::from_value::<GitConfig>(serde_json::json!({"url": origin.url()})).unwrap().reference;
    assert_eq!(cfg.reference, "HEAD");
    let snap = GitSource::new(cfg).unwrap().fetch().await.unwrap();
    assert_eq!(snap.revision.as_deref(), Some(c1.as_str()));
}

#[tokio::test]
async fn ssh_urls_go_through_the_system_ssh_and_an_unreachable_server_is_temporary() {
    // Port 1 on loopback: nothing listens, the system ssh reports "connection refused".
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = GitConfig::new("ssh://git@127.0.0.1:1/org/gitops.git", "main");
    cfg.cache_dir = Some(dir.path().to_path_buf());
    let err = GitSource::new(cfg).unwrap().fetch().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.is_temporary());
    assert!(err.to_string().to_lowercase().contains("refused"), "{err}");
}

#[tokio::test]
async fn a_one_shot_source_keeps_nothing_between_fetches_and_reads_the_same_objects() {
    let origin = Origin::new();
    origin.write("plain/a.yaml", &configmap("a", "shop", "1"));
    origin.write("plain/b.yaml", &configmap("b", "shop", "1"));
    origin.commit("first");
    let keeping = source(&origin, "main");
    let mut cfg = GitConfig::new(origin.url(), "main");
    cfg.cache_dir = Some(origin.cache());
    cfg.render.keep_between_fetches = false;
    let one_shot = GitSource::new(cfg).unwrap();

    let expected = keeping.fetch().await.unwrap();
    let first = one_shot.fetch().await.unwrap();
    assert_eq!(first, expected, "the same snapshot, moved out instead of copied");
    let again = one_shot.fetch().await.unwrap();
    assert_eq!(again, expected);
    let s = one_shot.stats();
    assert_eq!(s.snapshot_cache_hits, 0, "no snapshot kept: {s:?}");
    assert_eq!((s.files_parsed, s.file_cache_hits), (4, 0), "no parsed file kept: {s:?}");
}

/// An Argo CD Application that tracks another revision (a tag, a branch) than the one the source
/// reads is rendered from that revision, as Argo CD's repo server renders it, with that commit as
/// its objects' revision; one that names a revision the remote does not have is a note; and the
/// snapshot is read again on the next fetch (a branch moves without the read one moving).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argo_cd_sources_that_track_another_revision_are_rendered_from_it() {
    let origin = Origin::new();
    let commits = write_revisions(&origin, &origin.url());
    let source = source(&origin, "main");
    let snap = source.fetch().await.unwrap();
    check_revisions(&snap, &commits);
    let again = source.fetch().await.unwrap();
    assert_eq!(source.stats().snapshot_cache_hits, 0, "read again");
    assert_eq!(again.resources.len(), snap.resources.len());
}
