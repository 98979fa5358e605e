//! SOPS-encrypted manifests: how they are recognised, the port that opens them
//! ([`SopsOpener`]), and what a scan says about one it could not open ([`note`]). Opening the
//! objects of a parsed file is `drift_manifest::sops::open_file`.
//!
//! The model holds no key and reads no environment: an adapter implements [`SopsOpener`] (the
//! `drift-sops` crate opens files encrypted for age recipients, with identities the binary reads
//! from `SOPS_AGE_KEY` / `SOPS_AGE_KEY_FILE`). Opened objects are plaintext in memory only: the
//! engine replaces every Secret value with a keyed hash before anything is reported, and the
//! digest of an opened object is the digest of its encrypted document
//! ([`crate::Provenance::sops_digest`]).

use std::fmt;

use serde_json::Value;

use crate::{Resource, SourceWarning};

/// Whether an object is a SOPS-encrypted manifest: a top-level `sops` mapping with the metadata
/// SOPS writes (`mac`, `lastmodified`). Its values are ciphertext (`ENC[AES256_GCM,...]`), so
/// comparing it with the cluster would report every value as changed; a scan lists it as
/// uncomparable instead ([`crate::ScanReport::uncomparable`]) unless it was opened first.
pub fn is_sops_encrypted(object: &Value) -> bool {
    object
        .get("sops")
        .and_then(Value::as_object)
        .is_some_and(|m| m.contains_key("mac") || m.contains_key("lastmodified"))
}

/// Why a SOPS-encrypted file was not opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unopened {
    /// None of the keys given is a recipient of the file.
    NotRecipient,
    /// The file uses something the opener does not read (Shamir key groups, comment regexes):
    /// a note, the objects left uncomparable.
    Unsupported(String),
    /// The file is damaged or was tampered with (bad base64, a value or the MAC that does not
    /// authenticate, a MAC that does not match the values): an error of the file, its objects
    /// left uncomparable. The message names no plaintext.
    Damaged(String),
}

/// Opens SOPS-encrypted documents in memory.
pub trait SopsOpener: Send + Sync + fmt::Debug {
    /// Opens the SOPS-encrypted documents of one file, given as their texts in file order (YAML
    /// documents, or one JSON document), and returns their plaintext objects in the same order,
    /// without the `sops` block. SOPS writes the same metadata into every document of a file
    /// and one MAC over all of them, so they are opened together.
    ///
    /// Must never put a decrypted value into an [`Unopened`] message, a log line or a file.
    fn open(&self, documents: &[&str]) -> Result<Vec<Value>, Unopened>;
}

/// Why an object that is still SOPS-encrypted at compare time was not opened, for its note:
/// `recipients` are the public keys (age recipients) of the identities given, `None` when no
/// key was given.
pub fn why_unopened(object: &Value, recipients: Option<&[String]>) -> &'static str {
    let Some(given) = recipients else {
        return "no age key given (SOPS_AGE_KEY, SOPS_AGE_KEY_FILE, SOPS_AGE_KEY_CMD or sops/age/keys.txt)";
    };
    let listed = object
        .pointer("/sops/age")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|a| a.get("recipient").and_then(Value::as_str))
        .any(|r| given.iter().any(|g| g == r.trim()));
    if listed { "it was not opened, see the warning of its file" } else { "none of the given age keys opens it" }
}

/// The note of a SOPS-encrypted object a scan does not compare.
pub fn note(r: &Resource, recipients: Option<&[String]>) -> SourceWarning {
    SourceWarning::note(format!(
        "{} is SOPS-encrypted: not comparable without the key ({}); not compared, and its drifts are left as they were",
        r.key,
        why_unopened(&r.object, recipients)
    ))
    .at(r.provenance.path.clone().unwrap_or_default(), r.provenance.document, None)
}
