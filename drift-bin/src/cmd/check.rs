//! `drift check --ref REF`: what merging a branch would do to the cluster, before it is merged.
//!
//! Each repository is rendered twice, as the detector reads it (its configured ref: the base)
//! and at `REF`, each compared with the same cluster; [`drift_core::check::merge_effect`] says
//! which live changes the merge's apply overwrites, which drifts it resolves and what else it
//! changes. Nothing is recorded.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use clap::Args;
use drift_core::check::{ChangedObject, Effect, MergeEffect, ObjectChange, merge_effect};
use drift_core::progress::Progress;
use drift_core::scan::run_scan;
use drift_core::sink::{DriftFilter, DriftStatus, PageRequest};
use drift_core::{Drift, ScanOutcome, ScanReport};
use serde::Serialize;

use crate::compose;
use crate::config::Config;
use crate::output::Format;

/// Arguments of `drift check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Configuration file.
    #[arg(long, short)]
    pub config: PathBuf,
    /// The branch, tag or commit to check (a pull request's head).
    #[arg(long = "ref", value_name = "REF")]
    pub reference: String,
    /// Only this repository of the configuration (default: every one).
    #[arg(long)]
    pub repository: Option<String>,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub output: Format,
    /// Also report on GitHub, for `github:` repositories: a check run on REF's commit (a commit
    /// status when the token may not create check runs) and one comment on the open pull request
    /// of REF, updated when the check runs again. The token is the repository's `token_env`.
    #[arg(long)]
    pub github: bool,
}

/// What merging `REF` would do in one repository.
#[derive(Debug, Serialize)]
pub struct RepositoryCheck {
    /// The repository's name.
    pub repository: String,
    /// The cluster compared with.
    pub cluster: String,
    /// The revision of the base (the configured ref).
    pub base: Option<String>,
    /// The revision `REF` resolved to.
    pub head: Option<String>,
    /// The effect.
    #[serde(flatten)]
    pub effect: MergeEffect,
    /// The id of each open drift of the store the effect names, by fingerprint.
    pub drift_ids: HashMap<String, i64>,
}

/// What `drift check` and `POST /check` found: the effect in each repository that could be
/// read, and why the answer is not sure (empty when it is).
#[derive(Debug, Serialize)]
pub struct Checked {
    /// One per repository whose both sides could be read.
    pub checks: Vec<RepositoryCheck>,
    /// Why the answer is not sure: a side not read (its repository has no check), or read in part.
    pub reasons: Vec<String>,
    /// Whether any check's merge overwrites a live change.
    pub overwrites_live_changes: bool,
    /// Whether `reasons` is empty.
    pub sure: bool,
}

/// The repositories of `config` named by `repository` (all without a name).
fn named<'a>(config: &'a Config, repository: Option<&str>) -> Vec<&'a crate::config::RepositoryConfig> {
    config.repositories.iter().filter(|r| repository.is_none_or(|n| n == r.name)).collect()
}

