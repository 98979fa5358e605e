//! Argo CD `ApplicationSet`s expanded into the Applications their generators make, as the
//! ApplicationSet controller does, so that each is rendered like an Application written in Git.
//!
//! Generators: `list` (its `elements`), `git` `directories` (the repository's folders matching
//! each glob, `exclude` honoured) and `git` `files` (each matching JSON or YAML file's keys,
//! flattened with dots), of this repository only, and `clusters` (Argo CD cluster Secrets found
//! in the revision; `selector.matchLabels` honoured). Parameters are those of Argo CD
//! (`path`, `path.basename`, `path.basenameNormalized`, `path.filename`,
//! `path.filenameNormalized`, `path[N]`; `name`, `nameNormalized`, `server`,
//! `metadata.labels.<k>`), put into the template's strings as `{{param}}`; with `goTemplate:
//! true`, `{{ .a.b }}` field references (`.path.path`, `.path.basename`, `.path.segments`,
//! `.name`...). A template that needs more (Go template functions, matrix and merge
//! generators, SCM and pull-request generators) is noted, never guessed.

use std::collections::BTreeMap;

use drift_model::Resource;
use serde_json::{Map, Value};

/// What the expansion may read of the revision.
pub(crate) struct Repo<'a> {
    /// Normalised URL of this repository, `None` for a local folder.
    pub url: Option<&'a str>,
    /// Every file path of the revision.
    pub files: &'a dyn Fn() -> Vec<String>,
    pub read: &'a dyn Fn(&str) -> Option<String>,
    /// The revision's objects, for cluster Secrets.
    pub objects: &'a [&'a Resource],
}

/// The Applications an ApplicationSet makes (as objects), and notes.
pub(crate) fn expand(set: &Resource, repo: &Repo<'_>) -> (Vec<Value>, Vec<String>) {
    let spec = set.object.get("spec").cloned().unwrap_or(Value::Null);
    let go = spec.get("goTemplate").and_then(Value::as_bool).unwrap_or(false);
    let Some(template) = spec.get("template") else {
        return (Vec::new(), vec!["has no template; nothing is rendered".to_owned()]);
    };
    let mut apps = Vec::new();
    let mut notes = Vec::new();
    for generator in spec.get("generators").and_then(Value::as_array).into_iter().flatten() {
        if generator.get("clusters").is_some() {
            notes.push(
                "the clusters generator makes one Application per cluster; drift renders each of them into this \
                 snapshot, whatever its destination"
                    .to_owned(),
            );
        }
        let params = match params_of(generator, repo) {
            Ok(params) => params,
            Err(note) => {
                notes.push(note);
                continue;
            }
        };
        // A generator's own template overrides the set's, field by field.
        let mut tmpl = template.clone();
        if let Some(own) = generator.as_object().and_then(|g| g.values().next()).and_then(|g| g.get("template")) {
            merge(&mut tmpl, own);
        }
        for p in params {
            let mut unresolved = Vec::new();
            let mut app = render(&tmpl, &p, go, &mut unresolved);
            if !unresolved.is_empty() {
                notes.push(format!(
                    "template expressions {unresolved:?} are not evaluated by drift; that Application is not rendered"
                ));
                continue;
            }
            if let Some(o) = app.as_object_mut() {
                o.insert("apiVersion".into(), "argoproj.io/v1alpha1".into());
                o.insert("kind".into(), "Application".into());
            }
            apps.push(app);
        }
    }
    (apps, notes)
}

