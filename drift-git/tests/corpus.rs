//! Kustomize rendering of the real GitOps repositories of the corpus' `repos/` (the folder
//! `DRIFT_CORPUS` names, see [`drift_testkit::corpus`]), compared as objects with their
//! `rendered/` oracles (what `kubectl kustomize` printed upstream). Without `DRIFT_CORPUS`, each
//! test says that it is skipped.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::*;
use drift_core::source::DesiredSource;
use drift_core::{DesiredSnapshot, ErrorKind};
use drift_git::{FolderConfig, FolderSource, GitConfig, GitSource};
use serde_json::Value;

/// The corpus' `repos/` folder, or `None` when the test is skipped (no `DRIFT_CORPUS`).
fn repos(test: &str) -> Option<PathBuf> {
    drift_testkit::corpus::dir(test, "repos")
}

/// The oracle's objects, sorted by identity.
fn oracle(repos: &Path, repo: &str, root: &str) -> Vec<(String, Value)> {
    let file = repos.join(repo).join("rendered").join(format!("{}.yaml", root.replace('/', "__")));
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let parsed = drift_core::manifest::parse_manifests(&text, "oracle");
    assert!(parsed.warnings.iter().all(|w| !w.fatal), "{:?}", parsed.warnings);
    let mut v: Vec<_> = parsed.resources.into_iter().map(|r| (r.key.to_string(), Value::clone(&r.object))).collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

fn objects(snapshot: &DesiredSnapshot) -> Vec<(String, Value)> {
    let mut v: Vec<_> = snapshot.resources.iter().map(|r| (r.key.to_string(), Value::clone(&r.object))).collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

async fn read_folder(repos: &Path, repo: &str, path: &str) -> DesiredSnapshot {
    let mut cfg = FolderConfig::new(repos.join(repo));
    cfg.path = Some(path.to_owned());
    FolderSource::new(cfg).unwrap().fetch().await.unwrap()
}

const RENDERABLE: &[(&str, &str)] = &[
    ("podinfo", "kustomize"),
    ("podinfo", "deploy/bases/backend"),
    ("podinfo", "deploy/bases/cache"),
    ("flux2-kustomize-helm-example", "apps/base/podinfo"),
    ("flux2-kustomize-helm-example", "apps/production"),
    ("flux2-kustomize-helm-example", "apps/staging"),
    ("flux2-kustomize-helm-example", "infrastructure/configs"),
    ("flux2-kustomize-helm-example", "infrastructure/controllers"),
    ("flux2-kustomize-helm-example", "clusters/production/flux-system"),
    ("flux2-kustomize-helm-example", "clusters/staging/flux-system"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kustomize_roots_render_the_same_objects_as_the_oracles() {
    let Some(repos) = repos("kustomize_roots_render_the_same_objects_as_the_oracles") else { return };
    require_kubectl();
    for (repo, root) in RENDERABLE {
        let snap = read_folder(&repos, repo, root).await;
        assert!(!drift_git::has_errors(&snap), "{repo}/{root}: {:?}", snap.warnings);
        assert_eq!(objects(&snap), oracle(&repos, repo, root), "{repo}/{root}");
        for r in &snap.resources {
            let path = r.provenance.path.as_deref().unwrap();
            assert!(path.starts_with(root) && path.ends_with("kustomization.yaml"), "{path}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roots_needing_files_left_out_of_the_corpus_fail_alone() {
    let Some(repos) = repos("roots_needing_files_left_out_of_the_corpus_fail_alone") else { return };
    require_kubectl();
    // deploy/bases/frontend needs shell scripts that were not copied (corpus README): the
    // failure is a warning for that application, and the whole repository still reads.
    let snap = read_folder(&repos, "podinfo", "deploy/bases/frontend").await;
    assert!(snap.resources.is_empty());
    let w = snap.warnings.iter().find(|w| w.fatal).unwrap();
    assert_eq!(w.kind, ErrorKind::InvalidInput);
    assert!(w.message.contains("kustomize build of `deploy/bases/frontend` failed"), "{w}");
    assert_eq!(w.path.as_deref(), Some("deploy/bases/frontend"));

    let whole = read_folder(&repos, "podinfo", "").await;
    let failed: Vec<_> = whole.warnings.iter().filter(|w| w.fatal).filter_map(|w| w.path.clone()).collect();
    assert_eq!(failed, vec!["deploy/overlays/dev", "deploy/overlays/production", "deploy/overlays/staging"]);
    // The standalone kustomize/ folder and the plain manifest folders are read.
    let got = objects(&whole);
    for obj in oracle(&repos, "podinfo", "kustomize") {
        assert!(got.contains(&obj), "{} from kustomize/ is read", obj.0);
    }
    assert!(
        whole.resources.iter().any(|r| r.provenance.path.as_deref() == Some("deploy/webapp/backend/deployment.yaml"))
    );
    // Bases are read only through the overlays that use them, not on their own.
    assert!(whole.resources.iter().all(|r| !r.provenance.path.as_deref().unwrap().starts_with("deploy/bases/")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flux_cluster_folder_reads_its_flux_objects_and_says_what_it_cannot_follow() {
    let Some(repos) = repos("a_flux_cluster_folder_reads_its_flux_objects_and_says_what_it_cannot_follow") else {
        return;
    };
    require_kubectl();
    let snap = read_folder(&repos, "flux2-kustomize-helm-example", "clusters/production").await;
    assert!(!drift_git::has_errors(&snap), "{:?}", snap.warnings);
    let keys = keys(&snap);
    assert!(keys.contains(&"kustomize.toolkit.fluxcd.io/Kustomization flux-system/apps".to_owned()), "{keys:?}");
    assert!(keys.contains(&"kustomize.toolkit.fluxcd.io/Kustomization flux-system/infra-controllers".to_owned()));
    // Their sources are ExternalArtifacts (paths relative to another artifact): noted, not guessed.
    let notes: Vec<_> = snap.warnings.iter().filter(|w| w.message.contains("ExternalArtifact")).collect();
    assert_eq!(notes.len(), 3, "{:?}", snap.warnings);
    assert!(notes.iter().all(|w| !w.fatal));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_repository_through_git_gives_the_same_objects() {
    let Some(repos) = repos("the_same_repository_through_git_gives_the_same_objects") else { return };
    require_kubectl();
    let origin = Origin::new();
    let src = repos.join("flux2-kustomize-helm-example");
    let copy = std::process::Command::new("cp")
        .args(["-r", &format!("{}/.", src.display()), origin.work.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(copy.success());
    let commit = origin.commit("corpus copy");
    for root in ["apps/production", "infrastructure/controllers"] {
        let mut cfg = GitConfig::new(origin.url(), "main");
        cfg.cache_dir = Some(origin.cache());
        cfg.path = Some(root.to_owned());
        let snap = GitSource::new(cfg).unwrap().fetch().await.unwrap();
        assert_eq!(objects(&snap), oracle(&repos, "flux2-kustomize-helm-example", root), "{root}");
        assert!(snap.resources.iter().all(|r| r.provenance.revision.as_deref() == Some(commit.as_str())));
    }
}
