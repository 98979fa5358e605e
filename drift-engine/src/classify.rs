//! A classifier learned from the team's decisions: for a drift, is the change likely to be
//! accepted into Git, reverted, or left alone? Small and explainable on purpose: a categorical
//! naive Bayes over eight features of the drift and one pair of them ([`Features`]), with add-one smoothing, whose
//! every prediction carries the evidence it rests on ([`Reason`]: "field manager
//! kubectl-scale: 18 of 20 such decisions were accept").
//!
//! It learns from what people did ([`intent_of`]: the last decision on a drift, or how it was
//! resolved) and is measured honestly by [`evaluate`]: a held-out share of the examples,
//! precision and recall per class, and how many predictions clear a confidence threshold and how
//! often those are right. docs/decisions.md has the figures; a test fails if they fall.
//!
//! [`Classifier`] is the model of a running process: trained from a store's decisions through
//! its ports ([`train_from_store`]; no I/O of its own), kept for a bounded time, and asked for a
//! [`PredictionView`] that says whether the detector acts on it ([`ClassifySettings`]).
//!
//! ```
//! use drift_engine::classify::{Features, Intent, Model};
//! let change = |manager: &str, namespace: &str| Features {
//!     manager: manager.into(), drift_type: "replicas_drift".into(), kind: "Deployment".into(),
//!     namespace: namespace.into(), path: "spec.replicas".into(), hour_band: 2, weekend: false, repeated: 1,
//! };
//! let mut examples: Vec<_> = (0..10).map(|_| (change("kubectl-scale", "batch"), Intent::Accept)).collect();
//! examples.extend((0..10).map(|_| (change("kubectl-edit", "prod"), Intent::Revert)));
//! let model = Model::train(&examples);
//! let p = model.predict(&change("kubectl-scale", "batch")).unwrap();
//! assert_eq!(p.intent, Intent::Accept);
//! assert!(p.confidence > 0.9);
//! assert_eq!(p.reasons[0].to_string(), "field manager kubectl-scale: 10 of 10 such decisions were accept");
//! //! ```
use std::collections::HashMap;
use std::fmt;

use std::sync::Arc;

use chrono::{DateTime, Datelike, Timelike, Utc, Weekday};
use drift_model::Resolution;
use drift_model::act::{ActStore, AuditAction, AuditFilter};
use drift_model::decision::{Decision, DecisionAction};
use drift_model::sink::{DriftStatus, DriftStore, PageRequest, StoredDrift};
use serde::{Deserialize, Serialize};

pub use drift_model::prediction::{Intent, PredictionView, Predictor, Probabilities, ReasonView};

/// The position of an intent in [`Intent::ALL`] (and in a prediction's probabilities).
fn index(intent: Intent) -> usize {
    match intent {
        Intent::Accept => 0,
        Intent::Revert => 1,
        Intent::Ignore => 2,
    }
}

/// The label of a drift for learning: its last `accept` or `reject`, else how it was resolved
/// (`accepted`: Git was changed; `reverted`: the cluster was put back), else an acknowledgement
/// (ignore); `None` when nobody did anything (nothing to learn).
pub fn intent_of(drift: &StoredDrift, decisions: &[Decision]) -> Option<Intent> {
    let mut ordered: Vec<&Decision> = decisions.iter().filter(|d| d.drift_id == drift.id).collect();
    ordered.sort_by_key(|d| (d.decided_at, d.id));
    let last = |a: DecisionAction| ordered.iter().rev().find(|d| d.action == a).map(|d| (d.decided_at, d.id));
    match (last(DecisionAction::Accept), last(DecisionAction::Reject)) {
        (Some(a), Some(r)) => return Some(if a > r { Intent::Accept } else { Intent::Revert }),
        (Some(_), None) => return Some(Intent::Accept),
        (None, Some(_)) => return Some(Intent::Revert),
        (None, None) => {}
    }
    match (drift.status, drift.resolution) {
        (DriftStatus::Resolved, Some(Resolution::Accepted)) => Some(Intent::Accept),
        (DriftStatus::Resolved, Some(Resolution::Reverted)) => Some(Intent::Revert),
        _ if ordered.iter().any(|d| d.action == DecisionAction::Acknowledge) => Some(Intent::Ignore),
        _ => None,
    }
}

