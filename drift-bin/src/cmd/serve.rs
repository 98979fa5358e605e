//! `drift serve`: scans every interval (with jitter, never two at once), re-compares what the
//! cluster changes (watch mode), serves the REST API, and shuts down cleanly on SIGTERM/SIGINT.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use async_trait::async_trait;
use clap::Args;
use drift_api::{ApiState, ApiToken, Metrics, ScanGate, ScanTrigger, TriggerOutcome};
use drift_core::scan::run_scan;
use drift_core::{DesiredSource, Engine, LiveSource, ScanReport};
use tokio::sync::watch;

use crate::compose::{self, Store};
use crate::config::Config;

/// Arguments of `drift serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Configuration file.
    #[arg(long, short)]
    pub config: PathBuf,
}

/// Everything a scan pass needs; shared by the scheduler, the API and the watcher.
#[derive(Debug)]
pub struct Scanner {
    config: Config,
    store: Store,
    engine: Engine,
    live: Arc<dyn LiveSource>,
    desired: Vec<Arc<dyn DesiredSource>>,
    metrics: Metrics,
    gate: ScanGate,
}

impl Scanner {
    /// One pass over every repository; `None` when a pass is already running.
    pub async fn pass(&self, scan_id: String) -> Option<Vec<ScanReport>> {
        let permit = self.gate.try_start(scan_id.clone()).ok()?;
        let mut reports = Vec::new();
        for (i, desired) in self.desired.iter().enumerate() {
            let started = Instant::now();
            let mut options = compose::scan_options(&self.config);
            options.scan_id = if self.desired.len() == 1 { scan_id.clone() } else { format!("{scan_id}-{i}") };
            let report = run_scan(desired.as_ref(), self.live.as_ref(), &self.engine, &options).await;
            self.metrics.record_scan(&report, started.elapsed());
            // The store being down must not stop the scanner: the failure is logged and counted,
            // drifts stay as they were, and the next pass writes a complete report again.
            match self.store.sink.record(&report).await {
                Ok(o) => tracing::info!(
                    scan_id = %report.scan_id, repository = %report.repository, outcome = report.outcome.as_str(),
                    drifts = report.drifts.len(), opened = o.opened, resolved = o.resolved, "scan recorded"
                ),
                Err(e) => {
                    self.metrics.record_source_error(e.kind());
                    tracing::error!(scan_id = %report.scan_id, repository = %report.repository, error = %e, "store unavailable; report not recorded");
                }
            }
            reports.push(report);
        }
        drop(permit);
        Some(reports)
    }
}

#[derive(Debug)]
struct Trigger {
    scanner: Arc<Scanner>,
    shutdown: watch::Receiver<bool>,
}

#[async_trait]
impl ScanTrigger for Trigger {
    async fn trigger(&self, wait: bool) -> drift_core::Result<TriggerOutcome> {
        if *self.shutdown.borrow() {
            return Err(drift_core::Error::unavailable("shutting down"));
        }
        if let Some(running) = self.scanner.gate.running() {
            return Ok(TriggerOutcome::AlreadyRunning { scan_id: Some(running) });
        }
        let scan_id = compose::new_scan_id();
        if wait {
            return match self.scanner.pass(scan_id.clone()).await {
                Some(reports) => Ok(TriggerOutcome::Finished { scan_id, reports }),
                None => Ok(TriggerOutcome::AlreadyRunning { scan_id: self.scanner.gate.running() }),
            };
        }
        let scanner = self.scanner.clone();
        let id = scan_id.clone();
        tokio::spawn(async move { scanner.pass(id).await });
        Ok(TriggerOutcome::Started { scan_id })
    }
}

/// Up to 10% of the interval, from the clock's sub-second noise (no RNG needed for spreading).
fn jitter(interval: Duration) -> Duration {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    interval.mul_f64(f64::from(nanos % 1000) / 10_000.0)
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM; only Ctrl-C stops the server");
                if let Err(e) = ctrl_c.await {
                    tracing::error!(error = %e, "cannot listen for Ctrl-C either; stopping now");
                }
                return;
            }
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    if let Err(e) = ctrl_c.await {
        tracing::error!(error = %e, "cannot listen for Ctrl-C; stopping now");
    }
}

/// Runs `drift serve` until SIGTERM or Ctrl-C.
pub async fn run(args: &ServeArgs) -> Result<ExitCode> {
    let config = Config::load(&args.config)?;
    let store = compose::open_store(&config.database_url()?, config.retention_days).await?;
    let token = ApiToken::from_env(&config.api.token_env)?;
    if token.is_none() {
        tracing::warn!(variable = %config.api.token_env, "no API token in the environment: POST /scan is refused");
    }
    let scanner = Arc::new(Scanner {
        engine: compose::engine(&config)?,
        live: compose::live_source(&config).await?,
        desired: compose::desired_sources(&config, true)?,
        store: store.clone(),
        metrics: Metrics::new(),
        gate: ScanGate::new(),
        config: config.clone(),
    });
    let (stop_tx, stop_rx) = watch::channel(false);
    let state =
        ApiState::new(store.read.clone(), Arc::new(Trigger { scanner: scanner.clone(), shutdown: stop_rx.clone() }))
            .with_token(token)
            .with_metrics(scanner.metrics.clone())
            .with_max_scan_age(config.interval * 3);
    let listener = tokio::net::TcpListener::bind(&config.api.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.api.listen))?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, cluster = %config.cluster, interval = ?config.interval, "serving");
    println!("listening on {addr}");

    // The scheduler: a pass now, then every interval plus jitter.
    let sched = {
        let scanner = scanner.clone();
        let mut stop = stop_rx.clone();
        let interval = config.interval;
        tokio::spawn(async move {
            loop {
                if scanner.pass(compose::new_scan_id()).await.is_none() {
                    tracing::info!("a scan is already running; this tick is skipped");
                }
                tokio::select! {
                    _ = tokio::time::sleep(interval + jitter(interval)) => {}
                    _ = stop.changed() => break,
                }
            }
        })
    };
    let watcher = if config.watch { crate::cluster::spawn_watch(scanner.clone(), stop_rx.clone()) } else { None };

    let mut stop_api = stop_rx.clone();
    let server = axum::serve(listener, drift_api::router(state)).with_graceful_shutdown(async move {
        // Either a stop was sent or every sender is gone: both mean shut down.
        stop_api.changed().await.ok();
    });
    let server = tokio::spawn(async move { server.await });
    shutdown_signal().await;
    tracing::info!("shutting down: the running scan finishes or is abandoned before its report is written");
    stop_tx.send_replace(true);
    // A scan in progress gets a bounded time to finish; its report is one transaction, so an
    // abandoned scan leaves nothing half-written.
    match tokio::time::timeout(Duration::from_secs(20), sched).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::error!(error = %e, "the scheduler task failed"),
        Err(_) => {
            tracing::warn!("the running scan did not finish within 20 s and is abandoned; its report is not written")
        }
    }
    if let Some(w) = watcher {
        w.abort();
    }
    server.await.context("API server task")?.context("API server")?;
    Ok(ExitCode::SUCCESS)
}

impl Scanner {
    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }
    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }
    /// The metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }
    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }
    /// The desired sources.
    pub fn desired(&self) -> &[Arc<dyn DesiredSource>] {
        &self.desired
    }
    /// The live source.
    pub fn live(&self) -> &Arc<dyn LiveSource> {
        &self.live
    }
}
