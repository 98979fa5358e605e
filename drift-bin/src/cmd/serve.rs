//! `drift serve`: the detector of `drift-runtime` as a service (scans every interval with
//! jitter, watch mode, the REST API), stopped cleanly by SIGTERM or Ctrl-C. With
//! `leader_election`, only the replica holding the Lease scans, and it releases the Lease on
//! SIGTERM once its scan stopped.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use crate::compose;
use crate::config::Config;

/// Arguments of `drift serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Configuration file.
    #[arg(long, short)]
    pub config: PathBuf,
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
    let (store, hasher) = compose::open_scanning_store(&config).await?;
    let (tokens, read_token) = config.api.tokens()?;
    if tokens.is_empty() {
        tracing::warn!(
            variable = %config.api.token_env,
            "no API token in the environment: POST /scan, decisions and requeues are refused"
        );
    }
    let cluster = compose::Cluster::open(&config, &Default::default()).await?;
    let mut builder = compose::detector(&config, store, hasher, &cluster, true, &Default::default())
        .await?
        .tokens(tokens)
        .read_token(read_token);
    if let Some(elector) = compose::elector(&config, &cluster)? {
        if matches!(config.store_config()?, crate::config::StoreConfig::Sqlite(_)) {
            tracing::warn!(
                "leader election with SQLite: replicas do not share a SQLite file; use PostgreSQL for more than one replica"
            );
        }
        tracing::info!(
            lease = %elector.lock().describe(), identity = elector.lock().identity(),
            "leader election on: this replica scans only while it holds the lease"
        );
        builder = builder.leader_election(elector);
    }
    let detector = builder.build()?;
    let listener = tokio::net::TcpListener::bind(&config.api.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.api.listen))?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, cluster = %config.cluster, interval = ?config.interval, "serving");
    println!("listening on {addr}");
    detector.serve(listener, shutdown_signal()).await.context("API server")?;
    Ok(ExitCode::SUCCESS)
}
