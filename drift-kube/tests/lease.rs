//! Leader election on a Lease of the test API server: acquire, renew, a standby while the holder
//! is valid, takeover after expiry (on the candidate's own clock, injected), release, the
//! compare-and-swap of concurrent candidates, the leader's renewal without a read and its read
//! when someone else wrote, a standby's watch (renewals dated when seen, a release, a dropped
//! watch resumed), and the Lease as kubectl reads it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use chrono::{DateTime, Utc};
use common::Cluster;
use drift_core::ErrorKind;
use drift_core::lease::{Attempt, LeaseLock, Watched};
use drift_kube::KubeLease;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use serde_json::Value;

const D: Duration = Duration::from_secs(15);

async fn candidate(cluster: &Cluster, identity: &str) -> KubeLease {
    let source = cluster.source().await;
    KubeLease::new(source.client().clone(), "default", "drift-detector", identity, D)
}

fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).unwrap()
}

fn at(s: i64) -> DateTime<Utc> {
    t0() + chrono::Duration::seconds(s)
}

/// The Lease as kubectl shows it.
fn lease(cluster: &Cluster) -> Value {
    serde_json::from_str(&cluster.kubectl(&["get", "lease", "drift-detector", "-n", "default", "-o", "json"])).unwrap()
}

fn leading(acquired: bool) -> Attempt {
    Attempt::Leading { acquired }
}

/// Held by `holder`, whose claim ends at `expires` seconds on the candidate's clock.
fn standby(holder: &str, expires: i64) -> Attempt {
    Attempt::Standby { holder: holder.to_owned(), expires: at(expires) }
}

#[tokio::test]
async fn acquire_renew_and_a_standby_while_the_holder_is_valid() {
    let cluster = Cluster::start();
    let (a, b) = (candidate(&cluster, "pod-a").await, candidate(&cluster, "pod-b").await);
    assert_eq!(a.try_acquire_or_renew(at(0)).await.unwrap(), leading(true), "no Lease yet: created");
    let first = lease(&cluster);
    assert_eq!(first["spec"]["holderIdentity"], "pod-a");
    assert_eq!(first["spec"]["leaseDurationSeconds"], 15);
    assert_eq!(first["spec"]["leaseTransitions"], 0);

    assert_eq!(b.try_acquire_or_renew(at(1)).await.unwrap(), standby("pod-a", 16));
    assert_eq!(a.try_acquire_or_renew(at(2)).await.unwrap(), leading(false), "renewed");
    let renewed = lease(&cluster);
    assert_eq!(renewed["spec"]["acquireTime"], first["spec"]["acquireTime"], "a renewal keeps the term's start");
    assert_ne!(renewed["spec"]["renewTime"], first["spec"]["renewTime"]);
    assert_ne!(renewed["metadata"]["resourceVersion"], first["metadata"]["resourceVersion"]);

    // b saw the record change at 3 (the renewal), so it waits 15 s from then, not from 1.
    assert_eq!(b.try_acquire_or_renew(at(3)).await.unwrap(), standby("pod-a", 18));
    assert_eq!(b.try_acquire_or_renew(at(17)).await.unwrap(), standby("pod-a", 18));
    assert_eq!(a.try_acquire_or_renew(at(12)).await.unwrap(), leading(false));
    assert_eq!(b.try_acquire_or_renew(at(20)).await.unwrap(), standby("pod-a", 35), "a renewed at 12, seen at 20");
}

#[tokio::test]
async fn a_standby_takes_over_an_expired_lease_and_the_old_holder_sees_it() {
    let cluster = Cluster::start();
    let (a, b) = (candidate(&cluster, "pod-a").await, candidate(&cluster, "pod-b").await);
    assert_eq!(a.try_acquire_or_renew(at(0)).await.unwrap(), leading(true));
    assert_eq!(b.try_acquire_or_renew(at(1)).await.unwrap(), standby("pod-a", 16));
    // a stops renewing (it died): 15 s after b first saw its record, b takes the lease.
    assert_eq!(b.try_acquire_or_renew(at(15)).await.unwrap(), standby("pod-a", 16));
    assert_eq!(b.try_acquire_or_renew(at(16)).await.unwrap(), leading(true));
    let taken = lease(&cluster);
    assert_eq!(taken["spec"]["holderIdentity"], "pod-b");
    assert_eq!(taken["spec"]["leaseTransitions"], 1);
    // a comes back: it is not the holder any more.
    assert_eq!(a.try_acquire_or_renew(at(17)).await.unwrap(), standby("pod-b", 32));
    assert_eq!(b.try_acquire_or_renew(at(18)).await.unwrap(), leading(false));
}

