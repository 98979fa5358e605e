//! `drift completions SHELL` and `drift man`: the scripts and pages a package or an image
//! installs, generated from the command's own definitions. The bash script is run by bash, the
//! pages are formatted by groff and man (scripts/test installs them; without them the tests
//! that need them say that they are skipped, unless `DRIFT_REQUIRE_TOOLS=1`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::process::{Command, Stdio};

fn drift(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_drift")).args(args).env("NO_COLOR", "1").output().unwrap();
    (out.status.code().unwrap(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

/// The subcommands `drift --help` lists, as a user sees them.
fn subcommands() -> Vec<String> {
    let (code, help, _) = drift(&["--help"]);
    assert_eq!(code, 0);
    let list = help.split("Commands:\n").nth(1).expect("a Commands: section").split("\n\n").next().unwrap();
    let names: Vec<String> = list.lines().filter_map(|l| l.split_whitespace().next()).map(str::to_owned).collect();
    assert!(names.len() >= 15 && names.iter().any(|n| n == "scan"), "{names:?}");
    names
}

fn tool(name: &str) -> bool {
    let found = Command::new("sh").args(["-c", &format!("command -v {name}")]).output().unwrap().status.success();
    if !found {
        assert!(std::env::var_os("DRIFT_REQUIRE_TOOLS").is_none(), "{name} is required (DRIFT_REQUIRE_TOOLS is set)");
        eprintln!("skipped: {name} is not installed");
    }
    found
}

/// Runs `input` through a shell command and returns (status, stdout, stderr).
fn pipe(command: &str, input: &[u8]) -> (i32, String, String) {
    let mut child = Command::new("sh")
        .args(["-c", command])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn completions_for_each_shell_name_every_subcommand() {
    let names = subcommands();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let (code, script, err) = drift(&["completions", shell]);
        assert_eq!(code, 0, "{shell}: {err}");
        assert!(script.len() > 1000, "{shell}: {} bytes", script.len());
        for name in &names {
            assert!(script.contains(name.as_str()), "the {shell} completion does not mention {name}");
        }
    }
    let (code, _, err) = drift(&["completions", "tcsh"]);
    assert_eq!(code, 2);
    assert!(err.contains("invalid value 'tcsh'"), "{err}");
}

/// What bash completes for the words typed so far, with the generated script sourced as
/// bash-completion would source it.
fn bash_complete(script: &str, words: &[&str]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("drift.bash");
    std::fs::write(&path, script).unwrap();
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        "source '{}'\nCOMP_WORDS=({})\nCOMP_CWORD={}\nCOMP_LINE=\"${{COMP_WORDS[*]}}\"\nCOMP_POINT=${{#COMP_LINE}}\n\
         _drift drift '{}' '{}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        path.display(),
        quoted.join(" "),
        words.len() - 1,
        words[words.len() - 1],
        words[words.len() - 2],
    );
    let out = Command::new("bash").args(["--norc", "--noprofile", "-c", &program]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().filter(|l| !l.is_empty()).map(str::to_owned).collect()
}

#[test]
fn bash_completes_subcommands_and_their_words() {
    if !tool("bash") {
        return;
    }
    let (_, script, _) = drift(&["completions", "bash"]);
    assert_eq!(bash_complete(&script, &["drift", "sc"]), ["scan"]);
    assert_eq!(bash_complete(&script, &["drift", "drifts", "l"]), ["list"]);
    let shells = bash_complete(&script, &["drift", "completions", ""]);
    for shell in ["bash", "fish", "zsh"] {
        assert!(shells.iter().any(|s| s == shell), "{shells:?}");
    }
    let all = bash_complete(&script, &["drift", ""]);
    for name in subcommands() {
        assert!(all.contains(&name), "{name} is not offered after `drift `: {all:?}");
    }
}

#[test]
fn every_manual_page_is_listed_and_formats_without_a_warning() {
    let (code, list, _) = drift(&["man", "--list"]);
    assert_eq!(code, 0);
    let pages: Vec<&str> = list.lines().collect();
    assert_eq!(pages[0], "drift");
    for name in subcommands() {
        assert!(pages.contains(&format!("drift-{name}").as_str()), "no page for {name}: {pages:?}");
    }
    assert!(pages.contains(&"drift-drifts-list") && pages.contains(&"drift-secret-key-rotate"), "{pages:?}");
    let groff = tool("groff");
    for page in &pages {
        let (code, roff, err) = drift(&["man", page]);
        assert_eq!(code, 0, "{page}: {err}");
        assert!(roff.starts_with(".ie") && roff.contains(&format!(".TH {page} 1")), "{page}: {roff}");
        assert!(roff.contains(&format!("\"drift {}\"", env!("CARGO_PKG_VERSION"))), "{page}: {roff}");
        if groff {
            let (code, text, err) = pipe("groff -man -Tutf8 -ww -P-cbu", roff.as_bytes());
            assert_eq!((code, err.as_str()), (0, ""), "{page}");
            assert!(text.contains("NAME") && text.contains("SYNOPSIS"), "{page}: {text}");
        }
    }
    // A subcommand's page is named by its words too.
    assert_eq!(drift(&["man", "drifts", "list"]).1, drift(&["man", "drift-drifts-list"]).1);
    let (code, _, err) = drift(&["man", "nope"]);
    assert_eq!(code, 2);
    assert!(err.contains("no manual page drift-nope"), "{err}");
}

#[test]
fn man_shows_the_page_with_its_exit_status() {
    if !tool("man") {
        return;
    }
    let (_, roff, _) = drift(&["man"]);
    let (code, text, err) = pipe("MANWIDTH=100 man -l -", roff.as_bytes());
    assert_eq!(code, 0, "{err}");
    let text: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(text.contains("drift - GitOps configuration drift detector for Kubernetes"), "{text}");
    assert!(text.contains("EXIT STATUS 0 No drift"), "{text}");
    assert!(text.contains("1 Drift found"), "{text}");
    assert!(text.contains("drift-scan(1)") && text.contains("drift-completions(1)"), "{text}");
}
