//! The progress line: drawn on standard error when it is a terminal (here a pseudo-terminal
//! made by util-linux `script`), never when it is a pipe or a file, never in the report, and
//! not at all with `DRIFT_PROGRESS=never`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

/// A desired folder of `n` ConfigMaps and a live folder where every third one differs.
fn folders(dir: &Path, n: usize) {
    for side in ["desired", "live"] {
        std::fs::create_dir_all(dir.join(side)).unwrap();
    }
    for i in 0..n {
        let value = |side: &str| if side == "live" && i % 3 == 0 { format!("{i}-changed") } else { i.to_string() };
        for side in ["desired", "live"] {
            std::fs::write(
                dir.join(side).join(format!("cm{i}.yaml")),
                format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm{i}\n  namespace: apps\ndata:\n  n: \"{}\"\n",
                    value(side)
                ),
            )
            .unwrap();
        }
    }
}

/// `script` runs the command with a pseudo-terminal as its standard input, output and error,
/// and copies what the terminal showed to its own standard output.
fn script_available() -> bool {
    let found = Command::new("script").arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("DRIFT_REQUIRE_TOOLS").is_none(),
            "util-linux `script` is required (DRIFT_REQUIRE_TOOLS is set)"
        );
        eprintln!("skipped: util-linux `script` (a pseudo-terminal) is not installed");
    }
    found
}

/// Runs `drift diff` on a terminal with the report redirected to a file; returns what the
/// terminal showed and the report.
fn diff_on_terminal(dir: &Path, mode: &str) -> (String, String) {
    let report = dir.join(format!("report-{mode}.json"));
    let command = format!(
        "'{}' diff --desired '{}' --live '{}' -o json > '{}'",
        env!("CARGO_BIN_EXE_drift"),
        dir.join("desired").display(),
        dir.join("live").display(),
        report.display()
    );
    let out = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("DRIFT_PROGRESS", mode)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "200")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    (String::from_utf8_lossy(&out.stdout).into_owned(), std::fs::read_to_string(report).unwrap())
}

#[test]
fn on_a_terminal_the_line_is_drawn_and_erased_and_the_report_stays_clean() {
    if !script_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    folders(dir.path(), 300);
    let (terminal, report) = diff_on_terminal(dir.path(), "always");
    assert!(terminal.contains("s diff"), "no progress line on the terminal: {terminal:?}");
    // Erased at the end: the last thing drawn clears the line.
    assert!(terminal.trim_end_matches(['\r', '\n']).ends_with("\u{1b}[2K"), "line not erased: {terminal:?}");
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["drifts"].as_array().unwrap().len(), 100);
}

#[test]
fn never_when_turned_off_or_when_standard_error_is_not_a_terminal() {
    if !script_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    folders(dir.path(), 50);
    let (terminal, report) = diff_on_terminal(dir.path(), "never");
    assert!(!terminal.contains("diff"), "progress drawn with DRIFT_PROGRESS=never: {terminal:?}");
    assert!(report.contains("\"drifts\""));

    // A pipe, even when asked to draw from the start.
    let out = Command::new(env!("CARGO_BIN_EXE_drift"))
        .args(["diff", "--desired"])
        .arg(dir.path().join("desired"))
        .arg("--live")
        .arg(dir.path().join("live"))
        .args(["-o", "json"])
        .env("DRIFT_PROGRESS", "always")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(!stderr.contains("diff") && !stderr.contains('\r'), "progress on a pipe: {stderr:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["drifts"].as_array().unwrap().len(), 17);
}
