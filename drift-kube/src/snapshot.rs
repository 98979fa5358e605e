//! [`SnapshotSource`]: live state read from files, for offline use and demos: the output of
//! `kubectl get -A -o yaml` (a `List`), several such files, or a folder of manifests.

use std::path::PathBuf;

use async_trait::async_trait;
use drift_manifest::walk::{WalkLimits, walk_with};
use drift_manifest::{Limits, parse_live_manifests};
use drift_model::source::{LiveCapabilities, LiveSource};
use drift_model::{Coverage, GroupKind, LiveSnapshot, Provenance, Resource, Scope, SourceWarning};

/// A live source on files. It has no discovery: every pair of a scope is `complete`, possibly
/// empty, as long as every file was read; when a file cannot be read or a document is broken,
/// every pair is `failed` (the broken part may hold any object), with the reasons.
#[derive(Debug, Clone)]
pub struct SnapshotSource {
    cluster: String,
    paths: Vec<PathBuf>,
    limits: WalkLimits,
}

impl SnapshotSource {
    /// A source on files or folders (read recursively, sorted, hidden entries skipped, with the
    /// rules and bounds of [`drift_manifest::walk`]), named `cluster` in reports.
    pub fn new(cluster: impl Into<String>, paths: impl IntoIterator<Item = impl Into<PathBuf>>) -> Self {
        SnapshotSource {
            cluster: cluster.into(),
            paths: paths.into_iter().map(Into::into).collect(),
            limits: WalkLimits::default(),
        }
    }

    /// The same source with other bounds for the walk of each path (each path is walked with
    /// these bounds on its own).
    #[must_use]
    pub fn with_limits(mut self, limits: WalkLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Reads every file: the objects and the problems met.
    pub fn read_all(&self) -> (Vec<Resource>, Vec<SourceWarning>) {
        let mut files = Vec::new();
        let mut warnings = Vec::new();
        for p in &self.paths {
            match walk_with(p, self.limits) {
                Ok(walked) => {
                    files.extend(walked.files);
                    warnings.extend(walked.warnings);
                }
                Err(e) => {
                    warnings.push(SourceWarning::error(drift_model::ErrorKind::NotFound, format!("cannot read: {e}")));
                }
            }
        }
        let mut resources = Vec::new();
        for file in files {
            let shown = file.display().to_string();
            match std::fs::read_to_string(&file) {
                Ok(text) => {
                    let parsed = parse_live_manifests(&text, &shown, Limits::live());
                    resources.extend(parsed.resources);
                    warnings.extend(parsed.warnings);
                }
                Err(e) => warnings.push(
                    SourceWarning::error(drift_model::ErrorKind::InvalidInput, format!("cannot read: {e}"))
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

    /// The custom kinds whose objects in the files all name no namespace
    /// ([`drift_model::snapshot::cluster_scoped_in`]).
    async fn cluster_scoped(&self, kinds: &[GroupKind]) -> Vec<GroupKind> {
        let (resources, _) = self.read_all();
        drift_model::snapshot::cluster_scoped_in(&resources).into_iter().filter(|gk| kinds.contains(gk)).collect()
    }

    async fn fetch(&self, scope: &Scope) -> drift_model::Result<LiveSnapshot> {
        let (resources, warnings) = self.read_all();
        if warnings.iter().any(|w| w.fatal) {
            let coverage = Coverage::of_whole_read(scope, &warnings);
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
    use drift_model::CoverageStatus;

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

    fn cm(name: &str) -> String {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: x}}\n")
    }

    fn scope() -> Scope {
        let mut scope = Scope::default();
        scope.insert(GroupKind::new("", "ConfigMap"), Some("x".into()));
        scope
    }

    fn names(snap: &LiveSnapshot) -> Vec<&str> {
        snap.resources.iter().map(|r| r.key.name.as_str()).collect()
    }

    #[test]
    fn links_cycles_and_fifos_are_refused_with_notes_and_the_rest_is_read() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("o.yaml"), cm("outside")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for sub in ["a", "b", ".store"] {
            std::fs::create_dir(root.join(sub)).unwrap();
        }
        std::fs::write(root.join("a/a.yaml"), cm("a")).unwrap();
        std::fs::write(root.join("b/b.yaml"), cm("b")).unwrap();
        std::fs::write(root.join(".store/c.yaml"), cm("c")).unwrap();
        std::os::unix::fs::symlink("..", root.join("a/up")).unwrap();
        std::os::unix::fs::symlink("..", root.join("b/up")).unwrap();
        std::os::unix::fs::symlink(".store/c.yaml", root.join("c.yaml")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("o.yaml"), root.join("o.yaml")).unwrap();
        assert!(std::process::Command::new("mkfifo").arg(root.join("x.yaml")).status().unwrap().success());

        let src = SnapshotSource::new("offline", [root]);
        let (_, warnings) = src.read_all();
        let mut noted: Vec<(String, bool)> = warnings.iter().map(|w| (w.path.clone().unwrap(), w.fatal)).collect();
        noted.sort();
        let shown = |p: &str| root.join(p).display().to_string();
        assert_eq!(
            noted,
            [(shown("a/up"), false), (shown("b/up"), false), (shown("o.yaml"), false), (shown("x.yaml"), false)]
        );
        let snap = futures::executor::block_on(src.fetch(&scope())).unwrap();
        assert_eq!(names(&snap), ["a", "b", "c"]);
        assert!(snap.coverage.is_complete("", "ConfigMap", Some("x")));
    }

    #[test]
    fn too_many_files_fail_every_pair() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["a", "b", "c"] {
            std::fs::write(dir.path().join(format!("{name}.yaml")), cm(name)).unwrap();
        }
        let limits = drift_manifest::walk::WalkLimits { max_files: 2, ..drift_manifest::walk::WalkLimits::default() };
        let src = SnapshotSource::new("offline", [dir.path()]).with_limits(limits);
        let snap = futures::executor::block_on(src.fetch(&scope())).unwrap();
        assert!(snap.resources.is_empty());
        let status = snap.coverage.status("", "ConfigMap", Some("x")).unwrap();
        assert_eq!(status.label(), "failed");
        let CoverageStatus::Failed { message } = status else { unreachable!() };
        assert!(message.contains("more than 2 manifest files"), "{message}");
        assert!(message.contains("c.yaml"), "{message}");
        // The default bounds read the same folder completely.
        let snap = futures::executor::block_on(SnapshotSource::new("offline", [dir.path()]).fetch(&scope())).unwrap();
        assert_eq!(names(&snap), ["a", "b", "c"]);
    }
}
