//! Whitelist proposals (drift.yaml `accept.propose:`, opt-in): when people decided the same way
//! about the same pattern again and again, the detector proposes the ignore rule to Git, as a
//! reviewable change, through the same proposers as accepted changes.
//!
//! - **The pattern** is one path of one object: cluster, repository, API group, kind,
//!   namespace, name and the drift's path (list items by their key, `containers[name=web]`).
//!   Who changed it (the field manager) is evidence, not part of the pattern: the rule
//!   proposed ignores the path whoever changes it.
//! - **Consistent** means: within `within` (default 90 days), at least `after` (default 3)
//!   `accept` decisions by people about drifts of the pattern, and no `reject` among them.
//!   Acknowledgements say nothing about intent and do not count; waivers written in Git
//!   (`git:<owner>`) are in Git already and do not count either.
//! - **The change** adds the path's JSON pointer to the object's `drift-detector.io/ignore`
//!   annotation in Git (docs/configuration.md, "ignore[]"), keeping the pointers it lists
//!   already. The patterns of one object go into one change on the object's branch
//!   (`drift/propose/...`): a pull request on GitHub, a pushed branch elsewhere, updated (never
//!   a second one) when another pattern of the object qualifies, never proposed again as it
//!   was. Its body holds the evidence: each decision, who made it, when, and its comment.
//! - **Never** a Secret, a missing or unmanaged object, a pattern whose pointer Git ignores
//!   already. With the classifier's settings (`classify:`), a pattern whose newest drift the
//!   classifier predicts, above its confidence, as anything but `accept` is held.
//! - Every proposal is in the audit trail: action `accept`, actor [`PROPOSE_ACTOR`], status
//!   `proposed`, `updated`, `held`, `refused` or `failed`, with the pattern, the evidence and
//!   the branch in `detail`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use drift_core::act::{AuditAction, AuditFilter, AuditNote};
use drift_core::drift_engine::classify::Intent;
use drift_core::drift_engine::classify::{Classifier, PredictionView};
use drift_core::path::Path;
use drift_core::remedy::{ChangeRequest, Fault, FieldChange};
use drift_core::sink::{PageRequest, StoredDrift};
use drift_core::{DriftType, Resource};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::{Remedies, is_secret, object_of};

/// The actor of whitelist proposals in the audit trail.
pub const PROPOSE_ACTOR: &str = "propose";

/// The annotation the proposals add to (as `drift_core::ignore::IGNORE_ANNOTATION`).
pub use drift_core::ignore::IGNORE_ANNOTATION;

/// `accept.propose:` of drift.yaml.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProposePolicy {
    /// How many `accept` decisions about a pattern (and no `reject`) make a proposal (default
    /// 3, at least 2).
    pub after: u32,
    /// Only decisions this recent count (default 90 days).
    #[serde(with = "humantime_serde")]
    pub within: Duration,
    /// How often `drift serve` looks for patterns to propose (default 10 minutes).
    #[serde(with = "humantime_serde")]
    pub tick: Duration,
}

impl Default for ProposePolicy {
    fn default() -> Self {
        ProposePolicy { after: 3, within: Duration::from_secs(90 * 86_400), tick: Duration::from_secs(600) }
    }
}

impl ProposePolicy {
    /// Checks the policy.
    pub fn validate(&self) -> drift_core::Result<()> {
        if self.after < 2 {
            return Err(drift_core::Error::config(format!(
                "accept.propose: after is {}; one decision is not a pattern (at least 2)",
                self.after
            )));
        }
        if self.within.is_zero() || self.tick.is_zero() {
            return Err(drift_core::Error::config("accept.propose: within and tick must be more than 0"));
        }
        Ok(())
    }
}

/// One path of one object: what a proposal ignores.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Pattern {
    /// Cluster.
    pub cluster: String,
    /// Repository.
    pub repository: String,
    /// API group.
    pub api_group: String,
    /// Kind.
    pub kind: String,
    /// Namespace (empty: cluster-scoped).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The drift's path.
    pub path: String,
}

