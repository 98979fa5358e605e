//! Secret values: `stringData` folded into `data`, every value replaced by a keyed hash.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde_json::{Map, Value};
use sha2::Sha256;

/// Prefix of a hashed Secret value.
pub const HASH_PREFIX: &str = "hmac-sha256:";

/// Hashes Secret values with HMAC-SHA-256 under a 32-byte key (the `drift` binary's is the one
/// its store keeps, `drift_model::hash_key`), so equal values compare equal and no value can be
/// read back (nor guessed from a precomputed table without the key).
#[derive(Clone)]
pub struct SecretHasher {
    key: [u8; 32],
}

impl std::fmt::Debug for SecretHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretHasher { key: <hidden> }")
    }
}

impl SecretHasher {
    /// A hasher with this key.
    pub fn new(key: [u8; 32]) -> Self {
        SecretHasher { key }
    }
    /// A hasher with a random key ([`SecretHasher::random_key`]): hashes differ from one process
    /// to the next, so a store keeps a key of its own (`drift_model::hash_key`) and hands it to
    /// [`SecretHasher::new`].
    pub fn random() -> Self {
        SecretHasher { key: Self::random_key() }
    }
    /// A random key from the operating system (falls back to a key derived from the time and
    /// address space when the OS has no entropy source, which only weakens resistance to
    /// guessing, never confidentiality of the output format).
    pub fn random_key() -> [u8; 32] {
        let mut key = [0u8; 32];
        if getrandom::fill(&mut key).is_err() {
            use sha2::Digest;
            let seed = format!("{:?}{:p}", std::time::SystemTime::now(), &key);
            key.copy_from_slice(&Sha256::digest(seed.as_bytes()));
        }
        key
    }
    /// The hash text of a value: `hmac-sha256:` and 16 hex digits.
    pub fn hash(&self, value: &[u8]) -> String {
        // HMAC accepts keys of any length, so this cannot fail.
        let mut mac = match <Hmac<Sha256> as Mac>::new_from_slice(&self.key) {
            Ok(m) => m,
            Err(_) => unreachable!("HMAC takes keys of any length"),
        };
        mac.update(value);
        let out = mac.finalize().into_bytes();
        format!("{HASH_PREFIX}{}", hex::encode(&out[..8]))
    }
}

/// Folds `stringData` into `data` (as the API server does) and hashes every value of `data`.
pub fn fold_and_hash(secret: &mut Map<String, Value>, hasher: &SecretHasher) {
    let mut data: Map<String, Value> = match secret.remove("data") {
        Some(Value::Object(m)) => m
            .into_iter()
            .map(|(k, v)| {
                let bytes = match &v {
                    Value::String(s) => base64::engine::general_purpose::STANDARD
                        .decode(s.trim())
                        .unwrap_or_else(|_| s.as_bytes().to_vec()),
                    other => other.to_string().into_bytes(),
                };
                (k, Value::String(hasher.hash(&bytes)))
            })
            .collect(),
        _ => Map::new(),
    };
    if let Some(Value::Object(string_data)) = secret.remove("stringData") {
        for (k, v) in string_data {
            let bytes = match &v {
                Value::String(s) => s.as_bytes().to_vec(),
                other => other.to_string().into_bytes(),
            };
            data.insert(k, Value::String(hasher.hash(&bytes)));
        }
    }
    if !data.is_empty() {
        secret.insert("data".to_owned(), Value::Object(data));
    }
}