/// One generator's parameter sets.
fn params_of(generator: &Value, repo: &Repo<'_>) -> Result<Vec<Map<String, Value>>, String> {
    if let Some(list) = generator.get("list") {
        return Ok(list
            .get("elements")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|e| e.as_object().cloned())
            .collect());
    }
    if let Some(git) = generator.get("git") {
        let url = git.get("repoURL").and_then(Value::as_str).unwrap_or("");
        if let Some(ours) = repo.url
            && crate::gitops::normalize_repo_url(url) != ours
        {
            return Err(format!("git generator of {url} reads another repository; not followed"));
        }
        let files = (repo.files)();
        if let Some(dirs) = git.get("directories").and_then(Value::as_array) {
            let mut folders: Vec<String> = files.iter().flat_map(|f| ancestors(f)).collect();
            folders.sort();
            folders.dedup();
            let matching = |exclude: bool| {
                dirs.iter()
                    .filter(|d| d.get("exclude").and_then(Value::as_bool).unwrap_or(false) == exclude)
                    .filter_map(|d| d.get("path").and_then(Value::as_str))
                    .filter_map(|g| glob(g).ok())
                    .collect::<Vec<_>>()
            };
            let (include, exclude) = (matching(false), matching(true));
            return Ok(folders
                .into_iter()
                .filter(|f| include.iter().any(|g| g.is_match(f)) && !exclude.iter().any(|g| g.is_match(f)))
                .map(|f| path_params(&f, false))
                .collect());
        }
        if let Some(globs) = git.get("files").and_then(Value::as_array) {
            let globs: Vec<_> = globs
                .iter()
                .filter_map(|g| g.get("path").and_then(Value::as_str))
                .filter_map(|g| glob(g).ok())
                .collect();
            let mut out = Vec::new();
            for f in files.iter().filter(|f| globs.iter().any(|g| g.is_match(f.as_str()))) {
                let text = (repo.read)(f).ok_or_else(|| format!("git generator: {f} cannot be read"))?;
                let value = drift_manifest::read_yaml_value(&text).map_err(|e| format!("git generator: {f}: {e}"))?;
                // A file may hold one object or a list of them.
                let items = match value {
                    Value::Array(items) => items,
                    other => vec![other],
                };
                for item in items {
                    let mut p = Map::new();
                    flatten("", &item, &mut p);
                    p.extend(path_params(f, true));
                    out.push(p);
                }
            }
            return Ok(out);
        }
        return Err("git generator without directories or files; not followed".to_owned());
    }
    if let Some(clusters) = generator.get("clusters") {
        let wanted: BTreeMap<String, Value> = clusters
            .pointer("/selector/matchLabels")
            .and_then(Value::as_object)
            .map(|m| m.clone().into_iter().collect())
            .unwrap_or_default();
        let mut out = Vec::new();
        for s in repo.objects.iter().filter(|r| r.key.kind == "Secret" && r.key.group.is_empty()) {
            let labels = s.object.pointer("/metadata/labels").cloned().unwrap_or(Value::Null);
            if labels.get("argocd.argoproj.io/secret-type").and_then(Value::as_str) != Some("cluster") {
                continue;
            }
            if !wanted.iter().all(|(k, v)| labels.get(k) == Some(v)) {
                continue;
            }
            let field = |k: &str| secret_field(&s.object, k);
            let (Some(name), Some(server)) = (field("name"), field("server")) else { continue };
            let mut p = Map::new();
            p.insert("nameNormalized".into(), Value::String(normalized(&name)));
            p.insert("name".into(), Value::String(name));
            p.insert("server".into(), Value::String(server));
            for (k, v) in labels.as_object().into_iter().flatten() {
                p.insert(format!("metadata.labels.{k}"), v.clone());
            }
            out.push(p);
        }
        return Ok(out);
    }
    let kind = generator.as_object().and_then(|g| g.keys().next().cloned()).unwrap_or_default();
    Err(format!("the {kind} generator is not expanded by drift"))
}

fn secret_field(secret: &Value, key: &str) -> Option<String> {
    use base64::Engine as _;
    if let Some(s) = secret.pointer(&format!("/stringData/{key}")).and_then(Value::as_str) {
        return Some(s.to_owned());
    }
    let raw = secret.pointer(&format!("/data/{key}")).and_then(Value::as_str)?;
    base64::engine::general_purpose::STANDARD.decode(raw).ok().and_then(|b| String::from_utf8(b).ok())
}

/// Every folder above a file path (not the root).
fn ancestors(file: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut d = crate::tree::parent_dir(file);
    while !d.is_empty() {
        out.push(d.to_owned());
        d = crate::tree::parent_dir(d);
    }
    out
}

fn glob(pattern: &str) -> Result<globset::GlobMatcher, globset::Error> {
    globset::GlobBuilder::new(pattern).literal_separator(true).build().map(|g| g.compile_matcher())
}

/// Argo CD's path parameters of a folder (or of a file's folder, with the file's name).
fn path_params(path: &str, file: bool) -> Map<String, Value> {
    let dir = if file { crate::tree::parent_dir(path) } else { path };
    let basename = dir.rsplit('/').next().unwrap_or(dir);
    let mut p = Map::new();
    p.insert("path".into(), Value::String(dir.to_owned()));
    p.insert("path.path".into(), Value::String(dir.to_owned()));
    p.insert("path.basename".into(), Value::String(basename.to_owned()));
    p.insert("path.basenameNormalized".into(), Value::String(normalized(basename)));
    let segments: Vec<Value> = dir.split('/').filter(|s| !s.is_empty()).map(|s| Value::String(s.to_owned())).collect();
    for (i, s) in segments.iter().enumerate() {
        p.insert(format!("path[{i}]"), s.clone());
    }
    p.insert("path.segments".into(), Value::Array(segments));
    if file {
        let name = path.rsplit('/').next().unwrap_or(path);
        p.insert("path.filename".into(), Value::String(name.to_owned()));
        p.insert("path.filenameNormalized".into(), Value::String(normalized(name)));
    }
    p
}

