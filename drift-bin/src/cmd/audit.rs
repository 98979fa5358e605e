//! `drift audit list`: the audit trail of the configured store, newest first (docs/decisions.md).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use chrono::Utc;
use clap::{Args, Subcommand};
use drift_core::act::{AuditAction, AuditEntry, AuditFilter};
use drift_core::sink::PageRequest;

use crate::cmd::decide::{TimeArg, parse_time, when};
use crate::compose;
use crate::config::Config;
use crate::output::{Format, print_data};

/// `drift audit ...`.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// List the audit trail, newest first: scans, decisions, waivers that ended, notification
    /// attempts, requeues.
    List(AuditListArgs),
}

/// Filters of `drift audit list`.
#[derive(Debug, Args)]
pub struct AuditListArgs {
    /// Configuration file.
    #[arg(long, short)]
    pub config: PathBuf,
    /// decision, waiver_expired, waiver_ended, notification, scan or requeue.
    #[arg(long, value_parser = parse_action)]
    pub action: Option<AuditAction>,
    /// Only about this drift.
    #[arg(long = "drift", value_name = "ID", value_parser = clap::value_parser!(i64).range(1..))]
    pub drift_id: Option<i64>,
    /// Only by this actor (a token's name, a CLI user, scanner, notifier:NAME).
    #[arg(long)]
    pub actor: Option<String>,
    /// Only about this notifier.
    #[arg(long)]
    pub notifier: Option<String>,
    /// Only with this outcome (a decision's action, a delivery's status, a scan's outcome).
    #[arg(long)]
    pub status: Option<String>,
    /// Only entries at or after this time: an RFC 3339 time, or a duration ago (1h, 7d).
    #[arg(long, value_parser = parse_time, value_name = "TIME|DURATION")]
    pub since: Option<TimeArg>,
    /// Most entries (1 to 1000).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub limit: u32,
    /// Entries older than this one (the cursor printed after a full page).
    #[arg(long, value_parser = clap::value_parser!(i64).range(1..))]
    pub after: Option<i64>,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

fn parse_action(s: &str) -> Result<AuditAction, String> {
    s.parse().map_err(|e: drift_core::Error| e.message().to_owned())
}

/// Runs `drift audit ...`.
pub async fn run(cmd: &AuditCommand) -> Result<ExitCode> {
    let AuditCommand::List(args) = cmd;
    let since = args.since.map(|s| s.before(Utc::now()));
    let filter = AuditFilter {
        action: args.action,
        drift_id: args.drift_id,
        actor: args.actor.clone(),
        notifier: args.notifier.clone(),
        status: args.status.clone(),
        since,
    };
    let config = Config::load(&args.config)?;
    let (_, act) = compose::open_act_store(&config.store_config()?).await?;
    let page = act.audit(&filter, PageRequest { limit: args.limit, after: args.after }).await?;
    print_data(&page, args.output, |page| {
        println!(
            "{:>7}  {:<20}  {:<14}  {:<18}  {:>6}  {:<12}  {:<10}  DETAIL",
            "ID", "AT", "ACTION", "ACTOR", "DRIFT", "NOTIFIER", "STATUS"
        );
        for e in &page.items {
            println!(
                "{:>7}  {:<20}  {:<14}  {:<18}  {:>6}  {:<12}  {:<10}  {}",
                e.id,
                when(e.at),
                e.action.as_str(),
                e.actor,
                e.drift_id.map(|d| d.to_string()).unwrap_or_default(),
                e.notifier.as_deref().unwrap_or(""),
                e.status,
                detail(e)
            );
        }
        if let Some(next) = page.next {
            println!("more: --after {next}");
        }
    })?;
    Ok(ExitCode::SUCCESS)
}

/// One line of what an entry holds besides its columns: the attempt and error of a delivery,
/// the comment and expiry of a decision, the scan, the rest as compact JSON.
fn detail(e: &AuditEntry) -> String {
    let mut parts = Vec::new();
    if let Some(n) = e.attempts {
        parts.push(format!("attempt {n}"));
    }
    if let Some(scan) = &e.scan_id {
        parts.push(format!("scan {scan}"));
    }
    if let Some(id) = &e.event_id {
        parts.push(format!("event {id}"));
    }
    if let Some(map) = e.detail.as_object() {
        for (k, v) in map {
            match v {
                serde_json::Value::Null => {}
                serde_json::Value::String(s) => parts.push(format!("{k}: {s}")),
                other => parts.push(format!("{k}: {other}")),
            }
        }
    }
    parts.join("; ")
}
