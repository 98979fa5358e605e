//! `drift diff` and `drift scan` on a Secret that the reference SOPS implementation
//! (`sops`, `drift_testkit::sops`) encrypted: with the age key in `SOPS_AGE_KEY`,
//! `SOPS_AGE_KEY_FILE`, `SOPS_AGE_KEY_CMD` or the user's `sops/age/keys.txt` it is opened in
//! memory and compared as a Secret (values hashed); without a key, with a key that is not a
//! recipient, or tampered, it is not compared and a note or an error says why. A canary value never reaches the output, the logs, errors or the store.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use age::secrecy::ExposeSecret;
use base64::Engine as _;
use serde_json::Value;

const CANARY: &str = "canary-5d1c0b-correct-horse";
const CHANGED: &str = "canary-5d1c0b-changed-by-hand";

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn desired_secret() -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: shop\ntype: Opaque\n\
         stringData:\n  password: {CANARY}\ndata:\n  user: {}\n",
        b64("shop")
    )
}

fn live_secret(password: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: shop\n  resourceVersion: \"7\"\n\
         type: Opaque\ndata:\n  password: {}\n  user: {}\n",
        b64(password),
        b64("shop")
    )
}

struct Key {
    secret: String,
    recipient: String,
}

fn key() -> Key {
    let identity = age::x25519::Identity::generate();
    Key { secret: identity.to_string().expose_secret().to_owned(), recipient: identity.to_public().to_string() }
}

struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    /// A desired folder with the encrypted Secret and a ConfigMap, a live folder with both.
    fn new(encrypted: &str, live_password: &str) -> Case {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("desired")).unwrap();
        std::fs::create_dir_all(dir.path().join("live")).unwrap();
        std::fs::write(dir.path().join("desired/db.sops.yaml"), encrypted).unwrap();
        let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  namespace: shop\ndata:\n  a: \"1\"\n";
        std::fs::write(dir.path().join("desired/web.yaml"), cm).unwrap();
        std::fs::write(dir.path().join("live/all.yaml"), format!("{}---\n{cm}", live_secret(live_password))).unwrap();
        Case { dir }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// `drift diff --output json` with the given SOPS variables only; debug logs on.
    fn diff(&self, env: &[(&str, &str)]) -> (i32, Value, String) {
        let (code, out, err) = run(
            &[
                "diff",
                "--desired",
                self.path("desired").to_str().unwrap(),
                "--live",
                self.path("live").to_str().unwrap(),
                "--output",
                "json",
            ],
            env,
        );
        for text in [&out, &err] {
            assert_no_plaintext(text);
        }
        (code, serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}")), err)
    }
}

