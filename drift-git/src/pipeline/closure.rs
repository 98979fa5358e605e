//! The closure of a Kustomize folder or a Helm chart: the files an external render may read
//! (its cache key), the bases an overlay names, and the files a kustomization names.

use std::collections::{BTreeSet, HashSet};

use serde_json::Value;

use super::plan::file_name;
use crate::render::KUSTOMIZATION_FILES;
use crate::tree::{Checkout, join_relative, parent_dir};

/// Files an external render may read, and the folders/files a kustomization names explicitly.
#[derive(Debug, Default)]
pub(super) struct Closure {
    pub files: BTreeSet<String>,
    /// Folders named in `resources`/`bases`/`components` (bases of overlays).
    pub bases: BTreeSet<String>,
    /// Files named anywhere in a kustomization (patches, generators, resources).
    pub named_files: BTreeSet<String>,
}

const BASE_FIELDS: &[&str] = &["resources", "bases", "components", "crds"];

fn resolve_reference(checkout: &Checkout<'_>, base: &str, s: &str) -> Option<(String, bool)> {
    let s = s.trim();
    let s = s.strip_prefix("file://").unwrap_or(s);
    if s.is_empty() || s.contains("://") || s.contains(char::is_whitespace) || s.len() > 512 {
        return None;
    }
    // generator entries are `key=path`
    let s = s.rsplit('=').next().unwrap_or(s);
    let p = join_relative(base, s)?;
    if checkout.contains_file(&p) {
        Some((p, false))
    } else if !p.is_empty() && checkout.contains_dir(&p) {
        Some((p, true))
    } else {
        None
    }
}

fn strings<'v>(v: &'v Value, out: &mut Vec<&'v str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(o) => o.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

pub(super) fn closure(checkout: &Checkout<'_>, start: &str) -> Closure {
    let mut c = Closure::default();
    let mut queue = vec![start.to_owned()];
    let mut visited: HashSet<String> = HashSet::from([start.to_owned()]);
    while let Some(dir) = queue.pop() {
        let mut configs = Vec::new();
        for (path, _) in checkout.files_under(&dir) {
            c.files.insert(path.clone());
            let name = file_name(path);
            if KUSTOMIZATION_FILES.contains(&name) || name == "Chart.yaml" {
                configs.push(path.clone());
            }
        }
        for config in configs {
            let Ok(bytes) = checkout.read(&config) else { continue };
            let Ok(text) = String::from_utf8(bytes) else { continue };
            let Ok(value) = serde_saphyr::from_str::<Value>(&text) else { continue };
            let base = parent_dir(&config);
            let mut all = Vec::new();
            strings(&value, &mut all);
            let mut base_strings = Vec::new();
            for field in BASE_FIELDS {
                if let Some(v) = value.get(field) {
                    strings(v, &mut base_strings);
                }
            }
            for s in all {
                let Some((p, is_dir)) = resolve_reference(checkout, base, s) else { continue };
                let is_base = base_strings.contains(&s);
                if is_dir {
                    if is_base {
                        c.bases.insert(p.clone());
                    }
                    if visited.insert(p.clone()) {
                        queue.push(p);
                    }
                } else {
                    c.named_files.insert(p.clone());
                    c.files.insert(p);
                }
            }
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::testing::Tree;

    fn overlay_tree() -> Tree {
        Tree::new(&[
            (
                "overlays/prod/kustomization.yaml",
                "resources: [../../base]\npatches: [{path: patch.yaml}]\nconfigMapGenerator: [{name: c, files: [key=conf.txt]}]\n",
            ),
            ("overlays/prod/patch.yaml", "x"),
            ("overlays/prod/conf.txt", "x"),
            ("base/kustomization.yaml", "resources: [deploy.yaml]\n"),
            ("base/deploy.yaml", "x"),
            ("unrelated/other.yaml", "x"),
        ])
    }

    #[test]
    fn an_overlay_reaches_its_bases_and_the_files_it_names() {
        let tree = overlay_tree();
        let c = closure(&tree.checkout(), "overlays/prod");
        let files: Vec<&str> = c.files.iter().map(String::as_str).collect();
        assert_eq!(
            files,
            [
                "base/deploy.yaml",
                "base/kustomization.yaml",
                "overlays/prod/conf.txt",
                "overlays/prod/kustomization.yaml",
                "overlays/prod/patch.yaml"
            ]
        );
        assert_eq!(c.bases.iter().collect::<Vec<_>>(), ["base"]);
        let named: Vec<&str> = c.named_files.iter().map(String::as_str).collect();
        assert_eq!(named, ["base/deploy.yaml", "overlays/prod/conf.txt", "overlays/prod/patch.yaml"]);
    }

    #[test]
    fn references_outside_the_repository_urls_and_missing_paths_are_ignored() {
        let tree = overlay_tree();
        let checkout = tree.checkout();
        let r = |s: &str| resolve_reference(&checkout, "overlays/prod", s);
        assert_eq!(r("../../../etc/passwd"), None);
        assert_eq!(r("https://github.com/org/repo//base"), None);
        assert_eq!(r("missing.yaml"), None);
        assert_eq!(r("has space"), None);
        assert_eq!(r("key=conf.txt"), Some(("overlays/prod/conf.txt".into(), false)), "a generator entry");
        assert_eq!(r("file://patch.yaml"), Some(("overlays/prod/patch.yaml".into(), false)));
        assert_eq!(r("../../base"), Some(("base".into(), true)));
    }

    #[test]
    fn every_string_of_a_document_is_collected() {
        let v: Value = serde_json::json!({"a": ["x", {"b": "y"}], "c": 1, "d": "z"});
        let mut out = Vec::new();
        strings(&v, &mut out);
        out.sort_unstable();
        assert_eq!(out, ["x", "y", "z"]);
    }
}
