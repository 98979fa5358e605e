//! `drift propose`: the whitelist proposals of the store's decisions (docs/remediation.md,
//! "Whitelist proposals"): each object whose paths people accepted again and again, with the
//! `drift-detector.io/ignore` annotation that would stop reporting them, printed as a unified
//! diff of the repository (nothing is written), or with `--open` proposed as a pull request (a
//! pushed branch for plain git remotes), once per pattern, as `drift serve` does with
//! `accept.propose:`.
//!
//! Exit codes: 0 done (with or without proposals); 1 a proposal could not be planned or
//! opened; 2 a configuration or store that cannot be opened.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use drift_git::{AcceptRequest, ClusterTargets, SourceConfig, Workspace, plan_accept_for};
use serde::Serialize;

use crate::compose;
use crate::config::Config;
use crate::output::Format;

/// Arguments of `drift propose`.
#[derive(Debug, Args)]
pub struct ProposeArgs {
    /// Configuration file (its `accept.propose:` settings; the defaults without them).
    #[arg(long, default_value = "drift.yaml")]
    pub config: PathBuf,
    /// Open (or update) the pull requests instead of printing the patches.
    #[arg(long)]
    pub open: bool,
    /// Output format: the patches as text, or the proposals as JSON.
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

/// One proposal as printed.
#[derive(Debug, Serialize)]
struct Printed {
    #[serde(flatten)]
    proposal: drift_runtime::remedies::WhitelistProposal,
    /// The unified diff of the repository; `null` when every pattern is held.
    patch: Option<String>,
}

/// Runs `drift propose`.
pub async fn run(args: &ProposeArgs) -> Result<ExitCode> {
    let config = Config::load(&args.config)?;
    let policy = config.accept.propose.clone().unwrap_or_default();
    let classifier = drift_core::drift_engine::classify::Classifier::new(config.classify);
    let now = chrono::Utc::now();
    let mut printed = Vec::new();
    let mut failed = false;
    // Each repository on each cluster it targets: a cluster's proposals are of its own drifts,
    // planned in the files its scans read (with `clusters:`, each cluster has its own).
    let on: Vec<(&crate::config::RepositoryConfig, &str)> = config
        .repositories
        .iter()
        .flat_map(|r| {
            let clusters: Vec<&str> = if config.clusters.is_empty() {
                vec![config.cluster.as_str()]
            } else {
                config.clusters.iter().map(|c| c.name.as_str()).filter(|c| r.targets(c)).collect()
            };
            clusters.into_iter().map(move |c| (r, c))
        })
        .collect();
    for (r, cluster) in on {
        let (store, hasher) = compose::open_scanning_store(&config).await?;
        let (detector, targets) = compose::remedies_targeted(&config, store, hasher, &r.name, cluster, true).await?;
        let remedies = detector.remedies().context("this store keeps no audit trail; use sqlite or postgres")?;
        let whose = if config.clusters.is_empty() { String::new() } else { format!(" on cluster {cluster}") };
        if args.open {
            let round = remedies.propose_round(&policy, Some(&classifier), now).await?;
            println!(
                "repository {}{whose}: {} object(s) qualify; {} proposed, {} updated, {} unchanged, {} held, {} refused, {} failed",
                r.name,
                round.candidates,
                round.proposed,
                round.updated,
                round.unchanged,
                round.held,
                round.refused,
                round.failed
            );
            failed |= round.refused + round.failed > 0;
            continue;
        }
        let proposals = remedies.whitelist_proposals(&policy, Some(&classifier), now).await?;
        let source = r.source_config_for(false);
        for p in proposals.into_iter().filter(|p| p.repository() == r.name) {
            let patch = match p.request() {
                Some(request) => match patch_of(&source, targets.clone(), request).await {
                    Ok(patch) => Some(patch),
                    Err(e) => {
                        eprintln!("error: {}: {e:#}", p.object);
                        failed = true;
                        continue;
                    }
                },
                None => None,
            };
            printed.push(Printed { proposal: p, patch });
        }
    }
    if !args.open {
        match args.output {
            Format::Json => println!("{}", serde_json::to_string_pretty(&printed)?),
            _ => print_patches(&printed),
        }
    }
    Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

fn print_patches(printed: &[Printed]) {
    if printed.is_empty() {
        eprintln!("no whitelist proposal: no pattern has enough consistent accept decisions");
    }
    for p in printed {
        println!("# {}", p.proposal.title);
        for q in &p.proposal.patterns {
            let deciders: Vec<String> =
                q.evidence.iter().map(|e| format!("{} at {}", e.actor, crate::cmd::decide::when(e.at))).collect();
            println!("#   {} ({}): accepted by {}", q.pattern.path, q.pointer, deciders.join(", "));
            if let Some(why) = &q.held {
                println!("#   held: {why}");
            }
        }
        match &p.patch {
            Some(patch) => print!("{patch}"),
            None => println!("# nothing proposed: every pattern is held"),
        }
    }
}

/// The change planned in the repository as it is now, as a unified diff.
async fn patch_of(
    source: &SourceConfig,
    targets: Option<Arc<ClusterTargets>>,
    request: &drift_core::remedy::ChangeRequest,
) -> Result<String> {
    let accept = AcceptRequest {
        key: request.key.clone(),
        api_version: request.api_version.clone(),
        changes: request.changes.clone(),
    };
    let (sub, render) = match source {
        SourceConfig::Git(c) => (c.path.clone(), c.render.clone()),
        SourceConfig::Github(c) => (c.path.clone(), c.render.clone()),
        SourceConfig::Folder(c) => (c.path.clone(), c.render.clone()),
    };
    let sub = sub.unwrap_or_default().trim_matches('/').to_owned();
    // A folder is read where it is; a remote through a working copy, as a pull request would.
    let (workspace, root) = match source {
        SourceConfig::Folder(c) => (None, c.root.clone()),
        _ => {
            let w = Workspace::open(source).await?;
            let root = w.root().to_owned();
            (Some(w), root)
        }
    };
    let plan = {
        let root = root.clone();
        tokio::task::spawn_blocking(move || plan_accept_for(&root, &sub, &render, targets, &accept)).await??
    };
    if plan.edits.is_empty() {
        let unplaced: Vec<String> = plan.unplaced.iter().map(|u| format!("{}: {}", u.path, u.hint)).collect();
        anyhow::bail!("the annotation cannot be placed in the repository: {}", unplaced.join("; "));
    }
    let mut out = String::new();
    for edit in &plan.edits {
        let old = if edit.created { String::new() } else { std::fs::read_to_string(root.join(&edit.path))? };
        let new = String::from_utf8_lossy(&edit.content);
        out.push_str(&unified_diff(&edit.path, &old, &new, edit.created));
    }
    drop(workspace);
    Ok(out)
}

/// A unified diff (three lines of context) of one file, as `git diff` shows it.
pub fn unified_diff(path: &str, old: &str, new: &str, created: bool) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    // The longest common subsequence of lines, by dynamic programming (files of a GitOps
    // repository are small; a pair over 4,000 lines each is shown whole).
    let ops: Vec<(char, &str)> = if a.len().saturating_mul(b.len()) > 16_000_000 {
        a.iter().map(|l| ('-', *l)).chain(b.iter().map(|l| ('+', *l))).collect()
    } else {
        let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
        for i in (0..a.len()).rev() {
            for j in (0..b.len()).rev() {
                lcs[i][j] = if a[i] == b[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
            }
        }
        let (mut i, mut j, mut ops) = (0, 0, Vec::new());
        while i < a.len() || j < b.len() {
            if i < a.len() && j < b.len() && a[i] == b[j] {
                ops.push((' ', a[i]));
                i += 1;
                j += 1;
            } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
                // Removed lines before added ones, as `git diff` shows a changed line.
                ops.push(('-', a[i]));
                i += 1;
            } else {
                ops.push(('+', b[j]));
                j += 1;
            }
        }
        ops
    };
    let from = if created { "/dev/null".to_owned() } else { format!("a/{path}") };
    let mut out = format!("--- {from}\n+++ b/{path}\n");
    // Hunks: changed lines with up to three lines of context around them.
    let changed: Vec<usize> = ops.iter().enumerate().filter(|(_, (op, _))| *op != ' ').map(|(k, _)| k).collect();
    let mut k = 0;
    while k < changed.len() {
        let start = changed[k].saturating_sub(3);
        let mut end = (changed[k] + 4).min(ops.len());
        while k + 1 < changed.len() && changed[k + 1] <= end + 3 {
            k += 1;
            end = (changed[k] + 4).min(ops.len());
        }
        k += 1;
        let before = |upto: usize, side: char| ops[..upto].iter().filter(|(op, _)| *op == ' ' || *op == side).count();
        let (old_start, new_start) = (before(start, '-'), before(start, '+'));
        let old_len = ops[start..end].iter().filter(|(op, _)| *op != '+').count();
        let new_len = ops[start..end].iter().filter(|(op, _)| *op != '-').count();
        let at = |s: usize, len: usize| if len == 0 { s } else { s + 1 };
        out.push_str(&format!("@@ -{},{old_len} +{},{new_len} @@\n", at(old_start, old_len), at(new_start, new_len)));
        for (op, line) in &ops[start..end] {
            out.push(*op);
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::unified_diff;

    #[test]
    fn a_line_added_in_the_middle_is_one_hunk_with_its_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nd\nX\ne\nf\ng\nh\n";
        assert_eq!(
            unified_diff("f.yaml", old, new, false),
            "--- a/f.yaml\n+++ b/f.yaml\n@@ -2,6 +2,7 @@\n b\n c\n d\n+X\n e\n f\n g\n"
        );
    }

    #[test]
    fn a_change_at_the_top_and_a_new_file() {
        assert_eq!(unified_diff("f", "a\nb\n", "z\nb\n", false), "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-a\n+z\n b\n");
        assert_eq!(unified_diff("n", "", "x\n", true), "--- /dev/null\n+++ b/n\n@@ -0,0 +1,1 @@\n+x\n");
        assert_eq!(unified_diff("same", "a\n", "a\n", false), "--- a/same\n+++ b/same\n");
    }

    #[test]
    fn changes_far_apart_are_two_hunks() {
        let old: String = (0..20).map(|i| format!("{i}\n")).collect();
        let new = old.replace("2\n", "two\n").replace("17\n", "seventeen\n");
        let diff = unified_diff("f", &old, &new, false);
        assert_eq!(diff.matches("@@ -").count(), 2, "{diff}");
        assert!(diff.contains("@@ -1,6 +1,6 @@\n 0\n 1\n-2\n+two\n"), "{diff}");
    }
}
