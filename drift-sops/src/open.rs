//! Opening a SOPS file: the data key from an age stanza, each encrypted value with AES-256-GCM
//! (32-byte nonces, the path of mapping keys as additional data), then the MAC over the
//! plaintext values in document order, checked against the encrypted one.

use std::io::Read;

use aes_gcm::aead::consts::U32;
use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::aes::Aes256;
use aes_gcm::{AesGcm, Nonce};
use base64::Engine as _;
use drift_model::sops::{SopsOpener, Unopened};
use regex::Regex;
use serde_json::Value;
use sha2::{Digest, Sha512};

use crate::keys::SopsKeys;
use crate::tree::Node;

/// AES-256-GCM with the 32-byte nonces SOPS uses.
type SopsAead = AesGcm<Aes256, U32>;

/// What SOPS hashes first when `mac_only_encrypted` is set (the SHA-256 of `sops`), so that such
/// a MAC never equals one over every value.
const MAC_ONLY_ENCRYPTED_INIT: [u8; 32] = [
    0x8a, 0x3f, 0xd2, 0xad, 0x54, 0xce, 0x66, 0x52, 0x7b, 0x10, 0x34, 0xf3, 0xd1, 0x47, 0xbe, 0x0b, 0x0b, 0x97, 0x5b,
    0x3b, 0xf4, 0x4f, 0x72, 0xc6, 0xfd, 0xad, 0xec, 0x81, 0x76, 0xf2, 0x7d, 0x69,
];

fn damaged(why: impl Into<String>) -> Unopened {
    Unopened::Damaged(why.into())
}

/// The rules of a file's metadata that say which values are ciphertext.
#[derive(Debug, Default)]
struct Rules {
    unencrypted_suffix: Option<String>,
    encrypted_suffix: Option<String>,
    unencrypted_regex: Option<Regex>,
    encrypted_regex: Option<Regex>,
    mac_only_encrypted: bool,
}

impl Rules {
    fn read(sops: &Node) -> Result<Rules, Unopened> {
        for unsupported in ["unencrypted_comment_regex", "encrypted_comment_regex"] {
            if sops.get(unsupported).and_then(Node::as_str).is_some_and(|s| !s.is_empty()) {
                return Err(Unopened::Unsupported(format!("it uses {unsupported}, and comments are not read here")));
            }
        }
        let text = |k: &str| sops.get(k).and_then(Node::as_str).filter(|s| !s.is_empty()).map(str::to_owned);
        let regex = |k: &str| -> Result<Option<Regex>, Unopened> {
            text(k)
                .map(|r| {
                    Regex::new(&r)
                        .map_err(|_| Unopened::Unsupported(format!("its {k} is not a regular expression read here")))
                })
                .transpose()
        };
        Ok(Rules {
            unencrypted_suffix: text("unencrypted_suffix"),
            encrypted_suffix: text("encrypted_suffix"),
            unencrypted_regex: regex("unencrypted_regex")?,
            encrypted_regex: regex("encrypted_regex")?,
            mac_only_encrypted: matches!(sops.get("mac_only_encrypted"), Some(Node::Bool(true))),
        })
    }

    /// Whether the value at `path` was encrypted, in the order sops decides it: unencrypted
    /// suffix, encrypted suffix, unencrypted regex, encrypted regex (each on any key of the path).
    fn encrypted(&self, path: &[String]) -> bool {
        let mut encrypted = true;
        if let Some(s) = &self.unencrypted_suffix
            && path.iter().any(|k| k.ends_with(s.as_str()))
        {
            encrypted = false;
        }
        if let Some(s) = &self.encrypted_suffix {
            encrypted = path.iter().any(|k| k.ends_with(s.as_str()));
        }
        if let Some(r) = &self.unencrypted_regex
            && path.iter().any(|k| r.is_match(k))
        {
            encrypted = false;
        }
        if let Some(r) = &self.encrypted_regex {
            encrypted = path.iter().any(|k| r.is_match(k));
        }
        encrypted
    }
}

/// One encrypted value: `ENC[AES256_GCM,data:<b64>,iv:<b64>,tag:<b64>,type:<type>]`.
struct Sealed<'a> {
    data: Vec<u8>,
    iv: Vec<u8>,
    tag: Vec<u8>,
    kind: &'a str,
}

fn parse_sealed(text: &str) -> Option<Sealed<'_>> {
    let body = text.strip_prefix("ENC[AES256_GCM,data:")?.strip_suffix(']')?;
    let (data, rest) = body.split_once(",iv:")?;
    let (iv, rest) = rest.split_once(",tag:")?;
    let (tag, kind) = rest.split_once(",type:")?;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.decode(s).ok();
    Some(Sealed { data: b64(data)?, iv: b64(iv)?, tag: b64(tag)?, kind })
}

