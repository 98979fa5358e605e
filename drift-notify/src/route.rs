//! Routing: which events a notifier takes.

use drift_model::drift::{Classification, DriftType, Severity};
use drift_model::{DriftEvent, EventKind};
use serde::{Deserialize, Serialize};

/// `route:` of a notifier. Every list is a filter that takes anything when empty; names match
/// exactly (no patterns). Filters on drift fields do not apply to digests, which carry no
/// drift.
///
/// ```
/// use drift_notify::Route;
/// let route: Route = serde_saphyr::from_str("min_severity: HIGH\nnamespaces: [shop]\n").unwrap();
/// assert_eq!(route.min_severity, Some(drift_model::Severity::High));
/// assert_eq!(route.events, drift_model::EventKind::ALL.to_vec(), "every event by default");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// Only drifts at least this severe (`LOW`, `MEDIUM`, `HIGH`, `CRITICAL`). A `changed`
    /// event is taken when the severity before or after the change meets it, so that a drift
    /// that calms down is told too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_severity: Option<Severity>,
    /// Only these drift types.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drift_types: Vec<DriftType>,
    /// Only these namespaces (`""` is cluster-scoped objects).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// Only these repositories (as named in the configuration).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repositories: Vec<String>,
    /// Only these clusters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<String>,
    /// Only these classifications (`manual_change`, `controller_managed`, `pending_sync`,
    /// `unknown`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classifications: Vec<Classification>,
    /// Only these events (default: all of them: opened, reopened, changed, resolved,
    /// waiver_expired, reminder, digest).
    #[serde(default = "default_events")]
    pub events: Vec<EventKind>,
}

fn default_events() -> Vec<EventKind> {
    EventKind::ALL.to_vec()
}

impl Default for Route {
    fn default() -> Self {
        Route {
            min_severity: None,
            drift_types: Vec::new(),
            namespaces: Vec::new(),
            repositories: Vec::new(),
            clusters: Vec::new(),
            classifications: Vec::new(),
            events: default_events(),
        }
    }
}

fn allows<T: PartialEq>(list: &[T], value: &T) -> bool {
    list.is_empty() || list.contains(value)
}

impl Route {
    /// Whether the filters take `event`. This does not look at [`DriftEvent::notifier`]: use
    /// [`NotifierConfig::takes`](crate::NotifierConfig::takes), which also keeps reminders
    /// and digests addressed to another notifier away.
    pub fn takes(&self, event: &DriftEvent) -> bool {
        if !self.events.contains(&event.kind) {
            return false;
        }
        let Some(d) = &event.drift else {
            // A digest (or any event without a drift) is not about one object.
            return true;
        };
        let severe_enough = self
            .min_severity
            .is_none_or(|min| d.severity >= min || event.previous.as_ref().is_some_and(|p| p.severity >= min));
        severe_enough
            && allows(&self.drift_types, &d.drift_type)
            && allows(&self.namespaces, &d.namespace)
            && allows(&self.repositories, &d.repository)
            && allows(&self.clusters, &d.cluster)
            && allows(&self.classifications, &d.classification)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{digest_event, drift, event};
    use crate::{NotifierConfig, NotifierKind, WebhookConfig};
    use drift_model::act::Previous;

    #[test]
    fn each_filter_keeps_what_it_names() {
        let critical = event(EventKind::Opened, drift(1, "shop", "web", Severity::Critical));
        let low = event(EventKind::Opened, drift(2, "kube-system", "dns", Severity::Low));
        let everything = Route::default();
        assert!(everything.takes(&critical) && everything.takes(&low));

        let high = Route { min_severity: Some(Severity::High), ..Route::default() };
        assert!(high.takes(&critical) && !high.takes(&low));
        let shop = Route { namespaces: vec!["shop".into()], ..Route::default() };
        assert!(shop.takes(&critical) && !shop.takes(&low));
        let prod = Route { clusters: vec!["staging".into()], ..Route::default() };
        assert!(!prod.takes(&critical));
        let repo = Route { repositories: vec!["deploy".into()], ..Route::default() };
        assert!(repo.takes(&critical));
        let types = Route { drift_types: vec![DriftType::ImageTagDrift], ..Route::default() };
        assert!(!types.takes(&critical), "the fixture is a replicas drift");
        let manual = Route { classifications: vec![Classification::ControllerManaged], ..Route::default() };
        assert!(!manual.takes(&critical));
        let resolved_only = Route { events: vec![EventKind::Resolved], ..Route::default() };
        assert!(!resolved_only.takes(&critical));
    }

    #[test]
    fn a_change_that_lowers_the_severity_is_still_told() {
        let mut changed = event(EventKind::Changed, drift(1, "shop", "web", Severity::Low));
        let high = Route { min_severity: Some(Severity::High), ..Route::default() };
        assert!(!high.takes(&changed));
        changed.previous = Some(Previous { cluster_value: None, severity: Severity::Critical });
        assert!(high.takes(&changed));
    }

    #[test]
    fn addressed_events_go_only_to_their_notifier() {
        let config = |name: &str| {
            NotifierConfig::new(NotifierKind::Webhook(WebhookConfig {
                url: "https://x.example".into(),
                secret_env: "S".into(),
            }))
            .with_name(name)
        };
        let (a, b) = (config("a"), config("b"));
        let digest = digest_event("a");
        assert!(a.takes(&digest) && !b.takes(&digest));
        let filtered = Route { namespaces: vec!["shop".into()], ..Route::default() };
        assert!(filtered.takes(&digest), "drift filters do not apply to a digest");
        let mut reminder = event(EventKind::Reminder, drift(1, "shop", "web", Severity::High));
        reminder.notifier = Some("b".into());
        assert!(!a.takes(&reminder) && b.takes(&reminder));
        reminder.notifier = None;
        assert!(a.takes(&reminder) && b.takes(&reminder));
    }
}
