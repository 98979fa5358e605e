//! Simulated mutating admission: rules that stand in for mutating admission webhooks (a
//! registry mirror rewriting images, a policy engine capping limits, an injector adding an
//! annotation). Each rule says "on create and/or update of this kind (in this namespace, with
//! this name), set the field at this path to this value".
//!
//! They run where the API server runs mutating admission: on every create, update, patch and
//! server-side apply of the main resource (not of its `status` or `scale` subresource), after
//! defaulting and the field manager and before the object is stored, and on `dryRun=All`
//! requests exactly as on real writes. Like a webhook's, their changes are owned by no field
//! manager.
//!
//! ```yaml
//! mutations:
//!   - name: registry-mirror
//!     match: {resource: Deployment, group: apps, namespace: shop, operations: [CREATE, UPDATE]}
//!     set:
//!       - path: spec.template.spec.containers[name=web].image
//!         value: mirror.local/library/nginx:1.27
//!       - path: metadata.annotations.mirror\.local/rewritten
//!         value: "true"
//!   - match: {resource: configmaps}
//!     set:
//!       - {path: data.injected, value: "yes", ifAbsent: true}
//! ```
//!
//! A path is a dotted list of field names (`\.` for a dot inside a name, as in annotation
//! keys). A name may be followed by `[*]` (every element of that list) or `[key=value]` (the
//! elements whose `key` field is `value`, as the `name` of containers). Missing objects on the
//! way are created; a missing list, or a list without the selected element, leaves the object
//! as it is. The last segment must be a field name.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A set of mutation rules, as read from `--admission FILE`, [`crate::Options::admission`] or
/// `POST /_admin/admission`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Admission {
    /// The rules, applied in order; every matching rule applies.
    #[serde(default)]
    pub mutations: Vec<Mutation>,
}

/// One rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mutation {
    /// A name for the rule (shown in the server's debug log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Which writes it applies to; an empty match applies to every create and update.
    #[serde(default, rename = "match")]
    pub matcher: MutationMatch,
    /// The fields it sets, in order.
    pub set: Vec<SetField>,
}

/// The writes a rule applies to; absent properties match anything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MutationMatch {
    /// Plural resource (`deployments`) or kind (`Deployment`), case-insensitive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// API group (`apps`, `""` for core).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Object name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `CREATE`, `UPDATE`; both when empty. A patch or an update is `UPDATE`; a server-side
    /// apply is `CREATE` when the object does not exist yet, `UPDATE` otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operations: Vec<Operation>,
}

/// The admission operation of a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    /// The object is created.
    Create,
    /// An existing object is replaced or patched.
    Update,
}

/// One field a rule sets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SetField {
    /// Where, as `spec.template.spec.containers[name=web].image`.
    pub path: String,
    /// The value (any JSON or YAML value).
    pub value: Value,
    /// Only when the field is absent, as a defaulting webhook does.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub if_absent: bool,
}

/// A rule set that does not parse, or a path that is not valid.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    /// Not YAML or JSON of the expected shape.
    #[error("{0}")]
    Parse(String),
    /// A path that cannot be used.
    #[error("invalid path {path:?}: {reason}")]
    Path {
        /// The path as given.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// The write being admitted, for matching.
#[derive(Debug, Clone, Copy)]
pub struct Attributes<'a> {
    /// `CREATE` or `UPDATE`.
    pub operation: Operation,
    /// API group.
    pub group: &'a str,
    /// Plural resource.
    pub resource: &'a str,
    /// Kind.
    pub kind: &'a str,
    /// Namespace, empty for cluster-scoped objects.
    pub namespace: &'a str,
    /// Object name.
    pub name: &'a str,
}

/// One segment of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    /// A field of an object.
    Field(String),
    /// Every element of a list.
    Every,
    /// The elements of a list whose field `.0` is `.1`.
    Keyed(String, String),
}

