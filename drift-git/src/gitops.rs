//! Argo CD `Application` and Flux `Kustomization` / `HelmRelease` objects found in the
//! repository: what to render, where, in which namespace and with which values.
//!
//! Honoured fields are listed in `docs/sources.md`; everything else is ignored, and sources
//! that cannot be rendered from this repository (Helm repositories, other Git repositories,
//! OCI artifacts) give a note.

use drift_model::{Resource, SourceWarning};
use serde_json::Value;

use crate::tree::join_relative;

/// How a namespace from a GitOps object applies to the rendered objects.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum NamespaceRule {
    /// Leave objects as rendered.
    Keep,
    /// Objects without a namespace get this one (Argo CD `destination.namespace`).
    Default(String),
    /// Every namespaced object is moved here (Flux `targetNamespace`).
    Override(String),
}

/// How an application's folder is turned into objects.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum AppRender {
    /// Argo CD: kustomization -> Kustomize (with `source.kustomize`'s overrides as the JSON
    /// text of a kustomization overlay), Chart.yaml -> Helm, else the folder's manifests
    /// (sub-folders too when `recurse`).
    ArgoDirectory { recurse: bool, helm: Option<HelmOptions>, kustomize: Option<String> },
    /// Flux Kustomization: kustomization -> Kustomize, else every manifest below (Flux
    /// generates a kustomization for them); with the fields Flux adds to that kustomization
    /// (`namePrefix`, `nameSuffix`, `patches`, `images`, `components`), as the JSON text of a
    /// kustomization overlay.
    FluxKustomization { overlay: Option<String> },
    /// A chart from this repository.
    Helm(HelmOptions),
    /// A chart from a Helm repository.
    RemoteHelm(crate::charts::RemoteChart, HelmOptions),
    /// A folder an object names but that cannot be rendered as the controller would (a note
    /// says why): nothing is rendered from it, and the walk's reading of it is dropped too
    /// (a chart rendered with its defaults would report false drifts).
    NotRendered,
}

/// The prefix of a values file that lies inside a chart fetched from a repository.
pub(crate) const IN_CHART: &str = ":chart:/";

/// `helm template` options taken from a GitOps object.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct HelmOptions {
    pub release: String,
    pub namespace: Option<String>,
    /// Repository-relative values files, in order; one inside a chart fetched from a repository
    /// is written [`IN_CHART`] and its path in the chart.
    pub values_files: Vec<String>,
    /// Inline values, as JSON text (kept as text so the options can be hashed).
    pub values: Option<String>,
    /// `--set`, `--set-string` and `--set-literal` parameters, in order.
    pub parameters: Vec<(String, String, crate::render::SetAs)>,
    /// `--include-crds` (Argo CD renders a chart's CRDs unless `skipCrds`).
    pub include_crds: bool,
}

/// One application to render, found in the repository.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct App {
    /// Repository-relative folder.
    pub path: String,
    pub render: AppRender,
    pub namespace: NamespaceRule,
    /// The file and object that named it, for messages.
    pub origin: String,
    /// The file that declared it (never replaced by the application it declares).
    pub declared_in: String,
    /// Its ignore rules (Argo CD `ignoreDifferences`, Flux `driftDetection.ignore`), given to
    /// every object it renders.
    pub ignore: Vec<drift_model::ignore::IgnoreRule>,
    /// Flux `postBuild` variable substitution of every object it renders.
    pub post_build: Option<std::sync::Arc<crate::flux::PostBuild>>,
    /// The branch, tag or commit an Argo CD source tracks, when it is not the one being read:
    /// its folder is rendered from that revision.
    pub revision: Option<String>,
    /// The cluster an Argo CD Application goes to (`spec.destination`); `None` for Flux objects,
    /// which apply to the cluster they are in.
    pub destination: Option<Destination>,
}

/// An Argo CD Application's `spec.destination`: the cluster it is applied to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Destination {
    pub name: Option<String>,
    pub server: Option<String>,
}

impl std::fmt::Display for Destination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.name, &self.server) {
            (Some(n), Some(s)) => write!(f, "name `{n}` and server `{s}`"),
            (Some(n), None) => write!(f, "name `{n}`"),
            (None, Some(s)) => write!(f, "server `{s}`"),
            (None, None) => write!(f, "no name and no server"),
        }
    }
}

/// The API server URL Argo CD gives the cluster it runs in (`in-cluster`).
pub const IN_CLUSTER_SERVER: &str = "https://kubernetes.default.svc";
/// The name Argo CD gives the cluster it runs in.
pub const IN_CLUSTER_NAME: &str = "in-cluster";

/// One cluster of a detector of several clusters (`clusters:`), as an Argo CD Application's
/// `spec.destination` may name it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetCluster {
    /// Its name in drift.yaml.
    pub name: String,
    /// Other names Argo CD knows it by (the `name` of the Argo CD cluster Secret its
    /// credentials come from).
    pub aliases: Vec<String>,
    /// Its API server URL, when known.
    pub server: Option<String>,
    /// Whether it is the home cluster: the one `https://kubernetes.default.svc` and the name
    /// `in-cluster` mean (Argo CD's names for the cluster it runs in).
    pub home: bool,
}

/// The clusters of the detector, for the source of one of them: an Argo CD Application is
/// rendered by the source of the cluster its destination names only (docs/sources.md, "Several
/// clusters"). Without it (one cluster), every Application is rendered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterTargets {
    /// Every cluster of the configuration, in its order.
    pub clusters: Vec<TargetCluster>,
    /// The cluster this source reads for.
    pub this: String,
    /// The clusters the repository targets (its `clusters:`, default every cluster).
    pub targeted: Vec<String>,
    /// Whether this source reports the Applications compared nowhere (the source of the first
    /// cluster the repository targets does, so that a round of scans says it once).
    pub report: bool,
}

/// Where an Application's objects are compared, seen from one cluster's source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Placement {
    /// With this cluster.
    Here,
    /// With another cluster the repository targets.
    Elsewhere,
    /// Nowhere: why.
    Nowhere(String),
}

