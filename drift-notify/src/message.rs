//! One message for one notifier, built from one batch of events: grouped by object, titled,
//! counted, and bounded in size whatever the batch's size.

use std::collections::{BTreeMap, BTreeSet};

use drift_model::EventKind;
use drift_model::act::{DriftEvent, Learned};
use drift_model::drift::{DriftType, Severity};
use drift_model::sink::StoredDrift;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use url::Url;

/// Objects listed in detail in a Slack message or an email; the others are counted.
pub const MAX_OBJECTS_SHOWN: usize = 20;
/// Drifts listed under one object in a Slack message or an email; the others are counted.
pub const MAX_DRIFTS_PER_OBJECT: usize = 10;
/// Characters of a Git or cluster value shown in a Slack message or an email (longer values
/// end with `…`; the webhook body carries them whole).
pub const MAX_VALUE_CHARS: usize = 200;
/// Namespaces named in the counts of a summary; the others are added up as `(others)`.
pub const MAX_NAMESPACES_SHOWN: usize = 10;
/// Events carried whole in a webhook body; every event id is in `event_ids` anyway.
pub const MAX_WEBHOOK_EVENTS: usize = 1000;
/// Above this many drift events, or [`MAX_OBJECTS_SHOWN`] objects, a message is a summary.
pub const SUMMARY_THRESHOLD: usize = 50;

/// What identifies an object: the drifts of one object go together.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ObjectKey {
    /// Cluster.
    pub cluster: String,
    /// API group (empty for the core group).
    pub api_group: String,
    /// Kind.
    pub kind: String,
    /// Namespace (empty for cluster-scoped objects).
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjectKey {
    /// The object of a stored drift.
    pub fn of(drift: &StoredDrift) -> Self {
        ObjectKey {
            cluster: drift.cluster.clone(),
            api_group: drift.api_group.clone(),
            kind: drift.resource_kind.clone(),
            namespace: drift.namespace.clone(),
            name: drift.resource_name.clone(),
        }
    }

    /// `Deployment shop/web` (`ClusterRole admin` when cluster-scoped).
    pub fn display(&self) -> String {
        if self.namespace.is_empty() {
            format!("{} {}", self.kind, self.name)
        } else {
            format!("{} {}/{}", self.kind, self.namespace, self.name)
        }
    }
}

/// The events of one object in a message.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectGroup {
    /// The object.
    pub key: ObjectKey,
    /// Its most severe drift.
    pub severity: Severity,
    /// Its events, by path, then kind.
    pub events: Vec<DriftEvent>,
}

/// Counts of a message, for titles and summaries.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Counts {
    /// Events (digests included).
    pub events: usize,
    /// Objects the drift events are about.
    pub objects: usize,
    /// Events by kind.
    pub by_kind: BTreeMap<EventKind, usize>,
    /// Drift events by severity.
    pub by_severity: BTreeMap<Severity, usize>,
    /// Drift events by drift type.
    pub by_type: BTreeMap<DriftType, usize>,
    /// Drift events by namespace (`""` for cluster-scoped objects).
    pub by_namespace: BTreeMap<String, usize>,
    /// Drift events by cluster.
    pub by_cluster: BTreeMap<String, usize>,
}

/// A message: what one notifier sends for one batch of events.
///
/// ```
/// use drift_model::{EventKind, Severity};
/// use drift_notify::{Message, fixtures::{drift, event}};
/// let events = vec![
///     event(EventKind::Opened, drift(1, "shop", "web", Severity::Critical)),
///     event(EventKind::Opened, drift(2, "shop", "web", Severity::Low)),
///     event(EventKind::Opened, drift(3, "shop", "api", Severity::Low)),
/// ];
/// let m = Message::new("ops", events, None);
/// assert_eq!(m.title(), "3 drifts opened in prod/shop (1 CRITICAL)");
/// assert_eq!(m.groups().len(), 2, "two objects");
/// assert_eq!(m.id().len(), 32);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    id: String,
    notifier: String,
    link_base: Option<Url>,
    groups: Vec<ObjectGroup>,
    digests: Vec<DriftEvent>,
    event_ids: Vec<String>,
    counts: Counts,
    learned: BTreeMap<i64, Learned>,
}

