//! From the files of one revision to a [`DesiredSnapshot`]: plan what to render (plain files,
//! Kustomize folders, Helm charts, applications named by Argo CD / Flux objects), render with
//! per-file and per-application caches, and assemble objects with their provenance.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use drift_core::manifest::{Limits, parse_manifests_with};
use drift_core::{DesiredSnapshot, ErrorKind, Resource, SourceWarning, is_cluster_scoped};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::config::{RenderConfig, RendererKind};
use crate::error::SourceError;
use crate::gitops::{self, App, AppRender, HelmOptions, NamespaceRule};
use crate::render::{self, KUSTOMIZATION_FILES};
use crate::tree::{Checkout, join_relative, parent_dir};

const CHART_SKIPPED: &str = "Helm chart ";

/// How deep Argo CD / Flux objects are followed (an app of apps of apps).
const MAX_APP_DEPTH: usize = 3;

/// Counters of a source, for logs, metrics and tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SourceStats {
    /// Calls to `fetch`.
    pub fetches: u64,
    /// Fetches answered from the snapshot of an unchanged commit (nothing read or rendered).
    pub snapshot_cache_hits: u64,
    /// Revisions whose files were read (a new commit, or a changed folder).
    pub revisions_read: u64,
    /// Files parsed.
    pub files_parsed: u64,
    /// Files whose parsed objects were reused (same path, same content).
    pub file_cache_hits: u64,
    /// Kustomize / Helm renders run.
    pub renders: u64,
    /// Renders whose output was reused (same inputs).
    pub render_cache_hits: u64,
    /// Network transfers of repository content (git packs received, GitHub archives).
    pub downloads: u64,
    /// HTTP requests sent (GitHub source).
    pub requests: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub fetches: AtomicU64,
    pub snapshot_cache_hits: AtomicU64,
    pub revisions_read: AtomicU64,
    pub files_parsed: AtomicU64,
    pub file_cache_hits: AtomicU64,
    pub renders: AtomicU64,
    pub render_cache_hits: AtomicU64,
    pub downloads: AtomicU64,
    pub requests: AtomicU64,
}

impl Stats {
    pub fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
    pub fn snapshot(&self) -> SourceStats {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        SourceStats {
            fetches: g(&self.fetches),
            snapshot_cache_hits: g(&self.snapshot_cache_hits),
            revisions_read: g(&self.revisions_read),
            files_parsed: g(&self.files_parsed),
            file_cache_hits: g(&self.file_cache_hits),
            renders: g(&self.renders),
            render_cache_hits: g(&self.render_cache_hits),
            downloads: g(&self.downloads),
            requests: g(&self.requests),
        }
    }
}

/// Objects and problems of one file or one rendered application, before provenance.
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    resources: Vec<Resource>,
    warnings: Vec<SourceWarning>,
}

#[derive(Debug, Default)]
struct Cache {
    files: HashMap<(String, String), Arc<Parsed>>,
    renders: HashMap<String, Arc<Parsed>>,
}

/// A finished external render: slot, unit, cache key, result, success.
type RenderDone = (usize, Unit, String, Parsed, bool);

/// What to render.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum UnitKind {
    Plain(String),
    Kustomize(String),
    Helm { chart: String, opts: HelmOptions },
}

#[derive(Debug, Clone)]
struct Unit {
    kind: UnitKind,
    namespace: NamespaceRule,
}

impl Unit {
    fn new(kind: UnitKind) -> Self {
        Unit { kind, namespace: NamespaceRule::Keep }
    }
    fn root(&self) -> &str {
        unit_root(&self.kind)
    }
}

/// One revision to turn into a snapshot.
pub(crate) struct BuildInput<'a> {
    pub checkout: &'a Checkout<'a>,
    /// Name of the repository in reports and provenance.
    pub repository: &'a str,
    /// Normalised URL, for matching Argo CD `repoURL`s (`None`: a local folder).
    pub repo_url: Option<&'a str>,
    pub revision: &'a str,
    /// Normalised sub-folder ("" for the root).
    pub sub: &'a str,
}

