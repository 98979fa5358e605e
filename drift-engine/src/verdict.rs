//! The verdict on a drift: its type, severity, classification and recommended action, all
//! decided here (docs/drift-types.md).
//!
//! - the **type** of a path comes from one ordered rule table, first match wins
//!   ([`type_rules`], [`drift_type_of`]);
//! - the **severity** from the type, with configured overrides ([`SeverityTable`]);
//! - the **classification** from the kind of field manager that last changed the path
//!   ([`classification_of`]);
//! - the **recommended action** from the three ([`recommend`]).
//!
//! [`Verdicts`] holds the tables the engine uses and gives the whole [`Verdict`] at once. Which
//! paths are compared at all (ignore rules, merge keys) is decided before, in
//! [`crate::ignore`] and [`crate::merge_keys`].
//!
//! ```
//! use drift_engine::managed::ManagerClass;
//! use drift_model::path::Path;
//! use drift_engine::verdict::Verdicts;
//! use drift_model::{Classification, DriftType, RecommendedAction, Severity};
//!
//! let verdicts = Verdicts::default();
//! let path = Path::root().field("spec").field("replicas");
//! let drift_type = verdicts.drift_type("Deployment", &path);
//! let v = verdicts.decide(drift_type, Some(ManagerClass::Manual));
//! assert_eq!(v.drift_type, DriftType::ReplicasDrift);
//! assert_eq!(v.severity, Severity::Low);
//! assert_eq!(v.classification, Classification::ManualChange);
//! assert_eq!(v.recommended_action, RecommendedAction::CreatePr);
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::managed::ManagerClass;
use drift_model::drift::{Classification, DriftType, RecommendedAction, Severity};
use drift_model::path::{Path, Seg};

/// One token of a path pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    /// A field by name.
    Field(String),
    /// One of several field names (`{port,targetPort}`).
    OneOf(Vec<String>),
    /// Any list item (`[]`).
    Item,
    /// Any number of segments, including none (`**`).
    Any,
}

/// A compiled path pattern: fields separated by `.`, `[]` for any list item, `**` for any
/// number of segments, `{a,b}` for one of several fields. `**.containers[].image`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPattern(Vec<Tok>);

impl PathPattern {
    /// Parses a pattern.
    pub fn parse(text: &str) -> Self {
        let mut toks = Vec::new();
        for part in text.split('.').filter(|p| !p.is_empty()) {
            let (name, items) = match part.find("[]") {
                Some(i) => (&part[..i], part[i..].matches("[]").count()),
                None => (part, 0),
            };
            if name == "**" {
                toks.push(Tok::Any);
            } else if let Some(inner) = name.strip_prefix('{').and_then(|n| n.strip_suffix('}')) {
                toks.push(Tok::OneOf(inner.split(',').map(str::to_owned).collect()));
            } else if !name.is_empty() {
                toks.push(Tok::Field(name.to_owned()));
            }
            toks.extend(std::iter::repeat_n(Tok::Item, items));
        }
        PathPattern(toks)
    }

    /// Whether a path matches the whole pattern.
    pub fn matches(&self, path: &Path) -> bool {
        fn go(toks: &[Tok], segs: &[Seg]) -> bool {
            match toks.split_first() {
                None => segs.is_empty(),
                Some((Tok::Any, rest)) => (0..=segs.len()).any(|i| go(rest, &segs[i..])),
                Some((tok, rest)) => match segs.split_first() {
                    None => false,
                    Some((seg, segs_rest)) => {
                        let ok = match (tok, seg) {
                            (Tok::Field(n), Seg::Field(f)) => n == f,
                            (Tok::OneOf(ns), Seg::Field(f)) => ns.iter().any(|n| n == f),
                            (Tok::Item, Seg::Item { .. }) => true,
                            _ => false,
                        };
                        ok && go(rest, segs_rest)
                    }
                },
            }
        }
        go(&self.0, path.segments())
    }
}

/// A rule of the type table.
#[derive(Debug, Clone)]
pub struct TypeRule {
    /// Only for this kind.
    pub kind: Option<&'static str>,
    /// Path pattern.
    pub pattern: PathPattern,
    /// The type given.
    pub drift_type: DriftType,
}

