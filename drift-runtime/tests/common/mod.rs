//! What the runtime's tests share: a ConfigMap fixture, a sink that hands every report to the
//! test, and a stream fed by the test.
#![allow(dead_code, clippy::unwrap_used)]

use async_trait::async_trait;
use drift_core::sink::RecordOutcome;
use drift_core::source::{LiveEvent, LiveEventStream};
use drift_core::{DriftSink, Resource, ScanReport};
use serde_json::json;
use tokio::sync::mpsc;

/// A ConfigMap `shop/NAME` with `data.mode`.
pub fn cm(name: &str, mode: &str) -> Resource {
    Resource::from_object(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "shop"}, "data": {"mode": mode}}))
    .unwrap()
}

/// Hands every report it records to the test.
#[derive(Debug)]
pub struct Recording(pub mpsc::UnboundedSender<ScanReport>);

#[async_trait]
impl DriftSink for Recording {
    fn name(&self) -> &str {
        "recording"
    }
    async fn record(&self, report: &ScanReport) -> drift_core::Result<RecordOutcome> {
        self.0.send(report.clone()).map_err(|_| drift_core::Error::unavailable("test gone"))?;
        Ok(RecordOutcome::default())
    }
}

/// A watch stream of the events the test sends.
pub fn fed(rx: mpsc::UnboundedReceiver<drift_core::Result<LiveEvent>>) -> LiveEventStream {
    Box::pin(futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (e, rx)) }))
}
