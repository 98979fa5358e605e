//! Leader election, without I/O: the record a lease holds (client-go's
//! `LeaderElectionRecord`: holder, duration, acquire and renew times, transitions), the
//! decision of one attempt to acquire or renew it ([`decide`]), and the [`LeaseLock`] trait a
//! backend implements (`drift-kube` keeps the record in a `coordination.k8s.io/v1`
//! Lease, with optimistic concurrency on its `resourceVersion`).
//!
//! Expiry is judged on the candidate's own clock, as client-go does: a lease held by another
//! is free once its record has not changed for its `lease_duration` since this candidate first
//! saw it (`observed_at`), so clocks of different machines never need to agree. A lock that can
//! watch its lease ([`LeaseLock::can_watch`]) sees each change as it is written, so a standby's
//! expiry counts from the holder's last renewal rather than from its own next read, and it can
//! try at the moment the claim ends (or the lease is released) instead of polling.

use std::fmt::Debug;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::Result;

/// What a lease says: who holds it, for how long, since when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    /// The holder's identity; `None` (or empty) when the lease is free (released).
    pub holder: Option<String>,
    /// How long the holder's claim lasts after its last renewal.
    pub lease_duration: Duration,
    /// When the holder acquired the lease.
    pub acquire_time: Option<DateTime<Utc>>,
    /// When the holder last renewed it.
    pub renew_time: Option<DateTime<Utc>>,
    /// How many times the lease changed hands.
    pub transitions: i32,
}

impl LeaseRecord {
    /// The holder, when there is one (an empty identity is no holder).
    pub fn holder(&self) -> Option<&str> {
        self.holder.as_deref().filter(|h| !h.is_empty())
    }

    /// The record of a release by its holder at `now` (client-go's): no holder, a one-second
    /// duration, the transitions kept.
    pub fn released(&self, now: DateTime<Utc>) -> LeaseRecord {
        LeaseRecord {
            holder: None,
            lease_duration: Duration::from_secs(1),
            acquire_time: Some(now),
            renew_time: Some(now),
            transitions: self.transitions,
        }
    }
}

/// The next step of one attempt, from [`decide`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The candidate holds the lease: write this record (a renewal) to keep it.
    Renew(LeaseRecord),
    /// The lease is free or expired: write this record (a new term) to take it.
    Acquire(LeaseRecord),
    /// Another holder's claim is still valid until `expires` (on the candidate's clock).
    Held {
        /// The holder.
        holder: String,
        /// When its claim ends unless it renews.
        expires: DateTime<Utc>,
    },
}

/// One attempt of `identity` at `now`, claiming `duration`: given the `current` record (none
/// when no lease exists yet) and when this candidate first saw it unchanged (`observed_at`),
/// what to write, or who holds the lease.
pub fn decide(
    identity: &str,
    current: Option<&LeaseRecord>,
    observed_at: DateTime<Utc>,
    now: DateTime<Utc>,
    duration: Duration,
) -> Step {
    let new_term = |transitions: i32| LeaseRecord {
        holder: Some(identity.to_owned()),
        lease_duration: duration,
        acquire_time: Some(now),
        renew_time: Some(now),
        transitions,
    };
    let Some(current) = current else { return Step::Acquire(new_term(0)) };
    match current.holder() {
        Some(holder) if holder == identity => Step::Renew(LeaseRecord {
            holder: Some(identity.to_owned()),
            lease_duration: duration,
            acquire_time: current.acquire_time.or(Some(now)),
            renew_time: Some(now),
            transitions: current.transitions,
        }),
        Some(holder) => {
            let claim = chrono::Duration::from_std(current.lease_duration).unwrap_or(chrono::Duration::MAX);
            let expires = observed_at.checked_add_signed(claim).unwrap_or(DateTime::<Utc>::MAX_UTC);
            if now < expires {
                Step::Held { holder: holder.to_owned(), expires }
            } else {
                Step::Acquire(new_term(current.transitions.saturating_add(1)))
            }
        }
        None => Step::Acquire(new_term(current.transitions.saturating_add(1))),
    }
}

/// The answer of one attempt of [`LeaseLock::try_acquire_or_renew`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// This candidate holds the lease now; `acquired` when this attempt took it (a new term),
    /// false when it renewed it.
    Leading {
        /// Whether this attempt began a new term.
        acquired: bool,
    },
    /// Another candidate holds it.
    Standby {
        /// Who holds it.
        holder: String,
        /// When its claim ends on this candidate's clock unless it renews (the `expires` of
        /// [`Step::Held`]): the earliest moment a new attempt can take the lease.
        expires: DateTime<Utc>,
    },
}

/// What a watch on the lease saw, judged on this candidate's clock ([`LeaseLock::changed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Watched {
    /// Another candidate holds the lease (it took or renewed it); its claim ends at `expires`
    /// unless it renews again.
    Held {
        /// Who holds it.
        holder: String,
        /// When its claim ends, counted from the moment this candidate saw the change.
        expires: DateTime<Utc>,
    },
    /// The lease may be taken now: it was released or deleted, its claim ran out, or it names
    /// this candidate. The next attempt decides.
    Open,
    /// The watch ended (a server-side timeout, a dropped connection, a version too old to
    /// resume from): nothing was seen; the next call starts it again.
    Ended,
}

