//! The drift-testkit conformance suite for each of the three sources, over the same content:
//! good files and one broken file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::fake_github;
use common::*;
use drift_core::ResourceKey;
use drift_source_git::{FolderConfig, FolderSource, GitConfig, GitSource};
use drift_testkit::desired::{DesiredExpectation, conformance};

const BROKEN: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: broken\ndata: {a: [1, 2}\n";

fn fill(origin: &Origin) {
    origin.write("apps/settings.yaml", &configmap("settings", "shop", "1"));
    origin.write("apps/web.yaml", &deployment("web", 2));
    origin.write("apps/broken.yaml", BROKEN);
    origin.commit("content");
}

fn expectation() -> DesiredExpectation {
    DesiredExpectation {
        must_contain: vec![
            ResourceKey::new("", "ConfigMap", Some("shop"), "settings"),
            ResourceKey::new("apps", "Deployment", None, "web"),
        ],
        broken_files: vec!["apps/broken.yaml".into()],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn folder_source_conforms() {
    let origin = Origin::new();
    fill(&origin);
    let source = FolderSource::new(FolderConfig::new(&origin.work)).unwrap();
    conformance(&source, &expectation()).await;
    assert_eq!(source.stats().snapshot_cache_hits, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_source_conforms() {
    let origin = Origin::new();
    fill(&origin);
    let mut cfg = GitConfig::new(origin.url(), "main");
    cfg.cache_dir = Some(origin.cache());
    let source = GitSource::new(cfg).unwrap();
    conformance(&source, &expectation()).await;
    assert_eq!(source.stats().snapshot_cache_hits, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn github_source_conforms() {
    let origin = Origin::new();
    fill(&origin);
    let (fake, base) = fake_github::start(origin).await;
    let source = fake_github::source(fake_github::config(&fake, &base, "main"));
    conformance(&source, &expectation()).await;
    assert_eq!(source.stats().snapshot_cache_hits, 1);
}
