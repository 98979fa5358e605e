//! Ignore rules as configured (`ignore:` in drift.yaml) and as an object in Git lists its own
//! ignored paths ([`IGNORE_ANNOTATION`]), and compiled ([`CompiledRule`]: its globs checked); the
//! engine applies them to each object (`drift_engine::ignore`).

use globset::{Glob, GlobMatcher, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};

use crate::resource::ResourceKey;

/// The annotation by which an object in Git ignores some of its own paths: JSON pointers
/// separated by commas or new lines.
pub const IGNORE_ANNOTATION: &str = "drift-detector.io/ignore";

/// An ignore rule. Every selector present must match; a rule with neither pointers nor managers
/// ignores the whole object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IgnoreRule {
    /// API group glob (`apps`, `*`; the core group is the empty string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Kind glob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Namespace glob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name glob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// JSON pointers (`/spec/replicas`; list items by index, `*` or `name=value`); a path at or
    /// under one is ignored.
    #[serde(default, rename = "jsonPointers", alias = "json_pointers", skip_serializing_if = "Vec::is_empty")]
    pub json_pointers: Vec<String>,
    /// Globs of field managers whose fields are never drift (`kube-controller-manager` for an
    /// autoscaler owning spec.replicas).
    #[serde(default, rename = "managers", alias = "managedFieldsManagers", skip_serializing_if = "Vec::is_empty")]
    pub managers: Vec<String>,
}

/// A compiled rule.
#[derive(Debug, Clone)]
pub struct CompiledRule {
    group: Option<GlobMatcher>,
    kind: Option<GlobMatcher>,
    namespace: Option<GlobMatcher>,
    name: Option<GlobMatcher>,
    pointers: Vec<String>,
    managers: Option<GlobSet>,
}

fn glob(g: &Option<String>) -> crate::Result<Option<GlobMatcher>> {
    g.as_ref()
        .map(|g| {
            Glob::new(g).map(|g| g.compile_matcher()).map_err(|e| crate::Error::config(format!("bad glob {g:?}: {e}")))
        })
        .transpose()
}

impl CompiledRule {
    /// Compiles a rule; bad globs and pointers are configuration errors.
    pub fn new(rule: &IgnoreRule) -> crate::Result<Self> {
        for p in &rule.json_pointers {
            if !p.is_empty() && !p.starts_with('/') {
                return Err(crate::Error::config(format!("JSON pointer {p:?} must start with '/'")));
            }
        }
        Ok(CompiledRule {
            group: glob(&rule.group)?,
            kind: glob(&rule.kind)?,
            namespace: glob(&rule.namespace)?,
            name: glob(&rule.name)?,
            pointers: rule.json_pointers.clone(),
            managers: if rule.managers.is_empty() { None } else { Some(glob_set(&rule.managers)?) },
        })
    }

    /// The JSON pointers it ignores.
    pub fn pointers(&self) -> &[String] {
        &self.pointers
    }

    /// The field managers whose fields it ignores.
    pub fn managers(&self) -> Option<&GlobSet> {
        self.managers.as_ref()
    }

    /// Whether the rule applies to an object.
    pub fn selects(&self, key: &ResourceKey) -> bool {
        let m = |g: &Option<GlobMatcher>, v: &str| g.as_ref().is_none_or(|g| g.is_match(v));
        m(&self.group, &key.group)
            && m(&self.kind, &key.kind)
            && m(&self.namespace, key.namespace.as_deref().unwrap_or(""))
            && m(&self.name, &key.name)
    }
}

/// Compiles globs, reporting the first bad one.
pub fn glob_set(globs: &[String]) -> crate::Result<GlobSet> {
    let mut b = GlobSetBuilder::new();
    for g in globs {
        b.add(Glob::new(g).map_err(|e| crate::Error::config(format!("bad glob {g:?}: {e}")))?);
    }
    b.build().map_err(|e| crate::Error::config(e.to_string()))
}