/// What the model looks at in a drift: who changed what, where, when, and how often.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Features {
    /// The field manager (`kubectl-edit`, `helm`, ...; empty when unknown).
    pub manager: String,
    /// The drift type.
    pub drift_type: String,
    /// The object's kind.
    pub kind: String,
    /// The namespace (empty for cluster-scoped objects).
    pub namespace: String,
    /// The path with list keys left out (`spec.template.spec.containers[].image`).
    pub path: String,
    /// The six-hour band of the day (UTC) of the change: 0 (00–06) to 3 (18–24).
    pub hour_band: u8,
    /// Whether the change was made on a Saturday or Sunday (UTC).
    pub weekend: bool,
    /// How often the drift was seen: 1, 2 (2–4 times) or 3 (5 or more).
    pub repeated: u8,
}

impl Features {
    /// The features of a stored drift (the change time, else the detection time).
    pub fn of(drift: &StoredDrift) -> Features {
        let at: DateTime<Utc> = drift.changed_at.unwrap_or(drift.detected_at);
        Features {
            manager: drift.changed_by.clone().unwrap_or_default(),
            drift_type: drift.drift_type.as_str().to_owned(),
            kind: drift.resource_kind.clone(),
            namespace: drift.namespace.clone(),
            path: without_list_keys(&drift.path),
            hour_band: (at.hour() / 6) as u8,
            weekend: matches!(at.weekday(), Weekday::Sat | Weekday::Sun),
            repeated: match drift.occurrences {
                ..=1 => 1,
                2..=4 => 2,
                _ => 3,
            },
        }
    }

    /// The features as (name, value) pairs, in a fixed order.
    fn values(&self) -> [(&'static str, String); FEATURES] {
        [
            ("field manager", self.manager.clone()),
            ("drift type", self.drift_type.clone()),
            ("kind", self.kind.clone()),
            ("namespace", self.namespace.clone()),
            // Who changes what where: a team's habits are often of one tool in one namespace.
            ("field manager in namespace", format!("{} in {}", self.manager, self.namespace)),
            ("path", self.path.clone()),
            ("hour (UTC)", format!("{:02}–{:02}", self.hour_band * 6, self.hour_band * 6 + 6)),
            ("day", if self.weekend { "weekend" } else { "weekday" }.to_owned()),
            (
                "seen",
                match self.repeated {
                    1 => "once",
                    2 => "2–4 times",
                    _ => "5 times or more",
                }
                .to_owned(),
            ),
        ]
    }
}

const FEATURES: usize = 9;

/// `a.b[name=x].c` -> `a.b[].c`.
fn without_list_keys(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut depth = 0usize;
    for c in path.chars() {
        match c {
            '[' => {
                if depth == 0 {
                    out.push('[');
                }
                depth += 1;
            }
            ']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    out.push(']');
                }
            }
            _ if depth > 0 => {}
            _ => out.push(c),
        }
    }
    out
}

/// One piece of evidence behind a prediction: among the training examples with this feature's
/// value, how many had the predicted intent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reason {
    /// The feature's name ("field manager").
    pub feature: &'static str,
    /// Its value in the drift.
    pub value: String,
    /// Training examples with that value.
    pub seen: u32,
    /// Of them, those with the predicted intent.
    pub agreeing: u32,
    /// The intent.
    pub intent: Intent,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = if self.value.is_empty() { "(none)" } else { &self.value };
        write!(
            f,
            "{} {value}: {} of {} such decisions were {}",
            self.feature,
            self.agreeing,
            self.seen,
            self.intent.as_str()
        )
    }
}

/// What the model says about one drift.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    /// The most likely intent.
    pub intent: Intent,
    /// Its probability, 0..=1.
    pub confidence: f64,
    /// The probability of each intent, in the order of [`Intent::ALL`].
    pub probabilities: [f64; 3],
    /// The evidence, strongest first (at most three features that speak for the intent).
    pub reasons: Vec<Reason>,
    /// How many decisions the model learned from.
    pub examples: u32,
}

/// The learned model: counts per class and per (feature, value, class).
#[derive(Debug, Clone, Default)]
pub struct Model {
    classes: [u32; 3],
    counts: Vec<HashMap<String, [u32; 3]>>,
}