/// The type rule table of docs/drift-types.md, in order. The last rule (`**`) gives `spec_drift`.
pub fn type_rules() -> Vec<TypeRule> {
    let rule = |kind, pattern: &str, drift_type| TypeRule { kind, pattern: PathPattern::parse(pattern), drift_type };
    let containers = "{containers,initContainers,ephemeralContainers}";
    vec![
        rule(Some("Service"), "spec.ports", DriftType::ServicePortDrift),
        rule(Some("Service"), "spec.ports[]", DriftType::ServicePortDrift),
        rule(Some("Service"), "spec.ports[].{port,targetPort,nodePort,protocol}", DriftType::ServicePortDrift),
        rule(None, &format!("**.{containers}[].image"), DriftType::ImageTagDrift),
        rule(None, &format!("**.{containers}[].resources.limits.**"), DriftType::ResourceLimitDrift),
        rule(None, &format!("**.{containers}[].resources.requests.**"), DriftType::ResourceRequestDrift),
        rule(None, "spec.replicas", DriftType::ReplicasDrift),
        rule(Some("ConfigMap"), "{data,binaryData}.**", DriftType::ConfigmapDrift),
        rule(Some("Secret"), "{data,stringData}.**", DriftType::SecretDrift),
        rule(None, "metadata.**", DriftType::MetadataDrift),
        rule(None, "**", DriftType::SpecDrift),
    ]
}

/// The drift type of a path in an object of `kind`, from a rule table.
///
/// ```
/// use drift_engine::verdict::*;
/// use drift_model::{path::Path, DriftType};
/// let p = Path::root().field("spec").field("template").field("spec").field("containers")
///     .item(vec![("name".into(), "web".into())], vec![false], 0).field("image");
/// assert_eq!(drift_type_of(&type_rules(), "Deployment", &p), DriftType::ImageTagDrift);
/// ```
pub fn drift_type_of(rules: &[TypeRule], kind: &str, path: &Path) -> DriftType {
    rules
        .iter()
        .find(|r| r.kind.is_none_or(|k| k == kind) && r.pattern.matches(path))
        .map(|r| r.drift_type)
        .unwrap_or(DriftType::SpecDrift)
}

/// Severity per drift type: the defaults of docs/drift-types.md, with configured overrides.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SeverityTable {
    /// Overrides of the defaults.
    pub overrides: BTreeMap<DriftType, Severity>,
}

impl SeverityTable {
    /// The default severity of a type.
    pub fn default_of(t: DriftType) -> Severity {
        match t {
            DriftType::ServicePortDrift => Severity::Critical,
            DriftType::ImageTagDrift
            | DriftType::ResourceLimitDrift
            | DriftType::SecretDrift
            | DriftType::MissingResource => Severity::High,
            DriftType::ResourceRequestDrift
            | DriftType::ConfigmapDrift
            | DriftType::SpecDrift
            | DriftType::UnmanagedResource => Severity::Medium,
            DriftType::ReplicasDrift | DriftType::MetadataDrift => Severity::Low,
        }
    }
    /// Whether the severity of a type is configured.
    pub fn is_overridden(&self, t: DriftType) -> bool {
        self.overrides.contains_key(&t)
    }
    /// The severity of a type, override first.
    pub fn severity(&self, t: DriftType) -> Severity {
        self.overrides.get(&t).copied().unwrap_or_else(|| Self::default_of(t))
    }
}

/// The classification of a drift from the kind of manager that last changed its path (`None`:
/// nobody is known, as for a missing object or an object without managedFields). A manager on
/// no list ([`ManagerClass::Unknown`]) is `unknown` too: its name proves nothing.
pub fn classification_of(manager: Option<ManagerClass>) -> Classification {
    match manager {
        None | Some(ManagerClass::Unknown) => Classification::Unknown,
        Some(ManagerClass::Manual | ManagerClass::ClientSideApply) => Classification::ManualChange,
        Some(ManagerClass::Applier) => Classification::PendingSync,
        Some(ManagerClass::Controller) => Classification::ControllerManaged,
    }
}

