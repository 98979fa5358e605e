//! `drift fix ID --revert|--accept`: act on a recorded drift with the store and cluster of a
//! configuration, as `drift drifts list` reads them (docs/remediation.md).
//!
//! - `--revert [--dry-run]`: the cluster back to Git (server-side apply of only the drifted
//!   field, field manager `drift-detector`, dry run first);
//! - `--accept`: the cluster's values into Git, as a pull request (GitHub) or a pushed branch.
//!
//! Both are written to the audit trail with who asked (`--as`, else `$USER`).
//!
//! A revert applies only while the drifted field holds the value it was planned against (the
//! drift's cluster value, or what the actor's last `--dry-run` showed); a newer value is left in
//! place and the revert is refused as `stale`, naming both values.
//!
//! Each revert (not a dry run) and accept writes an `attempted` entry before it acts and its
//! outcome after. On SIGTERM or Ctrl-C the action gets the shutdown grace
//! ([`drift_runtime::SHUTDOWN_GRACE`]) to finish; then it is stopped with its git processes and
//! recorded as `interrupted` (a second signal stops it at once). A `drift fix` killed outright
//! leaves its `attempted` entry, which the next `drift fix` or `drift serve` on the host closes
//! as `interrupted` (docs/remediation.md).
//!
//! Exit codes: 0 done; 1 refused by a safety rule (the reason is printed: `stale`,
//! `concurrent_change`, `waived`, ...), or no such drift; 2 a usage error, or the store, the
//! cluster or the git server failed.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use drift_core::ErrorKind;
use drift_core::remedy::{AcceptOutcome, Fault, RevertOutcome, RevertStatus};

use crate::cmd::decide::actor;
use crate::compose;
use crate::config::Config;
use crate::output::{Format, print_data};
use crate::signals::Stops;

/// Arguments of `drift fix`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("direction").required(true).args(["revert", "accept"])))]
pub struct FixArgs {
    /// The drift ids (as `drift drifts list` shows them): one for --revert; one or more of the
    /// same object for --accept (they go in one change).
    #[arg(required = true, value_parser = clap::value_parser!(i64).range(1..))]
    pub ids: Vec<i64>,
    /// Put the cluster back to what Git says.
    #[arg(long)]
    pub revert: bool,
    /// Make Git say what the cluster has: a pull request (GitHub) or a pushed branch.
    #[arg(long)]
    pub accept: bool,
    /// With --revert: only the server's dry run; nothing changes.
    #[arg(long, requires = "revert")]
    pub dry_run: bool,
    /// Who asks (default: $USER, else `cli`).
    #[arg(long = "as", value_name = "NAME")]
    pub actor: Option<String>,
    /// Configuration file.
    #[arg(long, short)]
    pub config: PathBuf,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

/// Runs `drift fix`.
pub async fn run(args: &FixArgs) -> Result<ExitCode> {
    let actor = actor(args.actor.as_deref())?;
    if args.revert && args.ids.len() != 1 {
        eprintln!("error: --revert takes one drift id");
        return Ok(ExitCode::from(2));
    }
    let config = Config::load(&args.config)?;
    let (store, hasher) = compose::open_scanning_store(&config).await?;
    // Only what the fix uses: the repository of the drift, the cluster's one client, no notifier.
    let (repository, cluster) = match store.read.get(args.ids[0]).await {
        Ok(d) => (d.repository, d.cluster),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            eprintln!("error: {}", e.message());
            return Ok(ExitCode::from(1));
        }
        Err(e) => return Err(e).context("reading the drift"),
    };
    let detector = compose::remedies_on(&config, store, hasher, &repository, &cluster, args.accept).await?;
    let remedies = detector.remedies().context("this store keeps no audit trail; use sqlite or postgres")?;
    match remedies.close_interrupted(chrono::Utc::now()).await {
        Ok(0) => {}
        Ok(n) => eprintln!(
            "note: {n} action(s) of a process that stopped before they finished are recorded as interrupted (drift audit --status interrupted)"
        ),
        Err(e) => eprintln!("warning: the unfinished actions could not be looked at: {e}"),
    }
    let action = async {
        if args.revert {
            remedies.revert(args.ids[0], &actor, args.dry_run).await.map(Done::Revert)
        } else {
            remedies.accept(&args.ids, &actor).await.map(Done::Accept)
        }
    };
    tokio::pin!(action);
    let mut stops = Stops::listen()?;
    let result = tokio::select! {
        result = &mut action => result,
        () = stops.next() => {
            let grace = drift_runtime::SHUTDOWN_GRACE;
            eprintln!("stopping: the action gets {grace:?} to finish, then it is stopped and recorded as interrupted (signal again to stop it now)");
            let stop = async {
                tokio::select! {
                    () = remedies.drain(grace) => {}
                    () = stops.next() => remedies.drain(std::time::Duration::ZERO).await,
                }
            };
            let (result, ()) = tokio::join!(&mut action, stop);
            result
        }
    };
    match result {
        Ok(done) => {
            print(&done, args.output)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(Fault::Refused(r)) => {
            eprintln!("refused ({}): {}", r.refusal.as_str(), r.message);
            Ok(ExitCode::from(1))
        }
        Err(Fault::Failed(e)) if e.kind() == ErrorKind::NotFound => {
            eprintln!("error: {}", e.message());
            Ok(ExitCode::from(1))
        }
        Err(Fault::Failed(e)) => {
            eprintln!("error: {e}");
            Ok(ExitCode::from(2))
        }
    }
}

#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
enum Done {
    Revert(RevertOutcome),
    Accept(AcceptOutcome),
}

fn print(done: &Done, format: Format) -> Result<()> {
    print_data(done, format, |done| match done {
        Done::Revert(o) => {
            let what = match o.status {
                RevertStatus::Reverted => "reverted",
                RevertStatus::DryRun => "dry run: the server would revert",
            };
            if let Some(earlier) = o.earlier {
                // A retry: the field holds Git's value since an earlier revert; nothing was written.
                println!(
                    "already reverted {} ({}) for drift {} by {} (audit entry {earlier}); nothing was written",
                    o.object,
                    o.paths.join(", "),
                    o.drift_id,
                    o.actor
                );
                return;
            }
            println!("{what} {} ({}) for drift {}", o.object, o.paths.join(", "), o.drift_id);
            // Never for a Secret: the outcome has no values then.
            if let (Some(replaced), Some(written)) = (&o.replaced, &o.written) {
                let shown = |v: &serde_json::Value| if v.is_null() { "(absent)".to_owned() } else { v.to_string() };
                println!("  {}: {} -> {}", o.paths.join(", "), shown(replaced), shown(written));
            }
            if o.status == RevertStatus::Reverted {
                println!("the next scan or watch event resolves the drift as reverted");
            }
        }
        Done::Accept(o) => {
            let p = &o.proposal;
            let what = match (p.pull_request, p.updated) {
                (Some(n), true) => format!("pull request #{n} updated"),
                (Some(n), false) => format!("pull request #{n} opened"),
                (None, true) => format!("branch {} updated", p.branch),
                (None, false) => format!("branch {} pushed", p.branch),
            };
            println!("{what} for {} (drifts {})", o.object, join_ids(&o.drift_ids));
            if let Some(url) = &p.url {
                println!("  {url}");
            }
            for line in &p.placed {
                println!("  placed: {line}");
            }
            for line in &p.unplaced {
                println!("  not placed: {line}");
            }
            println!("after the merge, the next scan resolves the drifts as accepted");
        }
    })
}

fn join_ids(ids: &[i64]) -> String {
    ids.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
}
