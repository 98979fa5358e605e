//! The drift type of each path, decided by one ordered rule table (first match wins), and the
//! severity table.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::drift::{DriftType, Severity};
use crate::path::{Path, Seg};

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

/// The rule table of DESIGN section 3, in order. The last rule (`**`) gives `spec_drift`.
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
/// use drift_core::{rules::*, path::Path, DriftType};
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

/// Severity per drift type: the defaults of DESIGN section 3, with configured overrides.
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
            DriftType::ResourceRequestDrift | DriftType::ConfigmapDrift | DriftType::SpecDrift => Severity::Medium,
            DriftType::ReplicasDrift | DriftType::MetadataDrift => Severity::Low,
        }
    }
    /// The severity of a type, override first.
    pub fn severity(&self, t: DriftType) -> Severity {
        self.overrides.get(&t).copied().unwrap_or_else(|| Self::default_of(t))
    }
}
