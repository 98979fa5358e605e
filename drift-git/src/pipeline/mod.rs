//! From the files of one revision to a [`DesiredSnapshot`], one module per step:
//!
//! - `plan`: what to render (plain files, Kustomize folders, Helm charts, applications named
//!   by Argo CD / Flux objects);
//! - `closure`: what a Kustomize folder or a chart may read (its cache key, its bases);
//! - `exec`: parsing and rendering, with per-file and per-application caches;
//! - `assemble`: objects with their provenance, and objects defined twice;
//! - `stats`: the counters of a source.
//!
//! This module holds the caches and the loop that follows applications (an app of apps) up to
//! a fixed depth. See `docs/sources.md`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use drift_manifest::Limits;
use drift_model::{DesiredSnapshot, Resource, ResourceKey, SourceWarning};

use crate::config::RenderConfig;
use crate::error::SourceError;
use crate::gitops::{self, AppRender, HelmOptions, NamespaceRule};
use crate::tree::{Checkout, parent_dir};

mod assemble;
mod closure;
mod exec;
mod plan;
mod stats;

use plan::{CHART_SKIPPED, Unit, UnitKind, app_units, plan_top, within};
pub use stats::SourceStats;
pub(crate) use stats::Stats;

/// The unit an object comes from: a plain file, a Kustomize folder, or a Helm chart with the
/// options it is rendered with (repository-relative paths).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Origin {
    Plain(String),
    Kustomize(String),
    Helm { chart: String, opts: HelmOptions },
}

/// An application already followed: its folder, how it is rendered, its namespace rule, its
/// Flux post-build (two Kustomizations of one folder with other variables are two) and whether
/// it was followed for its Argo CD objects only (an Application going to another cluster).
type AppSeen = (String, AppRender, NamespaceRule, Option<Arc<crate::flux::PostBuild>>, bool);

/// How deep Argo CD / Flux objects are followed (an app of apps of apps).
const MAX_APP_DEPTH: usize = 3;

/// Objects and problems of one file or one rendered application, before provenance.
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    resources: Vec<Resource>,
    warnings: Vec<SourceWarning>,
}

/// What the caches keep of a parse between fetches: its objects compact
/// ([`drift_model::CompactResource`], about a twentieth of a tree), expanded again on a hit.
#[derive(Debug, Default)]
pub(crate) struct Kept {
    resources: Vec<drift_model::CompactResource>,
    warnings: Vec<SourceWarning>,
}

impl Kept {
    fn of(p: &Parsed) -> Self {
        Kept {
            resources: p.resources.iter().map(drift_model::CompactResource::new).collect(),
            warnings: p.warnings.clone(),
        }
    }

    fn expand(&self) -> Parsed {
        Parsed {
            resources: self.resources.iter().map(drift_model::CompactResource::expand).collect(),
            warnings: self.warnings.clone(),
        }
    }
}

/// The parses of one fetch, by file (path and content id) and by render key. Filled only when
/// the pipeline keeps them between fetches.
#[derive(Debug, Default)]
struct Cache {
    files: HashMap<(String, String), Arc<Kept>>,
    renders: HashMap<String, Arc<Kept>>,
}

/// One revision to turn into a snapshot.
pub(crate) struct BuildInput<'a> {
    pub checkout: &'a Checkout<'a>,
    /// Name of the repository in reports and provenance.
    pub repository: &'a str,
    /// Normalised URL, for matching Argo CD `repoURL`s (`None`: a local folder).
    pub repo_url: Option<&'a str>,
    /// The branch, tag or commit the source reads (`None`: a local folder as it is on disk).
    pub reference: Option<&'a str>,
    /// Reads other revisions of the repository (git sources), for Argo CD sources that track one.
    pub other_revision: Option<&'a gitops::OtherRevision<'a>>,
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
    /// Opens the SOPS-encrypted plain files, when keys were given (set once, before the first fetch).
    sops: std::sync::OnceLock<Arc<dyn drift_model::sops::SopsOpener>>,
    /// Reads the ConfigMaps and Secrets Flux objects name that are not in Git (set once).
    cluster: std::sync::OnceLock<Arc<dyn drift_model::lookup::ObjectLookup>>,
    /// With several clusters, the one this source reads for: the objects of Argo CD
    /// Applications going to another cluster are not this cluster's (set once).
    targets: std::sync::OnceLock<Arc<gitops::ClusterTargets>>,
    /// Whether the last build read beyond its revision (the cluster, or another revision).
    consulted: std::sync::atomic::AtomicBool,
}

/// What `app` renders is no longer read otherwise: the walk's reading of its folder, or an
/// application's of a folder around it (an app of apps); another application of the same folder
/// (an environment of one chart) stays. Also for an application going to another cluster, whose
/// folder is then read here through it only, for the Argo CD objects it renders.
fn drop_covered(
    app: &gitops::App,
    results: &mut Vec<(Unit, Arc<Parsed>)>,
    external: &mut Vec<Unit>,
    next: &mut Vec<Unit>,
) {
    let covered = |u: &Unit| {
        within(u.root(), &app.path) && u.root() != app.declared_in && u.app.as_deref() != Some(app.path.as_str())
    };
    results.retain(|(u, _)| !covered(u));
    external.retain(|u| !covered(u));
    next.retain(|u| !covered(u));
}

