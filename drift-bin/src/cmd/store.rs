//! `drift migrate`, `drift drifts list`, `drift config check`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use drift_core::sink::{DriftFilter, DriftStatus, PageRequest};
use drift_core::{DriftType, Severity};

use crate::compose;
use crate::config::Config;

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
}

/// Filters of `drift drifts list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Configuration file.
    #[arg(long, short)]
    pub config: PathBuf,
    /// open or resolved.
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
    /// Most rows.
    #[arg(long, default_value_t = 100)]
    pub limit: u32,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `drift drifts ...`.
pub async fn drifts(cmd: &DriftsCommand) -> Result<ExitCode> {
    let DriftsCommand::List(args) = cmd;
    let config = Config::load(&args.config)?;
    let store = compose::open_store(&config.store_config()?).await?;
    let filter = DriftFilter {
        status: args.status,
        severity: args.severity,
        drift_type: args.drift_type,
        namespace: args.namespace.clone(),
        kind: args.kind.clone(),
        repository: args.repository.clone(),
        ..DriftFilter::default()
    };
    let page = store.read.list(&filter, PageRequest { limit: args.limit, after: None }).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&page)?);
        return Ok(ExitCode::SUCCESS);
    }
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
    Ok(ExitCode::SUCCESS)
}
