//! SOPS-encrypted manifests: how they are recognised, the interface that opens them, and what a
//! scan says about one it could not open.
//!
//! drift-core holds no key and reads no environment: an adapter implements [`SopsOpener`] (the
//! `drift-sops` crate opens files encrypted for age recipients, with identities the binary reads
//! from `SOPS_AGE_KEY` / `SOPS_AGE_KEY_FILE`), and the code that reads a file's text calls
//! [`open_file`] right after parsing it. Opened objects are plaintext in memory only: the engine
//! replaces every Secret value with a keyed hash before anything is reported, and the digest of
//! an opened object is the digest of its encrypted document ([`drift_model::Provenance::sops_digest`]).
//! An object left encrypted is listed by the scan as uncomparable, with a note from [`note`].
//!
//! ```
//! use drift_manifest::parse_manifests;
//! use drift_manifest::sops::{SopsOpener, Unopened, is_sops_encrypted, open_file};
//!
//! #[derive(Debug)]
//! struct NotMine;
//! impl SopsOpener for NotMine {
//!     fn open(&self, _documents: &[&str]) -> Result<Vec<serde_json::Value>, Unopened> {
//!         Err(Unopened::NotRecipient)
//!     }
//! }
//! let text = "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\n\
//!             data: {password: 'ENC[AES256_GCM,data:Zm9v,iv:YmFy,tag:YmF6,type:str]'}\n\
//!             sops: {mac: x, lastmodified: '2026-11-01T00:00:00Z'}\n";
//! let mut parsed = parse_manifests(text, "db.yaml");
//! open_file(&mut parsed, text, "db.yaml", &NotMine);
//! assert!(is_sops_encrypted(&parsed.resources[0].object)); // left as Git has it
//! assert!(parsed.warnings.is_empty()); // the scan's note says why
//! ```

use drift_model::ErrorKind;
pub use drift_model::sops::*;
use drift_model::{Provenance, Resource, SourceWarning};

use crate::parse::ParsedManifests;