#[tokio::test]
async fn release_frees_the_lease_at_once_and_only_its_holder_releases() {
    let cluster = Cluster::start();
    let (a, b) = (candidate(&cluster, "pod-a").await, candidate(&cluster, "pod-b").await);
    assert_eq!(a.try_acquire_or_renew(at(0)).await.unwrap(), leading(true));
    assert_eq!(b.try_acquire_or_renew(at(1)).await.unwrap(), standby("pod-a", 16));
    b.release(at(2)).await.unwrap();
    assert_eq!(lease(&cluster)["spec"]["holderIdentity"], "pod-a", "b does not hold it: nothing released");

    a.release(at(3)).await.unwrap();
    let released = lease(&cluster);
    assert_eq!(released["spec"]["holderIdentity"], "");
    assert_eq!(released["spec"]["leaseDurationSeconds"], 1);
    // Well before a's 15 s would have run out, b takes it.
    assert_eq!(b.try_acquire_or_renew(at(4)).await.unwrap(), leading(true));
    assert_eq!(lease(&cluster)["spec"]["leaseTransitions"], 1);
    assert_eq!(a.try_acquire_or_renew(at(5)).await.unwrap(), standby("pod-b", 20));
}

#[tokio::test]
async fn a_stale_update_is_a_conflict() {
    let cluster = Cluster::start();
    let a = candidate(&cluster, "pod-a").await;
    assert_eq!(a.try_acquire_or_renew(at(0)).await.unwrap(), leading(true));
    let api: Api<Lease> = Api::namespaced(cluster.source().await.client().clone(), "default");
    let stale = api.get("drift-detector").await.unwrap();
    assert_eq!(a.try_acquire_or_renew(at(1)).await.unwrap(), leading(false));
    let mut theirs = stale.clone();
    theirs.spec.as_mut().unwrap().holder_identity = Some("intruder".into());
    let err = api.replace("drift-detector", &PostParams::default(), &theirs).await.unwrap_err();
    let kube::Error::Api(status) = err else { panic!("an API error: {err}") };
    assert_eq!(status.code, 409, "{status:?}");
    assert_eq!(lease(&cluster)["spec"]["holderIdentity"], "pod-a");
}

#[tokio::test]
async fn concurrent_candidates_never_both_win_a_term() {
    let cluster = Cluster::start();
    let holder = candidate(&cluster, "pod-old").await;
    assert_eq!(holder.try_acquire_or_renew(at(0)).await.unwrap(), leading(true));
    let mut winners = Vec::new();
    for round in 0..20i64 {
        // Fresh candidates see the current lease at `start` and race for it once it expired.
        let (nb, nc) = (format!("pod-b{round}"), format!("pod-c{round}"));
        let (b, c) = (candidate(&cluster, &nb).await, candidate(&cluster, &nc).await);
        let start = round * 100;
        for x in [&b, &c] {
            assert!(matches!(x.try_acquire_or_renew(at(start)).await.unwrap(), Attempt::Standby { .. }));
        }
        let (rb, rc) = tokio::join!(b.try_acquire_or_renew(at(start + 16)), c.try_acquire_or_renew(at(start + 16)));
        let mut leaders = Vec::new();
        for (who, r) in [(nb.clone(), rb), (nc.clone(), rc)] {
            match r {
                Ok(Attempt::Leading { acquired: true }) => leaders.push(who),
                Ok(Attempt::Standby { .. }) => {}
                Err(e) => assert_eq!(e.kind(), ErrorKind::Conflict, "{e}"),
                Ok(other) => panic!("{other:?}"),
            }
        }
        assert_eq!(leaders.len(), 1, "round {round}: exactly one winner, got {leaders:?}");
        assert_eq!(lease(&cluster)["spec"]["holderIdentity"], leaders[0].as_str());
        winners.push(leaders[0].clone());
        // The winner then stops renewing; the next round's candidates take over from it.
    }
    assert_eq!(lease(&cluster)["spec"]["leaseTransitions"], 20);
    assert_eq!(winners.len(), 20);
}

