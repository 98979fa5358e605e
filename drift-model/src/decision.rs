//! Decisions about drifts (acknowledge, accept with an expiry, reject), the waivers an accept
//! makes, the confidence learned from past decisions, and the port of a store that keeps them
//! ([`Decisions`]). docs/decisions.md describes the behaviour.

use std::fmt;
use std::str::FromStr;

use async_trait::async_trait;
use chrono::{DateTime, Duration, Timelike, Utc};
use serde::{Deserialize, Serialize};

use crate::Result;
use crate::drift::DriftType;
use crate::sink::StoredDrift;

/// What a person decides about a drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionAction {
    /// Someone is on it: reminders stop.
    Acknowledge,
    /// A waiver: the change is intended; the drift no longer counts as open until the waiver
    /// expires or the cluster value changes again.
    Accept,
    /// The change must be reverted.
    Reject,
}

impl DecisionAction {
    /// snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionAction::Acknowledge => "acknowledge",
            DecisionAction::Accept => "accept",
            DecisionAction::Reject => "reject",
        }
    }
}

impl FromStr for DecisionAction {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "acknowledge" | "ack" => Ok(DecisionAction::Acknowledge),
            "accept" => Ok(DecisionAction::Accept),
            "reject" => Ok(DecisionAction::Reject),
            _ => Err(crate::Error::invalid_input(format!("unknown decision {s:?} (acknowledge, accept, reject)"))),
        }
    }
}

/// How long a waiver lasts when the decision names no expiry.
pub const DEFAULT_WAIVER_DAYS: i64 = 7;

/// The longest waiver a decision may ask for.
pub const MAX_WAIVER_DAYS: i64 = 366;

/// The characters that show nothing, as inclusive ranges: Unicode White_Space, the control
/// characters (C0, DEL, C1), and the format and filler characters a text renders as nothing
/// (soft hyphen, zero-width space and joiners, direction marks, embeddings and isolates, word
/// joiner and invisible operators, variation selectors, byte order mark, Hangul and braille
/// blanks, Mongolian vowel separators, tags). A reason made only of these says nothing.
pub const INVISIBLE: [(char, char); 22] = [
    ('\u{0}', ' '),
    ('\u{7f}', '\u{a0}'),
    ('\u{ad}', '\u{ad}'),
    ('\u{34f}', '\u{34f}'),
    ('\u{61c}', '\u{61c}'),
    ('\u{115f}', '\u{1160}'),
    ('\u{1680}', '\u{1680}'),
    ('\u{17b4}', '\u{17b5}'),
    ('\u{180b}', '\u{180f}'),
    ('\u{2000}', '\u{200f}'),
    ('\u{2028}', '\u{202f}'),
    ('\u{205f}', '\u{206f}'),
    ('\u{2800}', '\u{2800}'),
    ('\u{3000}', '\u{3000}'),
    ('\u{3164}', '\u{3164}'),
    ('\u{fe00}', '\u{fe0f}'),
    ('\u{feff}', '\u{feff}'),
    ('\u{ffa0}', '\u{ffa0}'),
    ('\u{fff9}', '\u{fffb}'),
    ('\u{1bca0}', '\u{1bca3}'),
    ('\u{1d173}', '\u{1d17a}'),
    ('\u{e0000}', '\u{e0fff}'),
];

/// Whether `text` has at least one character outside [`INVISIBLE`]: what a comment or a reason
/// needs to count as one.
pub fn has_visible_text(text: &str) -> bool {
    text.chars().any(|c| !INVISIBLE.iter().any(|&(a, b)| (a..=b).contains(&c)))
}

/// A decision as asked for (the API body, the CLI's arguments).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewDecision {
    /// What is decided.
    pub action: DecisionAction,
    /// Why (shown with the drift and in the audit trail).
    #[serde(default)]
    pub comment: Option<String>,
    /// When a waiver (`accept`) ends; a waiver without one lasts [`DEFAULT_WAIVER_DAYS`].
    /// Refused on the other decisions, which last as long as the drift.
    #[serde(default)]
    pub expires_at: Option<DateTime<Utc>>,
    /// Who decides: the name of the API token, or the user running the CLI. Set by the caller,
    /// never taken from a request body.
    #[serde(skip_deserializing, default)]
    pub actor: String,
}

