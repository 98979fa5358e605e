//! Ignore rules: per group/kind/namespace/name (globs), JSON pointers and field managers, plus
//! the paths an object in Git lists in its own annotation.

use serde_json::Value;

use drift_model::ResourceKey;
pub use drift_model::ignore::{CompiledRule, IGNORE_ANNOTATION, IgnoreRule, glob_set};
use drift_model::path::Path;
use drift_model::tree::JsonView;

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
        Self::for_view(rules, key, desired)
    }

    /// [`ObjectIgnores::for_object`] of an object read through [`JsonView`].
    pub fn for_view<'a>(rules: &[CompiledRule], key: &ResourceKey, desired: impl JsonView<'a>) -> Self {
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
        if let Some(ann) = annotations.and_then(|a| a.get(IGNORE_ANNOTATION)).and_then(JsonView::as_str) {
            out.pointers
                .extend(ann.split([',', '\n']).map(str::trim).filter(|p| p.starts_with('/')).map(str::to_owned));
        }
        out
    }
    fn add(&mut self, r: &CompiledRule) {
        if r.pointers().is_empty() && r.managers().is_none() {
            self.whole = true;
        }
        self.pointers.extend(r.pointers().iter().cloned());
        self.managers.extend(r.managers().cloned());
    }

    /// Adds the rules an object carries from the GitOps object that deploys it
    /// ([`drift_model::Provenance::ignore`]: an Argo CD Application's `ignoreDifferences`, a Flux
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