impl ClusterTargets {
    /// The cluster (its name in drift.yaml) that a destination names: `name` against the
    /// clusters' names, then their aliases, then `in-cluster` for the home cluster; `server`
    /// against their API server URLs ([`normalize_server`]), `https://kubernetes.default.svc`
    /// for the home cluster. With both, they must name the same cluster. `Err` says why none.
    pub fn resolve(&self, name: Option<&str>, server: Option<&str>) -> Result<&str, String> {
        let home = || self.clusters.iter().find(|c| c.home);
        let by_name = |n: &str| {
            self.clusters
                .iter()
                .find(|c| c.name == n)
                .or_else(|| self.clusters.iter().find(|c| c.aliases.iter().any(|a| a == n)))
                .or_else(|| if n == IN_CLUSTER_NAME { home() } else { None })
        };
        let by_server = |s: &str| {
            let s = normalize_server(s);
            self.clusters
                .iter()
                .find(|c| c.server.as_deref().is_some_and(|own| normalize_server(own) == s))
                .or_else(|| if s == normalize_server(IN_CLUSTER_SERVER) { home() } else { None })
        };
        let names = || self.clusters.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ");
        match (name, server) {
            (None, None) => Err("the destination names no cluster (no `name`, no `server`)".to_owned()),
            (Some(n), None) => {
                by_name(n).map(|c| c.name.as_str()).ok_or_else(|| format!("no cluster is named `{n}` ({})", names()))
            }
            (None, Some(s)) => by_server(s)
                .map(|c| c.name.as_str())
                .ok_or_else(|| format!("no cluster has the API server `{s}` ({})", names())),
            (Some(n), Some(s)) => match (by_name(n), by_server(s)) {
                (Some(a), Some(b)) if a.name == b.name => Ok(a.name.as_str()),
                _ => Err(format!("`name` {n} and `server` {s} do not name one cluster ({})", names())),
            },
        }
    }

    /// The home cluster (where Argo CD runs, what `in-cluster` means), when one is known.
    pub fn home(&self) -> Option<&str> {
        self.clusters.iter().find(|c| c.home).map(|c| c.name.as_str())
    }

    /// Whether `destination` names the home cluster, where Argo CD runs: the Application is
    /// then applied where Argo CD reconciles the child Applications it renders.
    pub(crate) fn goes_home(&self, destination: &Destination) -> bool {
        let home = self.home();
        home.is_some() && self.resolve(destination.name.as_deref(), destination.server.as_deref()).ok() == home
    }

    /// Where the objects of an Application going to `destination` are compared.
    pub(crate) fn place(&self, destination: &Destination) -> Placement {
        match self.resolve(destination.name.as_deref(), destination.server.as_deref()) {
            Ok(c) if c == self.this => Placement::Here,
            Ok(c) if self.targeted.iter().any(|t| t == c) => Placement::Elsewhere,
            Ok(c) => Placement::Nowhere(format!(
                "it goes to cluster `{c}`, which this repository does not target (its `clusters:`)"
            )),
            Err(why) => Placement::Nowhere(why),
        }
    }
}

/// An API server URL as destinations are compared: scheme and host in lower case, the
/// scheme's default port dropped (`:443` for https, `:80` for http), no trailing slash; a path
/// (a proxy's `/k8s/clusters/c-1`) is kept. Without a scheme, https.
pub fn normalize_server(url: &str) -> String {
    let url = url.trim();
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) => (s.to_ascii_lowercase(), r),
        None => ("https".to_owned(), url),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
        None => (rest, ""),
    };
    let authority = authority.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "https" => Some(":443"),
        "http" => Some(":80"),
        _ => None,
    };
    let authority = match default_port {
        Some(p) => authority.strip_suffix(p).map(str::to_owned).unwrap_or(authority),
        None => authority,
    };
    format!("{scheme}://{authority}{path}")
}

/// Reads another revision of the repository being read: calls the function with its files and
/// its commit id, or says why it cannot.
pub(crate) type OtherRevision<'a> =
    dyn Fn(&str, &mut dyn FnMut(&crate::tree::Checkout<'_>, &str)) -> Result<(), String> + 'a;

/// What the discovery needs to know about the repository being read.
pub(crate) struct Context<'a> {
    /// Normalised URL of this repository (`host/owner/name`), `None` for a local folder (every
    /// `repoURL` is then taken to mean this folder).
    pub repo_url: Option<&'a str>,
    /// The branch, tag or commit being read (`None`: a local folder as it is on disk).
    pub reference: Option<&'a str>,
    pub dir_exists: &'a dyn Fn(&str) -> bool,
    /// Every file path of the revision, and a file's text (for ApplicationSet generators).
    pub files: &'a dyn Fn() -> Vec<String>,
    pub read: &'a dyn Fn(&str) -> Option<String>,
    /// Where Flux's value sources that are not in Git are read.
    pub cluster: crate::cluster::ClusterRead<'a>,
    /// Other revisions of this repository, for Argo CD sources that track one (git sources).
    pub other_revision: Option<&'a OtherRevision<'a>>,
}

/// Whether an Application's `targetRevision` names the revision being read. Empty and `HEAD`
/// follow the remote's default branch, which drift cannot tell from the branch it was told to
/// read (`main`, say): decided, they match any reference, so the common `targetRevision: HEAD`
/// gives no note. A branch or tag is compared without `refs/heads/` or `refs/tags/`. A local
/// folder (no reference) is taken to be what any revision means, as its `repoURL` is taken to
/// be any URL.
fn same_revision(wanted: &str, reading: Option<&str>) -> bool {
    let Some(reading) = reading else { return true };
    let bare = |r: &str| {
        let r = r.trim();
        r.strip_prefix("refs/heads/").or_else(|| r.strip_prefix("refs/tags/")).unwrap_or(r).to_owned()
    };
    let wanted = bare(wanted);
    wanted.is_empty() || wanted == "HEAD" || wanted == bare(reading)
}

/// Normalises a git URL for comparison: no scheme, no user, no `.git`, lower-case host.
pub(crate) fn normalize_repo_url(url: &str) -> String {
    let mut u = url.trim();
    if let Some(i) = u.find("://") {
        u = &u[i + 3..];
    }
    if let Some(i) = u.find('@')
        && i < u.find('/').unwrap_or(usize::MAX)
    {
        u = &u[i + 1..];
    }
    let u = u.trim_end_matches('/').trim_end_matches(".git");
    // scp-like `host:owner/name`
    let u = match u.split_once(':') {
        Some((host, rest)) if !rest.starts_with(|c: char| c.is_ascii_digit()) && !host.contains('/') => {
            format!("{host}/{rest}")
        }
        _ => u.to_owned(),
    };
    match u.split_once('/') {
        Some((host, rest)) => format!("{}/{}", host.to_ascii_lowercase(), rest),
        None => u.to_ascii_lowercase(),
    }
}

fn str_at<'v>(v: &'v Value, path: &[&str]) -> Option<&'v str> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_str().filter(|s| !s.is_empty())
}