/// Checks what merging `reference` would do in each repository of `config` (or the one named),
/// against `cluster`, with the ids of the store's open drifts; `on_each` sees each check with
/// whether it is sure (`drift check --github` reports it).
#[allow(clippy::too_many_arguments)]
pub async fn check_all(
    config: &Config,
    reference: &str,
    repository: Option<&str>,
    store: &drift_runtime::Store,
    hasher: drift_core::normalize::SecretHasher,
    cluster: &compose::Cluster,
    progress: &Progress,
    mut on_each: impl AsyncFnMut(&crate::config::RepositoryConfig, &RepositoryCheck, bool) -> Result<()>,
) -> Result<Checked> {
    let sops = compose::sops_keys()?;
    let engine = config.built.engine.clone().with_secret_hasher(hasher);
    let options = compose::scan_settings(config, progress, &sops).options("check");
    let live = cluster.live();
    let mut checks = Vec::new();
    let mut reasons = Vec::new();
    for r in named(config, repository) {
        let mut head = r.clone();
        head.reference = Some(reference.to_owned());
        let source = |r: &crate::config::RepositoryConfig| {
            drift_git::source_with(
                r.source_config_for(false),
                progress.clone(),
                compose::sops_opener(&sops),
                cluster.lookup(),
            )
            .with_context(|| format!("repository `{}`", r.name))
        };
        // A source that cannot be made (a ref its configuration refuses) is a reason, not an error.
        let (base_source, head_source) = match (source(r), source(&head)) {
            (Ok(b), Ok(h)) => (b, h),
            (Err(e), _) | (_, Err(e)) => {
                reasons.push(format!("{}: cannot check: {e:#}", r.name));
                continue;
            }
        };
        let base = run_scan(base_source.as_ref(), live.as_ref(), &engine, &options).await;
        let head = run_scan(head_source.as_ref(), live.as_ref(), &engine, &options).await;
        let sides = [("the base", &base), (reference, &head)];
        if let Some((side, failed)) = sides.iter().find(|(_, report)| report.outcome == ScanOutcome::Failed) {
            // Nothing to compare: saying what the merge does would be made up.
            let why = incomplete(failed).unwrap_or_default();
            reasons.push(format!("{}: cannot check: {side} could not be read: {why}", r.name));
            continue;
        }
        for (side, report) in sides {
            if let Some(why) = incomplete(report) {
                reasons.push(format!("{}: not sure: {side} was not read completely: {why}", r.name));
            }
        }
        let sure = incomplete(&base).is_none() && incomplete(&head).is_none();
        let effect = merge_effect(&base, &head);
        let drift_ids = open_ids(store, &base, &effect).await?;
        let check = RepositoryCheck {
            repository: r.name.clone(),
            cluster: base.cluster.clone(),
            base: base.revision,
            head: head.revision,
            effect,
            drift_ids,
        };
        on_each(r, &check, sure).await?;
        checks.push(check);
    }
    let overwrites_live_changes = checks.iter().any(|c| c.effect.overwrites_live_changes());
    Ok(Checked { sure: reasons.is_empty(), checks, reasons, overwrites_live_changes })
}

/// `POST /check` of `drift serve`: [`check_all`] over the service's configuration, store and
/// cluster.
#[derive(Debug)]
pub struct ConfigCheck {
    /// The configuration.
    pub config: Config,
    /// The store (for the ids of open drifts).
    pub store: drift_runtime::Store,
    /// The Secret hasher of the store's key.
    pub hasher: drift_core::normalize::SecretHasher,
    /// The cluster.
    pub cluster: compose::Cluster,
}

#[async_trait::async_trait]
impl drift_api::MergeCheck for ConfigCheck {
    async fn check(&self, reference: &str, repository: Option<&str>) -> drift_core::Result<serde_json::Value> {
        if named(&self.config, repository).is_empty() {
            return Err(drift_core::Error::not_found(format!(
                "no repository named `{}`",
                repository.unwrap_or_default()
            )));
        }
        let progress = Progress::new();
        let checked = check_all(
            &self.config,
            reference,
            repository,
            &self.store,
            self.hasher.clone(),
            &self.cluster,
            &progress,
            async |_, _, _| Ok(()),
        )
        .await
        .map_err(|e| drift_core::Error::new(drift_core::ErrorKind::Unavailable, format!("{e:#}")))?;
        serde_json::to_value(&checked)
            .map_err(|e| drift_core::Error::new(drift_core::ErrorKind::Unexpected, e.to_string()))
    }
}

