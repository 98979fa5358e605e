//! `drift scan`: one scan now, recorded in the store, printed.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use drift_core::progress::Progress;
use drift_core::{ScanOutcome, ScanReport, Summary};

use crate::compose;
use crate::config::Config;
use crate::output::{Format, print_report};

/// Arguments of `drift scan`.
#[derive(Debug, Args)]
pub struct ScanArgs {
    /// Configuration file.
    #[arg(long, short)]
    pub config: PathBuf,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

/// Scans every repository once and records each report, then sends the notifications that are
/// due (a notifier that fails keeps its messages queued for the next `scan` or `serve`).
/// Returns the reports and how many of their drifts are under a waiver.
pub async fn scan_all(
    config: &Config,
    store: drift_runtime::Store,
    hasher: drift_core::normalize::SecretHasher,
) -> Result<(Vec<ScanReport>, usize)> {
    let progress = Progress::new();
    let cluster = compose::Cluster::open(config, &progress).await?;
    let detector = compose::detector(config, store, hasher, &cluster, false, &progress).await?.build()?;
    let line = crate::progress::Line::start("scan", &progress);
    let recorded = detector.scan_once_recorded().await;
    line.finish();
    let recorded = recorded?;
    match detector.deliver_now().await {
        Ok(Some(round)) => tracing::info!(?round, "notification round after the scan (failures stay queued)"),
        Ok(None) => {}
        Err(e) => tracing::warn!(error = %e, "notifications not sent; they stay queued"),
    }
    let waived = recorded.iter().map(|(_, o)| o.waived).sum();
    Ok((recorded.into_iter().map(|(r, _)| r).collect(), waived))
}

/// Several repositories' reports as one, for printing.
pub fn merge(reports: &[ScanReport]) -> Option<ScanReport> {
    let mut merged = reports.first()?.clone();
    for r in &reports[1..] {
        merged.drifts.extend(r.drifts.iter().cloned());
        merged.warnings.extend(r.warnings.iter().cloned());
        merged.outcome = match (merged.outcome, r.outcome) {
            (ScanOutcome::Failed, _) | (_, ScanOutcome::Failed) => ScanOutcome::Failed,
            (ScanOutcome::Partial, _) | (_, ScanOutcome::Partial) => ScanOutcome::Partial,
            _ => ScanOutcome::Success,
        };
        merged.summary.resources_compared += r.summary.resources_compared;
    }
    let compared = merged.summary.resources_compared;
    merged.summary = Summary::of(&merged.drifts, compared, merged.warnings.len());
    Some(merged)
}

/// Exit code of a report, as `drift diff`: drifts under a waiver (`waived` of them) do not
/// count.
pub fn exit_code(report: &ScanReport, waived: usize) -> ExitCode {
    if report.outcome == ScanOutcome::Failed || report.warnings.iter().any(|w| w.fatal) {
        ExitCode::from(2)
    } else if report.drifts.len() <= waived {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Runs `drift scan`.
pub async fn run(args: &ScanArgs) -> Result<ExitCode> {
    let config = Config::load(&args.config)?;
    let (store, hasher) = compose::open_scanning_store(&config).await?;
    let (reports, waived) = scan_all(&config, store, hasher).await?;
    let Some(report) = merge(&reports) else { return Ok(ExitCode::SUCCESS) };
    print_report(&report, args.output, &mut std::io::stdout().lock())?;
    if waived > 0 {
        eprintln!("{waived} of the drifts are under a waiver and do not count (drift drifts list --status waived)");
    }
    Ok(exit_code(&report, waived))
}
