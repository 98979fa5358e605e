//! `drift scan`: one scan now, recorded in the store, printed.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
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

/// Scans every repository once and records each report. Returns the reports.
pub async fn scan_all(config: &Config, store: drift_runtime::Store) -> Result<Vec<ScanReport>> {
    let detector = compose::detector(config, store, false).await?.build()?;
    Ok(detector.scan_once().await?)
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

/// Exit code of a report, as `drift diff`.
pub fn exit_code(report: &ScanReport) -> ExitCode {
    if report.outcome == ScanOutcome::Failed || report.warnings.iter().any(|w| w.fatal) {
        ExitCode::from(2)
    } else if report.drifts.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Runs `drift scan`.
pub async fn run(args: &ScanArgs) -> Result<ExitCode> {
    let config = Config::load(&args.config)?;
    let store = compose::open_store(&config.store_config()?).await?;
    let reports = scan_all(&config, store).await?;
    let Some(report) = merge(&reports) else { return Ok(ExitCode::SUCCESS) };
    print_report(&report, args.output, &mut std::io::stdout().lock())?;
    Ok(exit_code(&report))
}