/// What to do about a drift (docs/drift-types.md, "Attribution and decisions"): controllers and
/// pending syncs are observed; a missing object or a severe manual change is reverted; a milder
/// manual change (a replica count, a request) looks intentional and belongs in Git.
pub fn recommend(drift_type: DriftType, severity: Severity, classification: Classification) -> RecommendedAction {
    match (drift_type, classification) {
        (DriftType::MissingResource, _) => RecommendedAction::SuggestRevert,
        // Adding it to Git or deleting it is a person's choice; it is never reverted.
        (DriftType::UnmanagedResource, _) => RecommendedAction::Observe,
        (_, Classification::ControllerManaged | Classification::PendingSync) => RecommendedAction::Observe,
        (_, Classification::ManualChange) if severity >= Severity::High => RecommendedAction::SuggestRevert,
        (_, Classification::ManualChange) => RecommendedAction::CreatePr,
        (_, Classification::Unknown) if severity >= Severity::High => RecommendedAction::SuggestRevert,
        (_, Classification::Unknown) => RecommendedAction::Observe,
    }
}

/// Everything decided about one drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// The drift type.
    pub drift_type: DriftType,
    /// Its severity (configured overrides applied).
    pub severity: Severity,
    /// What kind of change caused it.
    pub classification: Classification,
    /// What to do about it.
    pub recommended_action: RecommendedAction,
}

/// The tables the verdicts come from: the type rules and the severity table.
#[derive(Debug, Clone)]
pub struct Verdicts {
    rules: Vec<TypeRule>,
    severity: SeverityTable,
}

impl Default for Verdicts {
    fn default() -> Self {
        Verdicts::new(SeverityTable::default())
    }
}

impl Verdicts {
    /// The built-in type rules with a severity table.
    pub fn new(severity: SeverityTable) -> Self {
        Verdicts { rules: type_rules(), severity }
    }

    /// The severity table.
    pub fn severities(&self) -> &SeverityTable {
        &self.severity
    }

    /// The drift type of a path in an object of `kind`.
    pub fn drift_type(&self, kind: &str, path: &Path) -> DriftType {
        drift_type_of(&self.rules, kind, path)
    }

    /// The verdict on a drift of `drift_type` whose path was last changed by a manager of the
    /// kind `manager` (`None`: unknown).
    pub fn decide(&self, drift_type: DriftType, manager: Option<ManagerClass>) -> Verdict {
        let severity = self.severity.severity(drift_type);
        let classification = classification_of(manager);
        Verdict {
            drift_type,
            severity,
            classification,
            recommended_action: recommend(drift_type, severity, classification),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_object_is_reverted_whatever_its_severity() {
        let low = SeverityTable { overrides: [(DriftType::MissingResource, Severity::Low)].into() };
        let v = Verdicts::new(low).decide(DriftType::MissingResource, None);
        assert_eq!(v.severity, Severity::Low);
        assert_eq!(v.classification, Classification::Unknown);
        assert_eq!(v.recommended_action, RecommendedAction::SuggestRevert);
    }

    #[test]
    fn severity_and_manager_decide_the_action() {
        let verdicts = Verdicts::default();
        let action = |t, m| verdicts.decide(t, m).recommended_action;
        // Controllers and pending syncs are observed, even when severe.
        assert_eq!(action(DriftType::ServicePortDrift, Some(ManagerClass::Controller)), RecommendedAction::Observe);
        assert_eq!(action(DriftType::ServicePortDrift, Some(ManagerClass::Applier)), RecommendedAction::Observe);
        // Severe changes by hand or by nobody known are reverted; milder ones go to Git or are watched.
        assert_eq!(action(DriftType::ImageTagDrift, Some(ManagerClass::Manual)), RecommendedAction::SuggestRevert);
        assert_eq!(action(DriftType::ImageTagDrift, None), RecommendedAction::SuggestRevert);
        assert_eq!(action(DriftType::ReplicasDrift, Some(ManagerClass::ClientSideApply)), RecommendedAction::CreatePr);
        assert_eq!(action(DriftType::ReplicasDrift, None), RecommendedAction::Observe);
        // A manager on no list is unknown, never a controller: a severe change is reverted.
        assert_eq!(action(DriftType::ServicePortDrift, Some(ManagerClass::Unknown)), RecommendedAction::SuggestRevert);
        assert_eq!(
            verdicts.decide(DriftType::ReplicasDrift, Some(ManagerClass::Unknown)).classification,
            Classification::Unknown
        );
        // An override moves a type across the line.
        let high = SeverityTable { overrides: [(DriftType::ReplicasDrift, Severity::High)].into() };
        let v = Verdicts::new(high).decide(DriftType::ReplicasDrift, Some(ManagerClass::Manual));
        assert_eq!((v.severity, v.recommended_action), (Severity::High, RecommendedAction::SuggestRevert));
    }
}