impl Message {
    /// The message of `notifier` for `events` (one batch; an event listed twice counts once).
    /// `link_base` is where the drift API or web page is (a drift's link is
    /// `<link_base>/drifts/<id>`).
    pub fn new(notifier: &str, events: Vec<DriftEvent>, link_base: Option<Url>) -> Self {
        let mut seen = BTreeSet::new();
        let events: Vec<DriftEvent> = events.into_iter().filter(|e| seen.insert(e.id.clone())).collect();
        let event_ids: Vec<String> = seen.into_iter().collect();
        let id = message_id(notifier, &event_ids);

        let mut counts = Counts { events: events.len(), ..Counts::default() };
        let mut by_object: BTreeMap<ObjectKey, Vec<DriftEvent>> = BTreeMap::new();
        let mut digests = Vec::new();
        for e in events {
            *counts.by_kind.entry(e.kind).or_default() += 1;
            match &e.drift {
                Some(d) => {
                    *counts.by_severity.entry(d.severity).or_default() += 1;
                    *counts.by_type.entry(d.drift_type).or_default() += 1;
                    *counts.by_namespace.entry(d.namespace.clone()).or_default() += 1;
                    *counts.by_cluster.entry(d.cluster.clone()).or_default() += 1;
                    by_object.entry(ObjectKey::of(d)).or_default().push(e);
                }
                None => digests.push(e),
            }
        }
        counts.objects = by_object.len();
        let mut groups: Vec<ObjectGroup> = by_object
            .into_iter()
            .map(|(key, mut events)| {
                events.sort_by(|a, b| {
                    let path = |e: &DriftEvent| e.drift.as_ref().map(|d| d.path.clone()).unwrap_or_default();
                    (path(a), a.kind, &a.id).cmp(&(path(b), b.kind, &b.id))
                });
                let severity =
                    events.iter().filter_map(|e| e.drift.as_ref().map(|d| d.severity)).max().unwrap_or(Severity::Low);
                ObjectGroup { key, severity, events }
            })
            .collect();
        // Most severe objects first, so that the first ones shown are the ones that matter.
        groups.sort_by(|a, b| b.severity.cmp(&a.severity).then_with(|| a.key.cmp(&b.key)));
        digests.sort_by(|a, b| a.id.cmp(&b.id));
        let link_base = link_base.map(|mut u| {
            if !u.path().ends_with('/') {
                let path = format!("{}/", u.path());
                u.set_path(&path);
            }
            u
        });
        Message {
            id,
            notifier: notifier.to_owned(),
            link_base,
            groups,
            digests,
            event_ids,
            counts,
            learned: BTreeMap::new(),
        }
    }

    /// Adds what was learned from past decisions about similar drifts, by drift id; shown next
    /// to each drift.
    pub fn with_learned(mut self, learned: BTreeMap<i64, Learned>) -> Self {
        self.learned = learned;
        self
    }

    /// The message id: 32 hex digits of a SHA-256 over the notifier and the sorted event ids.
    /// The same events for the same notifier give the same id: it is the idempotency key of
    /// the message (`Idempotency-Key`, `X-Drift-Delivery`, the email's Message-ID).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The notifier it is for.
    pub fn notifier(&self) -> &str {
        &self.notifier
    }

    /// The drift events, by object, most severe object first.
    pub fn groups(&self) -> &[ObjectGroup] {
        &self.groups
    }

    /// The digest events (no drift).
    pub fn digests(&self) -> &[DriftEvent] {
        &self.digests
    }

    /// Every event, in the order of the groups, then the digests.
    pub fn events(&self) -> impl Iterator<Item = &DriftEvent> {
        self.groups.iter().flat_map(|g| g.events.iter()).chain(self.digests.iter())
    }

    /// The ids of every event, sorted.
    pub fn event_ids(&self) -> &[String] {
        &self.event_ids
    }

    /// The counts.
    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// What was learned about a drift, if anything.
    pub fn learned(&self, drift_id: i64) -> Option<&Learned> {
        self.learned.get(&drift_id)
    }

    /// The most severe drift of the message (none for a digest alone).
    pub fn severity(&self) -> Option<Severity> {
        self.groups.first().map(|g| g.severity)
    }

