//! Field ownership from `metadata.managedFields` (FieldsV1): who owns which path, and what kind
//! of actor each manager is.

use chrono::{DateTime, Utc};
use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::drift::Attribution;
use crate::path::{Path, SegView, scalar_text};

/// What kind of actor a field manager is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ManagerClass {
    /// The GitOps applier (Argo CD, Flux): its fields come from Git.
    Applier,
    /// A person (kubectl edit/scale/set/patch/label/annotate, a dashboard).
    Manual,
    /// `kubectl apply` (client side): manual, but it also records server defaults in its field
    /// set, so only fields in the last-applied configuration count as its own.
    ClientSideApply,
    /// Everything else: controllers, operators, webhooks, the kubelet.
    Controller,
}

/// Which field managers are appliers and which are people; all others are controllers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ManagerPolicy {
    /// Globs of GitOps appliers.
    pub appliers: Vec<String>,
    /// Globs of manual managers.
    pub manual: Vec<String>,
}

impl Default for ManagerPolicy {
    fn default() -> Self {
        ManagerPolicy {
            appliers: [
                "argocd-controller",
                "argocd-application-controller",
                "kustomize-controller",
                "helm-controller",
                "flux-client-side-apply",
                "gotk-*",
                // The detector's own reverts write Git's values.
                crate::remedy::FIELD_MANAGER,
            ]
            .map(str::to_owned)
            .to_vec(),
            manual: ["kubectl", "kubectl-*", "k9s", "Mozilla", "Mozilla/*", "lens", "OpenLens", "headlamp*"]
                .map(str::to_owned)
                .to_vec(),
        }
    }
}

/// A compiled [`ManagerPolicy`].
#[derive(Debug, Clone)]
pub struct ManagerClassifier {
    appliers: GlobSet,
    manual: GlobSet,
}

/// Compiles globs, reporting the first bad one.
pub fn glob_set(globs: &[String]) -> crate::Result<GlobSet> {
    let mut b = GlobSetBuilder::new();
    for g in globs {
        b.add(Glob::new(g).map_err(|e| crate::Error::config(format!("bad glob {g:?}: {e}")))?);
    }
    b.build().map_err(|e| crate::Error::config(e.to_string()))
}

impl ManagerClassifier {
    /// Compiles a policy.
    pub fn new(policy: &ManagerPolicy) -> crate::Result<Self> {
        Ok(ManagerClassifier { appliers: glob_set(&policy.appliers)?, manual: glob_set(&policy.manual)? })
    }
    /// The class of a manager name.
    pub fn classify(&self, manager: &str) -> ManagerClass {
        if self.appliers.is_match(manager) {
            ManagerClass::Applier
        } else if manager == "kubectl-client-side-apply" {
            ManagerClass::ClientSideApply
        } else if self.manual.is_match(manager) {
            ManagerClass::Manual
        } else {
            ManagerClass::Controller
        }
    }
}

#[derive(Debug, Default)]
struct Node {
    /// Children by FieldsV1 key; fan-out is small, a vector beats a hash map here.
    children: Vec<(String, Node)>,
    /// Managers whose set holds this node as a leaf (the whole value).
    whole: u64,
    /// Managers with any entry at or below this node.
    any: u64,
}

/// The ownership tree of one live object.
#[derive(Debug, Default)]
pub struct Ownership {
    managers: Vec<Attribution>,
    root: Node,
}

fn key_of_fields_v1(k: &str) -> String {
    if let Some(json) = k.strip_prefix("k:")
        && let Ok(Value::Object(m)) = serde_json::from_str::<Value>(json)
    {
        let mut pairs: Vec<String> =
            m.iter().map(|(k, v)| format!("{k}={}", scalar_text(v).unwrap_or_else(|| v.to_string()))).collect();
        pairs.sort();
        return format!("k:{}", pairs.join(","));
    }
    k.to_owned()
}

fn key_of_item(key: &[(String, String)]) -> String {
    let mut pairs: Vec<String> = key.iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.sort();
    format!("k:{}", pairs.join(","))
}