impl Pipeline {
    pub fn new(cfg: RenderConfig, stats: Arc<Stats>) -> Self {
        Pipeline {
            cfg,
            cache: Mutex::new(Cache::default()),
            stats,
            sops: std::sync::OnceLock::new(),
            cluster: std::sync::OnceLock::new(),
            targets: std::sync::OnceLock::new(),
            consulted: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Reads Flux's `substituteFrom` and `valuesFrom` sources that are not in Git from the
    /// cluster with `lookup` from now on (the first call wins).
    pub fn set_cluster(&self, lookup: Arc<dyn drift_model::lookup::ObjectLookup>) {
        let _ = self.cluster.set(lookup);
    }

    /// From now on, keeps only what goes to `targets.this`: the objects of the Argo CD
    /// Applications whose destination is that cluster (the others are rendered for the child
    /// Applications they hold only), and the Argo CD objects written in the repository when it
    /// is the home cluster (the first call wins).
    pub fn set_targets(&self, targets: Arc<gitops::ClusterTargets>) {
        let _ = self.targets.set(targets);
    }

    /// Whether the builds since the last call read the cluster (their snapshot then depends on
    /// more than the revision and is not kept).
    pub fn read_beyond_the_revision(&self) -> bool {
        self.consulted.swap(false, std::sync::atomic::Ordering::Relaxed)
    }

    fn cluster_read(&self) -> crate::cluster::ClusterRead<'_> {
        crate::cluster::ClusterRead { lookup: self.cluster.get().map(|l| l.as_ref()), consulted: &self.consulted }
    }

    /// Opens SOPS-encrypted plain files with `opener` from now on (the first call wins).
    pub fn set_sops(&self, opener: Arc<dyn drift_model::sops::SopsOpener>) {
        let _ = self.sops.set(opener);
    }

    fn limits(&self) -> Limits {
        Limits { max_file_bytes: usize::try_from(self.cfg.max_file_bytes).unwrap_or(usize::MAX), ..Limits::default() }
    }

    /// Builds the snapshot of one revision.
    pub fn build(&self, input: &BuildInput<'_>) -> Result<DesiredSnapshot, SourceError> {
        let (results, warnings) = self.placed(input)?;
        Ok(assemble::assemble(input.repository, input.revision, results, warnings, self.cluster_read()))
    }

    /// Where the object `key` of one revision comes from: the unit that renders it (the first
    /// one, as in the snapshot) and the object as rendered, with its application's namespace.
    /// When no unit renders it, the errors of the revision (a failed render, a broken file)
    /// say why.
    pub fn locate(
        &self,
        input: &BuildInput<'_>,
        key: &ResourceKey,
    ) -> Result<Result<(Origin, Resource), Vec<SourceWarning>>, SourceError> {
        let (results, mut warnings) = self.placed(input)?;
        for (unit, parsed) in results {
            warnings.extend(parsed.warnings.iter().cloned());
            for r in &parsed.resources {
                let mut r = r.clone();
                assemble::apply_namespace(&mut r, &unit.namespace);
                if &r.key == key {
                    let origin = match unit.kind {
                        UnitKind::Plain(p) => Origin::Plain(p),
                        UnitKind::Kustomize(d) | UnitKind::Overlay { dir: d, .. } => Origin::Kustomize(d),
                        UnitKind::Helm { chart, opts } | UnitKind::RemoteHelm { root: chart, opts, .. } => {
                            Origin::Helm { chart, opts }
                        }
                    };
                    return Ok(Ok((origin, r)));
                }
            }
        }
        Ok(Err(warnings.into_iter().filter(|w| w.fatal).collect()))
    }

    /// [`Self::run`], keeping of each unit what goes to this cluster when there are several
    /// (docs/sources.md, "Several clusters"): nothing of a unit rendered for another cluster's
    /// Application; of the units no Application names (the repository's own files), the Argo
    /// CD Applications and ApplicationSets only on the home cluster, where Argo CD runs. When
    /// the repository targets no home cluster, those are compared with no cluster, and the
    /// source that reports says so once.
    #[allow(clippy::type_complexity)]
    fn placed(&self, input: &BuildInput<'_>) -> Result<(Vec<(Unit, Arc<Parsed>)>, Vec<SourceWarning>), SourceError> {
        let (mut results, mut warnings) = self.run(input)?;
        let Some(targets) = self.targets.get() else { return Ok((results, warnings)) };
        let home = targets.home();
        let at_home = home == Some(targets.this.as_str());
        let mut homeless: Vec<&Resource> = Vec::new();
        let mut kept: Vec<Option<Parsed>> = Vec::with_capacity(results.len());
        for (unit, parsed) in &results {
            if let Some(why) = &unit.elsewhere {
                kept.push(Some(Parsed {
                    resources: Vec::new(),
                    warnings: parsed.warnings.iter().map(|w| explained(w.clone(), why)).collect(),
                }));
                continue;
            }
            let keep = |r: &Resource| at_home || unit.app.is_some() || !gitops::is_argo_object(r);
            if parsed.resources.iter().all(keep) {
                kept.push(None);
                continue;
            }
            if !at_home {
                homeless.extend(parsed.resources.iter().filter(|r| unit.app.is_none() && gitops::is_argo_object(r)));
            }
            kept.push(Some(Parsed {
                resources: parsed.resources.iter().filter(|r| keep(r)).cloned().collect(),
                warnings: parsed.warnings.clone(),
            }));
        }
        if targets.report
            && let Some(first) = homeless.first()
            && !home.is_some_and(|h| targets.targeted.iter().any(|t| t == h))
        {
            let why = match home {
                Some(h) => format!("the home cluster `{h}` is not one this repository targets (its `clusters:`)"),
                None => {
                    "no cluster of `clusters:` is the home cluster (`in_cluster: true`, or the one `live:` reaches)"
                        .to_owned()
                }
            };
            let message = format!(
                "{} Argo CD Application/ApplicationSet object(s) of the repository, such as {}, are compared with no cluster: they live in the cluster Argo CD runs in, and {why}",
                homeless.len(),
                gitops::origin_of(first),
            );
            let w = SourceWarning::note(message).at(first.provenance.path.clone().unwrap_or_default(), None, None);
            tracing::warn!("{}", w.message);
            warnings.push(w);
        }
        for ((_, parsed), kept) in results.iter_mut().zip(kept) {
            if let Some(k) = kept {
                *parsed = Arc::new(k);
            }
        }
        Ok((results, warnings))
    }

    /// Renders every unit of one revision, following applications.
    #[allow(clippy::type_complexity)]
    fn run(&self, input: &BuildInput<'_>) -> Result<(Vec<(Unit, Arc<Parsed>)>, Vec<SourceWarning>), SourceError> {
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
        let mut pending = plan_top(&self.cfg, checkout, input.sub, &mut warnings);
        let mut results: Vec<(Unit, Arc<Parsed>)> = Vec::new();
        let mut seen_apps: HashSet<AppSeen> = HashSet::new();
        let dir_exists = |p: &str| checkout.contains_dir(p) || (p.is_empty() && !checkout.files.is_empty());
        let files = || checkout.files.keys().cloned().collect::<Vec<String>>();
        let read = |p: &str| checkout.read(p).ok().and_then(|b| String::from_utf8(b).ok());
        let ctx = gitops::Context {
            repo_url: input.repo_url,
            reference: input.reference,
            other_revision: input.other_revision,
            dir_exists: &dir_exists,
            files: &files,
            read: &read,
            cluster: self.cluster_read(),
        };
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
        // `fresh` is filled only when the parses are kept; `results` holds the only reference
        // to each parse, and `assemble` moves the objects out instead of copying them.
        *self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = fresh;
        drop(old);
        // A chart the walk skipped but an application renders is not worth a note.
        let followed: Vec<&String> = seen_apps.iter().map(|(path, ..)| path).collect();
        warnings.retain(|w| {
            !(w.message.starts_with(CHART_SKIPPED)
                && w.path.as_deref().is_some_and(|p| followed.iter().any(|a| within(parent_dir(p), a))))
        });
        Ok((results, warnings))
    }

    #[allow(clippy::too_many_arguments)]
    fn follow(
        &self,
        ctx: &gitops::Context<'_>,
        checkout: &Checkout<'_>,
        results: &mut Vec<(Unit, Arc<Parsed>)>,
        external: &mut Vec<Unit>,
        next: &mut Vec<Unit>,
        seen: &mut HashSet<AppSeen>,
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
        seen: &mut HashSet<AppSeen>,
        warnings: &mut Vec<SourceWarning>,
    ) {
        // GitOps objects that a Flux Kustomization renders are found as it applies them:
        // substituted (a HelmRelease's values, a nested Kustomization's path). The results keep
        // their objects as rendered; `assemble` substitutes them once.
        let substituted: Vec<Resource> = if results[from..].iter().any(|(u, _)| u.post_build.is_some()) {
            // Not those of an Application going to another cluster (its Argo CD objects only).
            let sources: Vec<Resource> = results
                .iter()
                .filter(|(u, _)| u.elsewhere.is_none())
                .flat_map(|(_, p)| p.resources.iter())
                .filter(|r| r.key.group.is_empty() && (r.key.kind == "ConfigMap" || r.key.kind == "Secret"))
                .cloned()
                .collect();
            let mut out = Vec::new();
            for (unit, parsed) in &results[from..] {
                let Some(post) = &unit.post_build else { continue };
                let mut copies: Vec<Resource> =
                    parsed.resources.iter().filter(|r| gitops::is_gitops_object(r)).cloned().collect();
                let mut objects: Vec<&mut Resource> = copies.iter_mut().collect();
                // Its notes are given when the objects themselves are substituted.
                crate::flux::substitute(post, &mut objects, &sources, self.cluster_read(), &mut Vec::new());
                out.extend(copies);
            }
            out
        } else {
            Vec::new()
        };
        // A unit of an Application going to another cluster is followed for its Argo CD
        // objects only: a Flux object it renders applies to that cluster, not to this one. The
        // Argo CD objects of a unit whose Application goes to a cluster Argo CD does not run in
        // are plain objects there, not followed.
        let followed = |u: &Unit, r: &Resource| {
            let argo = gitops::is_argo_object(r);
            (u.elsewhere.is_none() || argo) && (u.live_apps || !argo)
        };
        let resources: Vec<&Resource> = results[from..]
            .iter()
            .filter(|(u, _)| u.post_build.is_none())
            .flat_map(|(u, p)| p.resources.iter().filter(|r| followed(u, r)))
            .chain(&substituted)
            .chain(
                results[from..]
                    .iter()
                    .filter(|(u, _)| u.post_build.is_some())
                    .flat_map(|(u, p)| p.resources.iter().map(move |r| (u, r)))
                    .filter(|(u, r)| !gitops::is_gitops_object(r) && followed(u, r))
                    .map(|(_, r)| r),
            )
            .collect();
        // A Flux object applies its objects where it is: its units' Argo CD objects are live
        // as those of the unit it is in (files of units whose Argo CD objects are not).
        let dead: HashSet<&str> = results[from..]
            .iter()
            .filter(|(u, _)| !u.live_apps)
            .flat_map(|(_, p)| p.resources.iter().filter_map(|r| r.provenance.path.as_deref()))
            .collect();
        let (apps, notes) = gitops::discover(&resources, ctx);
        for n in notes {
            if !warnings.contains(&n) {
                warnings.push(n);
            }
        }
        let dead: HashSet<String> = dead.into_iter().map(str::to_owned).collect();
        for app in apps {
            // With several clusters, an Argo CD Application's objects are compared with the
            // cluster its destination names only; elsewhere its folder is not read as plain
            // files either. An Application going to the home cluster (where Argo CD runs) is
            // still rendered by the other clusters' sources for the child Applications it holds
            // (an app of apps whose root goes to another cluster than its children); one going
            // to another cluster is not rendered here at all: its child Applications are plain
            // objects of that cluster, and that cluster's source reports its problems.
            let mut elsewhere: Option<Arc<str>> = None;
            let mut live_apps = !dead.contains(&app.declared_in);
            if let (Some(targets), Some(destination)) = (self.targets.get(), &app.destination) {
                live_apps = targets.goes_home(destination);
                let why = match targets.place(destination) {
                    gitops::Placement::Here => None,
                    gitops::Placement::Elsewhere => Some(None),
                    gitops::Placement::Nowhere(why) => Some(Some(why)),
                };
                if let Some(nowhere) = why {
                    if let Some(why) = nowhere
                        && targets.report
                    {
                        let message = format!(
                            "{}: destination {destination}: {why}; its objects are compared with no cluster",
                            app.origin
                        );
                        let w = SourceWarning::note(message).at(app.declared_in.clone(), None, None);
                        if !warnings.contains(&w) {
                            tracing::warn!(application = %app.origin, destination = %destination, "{}", w.message);
                            warnings.push(w);
                        }
                    }
                    if !live_apps {
                        drop_covered(&app, results, external, next);
                        continue;
                    }
                    elsewhere = Some(Arc::from(format!(
                        "{} goes to the home cluster `{}`, not to `{}`: it is rendered here only for the child Applications it may hold, which may go to this cluster; until it renders, this cluster's desired state may lack them",
                        app.origin,
                        targets.home().unwrap_or("?"),
                        targets.this,
                    )));
                }
            }
            if !seen.insert((
                app.path.clone(),
                app.render.clone(),
                app.namespace.clone(),
                app.post_build.clone(),
                elsewhere.is_some(),
            )) {
                continue;
            }
            tracing::debug!(origin = %app.origin, path = %app.path, elsewhere = elsewhere.is_some(), "following a GitOps application");
            drop_covered(&app, results, external, next);
            // Problems of an Application rendered here for its children only say so.
            let mut own = Vec::new();
            let mark = |u: &mut Unit| {
                u.elsewhere.clone_from(&elsewhere);
                u.live_apps = live_apps;
            };
            match (&app.revision, ctx.other_revision) {
                (Some(revision), Some(other)) => {
                    let rendered = self.render_at(other, revision, &app, &mark, &mut own);
                    results.extend(rendered);
                }
                _ => {
                    let mut units = app_units(checkout, &app, &mut own);
                    units.iter_mut().for_each(mark);
                    next.extend(units);
                }
            }
            for w in own {
                let w = match &elsewhere {
                    Some(why) => explained(w, why),
                    None => w,
                };
                if !warnings.contains(&w) {
                    warnings.push(w);
                }
            }
        }
    }
}

/// A warning of a unit rendered for another cluster's Application (its child Applications
/// only), prefixed with `why`.
fn explained(mut w: SourceWarning, why: &str) -> SourceWarning {
    w.message = format!("{why}: {}", w.message);
    w
}

impl Pipeline {
    /// Renders `app` from another revision of the repository, read by `other`: its units run
    /// there at once, marked with that commit (their objects' provenance); applications they
    /// hold are not followed further. The snapshot is then not kept between fetches (a branch
    /// may move without the revision being read changing). A revision that cannot be read is a
    /// note at the file that declares the application, and nothing is rendered for it.
    fn render_at(
        &self,
        other: &gitops::OtherRevision<'_>,
        revision: &str,
        app: &gitops::App,
        mark: &dyn Fn(&mut Unit),
        warnings: &mut Vec<SourceWarning>,
    ) -> Vec<(Unit, Arc<Parsed>)> {
        self.consulted.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut produced = Vec::new();
        let mut notes = Vec::new();
        let read = other(revision, &mut |checkout, commit| {
            let units: Vec<Unit> = app_units(checkout, app, &mut notes)
                .into_iter()
                .map(|mut u| {
                    u.revision = Some(commit.to_owned());
                    mark(&mut u);
                    u
                })
                .collect();
            let (plain, external): (Vec<Unit>, Vec<Unit>) =
                units.into_iter().partition(|u| matches!(u.kind, UnitKind::Plain(_)));
            let (old, mut scratch) = (Cache::default(), Cache::default());
            produced.extend(plain.into_iter().map(|u| self.exec_plain(checkout, u, &old, &mut scratch)));
            produced.extend(self.exec_external(checkout, external, &old, &mut scratch));
        });
        warnings.extend(notes);
        if let Err(e) = read {
            warnings.push(
                SourceWarning::note(format!(
                    "{}: revision `{revision}` cannot be read ({e}); its source is not rendered",
                    app.origin
                ))
                .at(app.declared_in.clone(), None, None),
            );
        }
        produced
    }
}

/// An in-memory tree for the unit tests of the pipeline's steps.
#[cfg(test)]
pub(crate) mod testing {
    use std::collections::BTreeMap;