impl Model {
    /// Learns from labelled examples.
    pub fn train(examples: &[(Features, Intent)]) -> Model {
        let mut model = Model { classes: [0; 3], counts: vec![HashMap::new(); FEATURES] };
        for (features, intent) in examples {
            let i = index(*intent);
            model.classes[i] += 1;
            for (f, (_, value)) in features.values().into_iter().enumerate() {
                model.counts[f].entry(value).or_default()[i] += 1;
            }
        }
        model
    }

    /// The model without one of the examples it learned from (`features` with `intent`): how a
    /// drift's own decision is left out of its prediction, so that the prediction is not an
    /// echo of it. Forgetting an example never learned leaves counts at zero, never below.
    pub fn forget(&mut self, features: &Features, intent: Intent) {
        let i = index(intent);
        if self.classes[i] == 0 {
            return;
        }
        self.classes[i] -= 1;
        for (f, (_, value)) in features.values().into_iter().enumerate() {
            if let Some(counts) = self.counts[f].get_mut(&value) {
                counts[i] = counts[i].saturating_sub(1);
                if counts.iter().all(|c| *c == 0) {
                    self.counts[f].remove(&value);
                }
            }
        }
    }

    /// How many examples it learned from.
    pub fn examples(&self) -> u32 {
        self.classes.iter().sum()
    }

    /// The most likely intent of a drift with these features, with its probability and reasons;
    /// `None` before any example.
    pub fn predict(&self, features: &Features) -> Option<Prediction> {
        let total = self.examples();
        if total == 0 {
            return None;
        }
        let values = features.values();
        let mut log = [0f64; 3];
        for (c, l) in log.iter_mut().enumerate() {
            // Add-one smoothing: a class never seen still has a chance; so has an unseen value.
            *l = (f64::from(self.classes[c]) + 1.0).ln() - (f64::from(total) + 3.0).ln();
            for (f, (_, value)) in values.iter().enumerate() {
                let distinct = self.counts[f].len() as f64 + 1.0;
                let n = self.counts[f].get(value).map_or(0, |counts| counts[c]);
                *l += (f64::from(n) + 1.0).ln() - (f64::from(self.classes[c]) + distinct).ln();
            }
        }
        let max = log.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let exp: Vec<f64> = log.iter().map(|l| (l - max).exp()).collect();
        let sum: f64 = exp.iter().sum();
        let probabilities = [exp[0] / sum, exp[1] / sum, exp[2] / sum];
        let best = (0..3).max_by(|a, b| probabilities[*a].total_cmp(&probabilities[*b])).unwrap_or(0);
        let intent = Intent::ALL[best];
        let mut reasons: Vec<(f64, Reason)> = values
            .into_iter()
            .enumerate()
            .filter_map(|(f, (feature, value))| {
                let counts = self.counts[f].get(&value)?;
                let seen: u32 = counts.iter().sum();
                let agreeing = counts[best];
                // How much more often this value goes with the intent than the intent alone.
                let lift = (f64::from(agreeing) + 1.0)
                    / (f64::from(seen) + 3.0)
                    / ((f64::from(self.classes[best]) + 1.0) / (f64::from(total) + 3.0));
                (agreeing > 0 && lift > 1.0)
                    .then_some((lift * f64::from(agreeing).ln_1p(), Reason { feature, value, seen, agreeing, intent }))
            })
            .collect();
        reasons.sort_by(|a, b| b.0.total_cmp(&a.0));
        let reasons = reasons.into_iter().take(3).map(|(_, r)| r).collect();
        Some(Prediction { intent, confidence: probabilities[best], probabilities, reasons, examples: total })
    }
}

/// Precision and recall of one class on the held-out examples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ClassScore {
    /// The class.
    pub intent: Intent,
    /// Held-out examples of that class.
    pub support: u32,
    /// Of the predictions of this class, the share that were right (1 when never predicted).
    pub precision: f64,
    /// Of the examples of this class, the share predicted so.
    pub recall: f64,
}

