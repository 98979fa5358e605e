//! [`SnapshotSource`]: live state read from files, for offline use and demos: the output of
//! `kubectl get -A -o yaml` (a `List`), several such files, or a folder of manifests.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use drift_core::manifest::parse_manifests;
use drift_core::source::{LiveCapabilities, LiveSource};
use drift_core::{Coverage, CoverageStatus, LiveSnapshot, Provenance, Resource, Scope, SourceWarning};

/// A live source on files. It has no discovery: every pair of a scope is `complete`, possibly
/// empty, as long as every file was read; when a file cannot be read or a document is broken,
/// every pair is `failed` (the broken part may hold any object), with the reasons.
#[derive(Debug, Clone)]
pub struct SnapshotSource {
    cluster: String,
    paths: Vec<PathBuf>,
}

fn is_manifest(p: &Path) -> bool {
    matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json"))
}

fn collect(path: &Path, out: &mut Vec<PathBuf>, errors: &mut Vec<String>) {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => out.push(path.to_owned()),
        Ok(_) => {
            let entries = match std::fs::read_dir(path) {
                Ok(e) => e,
                Err(e) => {
                    errors.push(format!("{}: {e}", path.display()));
                    return;
                }
            };
            let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
            paths.sort();
            for p in paths {
                let hidden = p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.'));
                if hidden {
                    continue;
                }
                if p.is_dir() {
                    collect(&p, out, errors);
                } else if is_manifest(&p) {
                    out.push(p);
                }
            }
        }
        Err(e) => errors.push(format!("{}: {e}", path.display())),
    }
}

impl SnapshotSource {
    /// A source on files or folders (read recursively, sorted, hidden entries skipped), named
    /// `cluster` in reports.
    pub fn new(cluster: impl Into<String>, paths: impl IntoIterator<Item = impl Into<PathBuf>>) -> Self {
        SnapshotSource { cluster: cluster.into(), paths: paths.into_iter().map(Into::into).collect() }
    }

    /// Reads every file: the objects and the problems met.
    pub fn read_all(&self) -> (Vec<Resource>, Vec<SourceWarning>) {
        let mut files = Vec::new();
        let mut errors = Vec::new();
        for p in &self.paths {
            collect(p, &mut files, &mut errors);
        }
        let mut warnings: Vec<SourceWarning> = errors
            .into_iter()
            .map(|e| SourceWarning::error(drift_core::ErrorKind::NotFound, format!("cannot read: {e}")))
            .collect();
        let mut resources = Vec::new();
        for file in files {
            let shown = file.display().to_string();
            match std::fs::read_to_string(&file) {
                Ok(text) => {
                    let parsed = parse_manifests(&text, &shown);
                    resources.extend(parsed.resources);
                    warnings.extend(parsed.warnings);
                }
                Err(e) => warnings.push(
                    SourceWarning::error(drift_core::ErrorKind::InvalidInput, format!("cannot read: {e}"))
                        .at(shown, None, None),
                ),
            }
        }
        (resources, warnings)
    }
}

#[async_trait]
impl LiveSource for SnapshotSource {
    fn cluster(&self) -> &str {
        &self.cluster
    }

    fn capabilities(&self) -> LiveCapabilities {
        LiveCapabilities { watch: false, discovery: false }
    }

    async fn fetch(&self, scope: &Scope) -> drift_core::Result<LiveSnapshot> {
        let (resources, warnings) = self.read_all();
        let fatal: Vec<String> = warnings.iter().filter(|w| w.fatal).map(ToString::to_string).collect();
        if !fatal.is_empty() {
            let mut coverage = Coverage::default();
            let message = format!("the live snapshot could not be read completely: {}", fatal.join("; "));
            for (gk, ns) in scope.pairs() {
                coverage.set(gk, ns, CoverageStatus::Failed { message: message.clone() });
            }
            return Ok(LiveSnapshot { cluster: self.cluster.clone(), resources: Vec::new(), coverage });
        }
        let mut resources: Vec<Resource> = resources
            .into_iter()
            .filter(|r| {
                let gk = r.key.group_kind();
                scope.contains(&gk, r.key.namespace.as_deref())
                    || (r.key.namespace.is_some() && scope.contains(&gk, None))
            })
            .map(|r| {
                let provenance = Provenance { cluster: Some(self.cluster.clone()), ..r.provenance };
                Resource { provenance, ..r }
            })
            .collect();
        resources.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LiveSnapshot { cluster: self.cluster.clone(), resources, coverage: Coverage::complete(scope) })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use drift_core::GroupKind;

    #[test]
    fn a_broken_file_fails_every_pair_instead_of_looking_empty() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("a.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: x}\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("b.yaml"), "apiVersion: v1\nkind: [unclosed\n").unwrap();
        let src = SnapshotSource::new("offline", [dir.path()]);
        let mut scope = Scope::default();
        scope.insert(GroupKind::new("", "ConfigMap"), Some("x".into()));
        let snap = futures::executor::block_on(src.fetch(&scope)).unwrap();
        assert!(snap.resources.is_empty());
        assert_eq!(snap.coverage.status("", "ConfigMap", Some("x")).map(CoverageStatus::label), Some("failed"));
    }

    #[test]
    fn a_kubectl_get_list_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let text = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a, namespace: x}\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: b, namespace: y}\nmetadata: {resourceVersion: \"\"}\n";
        std::fs::write(dir.path().join("all.yaml"), text).unwrap();
        let src = SnapshotSource::new("offline", [dir.path().join("all.yaml")]);
        let mut scope = Scope::default();
        scope.insert(GroupKind::new("", "ConfigMap"), Some("x".into()));
        let snap = futures::executor::block_on(src.fetch(&scope)).unwrap();
        assert_eq!(snap.resources.len(), 1);
        assert_eq!(snap.resources[0].key.name, "a");
        assert_eq!(snap.resources[0].provenance.cluster.as_deref(), Some("offline"));
        assert!(snap.coverage.is_complete("", "ConfigMap", Some("x")));
    }
}