    /// Whether the message is too large to list every drift: Slack and email then show the
    /// counts and the first [`MAX_OBJECTS_SHOWN`] objects.
    pub fn is_summary(&self) -> bool {
        self.groups.len() > MAX_OBJECTS_SHOWN
            || self.counts.events - self.digests.len() > SUMMARY_THRESHOLD
            || self.groups.iter().any(|g| g.events.len() > MAX_DRIFTS_PER_OBJECT)
    }

    /// The link to a drift: `<link_base>/drifts/<id>`.
    pub fn link(&self, drift_id: i64) -> Option<Url> {
        self.link_base.as_ref().and_then(|b| b.join(&format!("drifts/{drift_id}")).ok())
    }

    /// A one-line title: `3 drifts opened in prod/shop (1 CRITICAL)`,
    /// `5 drift events in prod: 3 opened, 2 resolved (1 HIGH)`,
    /// `Drift digest: 3 open (1 CRITICAL)`.
    pub fn title(&self) -> String {
        let drift_events = self.counts.events - self.digests.len();
        let digest = self.digest_title();
        if drift_events == 0 {
            return digest.unwrap_or_else(|| "No drift events".to_owned());
        }
        let kinds: Vec<(EventKind, usize)> =
            self.counts.by_kind.iter().filter(|(k, _)| **k != EventKind::Digest).map(|(k, n)| (*k, *n)).collect();
        let plural = |n: usize, word: &str| if n == 1 { format!("{n} {word}") } else { format!("{n} {word}s") };
        let place = self.place();
        let mut title = match kinds.as_slice() {
            [(kind, n)] => format!("{} {} in {place}", plural(*n, "drift"), verb(*kind)),
            _ => format!(
                "{} in {place}: {}",
                plural(drift_events, "drift event"),
                kinds.iter().map(|(k, n)| format!("{n} {}", verb(*k))).collect::<Vec<_>>().join(", ")
            ),
        };
        if let Some((sev, n)) = self.counts.by_severity.iter().next_back() {
            title.push_str(&format!(" ({n} {sev})"));
        }
        if digest.is_some() {
            title.push_str(" and the digest");
        }
        title
    }

    fn digest_title(&self) -> Option<String> {
        let d = self.digests.first()?;
        let stats = d.digest.as_deref();
        let open = stats.and_then(|s| s.by_status.get("open")).copied().unwrap_or(0);
        let top = stats.and_then(|s| {
            Severity::ALL
                .iter()
                .rev()
                .find_map(|sev| s.by_severity.get(sev.as_str()).filter(|n| **n > 0).map(|n| (sev, n)))
        });
        Some(match top {
            Some((sev, n)) => format!("Drift digest: {open} open ({n} {sev})"),
            None => format!("Drift digest: {open} open"),
        })
    }

    /// `prod/shop`, `prod`, or `3 clusters`.
    fn place(&self) -> String {
        let clusters = &self.counts.by_cluster;
        let namespaces = &self.counts.by_namespace;
        match (clusters.len(), namespaces.len()) {
            (1, 1) => {
                let (c, ns) = (clusters.keys().next(), namespaces.keys().next());
                match (c, ns) {
                    (Some(c), Some(ns)) if !ns.is_empty() => format!("{c}/{ns}"),
                    (Some(c), _) => c.clone(),
                    _ => String::new(),
                }
            }
            (1, _) => clusters.keys().next().cloned().unwrap_or_default(),
            (n, _) => format!("{n} clusters"),
        }
    }

    /// The lines of the counts of a summary: by severity (most severe first), by type, by
    /// namespace (the [`MAX_NAMESPACES_SHOWN`] largest, then the rest as `(others)`).
    pub fn summary_lines(&self) -> Vec<(String, String)> {
        let c = &self.counts;
        let sev = c.by_severity.iter().rev().map(|(s, n)| format!("{n} {s}")).collect::<Vec<_>>().join(", ");
        let types = c.by_type.iter().map(|(t, n)| format!("{n} {t}")).collect::<Vec<_>>().join(", ");
        let mut ns: Vec<(&String, &usize)> = c.by_namespace.iter().collect();
        ns.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
        let mut names: Vec<String> = ns
            .iter()
            .take(MAX_NAMESPACES_SHOWN)
            .map(|(n, k)| format!("{k} {}", if n.is_empty() { "(cluster-scoped)" } else { n.as_str() }))
            .collect();
        let rest: usize = ns.iter().skip(MAX_NAMESPACES_SHOWN).map(|(_, k)| **k).sum();
        if rest > 0 {
            names.push(format!("{rest} (others)"));
        }
        let kinds = c.by_kind.iter().map(|(k, n)| format!("{n} {}", verb(*k))).collect::<Vec<_>>().join(", ");
        vec![
            ("Events".to_owned(), kinds),
            ("Objects".to_owned(), c.objects.to_string()),
            ("By severity".to_owned(), sev),
            ("By type".to_owned(), types),
            ("By namespace".to_owned(), names.join(", ")),
        ]
    }

