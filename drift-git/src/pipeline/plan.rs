//! What to render: the units (a plain file, a Kustomize folder, a Helm chart) of the configured
//! folder and of the applications that Argo CD / Flux objects name, read the way those tools
//! read a path.

use std::collections::{BTreeSet, HashMap};

use drift_model::{ErrorKind, SourceWarning};

use super::closure::closure;
use crate::config::{RenderConfig, RendererKind};
use crate::gitops::{App, AppRender, HelmOptions, NamespaceRule};
use crate::render::KUSTOMIZATION_FILES;
use crate::tree::{Checkout, parent_dir};

/// The start of the note for a chart that nothing renders (dropped when an application
/// renders it after all).
pub(super) const CHART_SKIPPED: &str = "Helm chart ";

/// What to render.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum UnitKind {
    Plain(String),
    Kustomize(String),
    Helm {
        chart: String,
        opts: HelmOptions,
    },
    /// A Flux Kustomization's folder built with the fields Flux adds: `resources` (the folder
    /// itself when it has a kustomization, else its manifests and kustomization folders) and the
    /// overlay's JSON text (see `gitops::AppRender::FluxKustomization`).
    Overlay {
        dir: String,
        resources: Vec<String>,
        overlay: String,
    },
    /// A chart from a Helm repository; `root` is [`crate::charts::RemoteChart::root`],
    /// `declared_in` the file of the object that names it (for messages).
    RemoteHelm {
        root: String,
        remote: crate::charts::RemoteChart,
        opts: HelmOptions,
        declared_in: String,
    },
}

#[derive(Debug, Clone)]
pub(super) struct Unit {
    pub kind: UnitKind,
    pub namespace: NamespaceRule,
    /// Ignore rules of the application that names the unit, for each object it renders.
    pub ignore: Vec<drift_model::ignore::IgnoreRule>,
    /// Flux `postBuild` substitution of the application that names the unit.
    pub post_build: Option<std::sync::Arc<crate::flux::PostBuild>>,
    /// The folder of the application that names the unit, if one does.
    pub app: Option<String>,
    /// The commit the unit was read from, when it is not the revision being read (an Argo CD
    /// source that tracks another revision).
    pub revision: Option<String>,
    /// Rendered only for the Argo CD Applications and ApplicationSets it holds: the unit of an
    /// Application going to the home cluster when this source reads for another one, whose
    /// objects are not this cluster's but whose child Applications may be (an app of apps
    /// across clusters). Holds what its warnings are prefixed with here (which Application it
    /// is, and why it is rendered here at all); only its Argo CD objects are kept, even in the
    /// caches.
    pub elsewhere: Option<std::sync::Arc<str>>,
    /// Whether the Argo CD Applications and ApplicationSets the unit renders are followed
    /// (live Applications): those of the repository's own files and of the Applications going
    /// to the home cluster, where Argo CD runs. Those an Application sends to another cluster
    /// are plain objects of that cluster, which no Argo CD reconciles. Always with one cluster.
    pub live_apps: bool,
}

impl Unit {
    pub fn new(kind: UnitKind) -> Self {
        Unit {
            kind,
            namespace: NamespaceRule::Keep,
            ignore: Vec::new(),
            post_build: None,
            app: None,
            revision: None,
            elsewhere: None,
            live_apps: true,
        }
    }
    pub fn root(&self) -> &str {
        unit_root(&self.kind)
    }
}

pub(super) fn is_manifest_name(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    lower.ends_with(".yaml") || lower.ends_with(".yml") || lower.ends_with(".json")
}

pub(super) fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

pub(super) fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() { name.to_owned() } else { format!("{dir}/{name}") }
}

pub(super) fn within(path: &str, dir: &str) -> bool {
    dir.is_empty() || path == dir || (path.starts_with(dir) && path.as_bytes().get(dir.len()) == Some(&b'/'))
}

pub(super) fn kustomization_file(checkout: &Checkout<'_>, dir: &str) -> Option<String> {
    KUSTOMIZATION_FILES.iter().map(|f| join(dir, f)).find(|p| checkout.contains_file(p))
}

