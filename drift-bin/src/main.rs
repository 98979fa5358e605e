//! `drift`: finds, explains and tracks configuration drift between Git and Kubernetes.
//!
//! Exit codes follow `kubectl diff`: 0 no drift, 1 drift found, 2 or more an error.

mod cmd;
mod files;
mod output;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "drift", version, about = "GitOps configuration drift detector for Kubernetes")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Compare desired manifests with live objects read from files or folders.
    Diff(cmd::diff::DiffArgs),
    /// Print the version.
    Version,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Diff(args) => cmd::diff::run(&args),
        Command::Version => {
            println!("drift {}", env!("CARGO_PKG_VERSION"));
            Ok(ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
