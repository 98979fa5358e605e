//! Opens SOPS-encrypted manifests in memory, for the drift detector.
//!
//! A manifest that [SOPS](https://getsops.io) encrypted for an age recipient holds its values as
//! `ENC[AES256_GCM,data:...,iv:...,tag:...,type:...]` and a top-level `sops:` block with the data
//! key encrypted for each recipient, `lastmodified` and an encrypted MAC. [`SopsKeys`] holds age
//! identities, found where sops finds them (`SOPS_AGE_KEY`: one or more `AGE-SECRET-KEY-1...`
//! lines; `SOPS_AGE_KEY_FILE`: a file of them; `SOPS_AGE_KEY_CMD`: a command that prints them;
//! `sops/age/keys.txt` in the user's configuration folder), and implements
//! [`drift_model::sops::SopsOpener`]: it opens the data key with [`age`], decrypts each value with
//! AES-256-GCM (32-byte nonces; the path of mapping keys from the root, joined with `:` and
//! ended with `:`, as additional data), follows the file's `unencrypted_suffix`,
//! `encrypted_suffix`, `unencrypted_regex`, `encrypted_regex` and `mac_only_encrypted` to know
//! which values are ciphertext, and refuses a file whose MAC (SHA-512 over the plaintext values in
//! document order) is not the one stored encrypted in it.
//!
//! The plaintext stays in memory: nothing here writes, logs or puts a value into an error. The
//! engine of drift-core replaces every Secret value with a keyed hash before it reports anything.
//!
//! ```
//! use drift_sops::SopsKeys;
//! // What `drift diff`, `drift scan` and `drift serve` do at start.
//! let keys = SopsKeys::from_env_with(|_| None).unwrap(); // no variable set, no key file
//! assert!(keys.is_empty()); // SOPS files stay uncomparable, with a note saying no key was given
//! let keys = SopsKeys::parse("# a comment\n").unwrap();
//! assert_eq!(keys.recipients().len(), 0);
//! ```
#![warn(missing_docs)]

mod keys;
mod open;
mod tree;

pub use keys::{KEY_CMD_VAR, KEY_FILE_VAR, KEY_VAR, KeysError, SopsKeys, USER_KEY_FILE};

/// The examples of the crate's README.md, compiled and run as doctests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