impl NewDecision {
    /// Checks the decision at `now` and fills in a waiver's default expiry: an expiry in the
    /// past, one further than [`MAX_WAIVER_DAYS`], one on a decision other than `accept`, or a
    /// comment over 2,000 characters is an invalid-input error; an `accept` without a comment
    /// is one too (a waiver has a reason), and so is one whose comment has no visible character
    /// (only white space, zero-width or other [`INVISIBLE`] characters).
    pub fn validate(mut self, now: DateTime<Utc>) -> Result<Self> {
        if self.comment.as_ref().is_some_and(|c| c.chars().count() > 2000) {
            return Err(crate::Error::invalid_input("comment is longer than 2000 characters"));
        }
        if let Some(at) = self.expires_at {
            if at <= now {
                return Err(crate::Error::invalid_input(format!("expires_at {at} is not in the future")));
            }
            if at > now + Duration::days(MAX_WAIVER_DAYS) {
                return Err(crate::Error::invalid_input(format!(
                    "expires_at is more than {MAX_WAIVER_DAYS} days away"
                )));
            }
        }
        if self.action != DecisionAction::Accept && self.expires_at.is_some() {
            return Err(crate::Error::invalid_input(format!(
                "expires_at applies to accept (a waiver) only; an {} lasts as long as the drift",
                self.action.as_str()
            )));
        }
        if self.action == DecisionAction::Accept {
            if !self.comment.as_deref().is_some_and(has_visible_text) {
                return Err(crate::Error::invalid_input("an accept (a waiver) needs a comment saying why"));
            }
            self.expires_at.get_or_insert(now + Duration::days(DEFAULT_WAIVER_DAYS));
        }
        Ok(self)
    }
}

/// A decision as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// Row id.
    pub id: i64,
    /// The drift.
    pub drift_id: i64,
    /// What was decided.
    pub action: DecisionAction,
    /// Why.
    pub comment: Option<String>,
    /// Who.
    pub actor: String,
    /// When.
    pub decided_at: DateTime<Utc>,
    /// When it ends (a waiver).
    pub expires_at: Option<DateTime<Utc>>,
}

/// The six-hour band of the day (UTC) a change fell in: 0 (00–06), 1, 2, 3. Part of what makes
/// two drifts "similar" for [`Learned`].
pub fn hour_band(at: DateTime<Utc>) -> u8 {
    (at.hour() / 6) as u8
}

/// What makes drifts similar for the learned classification: the same field manager,
/// namespace, drift type and band of the day.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Similarity {
    /// Field manager (empty when unknown).
    pub manager: String,
    /// Namespace.
    pub namespace: String,
    /// Drift type.
    pub drift_type: DriftType,
    /// [`hour_band`] of the change (or of the detection when the change time is unknown).
    pub band: u8,
}

impl Similarity {
    /// The similarity key of a stored drift.
    pub fn of(drift: &StoredDrift) -> Self {
        Similarity {
            manager: drift.changed_by.clone().unwrap_or_default(),
            namespace: drift.namespace.clone(),
            drift_type: drift.drift_type,
            band: hour_band(drift.changed_at.unwrap_or(drift.detected_at)),
        }
    }
}

/// The confidence learned from the team's decisions on similar drifts: the share accepted,
/// with a uniform prior (one accepted and one rejected imagined), so that 1 of 1 says 67%,
/// not 100%. Explainable: it says how many decisions it rests on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Learned {
    /// Similar drifts whose last decision was `accept`.
    pub accepted: u32,
    /// Similar drifts whose last decision was `reject`.
    pub rejected: u32,
    /// Probability that such a change is intentional, 0..=1.
    pub intentional: f64,
}

impl Learned {
    /// From counts of similar decisions; `None` without any (nothing learned yet).
    pub fn from_counts(accepted: u32, rejected: u32) -> Option<Self> {
        let n = accepted + rejected;
        (n > 0).then(|| Learned { accepted, rejected, intentional: (f64::from(accepted) + 1.0) / (f64::from(n) + 2.0) })
    }

    /// "likely intentional (75%, 2 of 2 similar changes accepted)".
    pub fn explain(&self) -> String {
        let n = self.accepted + self.rejected;
        let pct = (self.intentional * 100.0).round();
        if self.intentional >= 0.5 {
            format!("likely intentional ({pct}%, {} of {n} similar changes accepted)", self.accepted)
        } else {
            format!("likely unintended ({:.0}%, {} of {n} similar changes rejected)", 100.0 - pct, self.rejected)
        }
    }
}

