//! Automatic pull requests (drift.yaml `accept.auto:`, opt-in): the open drifts a rule names
//! are accepted into Git by themselves, one change per object, as `drift fix --accept` would do
//! it, by the actor [`AUTO_ACTOR`].
//!
//! - A rule names drift types, classifications, namespaces, a minimum age and, optionally, a
//!   minimum learned confidence (the share of similar changes the team accepted,
//!   [`drift_core::act::Learned`]), and the intents the classifier must predict for it
//!   (`predicted: [accept]`, used only above `classify.min_confidence`). A drift matches when
//!   every list it sets contains the drift's value.
//! - Never a Secret, never a waived drift, never one whose last decision is a `reject`, never a
//!   missing or unmanaged object, never a controller's field.
//! - The drifts of one object go into one change on the object's branch
//!   ([`super::branch_of`]): a pull request on GitHub, a pushed branch elsewhere. The change is
//!   proposed again (the pull request updated, never a second one) only when the object gains a
//!   drift or one of its drifts changes again (its `changed_at` moves past the last proposal).
//! - A rate limit: at most `max` objects proposed per `per`, counted in the audit trail across
//!   every process on the store.
//!
//! Every proposal is an accept of the audit trail (attempted, then proposed / updated / refused
//! / failed), shown with each drift's history on the page.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use drift_core::act::{AuditAction, AuditFilter};
use drift_core::drift_engine::classify::Intent;
use drift_core::remedy::Fault;
use drift_core::sink::{DriftFilter, DriftStatus, PageRequest, StoredDrift};
use drift_core::{Classification, DriftType};
use serde::{Deserialize, Serialize};

use super::{Remedies, is_secret, rejected};

/// The actor of automatic pull requests in the audit trail.
pub const AUTO_ACTOR: &str = "auto";

/// One rule of `accept.auto.rules`: empty lists allow every value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AutoRule {
    /// Only these drift types.
    pub drift_types: Vec<DriftType>,
    /// Only these classifications (default: `manual_change`: a change made by hand is what a
    /// team takes into Git; `controller_managed` is never accepted, whatever this says).
    pub classifications: Vec<Classification>,
    /// Only these namespaces.
    pub namespaces: Vec<String>,
    /// Only drifts open at least this long (default 10 minutes: a change undone at once is not
    /// proposed).
    #[serde(with = "humantime_serde")]
    pub min_age: Duration,
    /// Only drifts whose similar changes the team accepted at least this often (0..=1; unset:
    /// not asked). A drift with no similar decision has no confidence and does not match.
    pub min_confidence: Option<f64>,
    /// Only drifts the classifier predicts as one of these intents (`accept`, `revert`,
    /// `ignore`), with the prediction used: at or above `classify.min_confidence`, from at least
    /// `classify.min_examples` decided drifts (docs/decisions.md, "The classifier, used").
    /// Empty: not asked. Needs `classify:`.
    pub predicted: Vec<Intent>,
}

impl Default for AutoRule {
    fn default() -> Self {
        AutoRule {
            drift_types: Vec::new(),
            classifications: vec![Classification::ManualChange],
            namespaces: Vec::new(),
            min_age: Duration::from_secs(600),
            min_confidence: None,
            predicted: Vec::new(),
        }
    }
}

/// `accept.auto:` of drift.yaml.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AutoAcceptPolicy {
    /// The rules; a drift matching any of them is proposed.
    pub rules: Vec<AutoRule>,
    /// At most this many objects proposed per [`AutoAcceptPolicy::per`].
    pub max: u32,
    /// The window of the rate limit.
    #[serde(with = "humantime_serde")]
    pub per: Duration,
    /// How often a round looks for drifts to propose.
    #[serde(with = "humantime_serde")]
    pub tick: Duration,
}

impl Default for AutoAcceptPolicy {
    fn default() -> Self {
        AutoAcceptPolicy { rules: Vec::new(), max: 5, per: Duration::from_secs(3600), tick: Duration::from_secs(60) }
    }
}