#[tokio::test]
async fn a_leader_renews_what_it_wrote_and_reads_again_when_someone_else_wrote() {
    let cluster = Cluster::start();
    let a = candidate(&cluster, "pod-a").await;
    assert_eq!(a.try_acquire_or_renew(at(0)).await.unwrap(), leading(true));
    for s in 1..4 {
        assert_eq!(a.try_acquire_or_renew(at(s)).await.unwrap(), leading(false), "renewed without a read");
    }
    let renewed = DateTime::parse_from_rfc3339(lease(&cluster)["spec"]["renewTime"].as_str().unwrap()).unwrap();
    assert_eq!(renewed, at(3), "the last renewal is in the Lease");
    // Someone else writes the Lease (a standby that took it after a partition): the leader's
    // renewal of its own copy is a 409, and it reads who holds the Lease now.
    let api: Api<Lease> = Api::namespaced(cluster.source().await.client().clone(), "default");
    let mut theirs = api.get("drift-detector").await.unwrap();
    theirs.spec.as_mut().unwrap().holder_identity = Some("pod-b".into());
    api.replace("drift-detector", &PostParams::default(), &theirs).await.unwrap();
    assert_eq!(a.try_acquire_or_renew(at(5)).await.unwrap(), standby("pod-b", 20));
    assert_eq!(lease(&cluster)["spec"]["holderIdentity"], "pod-b", "the leader wrote nothing over it");
}

#[tokio::test]
async fn a_standby_sees_renewals_and_a_release_through_its_watch_and_resumes_a_dropped_one() {
    let cluster = Cluster::start();
    let (a, b) = (candidate(&cluster, "pod-a").await, candidate(&cluster, "pod-b").await);
    assert!(b.can_watch());
    assert_eq!(a.try_acquire_or_renew(at(0)).await.unwrap(), leading(true));
    assert_eq!(b.try_acquire_or_renew(at(1)).await.unwrap(), standby("pod-a", 16));
    // A renewal is dated when the watch delivers it, not at the next read.
    assert_eq!(a.try_acquire_or_renew(at(2)).await.unwrap(), leading(false));
    assert_eq!(b.changed(&|| at(3)).await.unwrap(), Watched::Held { holder: "pod-a".into(), expires: at(18) });
    // A dropped watch (a lost connection, an API server restart) ends; the next one resumes
    // from the last version seen, so a renewal made meanwhile is not missed.
    assert!(cluster.server.drop_watches() >= 1);
    assert_eq!(b.changed(&|| at(4)).await.unwrap(), Watched::Ended);
    assert_eq!(a.try_acquire_or_renew(at(5)).await.unwrap(), leading(false));
    assert_eq!(b.changed(&|| at(6)).await.unwrap(), Watched::Held { holder: "pod-a".into(), expires: at(21) });
    // The next read finds the record the watch saw, and keeps its date.
    assert_eq!(b.try_acquire_or_renew(at(20)).await.unwrap(), standby("pod-a", 21));
    // A release wakes the standby at once, and it takes the lease.
    a.release(at(7)).await.unwrap();
    assert_eq!(b.changed(&|| at(8)).await.unwrap(), Watched::Open);
    assert_eq!(b.try_acquire_or_renew(at(9)).await.unwrap(), leading(true));
    assert_eq!(lease(&cluster)["spec"]["leaseTransitions"], 1);
}

#[tokio::test]
async fn a_watch_from_a_compacted_version_ends_and_the_next_read_resumes_it() {
    let cluster = Cluster::start();
    let (a, b) = (candidate(&cluster, "pod-a").await, candidate(&cluster, "pod-b").await);
    assert_eq!(a.try_acquire_or_renew(at(0)).await.unwrap(), leading(true));
    assert_eq!(b.try_acquire_or_renew(at(1)).await.unwrap(), standby("pod-a", 16));
    assert_eq!(a.try_acquire_or_renew(at(2)).await.unwrap(), leading(false));
    // The version b read is gone from the server's history: 410 Gone, in the stream.
    cluster.server.compact();
    assert_eq!(b.changed(&|| at(3)).await.unwrap(), Watched::Ended);
    // The elector's next step after an ended watch is an attempt (a read); the watch then
    // resumes from what it read, and sees the next renewal.
    assert_eq!(b.try_acquire_or_renew(at(4)).await.unwrap(), standby("pod-a", 19));
    assert_eq!(a.try_acquire_or_renew(at(5)).await.unwrap(), leading(false));
    assert_eq!(b.changed(&|| at(6)).await.unwrap(), Watched::Held { holder: "pod-a".into(), expires: at(21) });
}