/// Runs `drift check`: exit 0 when the merge overwrites no live change, 1 when it does, 2 when
/// a side could not be read completely (the answer would not be sure).
pub async fn run(args: &CheckArgs) -> Result<ExitCode> {
    let config = Config::load(&args.config)?;
    anyhow::ensure!(
        !named(&config, args.repository.as_deref()).is_empty(),
        "no repository named `{}` in {}",
        args.repository.as_deref().unwrap_or_default(),
        args.config.display()
    );
    let (store, hasher) = compose::open_scanning_store(&config).await?;
    let progress = Progress::new();
    let cluster = compose::Cluster::open(&config, &progress).await?;
    let github = args.github;
    let reference = args.reference.as_str();
    let checked = check_all(
        &config,
        reference,
        args.repository.as_deref(),
        &store,
        hasher,
        &cluster,
        &progress,
        async |r, check, sure| {
            if github {
                report_on_github(r, check, reference, sure).await?;
            }
            Ok(())
        },
    )
    .await?;
    let (checks, unsure) = (&checked.checks, &checked.reasons);
    match args.output {
        Format::Table => {
            let now = Utc::now();
            for c in checks {
                print!("{}", describe(c, &args.reference, now));
            }
        }
        format => crate::output::print_data(checks, format, |_| {})?,
    }
    for why in unsure {
        eprintln!("{why}");
    }
    Ok(if !unsure.is_empty() {
        ExitCode::from(2)
    } else if checks.iter().any(|c| c.effect.overwrites_live_changes()) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Reports one repository's check on GitHub (`--github`).
async fn report_on_github(
    repository: &crate::config::RepositoryConfig,
    check: &RepositoryCheck,
    reference: &str,
    sure: bool,
) -> Result<()> {
    use drift_git::publish::{CheckConclusion, CheckReport, report_check};
    let source = repository.source_config_for(false);
    anyhow::ensure!(
        matches!(source, drift_git::SourceConfig::Github(_)),
        "--github: repository `{}` is not a `github:` repository",
        repository.name
    );
    let head_sha = check.head.clone().context("--github: the checked ref resolved to no commit")?;
    let overwritten = check.effect.with(Effect::OverwritesLiveChange).count();
    let (conclusion, title) = if !sure {
        (CheckConclusion::Neutral, "not sure: a side could not be read completely".to_owned())
    } else if overwritten > 0 {
        (CheckConclusion::Failure, format!("the merge overwrites {overwritten} live change(s) made in the cluster"))
    } else {
        (CheckConclusion::Success, "the merge overwrites no live change".to_owned())
    };
    let summary = format!("**drift check**: {title}.\n\n```text\n{}```\n", describe(check, reference, Utc::now()));
    // A commit id has no pull request to comment on.
    let head_branch = (!(reference.len() == 40 && reference.bytes().all(|b| b.is_ascii_hexdigit())))
        .then(|| reference.strip_prefix("refs/heads/").unwrap_or(reference).to_owned());
    let report = CheckReport { head_sha, head_branch, conclusion, title, summary };
    let reported =
        report_check(&source, &report).await.with_context(|| format!("--github: repository `{}`", repository.name))?;
    let run = reported.check_run.map_or_else(
        || "a commit status (the token may not create check runs)".to_owned(),
        |u| format!("check run {u}"),
    );
    let comment = reported
        .comment
        .map(|(n, updated)| format!(", comment on pull request #{n} {}", if updated { "updated" } else { "added" }))
        .unwrap_or_default();
    eprintln!("reported on GitHub: {run}{comment}");
    Ok(())
}

/// Why a report does not say the whole truth (a source that failed, a file that did not
/// parse, a namespace not read), or `None`.
fn incomplete(report: &ScanReport) -> Option<String> {
    if report.outcome == ScanOutcome::Success && report.desired_complete {
        return None;
    }
    let warnings: Vec<_> = report.warnings.iter().map(|w| w.message.clone()).collect();
    Some(if warnings.is_empty() { format!("scan {:?}", report.outcome) } else { warnings.join("; ") })
}

/// The store's ids of the open drifts the effect names (the base's drifts), by fingerprint.
async fn open_ids(
    store: &drift_runtime::Store,
    base: &ScanReport,
    effect: &MergeEffect,
) -> Result<HashMap<String, i64>> {
    let wanted: std::collections::HashSet<String> = effect
        .fields
        .iter()
        .filter(|f| matches!(f.effect, Effect::OverwritesLiveChange | Effect::Resolves))
        .map(|f| f.drift.fingerprint(&base.cluster, &base.repository))
        .collect();
    let mut ids = HashMap::new();
    if wanted.is_empty() {
        return Ok(ids);
    }
    let filter = DriftFilter {
        status: Some(DriftStatus::Open),
        repository: Some(base.repository.clone()),
        cluster: Some(base.cluster.clone()),
        ..DriftFilter::default()
    };
    let mut after = None;
    loop {
        let page = store.read.list(&filter, PageRequest { limit: 500, after }).await?;
        ids.extend(page.items.into_iter().filter(|d| wanted.contains(&d.fingerprint)).map(|d| (d.fingerprint, d.id)));
        match page.next {
            Some(next) => after = Some(next),
            None => return Ok(ids),
        }
    }
}

/// The readable answer for one repository.
fn describe(c: &RepositoryCheck, reference: &str, now: DateTime<Utc>) -> String {
    use std::fmt::Write;
    let rev = |r: &Option<String>| r.as_deref().map(|r| r.get(..12).unwrap_or(r).to_owned()).unwrap_or_default();
    let mut out =
        format!("Merging {reference} ({}) into repository `{}` ({}):\n", rev(&c.head), c.repository, rev(&c.base));
    let e = &c.effect;
    let id = |d: &Drift| {
        c.drift_ids
            .get(&d.fingerprint(&c.cluster, &c.repository))
            .map(|id| format!("  (drift {id})"))
            .unwrap_or_default()
    };
    let object = |d: &Drift| {
        let ns = d.resource.namespace.as_deref().map(|n| format!("{n}/")).unwrap_or_default();
        format!("{} {ns}{}", d.resource.kind, d.resource.name)
    };
    let overwrites: Vec<_> = e.with(Effect::OverwritesLiveChange).collect();
    if !overwrites.is_empty() {
        let _ = writeln!(out, "  overwrites {} live change(s) made in the cluster:", overwrites.len());
        for f in overwrites {
            let d = &f.drift;
            let by = match (&d.changed_by, d.changed_at) {
                (Some(m), Some(at)) => format!(" set by {m} {} ago", age(now - at)),
                (Some(m), None) => format!(" set by {m}"),
                _ => String::new(),
            };
            let _ = writeln!(
                out,
                "    {}  {}: {}{by}, becomes {}{}",
                object(d),
                d.path,
                crate::output::short(&d.cluster_value),
                crate::output::short(&f.applies),
                id(d)
            );
        }
    }
    let resolves: Vec<_> = e.with(Effect::Resolves).collect();
    if !resolves.is_empty() {
        let _ = writeln!(out, "  resolves {} drift(s) (Git will say what the cluster has):", resolves.len());
        for f in resolves {
            let d = &f.drift;
            let _ = writeln!(out, "    {}  {}: {}{}", object(d), d.path, crate::output::short(&d.cluster_value), id(d));
        }
    }
    for (effect, what) in
        [(Effect::Changes, "changes {} field(s) as Git does"), (Effect::Creates, "creates {} object(s)")]
    {
        let fields: Vec<_> = e.with(effect).collect();
        if fields.is_empty() {
            continue;
        }
        let _ = writeln!(out, "  {}:", what.replace("{}", &fields.len().to_string()));
        for f in fields {
            let d = &f.drift;
            if effect == Effect::Creates {
                let _ = writeln!(out, "    {}", object(d));
            } else {
                let _ = writeln!(
                    out,
                    "    {}  {}: {} becomes {}",
                    object(d),
                    d.path,
                    crate::output::short(&d.cluster_value),
                    crate::output::short(&d.git_value)
                );
            }
        }
    }
    let list = |objects: Vec<&ChangedObject>| objects.iter().map(|o| o.key.to_string()).collect::<Vec<_>>().join(", ");
    let untouched: Vec<_> = e.untouched().filter(|o| o.change == ObjectChange::Changed).collect();
    if !untouched.is_empty() {
        let _ = writeln!(out, "  changes {} object(s) nobody touched: {}", untouched.len(), list(untouched));
    }
    let removed: Vec<_> = e.objects.iter().filter(|o| o.change == ObjectChange::Removed).collect();
    if !removed.is_empty() {
        let _ = writeln!(
            out,
            "  removes {} object(s) from Git (deleted if the controller prunes): {}",
            removed.len(),
            list(removed)
        );
    }
    if e.left_open > 0 {
        let _ = writeln!(out, "  leaves {} drift(s) open (on objects it does not change)", e.left_open);
    }
    if e.fields.is_empty() && e.objects.is_empty() {
        let _ = writeln!(out, "  changes nothing in the cluster");
    }
    out
}

/// "2 h", "5 min", "3 d".
fn age(d: chrono::TimeDelta) -> String {
    let s = d.num_seconds().max(0);
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min", s / 60),
        3600..86400 => format!("{} h", s / 3600),
        _ => format!("{} d", s / 86400),
    }
}