/// Rendering with caches, shared by every fetch of one source.
#[derive(Debug)]
pub(crate) struct Pipeline {
    pub cfg: RenderConfig,
    cache: Mutex<Cache>,
    pub stats: Arc<Stats>,
}

fn is_manifest_name(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    lower.ends_with(".yaml") || lower.ends_with(".yml") || lower.ends_with(".json")
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() { name.to_owned() } else { format!("{dir}/{name}") }
}

fn within(path: &str, dir: &str) -> bool {
    dir.is_empty() || path == dir || (path.starts_with(dir) && path.as_bytes().get(dir.len()) == Some(&b'/'))
}

fn kustomization_file(checkout: &Checkout<'_>, dir: &str) -> Option<String> {
    KUSTOMIZATION_FILES.iter().map(|f| join(dir, f)).find(|p| checkout.contains_file(p))
}

fn has_chart(checkout: &Checkout<'_>, dir: &str) -> bool {
    checkout.contains_file(&join(dir, "Chart.yaml"))
}

/// Files an external render may read, and the folders/files a kustomization names explicitly.
#[derive(Debug, Default)]
struct Closure {
    files: BTreeSet<String>,
    /// Folders named in `resources`/`bases`/`components` (bases of overlays).
    bases: BTreeSet<String>,
    /// Files named anywhere in a kustomization (patches, generators, resources).
    named_files: BTreeSet<String>,
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

fn closure(checkout: &Checkout<'_>, start: &str) -> Closure {
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

/// The units of a folder read the way Flux reads a path without a kustomization: every
/// manifest below it, kustomization folders rendered as a whole, bases of overlays only
/// through their overlays.
fn walk(checkout: &Checkout<'_>, dir: &str, top: bool, notes: &mut Vec<SourceWarning>) -> Vec<Unit> {
    if kustomization_file(checkout, dir).is_some() {
        return vec![Unit::new(UnitKind::Kustomize(dir.to_owned()))];
    }
    if top && has_chart(checkout, dir) {
        return vec![Unit::new(UnitKind::Helm { chart: dir.to_owned(), opts: default_helm(dir, None) })];
    }
    let mut special: HashMap<String, Option<bool>> = HashMap::new(); // dir -> Some(true)=kustomize, Some(false)=chart
    let mut kinds = |d: &str| -> Option<bool> {
        *special.entry(d.to_owned()).or_insert_with(|| {
            if kustomization_file(checkout, d).is_some() {
                Some(true)
            } else if has_chart(checkout, d) {
                Some(false)
            } else {
                None
            }
        })
    };
    let mut roots = BTreeSet::new();
    let mut charts = BTreeSet::new();
    let mut plains = Vec::new();
    for (path, _) in checkout.files_under(dir) {
        let mut outermost = None;
        let mut d = parent_dir(path);
        while d.len() > dir.len() {
            if let Some(k) = kinds(d) {
                outermost = Some((d.to_owned(), k));
            }
            d = parent_dir(d);
        }
        match outermost {
            Some((d, true)) => {
                roots.insert(d);
            }
            Some((d, false)) => {
                charts.insert(d);
            }
            None if is_manifest_name(path) => plains.push(path.clone()),
            None => {}
        }
    }
    let mut bases = BTreeSet::new();
    let mut named = BTreeSet::new();
    for root in &roots {
        let c = closure(checkout, root);
        bases.extend(c.bases.into_iter().filter(|b| b != root));
        named.extend(c.named_files);
    }
    let mut units = Vec::new();
    for p in plains {
        if !named.contains(&p) && !bases.iter().any(|b| within(&p, b)) {
            units.push(Unit::new(UnitKind::Plain(p)));
        }
    }
    for r in roots {
        if !bases.iter().any(|b| within(&r, b)) {
            units.push(Unit::new(UnitKind::Kustomize(r)));
        }
    }
    for c in charts {
        notes.push(
            SourceWarning::note(format!(
                "{CHART_SKIPPED}`{c}` is not rendered: no HelmRelease or Application names it (use renderer: helm with this path to render it)"
            ))
            .at(join(&c, "Chart.yaml"), None, None),
        );
    }
    units
}

fn default_helm(chart: &str, cfg: Option<&RenderConfig>) -> HelmOptions {
    let release = cfg.and_then(|c| c.helm.release_name.clone()).unwrap_or_else(|| match file_name(chart) {
        "" => "release".to_owned(),
        n => n.to_owned(),
    });
    HelmOptions {
        release,
        namespace: cfg.and_then(|c| c.helm.namespace.clone()),
        values_files: cfg.map(|c| c.helm.values_files.clone()).unwrap_or_default(),
        values: None,
    }
}

fn plain_files(checkout: &Checkout<'_>, dir: &str, recurse: bool, notes: &mut Vec<SourceWarning>) -> Vec<Unit> {
    let mut units = Vec::new();
    if checkout.contains_file(dir) {
        return vec![Unit::new(UnitKind::Plain(dir.to_owned()))];
    }
    for (path, _) in checkout.files_under(dir) {
        if !recurse && parent_dir(path) != dir {
            continue;
        }
        if !is_manifest_name(path) {
            continue;
        }
        let name = file_name(path);
        if KUSTOMIZATION_FILES.contains(&name) || name == "Chart.yaml" {
            notes.push(SourceWarning::note("kustomization/chart file skipped by the plain renderer").at(
                path.clone(),
                None,
                None,
            ));
            continue;
        }
        units.push(Unit::new(UnitKind::Plain(path.clone())));
    }
    units
}

fn app_units(checkout: &Checkout<'_>, app: &App, notes: &mut Vec<SourceWarning>) -> Vec<Unit> {
    let mut units = match &app.render {
        AppRender::ArgoDirectory { recurse, helm } => {
            if kustomization_file(checkout, &app.path).is_some() {
                vec![Unit::new(UnitKind::Kustomize(app.path.clone()))]
            } else if has_chart(checkout, &app.path) {
                let opts = helm.clone().unwrap_or_else(|| default_helm(&app.path, None));
                vec![Unit::new(UnitKind::Helm { chart: app.path.clone(), opts })]
            } else {
                plain_files(checkout, &app.path, *recurse, notes)
            }
        }
        AppRender::FluxKustomization => walk(checkout, &app.path, false, notes),
        AppRender::Helm(opts) => vec![Unit::new(UnitKind::Helm { chart: app.path.clone(), opts: opts.clone() })],
    };
    for u in &mut units {
        u.namespace = app.namespace.clone();
    }
    units
}

fn apply_namespace(resource: &mut Resource, rule: &NamespaceRule) {
    let ns = match rule {
        NamespaceRule::Keep => return,
        NamespaceRule::Default(ns) if resource.key.namespace.is_none() => ns,
        NamespaceRule::Default(_) => return,
        NamespaceRule::Override(ns) => ns,
    };
    if is_cluster_scoped(&resource.key.group, &resource.key.kind) {
        return;
    }
    resource.key.namespace = Some(ns.clone());
    if let Some(meta) = resource.object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("namespace".into(), Value::String(ns.clone()));
    }
}

impl Pipeline {
    pub fn new(cfg: RenderConfig, stats: Arc<Stats>) -> Self {
        Pipeline { cfg, cache: Mutex::new(Cache::default()), stats }
    }