/// The decision a waiver written in Git makes on a drift that is not resolved: an `accept` by
/// `git:<owner>`, for its reason, until its expiry, with the audit detail naming the path and the
/// scan that read it; `None` when the drift is waived so already (by the same owner, to the same
/// time). Both the SQL stores and the in-memory store apply it as a person's accept.
pub fn git_waiver_decision(
    waiver: &crate::waiver::Waiver,
    drift: &StoredDrift,
    scan_id: &str,
) -> Option<(NewDecision, serde_json::Value)> {
    let actor = format!("git:{}", waiver.owner);
    let same = drift.status == crate::sink::DriftStatus::Waived
        && drift.waived_until == Some(waiver.expires_at)
        && drift.waived_by.as_deref() == Some(actor.as_str());
    if same {
        return None;
    }
    let decision = NewDecision {
        action: DecisionAction::Accept,
        comment: Some(waiver.reason.clone()),
        expires_at: Some(waiver.expires_at),
        actor,
    };
    Some((decision, serde_json::json!({"source": "git", "path": waiver.path, "scan_id": scan_id})))
}

/// Decisions about drifts, and the waivers they make: a decision, its effect on the drift and
/// its audit entry are written in one transaction (checked by `drift_testkit::act_suite!` on
/// the in-memory store, SQLite and PostgreSQL).
#[async_trait]
pub trait Decisions: Send + Sync + fmt::Debug {
    /// Ends the waivers that expired at `now`: the drifts count as open again, with a
    /// `waiver_expired` event and an audit entry each. Returns how many.
    async fn expire_waivers(&self, now: DateTime<Utc>) -> Result<usize>;

    /// Records a decision about a drift at `now` (already [`NewDecision::validate`]d): the
    /// decision row, its effect (an `accept` waives the drift until it expires, an
    /// `acknowledge` stops reminders, a `reject` recommends a revert), `decision_source =
    /// human`, and an audit entry, in one transaction. `NotFound` for an unknown drift;
    /// `InvalidInput` for a resolved one.
    async fn decide(&self, drift_id: i64, decision: &NewDecision, now: DateTime<Utc>) -> Result<Decision>;

    /// The decisions about a drift, oldest first.
    async fn decisions(&self, drift_id: i64) -> Result<Vec<Decision>>;

    /// What the decisions on drifts similar to this one ([`Similarity`]; the drift's own
    /// decisions left out) teach: how many were last accepted and rejected.
    async fn similar(&self, drift: &StoredDrift) -> Result<Option<Learned>>;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn accept(comment: &str) -> NewDecision {
        NewDecision {
            action: DecisionAction::Accept,
            comment: Some(comment.to_owned()),
            expires_at: None,
            actor: "test".to_owned(),
        }
    }

    /// Regression (issue 37, item 6): a comment of zero-width characters counted as a waiver's
    /// reason; it was only trimmed of white space.
    #[test]
    fn a_comment_of_invisible_characters_is_no_reason() {
        let now = Utc::now();
        for blank in [
            "",
            "  \t\n",
            "\u{200b}",
            "\u{200b}\u{200c}\u{200d}\u{2060}\u{feff}",
            "\u{ad}\u{3164}\u{2800}",
            "\u{e0041}\u{fe0f}\u{202e}",
        ] {
            let err = accept(blank).validate(now).unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::InvalidInput, "{blank:?}");
            assert!(!has_visible_text(blank), "{blank:?}");
        }
        for reason in ["ok", "\u{200b}x\u{200b}", "é", "変更", "👍"] {
            assert!(accept(reason).validate(now).is_ok(), "{reason:?}");
            assert!(has_visible_text(reason), "{reason:?}");
        }
    }

    #[test]
    fn the_invisible_ranges_are_sorted_apart_and_hold_every_white_space() {
        assert!(INVISIBLE.windows(2).all(|w| w[0].1 < w[1].0), "sorted, not overlapping");
        assert!(INVISIBLE.iter().all(|&(a, b)| a <= b));
        for c in (0..=0x10ffff).filter_map(char::from_u32).filter(|c| c.is_whitespace() || c.is_control()) {
            assert!(!has_visible_text(&c.to_string()), "{:x}", c as u32);
        }
    }
}