    use crate::error::SourceError;
    use crate::tree::{BlobReader, Checkout, FileEntry};

    /// Files by repository-relative path.
    #[derive(Debug, Default)]
    pub struct Tree(pub BTreeMap<String, Vec<u8>>);

    impl Tree {
        pub fn new(files: &[(&str, &str)]) -> Tree {
            Tree(files.iter().map(|(p, c)| ((*p).to_owned(), c.as_bytes().to_vec())).collect())
        }

        /// A checkout of the tree; the content id is the content itself, so a changed file
        /// has a new id.
        pub fn checkout(&self) -> Checkout<'_> {
            let files = self
                .0
                .iter()
                .map(|(p, c)| {
                    (p.clone(), FileEntry { id: String::from_utf8_lossy(c).into_owned(), size: c.len() as u64 })
                })
                .collect();
            Checkout::in_store(files, self, std::env::temp_dir().join("drift-pipeline-unit-tests-never-written"))
        }
    }

    impl BlobReader for Tree {
        fn read(&self, path: &str) -> Result<Vec<u8>, SourceError> {
            self.0
                .get(path)
                .cloned()
                .ok_or_else(|| SourceError::io(path.to_owned(), std::io::ErrorKind::NotFound.into()))
        }
    }
}

#[cfg(test)]
mod tests {
    use drift_model::ErrorKind;

