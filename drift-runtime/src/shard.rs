//! Sharding: the clusters of a detector spread over its running replicas, each cluster watched by
//! at most one replica at a time.
//!
//! Two things, both on the engines the detector already stands on:
//!
//! - **Exclusivity**, one [`LeaseLock`] per cluster (`drift_kube::KubeLease`: a Lease
//!   `LEASE-CLUSTER` in the home cluster), held through the [`Elector`] of leader election: a
//!   replica scans, watches and heals a cluster only while it holds that cluster's lease, and
//!   stops at once when it may have lost it (the renew deadline). Two replicas never hold one
//!   lease: taking it is the API server's compare-and-swap.
//! - **Balance**, [`Membership`]: every replica renews a membership of its own and sees who else
//!   is alive; each computes the same assignment of clusters to the members alive ([`assign`]:
//!   balanced, at most `ceil(clusters / members)` each, and stable: a cluster stays with its
//!   replica unless the balance needs it elsewhere) and stands for the leases of its own clusters
//!   only. A cluster no longer assigned to it is released at once (its new replica takes it on
//!   the release); a replica that dies stops renewing both its membership and its leases, which
//!   expire after the lease duration, and the survivors, assigned its clusters, take them.
//!
//! Views of the membership may differ for a moment (a heartbeat apart); the leases keep that
//! harmless: a replica that wants a cluster another still holds waits for the release or the
//! expiry.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use async_trait::async_trait;
use drift_core::lease::LeaseLock;
use tokio::sync::watch;

use crate::leader::{ElectionTimings, Elector};

/// The replicas that share a detector's clusters, as this replica sees them.
#[async_trait]
pub trait Membership: Send + Sync + std::fmt::Debug {
    /// This replica's identity (the holder name of the leases it takes).
    fn identity(&self) -> &str;
    /// Renews this replica's membership and returns the identities of the members alive, this
    /// one included.
    async fn heartbeat(&self) -> drift_core::Result<Vec<String>>;
    /// Leaves: the others count this replica out at their next heartbeat.
    async fn leave(&self) -> drift_core::Result<()>;
}

/// Follows a lease this replica does not stand for (its lock remembers when it last changed);
/// after a failed watch, waits a while before watching again.
async fn observe(lock: Arc<dyn LeaseLock>) {
    let clock = chrono::Utc::now;
    loop {
        match lock.changed(&clock).await {
            Ok(drift_core::lease::Watched::Ended) => tokio::time::sleep(std::time::Duration::from_secs(1)).await,
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(lease = %lock.describe(), error = %e, "sharding: a lease cannot be watched for now");
                tokio::time::sleep(crate::leader::WATCH_RETRY).await;
            }
        }
    }
}

/// The cluster each member watches: balanced (each member at most `ceil(clusters / members)`,
/// at least the floor) and stable. Every cluster ranks the members by a hash of (cluster,
/// member) (rendezvous hashing); clusters are given, in their order, to the best-ranked member
/// that still has room. The same clusters and members give the same answer on every replica;
/// one member more or less moves few clusters.
pub fn assign(clusters: &[String], members: &[String]) -> BTreeMap<String, String> {
    let members: BTreeSet<&String> = members.iter().collect();
    let clusters: BTreeSet<&String> = clusters.iter().collect();
    let mut out = BTreeMap::new();
    if members.is_empty() || clusters.is_empty() {
        return out;
    }
    let share = clusters.len().div_ceil(members.len());
    // How many members may get the full share: the others get one less.
    let full = clusters.len() - (share - 1) * members.len();
    let mut load: BTreeMap<&String, usize> = members.iter().map(|m| (*m, 0)).collect();
    let mut at_full = 0;
    for cluster in clusters {
        let mut ranked: Vec<&String> = members.iter().copied().collect();
        ranked.sort_by_key(|m| std::cmp::Reverse(rank(cluster, m)));
        let chosen = ranked.into_iter().find(|m| {
            let l = load[m];
            l + 1 < share || (l + 1 == share && at_full < full)
        });
        // There is always room: the shares add up to the clusters.
        let Some(member) = chosen else { continue };
        let l = load.get_mut(member).map(|l| {
            *l += 1;
            *l
        });
        if l == Some(share) {
            at_full += 1;
        }
        out.insert(cluster.clone(), member.clone());
    }
    out
}

