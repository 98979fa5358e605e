//! Running the units: plain files parsed (cached by path and content id), Kustomize and Helm
//! renders run on a few threads (cached by the content ids of everything they may read);
//! failures are warnings on the unit, never cached.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use drift_manifest::parse_manifests_with;
use drift_model::{ErrorKind, SourceWarning};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::closure::closure;
use super::plan::{Unit, UnitKind, display_dir, join, kustomization_file, unit_root};
use super::{Cache, Kept, Parsed, Pipeline, Stats};
use crate::render;
use crate::tree::Checkout;

/// A finished external render: slot, unit, cache key, result, success.
type RenderDone = (usize, Unit, String, Parsed, bool);

impl Pipeline {
    pub(super) fn exec_plain(
        &self,
        checkout: &Checkout<'_>,
        unit: Unit,
        old: &Cache,
        fresh: &mut Cache,
    ) -> (Unit, Arc<Parsed>) {
        let UnitKind::Plain(path) = &unit.kind else {
            return (unit, Arc::new(Parsed::default()));
        };
        let Some(entry) = checkout.files.get(path) else {
            return (unit, Arc::new(Parsed::default()));
        };
        // A file read for its Argo CD objects only is kept apart from the same file read whole.
        let key =
            (if unit.elsewhere.is_some() { format!("{path}\0argo-only") } else { path.clone() }, entry.id.clone());
        if let Some(kept) = fresh.files.get(&key).or_else(|| old.files.get(&key)) {
            Stats::inc(&self.stats.file_cache_hits);
            let kept = Arc::clone(kept);
            let parsed = Arc::new(kept.expand());
            fresh.files.insert(key, kept);
            return (unit, parsed);
        }
        Stats::inc(&self.stats.files_parsed);
        self.stats.progress.files_read(1);
        let parsed = if entry.size > self.cfg.max_file_bytes {
            Parsed {
                resources: Vec::new(),
                warnings: vec![
                    SourceWarning::error(
                        ErrorKind::InvalidInput,
                        format!(
                            "file is {} bytes, larger than the limit of {} bytes",
                            entry.size, self.cfg.max_file_bytes
                        ),
                    )
                    .at(path.clone(), None, None),
                ],
            }
        } else {
            match checkout.read(path) {
                Ok(bytes) => match String::from_utf8(bytes) {
                    Ok(text) => {
                        let mut m = parse_manifests_with(&text, path, self.limits());
                        if let Some(opener) = self.sops.get() {
                            drift_manifest::sops::open_file(&mut m, &text, path, opener.as_ref());
                        }
                        Parsed { resources: m.resources, warnings: m.warnings }
                    }
                    Err(_) => Parsed {
                        resources: Vec::new(),
                        warnings: vec![SourceWarning::error(ErrorKind::InvalidInput, "file is not UTF-8 text").at(
                            path.clone(),
                            None,
                            None,
                        )],
                    },
                },
                Err(e) => Parsed {
                    resources: Vec::new(),
                    warnings: vec![SourceWarning::error(ErrorKind::Unexpected, format!("cannot read file: {e}")).at(
                        path.clone(),
                        None,
                        None,
                    )],
                },
            }
        };
        let parsed = argo_only(&unit, parsed);
        if self.cfg.keep_between_fetches {
            fresh.files.insert(key, Arc::new(Kept::of(&parsed)));
        }
        (unit, Arc::new(parsed))
    }

    /// The cache key of an external render: what it renders, with which options and program,
    /// and the content ids of every file it may read.
    fn render_key(&self, checkout: &Checkout<'_>, unit: &Unit) -> String {
        let mut h = Sha256::new();
        h.update(format!("{:?}\n", unit.kind).as_bytes());
        // A render kept for its Argo CD objects only is not the same folder's render kept whole.
        if unit.elsewhere.is_some() {
            h.update(b"argo-only\n");
        }
        h.update(format!("{:?}\n{:?}\n", self.cfg.kustomize_binary, self.cfg.helm.binary).as_bytes());
        let mut files = closure(checkout, unit.root()).files;
        if let UnitKind::Helm { opts, .. } = &unit.kind {
            files.extend(opts.values_files.iter().cloned());
        }
        if let UnitKind::Overlay { overlay, .. } = &unit.kind {
            // Components may live outside the folder.
            let overlay: Value = serde_json::from_str(overlay).unwrap_or_default();
            for c in overlay["components"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                files.extend(closure(checkout, c).files);
            }
        }
        for f in files {
            let id = checkout.files.get(&f).map_or("-", |e| e.id.as_str());
            h.update(f.as_bytes());
            h.update(b"\0");
            h.update(id.as_bytes());
            h.update(b"\n");
        }
        hex::encode(h.finalize())
    }