    fn limits(&self) -> Limits {
        Limits { max_file_bytes: usize::try_from(self.cfg.max_file_bytes).unwrap_or(usize::MAX), ..Limits::default() }
    }

    fn plan_top(&self, checkout: &Checkout<'_>, sub: &str, notes: &mut Vec<SourceWarning>) -> Vec<Unit> {
        match self.cfg.renderer {
            RendererKind::Auto => {
                if checkout.contains_file(sub) {
                    vec![Unit::new(UnitKind::Plain(sub.to_owned()))]
                } else {
                    walk(checkout, sub, true, notes)
                }
            }
            RendererKind::Plain => plain_files(checkout, sub, true, notes),
            RendererKind::Kustomize => {
                if kustomization_file(checkout, sub).is_some() {
                    vec![Unit::new(UnitKind::Kustomize(sub.to_owned()))]
                } else {
                    notes.push(
                        SourceWarning::error(
                            ErrorKind::InvalidInput,
                            format!("renderer kustomize: no kustomization file in `{}`", display_dir(sub)),
                        )
                        .at(display_dir(sub), None, None),
                    );
                    Vec::new()
                }
            }
            RendererKind::Helm => {
                if has_chart(checkout, sub) {
                    vec![Unit::new(UnitKind::Helm { chart: sub.to_owned(), opts: default_helm(sub, Some(&self.cfg)) })]
                } else {
                    notes.push(
                        SourceWarning::error(
                            ErrorKind::InvalidInput,
                            format!("renderer helm: no Chart.yaml in `{}`", display_dir(sub)),
                        )
                        .at(display_dir(sub), None, None),
                    );
                    Vec::new()
                }
            }
        }
    }

