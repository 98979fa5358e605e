//! Lists that compare as maps: the merge keys of the Kubernetes types (their
//! `patchMergeKey`), extendable for custom resources.
//!
//! A rule names a list by the end of its schema path (fields with `[]` for list items, like
//! `containers[].ports`), optionally for one kind. The longest matching suffix wins.

use serde::{Deserialize, Serialize};

/// A merge-key rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MergeKeyRule {
    /// Only for this kind (`Service`); any kind when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// End of the list's schema path: `containers`, `containers[].ports`, `spec.ports`.
    pub path: String,
    /// Key fields of the items, in order.
    pub keys: Vec<String>,
    /// Default values of key fields the API server fills in (`protocol: TCP`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub defaults: Vec<(String, String)>,
}

impl MergeKeyRule {
    /// Whether the rule names the list at `schema_path` in an object of `kind`: its kind, if it
    /// has one, and its path the schema path or a tail of it after a `.`.
    fn applies(&self, kind: &str, schema_path: &str) -> bool {
        self.kind.as_deref().is_none_or(|k| k == kind)
            && (schema_path == self.path
                || (schema_path.ends_with(&self.path)
                    && schema_path.as_bytes()[schema_path.len() - self.path.len() - 1] == b'.'))
    }

    fn new(kind: Option<&str>, path: &str, keys: &[&str], defaults: &[(&str, &str)]) -> Self {
        MergeKeyRule {
            kind: kind.map(str::to_owned),
            path: path.to_owned(),
            keys: keys.iter().map(|s| (*s).to_owned()).collect(),
            defaults: defaults.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
        }
    }
}

/// The merge keys of the built-in kinds.
pub fn builtin() -> Vec<MergeKeyRule> {
    let tcp = [("protocol", "TCP")];
    let mut rules = Vec::new();
    for containers in ["containers", "initContainers", "ephemeralContainers"] {
        rules.push(MergeKeyRule::new(None, containers, &["name"], &[]));
        rules.push(MergeKeyRule::new(None, &format!("{containers}[].ports"), &["containerPort", "protocol"], &tcp));
        rules.push(MergeKeyRule::new(None, &format!("{containers}[].env"), &["name"], &[]));
        rules.push(MergeKeyRule::new(None, &format!("{containers}[].volumeMounts"), &["mountPath"], &[]));
        rules.push(MergeKeyRule::new(None, &format!("{containers}[].volumeDevices"), &["devicePath"], &[]));
        rules.push(MergeKeyRule::new(None, &format!("{containers}[].resizePolicy"), &["resourceName"], &[]));
    }
    rules.extend([
        MergeKeyRule::new(None, "volumes", &["name"], &[]),
        MergeKeyRule::new(None, "imagePullSecrets", &["name"], &[]),
        MergeKeyRule::new(None, "hostAliases", &["ip"], &[]),
        MergeKeyRule::new(None, "topologySpreadConstraints", &["topologyKey", "whenUnsatisfiable"], &[]),
        MergeKeyRule::new(None, "resourceClaims", &["name"], &[]),
        MergeKeyRule::new(None, "readinessGates", &["conditionType"], &[]),
        MergeKeyRule::new(None, "ownerReferences", &["uid"], &[]),
        MergeKeyRule::new(None, "conditions", &["type"], &[]),
        MergeKeyRule::new(Some("Service"), "spec.ports", &["port", "protocol"], &tcp),
        MergeKeyRule::new(Some("ServiceAccount"), "secrets", &["name"], &[]),
        MergeKeyRule::new(Some("CustomResourceDefinition"), "spec.versions", &["name"], &[]),
        MergeKeyRule::new(Some("MutatingWebhookConfiguration"), "webhooks", &["name"], &[]),
        MergeKeyRule::new(Some("ValidatingWebhookConfiguration"), "webhooks", &["name"], &[]),
    ]);
    rules
}