/// How well the model does on examples it did not learn from ([`evaluate`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evaluation {
    /// Examples learned from.
    pub trained: u32,
    /// Examples held out.
    pub tested: u32,
    /// Share of held-out examples predicted right.
    pub accuracy: f64,
    /// Per class, in the order of [`Intent::ALL`].
    pub classes: [ClassScore; 3],
    /// The confidence threshold of the two figures below.
    pub threshold: f64,
    /// Share of held-out examples whose prediction clears the threshold (what the detector would
    /// act on).
    pub coverage: f64,
    /// Share of those that were right.
    pub precision_above: f64,
}

/// Trains on all examples but a held-out share (every example whose position, hashed, falls in
/// the share: the same split for the same list) and measures the model on the rest.
pub fn evaluate(examples: &[(Features, Intent)], holdout: f64, threshold: f64) -> Evaluation {
    let held = |i: usize| {
        // A fixed multiplicative hash of the position: spread, repeatable, no randomness.
        let h = (i as u64).wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11;
        (h as f64 / (1u64 << 53) as f64) < holdout
    };
    let (mut train, mut test) = (Vec::new(), Vec::new());
    for (i, e) in examples.iter().enumerate() {
        if held(i) { test.push(e) } else { train.push(e.clone()) }
    }
    let model = Model::train(&train);
    let mut confusion = [[0u32; 3]; 3];
    let (mut above, mut above_right) = (0u32, 0u32);
    for (features, truth) in &test {
        let Some(p) = model.predict(features) else { continue };
        confusion[index(*truth)][index(p.intent)] += 1;
        if p.confidence >= threshold {
            above += 1;
            above_right += u32::from(p.intent == *truth);
        }
    }
    let tested = test.len() as u32;
    let ratio = |a: u32, b: u32| if b == 0 { 1.0 } else { f64::from(a) / f64::from(b) };
    let classes = Intent::ALL.map(|intent| {
        let c = index(intent);
        let predicted: u32 = (0..3).map(|t| confusion[t][c]).sum();
        let support: u32 = confusion[c].iter().sum();
        ClassScore {
            intent,
            support,
            precision: ratio(confusion[c][c], predicted),
            recall: ratio(confusion[c][c], support),
        }
    });
    Evaluation {
        trained: train.len() as u32,
        tested,
        accuracy: ratio((0..3).map(|c| confusion[c][c]).sum(), tested),
        classes,
        threshold,
        coverage: ratio(above, tested),
        precision_above: ratio(above_right, above),
    }
}

/// `classify:` of drift.yaml: when the classifier's prediction is used, not only shown.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClassifySettings {
    /// A prediction is used (routing, automatic pull requests, whitelist proposals) only at or
    /// above this confidence, 0..=1 (default 0.8: the threshold docs/decisions.md measures).
    pub min_confidence: f64,
    /// ... and only when the model learned from at least this many decided drifts (default 20:
    /// naive Bayes is sure of itself after a single decision).
    pub min_examples: u32,
    /// Whether an announcement of a drift predicted `accept` (used) is held back from the
    /// notifiers (skipped, with the prediction as the reason; reminders and the digest still
    /// count it). Default true.
    pub quiet_intended: bool,
}

impl Default for ClassifySettings {
    fn default() -> Self {
        ClassifySettings { min_confidence: 0.8, min_examples: 20, quiet_intended: true }
    }
}

impl ClassifySettings {
    /// Checks the settings: a confidence outside 0..=1 (or not a number) is a configuration
    /// error.
    pub fn validate(&self) -> drift_model::Result<()> {
        if !(0.0..=1.0).contains(&self.min_confidence) {
            return Err(drift_model::Error::config(format!(
                "classify.min_confidence {} is not between 0 and 1",
                self.min_confidence
            )));
        }
        Ok(())
    }
}

/// How long a trained model is reused before it is trained again from the store.
pub const CLASSIFIER_REFRESH: std::time::Duration = std::time::Duration::from_secs(60);

/// The most decided drifts a model learns from (the newest first): training reads two rows per
/// decided drift, so this bounds its cost.
pub const CLASSIFIER_MAX_EXAMPLES: usize = 20_000;