/// Decrypts one value with the data key; `at` names it in errors (never its value).
fn decrypt(text: &str, key: &SopsAead, aad: &str, at: &str) -> Result<Node, Unopened> {
    if text.is_empty() {
        // sops leaves an empty value as it is.
        return Ok(Node::Str(String::new()));
    }
    let sealed = parse_sealed(text).ok_or_else(|| {
        damaged(format!("{at} is not a SOPS value (ENC[AES256_GCM,data:...,iv:...,tag:...,type:...] in base64)"))
    })?;
    if sealed.iv.len() != 32 || sealed.tag.len() != 16 {
        return Err(damaged(format!(
            "{at} has an iv of {} bytes or a tag of {} bytes (32 and 16 expected)",
            sealed.iv.len(),
            sealed.tag.len()
        )));
    }
    let mut msg = sealed.data;
    msg.extend_from_slice(&sealed.tag);
    let plain = key
        .decrypt(Nonce::<U32>::from_slice(&sealed.iv), Payload { msg: &msg, aad: aad.as_bytes() })
        .map_err(|_| damaged(format!("{at} does not authenticate with the data key")))?;
    let as_text = || String::from_utf8(plain.clone()).map_err(|_| damaged(format!("{at} is not UTF-8 text")));
    let wrong = |t: &str| damaged(format!("{at} is not a {t}"));
    Ok(match sealed.kind {
        "str" => Node::Str(as_text()?),
        "int" | "int64" => Node::Int(as_text()?.parse().map_err(|_| wrong("integer"))?),
        "float" => Node::Float(as_text()?.parse().map_err(|_| wrong("float"))?),
        "bool" => match as_text()?.as_str() {
            "1" | "t" | "T" | "true" | "True" | "TRUE" => Node::Bool(true),
            "0" | "f" | "F" | "false" | "False" | "FALSE" => Node::Bool(false),
            _ => return Err(wrong("boolean")),
        },
        "bytes" => Node::Bytes(plain),
        "comment" => return Err(damaged(format!("{at} is an encrypted comment in place of a value"))),
        other => return Err(damaged(format!("{at} has the unknown type {other:?}"))),
    })
}

/// Walks a document in order: decrypts the values the rules say are ciphertext, hashes every
/// leaf the MAC covers.
struct Walk<'a> {
    rules: &'a Rules,
    key: &'a SopsAead,
    mac: Sha512,
    path: Vec<String>,
}

impl Walk<'_> {
    fn node(&mut self, node: Node) -> Result<Node, Unopened> {
        match node {
            Node::Map(entries) => {
                let mut out = Vec::with_capacity(entries.len());
                for (k, v) in entries {
                    self.path.push(k);
                    let v = self.node(v)?;
                    let k = self.path.pop().unwrap_or_default();
                    out.push((k, v));
                }
                Ok(Node::Map(out))
            }
            // Items of a sequence add nothing to the path.
            Node::Seq(items) => Ok(Node::Seq(items.into_iter().map(|i| self.node(i)).collect::<Result<_, _>>()?)),
            Node::Null => Ok(Node::Null),
            leaf => {
                let encrypted = self.rules.encrypted(&self.path);
                let value = if encrypted {
                    let at = format!("the value at {}", self.path.join("."));
                    let Node::Str(text) = &leaf else {
                        return Err(damaged(format!("{at} should be encrypted and is not")));
                    };
                    decrypt(text, self.key, &format!("{}:", self.path.join(":")), &at)?
                } else {
                    leaf
                };
                if (!self.rules.mac_only_encrypted || encrypted)
                    && let Some(bytes) = value.mac_bytes()
                {
                    self.mac.update(&bytes);
                }
                Ok(value)
            }
        }
    }
}

impl SopsKeys {
    /// The data key of a file, from the first age stanza one of the identities opens.
    fn data_key(&self, sops: &Node) -> Result<SopsAead, Unopened> {
        let groups = match sops.get("key_groups") {
            Some(Node::Seq(groups)) if groups.len() > 1 => {
                return Err(Unopened::Unsupported("its data key is split over key groups (Shamir)".into()));
            }
            Some(Node::Seq(groups)) => groups.first(),
            _ => Some(sops),
        };
        let stanzas = match groups.and_then(|g| g.get("age")) {
            Some(Node::Seq(s)) => s.as_slice(),
            _ => &[],
        };
        let mut damage = None;
        for stanza in stanzas {
            let Some(enc) = stanza.get("enc").and_then(Node::as_str) else { continue };
            match self.open_stanza(enc) {
                Ok(Some(key)) => return Ok(key),
                Ok(None) => {}
                Err(e) => damage = Some(e),
            }
        }
        Err(damage.unwrap_or(Unopened::NotRecipient))
    }

