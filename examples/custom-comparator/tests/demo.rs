//! The example detector run on the demo, with and without a drift type left out.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};

fn run(leave_out: &[&str]) -> Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_filtered-detector"));
    cmd.arg("--desired").arg(root.join("examples/demo/desired")).arg("--live").arg(root.join("examples/demo/live"));
    for t in leave_out {
        cmd.arg("--leave-out").arg(t);
    }
    cmd.output().unwrap()
}

/// The drift types printed, one per drift.
fn types(run: &Output) -> Vec<String> {
    let stdout = String::from_utf8_lossy(&run.stdout);
    stdout.lines().filter(|l| !l.ends_with("drift(s)")).map(|l| l.split(' ').next().unwrap().to_owned()).collect()
}

#[test]
fn with_nothing_left_out_it_finds_what_the_engine_finds() {
    let all = run(&[]);
    let stdout = String::from_utf8_lossy(&all.stdout);
    assert_eq!(all.status.code(), Some(1), "{stdout} {}", String::from_utf8_lossy(&all.stderr));
    // The 8 drifts of the demo, as the engine and `drift scan` give them: the autoscaled api's
    // replicas are not among them, because the wrapper forwards the set-wide comparisons too.
    assert!(stdout.ends_with("8 drift(s)\n"), "{stdout}");
    assert!(!stdout.contains("replicas_drift Deployment/shop/api"), "{stdout}");
    assert!(types(&all).contains(&"replicas_drift".to_owned()), "{stdout}");
}

#[test]
fn a_type_left_out_is_not_reported_and_the_rest_is() {
    let all = types(&run(&[]));
    let filtered = run(&["replicas_drift"]);
    let stdout = String::from_utf8_lossy(&filtered.stdout);
    assert_eq!(filtered.status.code(), Some(1), "{stdout}");
    let kept = types(&filtered);
    let want: Vec<String> = all.into_iter().filter(|t| t != "replicas_drift").collect();
    assert_eq!(kept, want);
    assert!(stdout.ends_with(&format!("{} drift(s)\n", want.len())), "{stdout}");
}

#[test]
fn an_unknown_type_is_refused() {
    let refused = run(&["no_such_drift"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("no_such_drift"));
}
