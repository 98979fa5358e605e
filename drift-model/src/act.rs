//! Acting on drift: the three ports a store implements to act ([`Outbox`], [`Decisions`],
//! [`AuditLog`]) and [`ActStore`], the three together, which every type implementing them is.
//! The types live in [`crate::outbox`], [`crate::decision`] and [`crate::audit`] and are
//! re-exported here. Both SQL stores and the in-memory store implement all three;
//! docs/notifications.md and docs/decisions.md describe the behaviour.

pub use crate::audit::*;
pub use crate::decision::*;
pub use crate::outbox::*;

/// The side of a store that acts on drift: its outbox, its decisions and its audit trail. Any
/// type that implements the three ports is one; code that needs only one asks for that one.
pub trait ActStore: Outbox + Decisions + AuditLog {}

impl<T: Outbox + Decisions + AuditLog + ?Sized> ActStore for T {}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, TimeZone, Utc};

    #[test]
    fn event_ids_are_stable_and_tell_batches_subjects_and_kinds_apart() {
        let a = event_id("scan-1", "7", EventKind::Opened);
        assert_eq!(a, event_id("scan-1", "7", EventKind::Opened));
        assert_eq!(a.len(), 32);
        assert_ne!(a, event_id("scan-1", "7", EventKind::Resolved));
        assert_ne!(a, event_id("scan-17", "", EventKind::Opened), "length-prefixed parts");
        assert_ne!(a, event_id("scan-2", "7", EventKind::Opened));
    }

    #[test]
    fn a_waiver_needs_a_reason_and_gets_a_default_expiry() {
        let now = Utc.with_ymd_and_hms(2026, 12, 1, 9, 0, 0).unwrap();
        let accept = |comment: Option<&str>, expires_at| NewDecision {
            action: DecisionAction::Accept,
            comment: comment.map(str::to_owned),
            expires_at,
            actor: "alice".into(),
        };
        assert!(accept(None, None).validate(now).is_err());
        assert!(accept(Some("  "), None).validate(now).is_err());
        let ok = accept(Some("hotfix"), None).validate(now).unwrap();
        assert_eq!(ok.expires_at, Some(now + Duration::days(DEFAULT_WAIVER_DAYS)));
        assert!(accept(Some("x"), Some(now - Duration::seconds(1))).validate(now).is_err());
        assert!(accept(Some("x"), Some(now + Duration::days(MAX_WAIVER_DAYS + 1))).validate(now).is_err());
        let ack =
            NewDecision { action: DecisionAction::Acknowledge, comment: None, expires_at: None, actor: "a".into() };
        assert_eq!(ack.clone().validate(now).unwrap(), ack, "an acknowledgement needs nothing more");
    }

    #[test]
    fn learned_confidence_has_a_prior_and_explains_itself() {
        assert_eq!(Learned::from_counts(0, 0), None);
        let l = Learned::from_counts(10, 2).unwrap();
        assert!((l.intentional - 11.0 / 14.0).abs() < 1e-9);
        assert_eq!(l.explain(), "likely intentional (79%, 10 of 12 similar changes accepted)");
        let r = Learned::from_counts(1, 5).unwrap();
        assert_eq!(r.explain(), "likely unintended (75%, 5 of 6 similar changes rejected)");
        assert!((Learned::from_counts(1, 0).unwrap().intentional - 2.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn bands_split_the_day_in_four() {
        let at = |h| Utc.with_ymd_and_hms(2026, 12, 1, h, 59, 0).unwrap();
        assert_eq!([0, 5, 6, 11, 12, 18, 23].map(|h| hour_band(at(h))), [0, 0, 1, 1, 2, 3, 3]);
    }

    #[test]
    fn kinds_round_trip_and_unknown_ones_are_named() {
        for k in EventKind::ALL {
            assert_eq!(k.as_str().parse::<EventKind>().unwrap(), k);
            assert_eq!(serde_json::to_value(k).unwrap(), serde_json::json!(k.as_str()));
        }
        assert!("bogus".parse::<EventKind>().unwrap_err().to_string().contains("waiver_expired"));
        for a in AuditAction::ALL {
            assert_eq!(a.as_str().parse::<AuditAction>().unwrap(), a);
        }
    }
}
