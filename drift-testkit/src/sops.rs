//! SOPS files made by a real, independent SOPS implementation for tests: `rops` (the `rops-cli`
//! crate, pure Rust, with parity tests against files of the Go sops), which
//! `scripts/install-tools.sh` installs pinned into the tools folder. No `sops` binary is
//! available on these machines, and a test must not check the decryptor against an encryptor of
//! its own.
//!
//! A test that needs it asks [`rops`], which finds `rops` on `PATH` or in
//! `$DRIFT_TOOLS_DIR/bin` (default `/var/tmp/drift-tools/bin`), and otherwise prints
//! `skipped NAME: why` and returns `None`, unless `DRIFT_REQUIRE_TOOLS=1` (set by
//! `scripts/test`) makes the absence a failure.
//!
//! ```
//! // Without rops this prints "skipped example: ..." (or fails under DRIFT_REQUIRE_TOOLS=1).
//! if let Some(rops) = drift_testkit::sops::rops("example") {
//!     assert!(rops.is_file());
//! }
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The pinned version `scripts/install-tools.sh` installs.
pub const ROPS_VERSION: &str = "0.1.7";

/// The `rops` program, for the test named `test`; see the module documentation.
///
/// # Panics
///
/// When `rops` is missing and `DRIFT_REQUIRE_TOOLS=1`.
pub fn rops(test: &str) -> Option<PathBuf> {
    let tools = std::env::var_os("DRIFT_TOOLS_DIR")
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from("/var/tmp/drift-tools"), PathBuf::from);
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("rops")).collect::<Vec<_>>())
        .unwrap_or_default();
    if let Some(found) = on_path.into_iter().chain([tools.join("bin").join("rops")]).find(|p| p.is_file()) {
        return Some(found);
    }
    let required = std::env::var("DRIFT_REQUIRE_TOOLS").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "{test}: rops is not on PATH nor in {}/bin and DRIFT_REQUIRE_TOOLS=1 (scripts/install-tools.sh installs it)",
        tools.display()
    );
    eprintln!("skipped {test}: rops is not installed (scripts/install-tools.sh installs rops-cli {ROPS_VERSION})");
    None
}

/// Encrypts `plain` (YAML or JSON, told by `format`: `yaml` or `json`) for the age
/// `recipients` with `rops encrypt`, plus `extra` arguments (`--encrypted-regex`, ...), and
/// returns the encrypted file's text. Runs in a fresh folder, so that no `.rops.yaml` of the
/// caller's applies.
///
/// # Panics
///
/// When rops fails.
pub fn encrypt(rops: &Path, plain: &str, format: &str, recipients: &[&str], extra: &[&str]) -> String {
    let dir = std::env::temp_dir().join(format!("drift-rops-{}-{}", std::process::id(), unique()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut cmd = Command::new(rops);
    cmd.arg("encrypt").args(["--format", format]);
    for r in recipients {
        cmd.args(["--age", r]);
    }
    cmd.args(extra).current_dir(&dir).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run {}: {e}", rops.display()));
    child.stdin.take().unwrap().write_all(plain.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "rops encrypt {extra:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