fn parse_path(path: &str) -> Result<Vec<Segment>, AdmissionError> {
    let bad = |reason| AdmissionError::Path { path: path.to_owned(), reason };
    let mut segments = Vec::new();
    let mut chars = path.chars().peekable();
    let mut name = String::new();
    // Whether the current dotted part has had its field name, so a selector may follow.
    let mut after_selector = false;
    loop {
        match chars.next() {
            Some('\\') => match chars.next() {
                Some(c) => name.push(c),
                None => return Err(bad("ends with a backslash")),
            },
            Some('[') => {
                if name.is_empty() && !after_selector {
                    return Err(bad("a selector must follow a field name"));
                }
                if !name.is_empty() {
                    segments.push(Segment::Field(std::mem::take(&mut name)));
                }
                let mut inner = String::new();
                loop {
                    match chars.next() {
                        Some(']') => break,
                        Some(c) => inner.push(c),
                        None => return Err(bad("an unclosed [")),
                    }
                }
                segments.push(match inner.split_once('=') {
                    _ if inner == "*" => Segment::Every,
                    Some((k, v)) if !k.is_empty() => Segment::Keyed(k.to_owned(), v.to_owned()),
                    _ => return Err(bad("a selector is [*] or [key=value]")),
                });
                after_selector = true;
                if !matches!(chars.peek(), None | Some('.' | '[')) {
                    return Err(bad("a selector is followed by . or another selector"));
                }
            }
            Some('.') => {
                if name.is_empty() && !after_selector {
                    return Err(bad("an empty field name"));
                }
                if !name.is_empty() {
                    segments.push(Segment::Field(std::mem::take(&mut name)));
                }
                after_selector = false;
                if matches!(chars.peek(), None | Some('.' | '[')) {
                    return Err(bad("an empty field name"));
                }
            }
            Some(c) => name.push(c),
            None => break,
        }
    }
    if !name.is_empty() {
        segments.push(Segment::Field(name));
    }
    match segments.last() {
        Some(Segment::Field(_)) => Ok(segments),
        Some(_) => Err(bad("the last segment must be a field name")),
        None => Err(bad("empty")),
    }
}

impl Admission {
    /// Parse a rule set from YAML or JSON and check every path.
    pub fn from_yaml(text: &str) -> Result<Admission, AdmissionError> {
        let a: Admission = serde_saphyr::from_str(text).map_err(|e| AdmissionError::Parse(e.to_string()))?;
        a.validate()?;
        Ok(a)
    }

    /// Check every path.
    pub fn validate(&self) -> Result<(), AdmissionError> {
        for m in &self.mutations {
            for s in &m.set {
                parse_path(&s.path)?;
            }
        }
        Ok(())
    }

    /// Apply the matching rules to `object`, in order. Returns the names (or indexes) of the
    /// rules that changed it.
    pub fn mutate(&self, attrs: &Attributes<'_>, object: &mut Value) -> Vec<String> {
        let mut applied = Vec::new();
        for (i, m) in self.mutations.iter().enumerate() {
            if !m.matcher.matches(attrs) {
                continue;
            }
            let before = object.clone();
            for s in &m.set {
                // Paths were checked when the rules were loaded; one that does not parse sets
                // nothing.
                if let Ok(segments) = parse_path(&s.path) {
                    set(object, &segments, &s.value, s.if_absent);
                }
            }
            if *object != before {
                applied.push(m.name.clone().unwrap_or_else(|| format!("mutations[{i}]")));
            }
        }
        applied
    }
}

impl MutationMatch {
    /// Whether the write matches.
    pub fn matches(&self, a: &Attributes<'_>) -> bool {
        let eq = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        (self.operations.is_empty() || self.operations.contains(&a.operation))
            && self
                .resource
                .as_deref()
                .is_none_or(|w| w.eq_ignore_ascii_case(a.resource) || w.eq_ignore_ascii_case(a.kind))
            && eq(&self.group, a.group)
            && eq(&self.namespace, a.namespace)
            && eq(&self.name, a.name)
    }
}

fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn set(v: &mut Value, segments: &[Segment], value: &Value, if_absent: bool) {
    let Some((first, rest)) = segments.split_first() else { return };
    match first {
        Segment::Field(name) => {
            if v.is_null() {
                *v = Value::Object(Map::new());
            }
            let Some(o) = v.as_object_mut() else { return };
            if rest.is_empty() {
                if !(if_absent && o.contains_key(name)) {
                    o.insert(name.clone(), value.clone());
                }
                return;
            }
            match o.get_mut(name) {
                Some(child) => set(child, rest, value, if_absent),
                // A missing list has no element to select.
                None if matches!(rest.first(), Some(Segment::Field(_))) => {
                    let child = o.entry(name.clone()).or_insert(Value::Null);
                    set(child, rest, value, if_absent);
                }
                None => {}
            }
        }
        Segment::Every | Segment::Keyed(..) => {
            let Some(items) = v.as_array_mut() else { return };
            for item in items {
                let selected = match first {
                    Segment::Keyed(k, want) => item.get(k).and_then(text_of).is_some_and(|t| t == *want),
                    _ => true,
                };
                if selected {
                    set(item, rest, value, if_absent);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attrs(operation: Operation) -> Attributes<'static> {
        Attributes {
            operation,
            group: "apps",
            resource: "deployments",
            kind: "Deployment",
            namespace: "shop",
            name: "web",
        }
    }

    #[test]
    fn paths_parse_with_selectors_and_escaped_dots() {
        let f = |s: &str| Segment::Field(s.to_owned());
        assert_eq!(
            parse_path("spec.template.spec.containers[name=web].image").unwrap(),
            vec![
                f("spec"),
                f("template"),
                f("spec"),
                f("containers"),
                Segment::Keyed("name".into(), "web".into()),
                f("image")
            ]
        );
        assert_eq!(
            parse_path(r"metadata.annotations.example\.com/x").unwrap(),
            vec![f("metadata"), f("annotations"), f("example.com/x")]
        );
        assert_eq!(parse_path("a[*][*].b").unwrap(), vec![f("a"), Segment::Every, Segment::Every, f("b")]);
        for bad in ["", "a.", ".a", "a..b", "a[*]", "[*].a", "a[x]", "a[=1].b", "a[*]b", "a[*", "a\\"] {
            assert!(parse_path(bad).is_err(), "{bad:?} is refused");
        }
    }

    #[test]
    fn matching_rules_set_fields_in_order() {
        let a = Admission::from_yaml(
            r#"
mutations:
  - name: mirror
    match: {resource: Deployment, group: apps, operations: [UPDATE]}
    set:
      - {path: "spec.template.spec.containers[name=web].image", value: mirror/nginx}
      - {path: "metadata.annotations.mirror\\.local/rewritten", value: "true"}
  - match: {resource: deployments, namespace: other}
    set: [{path: spec.paused, value: true}]
  - match: {resource: Deployment}
    set:
      - {path: "spec.template.spec.containers[*].resources.limits.cpu", value: "1", ifAbsent: true}
      - {path: "spec.volumes[name=none].x", value: 1}
"#,
        )
        .unwrap();
        let mut d = json!({"metadata": {"name": "web"}, "spec": {"template": {"spec": {"containers": [
            {"name": "web", "image": "nginx:1.27", "resources": {"limits": {"cpu": "2"}}},
            {"name": "side", "image": "side:1"}]}}}});
        assert_eq!(
            a.mutate(&attrs(Operation::Create), &mut d),
            vec!["mutations[2]".to_owned()],
            "mirror is UPDATE only"
        );
        assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"], "2", "ifAbsent");
        assert_eq!(d["spec"]["template"]["spec"]["containers"][1]["resources"]["limits"]["cpu"], "1");
        assert!(d["spec"].get("volumes").is_none(), "a missing list is left missing");
        let applied = a.mutate(&attrs(Operation::Update), &mut d);
        assert_eq!(applied, vec!["mirror".to_owned()], "the defaulting rule changes nothing the second time");
        assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["image"], "mirror/nginx");
        assert_eq!(d["spec"]["template"]["spec"]["containers"][1]["image"], "side:1");
        assert_eq!(d["metadata"]["annotations"]["mirror.local/rewritten"], "true");
        assert!(d["spec"].get("paused").is_none(), "namespace other does not match");
    }

    #[test]
    fn invalid_rule_sets_are_refused() {
        assert!(Admission::from_yaml("mutations:\n- set: [{path: 'a[*]', value: 1}]\n").is_err());
        assert!(Admission::from_yaml("mutations:\n- set: [{path: a, value: 1, typo: 2}]\n").is_err());
        assert!(Admission::from_yaml("mutations:\n- match: {operations: [DELETE]}\n  set: []\n").is_err());
        assert_eq!(Admission::from_yaml("{}").unwrap(), Admission::default());
    }
}
