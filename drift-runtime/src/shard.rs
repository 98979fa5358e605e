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

use crate::leader::{ElectionTimings, Elector, Terms};

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
    /// A lease given up (a rebalance, or the stop) is released only once the work of its term
    /// has stopped (`terms[cluster]`, [`Elector::after_stopped`]: `leading[cluster]` turns false
    /// first, the cluster's tasks stop, whoever runs them says so; the lease is renewed
    /// meanwhile, for at most [`ElectionTimings::handover_wait`]). The clusters let go are
    /// released together, each by its own elector, while this loop goes on renewing the
    /// membership (a replica busy letting clusters go is not counted out by the others).
    ///
    /// **Join grace.** A replica that has just started stands for no cluster until its view of
    /// the members has not changed for a lease duration (at most three lease durations after its
    /// start): the replicas started together have then seen each other, and none takes every
    /// cluster (and the memory of their first passes) to hand most of them over seconds later.
    /// A replica alone takes every cluster after that grace. Later, a member counts in the
    /// assignment once this replica has seen it for a lease duration, and the clusters that go
    /// to a newcomer are released then. That clock is not the newcomer's (its view stable for a
    /// lease duration, restarted at each change): when its view keeps changing, its clusters can
    /// be released up to about two lease durations before it stands for them, and have no holder
    /// meanwhile (its first pass of each, once it takes the lease, finds what changed).
    pub async fn run(
        self,
        leading: BTreeMap<String, watch::Sender<bool>>,
        terms: BTreeMap<String, Arc<Terms>>,
        mut stop: watch::Receiver<bool>,
    ) {
        let clusters: Vec<String> = self.locks.keys().cloned().collect();
        let me = self.members.identity().to_owned();
        let settle = self.timings.lease_duration;
        let started = tokio::time::Instant::now();
        let mut standing: BTreeMap<String, Standing> = BTreeMap::new();
        // The elections of the clusters let go, releasing (after their work stopped).
        let mut releasing: BTreeMap<String, tokio::task::JoinHandle<()>> = BTreeMap::new();
        // The leases of the other replicas' clusters, watched: each lock then knows when its
        // lease last changed, so that a replica given a dead one's cluster takes it when the
        // holder's claim ends, not a lease duration after it first looks.
        let mut observing: BTreeMap<String, tokio::task::JoinHandle<()>> = BTreeMap::new();
        let mut view: Option<Vec<String>> = None;
        // Since when this replica has seen each member, and its view unchanged.
        let mut seen_since: BTreeMap<String, tokio::time::Instant> = BTreeMap::new();
        let mut view_since = started;
        let mut joined = false;
        let mut failing_since: Option<tokio::time::Instant> = None;
        loop {
            if *stop.borrow() {
                break;
            }
            match tokio::time::timeout(self.timings.renew_deadline, self.members.heartbeat()).await {
                Ok(Ok(members)) => {
                    let now = tokio::time::Instant::now();
                    if view.as_ref() != Some(&members) {
                        tracing::info!(replica = %me, members = ?members, "sharding: the replicas alive");
                        view_since = now;
                    }
                    seen_since.retain(|m, _| members.contains(m));
                    for m in &members {
                        seen_since.entry(m.clone()).or_insert(now);
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
            if !joined && view.as_ref().is_some_and(|v| !v.is_empty()) {
                let stable = view_since.elapsed() >= settle;
                if stable || started.elapsed() >= 3 * settle {
                    joined = true;
                    tracing::info!(replica = %me, members = ?view, stable, "sharding: joined; standing for this replica's clusters");
                }
            }
            let mine: BTreeSet<String> = match &view {
                Some(members) if joined && !members.is_empty() => {
                    let counted: Vec<String> = members
                        .iter()
                        .filter(|m| **m == me || seen_since.get(*m).is_some_and(|at| at.elapsed() >= settle))
                        .cloned()
                        .collect();
                    assign(&clusters, &counted).into_iter().filter(|(_, m)| *m == me).map(|(c, _)| c).collect()
                }
                _ => BTreeSet::new(),
            };
            // Release what is no longer this replica's: each elector stops leading, waits for the
            // work of its term to stop (renewing the lease), then releases it, all at once.
            let gone: Vec<String> = standing.keys().filter(|c| !mine.contains(*c)).cloned().collect();
            for cluster in gone {
                if let Some(s) = standing.remove(&cluster) {
                    tracing::info!(%cluster, "sharding: this cluster goes to another replica; its tasks stop, then its lease is released");
                    s.release.send_replace(true);
                    releasing.insert(cluster, s.task);
                }
            }
            let done: Vec<String> = releasing.iter().filter(|(_, t)| t.is_finished()).map(|(c, _)| c.clone()).collect();
            for cluster in done {
                if let Some(t) = releasing.remove(&cluster)
                    && let Err(e) = t.await
                {
                    tracing::error!(%cluster, error = %e, "the election task of a cluster failed");
                }
            }
            // Stand for this replica's clusters (again, after an election that ended; not while
            // its last election here is still releasing: that release would end the new term).
            for cluster in &mine {
                if standing.get(cluster).is_some_and(|s| !s.task.is_finished()) || releasing.contains_key(cluster) {
                    continue;
                }
                if let Some(o) = observing.remove(cluster) {
                    o.abort();
                    let _ = o.await;
                }
                let (Some(lock), Some(tx)) = (self.locks.get(cluster), leading.get(cluster)) else { continue };
                let elector = match Elector::new(lock.clone(), self.timings) {
                    Ok(e) => match terms.get(cluster) {
                        Some(t) => e.after_stopped(t.clone()),
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
        // Every lease held is let go at once; then each release is awaited.
        for (cluster, s) in std::mem::take(&mut standing) {
            s.release.send_replace(true);
            releasing.insert(cluster, s.task);
        }
        for (_, t) in std::mem::take(&mut releasing) {
            let _ = t.await;
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

    use std::sync::Mutex;
    use std::time::Duration;

    use crate::leader::tests::{MemLock, Shared, Watching};
    use tokio::time::Instant;

    /// A membership whose view the test sets, with the time of every heartbeat.
    #[derive(Debug)]
    struct Members {
        view: Mutex<Vec<String>>,
        beats: Mutex<Vec<Instant>>,
    }

    #[async_trait]
    impl Membership for Members {
        fn identity(&self) -> &str {
            "a"
        }
        async fn heartbeat(&self) -> drift_core::Result<Vec<String>> {
            self.beats.lock().unwrap().push(Instant::now());
            Ok(self.view.lock().unwrap().clone())
        }
        async fn leave(&self) -> drift_core::Result<()> {
            Ok(())
        }
    }

    /// Replica `a` sharding `n` clusters (a lease each, in memory), with a worker per cluster
    /// whose tasks take `stops_in` to stop after a term ends, counting the clusters held.
    struct Fleet {
        members: Arc<Members>,
        shared: BTreeMap<String, Arc<Mutex<Shared>>>,
        leading: BTreeMap<String, watch::Receiver<bool>>,
        held: Arc<Mutex<(usize, usize)>>,
        stop: watch::Sender<bool>,
        task: tokio::task::JoinHandle<()>,
    }

    fn fleet(n: usize, view: &[&str], stops_in: Duration) -> Fleet {
        let t = ElectionTimings::default();
        let members = Arc::new(Members {
            view: Mutex::new(view.iter().map(|m| (*m).to_owned()).collect()),
            beats: Mutex::default(),
        });
        let (mut shared, mut locks, mut senders, mut leading, mut terms) =
            (BTreeMap::new(), BTreeMap::new(), BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
        // (held now, most held at once)
        let held = Arc::new(Mutex::new((0, 0)));
        for c in names("c", n) {
            let s = Arc::new(Mutex::new(Shared::default()));
            let lock: Arc<dyn LeaseLock> = MemLock::with("a", &s, t.lease_duration, Watching::No);
            let (tx, mut rx) = watch::channel(false);
            let term = Terms::new();
            leading.insert(c.clone(), rx.clone());
            let (held, terms_c) = (held.clone(), term.clone());
            tokio::spawn(async move {
                while rx.changed().await.is_ok() {
                    if *rx.borrow_and_update() {
                        let mut h = held.lock().unwrap();
                        h.0 += 1;
                        h.1 = h.1.max(h.0);
                    } else {
                        let ended = terms_c.current();
                        tokio::time::sleep(stops_in).await;
                        held.lock().unwrap().0 -= 1;
                        terms_c.stopped(ended);
                    }
                }
            });
            shared.insert(c.clone(), s);
            locks.insert(c.clone(), lock);
            senders.insert(c.clone(), tx);
            terms.insert(c, term);
        }
        let sharding = Sharding::new(members.clone(), locks, t).unwrap();
        let (stop, stop_rx) = watch::channel(false);
        let task = tokio::spawn(sharding.run(senders, terms, stop_rx));
        Fleet { members, shared, leading, held, stop, task }
    }

    impl Fleet {
        fn leading(&self) -> BTreeSet<String> {
            self.leading.iter().filter(|(_, rx)| *rx.borrow()).map(|(c, _)| c.clone()).collect()
        }
        async fn until_leading(&self, want: &BTreeSet<String>) -> Instant {
            while self.leading() != *want {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Instant::now()
        }
        fn released(&self, c: &str) -> bool {
            self.shared[c].lock().unwrap().releases > 0
        }
        fn set_view(&self, view: &[&str]) {
            *self.members.view.lock().unwrap() = view.iter().map(|m| (*m).to_owned()).collect();
        }
    }

    fn mine(clusters: usize, view: &[&str]) -> BTreeSet<String> {
        let members: Vec<String> = view.iter().map(|m| (*m).to_owned()).collect();
        assign(&names("c", clusters), &members).into_iter().filter(|(_, m)| m == "a").map(|(c, _)| c).collect()
    }

    /// The review's finding: clusters let go were released one after another inline, each
    /// waiting for its tasks, and the membership was not renewed meanwhile (a replica letting
    /// several busy clusters go could be counted out, its other clusters moved).
    #[tokio::test(start_paused = true)]
    async fn clusters_let_go_are_released_together_while_the_membership_is_renewed() {
        let t = ElectionTimings::default();
        let stops_in = Duration::from_millis(2_500);
        let f = fleet(6, &["a"], stops_in);
        f.until_leading(&mine(6, &["a"])).await;
        assert_eq!(f.leading().len(), 6);
        let joined = Instant::now();
        f.set_view(&["a", "b", "c"]);
        let keep = mine(6, &["a", "b", "c"]);
        let gone: Vec<String> = names("c", 6).into_iter().filter(|c| !keep.contains(c)).collect();
        assert_eq!(gone.len(), 4);
        while f.leading().len() == 6 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let let_go = Instant::now();
        // A newcomer counts once seen for a lease duration: its clusters are not let go before
        // it stands for them (after its own grace).
        assert!(let_go - joined >= t.lease_duration, "let go {:?} after the view changed", let_go - joined);
        while !gone.iter().all(|c| f.released(c)) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let all_released = Instant::now() - let_go;
        assert!(
            all_released < stops_in + t.retry_period,
            "four clusters whose tasks take 2.5 s to stop released together: {all_released:?}"
        );
        assert!(keep.iter().all(|c| !f.released(c)));
        let beats = f.members.beats.lock().unwrap().clone();
        let longest = beats.windows(2).map(|w| w[1] - w[0]).max().unwrap();
        assert!(longest <= t.retry_period * 11 / 10, "the membership went {longest:?} without a heartbeat");
        f.stop.send_replace(true);
        let Fleet { task, shared, .. } = f;
        task.await.unwrap();
        let f = |c: &String| shared[c].lock().unwrap().releases > 0;
        assert!(names("c", 6).iter().all(f), "every lease released on stop");
    }

    /// The start-up memory spike of the fleet bench: the first replica took every cluster
    /// before the others had joined, then handed most of them over.
    #[tokio::test(start_paused = true)]
    async fn a_replica_started_with_others_does_not_take_every_cluster_first() {
        let f = fleet(6, &["a"], Duration::from_millis(500));
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        f.set_view(&["a", "b"]);
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        f.set_view(&["a", "b", "c"]);
        f.until_leading(&mine(6, &["a", "b", "c"])).await;
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(f.leading(), mine(6, &["a", "b", "c"]));
        let most = f.held.lock().unwrap().1;
        assert_eq!(most, 2, "held {most} clusters at once, its share is 2");
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_replica_takes_every_cluster_after_the_grace() {
        let t = ElectionTimings::default();
        let started = Instant::now();
        let f = fleet(6, &["a"], Duration::from_millis(500));
        tokio::time::sleep(t.lease_duration - Duration::from_millis(100)).await;
        assert!(f.leading().is_empty(), "stood before its view was stable for a lease duration");
        let all = f.until_leading(&names("c", 6).into_iter().collect()).await;
        assert!(all - started <= t.lease_duration + 2 * t.retry_period, "{:?}", all - started);
    }

    #[test]
    fn the_rank_is_stable_across_builds() {
        assert_eq!(rank("a", "b"), rank("a", "b"));
        assert_ne!(rank("ab", "c"), rank("a", "bc"), "the separator keeps (cluster, member) apart");
    }
}