/// Opens the SOPS-encrypted objects of one parsed file with `opener`, in place: each becomes
/// its plaintext object (same path and document, [`Provenance::sops_digest`] set to the digest
/// of the encrypted object). Only Secrets (`v1`) are opened, whose values the engine hashes:
/// an object of another kind stays encrypted, with a note. When the file cannot be opened the objects stay as Git has them
/// (the scan lists them as uncomparable); a damaged file adds an error naming the file, a file
/// the opener does not support a note. `text` is the text `parsed` was read from.
pub fn open_file(parsed: &mut ParsedManifests, text: &str, path: &str, opener: &dyn SopsOpener) {
    let mut indices: Vec<usize> = parsed
        .resources
        .iter()
        .filter(|r| is_sops_encrypted(&r.object))
        .filter_map(|r| r.provenance.document)
        .collect();
    if indices.is_empty() {
        return;
    }
    indices.sort_unstable();
    indices.dedup();
    let Some(documents) = crate::parse::document_texts(text, &indices) else {
        return;
    };
    match opener.open(&documents) {
        Ok(plain) if plain.len() == indices.len() => {
            let mut opened = Vec::with_capacity(parsed.resources.len());
            for r in std::mem::take(&mut parsed.resources) {
                let at = r.provenance.document.and_then(|d| indices.binary_search(&d).ok());
                match at {
                    Some(i) if is_sops_encrypted(&r.object) => match Resource::from_object(plain[i].clone()) {
                        Ok(p) if !(p.key.group.is_empty() && p.key.kind == "Secret") => {
                            parsed.warnings.push(
                                SourceWarning::note(format!(
                                    "{} opened from SOPS but not compared: only Secrets are, whose values are hashed \
                                     (the decrypted values of another kind would appear in its drifts)",
                                    p.key
                                ))
                                .at(path, r.provenance.document, None),
                            );
                            opened.push(r);
                        }
                        Ok(p) => opened.push(p.with_provenance(Provenance {
                            sops_digest: Some(drift_model::object_digest(&r.object)),
                            ..r.provenance
                        })),
                        Err(e) => {
                            parsed.warnings.push(
                                SourceWarning::error(
                                    ErrorKind::InvalidInput,
                                    format!("SOPS-encrypted document opened, but {}; not compared", e.message()),
                                )
                                .at(path, r.provenance.document, None),
                            );
                            opened.push(r);
                        }
                    },
                    _ => opened.push(r),
                }
            }
            parsed.resources = opened;
        }
        Ok(_) => parsed.warnings.push(
            SourceWarning::error(ErrorKind::Unexpected, "SOPS-encrypted file opened into another number of documents")
                .at(path, None, None),
        ),
        Err(Unopened::NotRecipient) => {}
        Err(Unopened::Unsupported(why)) => parsed
            .warnings
            .push(SourceWarning::note(format!("SOPS-encrypted file not opened: {why}")).at(path, None, None)),
        Err(Unopened::Damaged(why)) => parsed.warnings.push(
            SourceWarning::error(
                ErrorKind::InvalidInput,
                format!("SOPS-encrypted file is damaged or was tampered with: {why}; its objects are not compared"),
            )
            .at(path, None, None),
        ),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::parse::parse_manifests;
    use serde_json::Value;
    use serde_json::json;

    /// Opens by dropping `sops` and replacing each `ENC[...]` string with "plain".
    #[derive(Debug)]
    struct Fake(Result<(), Unopened>);

    fn strip(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.remove("sops");
                m.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            Value::String(s) if s.starts_with("ENC[") => *s = "plain".into(),
            _ => {}
        }
    }

    impl SopsOpener for Fake {
        fn open(&self, documents: &[&str]) -> Result<Vec<Value>, Unopened> {
            self.0.clone()?;
            Ok(documents
                .iter()
                .map(|d| {
                    let mut v: Value = serde_saphyr::from_str(d).unwrap();
                    strip(&mut v);
                    v
                })
                .collect())
        }
    }

    const FILE: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain}\n---\n\
        apiVersion: v1\nkind: Secret\nmetadata: {name: 'ENC[AES256_GCM,data:eA==,iv:eQ==,tag:eg==,type:str]'}\n\
        data: {k: 'ENC[AES256_GCM,data:eA==,iv:eQ==,tag:eg==,type:str]'}\nsops: {mac: m, lastmodified: t}\n---\n\
        apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {k: 'ENC[AES256_GCM,data:eA==,iv:eQ==,tag:eg==,type:str]'}\n\
        sops: {mac: m, lastmodified: t}\n";

    #[test]
    fn opened_secrets_replace_their_documents_and_keep_the_digest_of_the_ciphertext() {
        let mut parsed = parse_manifests(FILE, "f.yaml");
        let encrypted_digest = drift_model::object_digest(&parsed.resources[1].object);
        open_file(&mut parsed, FILE, "f.yaml", &Fake(Ok(())));
        let names: Vec<_> = parsed.resources.iter().map(|r| r.key.name.as_str()).collect();
        assert_eq!(names, ["plain", "plain", "cm"], "in file order; the Secret found by its decrypted name");
        let secret = &parsed.resources[1];
        assert_eq!(
            secret.object,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "plain"}, "data": {"k": "plain"}}).into()
        );
        assert_eq!(secret.provenance.document, Some(1));
        assert_eq!(secret.provenance.sops_digest.as_deref(), Some(encrypted_digest.as_str()));
        // The ConfigMap is not a Secret: left encrypted, with a note.
        assert!(is_sops_encrypted(&parsed.resources[2].object));
        assert_eq!(parsed.warnings.len(), 1);
        assert!(
            parsed.warnings[0].message.starts_with("ConfigMap cm opened from SOPS but not compared"),
            "{:?}",
            parsed.warnings
        );
        assert!(!parsed.warnings[0].fatal);
    }

    #[test]
    fn a_file_not_opened_stays_as_git_has_it_and_says_why() {
        for (why, warning) in [
            (Unopened::NotRecipient, None),
            (Unopened::Unsupported("key groups".into()), Some((false, "SOPS-encrypted file not opened: key groups"))),
            (
                Unopened::Damaged("the MAC does not match the values".into()),
                Some((
                    true,
                    "SOPS-encrypted file is damaged or was tampered with: the MAC does not match the values; its objects are not compared",
                )),
            ),
        ] {
            let mut parsed = parse_manifests(FILE, "f.yaml");
            let before = parsed.clone();
            open_file(&mut parsed, FILE, "f.yaml", &Fake(Err(why)));
            assert_eq!(parsed.resources, before.resources);
            let got = parsed.warnings.first().map(|w| (w.fatal, w.message.as_str()));
            assert_eq!(got, warning);
            if let Some(w) = parsed.warnings.first() {
                assert_eq!(w.path.as_deref(), Some("f.yaml"));
            }
        }
    }

    #[test]
    fn the_note_says_whether_no_key_was_given_or_none_opens_it() {
        let r = Resource::from_object(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
            "sops": {"mac": "m", "age": [{"recipient": "age1mine", "enc": "x"}]}}))
        .unwrap();
        assert_eq!(
            why_unopened(&r.object, None),
            "no age key given (SOPS_AGE_KEY, SOPS_AGE_KEY_FILE, SOPS_AGE_KEY_CMD or sops/age/keys.txt)"
        );
        assert_eq!(why_unopened(&r.object, Some(&["age1other".into()])), "none of the given age keys opens it");
        assert_eq!(
            why_unopened(&r.object, Some(&["age1mine".into()])),
            "it was not opened, see the warning of its file"
        );
        let n = note(&r, None);
        assert!(!n.fatal);
        assert!(
            n.message.starts_with("Secret db is SOPS-encrypted: not comparable without the key (no age key given"),
            "{}",
            n.message
        );
    }
}