pub(crate) fn origin_of(r: &Resource) -> String {
    let path = r.provenance.path.as_deref().unwrap_or("?");
    match &r.key.namespace {
        Some(ns) => format!("{} {}/{} in {}", r.key.kind, ns, r.key.name, path),
        None => format!("{} {} in {}", r.key.kind, r.key.name, path),
    }
}

fn note(r: &Resource, message: String) -> SourceWarning {
    SourceWarning::note(message).at(r.provenance.path.clone().unwrap_or_default(), r.provenance.document, None)
}

/// Whether drift follows objects of this kind (Argo CD and Flux objects that name what to
/// render).
pub fn is_gitops_object(r: &Resource) -> bool {
    is_gitops_key(&r.key)
}

/// [`is_gitops_object`] of the object of `key`.
pub fn is_gitops_key(key: &drift_model::ResourceKey) -> bool {
    matches!(
        (key.group.as_str(), key.kind.as_str()),
        ("argoproj.io", "Application" | "ApplicationSet")
            | ("kustomize.toolkit.fluxcd.io", "Kustomization")
            | ("helm.toolkit.fluxcd.io", "HelmRelease")
    )
}

/// Whether `r` is an Argo CD Application or ApplicationSet: an object of the cluster Argo CD
/// runs in (with several clusters, the home cluster; docs/sources.md, "Several clusters").
pub(crate) fn is_argo_object(r: &Resource) -> bool {
    r.key.group == "argoproj.io" && matches!(r.key.kind.as_str(), "Application" | "ApplicationSet")
}

/// Finds the applications that the objects of `resources` declare.
pub(crate) fn discover(resources: &[&Resource], ctx: &Context<'_>) -> (Vec<App>, Vec<SourceWarning>) {
    let mut apps = Vec::new();
    let mut notes = Vec::new();
    for r in resources {
        match (r.key.group.as_str(), r.key.kind.as_str()) {
            ("argoproj.io", "Application") => argo_application(r, ctx, &mut apps, &mut notes),
            ("argoproj.io", "ApplicationSet") => {
                let repo =
                    crate::appset::Repo { url: ctx.repo_url, files: ctx.files, read: ctx.read, objects: resources };
                let (generated, set_notes) = crate::appset::expand(r, &repo);
                notes.extend(set_notes.into_iter().map(|m| note(r, format!("{}: {m}", origin_of(r)))));
                for app in generated {
                    match Resource::from_object(app) {
                        Ok(mut app) => {
                            app.provenance = r.provenance.clone();
                            argo_application(&app, ctx, &mut apps, &mut notes);
                        }
                        Err(e) => {
                            notes.push(note(r, format!("{}: a generated Application: {}", origin_of(r), e.message())))
                        }
                    }
                }
            }
            ("kustomize.toolkit.fluxcd.io", "Kustomization") => flux_kustomization(r, ctx, &mut apps, &mut notes),
            ("helm.toolkit.fluxcd.io", "HelmRelease") => flux_helm_release(r, ctx, resources, &mut apps, &mut notes),
            _ => {}
        }
    }
    (apps, notes)
}