    use super::testing::Tree;
    use super::*;

    fn build(tree: &Tree, sub: &str) -> Result<DesiredSnapshot, SourceError> {
        let pipeline = Pipeline::new(RenderConfig::default(), Arc::default());
        let checkout = tree.checkout();
        pipeline.build(&BuildInput {
            checkout: &checkout,
            repository: "repo",
            repo_url: None,
            reference: None,
            other_revision: None,
            revision: "abc",
            sub,
        })
    }

    #[test]
    fn a_missing_sub_folder_is_an_error_not_an_empty_snapshot() {
        let tree = Tree::new(&[("apps/a.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")]);
        let err = build(&tree, "missing").unwrap_err();
        assert!(matches!(err, SourceError::PathNotFound { ref path, .. } if path == "missing"), "{err:?}");
    }

    #[test]
    fn plain_files_become_objects_with_their_provenance_and_broken_ones_warnings() {
        let tree = Tree::new(&[
            ("apps/a.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: shop}\n"),
            ("apps/broken.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [\n"),
            ("other/b.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n"),
        ]);
        let snap = build(&tree, "apps").unwrap();
        let keys: Vec<String> = snap.resources.iter().map(|r| r.key.to_string()).collect();
        assert_eq!(keys.len(), 1, "only the sub-folder is read: {keys:?}");
        let a = &snap.resources[0];
        assert_eq!(a.provenance.path.as_deref(), Some("apps/a.yaml"));
        assert_eq!(a.provenance.repository.as_deref(), Some("repo"));
        assert_eq!(a.provenance.revision.as_deref(), Some("abc"));
        assert_eq!(snap.revision.as_deref(), Some("abc"));
        let broken: Vec<&SourceWarning> = snap.warnings.iter().filter(|w| w.fatal).collect();
        assert_eq!(broken.len(), 1, "{:?}", snap.warnings);
        assert_eq!(broken[0].path.as_deref(), Some("apps/broken.yaml"));
        assert_eq!(broken[0].kind, ErrorKind::InvalidInput);
    }