impl Pattern {
    fn of(d: &StoredDrift) -> Pattern {
        Pattern {
            cluster: d.cluster.clone(),
            repository: d.repository.clone(),
            api_group: d.api_group.clone(),
            kind: d.resource_kind.clone(),
            namespace: d.namespace.clone(),
            name: d.resource_name.clone(),
            path: d.path.clone(),
        }
    }
}

/// One decision behind a proposal.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evidence {
    /// The drift decided on.
    pub drift_id: i64,
    /// `accept`.
    pub decision: String,
    /// Who decided.
    pub actor: String,
    /// When.
    pub at: DateTime<Utc>,
    /// Their comment.
    pub comment: Option<String>,
    /// Who had changed the field (the drift's field manager).
    pub changed_by: Option<String>,
    /// The cluster value decided on.
    pub cluster_value: Option<serde_json::Value>,
}

/// A pattern that qualifies, with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Qualified {
    /// The pattern.
    pub pattern: Pattern,
    /// Its JSON pointer, as the annotation lists it.
    pub pointer: String,
    /// The decisions, oldest first.
    pub evidence: Vec<Evidence>,
    /// What the classifier predicts for the pattern's newest drift.
    pub prediction: Option<PredictionView>,
    /// Why the pattern is held back (the classifier disagrees), if it is.
    pub held: Option<String>,
}

/// The proposal of one object: its qualifying patterns and the change.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WhitelistProposal {
    /// `Deployment shop/web`.
    pub object: String,
    /// The patterns (held ones included, with their reason; they are not in the change).
    pub patterns: Vec<Qualified>,
    /// The annotation's value before (`None`: the object has none).
    pub before: Option<String>,
    /// Its value with the proposal.
    pub after: String,
    /// The branch.
    pub branch: String,
    /// Title of the pull request.
    pub title: String,
    /// Body of the pull request: the evidence.
    pub body: String,
    /// The newest drift of the proposal (the audit entries name it).
    pub drift_id: i64,
    #[serde(skip)]
    request: Option<ChangeRequest>,
}

impl WhitelistProposal {
    /// The change for the repository's proposer; `None` when every pattern is held.
    pub fn request(&self) -> Option<&ChangeRequest> {
        self.request.as_ref()
    }

    /// The repository.
    pub fn repository(&self) -> &str {
        self.patterns.first().map_or("", |p| p.pattern.repository.as_str())
    }
}

/// What one round of whitelist proposals did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ProposeRound {
    /// Objects with at least one qualifying pattern.
    pub candidates: usize,
    /// Objects proposed (a new pull request or branch).
    pub proposed: usize,
    /// Objects whose earlier proposal was updated.
    pub updated: usize,
    /// Objects proposed already as they are now.
    pub unchanged: usize,
    /// Objects whose every pattern the classifier holds back.
    pub held: usize,
    /// Refused by the proposer (the change cannot be placed, the object is not in Git).
    pub refused: usize,
    /// Failed (the store or the git server).
    pub failed: usize,
}