fn argo_application(r: &Resource, ctx: &Context<'_>, apps: &mut Vec<App>, notes: &mut Vec<SourceWarning>) {
    let spec = r.object.get("spec").cloned().unwrap_or(Value::Null);
    let mut sources: Vec<Value> = Vec::new();
    if let Some(s) = spec.get("source") {
        sources.push(s.clone());
    }
    if let Some(list) = spec.get("sources").and_then(Value::as_array) {
        sources.extend(list.iter().cloned());
    }
    let dest_ns = str_at(&spec, &["destination", "namespace"]).map(str::to_owned);
    let namespace = dest_ns.clone().map_or(NamespaceRule::Keep, NamespaceRule::Default);
    let destination = Destination {
        name: str_at(&spec, &["destination", "name"]).map(str::to_owned),
        server: str_at(&spec, &["destination", "server"]).map(str::to_owned),
    };
    let (ignore, refused) = crate::ignore_rules::argo_ignore_differences(&spec);
    notes.extend(refused.into_iter().map(|m| note(r, format!("{}: {m}", origin_of(r)))));
    // `ref` sources name a repository whose files other sources' values files use (`$ref/...`):
    // this repository (its root), or another one (not read).
    let refs: Vec<(String, bool)> = sources
        .iter()
        .filter_map(|s| {
            let name = str_at(s, &["ref"])?;
            let ours =
                ctx.repo_url.is_none_or(|ours| normalize_repo_url(str_at(s, &["repoURL"]).unwrap_or("")) == ours);
            Some((name.to_owned(), ours))
        })
        .collect();
    for source in sources {
        let mut revision = None;
        // A chart from a Helm repository (`repoURL` the repository, `targetRevision` the version).
        let remote = match str_at(&source, &["chart"]) {
            Some(chart) => {
                let repo_url = str_at(&source, &["repoURL"]).unwrap_or("");
                // Argo CD names an OCI Helm repository without a scheme (`registry/charts`).
                let repo = if repo_url.starts_with("http://") || repo_url.starts_with("https://") {
                    repo_url.to_owned()
                } else {
                    format!("oci://{}", repo_url.trim_start_matches("oci://"))
                };
                let version = str_at(&source, &["targetRevision"]).unwrap_or("*");
                Some(crate::charts::RemoteChart::new(&repo, chart, version))
            }
            None => None,
        };
        let path = match &remote {
            Some(remote) => remote.root(),
            None => {
                let Some(raw_path) = source.get("path").and_then(Value::as_str) else {
                    continue; // a `ref`-only source (values for another source)
                };
                let repo_url = str_at(&source, &["repoURL"]).unwrap_or("");
                if let Some(ours) = ctx.repo_url
                    && normalize_repo_url(repo_url) != ours
                {
                    notes.push(note(
                        r,
                        format!("{}: source {repo_url} is another repository; not followed", origin_of(r)),
                    ));
                    continue;
                }
                if let Some(wanted) = str_at(&source, &["targetRevision"])
                    && !same_revision(wanted, ctx.reference)
                {
                    if ctx.other_revision.is_some() {
                        revision = Some(wanted.to_owned());
                    } else {
                        notes.push(note(
                            r,
                            format!(
                                "{}: source tracks revision `{wanted}`, and this source reads one revision ({}); what it renders may differ from what Argo CD applies (a git source reads the revision an Application tracks)",
                                origin_of(r),
                                ctx.reference.map_or_else(|| "the folder as it is on disk".to_owned(), |r| format!("`{r}`"))
                            ),
                        ));
                    }
                }
                let Some(path) = join_relative("", raw_path) else {
                    notes.push(note(r, format!("{}: path `{raw_path}` leaves the repository", origin_of(r))));
                    continue;
                };
                if !(ctx.dir_exists)(&path) {
                    notes.push(note(r, format!("{}: path `{raw_path}` does not exist in this revision", origin_of(r))));
                    continue;
                }
                path
            }
        };
        let helm = source.get("helm").map(|h| {
            let mut values_files = Vec::new();
            for file in h.get("valueFiles").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
                let Some(rest) = file.strip_prefix('$') else {
                    if remote.is_some() {
                        // Relative to the chart, as the repo server reads it.
                        values_files.extend(join_relative("", file).map(|f| format!("{IN_CHART}{f}")));
                    } else {
                        values_files.extend(join_relative(&path, file));
                    }
                    continue;
                };
                let (name, within) = rest.split_once('/').unwrap_or((rest, ""));
                match refs.iter().find(|(n, _)| n == name) {
                    Some((_, true)) => values_files.extend(join_relative("", within)),
                    Some((_, false)) => notes.push(note(
                        r,
                        format!("{}: values file `{file}` is in another repository; not read", origin_of(r)),
                    )),
                    None => {
                        notes.push(note(r, format!("{}: values file `{file}` names no `ref` source", origin_of(r))))
                    }
                }
            }
            let parameters = h
                .get("parameters")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|p| {
                    let value = match p.get("value") {
                        Some(Value::String(s)) => s.clone(),
                        Some(other) => other.to_string(),
                        None => String::new(),
                    };
                    let force = p.get("forceString").and_then(Value::as_bool).unwrap_or(false);
                    let set_as = if force { crate::render::SetAs::String } else { crate::render::SetAs::Set };
                    Some((str_at(p, &["name"])?.to_owned(), argo_escape_commas(&value), set_as))
                })
                .collect();
            let include_crds = !h.get("skipCrds").and_then(Value::as_bool).unwrap_or(false);
            // `valuesObject` wins over `values` (a YAML string), as in Argo CD.
            let values = match (h.get("valuesObject"), h.get("values").and_then(Value::as_str)) {
                (Some(obj), _) if obj.is_object() => Some(obj.to_string()),
                // Read as helm reads a values file (`0644` is 420).
                (_, Some(text)) => drift_manifest::read_yaml_value(text).ok().map(|v| v.to_string()),
                _ => None,
            };
            HelmOptions {
                release: str_at(h, &["releaseName"]).unwrap_or(&r.key.name).to_owned(),
                namespace: dest_ns.clone(),
                values_files,
                values,
                parameters,
                include_crds,
            }
        });
        let recurse = source.get("directory").and_then(|d| d.get("recurse")).and_then(Value::as_bool).unwrap_or(false);
        let kustomize = source.get("kustomize").and_then(|k| argo_kustomize_overlay(k, &path));
        let render = match remote {
            Some(remote) => {
                let opts = helm.unwrap_or_else(|| HelmOptions {
                    release: r.key.name.clone(),
                    namespace: dest_ns.clone(),
                    values_files: Vec::new(),
                    values: None,
                    parameters: Vec::new(),
                    include_crds: true,
                });
                AppRender::RemoteHelm(remote, opts)
            }
            None => AppRender::ArgoDirectory { recurse, helm, kustomize },
        };
        apps.push(App {
            path,
            render,
            namespace: namespace.clone(),
            origin: origin_of(r),
            declared_in: r.provenance.path.clone().unwrap_or_default(),
            ignore: ignore.clone(),
            post_build: None,
            revision,
            destination: Some(destination.clone()),
        });
    }
}

fn flux_kustomization(r: &Resource, ctx: &Context<'_>, apps: &mut Vec<App>, notes: &mut Vec<SourceWarning>) {
    let spec = r.object.get("spec").cloned().unwrap_or(Value::Null);
    let source_kind = str_at(&spec, &["sourceRef", "kind"]).unwrap_or("GitRepository");
    if source_kind != "GitRepository" {
        notes.push(note(r, format!("{}: source {source_kind} is not this repository; not followed", origin_of(r))));
        return;
    }
    let raw_path = str_at(&spec, &["path"]).unwrap_or("./");
    let Some(path) = join_relative("", raw_path) else {
        notes.push(note(r, format!("{}: path `{raw_path}` leaves the repository", origin_of(r))));
        return;
    };
    if !(ctx.dir_exists)(&path) {
        notes.push(note(r, format!("{}: path `{raw_path}` does not exist in this revision", origin_of(r))));
        return;
    }
    let overlay = flux_overlay(&spec, &path);
    let post_build = crate::flux::PostBuild::of(&spec, r.key.namespace.as_deref().unwrap_or("default"), &origin_of(r))
        .map(std::sync::Arc::new);
    let namespace =
        str_at(&spec, &["targetNamespace"]).map_or(NamespaceRule::Keep, |ns| NamespaceRule::Override(ns.to_owned()));
    apps.push(App {
        path,
        render: AppRender::FluxKustomization { overlay },
        namespace,
        origin: origin_of(r),
        declared_in: r.provenance.path.clone().unwrap_or_default(),
        ignore: Vec::new(),
        post_build,
        revision: None,
        destination: None,
    });
}

