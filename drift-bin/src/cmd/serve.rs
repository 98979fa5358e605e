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

/// The namespace of the pod this process runs in: `$POD_NAMESPACE`, else the service
/// account's namespace file; `None` outside a pod.
fn pod_namespace() -> Option<String> {
    std::env::var("POD_NAMESPACE")
        .ok()
        .or_else(|| std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace").ok())
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty())
}

/// A listener on `addr` whose queue of connections not yet accepted holds `max_connections`
/// (the kernel caps it at `net.core.somaxconn`). The default queue (128) overflows under a burst
/// of new connections: the kernel then drops the handshake's last packet, and a client that
/// sends nothing is left with a connection the server never sees, which no timeout can close.
fn listen(addr: &str, max_connections: usize) -> Result<tokio::net::TcpListener> {
    let addr: std::net::SocketAddr = addr.parse()?;
    let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    Ok(socket.listen(u32::try_from(max_connections).unwrap_or(u32::MAX).max(128))?)
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
    // POST /check renders the repositories at another ref with the same configuration.
    let merge_check = crate::cmd::check::ConfigCheck {
        config: config.clone(),
        store: store.clone(),
        hasher: hasher.clone(),
        cluster: cluster.clone(),
    };
    let mut builder = compose::detector(&config, store, hasher, &cluster, true, &Default::default())
        .await?
        .merge_check(std::sync::Arc::new(merge_check))
        .tokens(tokens)
        .read_token(read_token)
        .server_limits(config.api.server_limits())
        .allowed_hosts(config.api.allowed_hosts(pod_namespace().as_deref())?);
    if let Some(sharding) = compose::sharding(&config).await? {
        builder = builder.sharding(sharding);
    } else if let Some(elector) = compose::elector(&config, &cluster)? {
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
    let listener = listen(&config.api.listen, config.api.max_connections)
        .with_context(|| format!("cannot listen on {}", config.api.listen))?;
    let addr = listener.local_addr()?;
    tracing::info!(%addr, cluster = %config.cluster, interval = ?config.interval, "serving");
    println!("listening on {addr}");
    detector.serve(listener, shutdown_signal()).await.context("API server")?;
    Ok(ExitCode::SUCCESS)
}
