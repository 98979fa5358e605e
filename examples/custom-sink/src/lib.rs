//! A sink of an integrator's own: every drift of every report appended to a file as one JSON
//! line (NDJSON), ready for `jq`, a log shipper or a data lake.
//!
//! It implements [`drift_core::DriftSink`] and keeps its contract:
//! - idempotent per scan id: the scan ids already in the file are read when it opens, and a
//!   report recorded again writes nothing and answers `replayed`;
//! - a report is written whole or not at all: its `drift` lines come first and its `report`
//!   line last, as the commit mark, in one `write_all` on a file opened for appending, flushed
//!   to disk; a failed write is cut off again, and when the file opens, what follows the last
//!   `report` line (a report cut short by a crash) is cut off too;
//! - Secret values never reach it (the engine hashes them before any sink sees a drift).
//!
//! Each report gives one `drift` line per drift, then one `report` line:
//!
//! ```text
//! {"type":"drift","scan_id":"…","cluster":"demo","repository":"demo","drift":{"resource":{…},"drift_type":"replicas_drift",…}}
//! {"type":"report","scan_id":"…","cluster":"demo","repository":"demo","outcome":"success","drifts":8,"finished_at":"…"}
//! ```

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use async_trait::async_trait;
use drift_core::sink::{RecordOutcome, SinkCapabilities};
use drift_core::{DriftSink, Error, Result, ScanReport};
use serde_json::json;

/// Appends every report's drifts to a file as NDJSON.
#[derive(Debug)]
pub struct NdjsonSink {
    path: PathBuf,
    /// Scan ids already in the file; the lock also makes writes one at a time.
    seen: Mutex<HashSet<String>>,
}

impl NdjsonSink {
    /// Opens (or creates) the file and reads the scan ids it already holds. What follows the
    /// last `report` line (the drifts of a report cut short, a torn last line) is cut off; a
    /// whole line that is not JSON is an error naming it.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_owned();
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io_error(&path, &e)),
        };
        let mut seen = HashSet::new();
        let mut committed = 0;
        let mut start = 0;
        for (n, end) in bytes.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i).enumerate() {
            let value: serde_json::Value = serde_json::from_slice(&bytes[start..end])
                .map_err(|e| Error::invalid_input(format!("{}: line {}: not JSON: {e}", path.display(), n + 1)))?;
            start = end + 1;
            if value["type"] == "report"
                && let Some(id) = value["scan_id"].as_str()
            {
                seen.insert(id.to_owned());
                committed = start;
            }
        }
        if committed < bytes.len() {
            let file = std::fs::OpenOptions::new().write(true).open(&path).map_err(|e| io_error(&path, &e))?;
            file.set_len(committed as u64).map_err(|e| io_error(&path, &e))?;
        }
        Ok(NdjsonSink { path, seen: Mutex::new(seen) })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn io_error(path: &Path, e: &std::io::Error) -> Error {
    Error::unavailable(format!("{}: {e}", path.display()))
}

/// The lines of one report: its drifts, then the `report` line that commits them.
pub fn lines(report: &ScanReport) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut push = |v: &serde_json::Value| -> Result<()> {
        serde_json::to_writer(&mut out, v).map_err(|e| Error::unexpected(format!("cannot encode: {e}")))?;
        out.push(b'\n');
        Ok(())
    };
    for d in &report.drifts {
        push(&json!({
            "type": "drift", "scan_id": report.scan_id, "cluster": report.cluster,
            "repository": report.repository, "drift": d,
        }))?;
    }
    push(&json!({
        "type": "report", "scan_id": report.scan_id, "cluster": report.cluster,
        "repository": report.repository, "outcome": report.outcome.as_str(),
        "drifts": report.drifts.len(), "finished_at": report.finished_at,
    }))?;
    Ok(out)
}

#[async_trait]
impl DriftSink for NdjsonSink {
    fn name(&self) -> &str {
        "ndjson"
    }

    fn capabilities(&self) -> SinkCapabilities {
        SinkCapabilities { readable: false, resolves: false, findings: false }
    }

    async fn record(&self, report: &ScanReport) -> Result<RecordOutcome> {
        let bytes = lines(report)?;
        let mut seen = self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if seen.contains(&report.scan_id) {
            return Ok(RecordOutcome { replayed: true, ..RecordOutcome::default() });
        }
        // Small appends to a local file: done inline, under the lock that orders writers.
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(|e| io_error(&self.path, &e))?;
        let before = file.metadata().map_err(|e| io_error(&self.path, &e))?.len();
        if let Err(e) = file.write_all(&bytes).and_then(|()| file.sync_data()) {
            // Whole or not at all: cut off what part of the report was written (and say so when
            // even that fails: the next open cuts it off then).
            let cut = file.set_len(before).err().map(|c| format!("; cutting the partial report off failed: {c}"));
            return Err(Error::unavailable(format!("{}: {e}{}", self.path.display(), cut.unwrap_or_default())));
        }
        seen.insert(report.scan_id.clone());
        Ok(RecordOutcome::default())
    }
}
