//! The key of the Secret-value hash, kept with the store (docs/security.md, "Secret values").
//!
//! Secret values are compared and stored as keyed hashes (`hmac-sha256:…`). For a drift of a
//! Secret to be the same drift from one process to the next (a restart of `drift serve`, a
//! `drift scan`, another replica), every process on one store must hash under the same key: the
//! store keeps it ([`HashKeyStore`]), created once by whichever process asks first, or the user
//! gives it and the store keeps only its [id](HashKey::id), so that a process given another key
//! refuses to start rather than re-hash every Secret drift into a `changed` event.
//!
//! ```
//! use drift_model::hash_key::HashKey;
//! let key = HashKey::from_text(&"ab".repeat(32)).unwrap();
//! assert_eq!(format!("{key:?}"), "HashKey(<hidden>)");
//! assert_eq!(key.id().len(), 16);
//! assert_eq!(HashKey::from_text(&key.to_text()).unwrap().id(), key.id());
//! ```

use async_trait::async_trait;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::Result;

/// A 32-byte key of the Secret-value hash. Its `Debug` hides it, and it has no `Display` and no
/// `Serialize`: the only ways out are [`HashKey::bytes`] (to the hasher) and
/// [`HashKey::to_text`] (to the store's own settings row).
#[derive(Clone, PartialEq, Eq)]
pub struct HashKey([u8; 32]);

impl std::fmt::Debug for HashKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HashKey(<hidden>)")
    }
}

impl HashKey {
    /// A key of these bytes.
    pub fn new(bytes: [u8; 32]) -> Self {
        HashKey(bytes)
    }

    /// The key as text: 64 hexadecimal digits (surrounding white space ignored, as a file or a
    /// variable often ends with a newline). The error never repeats the text.
    pub fn from_text(text: &str) -> Result<Self> {
        let text = text.trim();
        let mut bytes = [0u8; 32];
        if text.len() != 64 || hex::decode_to_slice(text, &mut bytes).is_err() {
            return Err(crate::Error::config(format!(
                "a Secret hash key is 64 hexadecimal digits (32 bytes, e.g. `openssl rand -hex 32`); this one has {} characters{}",
                text.len(),
                if text.len() == 64 { " that are not all hexadecimal digits" } else { "" }
            )));
        }
        Ok(HashKey(bytes))
    }

    /// The key's bytes, for the hasher.
    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The key as [`HashKey::from_text`] reads it, for the store's settings row only.
    pub fn to_text(&self) -> String {
        hex::encode(self.0)
    }

    /// A name of the key that can be shown and compared (16 hexadecimal digits of a SHA-256 of a
    /// label and the key): it tells keys apart and reveals nothing of them.
    pub fn id(&self) -> String {
        let mut h = Sha256::new();
        h.update(b"drift secret hash key id\0");
        h.update(self.0);
        hex::encode(&h.finalize()[..8])
    }
}

/// What a store keeps of its key: its id always, the key itself when the store made it (none
/// when the user gives the key, in the configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptHashKey {
    /// [`HashKey::id`] of the key.
    pub id: String,
    /// The key, when the store keeps it.
    pub key: Option<HashKey>,
}

impl KeptHashKey {
    /// A key the store keeps.
    pub fn kept(key: HashKey) -> Self {
        KeptHashKey { id: key.id(), key: Some(key) }
    }

    /// A key the user gives: only its id is kept.
    pub fn given(key: &HashKey) -> Self {
        KeptHashKey { id: key.id(), key: None }
    }
}

/// One live drift's values hashed under the old key and under the new one, from the same
/// objects ([`HashKeyStore::rotate_hash_key`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Rehash {
    /// The drift's fingerprint ([`crate::Drift::fingerprint`]).
    pub fingerprint: String,
    /// Git's and the cluster's value under the old key: the row is rewritten only when it holds
    /// exactly these.
    pub before: (Option<Value>, Option<Value>),
    /// The same under the new key.
    pub after: (Option<Value>, Option<Value>),
}

/// Where the Secret-hash key of a store is kept (both SQL stores: a row of table `settings`).
#[async_trait]
pub trait HashKeyStore: Send + Sync {
    /// The store's key: the one it keeps, or `proposed` when it keeps none yet, stored now.
    /// Atomic: processes that propose different keys at once all get the one stored first.
    async fn hash_key(&self, proposed: &KeptHashKey) -> Result<KeptHashKey>;

    /// Replaces the key whose id is `from` by `to` and, in the same transaction, rewrites the
    /// values of the live (open or waived) drifts `rehash` names whose stored values are its
    /// `before`, to its `after`: no event, no change of status, occurrences or times. A
    /// conflict error when the store's key is not `from` any more (another rotation won).
    /// Returns how many drifts were rewritten.
    async fn rotate_hash_key(&self, from: &str, to: &KeptHashKey, rehash: &[Rehash]) -> Result<usize>;
}