pub(super) fn has_chart(checkout: &Checkout<'_>, dir: &str) -> bool {
    checkout.contains_file(&join(dir, "Chart.yaml"))
}

/// The units of a folder read the way Flux reads a path without a kustomization: every
/// manifest below it, kustomization folders rendered as a whole, bases of overlays only
/// through their overlays.
pub(super) fn walk(checkout: &Checkout<'_>, dir: &str, top: bool, notes: &mut Vec<SourceWarning>) -> Vec<Unit> {
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
        // An overlay a render left behind (a killed process) is not the repository's.
        if path.strip_prefix(super::exec::OVERLAY_DIR).is_some_and(|rest| rest.starts_with('/')) {
            continue;
        }
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

pub(super) fn default_helm(chart: &str, cfg: Option<&RenderConfig>) -> HelmOptions {
    let release = cfg.and_then(|c| c.helm.release_name.clone()).unwrap_or_else(|| match file_name(chart) {
        "" => "release".to_owned(),
        n => n.to_owned(),
    });
    HelmOptions {
        release,
        namespace: cfg.and_then(|c| c.helm.namespace.clone()),
        values_files: cfg.map(|c| c.helm.values_files.clone()).unwrap_or_default(),
        values: None,
        parameters: Vec::new(),
        include_crds: false,
    }
}

pub(super) fn plain_files(
    checkout: &Checkout<'_>,
    dir: &str,
    recurse: bool,
    notes: &mut Vec<SourceWarning>,
) -> Vec<Unit> {
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

pub(super) fn app_units(checkout: &Checkout<'_>, app: &App, notes: &mut Vec<SourceWarning>) -> Vec<Unit> {
    let mut units = match &app.render {
        AppRender::ArgoDirectory { recurse, helm, kustomize } => {
            if kustomization_file(checkout, &app.path).is_some() {
                match kustomize {
                    Some(overlay) => vec![Unit::new(UnitKind::Overlay {
                        dir: app.path.clone(),
                        resources: vec![app.path.clone()],
                        overlay: overlay.clone(),
                    })],
                    None => vec![Unit::new(UnitKind::Kustomize(app.path.clone()))],
                }
            } else if has_chart(checkout, &app.path) {
                let opts = helm.clone().unwrap_or_else(|| default_helm(&app.path, None));
                vec![Unit::new(UnitKind::Helm { chart: app.path.clone(), opts })]
            } else {
                plain_files(checkout, &app.path, *recurse, notes)
            }
        }
        AppRender::FluxKustomization { overlay: None } => walk(checkout, &app.path, false, notes),
        AppRender::FluxKustomization { overlay: Some(overlay) } => {
            let resources = walk(checkout, &app.path, false, notes)
                .into_iter()
                .filter_map(|u| match u.kind {
                    UnitKind::Plain(p) | UnitKind::Kustomize(p) => Some(p),
                    _ => None,
                })
                .collect();
            vec![Unit::new(UnitKind::Overlay { dir: app.path.clone(), resources, overlay: overlay.clone() })]
        }
        AppRender::Helm(opts) => vec![Unit::new(UnitKind::Helm { chart: app.path.clone(), opts: opts.clone() })],
        AppRender::NotRendered => Vec::new(),
        AppRender::RemoteHelm(remote, opts) => {
            vec![Unit::new(UnitKind::RemoteHelm {
                root: remote.root(),
                remote: remote.clone(),
                opts: opts.clone(),
                declared_in: app.declared_in.clone(),
            })]
        }
    };
    for u in &mut units {
        u.namespace = app.namespace.clone();
        u.ignore = app.ignore.clone();
        u.post_build = app.post_build.clone();
        u.app = Some(app.path.clone());
    }
    units
}

/// The units of the configured folder (or file), as the configured renderer reads it.
pub(super) fn plan_top(
    cfg: &RenderConfig,
    checkout: &Checkout<'_>,
    sub: &str,
    notes: &mut Vec<SourceWarning>,
) -> Vec<Unit> {
    match cfg.renderer {
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
                let opts = default_helm(sub, Some(cfg));
                // `helm install --namespace NS` puts every object that names none in NS.
                let namespace = opts.namespace.clone().map_or(NamespaceRule::Keep, NamespaceRule::Default);
                let mut unit = Unit::new(UnitKind::Helm { chart: sub.to_owned(), opts });
                unit.namespace = namespace;
                vec![unit]
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

pub(super) fn unit_root(kind: &UnitKind) -> &str {
    match kind {
        UnitKind::Plain(p) | UnitKind::Kustomize(p) | UnitKind::Overlay { dir: p, .. } => p,
        UnitKind::RemoteHelm { root, .. } => root,
        UnitKind::Helm { chart, .. } => chart,
    }
}

pub(super) fn display_dir(dir: &str) -> &str {
    if dir.is_empty() { "." } else { dir }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::testing::Tree;

    const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n";

    fn kinds(units: &[Unit]) -> Vec<String> {
        units
            .iter()
            .map(|u| match &u.kind {
                UnitKind::Plain(p) => format!("plain {p}"),
                UnitKind::Kustomize(d) => format!("kustomize {d}"),
                UnitKind::Helm { chart, opts } => format!("helm {chart} as {}", opts.release),
                UnitKind::Overlay { dir, resources, .. } => format!("flux {dir} of {resources:?}"),
                UnitKind::RemoteHelm { root, .. } => format!("remote helm {root}"),
            })
            .collect()
    }

    #[test]
    fn paths_join_and_nest_by_whole_folder_names() {
        assert_eq!(join("", "a.yaml"), "a.yaml");
        assert_eq!(join("apps", "a.yaml"), "apps/a.yaml");
        assert!(within("apps/web/a.yaml", "apps"));
        assert!(within("apps", "apps"));
        assert!(within("anything", ""));
        assert!(!within("apps-old/a.yaml", "apps"), "a prefix of the name is not a parent folder");
        assert_eq!(file_name("a/b/c.yaml"), "c.yaml");
        assert!(is_manifest_name("A.YAML") && is_manifest_name("b.yml") && is_manifest_name("c.json"));
        assert!(!is_manifest_name("README.md"));
        assert_eq!(display_dir(""), ".");
    }

    #[test]
    fn a_folder_of_manifests_is_one_unit_per_manifest_file() {
        let tree =
            Tree::new(&[("a.yaml", CM), ("b.yml", CM), ("c.json", "{}"), ("README.md", "# x"), ("sub/d.yaml", CM)]);
        let mut notes = Vec::new();
        let units = walk(&tree.checkout(), "", true, &mut notes);
        assert_eq!(kinds(&units), ["plain a.yaml", "plain b.yml", "plain c.json", "plain sub/d.yaml"]);
        assert!(notes.is_empty());
    }

    #[test]
    fn a_kustomization_is_rendered_whole_and_a_base_only_through_its_overlay() {
        let tree = Tree::new(&[
            ("base/kustomization.yaml", "resources: [deploy.yaml]\n"),
            ("base/deploy.yaml", CM),
            ("overlays/prod/kustomization.yaml", "resources: [../../base]\npatches: [{path: patch.yaml}]\n"),
            ("overlays/prod/patch.yaml", CM),
            ("loose.yaml", CM),
        ]);
        let mut notes = Vec::new();
        let units = walk(&tree.checkout(), "", true, &mut notes);
        assert_eq!(kinds(&units), ["plain loose.yaml", "kustomize overlays/prod"]);
        let mut notes = Vec::new();
        let units = walk(&tree.checkout(), "base", false, &mut notes);
        assert_eq!(kinds(&units), ["kustomize base"], "a folder with a kustomization is that kustomization");
    }

    #[test]
    fn a_chart_nothing_renders_is_a_note_and_its_templates_are_not_read() {
        let tree = Tree::new(&[
            ("app.yaml", CM),
            ("charts/web/Chart.yaml", "name: web\n"),
            ("charts/web/templates/cm.yaml", "{{ .Values.x }}"),
        ]);
        let mut notes = Vec::new();
        let units = walk(&tree.checkout(), "", true, &mut notes);
        assert_eq!(kinds(&units), ["plain app.yaml"]);
        assert_eq!(notes.len(), 1);
        assert!(notes[0].message.starts_with(CHART_SKIPPED) && !notes[0].fatal, "{:?}", notes[0]);
        assert_eq!(notes[0].path.as_deref(), Some("charts/web/Chart.yaml"));
    }

    #[test]
    fn the_top_folder_with_a_chart_is_rendered_as_a_release_named_after_it() {
        let tree = Tree::new(&[("web/Chart.yaml", "name: web\n"), ("web/templates/cm.yaml", "x")]);
        let mut notes = Vec::new();
        assert_eq!(kinds(&walk(&tree.checkout(), "web", true, &mut notes)), ["helm web as web"]);
        assert_eq!(default_helm("", None).release, "release", "the repository root has no name");
    }

    #[test]
    fn each_renderer_plans_its_own_way() {
        let tree =
            Tree::new(&[("k/kustomization.yaml", "resources: [a.yaml]\n"), ("k/a.yaml", CM), ("k/sub/b.yaml", CM)]);
        let checkout = tree.checkout();
        let plan = |renderer: RendererKind, sub: &str| {
            let cfg = RenderConfig { renderer, ..RenderConfig::default() };
            let mut notes = Vec::new();
            let units = plan_top(&cfg, &checkout, sub, &mut notes);
            (kinds(&units), notes)
        };
        let (units, notes) = plan(RendererKind::Plain, "k");
        assert_eq!(units, ["plain k/a.yaml", "plain k/sub/b.yaml"]);
        assert_eq!(notes.len(), 1, "the kustomization file is skipped with a note");
        assert_eq!(notes[0].path.as_deref(), Some("k/kustomization.yaml"));
        assert_eq!(plan(RendererKind::Kustomize, "k").0, ["kustomize k"]);
        assert_eq!(plan(RendererKind::Auto, "k").0, ["kustomize k"]);
        assert_eq!(plan(RendererKind::Auto, "k/a.yaml").0, ["plain k/a.yaml"], "a file is read as a file");
        let (units, notes) = plan(RendererKind::Kustomize, "k/sub");
        assert!(units.is_empty());
        assert!(notes[0].fatal && notes[0].kind == ErrorKind::InvalidInput, "{notes:?}");
        let (units, notes) = plan(RendererKind::Helm, "k");
        assert!(units.is_empty());
        assert!(notes[0].message.contains("no Chart.yaml"), "{notes:?}");
    }

    #[test]
    fn an_application_takes_its_folder_and_gives_its_namespace_rule() {
        let tree = Tree::new(&[("apps/web/a.yaml", CM), ("apps/web/deep/b.yaml", CM)]);
        let app = |render| App {
            path: "apps/web".into(),
            render,
            namespace: NamespaceRule::Override("web".into()),
            origin: "argo.yaml".into(),
            declared_in: "argo.yaml".into(),
            ignore: Vec::new(),
            post_build: None,
            revision: None,
            destination: None,
        };
        let mut notes = Vec::new();
        let flat = app_units(
            &tree.checkout(),
            &app(AppRender::ArgoDirectory { recurse: false, helm: None, kustomize: None }),
            &mut notes,
        );
        assert_eq!(kinds(&flat), ["plain apps/web/a.yaml"]);
        assert!(flat.iter().all(|u| u.namespace == NamespaceRule::Override("web".into())));
        let deep = app_units(
            &tree.checkout(),
            &app(AppRender::ArgoDirectory { recurse: true, helm: None, kustomize: None }),
            &mut notes,
        );
        assert_eq!(kinds(&deep), ["plain apps/web/a.yaml", "plain apps/web/deep/b.yaml"]);
        let flux = app_units(&tree.checkout(), &app(AppRender::FluxKustomization { overlay: None }), &mut notes);
        assert_eq!(kinds(&flux), ["plain apps/web/a.yaml", "plain apps/web/deep/b.yaml"]);
    }
}
