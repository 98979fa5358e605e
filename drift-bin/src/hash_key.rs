//! The key of the Secret-value hash (docs/security.md, "Secret values"): the one the store keeps
//! (made by the first process that needs it), or the one the user gives in `secret_hash:`,
//! whose id the store keeps. Every command that compares Secrets and records them (`scan`,
//! `serve`, `fix`) hashes under it, so a Secret drift stays the same drift across processes,
//! restarts and replicas. The key is never printed: errors and messages name its id.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use drift_core::hash_key::{HashKey, HashKeyStore, KeptHashKey};
use drift_core::normalize::SecretHasher;
use serde::Deserialize;

/// `secret_hash:` of drift.yaml: where the user gives the key, if they do (default: the store
/// makes one and keeps it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretHashConfig {
    /// Name of an environment variable holding the key (64 hexadecimal digits).
    #[serde(default)]
    pub key_env: Option<String>,
    /// A file holding the key (64 hexadecimal digits; a mounted Secret).
    #[serde(default)]
    pub key_file: Option<PathBuf>,
}

impl SecretHashConfig {
    /// Checks the shape, without reading the key.
    pub fn validate(&self) -> Result<()> {
        if self.key_env.is_some() && self.key_file.is_some() {
            bail!("`secret_hash`: give `key_env` or `key_file`, not both");
        }
        if self.key_env.as_deref().is_some_and(|v| v.trim().is_empty()) {
            bail!("`secret_hash.key_env` is empty");
        }
        Ok(())
    }

    /// The key the user gives, read now; `None` when the store keeps its own.
    pub fn given(&self) -> Result<Option<HashKey>> {
        if let Some(var) = &self.key_env {
            let text = std::env::var(var)
                .with_context(|| format!("environment variable {var} (secret_hash.key_env) is not set"))?;
            return Ok(Some(HashKey::from_text(&text).with_context(|| format!("environment variable {var}"))?));
        }
        if let Some(path) = &self.key_file {
            return Ok(Some(read_key_file(path).context("`secret_hash.key_file`")?));
        }
        Ok(None)
    }
}

/// A key from a file (errors name the file, never its content).
pub fn read_key_file(path: &std::path::Path) -> Result<HashKey> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    HashKey::from_text(&text).with_context(|| format!("file {}", path.display()))
}

/// What a process hashes Secret values with: the key the store keeps, made now when it keeps
/// none (every process that starts at once gets the one stored first), or the key the user
/// gives, which must be the one the store's drifts were hashed with.
pub async fn resolve(setting: &SecretHashConfig, keys: &dyn HashKeyStore) -> Result<(SecretHasher, String)> {
    match setting.given()? {
        Some(key) => {
            let kept = keys.hash_key(&KeptHashKey::given(&key)).await.context("the Secret hash key of the store")?;
            if kept.id != key.id() {
                bail!(
                    "the Secret hash key of `secret_hash` (id {}) is not the one this store's Secret drifts are hashed with (id {}): \
                     give that key, or switch with `drift secret-key rotate` (docs/security.md#secret-values)",
                    key.id(),
                    kept.id
                );
            }
            tracing::debug!(key_id = %kept.id, "Secret values are hashed under the key of secret_hash");
            Ok((SecretHasher::new(*key.bytes()), kept.id))
        }
        None => {
            let proposed = KeptHashKey::kept(HashKey::new(SecretHasher::random_key()));
            let kept = keys.hash_key(&proposed).await.context("the Secret hash key of the store")?;
            let Some(key) = kept.key else {
                bail!(
                    "this store's Secret drifts are hashed under a key given in `secret_hash` (id {}); give it again with \
                     `secret_hash.key_env` or `secret_hash.key_file`",
                    kept.id
                );
            };
            if kept.id == proposed.id {
                tracing::info!(key_id = %kept.id, "made the Secret hash key of this store");
            }
            Ok((SecretHasher::new(*key.bytes()), kept.id))
        }
    }
}
