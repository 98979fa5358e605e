//! Ignore rules: per group/kind/namespace/name (globs), JSON pointers and field managers, plus
//! the paths an object in Git lists in its own annotation.

use globset::{Glob, GlobMatcher};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::ResourceKey;
use crate::path::Path;

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
    managers: Option<globset::GlobSet>,
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
            managers: if rule.managers.is_empty() { None } else { Some(crate::managed::glob_set(&rule.managers)?) },
        })
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

/// The ignore decisions for one object.
#[derive(Debug, Clone, Default)]
pub struct ObjectIgnores {
    /// The whole object is ignored.
    pub whole: bool,
    /// Pointers whose paths are ignored.
    pub pointers: Vec<String>,
    /// Managers whose fields are ignored.
    pub managers: Vec<globset::GlobSet>,
}

impl ObjectIgnores {
    /// Collects the rules that select `key`, plus the object's own annotation in Git.
    pub fn for_object(rules: &[CompiledRule], key: &ResourceKey, desired: &Value) -> Self {
        let mut out = ObjectIgnores::default();
        for r in rules.iter().filter(|r| r.selects(key)) {
            out.add(r);
        }
        let annotations = desired.get("metadata").and_then(|m| m.get("annotations"));
        // Waivers in Git are the detector's own notes: never a drift, wherever they are applied.
        if annotations.is_some_and(|a| a.get(crate::waiver::WAIVERS_ANNOTATION).is_some()) {
            out.pointers
                .push(format!("/metadata/annotations/{}", crate::waiver::WAIVERS_ANNOTATION.replace('/', "~1")));
        }
        if let Some(ann) = annotations.and_then(|a| a.get(IGNORE_ANNOTATION)).and_then(Value::as_str) {
            out.pointers
                .extend(ann.split([',', '\n']).map(str::trim).filter(|p| p.starts_with('/')).map(str::to_owned));
        }
        out
    }
    fn add(&mut self, r: &CompiledRule) {
        if r.pointers.is_empty() && r.managers.is_none() {
            self.whole = true;
        }
        self.pointers.extend(r.pointers.iter().cloned());
        self.managers.extend(r.managers.iter().cloned());
    }

    /// Adds the rules an object carries from the GitOps object that deploys it
    /// ([`crate::Provenance::ignore`]: an Argo CD Application's `ignoreDifferences`, a Flux
    /// HelmRelease's `driftDetection.ignore`), those that select `key`. A rule that does not
    /// compile is skipped: its source checked it when it read it.
    pub fn add_rules(&mut self, rules: &[IgnoreRule], key: &ResourceKey) {
        for rule in rules {
            if let Ok(r) = CompiledRule::new(rule)
                && r.selects(key)
            {
                self.add(&r);
            }
        }
    }

    /// Whether a path is ignored.
    pub fn path_ignored(&self, path: &Path) -> bool {
        self.pointers.iter().any(|p| path.matches_pointer(p))
    }
    /// Whether a manager's fields are ignored.
    pub fn manager_ignored(&self, manager: &str) -> bool {
        self.managers.iter().any(|m| m.is_match(manager))
    }
}
