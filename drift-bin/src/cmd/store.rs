//! `drift migrate`, `drift drifts list`, `drift drifts get`, `drift findings list`, `drift config check`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use drift_api::DriftDetail;
use drift_core::policy::{Rule, Side};
use drift_core::sink::{DriftFilter, DriftPage, DriftStatus, FindingFilter, FindingPage, FindingStatus, PageRequest};
use drift_core::{DriftType, ErrorKind, Severity};

use crate::cmd::decide::when;
use crate::compose;
use crate::config::Config;
use crate::output::{Format, OutputArgs, print_data};

/// Arguments of commands that only need the configuration.
#[derive(Debug, Args)]
pub struct ConfigArg {
    /// Configuration file.
    #[arg(long, short)]
    pub config: PathBuf,
}

/// `drift migrate`: creates or upgrades the store's schema.
pub async fn migrate(args: &ConfigArg) -> Result<ExitCode> {
    let config = Config::load(&args.config)?;
    compose::open_store(&config.store_config()?).await?;
    println!("store is at the latest schema");
    Ok(ExitCode::SUCCESS)
}

/// `drift config check FILE`.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate a configuration file without running anything.
    Check {
        /// The file.
        file: PathBuf,
    },
}

/// Runs `drift config ...`.
pub fn config(cmd: &ConfigCommand) -> Result<ExitCode> {
    match cmd {
        ConfigCommand::Check { file } => {
            let c = Config::load(file)?;
            println!(
                "{}: valid ({} repositories, cluster {}, store {})",
                file.display(),
                c.repositories.len(),
                c.cluster,
                match &c.database_env {
                    Some(var) => format!("from the environment variable {var}"),
                    None => c.store_config()?.display(),
                }
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `drift drifts ...`.
#[derive(Debug, Subcommand)]
pub enum DriftsCommand {
    /// List recorded drifts, newest first.
    List(ListArgs),
    /// Show one drift with its decisions, its notifications and what similar decisions teach.
    Get(GetArgs),
}

/// Arguments of `drift drifts get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    /// The drift's id.
    #[arg(value_parser = clap::value_parser!(i64).range(1..))]
    pub id: i64,
    /// Configuration file.
    #[arg(long, short)]
    pub config: PathBuf,
    /// Output format (json: the answer of `GET /drifts/{id}`).
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

/// Filters of `drift drifts list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Configuration file.
    #[arg(long, short)]
    pub config: PathBuf,
    /// open, waived or resolved.
    #[arg(long)]
    pub status: Option<DriftStatus>,
    /// LOW, MEDIUM, HIGH or CRITICAL.
    #[arg(long)]
    pub severity: Option<Severity>,
    /// A drift type (replicas_drift, ...).
    #[arg(long = "type")]
    pub drift_type: Option<DriftType>,
    /// Namespace.
    #[arg(long)]
    pub namespace: Option<String>,
    /// Kind.
    #[arg(long)]
    pub kind: Option<String>,
    /// Repository.
    #[arg(long)]
    pub repository: Option<String>,
    /// Cluster (several clusters may share one store).
    #[arg(long)]
    pub cluster: Option<String>,
    /// Most rows.
    #[arg(long, default_value_t = 100)]
    pub limit: u32,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Runs `drift drifts ...`.
pub async fn drifts(cmd: &DriftsCommand) -> Result<ExitCode> {
    match cmd {
        DriftsCommand::List(args) => list(args).await,
        DriftsCommand::Get(args) => get(args).await,
    }
}

async fn list(args: &ListArgs) -> Result<ExitCode> {
    let config = Config::load(&args.config)?;
    let store = compose::open_store(&config.store_config()?).await?;
    let filter = DriftFilter {
        status: args.status,
        severity: args.severity,
        drift_type: args.drift_type,
        namespace: args.namespace.clone(),
        kind: args.kind.clone(),
        repository: args.repository.clone(),
        cluster: args.cluster.clone(),
        ..DriftFilter::default()
    };
    let page = store.read.list(&filter, PageRequest { limit: args.limit, after: None }).await?;
    print_data(&page, args.output.format(), print_drift_table)?;
    Ok(ExitCode::SUCCESS)
}

/// The table of `drift drifts list`.
fn print_drift_table(page: &DriftPage) {
    println!("{:>6}  {:<17}  {:<9}  {:<22}  {:<40}  {:<5}  PATH", "ID", "STATUS", "SEVERITY", "TYPE", "OBJECT", "SEEN");
    for d in &page.items {
        let ns = if d.namespace.is_empty() { String::new() } else { format!("{}/", d.namespace) };
        // `resolved:accepted`: how a resolved drift went away.
        let status = match d.resolution {
            Some(r) => format!("{}:{}", d.status.as_str(), r.as_str()),
            None => d.status.as_str().to_owned(),
        };
        println!(
            "{:>6}  {:<17}  {:<9}  {:<22}  {:<40}  {:<5}  {}",
            d.id,
            status,
            d.severity.as_str(),
            d.drift_type.as_str(),
            format!("{} {ns}{}", d.resource_kind, d.resource_name),
            d.occurrences,
            d.path
        );
    }
    if page.items.is_empty() {
        eprintln!("no drift matches");
    }
}

/// `drift findings ...`.
#[derive(Debug, Subcommand)]
pub enum FindingsCommand {
    /// List recorded policy findings (docs/policies.md), newest first.
    List(FindingListArgs),
}

/// Filters of `drift findings list`.
#[derive(Debug, Args)]
pub struct FindingListArgs {
    /// Configuration file.
    #[arg(long, short)]
    pub config: PathBuf,
    /// open or resolved.
    #[arg(long)]
    pub status: Option<FindingStatus>,
    /// A rule (image-tag, resource-limits, run-as-root, ...).
    #[arg(long)]
    pub rule: Option<Rule>,
    /// LOW, MEDIUM, HIGH or CRITICAL.
    #[arg(long)]
    pub severity: Option<Severity>,
    /// desired (Git) or live (the cluster).
    #[arg(long)]
    pub side: Option<Side>,
    /// Namespace.
    #[arg(long)]
    pub namespace: Option<String>,
    /// Kind.
    #[arg(long)]
    pub kind: Option<String>,
    /// Repository.
    #[arg(long)]
    pub repository: Option<String>,
    /// Cluster (several clusters may share one store).
    #[arg(long)]
    pub cluster: Option<String>,
    /// Most rows.
    #[arg(long, default_value_t = 100)]
    pub limit: u32,
    // `-o json` prints the answer of `GET /findings`.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Runs `drift findings ...`.
pub async fn findings(cmd: &FindingsCommand) -> Result<ExitCode> {
    let FindingsCommand::List(args) = cmd;
    let config = Config::load(&args.config)?;
    let store = compose::open_store(&config.store_config()?).await?;
    let filter = FindingFilter {
        status: args.status,
        rule: args.rule,
        severity: args.severity,
        side: args.side,
        namespace: args.namespace.clone(),
        kind: args.kind.clone(),
        repository: args.repository.clone(),
        cluster: args.cluster.clone(),
    };
    let page = store.read.findings(&filter, PageRequest { limit: args.limit, after: None }).await?;
    print_data(&page, args.output.format(), |page| print_finding_table(page, config.policies.enabled))?;
    Ok(ExitCode::SUCCESS)
}

/// The table of `drift findings list`; `checked`: whether the configuration turns policies on
/// (it says why there may be no finding).
fn print_finding_table(page: &FindingPage, checked: bool) {
    println!(
        "{:>6}  {:<8}  {:<9}  {:<18}  {:<7}  {:<40}  {:<5}  MESSAGE",
        "ID", "STATUS", "SEVERITY", "RULE", "SIDE", "OBJECT", "SEEN"
    );
    for f in &page.items {
        let ns = if f.namespace.is_empty() { String::new() } else { format!("{}/", f.namespace) };
        let container = f.container.as_deref().map(|c| format!(" [{c}]")).unwrap_or_default();
        println!(
            "{:>6}  {:<8}  {:<9}  {:<18}  {:<7}  {:<40}  {:<5}  {}",
            f.id,
            f.status.as_str(),
            f.severity.as_str(),
            f.rule.as_str(),
            f.side.as_str(),
            format!("{} {ns}{}{container}", f.resource_kind, f.resource_name),
            f.occurrences,
            f.message
        );
    }
    if page.items.is_empty() {
        // On standard error: the table on standard output stays a header and its rows.
        if checked {
            eprintln!("no finding matches (findings are recorded by scans with `policies:` enabled)");
        } else {
            eprintln!(
                "no finding: policy checks are off (turn them on with `policies: {{enabled: true}}` in the configuration, see docs/policies.md)"
            );
        }
    }
}

/// `drift drifts get ID`: exit 0, or 1 when there is no such drift.
async fn get(args: &GetArgs) -> Result<ExitCode> {
    let config = Config::load(&args.config)?;
    let (read, act) = compose::open_act_store(&config.store_config()?).await?;
    let classifier = drift_core::drift_engine::classify::Classifier::new(config.classify);
    let detail = match drift_api::drift_detail(read.as_ref(), Some(act.as_ref()), Some(&classifier), args.id).await {
        Ok(d) => d,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            eprintln!("error: no drift with id {}", args.id);
            return Ok(ExitCode::from(1));
        }
        Err(e) => return Err(e.into()),
    };
    print_data(&detail, args.output, print_detail)?;
    Ok(ExitCode::SUCCESS)
}

fn value(v: &Option<serde_json::Value>) -> String {
    match v {
        None => "<absent>".to_owned(),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn print_detail(detail: &DriftDetail) {
    let d = &detail.drift;
    let ns = if d.namespace.is_empty() { String::new() } else { format!("{}/", d.namespace) };
    let status = match d.resolution {
        Some(r) => format!("{}:{}", d.status.as_str(), r.as_str()),
        None => d.status.as_str().to_owned(),
    };
    println!("drift {}  {status}  {}  {}", d.id, d.severity.as_str(), d.drift_type.as_str());
    println!(
        "  object:     {} {ns}{}  (cluster {}, repository {})",
        d.resource_kind, d.resource_name, d.cluster, d.repository
    );
    println!("  path:       {}", if d.path.is_empty() { "<object>" } else { &d.path });
    println!("  - git:      {}", value(&d.git_value));
    println!("  + cluster:  {}", value(&d.cluster_value));
    let by = match (&d.changed_by, d.changed_at) {
        (Some(m), Some(t)) => format!("{m} at {}", when(t)),
        (Some(m), None) => m.clone(),
        _ => "unknown".to_owned(),
    };
    println!(
        "  changed by: {by}; {}; {}; decided by {}",
        d.classification.as_str(),
        d.recommended_action.as_str(),
        d.decision_source.as_str()
    );
    if let Some(who) = &d.changed_by_user {
        println!("  changed by user: {}", who.describe());
    }
    println!("  seen:       {} to {}, {} time(s)", when(d.detected_at), when(d.last_seen), d.occurrences);
    if let Some(t) = d.waived_until {
        println!("  waived until {}", when(t));
    }
    if let Some(t) = d.acknowledged_at {
        println!("  acknowledged at {}", when(t));
    }
    if let Some(r) = &d.revert
        && d.status.as_str() != "resolved"
    {
        println!("  revert:     {}", r.command);
        println!(
            "              (or: drift fix {} --revert; to keep the cluster's value: drift fix {} --accept)",
            d.id, d.id
        );
    }
    match &detail.learned {
        Some(l) => println!("  learned:    {}", l.explanation),
        None => println!("  learned:    nothing yet (no decision on similar drifts)"),
    }
    match &detail.prediction {
        Some(p) => {
            let used = match (p.used, p.min_confidence) {
                (true, _) => "used".to_owned(),
                (false, Some(min)) => format!("shown only: below classify.min_confidence {min} or too few decisions"),
                (false, None) => "shown only: no `classify:` settings".to_owned(),
            };
            println!(
                "  predicted:  {} ({:.0}%, learned from {} decided drift(s); {used})",
                p.intent.as_str(),
                p.confidence * 100.0,
                p.examples
            );
            for r in &p.reasons {
                println!("              {}", r.text);
            }
        }
        None => println!("  predicted:  nothing yet (no decided drift to learn from)"),
    }
    println!("decisions:{}", if detail.decisions.is_empty() { " none" } else { "" });
    for x in &detail.decisions {
        let until = x.expires_at.map(|t| format!("  until {}", when(t))).unwrap_or_default();
        let comment = x.comment.as_deref().map(|c| format!("  {c:?}")).unwrap_or_default();
        println!("  {}  {:<11}  {}{until}{comment}", when(x.decided_at), x.action.as_str(), x.actor);
    }
    println!("notifications:{}", if detail.notifications.is_empty() { " none" } else { "" });
    for n in &detail.notifications {
        let error = n.last_error.as_deref().map(|e| format!("  {e}")).unwrap_or_default();
        println!(
            "  {}  {:<12}  {:<14}  {:<8}  {} attempt(s){error}",
            when(n.sent_at.unwrap_or(n.due_at)),
            n.notifier,
            n.kind.as_str(),
            n.status.as_str(),
            n.attempts
        );
    }
}