/// A stable 64-bit hash of (cluster, member): FNV-1a, the same on every machine and build.
fn rank(cluster: &str, member: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in cluster.bytes().chain([0]).chain(member.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The sharding of one replica: its membership and a lease per cluster.
#[derive(Debug, Clone)]
pub struct Sharding {
    members: Arc<dyn Membership>,
    locks: BTreeMap<String, Arc<dyn LeaseLock>>,
    timings: ElectionTimings,
}

/// One cluster's election while this replica stands for it.
struct Standing {
    release: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Sharding {
    /// This replica's `members` view and one lease per cluster (by cluster name), held with
    /// `timings` (checked as leader election's are).
    pub fn new(
        members: Arc<dyn Membership>,
        locks: BTreeMap<String, Arc<dyn LeaseLock>>,
        timings: ElectionTimings,
    ) -> drift_core::Result<Self> {
        timings.validate()?;
        if locks.is_empty() {
            return Err(drift_core::Error::config("sharding needs at least one cluster"));
        }
        Ok(Sharding { members, locks, timings })
    }

    /// The timings of its elections.
    pub fn timings(&self) -> ElectionTimings {
        self.timings
    }

    /// The clusters it shards.
    pub fn clusters(&self) -> impl Iterator<Item = &String> {
        self.locks.keys()
    }

    /// Runs until `stop` turns true (or its sender is dropped): every retry period, renews the
    /// membership, computes the assignment and stands for the leases of this replica's clusters
    /// (each through an [`Elector`] that sends on `leading[cluster]` whether this replica holds
    /// it), releasing the others. On stop, every lease held is released and the membership
    /// left, so the other replicas take the clusters at once.
    ///
    /// A lease given up (a rebalance, or the stop) is released only once `stopped[cluster]` is
    /// true: `leading[cluster]` turns false first, the cluster's tasks stop, whoever runs them
    /// says so, and then the lease goes ([`Elector::after_stopped`], bounded by the renew
    /// deadline): a store write of those tasks never lands after the new holder began.
    pub async fn run(
        self,
        leading: BTreeMap<String, watch::Sender<bool>>,
        stopped: BTreeMap<String, watch::Receiver<bool>>,
        mut stop: watch::Receiver<bool>,
    ) {
        let clusters: Vec<String> = self.locks.keys().cloned().collect();
        let me = self.members.identity().to_owned();
        let mut standing: BTreeMap<String, Standing> = BTreeMap::new();
        // The leases of the other replicas' clusters, watched: each lock then knows when its
        // lease last changed, so that a replica given a dead one's cluster takes it when the
        // holder's claim ends, not a lease duration after it first looks.
        let mut observing: BTreeMap<String, tokio::task::JoinHandle<()>> = BTreeMap::new();
        let mut view: Option<Vec<String>> = None;
        let mut failing_since: Option<tokio::time::Instant> = None;
        loop {
            if *stop.borrow() {
                break;
            }
            match tokio::time::timeout(self.timings.renew_deadline, self.members.heartbeat()).await {
                Ok(Ok(members)) => {
                    if view.as_ref() != Some(&members) {
                        tracing::info!(replica = %me, members = ?members, "sharding: the replicas alive");
                    }
                    view = Some(members);
                    failing_since = None;
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "sharding: the membership could not be renewed");
                    failing_since.get_or_insert_with(tokio::time::Instant::now);
                }
                Err(_) => {
                    tracing::warn!("sharding: renewing the membership did not answer in time");
                    failing_since.get_or_insert_with(tokio::time::Instant::now);
                }
            }
            // A replica that cannot renew its membership is counted out by the others after the
            // lease duration: it gives up its clusters before that.
            if failing_since.is_some_and(|at| at.elapsed() >= self.timings.renew_deadline) {
                view = Some(Vec::new());
            }
            let mine: BTreeSet<String> = match &view {
                Some(members) => {
                    assign(&clusters, members).into_iter().filter(|(_, m)| *m == me).map(|(c, _)| c).collect()
                }
                None => BTreeSet::new(),
            };
            // Release what is no longer this replica's (its elector releases the lease it holds).
            let gone: Vec<String> = standing.keys().filter(|c| !mine.contains(*c)).cloned().collect();
            for cluster in gone {
                if let Some(s) = standing.remove(&cluster) {
                    tracing::info!(%cluster, "sharding: this cluster goes to another replica; its tasks stop, then its lease is released");
                    s.release.send_replace(true);
                    if let Err(e) = s.task.await {
                        tracing::error!(%cluster, error = %e, "the election task of a cluster failed");
                    }
                }
            }
            // Stand for this replica's clusters (again, after an election that ended).
            for cluster in &mine {
                if standing.get(cluster).is_some_and(|s| !s.task.is_finished()) {
                    continue;
                }
                if let Some(o) = observing.remove(cluster) {
                    o.abort();
                    let _ = o.await;
                }
                let (Some(lock), Some(tx)) = (self.locks.get(cluster), leading.get(cluster)) else { continue };
                let elector = match Elector::new(lock.clone(), self.timings) {
                    Ok(e) => match stopped.get(cluster) {
                        Some(s) => e.after_stopped(s.clone()),
                        None => e,
                    },
                    Err(e) => {
                        tracing::error!(%cluster, error = %e, "sharding: no election for this cluster");
                        continue;
                    }
                };
                let (release, release_rx) = watch::channel(false);
                let task = tokio::spawn(elector.run(tx.clone(), release_rx));
                standing.insert(cluster.clone(), Standing { release, task });
            }
            for (cluster, lock) in &self.locks {
                if standing.contains_key(cluster) || observing.get(cluster).is_some_and(|o| !o.is_finished()) {
                    continue;
                }
                if lock.can_watch() {
                    observing.insert(cluster.clone(), tokio::spawn(observe(lock.clone())));
                }
            }
            let pause = self.timings.retry_period + crate::schedule::clock_jitter(self.timings.retry_period);
            tokio::select! {
                _ = stop.changed() => break,
                () = tokio::time::sleep(pause) => {}
            }
        }
        for (_, o) in std::mem::take(&mut observing) {
            o.abort();
        }
        for (_, s) in std::mem::take(&mut standing) {
            s.release.send_replace(true);
            let _ = s.task.await;
        }
        match tokio::time::timeout(self.timings.renew_deadline, self.members.leave()).await {
            Ok(Ok(())) => tracing::info!(replica = %me, "sharding: left; the other replicas take the clusters"),
            Ok(Err(e)) => tracing::warn!(error = %e, "sharding: the membership could not be left; it expires"),
            Err(_) => tracing::warn!("sharding: leaving did not answer in time; the membership expires"),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn names(prefix: &str, n: usize) -> Vec<String> {
        (0..n).map(|i| format!("{prefix}{i}")).collect()
    }

    fn loads(a: &BTreeMap<String, String>) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for m in a.values() {
            *out.entry(m.clone()).or_default() += 1;
        }
        out
    }

    #[test]
    fn every_cluster_goes_to_exactly_one_member_and_the_loads_are_balanced() {
        for clusters in 0..=23 {
            for members in 1..=7 {
                let (c, m) = (names("cluster-", clusters), names("drift-", members));
                let a = assign(&c, &m);
                assert_eq!(a.len(), clusters, "every cluster assigned ({clusters} over {members})");
                assert!(a.values().all(|x| m.contains(x)));
                let l = loads(&a);
                let (max, min) = (clusters.div_ceil(members), clusters / members);
                assert!(l.values().all(|n| *n <= max), "{l:?}");
                if clusters >= members {
                    assert_eq!(l.len(), members, "every member works: {l:?}");
                    assert!(l.values().all(|n| *n >= min), "{l:?}");
                }
            }
        }
        assert!(assign(&names("c", 3), &[]).is_empty());
    }

    #[test]
    fn every_replica_computes_the_same_assignment_whatever_the_order() {
        let c = names("c", 9);
        let m = names("r", 4);
        let mut c2 = c.clone();
        c2.reverse();
        let mut m2 = m.clone();
        m2.rotate_left(2);
        assert_eq!(assign(&c, &m), assign(&c2, &m2));
    }

    #[test]
    fn a_member_leaving_moves_only_its_own_clusters_mostly() {
        let c = names("cluster-", 30);
        let m = names("drift-", 3);
        let before = assign(&c, &m);
        let after = assign(&c, &m[..2]);
        let moved_from_survivors = before.iter().filter(|(k, v)| **v != m[2] && after.get(*k) != Some(v)).count();
        let orphans = before.values().filter(|v| **v == m[2]).count();
        // The dead member's clusters all move; a survivor's move only when the balance needs it.
        assert!(orphans > 0);
        assert!(moved_from_survivors <= c.len() / 3, "{moved_from_survivors} of the survivors' clusters moved");
    }

    #[test]
    fn the_rank_is_stable_across_builds() {
        assert_eq!(rank("a", "b"), rank("a", "b"));
        assert_ne!(rank("ab", "c"), rank("a", "bc"), "the separator keeps (cluster, member) apart");
    }
}
