//! One drift with what people decided about it, what was sent about it and what similar
//! decisions teach: the answer of `GET /drifts/{id}` and of `drift drifts get`.

use drift_model::act::{ActStore, Decision, DeliveryRecord, Learned};
use drift_model::prediction::{PredictionView, Predictor};
use drift_model::sink::{DriftStore, PageRequest, StoredDrift};
use serde::Serialize;

/// How many deliveries a drift shows, newest first.
pub const DETAIL_NOTIFICATIONS: u32 = 50;

/// A drift with its decisions, its notifications and the learned confidence. The drift's own
/// fields stay at the top level (as `GET /drifts` lists them), so a client that reads only
/// those keeps working.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DriftDetail {
    /// The drift.
    #[serde(flatten)]
    pub drift: StoredDrift,
    /// Its decisions, oldest first.
    pub decisions: Vec<Decision>,
    /// Its deliveries to notifiers, newest first, at most [`DETAIL_NOTIFICATIONS`].
    pub notifications: Vec<DeliveryRecord>,
    /// What the decisions on similar drifts teach; `null` with none (or a store that keeps no
    /// decisions).
    pub learned: Option<LearnedView>,
    /// What the classifier predicts the team will do (accept, revert, ignore), with its
    /// confidence and reasons, the drift's own decisions left out; `null` before any decision
    /// (or with a store that keeps no decisions, or with no predictor).
    pub prediction: Option<PredictionView>,
}

/// [`Learned`] with its explanation, as shown.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LearnedView {
    /// Similar drifts last accepted.
    pub accepted: u32,
    /// Similar drifts last rejected.
    pub rejected: u32,
    /// Probability that such a change is intentional, 0 to 1.
    pub intentional: f64,
    /// "likely intentional (79%, 10 of 12 similar changes accepted)".
    pub explanation: String,
}

impl From<Learned> for LearnedView {
    fn from(l: Learned) -> Self {
        LearnedView { accepted: l.accepted, rejected: l.rejected, intentional: l.intentional, explanation: l.explain() }
    }
}

/// Reads a drift and, when the store keeps them (`act`), its decisions, its newest
/// notifications, the learned confidence and the prediction of `predictor` (the runtime gives
/// `drift_engine::classify::Classifier`). `NotFound` for an unknown id.
pub async fn drift_detail(
    store: &dyn DriftStore,
    act: Option<&dyn ActStore>,
    predictor: Option<&dyn Predictor>,
    id: i64,
) -> drift_model::Result<DriftDetail> {
    let drift = store.get(id).await?;
    let Some(act) = act else {
        return Ok(DriftDetail {
            drift,
            decisions: Vec::new(),
            notifications: Vec::new(),
            learned: None,
            prediction: None,
        });
    };
    let decisions = act.decisions(id).await?;
    let mut notifications =
        act.deliveries(Some(id), None, PageRequest { limit: DETAIL_NOTIFICATIONS, after: None }).await?;
    // A page holds whole events: one event to several notifiers can go past the limit.
    notifications.truncate(DETAIL_NOTIFICATIONS as usize);
    let learned = act.similar(&drift).await?.map(LearnedView::from);
    let prediction = match predictor {
        Some(p) => p.predict(store, act, &drift).await?,
        None => None,
    };
    Ok(DriftDetail { drift, decisions, notifications, learned, prediction })
}