fn run(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_drift"));
    cmd.args(args)
        .env("NO_COLOR", "1")
        .env("DRIFT_LOG", "debug")
        .env_remove("SOPS_AGE_KEY")
        .env_remove("SOPS_AGE_KEY_FILE")
        .env_remove("SOPS_AGE_KEY_CMD")
        // No user key file (sops/age/keys.txt) unless a test gives one.
        .env("XDG_CONFIG_HOME", "/nonexistent/drift-test-config");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (out.status.code().unwrap(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

fn assert_no_plaintext(text: &str) {
    for plain in [CANARY, CHANGED, &b64(CANARY), &b64(CHANGED), "correct-horse", "changed-by-hand"] {
        assert!(!text.contains(plain), "plaintext {plain:?} in output:\n{text}");
    }
}

fn notes(doc: &Value) -> Vec<String> {
    doc["warnings"].as_array().unwrap().iter().map(|w| w["message"].as_str().unwrap().to_owned()).collect()
}

fn encrypted(sops: &Path, k: &Key, extra: &[&str]) -> String {
    let text = drift_testkit::sops::encrypt(sops, &desired_secret(), "yaml", &[&k.recipient], extra);
    assert!(!text.contains(CANARY));
    text
}

#[test]
fn with_the_key_a_sops_secret_is_compared_hashed_and_without_it_left_uncomparable() {
    let Some(sops) = drift_testkit::sops::sops("with_the_key_a_sops_secret_is_compared_hashed") else { return };
    let k = key();
    let file = encrypted(&sops, &k, &["--encrypted-regex", "^(data|stringData)$"]);

    // The cluster's password differs: one secret drift, values as hashes only.
    let drifted = Case::new(&file, CHANGED);
    let (code, doc, err) = drifted.diff(&[("SOPS_AGE_KEY", &k.secret)]);
    assert_eq!(code, 1, "{doc}\n{err}");
    let drifts = doc["drifts"].as_array().unwrap();
    assert_eq!(drifts.len(), 1, "{doc}");
    let d = &drifts[0];
    assert_eq!((d["drift_type"].as_str(), d["path"].as_str()), (Some("secret_drift"), Some("data.password")), "{d}");
    assert_eq!(d["resource"]["name"], "db");
    for side in ["git_value", "cluster_value"] {
        assert!(d[side].as_str().unwrap().starts_with("hmac-sha256:"), "{d}");
    }
    assert!(notes(&doc).iter().all(|n| !n.contains("SOPS")), "{doc}");
    assert!(!err.contains(&k.secret[20..]), "the key in the logs");

    // The same key from a file; the cluster equal to Git: nothing.
    let same = Case::new(&file, CANARY);
    let keys = same.path("keys.txt");
    std::fs::write(&keys, format!("# created by the test\n{}\n", k.secret)).unwrap();
    let (code, doc, err) = same.diff(&[("SOPS_AGE_KEY_FILE", keys.to_str().unwrap())]);
    assert_eq!(code, 0, "{doc}\n{err}");
    assert_eq!(doc["summary"]["resources_compared"], 2, "{doc}");
    // ... from the user's key file, where sops looks without being told ...
    let config = same.path("config");
    std::fs::create_dir_all(config.join("sops/age")).unwrap();
    std::fs::copy(&keys, config.join("sops/age/keys.txt")).unwrap();
    let (code, doc, err) = same.diff(&[("XDG_CONFIG_HOME", config.to_str().unwrap())]);
    assert_eq!((code, &doc["summary"]["resources_compared"]), (0, &Value::from(2)), "{doc}\n{err}");
    // ... and from a command that prints it.
    let cmd = format!("cat {}", keys.display());
    let (code, doc, err) = drifted.diff(&[("SOPS_AGE_KEY_CMD", &cmd)]);
    assert_eq!((code, doc["drifts"].as_array().unwrap().len()), (1, 1), "{doc}\n{err}");

    // No key: as before, not compared, a note that says no key was given, exit 0.
    let (code, doc, err) = drifted.diff(&[]);
    assert_eq!(code, 0, "{doc}\n{err}");
    assert_eq!(doc["summary"]["resources_compared"], 1, "{doc}");
    let n = notes(&doc);
    assert!(
        n.iter().any(
            |m| m.starts_with("Secret shop/db is SOPS-encrypted: not comparable without the key (no age key given")
        ),
        "{n:?}"
    );

    // A key that is not a recipient: the note says so.
    let other = key();
    let (code, doc, _) = drifted.diff(&[("SOPS_AGE_KEY", &other.secret)]);
    assert_eq!(code, 0, "{doc}");
    assert!(notes(&doc).iter().any(|m| m.contains("(none of the given age keys opens it)")), "{doc}");
    assert!(doc["drifts"].as_array().unwrap().is_empty());
}

#[test]
fn a_tampered_sops_file_is_an_error_naming_the_file_and_is_not_compared() {
    let Some(sops) = drift_testkit::sops::sops("a_tampered_sops_file_is_an_error_naming_the_file") else { return };
    let k = key();
    let file = encrypted(&sops, &k, &["--encrypted-regex", "^(data|stringData)$"]);
    // The name left in clear is changed: every value still decrypts, the MAC does not match.
    let case = Case::new(&file.replace("name: db", "name: db2"), CHANGED);
    let (code, doc, err) = case.diff(&[("SOPS_AGE_KEY", &k.secret)]);
    assert_eq!(code, 2, "{doc}\n{err}");
    let warnings = doc["warnings"].as_array().unwrap();
    let broken = warnings.iter().find(|w| w["fatal"] == true).unwrap_or_else(|| panic!("{doc}"));
    assert!(broken["path"].as_str().unwrap().ends_with("db.sops.yaml"), "{broken}");
    assert!(broken["message"].as_str().unwrap().contains("the MAC does not match the values"), "{broken}");
    assert!(doc["drifts"].as_array().unwrap().is_empty(), "never compared as if real: {doc}");
    assert!(notes(&doc).iter().any(|m| m.contains("db2 is SOPS-encrypted")), "{doc}");
}

#[test]
fn a_fully_encrypted_secret_is_found_by_its_decrypted_name() {
    let Some(sops) = drift_testkit::sops::sops("a_fully_encrypted_secret_is_found_by_its_decrypted_name") else {
        return;
    };
    let k = key();
    // sops' default: every value encrypted, metadata included.
    let file = encrypted(&sops, &k, &[]);
    assert!(!file.contains("name: db"));
    let case = Case::new(&file, CHANGED);
    let (code, doc, err) = case.diff(&[("SOPS_AGE_KEY", &format!("\n{}\n", k.secret))]);
    assert_eq!(code, 1, "{doc}\n{err}");
    assert_eq!(doc["drifts"][0]["resource"]["name"], "db", "{doc}");
}

#[test]
fn a_bad_key_in_the_environment_is_an_error_that_shows_no_key() {
    let k = key();
    let broken = format!("{}x", k.secret);
    let (code, out, err) =
        run(&["diff", "--desired", "/nonexistent", "--live", "/nonexistent"], &[("SOPS_AGE_KEY", &broken)]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(err.contains("SOPS_AGE_KEY, line 1: not an age identity"), "{err}");
    assert!(!err.contains(&k.secret[16..]) && !out.contains(&k.secret[16..]), "{err}");
}

#[test]
fn drift_scan_records_the_drift_of_a_sops_secret_and_the_store_holds_no_plaintext() {
    let Some(sops) = drift_testkit::sops::sops("drift_scan_records_the_drift_of_a_sops_secret") else { return };
    let k = key();
    let case = Case::new(&encrypted(&sops, &k, &["--encrypted-regex", "^(data|stringData)$"]), CHANGED);
    let config = format!(
        "cluster: test\nstore: sqlite://{}\nrepositories:\n  - name: gitops\n    url: {}\nlive:\n  snapshot: {}\n",
        case.path("drift.db").display(),
        case.path("desired").display(),
        case.path("live").display()
    );
    std::fs::write(case.path("drift.yaml"), config).unwrap();
    let (code, out, err) = run(
        &["scan", "--config", case.path("drift.yaml").to_str().unwrap(), "--output", "json"],
        &[("SOPS_AGE_KEY", &k.secret)],
    );
    assert_no_plaintext(&out);
    assert_no_plaintext(&err);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(out.contains("secret_drift"), "{out}");
    for entry in std::fs::read_dir(case.dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap().to_str().unwrap().starts_with("drift.db") {
            let bytes = std::fs::read(&path).unwrap();
            assert_no_plaintext(&String::from_utf8_lossy(&bytes));
        }
    }
}
