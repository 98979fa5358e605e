//! What kustomize-controller does to each object it built for a `kustomize.toolkit.fluxcd.io`
//! Kustomization: `spec.commonMetadata` (labels and annotations set over the object's own), then
//! the post-build variable substitution of `spec.postBuild`.
//!
//! Variables come from the ConfigMaps and Secrets of `substituteFrom` (in order, a later one
//! wins; each value without its line breaks), then `substitute` (which wins over them). With no
//! variable at all, nothing is substituted (not even defaults), as Flux does. An object labelled
//! or annotated `kustomize.toolkit.fluxcd.io/substitute: disabled` is left as it is.
//!
//! Flux writes each object as YAML, replaces `${...}` in the text and reads the text again, so a
//! value written plain is typed again (`replicas: ${REPLICAS}` becomes the integer 3); here each
//! string that holds `${` is substituted, and typed again when Flux's YAML would have written it
//! plain, as Kubernetes reads YAML (labels and annotations stay strings). The forms: `${var}`,
//! `${var:=default}`, `${var:-default}`, `${var=default}`, `${var-default}`, and `$$` for a `$`.
//! A variable drift cannot know (its ConfigMap or Secret is not in Git, or is encrypted), or a
//! form drift does not evaluate, leaves the field out of the comparison with a note naming it:
//! never a drift.

use std::collections::{BTreeMap, HashMap};

use base64::Engine as _;

use crate::cluster::{ClusterRead, Found};
use drift_model::{Resource, SourceWarning};
use serde_json::Value;

const DISABLED_KEY: &str = "kustomize.toolkit.fluxcd.io/substitute";

/// One `substituteFrom` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct SubstituteFrom {
    pub kind: String,
    pub name: String,
    pub optional: bool,
}

/// What kustomize-controller does to each object after its build: `commonMetadata`, then the
/// `postBuild` substitution.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PostBuild {
    /// `commonMetadata`: labels and annotations set on every object (over its own), as JSON
    /// objects' text.
    pub common_labels: Option<String>,
    pub common_annotations: Option<String>,
    /// `substitute`, in the order written.
    pub substitute: Vec<(String, String)>,
    pub from: Vec<SubstituteFrom>,
    /// Where `substituteFrom` objects are looked up: the Kustomization's namespace.
    pub namespace: String,
    /// The Kustomization, for notes.
    pub origin: String,
}

impl PostBuild {
    /// What a Kustomization's spec asks for after the build, if anything.
    pub(crate) fn of(spec: &Value, namespace: &str, origin: &str) -> Option<PostBuild> {
        let common = |field: &str| {
            spec.pointer(&format!("/commonMetadata/{field}"))
                .filter(|v| v.as_object().is_some_and(|m| !m.is_empty()))
                .map(Value::to_string)
        };
        let (common_labels, common_annotations) = (common("labels"), common("annotations"));
        let none = Value::Null;
        let post = match spec.get("postBuild") {
            Some(post) => post,
            None if common_labels.is_some() || common_annotations.is_some() => &none,
            None => return None,
        };
        let substitute = post
            .get("substitute")
            .and_then(Value::as_object)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), scalar_text(v))).collect())
            .unwrap_or_default();
        let from = post
            .get("substituteFrom")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|f| {
                Some(SubstituteFrom {
                    kind: f.get("kind")?.as_str()?.to_owned(),
                    name: f.get("name")?.as_str()?.to_owned(),
                    optional: f.get("optional").and_then(Value::as_bool).unwrap_or(false),
                })
            })
            .collect();
        Some(PostBuild {
            common_labels,
            common_annotations,
            substitute,
            from,
            namespace: namespace.to_owned(),
            origin: origin.to_owned(),
        })
    }
}

fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The variables of a `postBuild`: known values, and whether some source could not be read (then
/// a variable without a value is unknown rather than unset).
struct Vars {
    known: HashMap<String, String>,
    /// Sources that were not found in Git or cannot be read there, for notes.
    unreadable: Vec<String>,
}

impl Vars {
    fn gather(post: &PostBuild, objects: &[Resource], cluster: ClusterRead<'_>) -> Vars {
        let mut known = HashMap::new();
        let mut unreadable = Vec::new();
        for from in &post.from {
            let shown = format!("{} {}/{}", from.kind, post.namespace, from.name);
            let (object, place) = match cluster.find(objects, &from.kind, &post.namespace, &from.name) {
                Found::Git(o) => (o, "in Git"),
                Found::Cluster(o) => (o, "in the cluster"),
                Found::Missing(_) if from.optional => continue,
                Found::Missing(why) | Found::Unreadable(why) => {
                    unreadable.push(format!("{shown} {why}"));
                    continue;
                }
            };
            match read_data(&object, &from.kind) {
                Some(data) => known.extend(data),
                None => unreadable
                    .push(format!("{shown} cannot be read {place} (encrypted, or data that is not base64 text)")),
            }
        }
        known.extend(post.substitute.iter().map(|(k, v)| (k.clone(), v.replace('\n', ""))));
        Vars { known, unreadable }
    }
}

/// The data of a ConfigMap or a Secret, each value without line breaks (as kustomize-controller
/// takes variables); `None` when a SOPS encryption keeps it unreadable or a value is not text.
fn read_data(object: &Value, kind: &str) -> Option<BTreeMap<String, String>> {
    let mut data = source_data(object, kind)?;
    for v in data.values_mut() {
        *v = v.replace('\n', "");
    }
    Some(data)
}

/// The data of a ConfigMap or a Secret as text (a Secret's `data` decoded from base64, its
/// `stringData` over it); `None` when a SOPS encryption keeps it unreadable or a value is not
/// text.
pub(crate) fn source_data(object: &Value, kind: &str) -> Option<BTreeMap<String, String>> {
    if object.get("sops").is_some() {
        return None;
    }
    let mut out = BTreeMap::new();
    let text = |v: &Value| v.as_str().map(str::to_owned);
    if kind == "Secret" {
        for (k, v) in object.get("data").and_then(Value::as_object).into_iter().flatten() {
            let raw = v.as_str()?;
            let bytes = base64::engine::general_purpose::STANDARD.decode(raw).ok()?;
            out.insert(k.clone(), String::from_utf8(bytes).ok()?);
        }
        for (k, v) in object.get("stringData").and_then(Value::as_object).into_iter().flatten() {
            out.insert(k.clone(), text(v)?);
        }
    } else {
        for (k, v) in object.get("data").and_then(Value::as_object).into_iter().flatten() {
            out.insert(k.clone(), text(v)?);
        }
    }
    Some(out)
}

/// Why one string could not be substituted.
enum Unresolved {
    /// A variable whose value drift cannot know.
    Unknown(String),
    /// A form drift does not evaluate, or a malformed expression.
    Form(String),
}

/// Substitutes the variables of `post` in each of `objects` (in place); notes say what was left
/// out, and each field left out is ignored for its object.
pub(crate) fn substitute(
    post: &PostBuild,
    objects: &mut [&mut Resource],
    lookup: &[Resource],
    cluster: ClusterRead<'_>,
    notes: &mut Vec<SourceWarning>,
) {
    for (field, common) in [("labels", &post.common_labels), ("annotations", &post.common_annotations)] {
        let Some(Value::Object(common)) = common.as_deref().and_then(|c| serde_json::from_str(c).ok()) else {
            continue;
        };
        for r in objects.iter_mut() {
            let object = std::sync::Arc::make_mut(&mut r.object);
            if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                let map = meta.entry(field).or_insert_with(|| Value::Object(serde_json::Map::new()));
                if let Some(map) = map.as_object_mut() {
                    map.extend(common.clone());
                }
            }
        }
    }
    let vars = Vars::gather(post, lookup, cluster);
    if vars.known.is_empty() && vars.unreadable.is_empty() {
        return;
    }
    for note in &vars.unreadable {
        notes.push(SourceWarning::note(format!(
            "{}: substituteFrom {note}; its variables are not substituted",
            post.origin
        )));
    }
    for r in objects.iter_mut() {
        if disabled(&r.object) {
            continue;
        }
        let mut left_out: Vec<(String, String)> = Vec::new();
        let mut object = (*r.object).clone();
        walk(&mut object, &mut String::new(), false, &vars, &mut left_out);
        if object != *r.object {
            // A name or a namespace may hold a variable too.
            if let Ok(fresh) = Resource::from_object(object.clone()) {
                r.key = fresh.key;
            }
            r.object = std::sync::Arc::new(object);
        }
        for (pointer, why) in left_out {
            notes.push(
                SourceWarning::note(format!(
                    "{}: {why} in {} at {pointer}; the field is left out of the comparison",
                    post.origin, r.key
                ))
                .at(r.provenance.path.clone().unwrap_or_default(), r.provenance.document, None),
            );
            r.provenance
                .ignore
                .push(drift_model::ignore::IgnoreRule { json_pointers: vec![pointer], ..Default::default() });
        }
    }
}