/// The chart of a HelmRelease whose source is a `HelmRepository` found among `objects` (in the
/// `sourceRef` namespace, default the release's): `None` when the repository is not there,
/// an error when it is one drift does not fetch from yet (OCI).
fn helm_repository(
    release: &Resource,
    chart_spec: &Value,
    objects: &[&Resource],
) -> Option<Result<crate::charts::RemoteChart, String>> {
    let name = str_at(chart_spec, &["sourceRef", "name"])?;
    let namespace = str_at(chart_spec, &["sourceRef", "namespace"]).or(release.key.namespace.as_deref());
    let repo = objects.iter().find(|o| {
        o.key.group == "source.toolkit.fluxcd.io"
            && o.key.kind == "HelmRepository"
            && o.key.name == name
            && o.key.namespace.as_deref() == namespace
    })?;
    let url = str_at(&repo.object, &["spec", "url"]).unwrap_or("");
    let oci = str_at(&repo.object, &["spec", "type"]) == Some("oci") || url.starts_with("oci://");
    if oci && !url.starts_with("oci://") {
        return Some(Err(format!("HelmRepository {name} of type oci has the URL `{url}`, not oci://")));
    }
    let mut remote = crate::charts::RemoteChart::new(
        url,
        str_at(chart_spec, &["chart"]).unwrap_or(""),
        str_at(chart_spec, &["version"]).unwrap_or("*"),
    );
    remote.insecure = oci && repo.object.pointer("/spec/insecure").and_then(Value::as_bool) == Some(true);
    Some(Ok(remote))
}

/// The chart of a HelmRelease's `chartRef`: an `OCIRepository` (its `url` the chart's registry
/// repository; `ref.digest`, `ref.tag` or `ref.semver`) or a `HelmChart` (its `chart`, `version`
/// and `HelmRepository`), found among `objects` in the `chartRef` namespace (default the
/// release's); `None` when it is not there.
fn flux_chart_ref(
    release: &Resource,
    chart_ref: &Value,
    objects: &[&Resource],
) -> Option<Result<(crate::charts::RemoteChart, Vec<String>), String>> {
    let kind = str_at(chart_ref, &["kind"]).unwrap_or("");
    let name = str_at(chart_ref, &["name"])?;
    let namespace = str_at(chart_ref, &["namespace"]).or(release.key.namespace.as_deref());
    let source = objects.iter().find(|o| {
        o.key.group == "source.toolkit.fluxcd.io"
            && o.key.kind == kind
            && o.key.name == name
            && o.key.namespace.as_deref() == namespace
    })?;
    let spec = source.object.get("spec").cloned().unwrap_or(Value::Null);
    match kind {
        "OCIRepository" => {
            let url = str_at(&spec, &["url"]).unwrap_or("");
            let Some((repo, chart)) = url.trim_end_matches('/').rsplit_once('/').filter(|_| url.starts_with("oci://"))
            else {
                return Some(Err(format!("OCIRepository {name} has the URL `{url}`, not oci://HOST/PATH")));
            };
            if let Some(media) = str_at(&spec, &["layerSelector", "mediaType"])
                && media != crate::oci::HELM_CHART_LAYER
            {
                return Some(Err(format!("OCIRepository {name} selects layers of type {media}, not a Helm chart")));
            }
            // Flux's order: a digest, then a semver range, then a tag (default `latest`).
            let version = str_at(&spec, &["ref", "semver"]).or(str_at(&spec, &["ref", "tag"])).unwrap_or("latest");
            let mut remote = crate::charts::RemoteChart::new(repo, chart, version);
            remote.digest = str_at(&spec, &["ref", "digest"]).map(str::to_owned);
            remote.insecure = spec.get("insecure").and_then(Value::as_bool) == Some(true);
            Some(Ok((remote, Vec::new())))
        }
        "HelmChart" => {
            if str_at(&spec, &["sourceRef", "kind"]) != Some("HelmRepository") {
                return Some(Err(format!(
                    "HelmChart {name} takes its chart from a {}, which is not rendered",
                    str_at(&spec, &["sourceRef", "kind"]).unwrap_or("source")
                )));
            }
            let values_files = spec
                .get("valuesFiles")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect();
            match helm_repository(source, &spec, objects)? {
                Ok(remote) => Some(Ok((remote, values_files))),
                Err(e) => Some(Err(e)),
            }
        }
        other => Some(Err(format!("a chartRef of kind {other} is not rendered"))),
    }
}

/// A parameter's value as Argo CD hands it to `--set`: a comma is escaped (one already escaped is
/// left) unless the value is a `{a,b}` list.
fn argo_escape_commas(value: &str) -> String {
    if value.starts_with('{') && value.ends_with('}') {
        return value.to_owned();
    }
    let mut out = String::with_capacity(value.len());
    let mut prev = '\0';
    for c in value.chars() {
        if c == ',' && prev != '\\' {
            out.push('\\');
        }
        out.push(c);
        prev = c;
    }
    out
}