    /// The objects shown in detail (the first [`MAX_OBJECTS_SHOWN`]) and how many are not.
    pub fn shown_groups(&self) -> (&[ObjectGroup], usize) {
        let n = self.groups.len().min(MAX_OBJECTS_SHOWN);
        (&self.groups[..n], self.groups.len() - n)
    }

    /// A drift event as text pieces for renderers (values already shortened; not escaped).
    pub fn view(&self, event: &DriftEvent) -> Option<EventView> {
        let d = event.drift.as_ref()?;
        Some(EventView {
            verb: verb(event.kind),
            path: d.path.clone(),
            drift_type: d.drift_type.as_str(),
            severity: d.severity,
            git: show_value(d.git_value.as_ref()),
            cluster: show_value(d.cluster_value.as_ref()),
            before: event.previous.as_ref().map(|p| (show_value(p.cluster_value.as_ref()), p.severity)),
            // The person behind the change, when the audit log named them: `kubectl-edit (alice)`.
            changed_by: match (&d.changed_by, &d.changed_by_user) {
                (Some(m), Some(u)) => Some(format!("{m} ({})", u.username)),
                (by, _) => by.clone(),
            },
            changed_at: d.changed_at.map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string()),
            classification: d.classification.as_str(),
            resolution: d.resolution.map(|r| r.as_str()),
            repository: d.repository.clone(),
            learned: self.learned(d.id).map(Learned::explain),
            link: self.link(d.id),
        })
    }
}

/// A digest event in words: (label, text) lines for the Slack and email renderers.
pub fn digest_lines(event: &DriftEvent) -> Vec<(String, String)> {
    let Some(s) = event.digest.as_deref() else {
        return Vec::new();
    };
    let open = s.by_status.get("open").copied().unwrap_or(0);
    let sev: Vec<String> = Severity::ALL
        .iter()
        .rev()
        .filter_map(|v| s.by_severity.get(v.as_str()).filter(|n| **n > 0).map(|n| format!("{n} {v}")))
        .collect();
    let mut ns: Vec<(&String, &i64)> = s.by_namespace.iter().collect();
    ns.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    let ns: Vec<String> = ns.iter().take(MAX_NAMESPACES_SHOWN).map(|(n, k)| format!("{k} {n}")).collect();
    let trend: Vec<String> =
        s.trend.iter().map(|d| format!("{} +{} -{}", d.day.format("%m-%d"), d.new, d.resolved)).collect();
    let hours = |secs: f64| format!("{:.1}h", secs / 3600.0);
    let ttr = match (s.mean_time_to_resolve_seconds, s.p95_time_to_resolve_seconds) {
        (Some(mean), Some(p95)) => format!("mean {}, p95 {}", hours(mean), hours(p95)),
        (Some(mean), None) => format!("mean {}", hours(mean)),
        _ => "no drift resolved yet".to_owned(),
    };
    let mut lines = vec![(
        "Open".to_owned(),
        if sev.is_empty() { open.to_string() } else { format!("{open} ({})", sev.join(", ")) },
    )];
    if !ns.is_empty() {
        lines.push(("By namespace".to_owned(), ns.join(", ")));
    }
    lines.push(("7-day trend (new, resolved)".to_owned(), trend.join(", ")));
    lines.push(("Time to resolve".to_owned(), ttr));
    lines
}

