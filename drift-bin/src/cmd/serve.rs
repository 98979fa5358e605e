//! `drift serve`: the detector of `drift-runtime` as a service (scans every interval with
//! jitter, watch mode, the REST API), stopped cleanly by SIGTERM or Ctrl-C (a second signal,
//! or [`SHUTDOWN_DEADLINE`] after the first, ends it at once with exit code 2). With
//! `leader_election`, only the replica holding the Lease scans, and it releases the Lease on
//! SIGTERM once its scan stopped.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use crate::compose;
use crate::config::Config;
use crate::signals::Stops;

/// Arguments of `drift serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Configuration file.
    #[arg(long, short)]
    pub config: PathBuf,
}

/// How long `drift serve` may take to stop after SIGTERM or Ctrl-C before it exits with code 2
/// wherever it is: the running scan's grace ([`drift_runtime::SHUTDOWN_GRACE`]), the notifier's
/// 5 s, and the leases' release. Kubernetes kills the pod after its own grace (30 s unless the
/// pod says otherwise); this bounds a stop everywhere else (systemd, a container run by hand, a
/// test), so that a shutdown stuck on anything cannot keep a stopped service alive.
const SHUTDOWN_DEADLINE: std::time::Duration =
    drift_runtime::SHUTDOWN_GRACE.saturating_add(std::time::Duration::from_secs(20));

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
    // Before anything else (crate::signals says why).
    let mut stops = Stops::listen()?;
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
    let shutdown = async move {
        stops.next().await;
        // The shutdown is bounded: a second signal, or the deadline, ends the process at once.
        std::thread::spawn(|| {
            std::thread::sleep(SHUTDOWN_DEADLINE);
            tracing::error!(deadline = ?SHUTDOWN_DEADLINE, "the shutdown did not finish in time; exiting now");
            std::process::exit(2);
        });
        tokio::spawn(async move {
            stops.next().await;
            tracing::warn!("a second signal: exiting now");
            std::process::exit(2);
        });
    };
    detector.serve(listener, shutdown).await.context("API server")?;
    Ok(ExitCode::SUCCESS)
}
