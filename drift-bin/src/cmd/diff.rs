//! `drift diff`: the engine on files or folders.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use drift_core::ignore::IgnoreRule;
use drift_core::scan::{ScanOptions, compare_snapshots};
use drift_core::{Coverage, DesiredSnapshot, Engine, EngineConfig, LiveSnapshot};

use crate::output::{Format, print_report};

/// Arguments of `drift diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// Desired state: a YAML or JSON file (several documents, or a List) or a folder of them.
    #[arg(long)]
    pub desired: PathBuf,
    /// Live state: the same, for example the output of `kubectl get -o yaml`.
    #[arg(long)]
    pub live: PathBuf,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub output: Format,
    /// A YAML file with a list of ignore rules (or engine settings: `ignore`, `severity`, ...).
    #[arg(long)]
    pub ignore: Option<PathBuf>,
    /// Namespace of desired objects that name none.
    #[arg(long, default_value = "default")]
    pub namespace: String,
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

/// Runs `drift diff`; the exit code says whether drift was found.
pub fn run(args: &DiffArgs) -> Result<ExitCode> {
    let engine = Engine::new(&engine_config(args.ignore.as_ref())?)?;
    let desired = crate::files::load(&args.desired)?;
    let mut live = crate::files::load(&args.live)?;
    for r in &mut live.resources {
        if r.key.namespace.is_none() && !drift_core::is_cluster_scoped(&r.key.group, &r.key.kind) {
            r.key.namespace = Some(args.namespace.clone());
        }
    }
    let mut desired = DesiredSnapshot {
        repository: args.desired.display().to_string(),
        revision: None,
        resources: desired.resources,
        warnings: desired.warnings,
    };
    desired.default_namespace(&args.namespace);
    // Files hold everything they hold: every (kind, namespace) Git names is complete.
    let coverage = Coverage::complete(&desired.scope());
    let live_warnings = live.warnings;
    let live = LiveSnapshot { cluster: "files".to_owned(), resources: live.resources, coverage };
    let mut options = ScanOptions::new("diff");
    options.default_namespace = args.namespace.clone();
    let mut report = compare_snapshots(desired, live, &engine, &options);
    report.warnings.extend(live_warnings);
    print_report(&report, args.output, &mut std::io::stdout().lock())?;
    let broken = report.warnings.iter().any(|w| w.fatal);
    Ok(if broken {
        ExitCode::from(2)
    } else if report.drifts.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