fn disabled(object: &Value) -> bool {
    ["labels", "annotations"].iter().any(|m| {
        object.pointer(&format!("/metadata/{m}")).and_then(|v| v.get(DISABLED_KEY)) == Some(&Value::from("disabled"))
    })
}

/// Substitutes every string under `value` (at JSON pointer `at`); `text_only` under labels and
/// annotations, which stay strings.
fn walk(value: &mut Value, at: &mut String, text_only: bool, vars: &Vars, left_out: &mut Vec<(String, String)>) {
    match value {
        Value::String(s) if s.contains('$') => match eval(s, vars) {
            Ok(out) if out == *s => {}
            Ok(out) => *value = if text_only { Value::String(out) } else { retype(s, out) },
            Err(Unresolved::Unknown(var)) => {
                left_out.push((at.clone(), format!("variable {var} has no value drift can read")))
            }
            Err(Unresolved::Form(form)) => left_out.push((at.clone(), format!("`{form}` is not substituted by drift"))),
        },
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                let len = at.len();
                at.push_str(&format!("/{i}"));
                walk(item, at, text_only, vars, left_out);
                at.truncate(len);
            }
        }
        Value::Object(map) => {
            // Keys too: Flux substitutes the object's whole text.
            if map.keys().any(|k| k.contains('$')) {
                let entries = std::mem::take(map);
                for (k, v) in entries {
                    let key = match eval(&k, vars) {
                        Ok(key) => key,
                        Err(Unresolved::Unknown(var)) => {
                            left_out.push((
                                format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                                format!("variable {var} (in a key) has no value drift can read"),
                            ));
                            k
                        }
                        Err(Unresolved::Form(form)) => {
                            left_out.push((
                                format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                                format!("`{form}` (in a key) is not substituted by drift"),
                            ));
                            k
                        }
                    };
                    map.insert(key, v);
                }
            }
            // Labels and annotations of any object metadata (a pod template's too).
            let meta = at.ends_with("/metadata");
            for (k, v) in map.iter_mut() {
                let len = at.len();
                at.push('/');
                at.push_str(&k.replace('~', "~0").replace('/', "~1"));
                walk(v, at, text_only || (meta && (k == "labels" || k == "annotations")), vars, left_out);
                at.truncate(len);
            }
        }
        _ => {}
    }
}

/// The value Flux ends up with: when its YAML writer would have written the template plain, the
/// substituted text is read as a plain scalar, as Kubernetes reads YAML.
fn retype(template: &str, out: String) -> Value {
    let plain = |s: &str| drift_manifest::read_yaml_value(&format!("v: {s}\n")).ok().and_then(|v| v.get("v").cloned());
    if plain(template).as_ref().and_then(Value::as_str) != Some(template) {
        return Value::String(out);
    }
    match plain(&out) {
        Some(v @ (Value::Bool(_) | Value::Number(_) | Value::Null)) => v,
        _ => Value::String(out),
    }
}

/// How deep `${a:-${b:-...}}` defaults may nest before drift stops evaluating them.
const MAX_NESTING: usize = 16;

/// envsubst as Flux runs it. A variable without a value and without a default is unknown: Flux
/// substitutes an empty string (its former default) or refuses the Kustomization (strict mode,
/// its default since kustomize-controller 1.5), so drift leaves the field out.
fn eval(text: &str, vars: &Vars) -> Result<String, Unresolved> {
    eval_at(text, vars, 0)
}