/// A drift event in words, for the Slack and email renderers.
#[derive(Debug, Clone, PartialEq)]
pub struct EventView {
    /// `opened`, `resolved`, `still open`, ...
    pub verb: &'static str,
    /// Field path.
    pub path: String,
    /// Drift type.
    pub drift_type: &'static str,
    /// Severity.
    pub severity: Severity,
    /// Git value, shortened.
    pub git: String,
    /// Cluster value, shortened.
    pub cluster: String,
    /// For `changed`: the cluster value and severity before.
    pub before: Option<(String, Severity)>,
    /// Field manager that changed it.
    pub changed_by: Option<String>,
    /// When, `2026-12-01 07:55 UTC`.
    pub changed_at: Option<String>,
    /// Classification.
    pub classification: &'static str,
    /// How it was resolved.
    pub resolution: Option<&'static str>,
    /// Repository.
    pub repository: String,
    /// What was learned from similar decisions.
    pub learned: Option<String>,
    /// Link to the drift.
    pub link: Option<Url>,
}

impl EventView {
    /// `changed by kubectl-edit at 2026-12-01 07:55 UTC`, or what is known of it.
    pub fn who_when(&self) -> Option<String> {
        match (&self.changed_by, &self.changed_at) {
            (Some(by), Some(at)) => Some(format!("changed by {by} at {at}")),
            (Some(by), None) => Some(format!("changed by {by}")),
            (None, Some(at)) => Some(format!("changed at {at}")),
            (None, None) => None,
        }
    }
}

/// How an event kind reads in a title.
pub fn verb(kind: EventKind) -> &'static str {
    match kind {
        EventKind::Opened => "opened",
        EventKind::Reopened => "reopened",
        EventKind::Changed => "changed",
        EventKind::Resolved => "resolved",
        EventKind::WaiverExpired => "out of waiver",
        EventKind::Reminder => "still open",
        EventKind::Digest => "digest",
    }
}

/// A value as shown to people: strings without quotes, other JSON compact, `(absent)` for
/// none, at most [`MAX_VALUE_CHARS`] characters.
pub fn show_value(value: Option<&Value>) -> String {
    let text = match value {
        None | Some(Value::Null) => return "(absent)".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    };
    shorten(&text, MAX_VALUE_CHARS)
}