/// Argo CD's normalisation: lower case, anything but letters, digits, `-` and `.` as `-`.
fn normalized(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c.to_ascii_lowercase() } else { '-' })
        .collect()
}

fn flatten(prefix: &str, v: &Value, out: &mut Map<String, Value>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                flatten(&key, v, out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                flatten(&format!("{prefix}.{i}"), v, out);
            }
        }
        other => {
            out.insert(prefix.to_owned(), other.clone());
        }
    }
}

fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(k) {
                    Some(existing) => merge(existing, v),
                    None => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, o) => *b = o.clone(),
    }
}

/// The template with its parameters put in.
fn render(tmpl: &Value, params: &Map<String, Value>, go: bool, unresolved: &mut Vec<String>) -> Value {
    match tmpl {
        Value::String(s) => Value::String(fill(s, params, go, unresolved)),
        Value::Array(items) => Value::Array(items.iter().map(|v| render(v, params, go, unresolved)).collect()),
        Value::Object(m) => Value::Object(
            m.iter().map(|(k, v)| (fill(k, params, go, unresolved), render(v, params, go, unresolved))).collect(),
        ),
        other => other.clone(),
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `{{param}}` (fasttemplate: an unknown one is left as written) or, with Go templates,
/// `{{ .a.b }}` field references (anything else is unresolved).
fn fill(s: &str, params: &Map<String, Value>, go: bool, unresolved: &mut Vec<String>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start + 2..].find("}}") else { break };
        out.push_str(&rest[..start]);
        let tag = &rest[start + 2..start + 2 + len];
        let key = tag.trim();
        if go {
            match key.strip_prefix('.').and_then(|k| go_lookup(params, k)) {
                Some(v) => out.push_str(&text(&v)),
                None => {
                    unresolved.push(format!("{{{{{tag}}}}}"));
                    out.push_str(&rest[start..start + 4 + len]);
                }
            }
        } else {
            match params.get(key) {
                Some(v) if !key.is_empty() => out.push_str(&text(v)),
                _ => out.push_str(&rest[start..start + 4 + len]),
            }
        }
        rest = &rest[start + 4 + len..];
    }
    out.push_str(rest);
    out
}

/// A Go template field reference (`path.basename`, `values.x`) in the parameters: flattened keys
/// are looked up whole, then as nested objects.
fn go_lookup(params: &Map<String, Value>, key: &str) -> Option<Value> {
    if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-') {
        return None;
    }
    if let Some(v) = params.get(key) {
        return Some(v.clone());
    }
    // Nested: the longest flattened prefix, then fields below it.
    let mut parts: Vec<&str> = key.split('.').collect();
    let mut tail = Vec::new();
    while let Some(last) = parts.pop() {
        tail.insert(0, last);
        if parts.is_empty() {
            break;
        }
        if let Some(v) = params.get(&parts.join(".")) {
            return tail.iter().try_fold(v.clone(), |v, k| v.get(*k).cloned());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fasttemplate_leaves_unknown_parameters_and_go_templates_refuse_what_they_cannot_read() {
        let p: Map<String, Value> =
            json!({"path": "apps/web", "path.basename": "web", "n": 3}).as_object().unwrap().clone();
        let mut none = Vec::new();
        assert_eq!(fill("{{path.basename}}-{{ n }}-{{missing}}", &p, false, &mut none), "web-3-{{missing}}");
        assert!(none.is_empty());
        assert_eq!(fill("{{ .path.basename }}/{{.n}}", &p, true, &mut none), "web/3");
        assert!(none.is_empty());
        fill("{{ .path.basename | upper }}", &p, true, &mut none);
        assert_eq!(none, ["{{ .path.basename | upper }}"]);
    }

    #[test]
    fn path_parameters_are_argo_cds() {
        let p = path_params("apps/My_Web/config.json", true);
        assert_eq!(p["path"], "apps/My_Web");
        assert_eq!(p["path.basename"], "My_Web");
        assert_eq!(p["path.basenameNormalized"], "my-web");
        assert_eq!(p["path[0]"], "apps");
        assert_eq!(p["path.filename"], "config.json");
        assert_eq!(p["path.segments"], json!(["apps", "My_Web"]));
    }
}