/// The classifier of a process (this module's model), trained from the store's decisions
/// and kept for [`CLASSIFIER_REFRESH`]: every reader (the API, the CLI, the notifier task,
/// automatic pull requests, whitelist proposals) asks it through [`Classifier::predict`].
/// `settings: None`: predictions are shown and never used.
#[derive(Debug)]
pub struct Classifier {
    settings: Option<ClassifySettings>,
    refresh: std::time::Duration,
    trained: std::sync::Mutex<Option<(std::time::Instant, Arc<Trained>)>>,
}

/// A model and the example each decided drift gave it (to leave a drift's own out).
#[derive(Debug, Default)]
pub struct Trained {
    /// The model.
    pub model: Model,
    /// Per decided drift, its features and its label.
    pub examples: HashMap<i64, (Features, Intent)>,
}

impl Default for Classifier {
    fn default() -> Self {
        Classifier::new(None)
    }
}

impl Classifier {
    /// A classifier whose predictions are used as `settings` say (`None`: never used).
    pub fn new(settings: Option<ClassifySettings>) -> Self {
        Classifier { settings, refresh: CLASSIFIER_REFRESH, trained: std::sync::Mutex::new(None) }
    }

    /// The same with another refresh period (tests: zero trains at every call).
    pub fn with_refresh(mut self, refresh: std::time::Duration) -> Self {
        self.refresh = refresh;
        self
    }

    /// Drops the trained model: the next prediction trains again (after a decision this process
    /// recorded; decisions of other processes are learned within the refresh period).
    pub fn retrain(&self) {
        *self.trained.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    /// The settings, when predictions are used.
    pub fn settings(&self) -> Option<&ClassifySettings> {
        self.settings.as_ref()
    }

    /// The model, trained again when older than the refresh period.
    pub async fn trained(&self, store: &dyn DriftStore, act: &dyn ActStore) -> drift_model::Result<Arc<Trained>> {
        let now = std::time::Instant::now();
        {
            let cached = self.trained.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some((_, t)) = cached.as_ref().filter(|(at, _)| now.duration_since(*at) < self.refresh) {
                return Ok(t.clone());
            }
        }
        // Two readers may train at once after the period; both get a right model, one is kept.
        let trained = Arc::new(train_from_store(store, act).await?);
        *self.trained.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some((now, trained.clone()));
        Ok(trained)
    }

    /// The prediction for a drift, its own decisions left out; `None` before any decision.
    pub async fn predict(
        &self,
        store: &dyn DriftStore,
        act: &dyn ActStore,
        drift: &StoredDrift,
    ) -> drift_model::Result<Option<PredictionView>> {
        let trained = self.trained(store, act).await?;
        let features = Features::of(drift);
        let prediction = match trained.examples.get(&drift.id) {
            Some((own, intent)) => {
                let mut model = trained.model.clone();
                model.forget(own, *intent);
                model.predict(&features)
            }
            None => trained.model.predict(&features),
        };
        Ok(prediction.map(|p| view(p, self.settings.as_ref())))
    }
}

#[async_trait::async_trait]
impl Predictor for Classifier {
    async fn predict(
        &self,
        store: &dyn DriftStore,
        act: &dyn ActStore,
        drift: &StoredDrift,
    ) -> drift_model::Result<Option<PredictionView>> {
        Classifier::predict(self, store, act, drift).await
    }

