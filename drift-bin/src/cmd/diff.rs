//! `drift diff`: the engine on files or folders, or against a live cluster (`--cluster`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use drift_core::drift_model::tree::ObjectTree;
use drift_core::ignore::IgnoreRule;
use drift_core::matching::DEFAULT_NAMESPACE;
use drift_core::policy::{Policy, PolicyConfig};
use drift_core::progress::Progress;
use drift_core::scan::{
    ScanOptions, compare_files_streamed, compare_snapshots, discover_cluster_scoped, place_namespaces,
};
use drift_core::{DesiredSnapshot, Engine, EngineConfig, KeptResource};

use crate::output::{Format, print_report};

/// Arguments of `drift diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// Desired state: a YAML or JSON file (several documents, or a List) or a folder of them.
    #[arg(long)]
    pub desired: PathBuf,
    /// Live state: the same, for example the output of `kubectl get -o yaml`.
    #[arg(long, required_unless_present = "cluster", conflicts_with = "cluster")]
    pub live: Option<PathBuf>,
    /// Read the live state from the cluster instead: only the objects the desired state names.
    #[arg(long)]
    pub cluster: bool,
    /// Kubeconfig of the cluster (default: `$KUBECONFIG`, then `~/.kube/config`).
    #[arg(long, requires = "cluster")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context (default: the current context).
    #[arg(long, requires = "cluster")]
    pub context: Option<String>,
    /// Ask the API server for the predicted object (server-side apply dry run) before reporting
    /// a drift, so that defaults and mutating webhooks are not mistaken for drift.
    #[arg(long, requires = "cluster")]
    pub server_side: bool,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub output: Format,
    /// A YAML file with a list of ignore rules (or engine settings: `ignore`, `severity`, ...).
    #[arg(long)]
    pub ignore: Option<PathBuf>,
    /// Namespace of desired objects that name none (and of live objects from files that name
    /// none). Without it, in file mode, such an object matches the one live object of the same
    /// kind and name, whatever its namespace; with `--cluster`, it goes to `default`.
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    /// Also report the live objects, in the kinds and namespaces the desired state manages,
    /// that no desired object declares (`unmanaged_resource`).
    #[arg(long)]
    pub orphans: bool,
    /// Also check the policies of docs/policies.md (image tags, resources, privileged
    /// containers, host network and PID, root, required labels) on both sides: findings are
    /// printed apart from drifts and do not change the exit code.
    #[arg(long)]
    pub policies: bool,
    /// A YAML file with the policy settings, as `policies:` of drift.yaml (`on`,
    /// `required_labels`, `rules`).
    #[arg(long, requires = "policies")]
    pub policy_config: Option<PathBuf>,
}

fn engine_config(path: Option<&PathBuf>) -> Result<EngineConfig> {
    let Some(path) = path else { return Ok(EngineConfig::default()) };
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    if let Ok(rules) = serde_saphyr::from_str::<Vec<IgnoreRule>>(&text) {
        return Ok(EngineConfig { ignore: rules, ..EngineConfig::default() });
    }
    serde_saphyr::from_str::<EngineConfig>(&text).map_err(|e| {
        anyhow::anyhow!("{}: not a list of ignore rules nor engine settings: {}", path.display(), e.without_snippet())
    })
}

/// The policy of `--policies`: the settings of `--policy-config` (what `policies:` of drift.yaml
/// holds; `enabled` is implied by the flag), else every rule at its default severity on both
/// sides; `None` without the flag.
fn policy(args: &DiffArgs) -> Result<Option<Arc<Policy>>> {
    if !args.policies {
        return Ok(None);
    }
    let config = match &args.policy_config {
        None => PolicyConfig::default(),
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            serde_saphyr::from_str::<PolicyConfig>(&text)
                .map_err(|e| anyhow::anyhow!("{}: not policy settings: {}", path.display(), e.without_snippet()))?
        }
    };
    let policy = Policy::new(&config).context("the policy settings")?;
    Ok(Some(Arc::new(policy)))
}

