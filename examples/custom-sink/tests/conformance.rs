//! drift-testkit's sink suite against the NDJSON sink: one test per case; the cases that need
//! a store to read back say they are skipped (the sink is write-only).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod sink {
    use std::sync::Arc;

    use drift_core::DriftSink;
    use drift_example_custom_sink::NdjsonSink;

    drift_testkit::sink_suite!(write_only: || async {
        let dir = tempfile::tempdir().unwrap();
        let sink = NdjsonSink::open(dir.path().join("drifts.ndjson")).unwrap();
        // The folder lives as long as the sink.
        drift_testkit::sink::Guarded::new(sink, dir) as Arc<dyn DriftSink>
    });
}