/// `text` cut to `max` characters, ending with `…` when cut.
pub fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn message_id(notifier: &str, sorted_ids: &[String]) -> String {
    let mut h = Sha256::new();
    for part in std::iter::once(notifier).chain(sorted_ids.iter().map(String::as_str)) {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    hex::encode(&h.finalize()[..16])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{digest_event, drift, event};
    use drift_model::act::Previous;
    use serde_json::json;

    #[test]
    fn the_id_depends_on_the_set_of_events_and_the_notifier_only() {
        let a = event(EventKind::Opened, drift(1, "shop", "web", Severity::High));
        let b = event(EventKind::Opened, drift(2, "shop", "api", Severity::Low));
        let m1 = Message::new("ops", vec![a.clone(), b.clone()], None);
        let m2 = Message::new("ops", vec![b.clone(), a.clone(), a.clone()], None);
        assert_eq!(m1.id(), m2.id());
        assert_eq!(m2.counts().events, 2, "a repeated event counts once");
        assert_ne!(m1.id(), Message::new("mail", vec![a.clone(), b], None).id());
        assert_ne!(m1.id(), Message::new("ops", vec![a], None).id());
    }

    #[test]
    fn drifts_of_one_object_go_together_most_severe_object_first() {
        let mut image = drift(3, "shop", "web", Severity::Low);
        image.path = "spec.template.spec.containers[web].image".into();
        let m = Message::new(
            "ops",
            vec![
                event(EventKind::Opened, drift(1, "shop", "api", Severity::Medium)),
                event(EventKind::Opened, image),
                event(EventKind::Opened, drift(2, "shop", "web", Severity::Critical)),
            ],
            None,
        );
        let names: Vec<(&str, usize)> = m.groups().iter().map(|g| (g.key.name.as_str(), g.events.len())).collect();
        assert_eq!(names, [("web", 2), ("api", 1)]);
        assert_eq!(m.severity(), Some(Severity::Critical));
        assert_eq!(m.groups()[0].key.display(), "Deployment shop/web");
        let paths: Vec<&str> = m.groups()[0].events.iter().map(|e| e.drift.as_ref().unwrap().path.as_str()).collect();
        assert_eq!(paths, ["spec.replicas", "spec.template.spec.containers[web].image"]);
    }

    #[test]
    fn titles_say_what_where_and_how_bad() {
        let one = Message::new("o", vec![event(EventKind::Resolved, drift(1, "shop", "web", Severity::High))], None);
        assert_eq!(one.title(), "1 drift resolved in prod/shop (1 HIGH)");
        let mut other_ns = drift(2, "billing", "api", Severity::Low);
        other_ns.cluster = "prod".into();
        let mixed = Message::new(
            "o",
            vec![
                event(EventKind::Opened, drift(1, "shop", "web", Severity::High)),
                event(EventKind::Resolved, other_ns),
            ],
            None,
        );
        assert_eq!(mixed.title(), "2 drift events in prod: 1 opened, 1 resolved (1 HIGH)");
        let mut staging = drift(3, "shop", "web", Severity::Low);
        staging.cluster = "staging".into();
        let clusters = Message::new(
            "o",
            vec![
                event(EventKind::Reminder, drift(1, "shop", "web", Severity::Low)),
                event(EventKind::Reminder, staging),
            ],
            None,
        );
        assert_eq!(clusters.title(), "2 drifts still open in 2 clusters (2 LOW)");
        assert_eq!(Message::new("o", vec![digest_event("o")], None).title(), "Drift digest: 3 open (1 CRITICAL)");
    }

    #[test]
    fn views_shorten_values_and_say_who_changed_it() {
        let mut d = drift(7, "shop", "web", Severity::High);
        d.cluster_value = Some(json!("x".repeat(500)));
        d.git_value = None;
        let mut e = event(EventKind::Changed, d);
        e.previous = Some(Previous { cluster_value: Some(json!({"a": 1})), severity: Severity::Low });
        let m = Message::new("o", vec![e.clone()], Some(Url::parse("https://drift.example.com/ui").unwrap()));
        let v = m.view(&e).unwrap();
        assert_eq!(v.cluster.chars().count(), MAX_VALUE_CHARS);
        assert!(v.cluster.ends_with('…'));
        assert_eq!(v.git, "(absent)");
        assert_eq!(v.before, Some(("{\"a\":1}".to_owned(), Severity::Low)));
        assert_eq!(v.who_when().unwrap(), "changed by kubectl-edit at 2026-12-01 07:55 UTC");
        assert_eq!(v.link.unwrap().as_str(), "https://drift.example.com/ui/drifts/7");
    }

    #[test]
    fn the_person_behind_a_change_is_named_with_the_manager() {
        let mut d = drift(7, "shop", "web", Severity::High);
        let changed_at = d.changed_at.unwrap();
        d.changed_by_user = Some(drift_model::ChangeIdentity {
            username: "alice".into(),
            groups: vec!["dev".into()],
            source_ips: vec!["10.0.0.7".into()],
            user_agent: None,
            verb: "patch".into(),
            audit_id: "a".into(),
            request_time: changed_at,
            changed_at,
        });
        let e = event(EventKind::Opened, d);
        let v = Message::new("o", vec![e.clone()], None).view(&e).unwrap();
        assert_eq!(v.who_when().unwrap(), "changed by kubectl-edit (alice) at 2026-12-01 07:55 UTC");
    }

    #[test]
    fn a_batch_of_ten_thousand_is_a_summary_with_bounded_detail() {
        let events: Vec<DriftEvent> = (0..10_000)
            .map(|i| {
                let sev = if i % 1000 == 0 { Severity::Critical } else { Severity::Low };
                event(EventKind::Opened, drift(i, &format!("ns-{}", i % 37), &format!("app-{}", i % 2500), sev))
            })
            .collect();
        let m = Message::new("ops", events, None);
        assert!(m.is_summary());
        assert_eq!(m.counts().events, 10_000);
        assert_eq!(m.counts().by_severity[&Severity::Critical], 10);
        let (shown, hidden) = m.shown_groups();
        assert_eq!(shown.len(), MAX_OBJECTS_SHOWN);
        assert_eq!(shown.len() + hidden, m.counts().objects);
        assert!(shown.iter().take(10).all(|g| g.severity == Severity::Critical), "the critical ones come first");
        let lines = m.summary_lines();
        assert!(lines[4].1.ends_with("(others)"), "{:?}", lines[4]);
        assert!(m.title().starts_with("10000 drifts opened in prod (10 CRITICAL)"), "{}", m.title());
    }
}