/// Runs `drift diff`; the exit code says whether drift was found.
pub fn run(args: &DiffArgs) -> Result<ExitCode> {
    let engine = Engine::new(&engine_config(args.ignore.as_ref())?)?;
    let policy = policy(args)?;
    let progress = Progress::new();
    let line = crate::progress::Line::start("diff", &progress);
    let sops = crate::compose::sops_keys()?;
    let opener = crate::compose::sops_opener(&sops);
    let recipients = crate::compose::sops_recipients(&sops);
    let Some(live_path) = &args.live else {
        return run_cluster(args, &engine, policy, opener.as_deref(), recipients, line, progress);
    };
    // Each desired object is kept compact until it is compared (`drift_core::desired`); the
    // engine is asked for its relations while its tree is in hand. No digest is made: the
    // report is printed, never stored nor checked (a fingerprint tells a file read again apart).
    let keep = |r: drift_core::Resource| KeptResource::comparing(&r, &engine);
    // (A file of one object is kept from its tree, with no `Value` made of it.)
    let keep_tree = |t: ObjectTree<'_>| KeptResource::comparing_tree(&t, &engine);
    // The live folder is listed while the desired side is read: listing it (a system call for
    // each entry) held up both cores' readers when it came between the two sides.
    let (desired, walked) = std::thread::scope(|s| {
        let walking = s.spawn(|| crate::files::walk(live_path));
        let desired = load_desired(&args.desired, &progress, opener.as_deref(), None, &keep, Some(&keep_tree));
        let walked = walking.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (desired, walked)
    });
    let ((desired, render), walked) = (desired?, walked?);
    let desired = DesiredSnapshot {
        repository: args.desired.display().to_string(),
        revision: None,
        resources: desired.resources,
        warnings: desired.warnings,
    };
    let mut options = ScanOptions::new("diff");
    options.progress = progress.clone();
    options.orphans = args.orphans;
    options.policy = policy;
    options.sops_recipients = recipients;
    // (The report is printed, never watched from.)
    options.live_versions = false;
    // The live files are compared as they are read and let go (see `compare_files_streamed`).
    // (On every core: each pair is compared on the thread that parsed its live file.)
    let read_live = |sink: &drift_core::scan::LiveSink<'_>| crate::files::stream(walked, &progress, sink);
    // An object compared at once is let go of, and read again from its file should a second
    // live object of its key come.
    let reload = |p: &drift_core::Provenance| crate::files::reload(p, opener.as_deref());
    // A rendered object has no file of its own to be read again from.
    let reload: Option<&Reload<'_>> = if render { None } else { Some(&reload) };
    let report = compare_files_streamed(desired, read_live, reload, args.namespace.as_deref(), &engine, &options);
    line.finish();
    let code = finish(&report, args.output);
    // The process ends next: freeing the report drift by drift (every string of every drift,
    // about 5 ms on one core at 10,000 pairs, after the printing) would only delay the exit.
    std::mem::forget(report);
    code
}

/// How `compare_files_streamed` reads a desired object again from its file.
type Reload<'a> = dyn Fn(&drift_core::Provenance) -> Vec<drift_core::Resource> + Sync + 'a;