    /// Builds the snapshot of one revision.
    pub fn build(&self, input: &BuildInput<'_>) -> Result<DesiredSnapshot, SourceError> {
        let checkout = input.checkout;
        if !input.sub.is_empty() && !checkout.contains_dir(input.sub) && !checkout.contains_file(input.sub) {
            return Err(SourceError::PathNotFound {
                path: input.sub.to_owned(),
                repository: input.repository.to_owned(),
                revision: input.revision.to_owned(),
            });
        }
        let old = std::mem::take(&mut *self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        let mut fresh = Cache::default();
        let mut warnings = Vec::new();
        let mut pending = self.plan_top(checkout, input.sub, &mut warnings);
        let mut results: Vec<(Unit, Arc<Parsed>)> = Vec::new();
        let mut seen_apps: HashSet<(String, AppRender, NamespaceRule)> = HashSet::new();
        let dir_exists = |p: &str| checkout.contains_dir(p) || (p.is_empty() && !checkout.files.is_empty());
        let ctx = gitops::Context { repo_url: input.repo_url, dir_exists: &dir_exists };
        for depth in 0..=MAX_APP_DEPTH {
            if pending.is_empty() {
                break;
            }
            if depth == MAX_APP_DEPTH {
                warnings.push(SourceWarning::note(format!(
                    "Argo CD / Flux objects nested deeper than {MAX_APP_DEPTH} levels are not followed"
                )));
                break;
            }
            let (plain, mut external): (Vec<Unit>, Vec<Unit>) =
                pending.drain(..).partition(|u| matches!(u.kind, UnitKind::Plain(_)));
            let mut next = Vec::new();
            let new_plain: Vec<(Unit, Arc<Parsed>)> =
                plain.into_iter().map(|u| self.exec_plain(checkout, u, &old, &mut fresh)).collect();
            results.extend(new_plain);
            if self.cfg.follow_gitops_objects {
                self.follow(&ctx, checkout, &mut results, &mut external, &mut next, &mut seen_apps, &mut warnings);
            }
            let rendered = self.exec_external(checkout, external, &old, &mut fresh);
            let before = results.len();
            results.extend(rendered);
            if self.cfg.follow_gitops_objects && results.len() > before {
                let mut none = Vec::new();
                self.follow_from(
                    &ctx,
                    checkout,
                    before,
                    &mut results,
                    &mut none,
                    &mut next,
                    &mut seen_apps,
                    &mut warnings,
                );
            }
            pending = next;
        }
        if self.cfg.keep_between_fetches {
            *self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = fresh;
        } else {
            // Nothing is kept: `results` then holds the only reference to each parse, and
            // `assemble` moves the objects out instead of copying them.
            drop(fresh);
        }
        drop(old);
        // A chart the walk skipped but an application renders is not worth a note.
        let followed: Vec<&String> = seen_apps.iter().map(|(path, _, _)| path).collect();
        warnings.retain(|w| {
            !(w.message.starts_with(CHART_SKIPPED)
                && w.path.as_deref().is_some_and(|p| followed.iter().any(|a| within(parent_dir(p), a))))
        });
        Ok(self.assemble(input, results, warnings))
    }

    #[allow(clippy::too_many_arguments)]
    fn follow(
        &self,
        ctx: &gitops::Context<'_>,
        checkout: &Checkout<'_>,
        results: &mut Vec<(Unit, Arc<Parsed>)>,
        external: &mut Vec<Unit>,
        next: &mut Vec<Unit>,
        seen: &mut HashSet<(String, AppRender, NamespaceRule)>,
        warnings: &mut Vec<SourceWarning>,
    ) {
        self.follow_from(ctx, checkout, 0, results, external, next, seen, warnings);
    }

    /// Discovers applications in `results[from..]`, drops what they cover and queues their units.
    #[allow(clippy::too_many_arguments)]
    fn follow_from(
        &self,
        ctx: &gitops::Context<'_>,
        checkout: &Checkout<'_>,
        from: usize,
        results: &mut Vec<(Unit, Arc<Parsed>)>,
        external: &mut Vec<Unit>,
        next: &mut Vec<Unit>,
        seen: &mut HashSet<(String, AppRender, NamespaceRule)>,
        warnings: &mut Vec<SourceWarning>,
    ) {
        let resources: Vec<&Resource> = results[from..].iter().flat_map(|(_, p)| p.resources.iter()).collect();
        let (apps, notes) = gitops::discover(&resources, ctx);
        for n in notes {
            if !warnings.contains(&n) {
                warnings.push(n);
            }
        }
        for app in apps {
            if !seen.insert((app.path.clone(), app.render.clone(), app.namespace.clone())) {
                continue;
            }
            tracing::debug!(origin = %app.origin, path = %app.path, "following a GitOps application");
            let covered = |u: &Unit| within(u.root(), &app.path) && u.root() != app.declared_in;
            results.retain(|(u, _)| !covered(u));
            external.retain(|u| !covered(u));
            next.retain(|u| !covered(u));
            next.extend(app_units(checkout, &app, warnings));
        }
    }

    fn exec_plain(&self, checkout: &Checkout<'_>, unit: Unit, old: &Cache, fresh: &mut Cache) -> (Unit, Arc<Parsed>) {
        let UnitKind::Plain(path) = &unit.kind else {
            return (unit, Arc::new(Parsed::default()));
        };
        let Some(entry) = checkout.files.get(path) else {
            return (unit, Arc::new(Parsed::default()));
        };
        let key = (path.clone(), entry.id.clone());
        if let Some(p) = fresh.files.get(&key).or_else(|| old.files.get(&key)) {
            Stats::inc(&self.stats.file_cache_hits);
            let p = Arc::clone(p);
            fresh.files.insert(key, Arc::clone(&p));
            return (unit, p);
        }
        Stats::inc(&self.stats.files_parsed);
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
                        let m = parse_manifests_with(&text, path, self.limits());
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
        let parsed = Arc::new(parsed);
        fresh.files.insert(key, Arc::clone(&parsed));
        (unit, parsed)
    }

    /// The cache key of an external render: what it renders, with which options and program,
    /// and the content ids of every file it may read.
    fn render_key(&self, checkout: &Checkout<'_>, unit: &Unit) -> String {
        let mut h = Sha256::new();
        h.update(format!("{:?}\n", unit.kind).as_bytes());
        h.update(format!("{:?}\n{:?}\n", self.cfg.kustomize_binary, self.cfg.helm.binary).as_bytes());
        let mut files = closure(checkout, unit.root()).files;
        if let UnitKind::Helm { opts, .. } = &unit.kind {
            files.extend(opts.values_files.iter().cloned());
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

    fn exec_external(
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
            if let Some(p) = fresh.renders.get(&key).or_else(|| old.renders.get(&key)) {
                Stats::inc(&self.stats.render_cache_hits);
                let p = Arc::clone(p);
                fresh.renders.insert(key, Arc::clone(&p));
                out.push(Some((unit, p)));
            } else {
                let config_file = match &unit.kind {
                    UnitKind::Kustomize(dir) => {
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
                let parsed = Arc::new(parsed);
                if ok {
                    // Failures are not cached: a missing program may be installed before the next commit.
                    fresh.renders.insert(key, Arc::clone(&parsed));
                }
                out[slot] = Some((unit, parsed));
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
            UnitKind::Helm { chart, opts } => {
                let values: Option<Value> = opts.values.as_deref().and_then(|v| serde_json::from_str(v).ok());
                let job = render::HelmJob {
                    release: &opts.release,
                    chart_dir: root.join(chart),
                    namespace: opts.namespace.as_deref(),
                    values_files: opts.values_files.iter().map(|f| root.join(f)).collect(),
                    inline_values: values.as_ref(),
                };
                match render::helm_template(&self.cfg, &job) {
                    Ok(out) => {
                        let m = parse_manifests_with(&out, config_file, self.limits());
                        (Parsed { resources: m.resources, warnings: m.warnings }, true)
                    }
                    Err(e) => {
                        let kind =
                            if e.contains("not found") { ErrorKind::Unsupported } else { ErrorKind::InvalidInput };
                        (failure(unit, kind, format!("helm template of `{}` failed: {e}", display_dir(chart))), false)
                    }
                }
            }
        }
    }

    fn assemble(
        &self,
        input: &BuildInput<'_>,
        results: Vec<(Unit, Arc<Parsed>)>,
        mut warnings: Vec<SourceWarning>,
    ) -> DesiredSnapshot {
        let mut resources = Vec::new();
        let mut first_seen: HashMap<drift_core::ResourceKey, (String, usize)> = HashMap::new();
        for (unit, parsed) in results {
            let (parsed_resources, parsed_warnings) = match Arc::try_unwrap(parsed) {
                Ok(p) => (p.resources, p.warnings),
                Err(shared) => (shared.resources.clone(), shared.warnings.clone()),
            };
            warnings.extend(parsed_warnings);
            for mut r in parsed_resources {
                apply_namespace(&mut r, &unit.namespace);
                r.provenance.repository = Some(input.repository.to_owned());
                r.provenance.revision = Some(input.revision.to_owned());
                let here = r.provenance.path.clone().unwrap_or_default();
                if let Some((first, index)) = first_seen.get(&r.key) {
                    // The same object twice: harmless when identical, a conflict otherwise.
                    let warning = if resources.get(*index).is_some_and(|f: &Resource| f.object == r.object) {
                        SourceWarning::note(format!("{} is also defined, identically, in {first}", r.key))
                    } else {
                        SourceWarning::error(
                            ErrorKind::Conflict,
                            format!("{} is also defined, differently, in {first}; this copy is ignored", r.key),
                        )
                    };
                    warnings.push(warning.at(here, r.provenance.document, None));
                    continue;
                }
                first_seen.insert(r.key.clone(), (here, resources.len()));
                resources.push(r);
            }
        }
        DesiredSnapshot {
            repository: input.repository.to_owned(),
            revision: Some(input.revision.to_owned()),
            resources,
            warnings,
        }
    }
}

fn unit_root(kind: &UnitKind) -> &str {
    match kind {
        UnitKind::Plain(p) | UnitKind::Kustomize(p) => p,
        UnitKind::Helm { chart, .. } => chart,
    }
}

fn display_dir(dir: &str) -> &str {
    if dir.is_empty() { "." } else { dir }
}

fn failure(unit: &Unit, kind: ErrorKind, message: String) -> Parsed {
    let path = match &unit.kind {
        UnitKind::Plain(p) => p.clone(),
        UnitKind::Kustomize(d) => d.clone(),
        UnitKind::Helm { chart, .. } => chart.clone(),
    };
    Parsed {
        resources: Vec::new(),
        warnings: vec![SourceWarning::error(kind, message).at(display_dir(&path), None, None)],
    }
}