/// Flux's `spec.valuesFrom` and `spec.values` as helm-controller composes them
/// (fluxcd/pkg `chartutil.ChartValuesFromReferences`): each ConfigMap or Secret of the release's
/// namespace, found in Git, in order; its `valuesKey` (default `values.yaml`) read as a values
/// file and merged over the ones before (maps deeply, anything else replaced), or, with a
/// `targetPath`, set at that path as `--set` sets it (`--set-string` for a quoted value,
/// `--set-literal` with `literal: true`); `spec.values` merged over all, and winning over a
/// `targetPath` it also sets. The merged values as JSON text, and the parameters. A source that
/// is not in Git, or cannot be read there (SOPS), or lacks the key, is an error unless it is
/// `optional`, as it is for helm-controller, which then does not install the release.
#[allow(clippy::type_complexity)]
fn flux_values(
    spec: &Value,
    namespace: Option<&str>,
    objects: &[&Resource],
    cluster: crate::cluster::ClusterRead<'_>,
) -> Result<(Option<String>, Vec<(String, String, crate::render::SetAs)>), String> {
    use crate::cluster::Found;
    use crate::render::SetAs;
    let inline = spec.get("values").filter(|v| v.is_object()).cloned();
    let refs = spec.get("valuesFrom").and_then(Value::as_array).cloned().unwrap_or_default();
    if refs.is_empty() {
        return Ok((inline.map(|v| v.to_string()), Vec::new()));
    }
    let mut merged = Value::Object(serde_json::Map::new());
    let mut parameters = Vec::new();
    for reference in &refs {
        let kind = str_at(reference, &["kind"]).unwrap_or("");
        let name = str_at(reference, &["name"]).unwrap_or("");
        let key = str_at(reference, &["valuesKey"]).filter(|k| !k.is_empty()).unwrap_or("values.yaml");
        let optional = reference.get("optional").and_then(Value::as_bool) == Some(true);
        let shown = format!("{kind} {}/{name}", namespace.unwrap_or(""));
        if kind != "ConfigMap" && kind != "Secret" {
            return Err(format!("valuesFrom of kind `{kind}` is not a ConfigMap or a Secret"));
        }
        let (object, place) = match cluster.find(objects.iter().copied(), kind, namespace.unwrap_or(""), name) {
            Found::Git(o) => (o, "in Git"),
            Found::Cluster(o) => (o, "in the cluster"),
            Found::Missing(_) if optional => continue,
            Found::Missing(why) | Found::Unreadable(why) => return Err(format!("valuesFrom {shown} {why}")),
        };
        let data = crate::flux::source_data(&object, kind).ok_or_else(|| {
            format!("valuesFrom {shown} cannot be read {place} (encrypted, or data that is not base64 text)")
        })?;
        let Some(text) = data.get(key) else {
            if optional {
                continue;
            }
            return Err(format!("valuesFrom {shown} has no key `{key}`"));
        };
        match str_at(reference, &["targetPath"]).filter(|p| !p.is_empty()) {
            Some(path) => {
                let literal = reference.get("literal").and_then(Value::as_bool) == Some(true);
                let quoted = text.len() >= 2
                    && ((text.starts_with('"') && text.ends_with('"'))
                        || (text.starts_with('\'') && text.ends_with('\'')));
                let (value, set_as) = if literal {
                    (text.clone(), SetAs::Literal)
                } else if quoted {
                    (text.trim_matches(['"', '\'']).to_owned(), SetAs::String)
                } else {
                    (text.clone(), SetAs::Set)
                };
                // `spec.values` is merged last: a path it sets keeps its value.
                let pointer = format!("/{}", path.replace('.', "/"));
                if inline.as_ref().and_then(|v| v.pointer(&pointer)).is_none() {
                    parameters.push((path.to_owned(), value, set_as));
                }
            }
            None => {
                let values = if text.trim().is_empty() {
                    Value::Object(serde_json::Map::new())
                } else {
                    drift_manifest::read_yaml_value(text).map_err(|e| format!("valuesFrom {shown} key `{key}`: {e}"))?
                };
                if !values.is_object() {
                    return Err(format!("valuesFrom {shown} key `{key}` is not a map of values"));
                }
                merge_values(&mut merged, values);
            }
        }
    }
    if let Some(inline) = inline {
        merge_values(&mut merged, inline);
    }
    Ok((Some(merged.to_string()), parameters))
}

/// Flux's `MergeMaps`: `over`'s maps merged into `base`'s maps, anything else replaced.
fn merge_values(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(existing) if existing.is_object() && v.is_object() => merge_values(existing, v),
                    _ => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, o) => *b = o,
    }
}

/// Argo CD's `source.kustomize` as the fields of a kustomization overlay (the repo server sets
/// them with `kustomize edit` before it builds): images (`name[=newName][:tag][@digest]`),
/// `namePrefix`, `nameSuffix`, `commonLabels`, `commonAnnotations`, `namespace`, `patches`,
/// `replicas`, `components`; `None` when there are none.
fn argo_kustomize_overlay(k: &Value, path: &str) -> Option<String> {
    let mut overlay = serde_json::Map::new();
    for (from, to) in [
        ("namePrefix", "namePrefix"),
        ("nameSuffix", "nameSuffix"),
        ("commonLabels", "commonLabels"),
        ("commonAnnotations", "commonAnnotations"),
        ("namespace", "namespace"),
        ("patches", "patches"),
        ("replicas", "replicas"),
    ] {
        if let Some(v) = k.get(from).filter(|v| !v.is_null() && v.as_str() != Some("")) {
            overlay.insert(to.to_owned(), v.clone());
        }
    }
    // Relative to the application's folder (`kustomize edit add component` runs there).
    add_components(k, path, &mut overlay);
    let images: Vec<Value> = k
        .get("images")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(argo_image)
        .collect();
    if !images.is_empty() {
        overlay.insert("images".to_owned(), Value::Array(images));
    }
    (!overlay.is_empty()).then(|| Value::Object(overlay).to_string())
}

/// The `components` of `spec`, relative to `path`, into a kustomization overlay; one that
/// leaves the repository is dropped.
fn add_components(spec: &Value, path: &str, overlay: &mut serde_json::Map<String, Value>) {
    let components: Vec<Value> = spec
        .get("components")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter_map(|c| join_relative(path, c))
        .map(Value::String)
        .collect();
    if !components.is_empty() {
        overlay.insert("components".to_owned(), Value::Array(components));
    }
}

/// An Argo CD image override (`kustomize edit set image` syntax) as a kustomization `images`
/// entry.
fn argo_image(text: &str) -> Value {
    let (name, target) = text.split_once('=').unwrap_or((text, text));
    let mut entry = serde_json::Map::new();
    let (target, digest) = match target.split_once('@') {
        Some((t, d)) => (t, Some(d)),
        None => (target, None),
    };
    // A tag follows the last `:` after the last `/` (a registry may have a port).
    let slash = target.rfind('/').map_or(0, |i| i + 1);
    let (new_name, tag) = match target[slash..].rfind(':') {
        Some(i) => (&target[..slash + i], Some(&target[slash + i + 1..])),
        None => (target, None),
    };
    let base = |n: &str| n.split_once('@').map_or(n, |(b, _)| b).to_owned();
    let name = if text.contains('=') { base(name) } else { new_name.to_owned() };
    entry.insert("name".into(), Value::String(name.clone()));
    if text.contains('=') && new_name != name {
        entry.insert("newName".into(), Value::String(new_name.to_owned()));
    }
    if let Some(tag) = tag {
        entry.insert("newTag".into(), Value::String(tag.to_owned()));
    }
    if let Some(d) = digest {
        entry.insert("digest".into(), Value::String(d.to_owned()));
    }
    Value::Object(entry)
}