impl AutoAcceptPolicy {
    /// Checks the policy.
    pub fn validate(&self) -> drift_core::Result<()> {
        if self.rules.is_empty() {
            return Err(drift_core::Error::config("accept.auto: at least one rule (rules: [...])"));
        }
        if self.max == 0 || self.per.is_zero() || self.tick.is_zero() {
            return Err(drift_core::Error::config("accept.auto: max, per and tick must be more than 0"));
        }
        if let Some(c) = self.rules.iter().filter_map(|r| r.min_confidence).find(|c| !(0.0..=1.0).contains(c)) {
            return Err(drift_core::Error::config(format!("accept.auto: min_confidence {c} is not between 0 and 1")));
        }
        Ok(())
    }

    /// Whether a rule asks for the classifier's prediction.
    pub fn asks_prediction(&self) -> bool {
        self.rules.iter().any(|r| !r.predicted.is_empty())
    }

    /// Whether a rule matches the drift (its confidence, when a rule asks for one, is
    /// `confidence`; the classifier's prediction, when used, is `predicted`).
    fn matches(&self, d: &StoredDrift, confidence: Option<f64>, predicted: Option<Intent>, now: DateTime<Utc>) -> bool {
        self.rules.iter().any(|r| {
            let age = chrono::Duration::from_std(r.min_age).unwrap_or(chrono::Duration::MAX);
            (r.drift_types.is_empty() || r.drift_types.contains(&d.drift_type))
                && (r.classifications.is_empty() || r.classifications.contains(&d.classification))
                && (r.namespaces.is_empty() || r.namespaces.contains(&d.namespace))
                && d.detected_at.checked_add_signed(age).is_some_and(|at| at <= now)
                && r.min_confidence.is_none_or(|min| confidence.is_some_and(|c| c >= min))
                && (r.predicted.is_empty() || predicted.is_some_and(|p| r.predicted.contains(&p)))
        })
    }

    fn asks_confidence(&self) -> bool {
        self.rules.iter().any(|r| r.min_confidence.is_some())
    }
}

/// What one round of automatic pull requests did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AutoRound {
    /// Open drifts a rule matches.
    pub candidates: usize,
    /// Objects whose change was proposed (a new pull request or branch).
    pub proposed: usize,
    /// Objects whose earlier change was updated.
    pub updated: usize,
    /// Objects already proposed as they are now (nothing new to propose).
    pub unchanged: usize,
    /// Refused by a safety rule or the proposer.
    pub refused: usize,
    /// Failed (the cluster, the store or the git server).
    pub failed: usize,
    /// Left for later by the rate limit.
    pub limited: usize,
}

/// The object of a drift, as a change groups them.
fn object_key(d: &StoredDrift) -> (String, String, String, String, String, String) {
    (
        d.cluster.clone(),
        d.repository.clone(),
        d.api_group.clone(),
        d.resource_kind.clone(),
        d.namespace.clone(),
        d.resource_name.clone(),
    )
}

