//! What a classifier predicts about a drift, and the port through which the API and the
//! runtime ask for it ([`Predictor`]).
//!
//! The model itself (`drift_engine::classify`: learned from the team's decisions, measured in
//! docs/decisions.md) implements [`Predictor`]; the API stands on this port alone, so that it
//! depends on the model and not on the engine.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::act::ActStore;
use crate::sink::{DriftStore, StoredDrift};

/// What people did with a drift, the class a classifier predicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Intent {
    /// The change was meant: accepted (a waiver, or taken into Git).
    Accept,
    /// The change was not meant: rejected, or the cluster put back.
    Revert,
    /// Seen and left as it is (acknowledged, and nothing more).
    Ignore,
}

impl Intent {
    /// The three classes, in the order of a prediction's probabilities.
    pub const ALL: [Intent; 3] = [Intent::Accept, Intent::Revert, Intent::Ignore];

    /// snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Intent::Accept => "accept",
            Intent::Revert => "revert",
            Intent::Ignore => "ignore",
        }
    }
}

/// One reason of a prediction, as shown.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReasonView {
    /// The feature ("field manager").
    pub feature: String,
    /// Its value in the drift.
    pub value: String,
    /// Decided drifts with that value.
    pub seen: u32,
    /// Of them, those with the predicted intent.
    pub agreeing: u32,
    /// "field manager kubectl-scale: 18 of 20 such decisions were accept".
    pub text: String,
}

/// The probability of each intent.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Probabilities {
    /// Accept.
    pub accept: f64,
    /// Revert.
    pub revert: f64,
    /// Ignore.
    pub ignore: f64,
}

/// What the classifier predicts for a drift, as shown and as used.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PredictionView {
    /// `accept`, `revert` or `ignore`.
    pub intent: Intent,
    /// Its probability, 0 to 1.
    pub confidence: f64,
    /// Every intent's probability.
    pub probabilities: Probabilities,
    /// The evidence, strongest first (at most three).
    pub reasons: Vec<ReasonView>,
    /// Decided drifts the model learned from (this one's own decisions left out).
    pub examples: u32,
    /// The confidence set in `classify.min_confidence`; `null` without `classify:`.
    pub min_confidence: Option<f64>,
    /// Whether the detector acts on it: `classify:` is set, the confidence is at least
    /// `min_confidence` and the model learned from at least `min_examples` decided drifts.
    pub used: bool,
    /// "accept (93%): field manager kubectl-scale: 18 of 20 such decisions were accept; ...".
    pub explanation: String,
}

impl PredictionView {
    /// Whether it is used and says `intent`.
    pub fn says(&self, intent: Intent) -> bool {
        self.used && self.intent == intent
    }
}

/// Predicts what the team will do with a drift, from what it did with others.
#[async_trait]
pub trait Predictor: Send + Sync + std::fmt::Debug {
    /// The prediction for `drift`, its own decisions left out; `None` when there is nothing to
    /// learn from yet.
    async fn predict(
        &self,
        store: &dyn DriftStore,
        act: &dyn ActStore,
        drift: &StoredDrift,
    ) -> crate::Result<Option<PredictionView>>;

    /// A decision was just recorded: the next prediction should learn from it (default:
    /// nothing to do).
    fn retrain(&self) {}
}
