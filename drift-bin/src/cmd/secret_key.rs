//! `drift secret-key`: the key of the Secret-value hash (docs/security.md, "Secret values"):
//! `id` prints the id of the store's key, `rotate` switches to a new key and re-hashes the
//! values of the live Secret drifts in the same transaction, without an event.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use drift_core::hash_key::{HashKey, KeptHashKey, Rehash};
use drift_core::normalize::SecretHasher;
use drift_core::progress::Progress;
use drift_core::{DriftType, Engine};

use crate::compose;
use crate::config::Config;

/// `drift secret-key ...`.
#[derive(Debug, Subcommand)]
pub enum SecretKeyCommand {
    /// Print the id of the key the store's Secret values are hashed with (never the key).
    Id(KeyArgs),
    /// Switch to a new key: Git and the cluster are read again, and the values of the open and
    /// waived Secret drifts are re-hashed under it, without an event. Run it while no `drift
    /// serve` runs on the store.
    Rotate(RotateArgs),
}

/// Arguments of `drift secret-key id`.
#[derive(Debug, Args)]
pub struct KeyArgs {
    /// Configuration file.
    #[arg(long, short)]
    pub config: PathBuf,
}

/// Arguments of `drift secret-key rotate`.
#[derive(Debug, Args)]
pub struct RotateArgs {
    /// Configuration file.
    #[arg(long, short)]
    pub config: PathBuf,
    /// The new key is in this environment variable (64 hexadecimal digits) and is kept by the
    /// user: set `secret_hash` to it afterwards. Without it (or --new-key-file), the store makes
    /// the new key and keeps it.
    #[arg(long, conflicts_with = "new_key_file")]
    pub new_key_env: Option<String>,
    /// The new key is in this file (64 hexadecimal digits), kept by the user.
    #[arg(long)]
    pub new_key_file: Option<PathBuf>,
}

/// Runs `drift secret-key ...`.
pub async fn run(cmd: &SecretKeyCommand) -> Result<ExitCode> {
    match cmd {
        SecretKeyCommand::Id(args) => {
            let config = Config::load(&args.config)?;
            let (_, keys) = compose::open_store_keys(&config.store_config()?).await?;
            let (_, id) = crate::hash_key::resolve(&config.secret_hash, keys.as_ref()).await?;
            println!("{id}");
            Ok(ExitCode::SUCCESS)
        }
        SecretKeyCommand::Rotate(args) => rotate(args).await,
    }
}

async fn rotate(args: &RotateArgs) -> Result<ExitCode> {
    let config = Config::load(&args.config)?;
    let (store, keys) = compose::open_store_keys(&config.store_config()?).await?;
    drop(store);
    let (old, old_id) = crate::hash_key::resolve(&config.secret_hash, keys.as_ref()).await?;
    let (new, to) = match (&args.new_key_env, &args.new_key_file) {
        (Some(var), _) => {
            let text = std::env::var(var).with_context(|| format!("environment variable {var} is not set"))?;
            let key = HashKey::from_text(&text).with_context(|| format!("environment variable {var}"))?;
            (SecretHasher::new(*key.bytes()), KeptHashKey::given(&key))
        }
        (None, Some(path)) => {
            let key = crate::hash_key::read_key_file(path)?;
            (SecretHasher::new(*key.bytes()), KeptHashKey::given(&key))
        }
        (None, None) => {
            let key = HashKey::new(SecretHasher::random_key());
            (SecretHasher::new(*key.bytes()), KeptHashKey::kept(key))
        }
    };
    if to.id == old_id {
        bail!("the new key is the key in use (id {old_id}): nothing to rotate");
    }
    let rehash = rehash(&config, old, new).await?;
    let rewritten = keys.rotate_hash_key(&old_id, &to, &rehash).await.context("rotating the Secret hash key")?;
    println!(
        "Secret hash key rotated: {old_id} -> {}; {rewritten} live Secret drift(s) re-hashed without an event",
        to.id
    );
    if rewritten < rehash.len() {
        println!(
            "{} drift(s) had changed since the last scan and were left as they were: the next scan records them",
            rehash.len() - rewritten
        );
    }
    if to.key.is_none() {
        println!(
            "the new key is yours to keep: set `secret_hash.key_env` or `secret_hash.key_file` to it before the next start"
        );
    } else if config.secret_hash != Default::default() {
        println!("the store keeps the new key: remove `secret_hash` from the configuration before the next start");
    }
    Ok(ExitCode::SUCCESS)
}

/// Every repository compared with the cluster twice, under the old key and under the new one:
/// the drifts whose values differ between the two are the ones to re-hash.
async fn rehash(config: &Config, old: SecretHasher, new: SecretHasher) -> Result<Vec<Rehash>> {
    let progress = Progress::default();
    let sops = compose::sops_keys()?;
    let cluster = compose::Cluster::open(config, &progress).await?;
    let live = cluster.live();
    let settings = compose::scan_settings(config, &progress, &sops);
    let engines: [Engine; 2] =
        [config.built.engine.clone().with_secret_hasher(old), config.built.engine.clone().with_secret_hasher(new)];
    let mut out = Vec::new();
    for source in compose::desired_sources(config, false, &progress, &sops, &cluster)? {
        let options = settings.options(drift_runtime::new_scan_id());
        let before = drift_core::scan::run_scan(source.as_ref(), live.as_ref(), &engines[0], &options).await;
        let after = drift_core::scan::run_scan(source.as_ref(), live.as_ref(), &engines[1], &options).await;
        let fingerprint = |d: &drift_core::Drift| d.fingerprint(&before.cluster, &before.repository);
        let after: std::collections::HashMap<String, &drift_core::Drift> = after
            .drifts
            .iter()
            .filter(|d| d.drift_type == DriftType::SecretDrift)
            .map(|d| (fingerprint(d), d))
            .collect();
        for d in before.drifts.iter().filter(|d| d.drift_type == DriftType::SecretDrift) {
            let fp = fingerprint(d);
            let Some(a) = after.get(&fp) else { continue };
            let (b, a) =
                ((d.git_value.clone(), d.cluster_value.clone()), (a.git_value.clone(), a.cluster_value.clone()));
            if b != a {
                out.push(Rehash { fingerprint: fp, before: b, after: a });
            }
        }
    }
    Ok(out)
}