    pub(super) fn exec_external(
        &self,
        checkout: &Checkout<'_>,
        units: Vec<Unit>,
        old: &Cache,
        fresh: &mut Cache,
    ) -> Vec<(Unit, Arc<Parsed>)> {
        let mut out: Vec<Option<(Unit, Arc<Parsed>)>> = Vec::with_capacity(units.len());
        let mut misses: Vec<(usize, Unit, String, String)> = Vec::new();
        for unit in units {
            let key = self.render_key(checkout, &unit);
            // A chart from a repository is kept by digest (`charts`), but which version a
            // constraint picks, and so the render, may change without a commit.
            let cacheable = !matches!(unit.kind, UnitKind::RemoteHelm { .. });
            if let Some(kept) = fresh.renders.get(&key).or_else(|| old.renders.get(&key)).filter(|_| cacheable) {
                Stats::inc(&self.stats.render_cache_hits);
                let kept = Arc::clone(kept);
                out.push(Some((unit, Arc::new(kept.expand()))));
                fresh.renders.insert(key, kept);
            } else {
                let config_file = match &unit.kind {
                    UnitKind::Kustomize(dir) | UnitKind::Overlay { dir, .. } => {
                        kustomization_file(checkout, dir).unwrap_or_else(|| join(dir, "kustomization.yaml"))
                    }
                    other => join(unit_root(other), "Chart.yaml"),
                };
                misses.push((out.len(), unit, key, config_file));
                out.push(None);
            }
        }
        if !misses.is_empty() {
            let root = checkout.materialize();
            let next = AtomicUsize::new(0);
            let done: Mutex<Vec<RenderDone>> = Mutex::new(Vec::new());
            let workers = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(1, 4).min(misses.len());
            std::thread::scope(|scope| {
                for _ in 0..workers {
                    scope.spawn(|| {
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            let Some((slot, unit, key, config_file)) = misses.get(i) else { break };
                            Stats::inc(&self.stats.renders);
                            self.stats.progress.rendered();
                            let (parsed, ok) = match &root {
                                Ok(root) => self.render_unit(root, unit, config_file),
                                Err(e) => {
                                    (failure(unit, ErrorKind::Unexpected, format!("cannot write the tree: {e}")), false)
                                }
                            };
                            done.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((
                                *slot,
                                unit.clone(),
                                key.clone(),
                                parsed,
                                ok,
                            ));
                        }
                    });
                }
            });
            for (slot, unit, key, parsed, ok) in done.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner) {
                let parsed = argo_only(&unit, parsed);
                if ok && self.cfg.keep_between_fetches && !matches!(unit.kind, UnitKind::RemoteHelm { .. }) {
                    // Failures are not cached: a missing program may be installed before the next commit.
                    fresh.renders.insert(key, Arc::new(Kept::of(&parsed)));
                }
                out[slot] = Some((unit, Arc::new(parsed)));
            }
        }
        out.into_iter().flatten().collect()
    }

    /// Runs one external render; only the folder on disk is touched, so this runs on any thread.
    fn render_unit(&self, root: &std::path::Path, unit: &Unit, config_file: &str) -> (Parsed, bool) {
        match &unit.kind {
            UnitKind::Plain(_) => (Parsed::default(), true),
            UnitKind::Kustomize(dir) => match render::kustomize_build(&self.cfg, &root.join(dir)) {
                Ok(out) => {
                    let m = parse_manifests_with(&out, config_file, self.limits());
                    (Parsed { resources: m.resources, warnings: m.warnings }, true)
                }
                Err(e) => {
                    let kind = if e.contains("not found") { ErrorKind::Unsupported } else { ErrorKind::InvalidInput };
                    (failure(unit, kind, format!("kustomize build of `{}` failed: {e}", display_dir(dir))), false)
                }
            },
            UnitKind::Overlay { dir, resources, overlay } => {
                // The overlay's folder is removed when the build is done (dropped here).
                match write_overlay(root, dir, resources, overlay)
                    .and_then(|at| render::kustomize_build(&self.cfg, at.path()))
                {
                    Ok(out) => {
                        let m = parse_manifests_with(&out, config_file, self.limits());
                        (Parsed { resources: m.resources, warnings: m.warnings }, true)
                    }
                    Err(e) => {
                        let kind =
                            if e.contains("not found") { ErrorKind::Unsupported } else { ErrorKind::InvalidInput };
                        let message =
                            format!("kustomize build of `{}` with its Flux fields failed: {e}", display_dir(dir));
                        (failure(unit, kind, message), false)
                    }
                }
            }
            UnitKind::RemoteHelm { remote, opts, declared_in, .. } => match crate::charts::fetch(&self.cfg, remote) {
                Ok(chart_dir) => self.helm(root, &chart_dir, opts, &crate::charts::shown(remote), unit, config_file),
                Err(crate::charts::ChartError::Unreachable(e)) => {
                    let message = format!("chart {} is not rendered: {e}", crate::charts::shown(remote));
                    (
                        Parsed {
                            resources: Vec::new(),
                            warnings: vec![SourceWarning::note(message).at(declared_in.clone(), None, None)],
                        },
                        false,
                    )
                }
                Err(crate::charts::ChartError::Refused(e)) => (
                    failure(unit, ErrorKind::InvalidInput, format!("chart {}: {e}", crate::charts::shown(remote))),
                    false,
                ),
            },
            UnitKind::Helm { chart, opts } => {
                self.helm(root, &root.join(chart), opts, display_dir(chart), unit, config_file)
            }
        }
    }

    /// `helm template` of a chart folder with a unit's options (values files are in the tree).
    fn helm(
        &self,
        root: &std::path::Path,
        chart_dir: &std::path::Path,
        opts: &crate::gitops::HelmOptions,
        shown: &str,
        unit: &Unit,
        config_file: &str,
    ) -> (Parsed, bool) {
        let values: Option<Value> = opts.values.as_deref().and_then(|v| serde_json::from_str(v).ok());
        let job = render::HelmJob {
            release: &opts.release,
            chart_dir: chart_dir.to_path_buf(),
            namespace: opts.namespace.as_deref(),
            values_files: opts
                .values_files
                .iter()
                .map(|f| match f.strip_prefix(crate::gitops::IN_CHART) {
                    Some(inside) => chart_dir.join(inside),
                    None => root.join(f),
                })
                .collect(),
            inline_values: values.as_ref(),
            parameters: &opts.parameters,
            include_crds: opts.include_crds,
        };
        match render::helm_template(&self.cfg, &job) {
            Ok(out) => {
                let m = parse_manifests_with(&out, config_file, self.limits());
                (Parsed { resources: m.resources, warnings: m.warnings }, true)
            }
            Err(e) => {
                let kind = if e.contains("not found") { ErrorKind::Unsupported } else { ErrorKind::InvalidInput };
                (failure(unit, kind, format!("helm template of `{shown}` failed: {e}")), false)
            }
        }
    }
}

