//! The ignore settings users already wrote in their GitOps objects, as the detector's own
//! [`IgnoreRule`]s: Argo CD `Application.spec.ignoreDifferences` and Flux
//! `HelmRelease.spec.driftDetection.ignore` (docs/sources.md, "Ignore rules of Argo CD and
//! Flux"). The rules travel with each object the application renders
//! ([`drift_model::Provenance::ignore`]), so they apply to that application's objects only.
//!
//! Argo CD's `jqPathExpressions` are jq programs; the forms people write to name a path are
//! turned into JSON pointers: `.a.b`, `.a["x/y"]`, `.a."x/y"`, `.a[0]`, `.a[]` (every item),
//! `[]?`, and `.a[] | select(.name == "x")` (the item whose `name` is `x`) followed by more
//! path (`| .b` or `.b`). Any other program is not applied, with a note naming it.

use drift_model::ignore::{CompiledRule, IgnoreRule};
use serde_json::Value;

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_owned).collect()
}

fn text(v: &Value, field: &str) -> Option<String> {
    v.get(field).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned)
}

/// A rule that selects by something the detector cannot check is skipped: applied more widely
/// it would hide drifts. The reasons are returned as notes.
fn checked(rule: IgnoreRule, what: &str, notes: &mut Vec<String>) -> Option<IgnoreRule> {
    match CompiledRule::new(&rule) {
        Ok(_) => Some(rule),
        Err(e) => {
            notes.push(format!("{what}: {e}; not applied"));
            None
        }
    }
}

/// `spec.ignoreDifferences` of an Argo CD Application: the rules, and notes for what was not
/// applied. An entry without `group` selects the core group, as in Argo CD; `group` and `kind`
/// are globs (`*`).
pub(crate) fn argo_ignore_differences(spec: &Value) -> (Vec<IgnoreRule>, Vec<String>) {
    let mut rules = Vec::new();
    let mut notes = Vec::new();
    for (i, entry) in spec.get("ignoreDifferences").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let what = format!("ignoreDifferences[{i}]");
        let mut pointers = strings(entry.get("jsonPointers"));
        for expr in strings(entry.get("jqPathExpressions")) {
            match jq_to_pointer(&expr) {
                Some(p) => pointers.push(p),
                None => notes
                    .push(format!("{what}: jqPathExpression `{expr}` is not a path this detector reads; not applied")),
            }
        }
        let managers = strings(entry.get("managedFieldsManagers"));
        if pointers.is_empty() && managers.is_empty() {
            // Nothing this detector can apply (an entry whose expressions were all refused must not
            // become a rule that ignores the whole object).
            if entry.get("jqPathExpressions").is_none() {
                notes.push(format!(
                    "{what}: names no jsonPointers, jqPathExpressions or managedFieldsManagers; not applied"
                ));
            }
            continue;
        }
        let rule = IgnoreRule {
            group: Some(text(entry, "group").unwrap_or_default()),
            kind: text(entry, "kind").or(Some("*".to_owned())),
            namespace: text(entry, "namespace"),
            name: text(entry, "name"),
            json_pointers: pointers,
            managers,
        };
        rules.extend(checked(rule, &what, &mut notes));
    }
    (rules, notes)
}

/// `spec.driftDetection.ignore` of a Flux HelmRelease: `paths` (JSON pointers) for the objects
/// a `target` selects (`group`, `kind`, `name`, `namespace`; all objects of the release without
/// one). Targets by `labelSelector` or `annotationSelector` are not applied, with a note.
pub(crate) fn flux_drift_detection(spec: &Value) -> (Vec<IgnoreRule>, Vec<String>) {
    let mut rules = Vec::new();
    let mut notes = Vec::new();
    let entries = spec.get("driftDetection").and_then(|d| d.get("ignore")).and_then(Value::as_array);
    for (i, entry) in entries.into_iter().flatten().enumerate() {
        let what = format!("driftDetection.ignore[{i}]");
        let pointers = strings(entry.get("paths"));
        if pointers.is_empty() {
            notes.push(format!("{what}: names no paths; not applied"));
            continue;
        }
        let target = entry.get("target").cloned().unwrap_or(Value::Null);
        if target.get("labelSelector").is_some() || target.get("annotationSelector").is_some() {
            notes.push(format!("{what}: targets by label or annotation selector are not supported; not applied"));
            continue;
        }
        let rule = IgnoreRule {
            group: text(&target, "group"),
            kind: text(&target, "kind"),
            namespace: text(&target, "namespace"),
            name: text(&target, "name"),
            json_pointers: pointers,
            managers: Vec::new(),
        };
        rules.extend(checked(rule, &what, &mut notes));
    }
    (rules, notes)
}

fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// The JSON pointer a jq path expression names, for the forms listed in the module
/// documentation; `None` for anything else.
pub(crate) fn jq_to_pointer(expr: &str) -> Option<String> {
    let mut out = String::new();
    for (n, stage) in expr.split('|').map(str::trim).enumerate() {
        if stage.is_empty() {
            return None;
        }
        let mut rest = stage;
        if let Some(after) = stage.strip_prefix("select(") {
            // select(.field == "value") right after `[]`: the item whose field has that value.
            let close = after.find(')')?;
            let (field, value) = after[..close].split_once("==")?;
            let field = simple_field(field.trim())?;
            let value = value.trim();
            let value = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')).unwrap_or(value);
            if n == 0 || value.is_empty() || value.contains(['"', ' ', '(', ')']) {
                return None;
            }
            let base = out.strip_suffix("/*")?;
            out = format!("{base}/{}={}", escape(&field), escape(value));
            rest = &after[close + 1..];
            if rest.is_empty() {
                continue;
            }
        }
        out.push_str(&path_stage(rest)?);
    }
    (!out.is_empty()).then_some(out)
}

/// `.name` without quotes or brackets.
fn simple_field(s: &str) -> Option<String> {
    let name = s.strip_prefix('.')?;
    (!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .then(|| name.to_owned())
}

/// One stage of plain path: `.a.b["c/d"].e[0][]`.
fn path_stage(stage: &str) -> Option<String> {
    let mut out = String::new();
    let b = stage.as_bytes();
    let mut i = 0;
    if stage == "." {
        return Some(out);
    }
    while i < b.len() {
        match b[i] {
            b'.' => {
                i += 1;
                if i < b.len() && b[i] == b'"' {
                    let end = stage[i + 1..].find('"')? + i + 1;
                    out.push('/');
                    out.push_str(&escape(&stage[i + 1..end]));
                    i = end + 1;
                } else if i < b.len() && b[i] == b'[' {
                    continue;
                } else {
                    let start = i;
                    while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'-') {
                        i += 1;
                    }
                    if start == i {
                        return None;
                    }
                    out.push('/');
                    out.push_str(&stage[start..i]);
                }
            }
            b'[' => {
                let end = stage[i..].find(']')? + i;
                let inner = stage[i + 1..end].trim();
                if inner.is_empty() {
                    out.push_str("/*");
                } else if let Some(q) = inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
                    out.push('/');
                    out.push_str(&escape(q));
                } else if inner.bytes().all(|c| c.is_ascii_digit()) {
                    out.push('/');
                    out.push_str(inner);
                } else {
                    return None;
                }
                i = end + 1;
                if i < b.len() && b[i] == b'?' {
                    i += 1;
                }
            }
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn common_jq_paths_become_pointers() {
        let cases = [
            (".spec.replicas", Some("/spec/replicas")),
            (".metadata.annotations[\"example.com/hash\"]", Some("/metadata/annotations/example.com~1hash")),
            (".metadata.annotations.\"example.com/hash\"", Some("/metadata/annotations/example.com~1hash")),
            (".webhooks[]?.clientConfig.caBundle", Some("/webhooks/*/clientConfig/caBundle")),
            (".spec.template.spec.containers[0].image", Some("/spec/template/spec/containers/0/image")),
            (
                ".spec.template.spec.initContainers[] | select(.name == \"injected-init-container\")",
                Some("/spec/template/spec/initContainers/name=injected-init-container"),
            ),
            (
                ".spec.template.spec.containers[] | select(.name == \"web\") | .env",
                Some("/spec/template/spec/containers/name=web/env"),
            ),
            (".metadata.namespace == \"x\"", None),
            (".spec.x | del(.y)", None),
            ("select(.name == \"a\")", None),
            ("", None),
        ];
        for (expr, want) in cases {
            assert_eq!(jq_to_pointer(expr).as_deref(), want, "{expr}");
        }
    }

    #[test]
    fn argo_entries_become_rules_and_what_cannot_be_applied_is_noted() {
        let spec = json!({"ignoreDifferences": [
            {"group": "apps", "kind": "Deployment", "jsonPointers": ["/spec/replicas"]},
            {"kind": "ConfigMap", "name": "cache", "namespace": "web",
             "jqPathExpressions": [".data.stamp", ".data | keys"]},
            {"group": "*", "kind": "*", "managedFieldsManagers": ["kube-controller-manager"]},
            {"kind": "Secret", "jqPathExpressions": [".metadata.namespace == \"x\""]},
        ]});
        let (rules, notes) = argo_ignore_differences(&spec);
        assert_eq!(rules.len(), 3, "{rules:?}");
        assert_eq!(rules[0].group.as_deref(), Some("apps"));
        assert_eq!(rules[1].group.as_deref(), Some(""), "no group is the core group, as in Argo CD");
        assert_eq!(rules[1].json_pointers, ["/data/stamp"]);
        assert_eq!(rules[2].managers, ["kube-controller-manager"]);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains(".data | keys") && notes[1].contains("metadata.namespace"));
    }

    #[test]
    fn flux_entries_become_rules_and_selectors_are_refused() {
        let spec = json!({"driftDetection": {"mode": "enabled", "ignore": [
            {"paths": ["/spec/replicas"], "target": {"kind": "Deployment"}},
            {"paths": ["/metadata/annotations/checksum~1config"]},
            {"paths": ["/spec"], "target": {"labelSelector": "app=web"}},
        ]}});
        let (rules, notes) = flux_drift_detection(&spec);
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0].kind.as_deref(), Some("Deployment"));
        assert_eq!(rules[1].kind, None, "no target: every object of the release");
        assert_eq!(notes.len(), 1);
    }
}