    #[test]
    fn locate_names_the_unit_of_an_object_or_the_errors_of_the_revision() {
        let tree = Tree::new(&[
            ("apps/a.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: shop}\n"),
            ("apps/broken.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [\n"),
        ]);
        let pipeline = Pipeline::new(RenderConfig::default(), Arc::default());
        let checkout = tree.checkout();
        let input = BuildInput {
            checkout: &checkout,
            repository: "repo",
            repo_url: None,
            reference: None,
            other_revision: None,
            revision: "1",
            sub: "apps",
        };
        let key = ResourceKey::new("", "ConfigMap", Some("shop"), "a");
        let (origin, object) = pipeline.locate(&input, &key).unwrap().unwrap();
        assert_eq!(origin, Origin::Plain("apps/a.yaml".into()));
        assert_eq!(object.key, key);
        let missing = pipeline.locate(&input, &key.with_namespace(Some("other"))).unwrap().unwrap_err();
        assert_eq!(missing.len(), 1, "{missing:?}");
        assert_eq!(missing[0].path.as_deref(), Some("apps/broken.yaml"));
    }

    #[test]
    fn a_second_build_of_the_same_files_reuses_the_parses() {
        let tree = Tree::new(&[("a.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")]);
        let pipeline = Pipeline::new(RenderConfig::default(), Arc::default());
        let checkout = tree.checkout();
        let input = BuildInput {
            checkout: &checkout,
            repository: "repo",
            repo_url: None,
            reference: None,
            other_revision: None,
            revision: "1",
            sub: "",
        };
        pipeline.build(&input).unwrap();
        pipeline.build(&input).unwrap();
        let stats = pipeline.stats.snapshot();
        assert_eq!((stats.files_parsed, stats.file_cache_hits), (1, 1));
    }

    fn app(name: &str, path: &str, destination: &str) -> String {
        format!(
            "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {{name: {name}, namespace: argocd}}\n\
             spec:\n  source: {{repoURL: https://git.example/r.git, path: {path}}}\n  destination: {destination}\n"
        )
    }

