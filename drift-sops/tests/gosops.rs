//! Files encrypted by `sops` itself (the Go reference implementation, see `drift_testkit::sops`)
//! opened with `SopsKeys`: every partial-encryption setting, JSON, a wrong
//! key, and tampering (a value, an unencrypted value, the MAC), never with a value in a message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use age::secrecy::ExposeSecret;
use drift_model::sops::{SopsOpener, Unopened};
use drift_sops::SopsKeys;
use serde_json::{Value, json};

const CANARY: &str = "canary-7f3a9e-hunter2";

const SECRET: &str = "apiVersion: v1
kind: Secret
metadata:
  name: db
  namespace: shop
  labels:
    app: shop
type: Opaque
stringData:
  password: canary-7f3a9e-hunter2
  port: 5432
data:
  token: Y2FuYXJ5LTdmM2E5ZS1odW50ZXIy
";

fn plain() -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "db", "namespace": "shop", "labels": {"app": "shop"}}, "type": "Opaque",
        "stringData": {"password": CANARY, "port": 5432}, "data": {"token": "Y2FuYXJ5LTdmM2E5ZS1odW50ZXIy"}})
}

struct Key {
    keys: SopsKeys,
    recipient: String,
}

fn key() -> Key {
    let identity = age::x25519::Identity::generate();
    let recipient = identity.to_public().to_string();
    Key { keys: SopsKeys::parse(identity.to_string().expose_secret()).unwrap(), recipient }
}

fn encrypt(sops: &std::path::Path, text: &str, format: &str, key: &Key, extra: &[&str]) -> String {
    drift_testkit::sops::encrypt(sops, text, format, &[&key.recipient], extra)
}

fn open(keys: &SopsKeys, text: &str) -> Result<Vec<Value>, Unopened> {
    keys.open(&[text])
}

fn message(e: Unopened) -> String {
    let m = match e {
        Unopened::Damaged(m) | Unopened::Unsupported(m) => m,
        Unopened::NotRecipient => "not a recipient".into(),
    };
    assert!(!m.contains(CANARY) && !m.contains("hunter2"), "a value in a message: {m}");
    m
}

#[test]
fn every_partial_encryption_setting_opens_to_the_plaintext() {
    let Some(sops) = drift_testkit::sops::sops("every_partial_encryption_setting_opens_to_the_plaintext") else {
        return;
    };
    let k = key();
    let variants: [(&[&str], &str); 5] = [
        (&[], "everything"),
        (&["--encrypted-regex", "^(data|stringData)$"], "data and stringData"),
        (&["--unencrypted-suffix", "name"], "all but names"),
        (&["--encrypted-suffix", "Data"], "keys ending in Data"),
        (&["--unencrypted-regex", "^(metadata|kind|apiVersion|type)$"], "all but the bookkeeping"),
    ];
    // `mac_only_encrypted` has no flag: a .sops.yaml sets it.
    let config = format!(
        "creation_rules:\n  - age: {}\n    encrypted_regex: ^stringData$\n    mac_only_encrypted: true\n",
        k.recipient
    );
    let mac_only = drift_testkit::sops::encrypt_with_config(&sops, SECRET, "yaml", &config);
    assert!(mac_only.contains("mac_only_encrypted: true"), "{mac_only}");
    let files = variants
        .iter()
        .map(|(args, what)| (encrypt(&sops, SECRET, "yaml", &k, args), *what))
        .chain([(mac_only, "MAC over encrypted values only")]);
    for (encrypted, what) in files {
        assert!(!encrypted.contains(CANARY), "{what}: sops left the value in clear:\n{encrypted}");
        assert!(encrypted.contains("ENC[AES256_GCM,data:"), "{what}:\n{encrypted}");
        let opened = open(&k.keys, &encrypted).unwrap_or_else(|e| panic!("{what}: {e:?}\n{encrypted}"));
        assert_eq!(opened, vec![plain()], "{what}");
    }
}

#[test]
fn a_json_file_opens() {
    let Some(sops) = drift_testkit::sops::sops("a_json_file_opens") else { return };
    let k = key();
    let text = serde_json::to_string_pretty(&plain()).unwrap();
    let encrypted = encrypt(&sops, &text, "json", &k, &[]);
    assert_eq!(open(&k.keys, &encrypted).unwrap(), vec![plain()]);
}