/// The JSON pointer of a drift path of an object of `kind` (`spec.template.spec.containers[name=web].image`
/// -> `/spec/template/spec/containers/name=web/image`): the rest of a path under
/// `metadata.labels` or `metadata.annotations`, and under a ConfigMap's `data` or `binaryData`,
/// is one key (`example.com/team`, `app.properties`); elsewhere (a custom kind's `data` object)
/// every dot is a level. `None` for what a pointer cannot say: an item keyed by more than one
/// field, an empty path (the whole object).
pub fn pointer_of(kind: &str, path: &str) -> Option<String> {
    if path.is_empty() {
        return None;
    }
    let escape = |t: &str| t.replace('~', "~0").replace('/', "~1");
    let key_maps: &[&str] = match kind {
        "ConfigMap" | "Secret" => &["metadata.labels.", "metadata.annotations.", "data.", "binaryData.", "stringData."],
        _ => &["metadata.labels.", "metadata.annotations."],
    };
    for map in key_maps {
        if let Some(key) = path.strip_prefix(map).filter(|k| !k.is_empty()) {
            let head: Vec<&str> = map.trim_end_matches('.').split('.').collect();
            return Some(format!("/{}/{}", head.join("/"), escape(key)));
        }
    }
    let mut tokens = Vec::new();
    let mut field = String::new();
    let mut chars = path.chars();
    while let Some(c) = chars.next() {
        match c {
            '.' => {
                if !field.is_empty() {
                    tokens.push(escape(&std::mem::take(&mut field)));
                }
            }
            '[' => {
                if !field.is_empty() {
                    tokens.push(escape(&std::mem::take(&mut field)));
                }
                let mut depth = 1;
                let mut item = String::new();
                for c in chars.by_ref() {
                    match c {
                        '[' => depth += 1,
                        ']' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    item.push(c);
                }
                if depth != 0 || item.is_empty() || item.contains(',') {
                    return None;
                }
                tokens.push(escape(&item));
            }
            _ => field.push(c),
        }
    }
    if !field.is_empty() {
        tokens.push(escape(&field));
    }
    (!tokens.is_empty()).then(|| format!("/{}", tokens.join("/")))
}

/// The pointers an annotation value lists (commas or new lines between them).
pub fn pointers_in(annotation: &str) -> Vec<String> {
    annotation.split([',', '\n']).map(str::trim).filter(|p| !p.is_empty()).map(str::to_owned).collect()
}

/// The branch of the whitelist proposals of one object.
pub fn propose_branch_of(p: &Pattern) -> String {
    let mut h = Sha256::new();
    for part in [&p.cluster, &p.repository, &p.api_group, &p.kind, &p.namespace, &p.name] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    let name: String = p
        .name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c.to_ascii_lowercase() } else { '-' })
        .take(40)
        .collect();
    format!("drift/propose/{}-{name}-{}", p.kind.to_ascii_lowercase(), &hex::encode(h.finalize())[..10])
}

/// Text of a table cell: no new line, no `|`, no backtick run that ends the code.
fn cell(text: &str) -> String {
    text.replace(['\n', '\r'], " ").replace('|', "\\|")
}

/// The pull request's body: what is proposed, and every decision behind it.
pub fn proposal_body(object: &str, cluster: &str, patterns: &[&Qualified], after: &str, link: Option<&str>) -> String {
    let mut body = format!(
        "The drift detector proposes to stop reporting drift of **{object}** (cluster `{cluster}`) at {}: people accepted the cluster's change every time they decided on it.\n\n",
        patterns.iter().map(|p| format!("`{}`", p.pattern.path)).collect::<Vec<_>>().join(", ")
    );
    body.push_str("### Evidence\n\n| path | drift | decision | by | when | changed by | value accepted | comment |\n|---|---|---|---|---|---|---|---|\n");
    for p in patterns {
        for e in &p.evidence {
            let drift = match link {
                Some(base) => format!("[{}]({}/drifts/{})", e.drift_id, base.trim_end_matches('/'), e.drift_id),
                None => e.drift_id.to_string(),
            };
            let value = match &e.cluster_value {
                Some(v) => format!("`{}`", cell(&v.to_string().replace('`', "'"))),
                None => "(absent)".to_owned(),
            };
            body.push_str(&format!(
                "| `{}` | {drift} | {} | {} | {} | {} | {value} | {} |\n",
                p.pattern.path,
                e.decision,
                cell(&e.actor),
                e.at.to_rfc3339(),
                cell(e.changed_by.as_deref().unwrap_or("unknown")),
                cell(e.comment.as_deref().unwrap_or("")),
            ));
        }
        if let Some(pr) = &p.prediction {
            body.push_str(&format!("\nClassifier, for `{}`: {}\n", p.pattern.path, cell(&pr.explanation)));
        }
    }
    let deciders: BTreeSet<&str> = patterns.iter().flat_map(|p| p.evidence.iter().map(|e| e.actor.as_str())).collect();
    body.push_str(&format!(
        "\nDecided by: {}.\n\n### The change\n\nThe annotation `{IGNORE_ANNOTATION}` of the object in Git becomes `{after}`. Merged, the detector no longer reports drift at these paths of this object, whoever changes them; remove a pointer from the annotation to watch its path again.\n",
        deciders.into_iter().collect::<Vec<_>>().join(", ")
    ));
    body
}