    fn cm_in(name: &str) -> String {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: shop}}\n")
    }

    /// The three clusters of the tests: `east` (named `east-argo` by its Argo CD Secret),
    /// `west` and `home` (the one `https://kubernetes.default.svc` means); the repository
    /// targets every one but `home` unless `targeted` says otherwise.
    fn targets(this: &str, targeted: &[&str], report: bool) -> Arc<gitops::ClusterTargets> {
        let cluster = |name: &str, aliases: &[&str], server: &str, home: bool| gitops::TargetCluster {
            name: name.into(),
            aliases: aliases.iter().map(|a| (*a).to_owned()).collect(),
            server: Some(server.into()),
            home,
        };
        Arc::new(gitops::ClusterTargets {
            clusters: vec![
                cluster("east", &["east-argo"], "https://10.0.0.1:6443", false),
                cluster("west", &[], "http://127.0.0.1:8081", false),
                cluster("home", &[], "https://10.96.0.1:443", true),
            ],
            this: this.into(),
            targeted: targeted.iter().map(|t| (*t).to_owned()).collect(),
            report,
        })
    }

    fn build_for(tree: &Tree, targets: Option<Arc<gitops::ClusterTargets>>) -> DesiredSnapshot {
        build_sub(tree, "", targets)
    }

    fn build_sub(tree: &Tree, sub: &str, targets: Option<Arc<gitops::ClusterTargets>>) -> DesiredSnapshot {
        let pipeline = Pipeline::new(RenderConfig::default(), Arc::default());
        if let Some(t) = targets {
            pipeline.set_targets(t);
        }
        let checkout = tree.checkout();
        pipeline
            .build(&BuildInput {
                checkout: &checkout,
                repository: "repo",
                repo_url: Some("git.example/r"),
                reference: None,
                other_revision: None,
                revision: "abc",
                sub,
            })
            .unwrap()
    }

    /// The Argo CD objects of a snapshot, as `Kind/name`.
    fn argo(snap: &DesiredSnapshot) -> Vec<String> {
        let mut n: Vec<String> = snap
            .resources
            .iter()
            .filter(|r| gitops::is_argo_object(r))
            .map(|r| format!("{}/{}", r.key.kind, r.key.name))
            .collect();
        n.sort();
        n
    }

    fn homeless_notes(snap: &DesiredSnapshot) -> Vec<String> {
        snap.warnings.iter().filter(|w| w.message.contains("Argo CD runs in")).map(|w| w.message.clone()).collect()
    }

    fn names(snap: &DesiredSnapshot) -> Vec<String> {
        let mut n: Vec<String> =
            snap.resources.iter().filter(|r| r.key.kind == "ConfigMap").map(|r| r.key.name.clone()).collect();
        n.sort();
        n
    }

    fn destination_notes(snap: &DesiredSnapshot) -> Vec<String> {
        snap.warnings.iter().filter(|w| w.message.contains("destination")).map(|w| w.message.clone()).collect()
    }

    #[test]
    fn an_argo_application_is_rendered_by_the_source_of_the_cluster_its_destination_names_only() {
        let e = cm_in("e");
        let w = cm_in("w");
        let h = cm_in("h");
        let lost = cm_in("lost");
        let to_east = app("to-east", "east", "{name: east-argo, namespace: shop}");
        let to_west = app("to-west", "west", "{server: 'HTTP://127.0.0.1:8081/', namespace: shop}");
        let to_home = app("to-home", "home", "{server: 'https://kubernetes.default.svc', namespace: shop}");
        let to_nowhere = app("to-mars", "mars", "{name: mars, namespace: shop}");
        let tree = Tree::new(&[
            ("argo/east.yaml", &to_east),
            ("argo/west.yaml", &to_west),
            ("argo/home.yaml", &to_home),
            ("argo/mars.yaml", &to_nowhere),
            ("east/cm.yaml", &e),
            ("west/cm.yaml", &w),
            ("home/cm.yaml", &h),
            ("mars/cm.yaml", &lost),
        ]);
        // One cluster: every Application is rendered, as before.
        assert_eq!(names(&build_for(&tree, None)), ["e", "h", "lost", "w"]);
        assert!(destination_notes(&build_for(&tree, None)).is_empty());
        // East (by the name of its Argo CD Secret) reports the Application going nowhere.
        let east = build_for(&tree, Some(targets("east", &["east", "west"], true)));
        assert_eq!(names(&east), ["e"], "a folder of an Application going elsewhere is not read as plain files");
        let notes = destination_notes(&east);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes.iter().any(|n| n.contains("Application argocd/to-mars")
                && n.contains("name `mars`")
                && n.contains("no cluster is named `mars` (east, west, home)")
                && n.contains("compared with no cluster")),
            "{notes:?}"
        );
        assert!(
            notes.iter().any(|n| n.contains("Application argocd/to-home")
                && n.contains("cluster `home`, which this repository does not target")),
            "{notes:?}"
        );
        assert!(east.warnings.iter().all(|w| !w.fatal), "a note, not an error: {:?}", east.warnings);
        // West (by its server URL, normalised) says nothing: the first cluster said it.
        let west = build_for(&tree, Some(targets("west", &["east", "west"], false)));
        assert_eq!(names(&west), ["w"]);
        assert!(destination_notes(&west).is_empty(), "{:?}", west.warnings);
        // Home (`https://kubernetes.default.svc`), when the repository targets it.
        let home = build_for(&tree, Some(targets("home", &["east", "west", "home"], false)));
        assert_eq!(names(&home), ["h"]);
    }

    /// An app of apps across clusters: the root goes to the home cluster and its folder (read
    /// through it only: it is outside the source's folder) holds the Applications of east and
    /// west. Each cluster's source renders the root for those children and compares its own
    /// child's objects; the root's other objects and the Application objects are the home
    /// cluster's only.
    #[test]
    fn children_that_only_a_root_going_elsewhere_renders_are_followed_by_their_clusters() {
        let root = app("root", "apps", "{server: 'https://kubernetes.default.svc', namespace: argocd}");
        let to_east = app("to-east", "east", "{name: east-argo, namespace: shop}");
        let to_west = app("to-west", "west", "{name: west, namespace: shop}");
        let (e, w, r) = (cm_in("e"), cm_in("w"), cm_in("root-cm"));
        let tree = Tree::new(&[
            ("argo/root.yaml", &root),
            ("apps/east.yaml", &to_east),
            ("apps/west.yaml", &to_west),
            ("apps/cm.yaml", &r),
            ("east/cm.yaml", &e),
            ("west/cm.yaml", &w),
        ]);
        let all = ["east", "west", "home"];
        let east = build_sub(&tree, "argo", Some(targets("east", &all, true)));
        assert_eq!(names(&east), ["e"], "east's child, found in the root's rendering: {:?}", east.warnings);
        assert!(argo(&east).is_empty(), "Application objects are the home cluster's: {:?}", argo(&east));
        assert!(destination_notes(&east).is_empty() && homeless_notes(&east).is_empty(), "{:?}", east.warnings);
        let west = build_sub(&tree, "argo", Some(targets("west", &all, false)));
        assert_eq!(names(&west), ["w"]);
        assert!(argo(&west).is_empty());
        let home = build_sub(&tree, "argo", Some(targets("home", &all, false)));
        assert_eq!(names(&home), ["root-cm"], "the root's own objects, not its children's");
        assert_eq!(
            argo(&home),
            ["Application/root", "Application/to-east", "Application/to-west"],
            "the Application objects: the repository's and those the root (going home) renders"
        );
        // With one cluster, as before: everything.
        assert_eq!(names(&build_sub(&tree, "argo", None)), ["e", "root-cm", "w"]);
        assert_eq!(argo(&build_sub(&tree, "argo", None)).len(), 3);
    }

    fn fatal(snap: &DesiredSnapshot) -> Vec<String> {
        snap.warnings.iter().filter(|w| w.fatal).map(|w| w.message.clone()).collect()
    }

    /// A broken file in the folder of an Application going to `west` is west's problem: the
    /// other clusters do not render it (its child Applications would be plain objects of west)
    /// and their scans stay complete. In the folder of a root going to the home cluster, it is
    /// every cluster's problem (the children it may hold are unknown), and says why.
    #[test]
    fn a_broken_render_of_another_clusters_application_is_fatal_only_where_its_children_may_go() {
        let broken = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [unclosed\n";
        let to_west = app("to-west", "west", "{name: west, namespace: shop}");
        let to_east = app("to-east", "east", "{name: east-argo, namespace: shop}");
        let e = cm_in("e");
        let tree = Tree::new(&[
            ("argo/west.yaml", &to_west),
            ("argo/east.yaml", &to_east),
            ("west/bad.yaml", broken),
            ("east/cm.yaml", &e),
        ]);
        let all = ["east", "west", "home"];
        let east = build_for(&tree, Some(targets("east", &all, true)));
        assert_eq!(names(&east), ["e"]);
        assert!(fatal(&east).is_empty(), "west's broken file is not east's: {:?}", east.warnings);
        let west = build_for(&tree, Some(targets("west", &all, false)));
        let errors = fatal(&west);
        assert!(
            !errors.is_empty() && errors.iter().all(|m| !m.contains("rendered here only")),
            "west reports its own file plainly: {errors:?}"
        );
        // A root going home: its broken file may hide east's child.
        let root = app("root", "apps", "{server: 'https://kubernetes.default.svc', namespace: argocd}");
        let tree = Tree::new(&[
            ("argo/root.yaml", &root),
            ("apps/east.yaml", &to_east),
            ("apps/bad.yaml", broken),
            ("east/cm.yaml", &e),
        ]);
        let east = build_for(&tree, Some(targets("east", &all, true)));
        assert_eq!(names(&east), ["e"]);
        let errors = fatal(&east);
        assert!(!errors.is_empty(), "{:?}", east.warnings);
        for m in &errors {
            assert!(
                m.starts_with(
                    "Application argocd/root in argo/root.yaml goes to the home cluster `home`, not to `east`: it is rendered here only for the child Applications it may hold"
                ),
                "{m}"
            );
        }
        let home = build_for(&tree, Some(targets("home", &all, false)));
        assert!(fatal(&home).iter().all(|m| !m.contains("rendered here only")), "{:?}", home.warnings);
    }

    /// A root going to west applies the Application objects it renders to west, where no Argo
    /// CD reconciles them: they are plain objects of west, and their destinations are not
    /// followed (east does not compare the child's objects). The source reads `argo/` only:
    /// the other folders are read through the Applications only.
    #[test]
    fn child_applications_a_root_sends_to_another_cluster_than_argo_cds_are_plain_objects_there() {
        let root = app("root", "apps", "{name: west, namespace: argocd}");
        let child = app("child", "east", "{name: east-argo, namespace: shop}");
        let (e, w) = (cm_in("e"), cm_in("w"));
        let tree = Tree::new(&[
            ("argo/root.yaml", &root),
            ("apps/child.yaml", &child),
            ("apps/cm.yaml", &w),
            ("east/cm.yaml", &e),
        ]);
        let all = ["east", "west", "home"];
        let east = build_sub(&tree, "argo", Some(targets("east", &all, true)));
        assert!(names(&east).is_empty() && argo(&east).is_empty(), "{:?} {:?}", names(&east), argo(&east));
        let west = build_sub(&tree, "argo", Some(targets("west", &all, false)));
        assert_eq!((names(&west), argo(&west)), (vec!["w".to_owned()], vec!["Application/child".to_owned()]));
        let home = build_sub(&tree, "argo", Some(targets("home", &all, false)));
        assert_eq!((names(&home), argo(&home)), (vec![], vec!["Application/root".to_owned()]));
        // With one cluster, as before: everything followed.
        assert_eq!(names(&build_sub(&tree, "argo", None)), ["e", "w"]);
    }

    /// The same through a Flux Kustomization that a root going to west renders: Flux on west
    /// applies the child Application to west, where no Argo CD runs; west keeps it as a plain
    /// object and does not follow it (its destination, which names no cluster, is not looked
    /// at), and east's source never reads it.
    #[test]
    fn child_applications_of_a_flux_kustomization_under_a_root_going_to_west_are_plain_objects_there() {
        let root = app("root", "apps", "{name: west, namespace: argocd}");
        let flux = "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\n\
                    metadata: {name: inner, namespace: flux-system}\n\
                    spec: {path: ./inner, sourceRef: {kind: GitRepository, name: flux-system}}\n";
        let child = app("child", "mars", "{name: mars, namespace: shop}");
        let m = cm_in("m");
        let tree = Tree::new(&[
            ("argo/root.yaml", &root),
            ("apps/flux.yaml", flux),
            ("inner/child.yaml", &child),
            ("mars/cm.yaml", &m),
        ]);
        let all = ["east", "west", "home"];
        let west = build_sub(&tree, "argo", Some(targets("west", &all, true)));
        assert_eq!(argo(&west), ["Application/child"], "{:?}", west.warnings);
        assert!(destination_notes(&west).is_empty(), "the child is not followed: {:?}", west.warnings);
        let east = build_sub(&tree, "argo", Some(targets("east", &all, true)));
        assert!(argo(&east).is_empty() && destination_notes(&east).is_empty(), "{:?}", east.warnings);
        // Applied by a Flux Kustomization of the repository's own files, it is followed.
        let tree = Tree::new(&[("argo/flux.yaml", flux), ("inner/child.yaml", &child), ("mars/cm.yaml", &m)]);
        let west = build_sub(&tree, "argo", Some(targets("west", &all, true)));
        assert_eq!(destination_notes(&west).len(), 1, "{:?}", west.warnings);
    }

    /// One folder, two Applications: `root` goes home (rendered on east for its children only,
    /// its Argo CD objects kept), `shop` goes to east (all its objects). The parses kept for
    /// the next fetch keep the two apart: the one for the children holds only Application
    /// objects, and the one here is never truncated by it, in this build or the next.
    #[test]
    fn a_folder_rendered_here_and_for_the_children_of_a_root_going_home_keeps_all_its_objects_here() {
        let root = app("root", "apps", "{server: 'https://kubernetes.default.svc', namespace: argocd}");
        let shop = app("shop", "apps", "{name: east-argo, namespace: shop}");
        let child = app("child", "east", "{name: east-argo, namespace: shop}");
        let (e, a) = (cm_in("e"), cm_in("apps-cm"));
        let tree = Tree::new(&[
            ("argo/root.yaml", &root),
            ("argo/shop.yaml", &shop),
            ("apps/child.yaml", &child),
            ("apps/cm.yaml", &a),
            ("east/cm.yaml", &e),
        ]);
        let pipeline = Pipeline::new(RenderConfig::default(), Arc::default());
        pipeline.set_targets(targets("east", &["east", "west", "home"], true));
        let checkout = tree.checkout();
        let input = BuildInput {
            checkout: &checkout,
            repository: "repo",
            repo_url: Some("git.example/r"),
            reference: None,
            other_revision: None,
            revision: "abc",
            sub: "",
        };
        for round in 0..2 {
            let east = pipeline.build(&input).unwrap();
            assert_eq!(names(&east), ["apps-cm", "e"], "round {round}: {:?}", east.warnings);
            assert_eq!(argo(&east), ["Application/child"], "shop's own object, plain on east");
            let cache = pipeline.cache.lock().unwrap();
            let kinds = |path: &str| -> Vec<String> {
                let mut k: Vec<String> = cache
                    .files
                    .iter()
                    .filter(|((p, _), _)| p == path)
                    .flat_map(|(_, kept)| kept.expand().resources)
                    .map(|r| r.key.kind)
                    .collect();
                k.sort();
                k
            };
            assert_eq!(kinds("apps/cm.yaml"), ["ConfigMap"], "the folder read whole, for shop");
            assert!(kinds("apps/cm.yaml\0argo-only").is_empty(), "read for root's children: no ConfigMap kept");
            assert_eq!(kinds("apps/child.yaml\0argo-only"), ["Application"]);
        }
    }

    /// The Argo CD objects written in the repository live where Argo CD runs: with a home
    /// cluster the repository does not target (or none), they are compared with no cluster,
    /// and the reporting source says so once.
    #[test]
    fn argo_objects_of_the_repository_are_compared_with_the_home_cluster_only() {
        let to_east = app("to-east", "east", "{name: east, namespace: shop}");
        let set = "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata: {name: none, namespace: argocd}\n\
                   spec:\n  generators: []\n  template: {metadata: {name: x}, spec: {}}\n";
        let e = cm_in("e");
        let tree = Tree::new(&[("argo/east.yaml", &to_east), ("argo/set.yaml", set), ("east/cm.yaml", &e)]);
        let home = build_for(&tree, Some(targets("home", &["east", "home"], false)));
        assert_eq!(argo(&home), ["Application/to-east", "ApplicationSet/none"]);
        assert!(names(&home).is_empty());
        let east = build_for(&tree, Some(targets("east", &["east", "home"], true)));
        assert_eq!((names(&east), argo(&east)), (vec!["e".to_owned()], vec![]));
        assert!(homeless_notes(&east).is_empty(), "the home cluster compares them: {:?}", east.warnings);
        // The home cluster not targeted: compared nowhere, said by the reporting source only.
        let east = build_for(&tree, Some(targets("east", &["east", "west"], true)));
        assert!(argo(&east).is_empty());
        let notes = homeless_notes(&east);
        assert_eq!(notes.len(), 1, "{:?}", east.warnings);
        assert!(
            notes[0].starts_with("2 Argo CD Application/ApplicationSet object(s)")
                && notes[0].contains("the home cluster `home` is not one this repository targets"),
            "{notes:?}"
        );
        let west = build_for(&tree, Some(targets("west", &["east", "west"], false)));
        assert!(argo(&west).is_empty() && homeless_notes(&west).is_empty(), "{:?}", west.warnings);
        // No home cluster at all.
        let mut t = (*targets("east", &["east", "west"], true)).clone();
        for c in &mut t.clusters {
            c.home = false;
        }
        let east = build_for(&tree, Some(Arc::new(t)));
        assert!(
            homeless_notes(&east)[0].contains("no cluster of `clusters:` is the home cluster"),
            "{:?}",
            east.warnings
        );
    }

    #[test]
    fn applications_generated_by_an_application_set_follow_their_destinations() {
        let set = "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata: {name: envs, namespace: argocd}\n\
                   spec:\n  generators:\n  - list:\n      elements:\n      - {env: east, cluster: east}\n      - {env: west, cluster: west}\n\
                   \x20 template:\n    metadata: {name: 'app-{{env}}'}\n    spec:\n      source: {repoURL: https://git.example/r.git, path: '{{env}}'}\n\
                   \x20     destination: {name: '{{cluster}}', namespace: shop}\n";
        let (e, w) = (cm_in("e"), cm_in("w"));
        let tree = Tree::new(&[("argo/set.yaml", set), ("east/cm.yaml", &e), ("west/cm.yaml", &w)]);
        assert_eq!(names(&build_for(&tree, Some(targets("east", &["east", "west"], true)))), ["e"]);
        assert_eq!(names(&build_for(&tree, Some(targets("west", &["east", "west"], false)))), ["w"]);
    }

    #[test]
    fn destinations_resolve_by_name_alias_normalised_server_and_in_cluster() {
        let t = targets("east", &["east", "west", "home"], true);
        assert_eq!(t.resolve(Some("east"), None), Ok("east"));
        assert_eq!(t.resolve(Some("east-argo"), None), Ok("east"));
        assert_eq!(t.resolve(Some("in-cluster"), None), Ok("home"));
        assert_eq!(t.resolve(None, Some("https://10.0.0.1:6443/")), Ok("east"));
        assert_eq!(t.resolve(None, Some("https://10.96.0.1")), Ok("home"), "the default port");
        assert_eq!(t.resolve(None, Some("https://kubernetes.default.svc:443")), Ok("home"));
        assert_eq!(t.resolve(Some("east"), Some("https://10.0.0.1:6443")), Ok("east"));
        assert!(t.resolve(Some("east"), Some("http://127.0.0.1:8081")).is_err(), "name and server disagree");
        assert!(t.resolve(None, Some("https://10.0.0.1:6444")).is_err(), "another port");
        assert!(t.resolve(None, None).is_err());
        assert_eq!(
            gitops::normalize_server("HTTPS://Host.Example:443/k8s/clusters/c-1/"),
            "https://host.example/k8s/clusters/c-1"
        );
        assert_eq!(gitops::normalize_server("host:6443"), "https://host:6443");
    }
}