impl Watched {
    /// How a watched `record` (none: the lease was deleted), first seen at `observed_at`, looks
    /// to `identity` at `now`.
    pub fn judge(identity: &str, record: Option<&LeaseRecord>, observed_at: DateTime<Utc>, now: DateTime<Utc>) -> Self {
        // The duration only shapes the record a new term would write: any will do here.
        match decide(identity, record, observed_at, now, Duration::from_secs(1)) {
            Step::Held { holder, expires } => Watched::Held { holder, expires },
            Step::Renew(_) | Step::Acquire(_) => Watched::Open,
        }
    }
}

/// Where a lease is kept, and one candidate's attempts on it.
///
/// Contract: an attempt writes only with optimistic concurrency (a compare-and-swap on the
/// record's version), so that two candidates never both win the same term; a lost race is
/// [`Attempt::Standby`] or a [`crate::ErrorKind::Conflict`] error, never `Leading`. `release`
/// frees the lease only if this candidate holds it. A watch ([`LeaseLock::changed`]) only
/// wakes a standby and dates what it saw; it never decides who leads: every attempt still
/// reads (or writes with its compare-and-swap) the lease itself.
#[async_trait]
pub trait LeaseLock: Send + Sync + Debug {
    /// This candidate's identity (a pod name, or host and process id).
    fn identity(&self) -> &str;

    /// What the lease is, for logs (`Lease drift/drift-detector`).
    fn describe(&self) -> String;

    /// One attempt at `now` (client-go's `tryAcquireOrRenew`): takes a free or expired lease,
    /// renews this candidate's own, or says who holds it.
    async fn try_acquire_or_renew(&self, now: DateTime<Utc>) -> Result<Attempt>;

    /// Gives the lease up at `now` if this candidate holds it, so a standby takes over at once.
    async fn release(&self, now: DateTime<Utc>) -> Result<()>;

    /// Whether [`LeaseLock::changed`] reports changes (a capability; default: no, and the
    /// elector polls every retry period).
    fn can_watch(&self) -> bool {
        false
    }

    /// Waits for the next change of the lease (a renewal, a new holder, a release, a deletion)
    /// and says what it means for this candidate, dating it with `clock()` when it arrives, as
    /// an attempt would have: the expiry of a renewal seen here counts from this moment.
    /// Resumes from the last version seen; [`Watched::Ended`] when the stream ended, an error
    /// when the watch could not be started (the elector then polls for a while). Cancel-safe:
    /// dropping the future loses no change it had not returned. Never called while this
    /// candidate leads. The default (no watch) is an `unsupported` error.
    async fn changed(&self, clock: &(dyn Fn() -> DateTime<Utc> + Send + Sync)) -> Result<Watched> {
        let _ = clock;
        Err(crate::Error::unsupported(format!("{}: this lease cannot be watched", self.describe())))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap()
    }
    const D: Duration = Duration::from_secs(15);

    fn held_by(who: &str, renewed: i64) -> LeaseRecord {
        LeaseRecord {
            holder: Some(who.to_owned()),
            lease_duration: D,
            acquire_time: Some(at(0)),
            renew_time: Some(at(renewed)),
            transitions: 3,
        }
    }

    #[test]
    fn no_lease_is_acquired_with_no_transition() {
        let Step::Acquire(r) = decide("a", None, at(0), at(5), D) else { panic!() };
        assert_eq!((r.holder(), r.transitions, r.acquire_time, r.renew_time), (Some("a"), 0, Some(at(5)), Some(at(5))));
    }

    #[test]
    fn the_holder_renews_keeping_its_acquire_time() {
        let Step::Renew(r) = decide("a", Some(&held_by("a", 4)), at(4), at(9), D) else { panic!() };
        assert_eq!((r.acquire_time, r.renew_time, r.transitions), (Some(at(0)), Some(at(9)), 3));
    }

    #[test]
    fn another_holder_keeps_it_until_the_duration_passed_since_it_was_observed() {
        // Observed at 10 on this candidate's clock, whatever the holder's renew time says.
        let lease = held_by("a", 1000);
        assert_eq!(
            decide("b", Some(&lease), at(10), at(24), D),
            Step::Held { holder: "a".to_owned(), expires: at(25) }
        );
        assert_eq!(
            Watched::judge("b", Some(&lease), at(10), at(24)),
            Watched::Held { holder: "a".to_owned(), expires: at(25) }
        );
        assert_eq!(Watched::judge("b", Some(&lease), at(10), at(25)), Watched::Open, "its claim ran out");
        assert_eq!(Watched::judge("a", Some(&lease), at(10), at(12)), Watched::Open, "its own");
        let Step::Acquire(r) = decide("b", Some(&lease), at(10), at(25), D) else { panic!() };
        assert_eq!((r.holder(), r.transitions, r.acquire_time), (Some("b"), 4, Some(at(25))));
    }

    #[test]
    fn a_released_lease_is_free_at_once() {
        let released = held_by("a", 4).released(at(5));
        assert_eq!((released.holder(), released.transitions), (None, 3));
        let Step::Acquire(r) = decide("b", Some(&released), at(5), at(5), D) else { panic!() };
        assert_eq!((r.holder(), r.transitions), (Some("b"), 4));
        let empty = LeaseRecord { holder: Some(String::new()), ..held_by("x", 0) };
        assert!(matches!(decide("b", Some(&empty), at(0), at(0), D), Step::Acquire(_)), "an empty holder is none");
        assert_eq!(Watched::judge("b", Some(&released), at(5), at(5)), Watched::Open);
        assert_eq!(Watched::judge("b", None, at(5), at(5)), Watched::Open, "deleted");
    }
}