impl Remedies {
    /// One round of automatic pull requests at `now` (see the module's documentation); nothing
    /// without a policy.
    pub async fn auto_accept_round(
        &self,
        policy: &AutoAcceptPolicy,
        now: DateTime<Utc>,
    ) -> drift_core::Result<AutoRound> {
        let act = match self.act() {
            Ok(a) => a.clone(),
            Err(Fault::Failed(e)) => return Err(e),
            Err(Fault::Refused(r)) => return Err(drift_core::Error::config(r.message)),
        };
        let mut round = AutoRound::default();
        let mut objects: BTreeMap<_, Vec<StoredDrift>> = BTreeMap::new();
        let mut after = None;
        loop {
            let filter = DriftFilter {
                status: Some(DriftStatus::Open),
                cluster: Some(self.scanner.live.cluster().to_owned()),
                ..DriftFilter::default()
            };
            let page = self.scanner.store.read.list(&filter, PageRequest { limit: 1000, after }).await?;
            for d in page.items {
                if is_secret(&d)
                    || matches!(d.drift_type, DriftType::MissingResource | DriftType::UnmanagedResource)
                    || d.classification == Classification::ControllerManaged
                    || !self.proposers.iter().any(|p| p.repository() == d.repository)
                    || rejected(act.as_ref(), &d).await?
                {
                    continue;
                }
                let confidence =
                    if policy.asks_confidence() { act.similar(&d).await?.map(|l| l.intentional) } else { None };
                let predicted = match (&self.classifier, policy.asks_prediction()) {
                    (Some(c), true) => c
                        .predict(self.scanner.store.read.as_ref(), act.as_ref(), &d)
                        .await?
                        .filter(|p| p.used)
                        .map(|p| p.intent),
                    _ => None,
                };
                if policy.matches(&d, confidence, predicted, now) {
                    round.candidates += 1;
                    objects.entry(object_key(&d)).or_default().push(d);
                }
            }
            match page.next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        if objects.is_empty() {
            return Ok(round);
        }
        let since = chrono::Duration::from_std(policy.per).unwrap_or(chrono::Duration::hours(1));
        let mut budget = (policy.max as usize).saturating_sub(self.auto_proposed_since(now - since).await?.len());
        for drifts in objects.into_values() {
            if !self.has_news(&drifts, now).await? {
                round.unchanged += 1;
                continue;
            }
            if budget == 0 {
                round.limited += 1;
                continue;
            }
            budget -= 1;
            let ids: Vec<i64> = drifts.iter().map(|d| d.id).collect();
            let result = self.accept(&ids, AUTO_ACTOR).await;
            if result.is_ok() {
                self.remember(&drifts);
            }
            match result {
                Ok(o) if o.proposal.updated => round.updated += 1,
                Ok(_) => round.proposed += 1,
                Err(Fault::Refused(r)) => {
                    round.refused += 1;
                    tracing::info!(drift_ids = ?ids, refusal = ?r.refusal, reason = %r.message, "automatic pull request refused");
                }
                Err(Fault::Failed(e)) => {
                    round.failed += 1;
                    tracing::warn!(drift_ids = ?ids, error = %e, "automatic pull request failed; tried again at the next round");
                }
            }
        }
        Ok(round)
    }

    /// The branches of automatic proposals (proposed, updated) since `since`: what the rate
    /// limit counts.
    async fn auto_proposed_since(&self, since: DateTime<Utc>) -> drift_core::Result<BTreeSet<String>> {
        let act = self.act().map_err(fault_error)?;
        let mut branches = BTreeSet::new();
        for status in ["proposed", "updated"] {
            let filter = AuditFilter {
                action: Some(AuditAction::Accept),
                actor: Some(AUTO_ACTOR.to_owned()),
                status: Some(status.to_owned()),
                since: Some(since),
                ..AuditFilter::default()
            };
            let mut after = None;
            loop {
                let page = act.audit(&filter, PageRequest { limit: 1000, after }).await?;
                branches.extend(
                    page.items
                        .iter()
                        .filter_map(|e| e.detail.get("branch").and_then(|b| b.as_str()).map(str::to_owned)),
                );
                match page.next {
                    Some(n) => after = Some(n),
                    None => break,
                }
            }
        }
        Ok(branches)
    }

    /// Notes the cluster values just proposed.
    fn remember(&self, drifts: &[StoredDrift]) {
        let mut proposed = self.auto_proposed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for d in drifts {
            proposed.insert(d.id, d.cluster_value.clone());
        }
    }

    /// Whether an object's drifts hold anything its last automatic proposal did not: a drift
    /// never proposed, or one whose cluster value moved on since. This process remembers the
    /// values it proposed; after a restart the audit trail's time of the last proposal stands in
    /// (a change after it, by the drift's `changed_at`, else its detection), and the values seen
    /// then are remembered. A refused or failed proposal is tried again only when something
    /// changed, or after a day.
    async fn has_news(&self, drifts: &[StoredDrift], now: DateTime<Utc>) -> drift_core::Result<bool> {
        let act = self.act().map_err(fault_error)?;
        let mut news = false;
        for d in drifts {
            let filter = AuditFilter {
                action: Some(AuditAction::Accept),
                actor: Some(AUTO_ACTOR.to_owned()),
                drift_id: Some(d.id),
                ..AuditFilter::default()
            };
            let entries = act.audit(&filter, PageRequest { limit: 20, after: None }).await?;
            let last = entries
                .items
                .iter()
                .filter(|e| e.status != drift_core::act::ATTEMPTED)
                .map(|e| (e.at, e.status.as_str()))
                .max_by_key(|(at, _)| *at);
            let remembered =
                self.auto_proposed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&d.id).cloned();
            let changed = d.changed_at.unwrap_or(d.detected_at);
            news |= match (last, remembered) {
                (None, _) => true,
                (Some((_, "proposed" | "updated")), Some(value)) => value != d.cluster_value,
                (Some((at, "proposed" | "updated")), None) => {
                    let moved = changed > at;
                    if !moved {
                        self.remember(std::slice::from_ref(d));
                    }
                    moved
                }
                (Some((at, _)), _) => changed > at || now - at > chrono::Duration::days(1),
            };
        }
        Ok(news)
    }
}