/// The fields kustomize-controller adds to the kustomization of a Kustomization's folder
/// (`namePrefix`, `nameSuffix`, `patches`, `images`, `components`, these relative to `path`), as
/// a kustomization's JSON text; `None` when it adds none.
fn flux_overlay(spec: &Value, path: &str) -> Option<String> {
    let mut overlay = serde_json::Map::new();
    for field in ["namePrefix", "nameSuffix"] {
        if let Some(v) = spec.get(field).filter(|v| v.is_string()) {
            overlay.insert(field.to_owned(), v.clone());
        }
    }
    for field in ["patches", "images"] {
        if let Some(v) = spec.get(field).filter(|v| v.as_array().is_some_and(|a| !a.is_empty())) {
            overlay.insert(field.to_owned(), v.clone());
        }
    }
    add_components(spec, path, &mut overlay);
    (!overlay.is_empty()).then(|| Value::Object(overlay).to_string())
}

fn flux_helm_release(
    r: &Resource,
    ctx: &Context<'_>,
    objects: &[&Resource],
    apps: &mut Vec<App>,
    notes: &mut Vec<SourceWarning>,
) {
    let spec = r.object.get("spec").cloned().unwrap_or(Value::Null);
    let mut chart_spec = spec.get("chart").and_then(|c| c.get("spec")).cloned().unwrap_or(Value::Null);
    let (source_kind, chart, remote) = match spec.get("chartRef") {
        Some(chart_ref) => {
            let kind = str_at(chart_ref, &["kind"]).unwrap_or("chartRef");
            let name = str_at(chart_ref, &["name"]).unwrap_or("");
            let remote = flux_chart_ref(r, chart_ref, objects).map(|found| {
                found.map(|(remote, values_files)| {
                    // A HelmChart's values files are the chart's own, as the release's are.
                    chart_spec = serde_json::json!({"valuesFiles": values_files});
                    remote
                })
            });
            (kind.to_owned(), format!("{kind}/{name}"), remote)
        }
        None => {
            let source_kind = str_at(&chart_spec, &["sourceRef", "kind"]).unwrap_or("").to_owned();
            let chart = str_at(&chart_spec, &["chart"]).unwrap_or("").to_owned();
            let remote = (source_kind == "HelmRepository").then(|| helm_repository(r, &chart_spec, objects)).flatten();
            (source_kind, chart, remote)
        }
    };
    let source_kind = source_kind.as_str();
    let chart = chart.as_str();
    if let Some(Err(why)) = &remote {
        notes.push(note(
            r,
            format!("{}: chart `{chart}`: {why}; the HelmRelease itself is still compared", origin_of(r)),
        ));
        return;
    }
    if source_kind != "GitRepository" && remote.is_none() {
        notes.push(note(
            r,
            format!(
                "{}: chart `{chart}` comes from a {} and is not rendered; the HelmRelease itself is still compared",
                origin_of(r),
                if source_kind.is_empty() { "remote source" } else { source_kind }
            ),
        ));
        return;
    }
    let remote = remote.and_then(Result::ok);
    let path = match &remote {
        Some(remote) => remote.root(),
        None => match join_relative("", chart).filter(|p| (ctx.dir_exists)(p)) {
            Some(path) => path,
            None => {
                notes.push(note(r, format!("{}: chart path `{chart}` does not exist in this revision", origin_of(r))));
                return;
            }
        },
    };
    let (values, parameters) = match flux_values(&spec, r.key.namespace.as_deref(), objects, ctx.cluster) {
        Ok(v) => v,
        Err(why) => {
            notes.push(note(
                r,
                format!("{}: {why}; the chart is not rendered (helm-controller does not install it either), the HelmRelease itself is still compared", origin_of(r)),
            ));
            apps.push(App {
                path,
                render: AppRender::NotRendered,
                namespace: NamespaceRule::Keep,
                origin: origin_of(r),
                declared_in: r.provenance.path.clone().unwrap_or_default(),
                ignore: Vec::new(),
                post_build: None,
                revision: None,
                destination: None,
            });
            return;
        }
    };
    let target_ns = str_at(&spec, &["targetNamespace"]).map(str::to_owned);
    let release = str_at(&spec, &["releaseName"]).map(str::to_owned).unwrap_or_else(|| match &target_ns {
        Some(ns) => format!("{ns}-{}", r.key.name),
        None => r.key.name.clone(),
    });
    let namespace = target_ns.or_else(|| r.key.namespace.clone());
    let values_files = chart_spec
        .get("valuesFiles")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter_map(|f| join_relative("", f))
        // A chart from a repository reads them inside the chart.
        .map(|f| if remote.is_some() { format!("{IN_CHART}{f}") } else { f })
        .collect();
    let (ignore, refused) = crate::ignore_rules::flux_drift_detection(&spec);
    notes.extend(refused.into_iter().map(|m| note(r, format!("{}: {m}", origin_of(r)))));
    let opts =
        HelmOptions { release, namespace: namespace.clone(), values_files, values, parameters, include_crds: false };
    apps.push(App {
        path,
        render: match remote {
            Some(remote) => AppRender::RemoteHelm(remote, opts),
            None => AppRender::Helm(opts),
        },
        namespace: namespace.map_or(NamespaceRule::Keep, NamespaceRule::Default),
        origin: origin_of(r),
        declared_in: r.provenance.path.clone().unwrap_or_default(),
        ignore,
        post_build: None,
        revision: None,
        destination: None,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn res(v: Value, path: &str) -> Resource {
        let mut r = Resource::from_object(v).unwrap();
        r.provenance.path = Some(path.into());
        r
    }

    #[test]
    fn urls_normalise_across_forms() {
        let a = normalize_repo_url("https://GitHub.com/org/gitops.git");
        assert_eq!(a, "github.com/org/gitops");
        assert_eq!(normalize_repo_url("git@github.com:org/gitops.git"), a);
        assert_eq!(normalize_repo_url("ssh://git@github.com/org/gitops"), a);
        assert_eq!(normalize_repo_url("https://user:pw@github.com/org/gitops/"), a);
    }

    #[test]
    fn argo_application_fields_are_honoured() {
        let app = res(
            json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
                "metadata": {"name": "web", "namespace": "argocd"},
                "spec": {"destination": {"namespace": "shop"},
                    "source": {"repoURL": "https://github.com/org/gitops.git", "path": "apps/web",
                        "helm": {"releaseName": "web-prod", "valueFiles": ["values-prod.yaml"], "valuesObject": {"replicas": 3}}}}}),
            "argocd/web.yaml",
        );
        let other = res(
            json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": {"name": "x"},
                "spec": {"source": {"repoURL": "https://github.com/other/repo", "path": "apps/web"}}}),
            "argocd/x.yaml",
        );
        let exists = |p: &str| p == "apps/web";
        let ctx = Context {
            repo_url: Some("github.com/org/gitops"),
            reference: Some("main"),
            dir_exists: &exists,
            files: &Vec::new,
            read: &|_| None,
            cluster: crate::cluster::ClusterRead::none(),
            other_revision: None,
        };
        let (apps, notes) = discover(&[&app, &other], &ctx);
        assert_eq!(apps.len(), 1);
        assert_eq!(apps[0].path, "apps/web");
        assert_eq!(apps[0].namespace, NamespaceRule::Default("shop".into()));
        match &apps[0].render {
            AppRender::ArgoDirectory { helm: Some(h), .. } => {
                assert_eq!(h.release, "web-prod");
                assert_eq!(h.values_files, vec!["apps/web/values-prod.yaml".to_owned()]);
                assert_eq!(h.values.as_deref(), Some(r#"{"replicas":3}"#));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(notes.len(), 1);
        assert!(notes[0].message.contains("another repository"));

        // A source that tracks another revision than the one read is followed, with a note.
        let mut pinned = app.clone();
        std::sync::Arc::make_mut(&mut pinned.object)["spec"]["source"]["targetRevision"] = json!("v1.2.0");
        let (apps, notes) = discover(&[&pinned], &ctx);
        assert_eq!(apps.len(), 1);
        assert!(
            notes.len() == 1
                && notes[0].message.contains("tracks revision `v1.2.0`")
                && notes[0].message.contains("`main`"),
            "{notes:?}"
        );
    }

    #[test]
    fn target_revisions_are_compared_as_argo_cd_names_them() {
        for (wanted, reading, same) in [
            ("HEAD", Some("HEAD"), true),
            ("", Some("HEAD"), true),
            ("main", Some("main"), true),
            ("refs/heads/main", Some("main"), true),
            ("main", Some("refs/heads/main"), true),
            ("refs/tags/v1", Some("v1"), true),
            ("v1.2.0", Some("main"), false),
            ("HEAD", Some("main"), true),
            ("main", Some("HEAD"), false),
            ("release", None, true),
        ] {
            assert_eq!(same_revision(wanted, reading), same, "{wanted} {reading:?}");
        }
    }

    #[test]
    fn argo_image_overrides_become_kustomize_image_entries() {
        for (text, want) in [
            ("nginx:1.29", json!({"name": "nginx", "newTag": "1.29"})),
            (
                "nginx=registry:5000/web/nginx:1.29",
                json!({"name": "nginx", "newName": "registry:5000/web/nginx", "newTag": "1.29"}),
            ),
            ("nginx=nginx@sha256:abc", json!({"name": "nginx", "digest": "sha256:abc"})),
            ("registry:5000/nginx", json!({"name": "registry:5000/nginx"})),
            ("a=b", json!({"name": "a", "newName": "b"})),
        ] {
            assert_eq!(argo_image(text), want, "{text}");
        }
    }

    #[test]
    fn argo_helm_values_text_is_read_as_helm_reads_it() {
        let app = res(
            json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": {"name": "web"},
                "spec": {"source": {"repoURL": "https://github.com/org/gitops.git", "path": "apps/web",
                    "helm": {"values": "mode: 0644\nenabled: on\nscale: 1.0\n"}}}}),
            "argocd/web.yaml",
        );
        let exists = |p: &str| p == "apps/web";
        let ctx = Context {
            repo_url: Some("github.com/org/gitops"),
            reference: Some("main"),
            dir_exists: &exists,
            files: &Vec::new,
            read: &|_| None,
            cluster: crate::cluster::ClusterRead::none(),
            other_revision: None,
        };
        let (apps, _) = discover(&[&app], &ctx);
        match &apps[0].render {
            AppRender::ArgoDirectory { helm: Some(h), .. } => {
                assert_eq!(h.values.as_deref(), Some(r#"{"enabled":true,"mode":420,"scale":1}"#));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn flux_objects_are_honoured_or_noted() {
        let ks = res(
            json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                "metadata": {"name": "apps", "namespace": "flux-system"},
                "spec": {"path": "./apps/prod", "targetNamespace": "prod", "sourceRef": {"kind": "GitRepository", "name": "flux-system"}}}),
            "clusters/prod/apps.yaml",
        );
        let hr = res(
            json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
                "metadata": {"name": "podinfo", "namespace": "podinfo"},
                "spec": {"chart": {"spec": {"chart": "podinfo", "sourceRef": {"kind": "HelmRepository", "name": "podinfo"}}}}}),
            "apps/base/release.yaml",
        );
        let git_hr = res(
            json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
                "metadata": {"name": "web", "namespace": "web"},
                "spec": {"targetNamespace": "shop", "values": {"a": 1},
                    "chart": {"spec": {"chart": "./charts/web", "sourceRef": {"kind": "GitRepository", "name": "flux-system"}}}}}),
            "apps/web.yaml",
        );
        let exists = |p: &str| p == "apps/prod" || p == "charts/web";
        let ctx = Context {
            repo_url: None,
            reference: None,
            dir_exists: &exists,
            files: &Vec::new,
            read: &|_| None,
            cluster: crate::cluster::ClusterRead::none(),
            other_revision: None,
        };
        let (apps, notes) = discover(&[&ks, &hr, &git_hr], &ctx);
        assert_eq!(apps.len(), 2);
        assert_eq!(apps[0].namespace, NamespaceRule::Override("prod".into()));
        match &apps[1].render {
            AppRender::Helm(h) => {
                assert_eq!(h.release, "shop-web");
                assert_eq!(h.namespace.as_deref(), Some("shop"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(notes.len(), 1);
        assert!(notes[0].message.contains("HelmRepository"));
        assert!(!notes[0].fatal);
    }
}
