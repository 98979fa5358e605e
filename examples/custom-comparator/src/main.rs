//! `filtered-detector`: a detector of an integrator's own, composed with `drift-runtime`'s
//! builder and given a comparator of this crate: the engine with some drift types left out.
//! Desired state from a folder, live state from snapshot files or a cluster, history in
//! memory; one scan, its drifts printed one a line.
//!
//! ```sh
//! cargo run -p drift-example-custom-comparator -- --desired examples/demo/desired \
//!     --live examples/demo/live --leave-out replicas_drift
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use drift_core::memory::MemoryStore;
use drift_core::{DriftType, Engine};
use drift_example_custom_comparator::LeaveOut;
use drift_runtime::{Detector, Store};

/// One scan whose drifts of the given types are left out; exits 1 when drifts remain.
#[derive(Debug, Parser)]
struct Args {
    /// Desired state: a folder of manifests (plain YAML, Kustomize or Helm).
    #[arg(long)]
    desired: PathBuf,
    /// Live state from files (`kubectl get -A -o yaml` output); without it, the current
    /// context of the default kubeconfig.
    #[arg(long)]
    live: Option<PathBuf>,
    /// A drift type that is not drift here (`replicas_drift`, `metadata_drift`, ...); repeat
    /// for several.
    #[arg(long = "leave-out", value_name = "TYPE")]
    leave_out: Vec<DriftType>,
}

async fn run(args: Args) -> Result<ExitCode, Box<dyn std::error::Error>> {
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
        .store(Store::new(Arc::new(MemoryStore::new())))
        .comparator(Arc::new(LeaveOut::new(Engine::default(), args.leave_out)))
        .build()?;
    let reports = detector.scan_once().await?;
    for d in reports.iter().flat_map(|r| &r.drifts) {
        let r = &d.resource;
        let object = format!("{}/{}/{}", r.kind, r.namespace.as_deref().unwrap_or("-"), r.name);
        // A missing object has no path.
        println!("{}", format!("{} {object} {}", d.drift_type.as_str(), d.path).trim_end());
    }
    let drifts: usize = reports.iter().map(|r| r.drifts.len()).sum();
    println!("{drifts} drift(s)");
    Ok(if drifts == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_env_filter("warn").init();
    // The binary chooses the process's TLS provider (kube and gix share it).
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