impl Remedies {
    /// The objects whose patterns qualify at `now` (see the module's documentation), with the
    /// change each would make; held patterns are listed, not proposed. `classifier` (with its
    /// settings) holds back what it predicts otherwise.
    pub async fn whitelist_proposals(
        &self,
        policy: &ProposePolicy,
        classifier: Option<&Classifier>,
        now: DateTime<Utc>,
    ) -> drift_core::Result<Vec<WhitelistProposal>> {
        let act = self.act().map_err(super::auto::fault_error)?.clone();
        let since = now - chrono::Duration::from_std(policy.within).unwrap_or(chrono::Duration::days(90));
        // Every decision of the window, by drift.
        let filter = AuditFilter { action: Some(AuditAction::Decision), since: Some(since), ..AuditFilter::default() };
        let mut by_drift: BTreeMap<i64, Vec<drift_core::act::AuditEntry>> = BTreeMap::new();
        let mut after = None;
        loop {
            let page = act.audit(&filter, PageRequest { limit: PageRequest::MAX_LIMIT, after }).await?;
            for e in page.items {
                if let Some(id) = e.drift_id.filter(|_| !e.actor.starts_with("git:")) {
                    by_drift.entry(id).or_default().push(e);
                }
            }
            match page.next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        let mut patterns: BTreeMap<Pattern, (Vec<Evidence>, bool, StoredDrift)> = BTreeMap::new();
        for (id, entries) in by_drift {
            let d = match self.scanner.store.read.get(id).await {
                Ok(d) => d,
                Err(e) if e.kind() == drift_core::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            if is_secret(&d)
                || matches!(d.drift_type, DriftType::MissingResource | DriftType::UnmanagedResource)
                || d.cluster != self.scanner.live.cluster()
            {
                continue;
            }
            let slot = patterns.entry(Pattern::of(&d)).or_insert_with(|| (Vec::new(), false, d.clone()));
            if d.id > slot.2.id {
                slot.2 = d.clone();
            }
            for e in entries {
                match e.status.as_str() {
                    "reject" => slot.1 = true,
                    "accept" => slot.0.push(Evidence {
                        drift_id: id,
                        decision: e.status.clone(),
                        actor: e.actor.clone(),
                        at: e.at,
                        comment: e.detail.get("comment").and_then(|c| c.as_str()).map(str::to_owned),
                        changed_by: d.changed_by.clone(),
                        cluster_value: d.cluster_value.clone(),
                    }),
                    _ => {}
                }
            }
        }
        // Consistent patterns, by object.
        let mut objects: BTreeMap<String, Vec<(Pattern, Vec<Evidence>, StoredDrift)>> = BTreeMap::new();
        for (pattern, (mut evidence, rejected, newest)) in patterns {
            if rejected || evidence.len() < policy.after as usize {
                continue;
            }
            evidence.sort_by_key(|e| e.at);
            objects.entry(propose_branch_of(&pattern)).or_default().push((pattern, evidence, newest));
        }
        let mut out = Vec::new();
        for (branch, patterns) in objects {
            let newest = patterns.iter().map(|(_, _, d)| d).max_by_key(|d| d.id).cloned();
            let Some(newest) = newest else { continue };
            let desired = match self.desired_object(&newest).await {
                Ok(r) => r,
                Err(Fault::Refused(r)) => {
                    tracing::info!(object = %object_of(&newest), reason = %r.message, "no whitelist proposal: the object cannot be read from Git");
                    continue;
                }
                Err(Fault::Failed(e)) => return Err(e),
            };
            let before = annotation_of(&desired);
            let listed = before.as_deref().map(pointers_in).unwrap_or_default();
            let mut qualified = Vec::new();
            for (pattern, evidence, d) in patterns {
                let Some(pointer) = pointer_of(&pattern.kind, &pattern.path) else {
                    tracing::info!(path = %pattern.path, "no whitelist proposal: the path has no JSON pointer");
                    continue;
                };
                if listed.contains(&pointer) {
                    continue;
                }
                let prediction = match (classifier, self.scanner.store.act.as_ref()) {
                    (Some(c), Some(act)) => c.predict(self.scanner.store.read.as_ref(), act.as_ref(), &d).await?,
                    _ => None,
                };
                let held = prediction.as_ref().filter(|p| p.used && p.intent != Intent::Accept).map(|p| {
                    format!("the classifier predicts {} above the confidence set: {}", p.intent.as_str(), p.explanation)
                });
                qualified.push(Qualified { pattern, pointer, evidence, prediction, held });
            }
            if qualified.is_empty() {
                continue;
            }
            let mut pointers = listed.clone();
            pointers.extend(qualified.iter().filter(|q| q.held.is_none()).map(|q| q.pointer.clone()));
            let after = pointers.join(", ");
            let proposed: Vec<&Qualified> = qualified.iter().filter(|q| q.held.is_none()).collect();
            let object = object_of(&newest);
            let title = format!(
                "drift: ignore {} of {object} (accepted {} times)",
                proposed.iter().map(|q| q.pattern.path.as_str()).collect::<Vec<_>>().join(", "),
                proposed.iter().map(|q| q.evidence.len()).sum::<usize>()
            );
            let body = proposal_body(&object, &newest.cluster, &proposed, &after, self.link.as_deref());
            let request = (!proposed.is_empty()).then(|| ChangeRequest {
                key: desired.key.clone(),
                api_version: desired.api_version.clone(),
                changes: vec![FieldChange {
                    path: Path::root().field("metadata").field("annotations").field(IGNORE_ANNOTATION),
                    value: Some(serde_json::Value::String(after.clone())),
                }],
                branch: branch.clone(),
                title: title.clone(),
                body: body.clone(),
            });
            out.push(WhitelistProposal {
                object,
                patterns: qualified,
                before,
                after,
                branch,
                title,
                body,
                drift_id: newest.id,
                request,
            });
        }
        Ok(out)
    }

    /// One round of whitelist proposals at `now`: each qualifying object proposed through its
    /// repository's proposer, once as it is (see the module's documentation).
    pub async fn propose_round(
        &self,
        policy: &ProposePolicy,
        classifier: Option<&Classifier>,
        now: DateTime<Utc>,
    ) -> drift_core::Result<ProposeRound> {
        let act = self.act().map_err(super::auto::fault_error)?.clone();
        let mut round = ProposeRound::default();
        for p in self.whitelist_proposals(policy, classifier, now).await? {
            // Only the repositories this detector proposes to (`drift propose` builds one per
            // repository and cluster; a folder source has no proposer): the others are not its.
            let Some(proposer) = self.proposers.iter().find(|x| x.repository() == p.repository()) else {
                continue;
            };
            round.candidates += 1;
            let patterns = serde_json::to_value(&p.patterns).unwrap_or_default();
            let note = |status: &str, extra: serde_json::Value| {
                let mut detail = json!({"object": p.object, "branch": p.branch, "annotation": p.after,
                                        "patterns": patterns, "body": p.body});
                if let (Some(out), serde_json::Value::Object(extra)) = (detail.as_object_mut(), extra) {
                    out.extend(extra);
                }
                AuditNote {
                    action: AuditAction::Accept,
                    actor: PROPOSE_ACTOR.to_owned(),
                    drift_id: Some(p.drift_id),
                    status: status.to_owned(),
                    detail,
                    attempt: None,
                }
            };
            let Some(request) = p.request() else {
                if !self.noted(&p.branch, "held", &p.after).await? {
                    act.note(&note("held", json!({})), now).await?;
                }
                round.held += 1;
                continue;
            };
            if self.noted(&p.branch, "proposed", &p.after).await? || self.noted(&p.branch, "updated", &p.after).await? {
                round.unchanged += 1;
                continue;
            }
            match proposer.propose(request).await {
                Ok(done) if done.placed.is_empty() => {
                    round.refused += 1;
                    // Tried again every round (Git may change), audited once per annotation.
                    if !self.noted(&p.branch, "refused", &p.after).await? {
                        act.note(&note("refused", json!({"reason": format!("the annotation cannot be placed in Git: {}", done.unplaced.join("; "))})), now).await?;
                    }
                }
                Ok(done) => {
                    let status = if done.updated { "updated" } else { "proposed" };
                    if done.updated {
                        round.updated += 1
                    } else {
                        round.proposed += 1
                    }
                    tracing::info!(object = %p.object, url = ?done.url, updated = done.updated, "whitelist proposal");
                    act.note(
                        &note(
                            status,
                            json!({"url": done.url, "pull_request": done.pull_request, "placed": done.placed}),
                        ),
                        now,
                    )
                    .await?;
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        drift_core::ErrorKind::Unavailable | drift_core::ErrorKind::PermissionDenied
                    ) =>
                {
                    round.failed += 1;
                    tracing::warn!(object = %p.object, error = %e, "whitelist proposal failed; tried again at the next round");
                    act.note(&note("failed", json!({"error": e.to_string()})), now).await?;
                }
                Err(e) => {
                    round.refused += 1;
                    act.note(&note("refused", json!({"reason": e.to_string()})), now).await?;
                }
            }
        }
        Ok(round)
    }

    /// Whether the audit trail has a proposal of `branch` with `status` and this annotation.
    async fn noted(&self, branch: &str, status: &str, annotation: &str) -> drift_core::Result<bool> {
        let act = self.act().map_err(super::auto::fault_error)?;
        let filter = AuditFilter {
            action: Some(AuditAction::Accept),
            actor: Some(PROPOSE_ACTOR.to_owned()),
            status: Some(status.to_owned()),
            ..AuditFilter::default()
        };
        let mut after = None;
        loop {
            let page = act.audit(&filter, PageRequest { limit: PageRequest::MAX_LIMIT, after }).await?;
            if page.items.iter().any(|e| {
                e.detail.get("branch").and_then(|b| b.as_str()) == Some(branch)
                    && e.detail.get("annotation").and_then(|a| a.as_str()) == Some(annotation)
            }) {
                return Ok(true);
            }
            match page.next {
                Some(n) => after = Some(n),
                None => return Ok(false),
            }
        }
    }
}

/// The object's `drift-detector.io/ignore` annotation in Git.
fn annotation_of(desired: &Resource) -> Option<String> {
    desired.object.get("metadata")?.get("annotations")?.get(IGNORE_ANNOTATION)?.as_str().map(str::to_owned)
}

/// The whitelist proposals task: a round every `policy.tick` until `stop` turns true.
pub async fn run_proposals(
    remedies: std::sync::Arc<Remedies>,
    policy: ProposePolicy,
    classifier: std::sync::Arc<Classifier>,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    super::every(policy.tick, stop, || async {
        match remedies.propose_round(&policy, Some(&classifier), Utc::now()).await {
            Ok(r) if r.proposed + r.updated + r.refused + r.failed + r.held > 0 => tracing::info!(
                candidates = r.candidates,
                proposed = r.proposed,
                updated = r.updated,
                unchanged = r.unchanged,
                held = r.held,
                refused = r.refused,
                failed = r.failed,
                "whitelist proposals round"
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "whitelist proposals round failed; retried at the next round"),
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn drift_paths_become_the_pointers_the_annotation_reads() {
        assert_eq!(pointer_of("Deployment", "spec.replicas").as_deref(), Some("/spec/replicas"));
        assert_eq!(
            pointer_of("Deployment", "spec.template.spec.containers[name=web].image").as_deref(),
            Some("/spec/template/spec/containers/name=web/image")
        );
        assert_eq!(pointer_of("Deployment", "spec.ports[0].port").as_deref(), Some("/spec/ports/0/port"));
        assert_eq!(
            pointer_of("Deployment", "metadata.labels.example.com/team").as_deref(),
            Some("/metadata/labels/example.com~1team")
        );
        assert_eq!(pointer_of("ConfigMap", "data.app.properties").as_deref(), Some("/data/app.properties"));
        assert_eq!(
            pointer_of("Widget", "data.app.properties").as_deref(),
            Some("/data/app/properties"),
            "a custom kind's data object"
        );
        assert_eq!(
            pointer_of("Deployment", "spec.ports[port=80,protocol=UDP].name"),
            None,
            "two key fields: no pointer says it"
        );
        assert_eq!(pointer_of("Deployment", ""), None);
        // Each pointer matches the path it came from.
        let path = Path::root().field("spec").field("template").field("spec").field("containers").item(
            vec![("name".into(), "web".into())],
            vec![false],
            0,
        );
        assert!(
            path.field("image")
                .matches_pointer(&pointer_of("Deployment", "spec.template.spec.containers[name=web].image").unwrap())
        );
    }

    #[test]
    fn annotation_values_split_as_the_engine_reads_them() {
        assert_eq!(
            pointers_in("/spec/replicas, /metadata/labels/team\n/data/a"),
            ["/spec/replicas", "/metadata/labels/team", "/data/a"]
        );
        assert!(pointers_in(" , \n").is_empty());
    }

    #[test]
    fn the_body_names_every_decision_and_its_decider() {
        let at = |h| DateTime::parse_from_rfc3339(&format!("2026-12-0{h}T10:00:00Z")).unwrap().with_timezone(&Utc);
        let q = Qualified {
            pattern: Pattern {
                cluster: "home".into(),
                repository: "shop".into(),
                api_group: "apps".into(),
                kind: "Deployment".into(),
                namespace: "shop".into(),
                name: "web".into(),
                path: "spec.replicas".into(),
            },
            pointer: "/spec/replicas".into(),
            evidence: ["alice", "bob", "carol"]
                .iter()
                .enumerate()
                .map(|(i, who)| Evidence {
                    drift_id: 7,
                    decision: "accept".into(),
                    actor: (*who).into(),
                    at: at(i + 1),
                    comment: Some("sale | scaled".into()),
                    changed_by: Some("kubectl-scale".into()),
                    cluster_value: Some(json!(5)),
                })
                .collect(),
            prediction: None,
            held: None,
        };
        let body =
            proposal_body("apps/Deployment shop/web", "home", &[&q], "/spec/replicas", Some("https://drift.example/"));
        assert!(body.contains("Decided by: alice, bob, carol."), "{body}");
        assert_eq!(
            body.matches("| `spec.replicas` | [7](https://drift.example/drifts/7) | accept |").count(),
            3,
            "{body}"
        );
        assert!(body.contains("sale \\| scaled"), "a comment cannot break the table: {body}");
        assert!(body.contains("2026-12-02T10:00:00+00:00"), "{body}");
        assert!(body.contains("becomes `/spec/replicas`"), "{body}");
    }
}
