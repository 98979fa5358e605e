//! The NDJSON sink on its own, and the example detector run on the demo.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use drift_core::DriftSink;
use drift_example_custom_sink::NdjsonSink;
use drift_testkit::fixtures::{drift, key, report, t};
use serde_json::Value;

/// A report of `shop/web` at minute `at`, with its replicas drift or none.
fn scan(id: &str, at: i64, drifted: bool) -> drift_core::ScanReport {
    let web = key("Deployment", "shop", "web");
    let replicas =
        drift("Deployment", "shop", "web", drift_core::DriftType::ReplicasDrift, "spec.replicas", serde_json::json!(5));
    report(id, t(at), std::slice::from_ref(&web), if drifted { vec![replicas] } else { vec![] })
}

fn read(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[tokio::test]
async fn reports_are_appended_whole_once_even_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("drifts.ndjson");
    let r1 = scan("scan-1", 0, true);
    let sink = NdjsonSink::open(&path).unwrap();
    assert!(!sink.record(&r1).await.unwrap().replayed);
    assert!(sink.record(&r1).await.unwrap().replayed, "the same scan id writes nothing again");
    drop(sink);
    let sink = NdjsonSink::open(&path).unwrap();
    assert!(sink.record(&r1).await.unwrap().replayed, "scan ids are read back when the file opens");
    sink.record(&scan("scan-2", 5, false)).await.unwrap();
    let lines = read(&path);
    let kinds: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["drift", "report", "report"], "a report's drifts, then the report line that commits them");
    assert_eq!(lines[1]["scan_id"], "scan-1");
    assert_eq!(lines[0]["drift"]["path"], "spec.replicas");
    assert_eq!(lines[0]["drift"]["cluster_value"], 5);
    assert_eq!(lines[2]["drifts"], 0);
}

#[tokio::test]
async fn a_report_cut_short_by_a_crash_is_cut_off_and_can_be_recorded_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("drifts.ndjson");
    let (r1, r2) = (scan("scan-1", 0, true), scan("scan-2", 5, true));
    NdjsonSink::open(&path).unwrap().record(&r1).await.unwrap();
    let whole = std::fs::read(&path).unwrap();
    // A crash while writing scan-2: its drift line is there, its report line is torn.
    let mut cut = whole.clone();
    cut.extend_from_slice(&drift_example_custom_sink::lines(&r2).unwrap()[..]);
    cut.truncate(cut.len() - 10);
    std::fs::write(&path, &cut).unwrap();
    let sink = NdjsonSink::open(&path).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), whole, "what followed the last report line is cut off");
    assert!(!sink.record(&r2).await.unwrap().replayed, "scan-2 was never recorded: it is written now");
    assert_eq!(read(&path).iter().filter(|l| l["type"] == "report").count(), 2);
}

#[test]
fn a_file_that_is_not_ndjson_is_refused_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("drifts.ndjson");
    std::fs::write(&path, "{\"type\":\"report\",\"scan_id\":\"a\"}\nnot json\n").unwrap();
    let err = NdjsonSink::open(&path).unwrap_err();
    assert!(err.to_string().contains("line 2"), "{err}");
}

#[test]
fn the_example_detector_appends_the_demo_drifts() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("drifts.ndjson");
    let run = Command::new(env!("CARGO_BIN_EXE_ndjson-detector"))
        .arg("--desired")
        .arg(root.join("examples/demo/desired"))
        .arg("--live")
        .arg(root.join("examples/demo/live"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(1), "drift found: {stdout} {}", String::from_utf8_lossy(&run.stderr));
    assert!(stdout.contains("8 drift(s) appended"), "{stdout}");
    let lines = read(&out);
    assert_eq!(lines.iter().filter(|l| l["type"] == "drift").count(), 8);
    let types: std::collections::BTreeSet<&str> =
        lines.iter().filter_map(|l| l["drift"]["drift_type"].as_str()).collect();
    assert!(types.contains("service_port_drift") && types.contains("replicas_drift"), "{types:?}");
}
