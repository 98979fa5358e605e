//! `ndjson-detector`: a detector of an integrator's own, composed with `drift-runtime`'s
//! builder: desired state from a folder, live state from snapshot files or a cluster, history
//! in SQLite, and every drift also appended as NDJSON by the sink of this crate.
//!
//! ```sh
//! cargo run -p drift-example-custom-sink -- --desired examples/demo/desired \
//!     --live examples/demo/live --out drifts.ndjson
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use drift_example_custom_sink::NdjsonSink;
use drift_runtime::{Detector, Store};

/// One scan (or a service with --serve) whose drifts are also appended to an NDJSON file.
#[derive(Debug, Parser)]
struct Args {
    /// Desired state: a folder of manifests (plain YAML, Kustomize or Helm).
    #[arg(long)]
    desired: PathBuf,
    /// Live state from files (`kubectl get -A -o yaml` output); without it, the current
    /// context of the default kubeconfig.
    #[arg(long)]
    live: Option<PathBuf>,
    /// The NDJSON file the drifts are appended to.
    #[arg(long)]
    out: PathBuf,
    /// The SQLite store.
    #[arg(long, default_value = "sqlite::memory:")]
    store: String,
    /// Serve the REST API on this address, scanning every 5 minutes, until Ctrl-C.
    #[arg(long)]
    serve: Option<String>,
}

async fn run(args: Args) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let store = drift_sqlite::SqliteStore::from_config(&drift_sqlite::SqliteConfig::new(&args.store)).await?;
    let live = drift_kube::live_source_from_config(drift_kube::K8sConfig {
        cluster: Some("example".to_owned()),
        snapshot: args.live.clone(),
        ..Default::default()
    })
    .await?;
    let desired =
        drift_git::source_from_config(drift_git::SourceConfig::Folder(drift_git::FolderConfig::new(&args.desired)))?;
    let detector = Detector::builder()
        .desired(desired)
        .live(live)
        .store(Store::new(Arc::new(store)))
        .sink(Arc::new(NdjsonSink::open(&args.out)?))
        .build()?;
    if let Some(addr) = &args.serve {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        println!("listening on {}", listener.local_addr()?);
        detector
            .serve(listener, async {
                tokio::signal::ctrl_c().await.ok();
            })
            .await?;
        return Ok(ExitCode::SUCCESS);
    }
    let reports = detector.scan_once().await?;
    let drifts: usize = reports.iter().map(|r| r.drifts.len()).sum();
    println!("{drifts} drift(s) appended to {}", args.out.display());
    Ok(if drifts == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_env_filter("warn").init();
    // The binary chooses the process's TLS provider (kube, sqlx and gix share it).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(args)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
