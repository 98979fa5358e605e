//! A detector of several clusters ([`drift_runtime::DetectorBuilder::cluster`]) with the
//! reference sources and store: each cluster scanned with its own repositories and recorded
//! under its name; one cluster down resolves nothing of its own and nothing of the others';
//! the builder refuses two clusters of one name and a cluster without a repository.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::cm;
use drift_core::memory::{MemoryDesiredSource, MemoryLiveSource, MemoryStore};
use drift_core::sink::{DriftFilter, DriftStatus, PageRequest};
use drift_core::{DesiredSource, DriftStore, ScanOutcome};
use drift_runtime::{ClusterParts, Detector, Store};

fn repo(name: &str) -> Arc<dyn DesiredSource> {
    Arc::new(MemoryDesiredSource::new(name, vec![cm("settings", "fast")]))
}

async fn open(store: &MemoryStore, cluster: &str) -> Vec<(String, String)> {
    let filter =
        DriftFilter { status: Some(DriftStatus::Open), cluster: Some(cluster.to_owned()), ..DriftFilter::default() };
    let mut rows: Vec<(String, String)> = store
        .list(&filter, PageRequest { limit: 100, after: None })
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|d| (d.repository, d.path))
        .collect();
    rows.sort();
    rows
}

#[tokio::test]
async fn each_cluster_is_scanned_with_its_repositories_and_one_down_resolves_nothing() {
    let east = Arc::new(MemoryLiveSource::new("east", vec![cm("settings", "slow")]));
    let west = Arc::new(MemoryLiveSource::new("west", vec![cm("settings", "slow")]));
    let store = Arc::new(MemoryStore::new());
    let detector = Detector::builder()
        .cluster(ClusterParts { live: east.clone(), desired: vec![repo("platform")], writer: None, proposers: vec![] })
        .cluster(ClusterParts {
            live: west.clone(),
            desired: vec![repo("platform"), repo("edge")],
            writer: None,
            proposers: vec![],
        })
        .store(Store::new(store.clone()))
        .build()
        .unwrap();
    assert_eq!(detector.scanners().map(|s| s.cluster().to_owned()).collect::<Vec<_>>(), ["east", "west"]);

    let reports = detector.scan_once().await.unwrap();
    let mut seen: Vec<(String, String)> = reports.iter().map(|r| (r.cluster.clone(), r.repository.clone())).collect();
    seen.sort();
    assert_eq!(
        seen,
        [("east".into(), "platform".into()), ("west".into(), "edge".into()), ("west".into(), "platform".into())]
    );
    let drift = |repo: &str| (repo.to_owned(), "data.mode".to_owned());
    assert_eq!(open(&store, "east").await, [drift("platform")]);
    assert_eq!(open(&store, "west").await, [drift("edge"), drift("platform")]);

    // West goes down and east is put back: east's drift resolves, west's stay open.
    west.set_down(Some(drift_core::Error::unavailable("west: connection refused")));
    east.apply(cm("settings", "fast"));
    let reports = detector.scan_once().await.unwrap();
    for r in reports.iter().filter(|r| r.cluster == "west") {
        assert_eq!(r.outcome, ScanOutcome::Failed, "{r:?}");
        assert!(r.warnings.iter().any(|w| w.message.contains("connection refused")), "{:?}", r.warnings);
    }
    assert_eq!(open(&store, "east").await, []);
    assert_eq!(open(&store, "west").await, [drift("edge"), drift("platform")], "a cluster not read resolves nothing");

    // West back, in sync: its own scans resolve its drifts.
    west.set_down(None);
    west.apply(cm("settings", "fast"));
    detector.scan_once().await.unwrap();
    assert_eq!(open(&store, "west").await, []);
}

#[test]
fn clusters_need_distinct_names_and_a_repository_each() {
    let live = |name: &str| Arc::new(MemoryLiveSource::new(name, vec![]));
    let store = || Store::new(Arc::new(MemoryStore::new()));
    let err = Detector::builder()
        .cluster(ClusterParts { live: live("east"), desired: vec![repo("platform")], writer: None, proposers: vec![] })
        .cluster(ClusterParts { live: live("east"), desired: vec![repo("platform")], writer: None, proposers: vec![] })
        .store(store())
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("two clusters are named \"east\""), "{err}");
    let err = Detector::builder()
        .cluster(ClusterParts { live: live("east"), desired: vec![repo("platform")], writer: None, proposers: vec![] })
        .cluster(ClusterParts { live: live("west"), desired: vec![], writer: None, proposers: vec![] })
        .store(store())
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("cluster \"west\" has no repository"), "{err}");
    let err = Detector::builder().desired(repo("platform")).store(store()).build().unwrap_err();
    assert!(err.to_string().contains("live source"), "{err}");
}