    fn retrain(&self) {
        Classifier::retrain(self);
    }
}

/// Learns from the store's decisions: every drift with a decision in the audit trail (newest
/// first, at most [`CLASSIFIER_MAX_EXAMPLES`]), labelled by [`intent_of`] from its decisions
/// and how it was resolved. Drifts resolved with no decision of a person are left out: the
/// detector's own actions (self-heal's reverts, automatic pull requests) resolve drifts, and a
/// model that learned from them would learn from itself. A drift gone from the store (retention)
/// is skipped.
pub async fn train_from_store(store: &dyn DriftStore, act: &dyn ActStore) -> drift_model::Result<Trained> {
    let filter = AuditFilter { action: Some(AuditAction::Decision), ..AuditFilter::default() };
    let mut ids: Vec<i64> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut after = None;
    'pages: loop {
        let page = act.audit(&filter, PageRequest { limit: PageRequest::MAX_LIMIT, after }).await?;
        for id in page.items.iter().filter_map(|e| e.drift_id) {
            if seen.insert(id) {
                ids.push(id);
                if ids.len() >= CLASSIFIER_MAX_EXAMPLES {
                    break 'pages;
                }
            }
        }
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    let mut examples = HashMap::with_capacity(ids.len());
    for id in ids {
        let drift = match store.get(id).await {
            Ok(d) => d,
            Err(e) if e.kind() == drift_model::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let decisions = act.decisions(id).await?;
        if let Some(intent) = intent_of(&drift, &decisions) {
            examples.insert(id, (Features::of(&drift), intent));
        }
    }
    let mut list: Vec<(&i64, &(Features, Intent))> = examples.iter().collect();
    list.sort_by_key(|(id, _)| **id);
    let model = Model::train(&list.into_iter().map(|(_, e)| e.clone()).collect::<Vec<_>>());
    Ok(Trained { model, examples })
}

/// The prediction as shown, and whether it is used under `settings`.
fn view(p: Prediction, settings: Option<&ClassifySettings>) -> PredictionView {
    let used = settings.is_some_and(|s| p.confidence >= s.min_confidence && p.examples >= s.min_examples);
    let reasons: Vec<ReasonView> = p
        .reasons
        .iter()
        .map(|r| ReasonView {
            feature: r.feature.to_owned(),
            value: r.value.clone(),
            seen: r.seen,
            agreeing: r.agreeing,
            text: r.to_string(),
        })
        .collect();
    let because: Vec<&str> = reasons.iter().map(|r| r.text.as_str()).collect();
    let explanation = format!(
        "{} ({:.0}%){}{}",
        p.intent.as_str(),
        p.confidence * 100.0,
        if because.is_empty() { "" } else { ": " },
        because.join("; ")
    );
    PredictionView {
        intent: p.intent,
        confidence: p.confidence,
        probabilities: Probabilities {
            accept: p.probabilities[0],
            revert: p.probabilities[1],
            ignore: p.probabilities[2],
        },
        reasons,
        examples: p.examples,
        min_confidence: settings.map(|s| s.min_confidence),
        used,
        explanation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_keys_are_left_out_of_paths() {
        assert_eq!(
            without_list_keys("spec.template.spec.containers[name=web].image"),
            "spec.template.spec.containers[].image"
        );
        assert_eq!(without_list_keys("spec.ports[port=80].targetPort"), "spec.ports[].targetPort");
        assert_eq!(without_list_keys("data.a"), "data.a");
        assert_eq!(without_list_keys("a[k=[x]].b"), "a[].b");
    }

    #[test]
    fn forgetting_an_example_is_training_without_it() {
        let f = |manager: &str, hour_band| Features {
            manager: manager.into(),
            drift_type: "replicas_drift".into(),
            kind: "Deployment".into(),
            namespace: "shop".into(),
            path: "spec.replicas".into(),
            hour_band,
            weekend: false,
            repeated: 1,
        };
        let examples = vec![
            (f("kubectl-scale", 1), Intent::Accept),
            (f("kubectl-scale", 2), Intent::Accept),
            (f("kubectl-edit", 1), Intent::Revert),
            (f("k9s", 3), Intent::Ignore),
        ];
        let mut forgotten = Model::train(&examples);
        forgotten.forget(&examples[2].0, Intent::Revert);
        let without = Model::train(&[examples[0].clone(), examples[1].clone(), examples[3].clone()]);
        assert_eq!(forgotten.classes, without.classes);
        assert_eq!(forgotten.counts, without.counts, "values no longer seen are gone, as never learned");
        assert_eq!(forgotten.predict(&f("kubectl-edit", 1)), without.predict(&f("kubectl-edit", 1)));
        // An example never learned: nothing goes below zero.
        let mut empty = Model::default();
        empty.forget(&examples[0].0, Intent::Accept);
        assert_eq!(empty.examples(), 0);
    }

    #[test]
    fn nothing_learned_predicts_nothing() {
        let f = Features {
            manager: String::new(),
            drift_type: "x".into(),
            kind: "k".into(),
            namespace: String::new(),
            path: "p".into(),
            hour_band: 0,
            weekend: false,
            repeated: 1,
        };
        assert!(Model::default().predict(&f).is_none());
        assert!(Model::train(&[]).predict(&f).is_none());
    }
}