/// A compiled table of rules.
#[derive(Debug, Clone)]
pub struct MergeKeys {
    rules: Vec<MergeKeyRule>,
    /// Each rule's index by the last field of its path (`ports` for `containers[].ports`), in
    /// that order: a list's rules are all under the last field of its schema path.
    by_last: Vec<(String, usize)>,
}

impl Default for MergeKeys {
    fn default() -> Self {
        MergeKeys::of(builtin())
    }
}

impl MergeKeys {
    /// The built-in rules plus extra ones (custom resources); extra rules win over built-in
    /// rules of the same suffix length.
    pub fn with_extra(extra: &[MergeKeyRule]) -> Self {
        // `max_by_key` keeps the last of equal maxima: extra rules go last to win ties.
        let mut rules = builtin();
        rules.extend(extra.iter().cloned());
        MergeKeys::of(rules)
    }

    fn of(rules: Vec<MergeKeyRule>) -> Self {
        let mut by_last: Vec<(String, usize)> =
            rules.iter().enumerate().map(|(i, r)| (last_field(&r.path).to_owned(), i)).collect();
        by_last.sort();
        MergeKeys { rules, by_last }
    }

    /// The rule of a list at `schema_path` (fields joined by `.`, list items as `[]`) in an
    /// object of `kind`.
    ///
    /// ```
    /// let mk = drift_engine::merge_keys::MergeKeys::default();
    /// let r = mk.lookup("Deployment", "spec.template.spec.containers[].ports").unwrap();
    /// assert_eq!(r.keys, ["containerPort", "protocol"]);
    /// assert!(mk.lookup("Deployment", "spec.ports").is_none());
    /// assert_eq!(mk.lookup("Service", "spec.ports").unwrap().keys, ["port", "protocol"]);
    /// ```
    pub fn lookup(&self, kind: &str, schema_path: &str) -> Option<&MergeKeyRule> {
        let last = last_field(schema_path);
        let from = self.by_last.partition_point(|(l, _)| l.as_str() < last);
        // (In the rules' order: of two rules as long, the later wins, as documented.)
        self.by_last[from..]
            .iter()
            .take_while(|(l, _)| l == last)
            .map(|(_, i)| &self.rules[*i])
            .filter(|r| r.applies(kind, schema_path))
            .max_by_key(|r| r.path.len())
    }
}

/// The last field of a schema path: what follows its last `.`, or the whole path.
fn last_field(path: &str) -> &str {
    path.rsplit('.').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The rule a search of every rule finds (what `lookup` answered before it had an index).
    fn by_search<'r>(rules: &'r [MergeKeyRule], kind: &str, schema_path: &str) -> Option<&'r MergeKeyRule> {
        rules.iter().filter(|r| r.applies(kind, schema_path)).max_by_key(|r| r.path.len())
    }

    fn path() -> impl Strategy<Value = String> {
        let field = prop::sample::select(
            &["spec", "template", "containers", "containers[]", "ports", "env", "webhooks", "xports", "a.b", ""][..],
        );
        prop::collection::vec(field, 1..5).prop_map(|f| f.join("."))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// The index finds the rule a search of every rule finds, with extra rules of any path
        /// (ties between built-in and extra rules included).
        #[test]
        fn the_index_finds_what_a_search_of_every_rule_finds(
            extra in prop::collection::vec(
                (prop::option::of(prop::sample::select(&["Service", "Widget"][..])), path(), any::<bool>()),
                0..6,
            ),
            kind in prop::sample::select(&["Service", "Widget", "Deployment", "MutatingWebhookConfiguration"][..]),
            schema in path(),
        ) {
            let extra: Vec<MergeKeyRule> = extra
                .iter()
                .map(|(k, p, two)| MergeKeyRule::new(*k, p, if *two { &["a", "b"] } else { &["x"] }, &[]))
                .collect();
            let mk = MergeKeys::with_extra(&extra);
            let mut all = builtin();
            all.extend(extra);
            prop_assert_eq!(mk.lookup(kind, &schema), by_search(&all, kind, &schema));
        }
    }
}