/// Of a unit rendered for another cluster's Application, only what is followed there: its Argo
/// CD Applications and ApplicationSets (docs/sources.md, "Several clusters"), before anything
/// keeps the parse.
fn argo_only(unit: &Unit, mut parsed: Parsed) -> Parsed {
    if unit.elsewhere.is_some() {
        parsed.resources.retain(crate::gitops::is_argo_object);
    }
    parsed
}

/// Writes, beside the tree in `root`, the kustomization kustomize-controller (or Argo CD's repo
/// server) would build: the folder (or its manifests) as resources, and the fields they add.
/// Returns its folder, `.drift-overlay/<hash><random>/` in the tree, removed (with
/// `.drift-overlay` when it is left empty) when the value is dropped: a folder source is the
/// user's own working copy, which a render must leave as it found it, and two renders of the
/// same overlay (a `drift diff` beside a `drift serve`) never share a folder. kustomize builds it
/// with its default restriction (files within the kustomization's folder): manifests are copied
/// in, folders (the app's, nested kustomizations, components) are referenced, as kustomize
/// allows for bases; so nothing a kustomization in Git names can make kustomize read a file
/// outside the tree.
fn write_overlay(root: &std::path::Path, dir: &str, resources: &[String], overlay: &str) -> Result<Overlay, String> {
    let mut h = Sha256::new();
    h.update(format!("{dir}\0{resources:?}\0{overlay}").as_bytes());
    let prefix = hex::encode(h.finalize())[..16].to_owned();
    let parent = root.join(OVERLAY_DIR);
    // The parent is made and removed under the count of this process's overlays in it (two
    // units build at once); another process's removal between the two steps is retried.
    let folder = {
        let mut live = LIVE_OVERLAYS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut attempt = 0;
        let folder = loop {
            std::fs::create_dir_all(&parent).map_err(|e| e.to_string())?;
            match tempfile::Builder::new().prefix(&prefix).tempdir_in(&parent) {
                Ok(f) => break f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && attempt < 3 => attempt += 1,
                Err(e) => return Err(format!("cannot make the overlay folder in {}: {e}", parent.display())),
            }
        };
        *live.entry(parent.clone()).or_default() += 1;
        folder
    };
    let overlay_dir = Overlay { folder: Some(folder), parent };
    let at = overlay_dir.path().to_path_buf();
    let up = |p: &str| format!("../../{p}");
    let mut kustomization: serde_json::Map<String, Value> =
        serde_json::from_str(overlay).map_err(|e| format!("overlay: {e}"))?;
    if let Some(Value::Array(components)) = kustomization.get_mut("components") {
        for c in components.iter_mut() {
            *c = Value::String(up(c.as_str().unwrap_or_default()));
        }
    }
    let mut listed = Vec::with_capacity(resources.len());
    for (i, r) in resources.iter().enumerate() {
        let source = root.join(r);
        if source.is_dir() {
            listed.push(Value::String(up(r)));
        } else {
            let name = format!("{i:05}-{}", r.rsplit('/').next().unwrap_or(r));
            std::fs::copy(&source, at.join(&name)).map_err(|e| format!("{r}: {e}"))?;
            listed.push(Value::String(name));
        }
    }
    kustomization.insert("apiVersion".into(), "kustomize.config.k8s.io/v1beta1".into());
    kustomization.insert("kind".into(), "Kustomization".into());
    kustomization.insert("resources".into(), Value::Array(listed));
    std::fs::write(at.join("kustomization.yaml"), Value::Object(kustomization).to_string())
        .map_err(|e| e.to_string())?;
    Ok(overlay_dir)
}