#[test]
fn a_file_for_another_key_is_not_opened_and_any_given_key_that_is_a_recipient_opens_it() {
    let Some(sops) = drift_testkit::sops::sops("a_file_for_another_key_is_not_opened") else { return };
    let (mine, theirs) = (key(), key());
    let encrypted = encrypt(&sops, SECRET, "yaml", &theirs, &[]);
    assert_eq!(open(&mine.keys, &encrypted), Err(Unopened::NotRecipient));
    // Two recipients; keys given as a file of several identities.
    let both = drift_testkit::sops::encrypt(&sops, SECRET, "yaml", &[&mine.recipient, &theirs.recipient], &[]);
    let other = age::x25519::Identity::generate();
    let file = format!("# two keys\n{}\n\n{}\n", other.to_string().expose_secret(), "");
    let mut keys = SopsKeys::parse(&file).unwrap();
    assert_eq!(open(&keys, &both), Err(Unopened::NotRecipient));
    keys = mine.keys.clone();
    assert_eq!(open(&keys, &both).unwrap(), vec![plain()]);
}

/// Replaces the base64 data of the `n`th encrypted value with other bytes of the same length.
fn flip_value(text: &str, n: usize) -> String {
    let start = text.match_indices("ENC[AES256_GCM,data:").nth(n).unwrap().0 + "ENC[AES256_GCM,data:".len();
    let mut bytes = text.as_bytes().to_vec();
    bytes[start] = if bytes[start] == b'A' { b'B' } else { b'A' };
    String::from_utf8(bytes).unwrap()
}

#[test]
fn tampering_is_refused_with_a_message_that_names_no_value() {
    let Some(sops) = drift_testkit::sops::sops("tampering_is_refused_with_a_message_that_names_no_value") else {
        return;
    };
    let k = key();
    let partial = encrypt(&sops, SECRET, "yaml", &k, &["--encrypted-regex", "^(data|stringData)$"]);
    assert!(open(&k.keys, &partial).is_ok());

    // A ciphertext changed: it does not authenticate.
    let m = message(open(&k.keys, &flip_value(&partial, 0)).unwrap_err());
    assert!(m.contains("does not authenticate"), "{m}");
    // Not base64.
    let m = message(open(&k.keys, &partial.replacen("ENC[AES256_GCM,data:", "ENC[AES256_GCM,data:!", 1)).unwrap_err());
    assert!(m.contains("is not a SOPS value"), "{m}");
    // A value left in clear changed: every value authenticates, the MAC does not match.
    let m = message(open(&k.keys, &partial.replace("app: shop", "app: evil")).unwrap_err());
    assert_eq!(m, "the MAC does not match the values");
    // Values moved between keys: the path is their additional data.
    let swapped = {
        let lines: Vec<&str> = partial.lines().collect();
        let i = lines.iter().position(|l| l.trim_start().starts_with("password:")).unwrap();
        let j = lines.iter().position(|l| l.trim_start().starts_with("port:")).unwrap();
        let value = |l: &str| l.split_once(": ").unwrap().1.to_owned();
        let (vi, vj) = (value(lines[i]), value(lines[j]));
        let mut out: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
        out[i] = format!("  password: {vj}");
        out[j] = format!("  port: {vi}");
        out.join("\n") + "\n"
    };
    assert!(matches!(open(&k.keys, &swapped), Err(Unopened::Damaged(_))));
    // The MAC itself changed.
    let mac_at = partial.find("mac: ENC[AES256_GCM,data:").unwrap();
    let tampered_mac = flip_value(&partial, partial[..mac_at].matches("ENC[AES256_GCM,data:").count());
    let m = message(open(&k.keys, &tampered_mac).unwrap_err());
    assert!(m.starts_with("its MAC does not authenticate"), "{m}");
    // lastmodified changed: it is the MAC's additional data.
    let moved = partial
        .lines()
        .map(|l| match l.split_once("lastmodified:") {
            Some((indent, _)) if indent.trim().is_empty() => format!("{indent}lastmodified: \"2001-01-01T00:00:00Z\""),
            _ => l.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(matches!(open(&k.keys, &moved), Err(Unopened::Damaged(_))));
}