pub(super) fn fault_error(f: Fault) -> drift_core::Error {
    match f {
        Fault::Failed(e) => e,
        Fault::Refused(r) => drift_core::Error::config(r.message),
    }
}

/// The automatic pull requests task: a round every `policy.tick` until `stop` turns true.
pub async fn run_auto_accept(
    remedies: std::sync::Arc<Remedies>,
    policy: AutoAcceptPolicy,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    super::every(policy.tick, stop, || async {
        match remedies.auto_accept_round(&policy, Utc::now()).await {
            Ok(r) if r.proposed + r.updated + r.refused + r.failed + r.limited > 0 => tracing::info!(
                candidates = r.candidates,
                proposed = r.proposed,
                updated = r.updated,
                unchanged = r.unchanged,
                refused = r.refused,
                failed = r.failed,
                limited = r.limited,
                "automatic pull requests round"
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "automatic pull requests round failed; retried at the next tick"),
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use drift_core::DriftSink;
    use drift_core::sink::DriftStore;
    use drift_testkit::fixtures::{drift, key, report, t};

    async fn stored() -> StoredDrift {
        let store = drift_core::memory::MemoryStore::new();
        let d = drift("Deployment", "shop", "web", DriftType::ReplicasDrift, "spec.replicas", serde_json::json!(5));
        store.record(&report("s1", t(0), &[key("Deployment", "shop", "web")], vec![d])).await.unwrap();
        store.list(&DriftFilter::default(), PageRequest::default()).await.unwrap().items.remove(0)
    }

    #[tokio::test]
    async fn a_rule_with_predicted_matches_only_the_intents_it_names_when_the_prediction_is_used() {
        let policy: AutoAcceptPolicy = serde_json::from_value(serde_json::json!({
            "rules": [{"predicted": ["accept"], "min_age": "0s", "classifications": []}]
        }))
        .unwrap();
        assert!(policy.asks_prediction());
        let d = stored().await;
        let now = t(10);
        assert!(policy.matches(&d, None, Some(Intent::Accept), now));
        assert!(!policy.matches(&d, None, Some(Intent::Revert), now));
        assert!(!policy.matches(&d, None, Some(Intent::Ignore), now));
        assert!(!policy.matches(&d, None, None, now), "no used prediction: no match");
        // A rule without it does not ask.
        let plain: AutoAcceptPolicy =
            serde_json::from_value(serde_json::json!({"rules": [{"min_age": "0s", "classifications": []}]})).unwrap();
        assert!(!plain.asks_prediction());
        assert!(plain.matches(&d, None, None, now));
        // An unknown intent is refused when the configuration is read.
        let err = serde_json::from_value::<AutoAcceptPolicy>(serde_json::json!({"rules": [{"predicted": ["merge"]}]}))
            .unwrap_err();
        assert!(err.to_string().contains("unknown variant `merge`"), "{err}");
    }
}