impl Ownership {
    /// Reads `metadata.managedFields` of a live object (missing or malformed entries are skipped;
    /// at most 64 managers are tracked).
    pub fn of(object: &Value) -> Self {
        let mut own = Ownership::default();
        let Some(entries) = object.pointer("/metadata/managedFields").and_then(Value::as_array) else {
            return own;
        };
        for entry in entries.iter().take(64) {
            let Some(manager) = entry.get("manager").and_then(Value::as_str) else { continue };
            let bit = 1u64 << own.managers.len();
            own.managers.push(Attribution {
                manager: manager.to_owned(),
                operation: entry.get("operation").and_then(Value::as_str).unwrap_or("").to_owned(),
                time: entry
                    .get("time")
                    .and_then(Value::as_str)
                    .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                    .map(|t| t.with_timezone(&Utc)),
                subresource: entry.get("subresource").and_then(Value::as_str).map(str::to_owned),
            });
            if let Some(fields) = entry.get("fieldsV1") {
                insert(&mut own.root, fields, bit);
            }
        }
        own
    }

    /// Whether the object had any managedFields.
    pub fn is_empty(&self) -> bool {
        self.managers.is_empty()
    }

    /// The managers (as a bit set over [`Ownership::manager`]) that own `path`: those owning it
    /// or something under it, or owning an ancestor as a whole.
    pub fn owners(&self, path: &Path) -> u64 {
        self.owners_of_segments(path.segments())
    }

    /// [`Ownership::owners`] of a path given as segments (owned or borrowed).
    pub fn owners_of_segments<S: SegView>(&self, segments: &[S]) -> u64 {
        let mut node = &self.root;
        let mut whole = 0u64;
        for seg in segments {
            whole |= node.whole;
            let found = match (seg.field(), seg.item()) {
                (Some(f), _) => node.children.iter().find(|(k, _)| k.strip_prefix("f:") == Some(f)),
                (None, Some((key, _, _))) if !key.is_empty() => {
                    let k = key_of_item(key);
                    node.children.iter().find(|(ck, _)| *ck == k)
                }
                _ => return whole | node.any,
            };
            match found {
                Some((_, n)) => node = n,
                None => return whole,
            }
        }
        whole | node.any
    }

    /// The manager at a bit index.
    pub fn manager(&self, index: usize) -> Option<&Attribution> {
        self.managers.get(index)
    }

    /// The managers of a bit set, most recent first.
    pub fn managers_of(&self, set: u64) -> Vec<&Attribution> {
        let mut v: Vec<&Attribution> =
            (0..self.managers.len()).filter(|i| set & (1 << i) != 0).map(|i| &self.managers[i]).collect();
        v.sort_by_key(|a| std::cmp::Reverse(a.time));
        v
    }
}

fn insert(node: &mut Node, fields: &Value, bit: u64) {
    node.any |= bit;
    let Value::Object(map) = fields else { return };
    let children: Vec<_> = map.iter().filter(|(k, _)| k.as_str() != ".").collect();
    if children.is_empty() {
        node.whole |= bit;
        return;
    }
    for (k, v) in children {
        let key = key_of_fields_v1(k);
        let i = match node.children.iter().position(|(ck, _)| *ck == key) {
            Some(i) => i,
            None => {
                node.children.push((key, Node::default()));
                node.children.len() - 1
            }
        };
        insert(&mut node.children[i].1, v, bit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn owners_of_keyed_items_and_whole_values() {
        let obj = json!({"metadata": {"managedFields": [
            {"manager": "kubectl-client-side-apply", "operation": "Update", "time": "2026-01-01T00:00:00Z",
             "fieldsV1": {"f:spec": {"f:ports": {"k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:port": {}}}}}},
            {"manager": "kubectl-edit", "operation": "Update", "time": "2026-01-02T00:00:00Z",
             "fieldsV1": {"f:data": {}}}
        ]}});
        let o = Ownership::of(&obj);
        let port = Path::root().field("spec").field("ports").item(
            vec![("port".into(), "80".into()), ("protocol".into(), "TCP".into())],
            vec![false, true],
            0,
        );
        assert_eq!(o.owners(&port), 1);
        assert_eq!(o.owners(&port.field("targetPort")), 0, "nobody owns targetPort");
        assert_eq!(o.owners(&Path::root().field("data").field("key")), 2, "f:data as a whole");
        assert_eq!(o.managers_of(3)[0].manager, "kubectl-edit", "most recent first");
    }

    #[test]
    fn classes() {
        let c = ManagerClassifier::new(&ManagerPolicy::default()).unwrap();
        assert_eq!(c.classify("kubectl-edit"), ManagerClass::Manual);
        assert_eq!(c.classify("kubectl"), ManagerClass::Manual);
        assert_eq!(c.classify("kubectl-client-side-apply"), ManagerClass::ClientSideApply);
        assert_eq!(c.classify("argocd-controller"), ManagerClass::Applier);
        assert_eq!(c.classify("kube-controller-manager"), ManagerClass::Controller);
    }
}