    /// `Ok(None)`: none of the identities is this stanza's recipient.
    fn open_stanza(&self, armored: &str) -> Result<Option<SopsAead>, Unopened> {
        let decryptor = age::Decryptor::new(age::armor::ArmoredReader::new(armored.trim().as_bytes()))
            .map_err(|_| damaged("an age stanza of its data key cannot be read"))?;
        let identities = self.identities.iter().map(|i| i as &dyn age::Identity);
        let mut reader = match decryptor.decrypt(identities) {
            Ok(r) => r,
            Err(age::DecryptError::NoMatchingKeys) => return Ok(None),
            Err(_) => return Err(damaged("an age stanza of its data key does not decrypt")),
        };
        let mut key = Vec::with_capacity(32);
        reader.read_to_end(&mut key).map_err(|_| damaged("an age stanza of its data key does not decrypt"))?;
        if key.len() != 32 {
            return Err(damaged(format!("its data key is {} bytes, not 32", key.len())));
        }
        let cipher = SopsAead::new_from_slice(&key).map_err(|_| damaged("its data key is not an AES-256 key"))?;
        Ok(Some(cipher))
    }
}

impl SopsOpener for SopsKeys {
    fn open(&self, documents: &[&str]) -> Result<Vec<Value>, Unopened> {
        let mut trees = Vec::with_capacity(documents.len());
        for text in documents {
            let Node::Map(mut entries) = Node::parse(text).map_err(damaged)? else {
                return Err(damaged("a document is not a mapping"));
            };
            let sops = entries
                .iter()
                .position(|(k, _)| k == "sops")
                .map(|i| entries.remove(i).1)
                .ok_or_else(|| damaged("a document has no sops metadata"))?;
            trees.push((Node::Map(entries), sops));
        }
        let Some((_, sops)) = trees.first() else { return Ok(Vec::new()) };
        let sops = sops.clone();
        let rules = Rules::read(&sops)?;
        if self.is_empty() {
            return Err(Unopened::NotRecipient);
        }
        let key = self.data_key(&sops)?;
        let mut walk = Walk { rules: &rules, key: &key, mac: Sha512::new(), path: Vec::new() };
        if rules.mac_only_encrypted {
            walk.mac.update(MAC_ONLY_ENCRYPTED_INIT);
        }
        let mut plain = Vec::with_capacity(trees.len());
        for (tree, _) in trees {
            plain.push(walk.node(tree)?.into_json());
        }
        let computed: String = walk.mac.finalize().iter().map(|b| format!("{b:02X}")).collect();
        let lastmodified = match sops.get("lastmodified") {
            Some(Node::Str(s)) => s.clone(),
            _ => return Err(damaged("its metadata has no lastmodified")),
        };
        let stored = match sops.get("mac") {
            Some(Node::Str(s)) => decrypt(s, &key, &lastmodified, "its MAC")?,
            _ => return Err(damaged("its metadata has no MAC")),
        };
        if stored != Node::Str(computed) {
            return Err(damaged("the MAC does not match the values"));
        }
        Ok(plain)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_values_are_ciphertext_follows_sops() {
        let p = |s: &[&str]| s.iter().map(|k| (*k).to_owned()).collect::<Vec<_>>();
        let all = Rules::default();
        assert!(all.encrypted(&p(&["data", "password"])));
        let suffix = Rules { unencrypted_suffix: Some("_unencrypted".into()), ..Rules::default() };
        assert!(!suffix.encrypted(&p(&["metadata_unencrypted", "name"])));
        assert!(suffix.encrypted(&p(&["data", "password"])));
        let only = Rules { encrypted_suffix: Some("_secret".into()), ..Rules::default() };
        assert!(only.encrypted(&p(&["db_secret", "x"])) && !only.encrypted(&p(&["db", "x"])));
        let regex = Rules { encrypted_regex: Regex::new("^(data|stringData)$").ok(), ..Rules::default() };
        assert!(regex.encrypted(&p(&["stringData", "k"])) && !regex.encrypted(&p(&["metadata", "name"])));
        let unregex = Rules { unencrypted_regex: Regex::new("^meta").ok(), ..Rules::default() };
        assert!(!unregex.encrypted(&p(&["metadata", "name"])) && unregex.encrypted(&p(&["kind"])));
    }

    #[test]
    fn a_value_that_is_not_in_the_sops_format_is_damage_that_names_no_value() {
        let key = SopsAead::new_from_slice(&[7u8; 32]).unwrap_or_else(|_| unreachable!());
        let err = decrypt("ENC[AES256_GCM,data:!!,iv:AA==,tag:AA==,type:str]", &key, "a:", "the value at a");
        assert!(matches!(&err, Err(Unopened::Damaged(m)) if m.starts_with("the value at a is not a SOPS value")));
        let err = decrypt("hunter2", &key, "a:", "the value at a");
        assert!(matches!(&err, Err(Unopened::Damaged(m)) if !m.contains("hunter2")));
    }
}
