//! The drift-testkit desired-source conformance suite, one test per case, for each of the three
//! sources (`folder::desired::*`, `git::desired::*`, `github::desired::*`) over the same
//! content: good files and one broken file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::fake_github;
use common::*;
use drift_core::{DesiredSource, ResourceKey};
use drift_git::{FolderConfig, FolderSource, GitConfig, GitHubSource, GitSource, SourceStats};
use drift_testkit::desired::{DesiredExpectation, DesiredHarness};

const BROKEN: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: broken\ndata: {a: [1, 2}\n";

fn filled() -> Origin {
    let origin = Origin::new();
    origin.write("apps/settings.yaml", &configmap("settings", "shop", "1"));
    origin.write("apps/web.yaml", &deployment("web", 2));
    origin.write("apps/broken.yaml", BROKEN);
    origin.commit("content");
    origin
}

/// A source over a repository filled with [`filled`]; `_keep` holds what the source reads
/// from (the repository, the fake GitHub) for as long as the harness lives.
struct Harness<S, K> {
    source: S,
    _keep: K,
}

impl<S: DesiredSource, K: Send + Sync> DesiredHarness for Harness<S, K> {
    fn source(&self) -> &dyn DesiredSource {
        &self.source
    }
    fn expectation(&self) -> DesiredExpectation {
        DesiredExpectation {
            must_contain: vec![
                ResourceKey::new("", "ConfigMap", Some("shop"), "settings"),
                ResourceKey::new("apps", "Deployment", None, "web"),
            ],
            broken_files: vec!["apps/broken.yaml".into()],
        }
    }
}

async fn folder_harness() -> Harness<FolderSource, Origin> {
    let origin = filled();
    let source = FolderSource::new(FolderConfig::new(&origin.work)).unwrap();
    Harness { source, _keep: origin }
}

async fn git_harness() -> Harness<GitSource, Origin> {
    let origin = filled();
    let mut cfg = GitConfig::new(origin.url(), "main");
    cfg.cache_dir = Some(origin.cache());
    let source = GitSource::new(cfg).unwrap();
    Harness { source, _keep: origin }
}

async fn github_harness() -> Harness<GitHubSource, std::sync::Arc<fake_github::Fake>> {
    let (fake, base) = fake_github::start(filled()).await;
    let source = fake_github::source(fake_github::config(&fake, &base, "main"));
    Harness { source, _keep: fake }
}

mod folder {
    use super::*;
    drift_testkit::desired_suite!(folder_harness());
}

mod git {
    use super::*;
    drift_testkit::desired_suite!(git_harness());
}

mod github {
    use super::*;
    drift_testkit::desired_suite!(github_harness());
}

/// Two fetches of an unchanged revision: the second is answered from the snapshot cache.
async fn second_fetch_is_cached(source: &dyn DesiredSource, stats: impl Fn() -> SourceStats) {
    source.fetch().await.unwrap();
    source.fetch().await.unwrap();
    assert_eq!(stats().snapshot_cache_hits, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn folder_source_caches_an_unchanged_revision() {
    let h = folder_harness().await;
    second_fetch_is_cached(&h.source, || h.source.stats()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_source_caches_an_unchanged_revision() {
    let h = git_harness().await;
    second_fetch_is_cached(&h.source, || h.source.stats()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn github_source_caches_an_unchanged_revision() {
    let h = github_harness().await;
    second_fetch_is_cached(&h.source, || h.source.stats()).await;
}