/// The folder in the tree that overlays are written in; the walk never reads it.
pub(crate) const OVERLAY_DIR: &str = ".drift-overlay";

/// An overlay's folder; removed, with its parent when that is left empty, when dropped.
struct Overlay {
    folder: Option<tempfile::TempDir>,
    parent: std::path::PathBuf,
}

impl Overlay {
    fn path(&self) -> &std::path::Path {
        self.folder.as_ref().map_or(self.parent.as_path(), tempfile::TempDir::path)
    }
}

/// How many overlays of this process each overlay parent holds.
static LIVE_OVERLAYS: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<std::path::PathBuf, usize>>> =
    std::sync::LazyLock::new(Default::default);

impl Drop for Overlay {
    fn drop(&mut self) {
        let mut live = LIVE_OVERLAYS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        drop(self.folder.take());
        let left = live.get_mut(&self.parent).map(|n| {
            *n = n.saturating_sub(1);
            *n
        });
        if left == Some(0) {
            live.remove(&self.parent);
            // Fails, as it should, while another process's overlay is there.
            let _ = std::fs::remove_dir(&self.parent);
        }
    }
}

fn failure(unit: &Unit, kind: ErrorKind, message: String) -> Parsed {
    let path = match &unit.kind {
        UnitKind::Plain(p) => p.clone(),
        UnitKind::Kustomize(d) | UnitKind::Overlay { dir: d, .. } => d.clone(),
        UnitKind::Helm { chart, .. } => chart.clone(),
        UnitKind::RemoteHelm { declared_in, .. } => declared_in.clone(),
    };
    Parsed {
        resources: Vec::new(),
        warnings: vec![SourceWarning::error(kind, message).at(display_dir(&path), None, None)],
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::config::RenderConfig;
    use crate::pipeline::testing::Tree;

    const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n";

    fn pipeline(cfg: RenderConfig) -> Pipeline {
        Pipeline::new(cfg, Arc::default())
    }

    fn plain(path: &str) -> Unit {
        Unit::new(UnitKind::Plain(path.into()))
    }

    #[test]
    fn a_file_is_parsed_once_per_content() {
        let p = pipeline(RenderConfig::default());
        let tree = Tree::new(&[("a.yaml", CM)]);
        let (old, mut fresh) = (Cache::default(), Cache::default());
        let (_, first) = p.exec_plain(&tree.checkout(), plain("a.yaml"), &old, &mut fresh);
        assert_eq!(first.resources.len(), 1);
        // The next build starts from this one's cache.
        let (old, mut fresh) = (fresh, Cache::default());
        let (_, again) = p.exec_plain(&tree.checkout(), plain("a.yaml"), &old, &mut fresh);
        assert_eq!(first.resources, again.resources, "the kept parse is expanded, not parsed again");
        assert!(!Arc::ptr_eq(&first.resources[0].object, &again.resources[0].object), "kept compact, not shared");
        let changed = Tree::new(&[("a.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n")]);
        let (_, other) = p.exec_plain(&changed.checkout(), plain("a.yaml"), &old, &mut fresh);
        assert_eq!(other.resources[0].key.name, "b", "a new content is parsed again");
        let s = p.stats.snapshot();
        assert_eq!((s.files_parsed, s.file_cache_hits), (2, 1));
    }

    #[test]
    fn a_file_over_the_limit_or_not_text_is_a_warning_on_that_file() {
        let p = pipeline(RenderConfig { max_file_bytes: 20, ..RenderConfig::default() });
        let mut tree = Tree::new(&[("big.yaml", CM)]);
        tree.0.insert("binary.yaml".into(), vec![0xff, 0xfe, 0x00]);
        let checkout = tree.checkout();
        for (path, says) in [("big.yaml", "larger than the limit of 20 bytes"), ("binary.yaml", "not UTF-8")] {
            let (_, parsed) = p.exec_plain(&checkout, plain(path), &Cache::default(), &mut Cache::default());
            assert!(parsed.resources.is_empty());
            let w = &parsed.warnings[0];
            assert!(w.fatal && w.kind == ErrorKind::InvalidInput && w.message.contains(says), "{w:?}");
            assert_eq!(w.path.as_deref(), Some(path));
        }
    }

    #[test]
    fn the_render_key_follows_the_files_a_render_may_read() {
        let p = pipeline(RenderConfig::default());
        let unit = Unit::new(UnitKind::Kustomize("app".into()));
        let key = |files: &[(&str, &str)]| p.render_key(&Tree::new(files).checkout(), &unit);
        let base = key(&[("app/kustomization.yaml", "resources: [a.yaml]"), ("app/a.yaml", "1"), ("x.yaml", "1")]);
        let unrelated = key(&[("app/kustomization.yaml", "resources: [a.yaml]"), ("app/a.yaml", "1"), ("x.yaml", "2")]);
        let edited = key(&[("app/kustomization.yaml", "resources: [a.yaml]"), ("app/a.yaml", "2"), ("x.yaml", "1")]);
        assert_eq!(base, unrelated, "a file the render cannot read does not change its key");
        assert_ne!(base, edited, "a file the render reads does");
    }

    #[test]
    fn a_failed_render_is_a_warning_on_its_folder() {
        let f = failure(&Unit::new(UnitKind::Kustomize(String::new())), ErrorKind::Unsupported, "no kustomize".into());
        assert!(f.resources.is_empty());
        assert_eq!(f.warnings[0].path.as_deref(), Some("."), "the root is shown as `.`");
        assert!(f.warnings[0].fatal && f.warnings[0].kind == ErrorKind::Unsupported);
    }
}