fn eval_at(text: &str, vars: &Vars, depth: usize) -> Result<String, Unresolved> {
    if depth > MAX_NESTING {
        return Err(Unresolved::Form(format!("more than {MAX_NESTING} nested defaults")));
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if after.starts_with('{') {
            let end = closing(after).ok_or_else(|| Unresolved::Form(after.chars().take(40).collect()))?;
            out.push_str(&expr(&after[1..end], vars, depth)?);
            rest = &after[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// The index of the `}` that closes the `{` at the start of `s`, nested `${...}` counted.
fn closing(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// One `${...}` body. `:=`, `:-` and `=` take the default when the value is unset or empty (as
/// Flux's `toDefault`); `-` alone is not parsed by Flux, like every other function.
fn expr(body: &str, vars: &Vars, depth: usize) -> Result<String, Unresolved> {
    let form = || Unresolved::Form(format!("${{{}}}", body.chars().take(40).collect::<String>()));
    let name_end = body.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(body.len());
    let (name, op) = body.split_at(name_end);
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(form());
    }
    let value = vars.known.get(name).filter(|v| !v.is_empty());
    let default = match op {
        "" => None,
        _ if op.starts_with(":=") || op.starts_with(":-") => Some(&op[2..]),
        _ if op.starts_with('=') => Some(&op[1..]),
        _ => return Err(form()),
    };
    match (value, default) {
        (Some(v), _) => Ok(v.clone()),
        // Set but empty: empty without a default.
        (None, None) if vars.known.contains_key(name) => Ok(String::new()),
        // A value that may exist in a source drift cannot read.
        (None, _) if !vars.unreadable.is_empty() && !vars.known.contains_key(name) => {
            Err(Unresolved::Unknown(name.to_owned()))
        }
        (None, Some(default)) => eval_at(default, vars, depth + 1),
        (None, None) => Err(Unresolved::Unknown(name.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars(pairs: &[(&str, &str)], unreadable: bool) -> Vars {
        Vars {
            known: pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            unreadable: if unreadable { vec!["ConfigMap x/y is not in Git".into()] } else { Vec::new() },
        }
    }

    fn ok(text: &str, v: &Vars) -> String {
        eval(text, v).unwrap_or_else(|_| panic!("{text}"))
    }

    #[test]
    fn the_forms_flux_evaluates() {
        let v = vars(&[("DOMAIN", "example.com"), ("EMPTY", ""), ("N", "3")], false);
        assert_eq!(ok("web.${DOMAIN}", &v), "web.example.com");
        assert!(
            matches!(eval("${MISSING}", &v), Err(Unresolved::Unknown(n)) if n == "MISSING"),
            "empty or refused: unknown"
        );
        assert_eq!(ok("${EMPTY}", &v), "");
        assert_eq!(ok("${MISSING:=dev}-${EMPTY:-x}-${EMPTY=y}", &v), "dev-x-y", "defaults when unset or empty");
        assert!(matches!(eval("${MISSING-z}", &v), Err(Unresolved::Form(_))), "Flux does not parse `-`");
        let deep = format!("{}x{}", "${A:-".repeat(40), "}".repeat(40));
        assert!(matches!(eval(&deep, &v), Err(Unresolved::Form(_))), "nesting is bounded");
        assert_eq!(ok("${MISSING:=${DOMAIN}}", &v), "example.com");
        assert_eq!(ok("$${DOMAIN} $HOME $", &v), "${DOMAIN} $HOME $");
        assert!(matches!(eval("${DOMAIN^^}", &v), Err(Unresolved::Form(_))));
        assert!(matches!(eval("${DOMAIN", &v), Err(Unresolved::Form(_))));
    }

    #[test]
    fn a_variable_that_may_be_in_an_unreadable_source_is_unknown() {
        let v = vars(&[("A", "1")], true);
        assert_eq!(ok("${A}", &v), "1");
        assert!(matches!(eval("${B}", &v), Err(Unresolved::Unknown(n)) if n == "B"));
        assert!(matches!(eval("${B:=x}", &v), Err(Unresolved::Unknown(_))));
    }

    #[test]
    fn values_written_plain_are_typed_again_labels_and_annotations_stay_strings() {
        let v = vars(&[("N", "3"), ("ON", "true"), ("MODE", "0644"), ("PORT", "9797")], false);
        let mut object = json!({
            "metadata": {"labels": {"n": "${N}"}, "annotations": {"port": "${PORT}"}},
            "spec": {"replicas": "${N}", "enabled": "${ON}", "mode": "${MODE}", "name": "x-${N}", "list": ["${N}"]}
        });
        let mut left = Vec::new();
        walk(&mut object, &mut String::new(), false, &v, &mut left);
        assert!(left.is_empty());
        assert_eq!(
            object,
            json!({
                "metadata": {"labels": {"n": "3"}, "annotations": {"port": "9797"}},
                "spec": {"replicas": 3, "enabled": true, "mode": 420, "name": "x-3", "list": [3]}
            })
        );
    }

    #[test]
    fn unknown_variables_leave_their_fields_out_with_their_pointer() {
        let v = vars(&[], true);
        let mut object = json!({"spec": {"rules": [{"host": "web.${DOMAIN}"}], "a/b": "${X}"}});
        let mut left = Vec::new();
        walk(&mut object, &mut String::new(), false, &v, &mut left);
        let pointers: Vec<&str> = left.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(pointers, ["/spec/a~1b", "/spec/rules/0/host"]);
        assert!(left[1].1.contains("DOMAIN"));
    }
}