/// The desired side, each object made a `T`, and whether it was rendered: read as `drift render`
/// reads it when the folder holds what `drift scan` renders (a kustomization or a chart, found
/// by name before anything is read; an Argo CD or Flux object, found while the files are read),
/// else the files as they are.
/// With `cluster`, the ConfigMaps and Secrets Flux objects name that are not in the folder are
/// read from it.
fn load_desired<T: Send>(
    path: &std::path::Path,
    progress: &Progress,
    sops: Option<&dyn drift_core::sops::SopsOpener>,
    cluster: Option<Arc<dyn drift_core::drift_model::lookup::ObjectLookup>>,
    make: crate::files::Make<'_, T>,
    tree: Option<crate::files::MakeTree<'_, T>>,
) -> Result<(crate::files::Loaded<T>, bool)> {
    // The folder is listed once: for what it holds, then for the files to read.
    let walked = crate::files::walk(path)?;
    if holds_renderable(path, &walked) {
        return Ok((rendered(path, cluster, make)?, true));
    }
    let gitops = std::sync::atomic::AtomicBool::new(false);
    let noting = |r: drift_core::Resource| {
        if drift_git::is_gitops_object(&r) {
            gitops.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        make(r)
    };
    let noting_tree = tree.map(|make_tree| {
        let gitops = &gitops;
        move |t: ObjectTree<'_>| {
            if drift_git::is_gitops_key(&t.key) {
                gitops.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            make_tree(t)
        }
    });
    let noting_tree = noting_tree.as_ref().map(|f| f as crate::files::MakeTree<'_, T>);
    let loaded = crate::files::load(walked, progress, sops, &noting, noting_tree);
    if gitops.load(std::sync::atomic::Ordering::Relaxed) {
        return Ok((rendered(path, cluster, make)?, true));
    }
    Ok((loaded, false))
}

/// Whether the desired folder holds a kustomization or a chart (a file given alone never does).
fn holds_renderable(path: &std::path::Path, walked: &drift_manifest::walk::Walked) -> bool {
    path.is_dir()
        && walked.files.iter().any(|f| {
            let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
            matches!(name, "kustomization.yaml" | "kustomization.yml" | "Kustomization" | "Chart.yaml")
        })
}

/// The desired folder read as `drift render` reads it (Kustomize, Helm, the Argo CD and Flux
/// objects followed, with their notes).
fn rendered<T>(
    path: &std::path::Path,
    cluster: Option<Arc<dyn drift_core::drift_model::lookup::ObjectLookup>>,
    make: crate::files::Make<'_, T>,
) -> Result<crate::files::Loaded<T>> {
    let request = drift_git::RenderRequest::new(path.display().to_string());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let snapshot = runtime.block_on(drift_git::render_reading(&request, Progress::default(), cluster))?;
    Ok(crate::files::Loaded {
        resources: snapshot.resources.into_iter().map(make).collect(),
        warnings: snapshot.warnings,
    })
}

fn finish(report: &drift_core::ScanReport, output: Format) -> Result<ExitCode> {
    print_report(report, output, &mut std::io::stdout().lock())?;
    let broken = report.warnings.iter().any(|w| w.fatal);
    Ok(if broken {
        ExitCode::from(2)
    } else if report.drifts.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `drift diff --cluster`: the same comparison with the live state read from the cluster, only
/// for the (kind, namespace) pairs the desired state names. What could not be read is a warning
/// (exit code 2), never a missing object.
fn run_cluster(
    args: &DiffArgs,
    engine: &Engine,
    policy: Option<Arc<Policy>>,
    sops: Option<&dyn drift_core::sops::SopsOpener>,
    sops_recipients: Option<std::sync::Arc<[String]>>,
    line: crate::progress::Line,
    progress: Progress,
) -> Result<ExitCode> {
    let config = drift_kube::K8sConfig {
        kubeconfig: args.kubeconfig.clone(),
        context: args.context.clone(),
        server_side: args.server_side,
        ..drift_kube::K8sConfig::default()
    };
    // A worker thread drives the client while the desired side is rendered, and the render
    // reads Flux's value sources that are not in Git through it.
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    let source = Arc::new(runtime.block_on(crate::compose::cluster(config))?.with_progress(progress.clone()));
    let lookup = drift_kube::ClusterLookup::new(Arc::clone(&source), runtime.handle().clone());
    let (desired, _) = load_desired(&args.desired, &progress, sops, Some(Arc::new(lookup)), &|r| r, None)?;
    let mut desired = DesiredSnapshot {
        repository: args.desired.display().to_string(),
        revision: None,
        resources: desired.resources,
        warnings: desired.warnings,
    };
    let report = runtime.block_on(async {
        let mut options = ScanOptions::new("diff");
        options.default_namespace = args.namespace.clone().unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned());
        options.progress = progress;
        options.sops_recipients = sops_recipients;
        options.orphans = args.orphans;
        options.policy = policy;
        options.live_versions = false;
        // Custom kinds the cluster serves cluster-scoped get no namespace, as `kubectl apply`
        // would do.
        discover_cluster_scoped(source.as_ref(), &desired, &mut options).await;
        place_namespaces(&mut desired.resources, &options);
        let mut scope = desired.scope();
        if args.orphans {
            scope.only = None;
        }
        let live = drift_core::LiveSource::fetch(source.as_ref(), &scope).await?;
        let compared = args.server_side.then(|| (desired.resources.clone(), live.clone()));
        let mut report = compare_snapshots(desired, live, engine, &options);
        if let Some((desired, live)) = compared {
            source.review_server_side(engine, &desired, &live, &mut report).await;
        }
        anyhow::Ok(report)
    });
    line.finish();
    finish(&report?, args.output)
}
