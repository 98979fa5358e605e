//! `drift-test-apiserver --listen 127.0.0.1:PORT --kubeconfig PATH [--token T] [--faults FILE]
//! [--admission FILE] [--token-auth-file CSV] [--audit-log-path FILE] [--audit-level Metadata|Request]`

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use drift_test_apiserver::{Admission, Faults, Options, TestApiServer};

/// A Kubernetes API server for tests.
#[derive(Debug, Parser)]
#[command(name = "drift-test-apiserver", version)]
struct Args {
    /// Address to listen on (port 0 picks a free port; the real address is printed).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Where to write a kubeconfig for kubectl and kube-rs.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// Require this bearer token (401 otherwise).
    #[arg(long, env = "DRIFT_TEST_APISERVER_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// YAML or JSON file of faults to inject.
    #[arg(long)]
    faults: Option<PathBuf>,
    /// YAML or JSON file of mutation rules (simulated mutating admission webhooks).
    #[arg(long)]
    admission: Option<PathBuf>,
    /// Changes kept for watches; older resourceVersions get 410 Gone.
    #[arg(long, default_value_t = 100_000)]
    history: usize,
    /// Serve HTTPS with the built-in test certificate (kubectl sends tokens only over TLS).
    #[arg(long)]
    tls: bool,
    /// Named users: a CSV file of `token,user,uid[,"group1,group2"]` lines, as kube-apiserver's
    /// `--token-auth-file`.
    #[arg(long)]
    token_auth_file: Option<PathBuf>,
    /// Write a Kubernetes audit log (JSON lines of audit.k8s.io/v1 events) to this file.
    #[arg(long)]
    audit_log_path: Option<PathBuf>,
    /// The level of every audit event: Metadata or Request (with the request body of writes).
    #[arg(long, default_value = "Metadata")]
    audit_level: drift_test_apiserver::audit::AuditLevel,
    /// Seconds between BOOKMARK events on watches that allow them.
    #[arg(long, default_value_t = 60)]
    bookmark_seconds: u64,
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let faults = match &args.faults {
        Some(p) => match std::fs::read_to_string(p)
            .map_err(|e| e.to_string())
            .and_then(|t| Faults::from_yaml(&t).map_err(|e| e.to_string()))
        {
            Ok(f) => f,
            Err(e) => {
                eprintln!("drift-test-apiserver: cannot read faults {}: {e}", p.display());
                return std::process::ExitCode::from(2);
            }
        },
        None => Faults::default(),
    };
    let admission = match &args.admission {
        Some(p) => match std::fs::read_to_string(p)
            .map_err(|e| e.to_string())
            .and_then(|t| Admission::from_yaml(&t).map_err(|e| e.to_string()))
        {
            Ok(a) => a,
            Err(e) => {
                eprintln!("drift-test-apiserver: cannot read admission rules {}: {e}", p.display());
                return std::process::ExitCode::from(2);
            }
        },
        None => Admission::default(),
    };
    let users = match &args.token_auth_file {
        Some(p) => match std::fs::read_to_string(p)
            .map_err(|e| e.to_string())
            .and_then(|t| drift_test_apiserver::audit::parse_token_file(&t).map_err(|e| e.to_string()))
        {
            Ok(u) => u,
            Err(e) => {
                eprintln!("drift-test-apiserver: cannot read the token file {}: {e}", p.display());
                return std::process::ExitCode::from(2);
            }
        },
        None => Vec::new(),
    };
    let opts = Options {
        listen: args.listen,
        token: args.token,
        faults,
        admission,
        kubeconfig: Some(args.kubeconfig),
        history_limit: args.history,
        bookmark_interval: std::time::Duration::from_secs(args.bookmark_seconds.max(1)),
        tls: args.tls,
        users,
        audit_log: args.audit_log_path,
        audit_level: args.audit_level,
    };
    let server = match TestApiServer::start(opts) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("drift-test-apiserver: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    println!("listening on {}", server.addr());
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("drift-test-apiserver: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    rt.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = async {
                match term.as_mut() {
                    Some(t) => { t.recv().await; }
                    None => std::future::pending::<()>().await,
                }
            } => {}
        }
    });
    server.shutdown();
    std::process::ExitCode::SUCCESS
}
