//! One scan at a time: a gate that the scheduler, watch mode and the `drift_api::ScanTrigger`
//! behind `POST /scan` all pass before scanning.

use std::sync::{Arc, Mutex, PoisonError};

/// The gate. Clones share it.
///
/// ```
/// let gate = drift_metrics::ScanGate::new();
/// let permit = gate.try_start("scan-1").unwrap();
/// assert_eq!(gate.try_start("scan-2").unwrap_err(), "scan-1"); // POST /scan answers 409
/// drop(permit);                                               // the scan finished
/// assert!(gate.try_start("scan-2").is_ok());
/// ```
#[derive(Debug, Clone, Default)]
pub struct ScanGate {
    running: Arc<Mutex<Option<String>>>,
}

impl ScanGate {
    /// An open gate.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the gate for scan `scan_id`; `Err` holds the id of the scan that has it. The gate
    /// opens again when the permit is dropped (also when the scan task panics or is cancelled).
    pub fn try_start(&self, scan_id: impl Into<String>) -> Result<ScanPermit, String> {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(id) = running.as_ref() {
            return Err(id.clone());
        }
        let scan_id = scan_id.into();
        *running = Some(scan_id.clone());
        Ok(ScanPermit { gate: self.clone(), scan_id })
    }

    /// The scan holding the gate, if any.
    pub fn running(&self) -> Option<String> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// The right to run one scan; move it into the task that scans.
#[derive(Debug)]
pub struct ScanPermit {
    gate: ScanGate,
    scan_id: String,
}

impl ScanPermit {
    /// The scan's id.
    pub fn scan_id(&self) -> &str {
        &self.scan_id
    }
}

impl Drop for ScanPermit {
    fn drop(&mut self) {
        *self.gate.running.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_permit_at_a_time() {
        let gate = ScanGate::new();
        assert_eq!(gate.running(), None);
        let p = gate.try_start("a").unwrap();
        assert_eq!(p.scan_id(), "a");
        assert_eq!(gate.running().as_deref(), Some("a"));
        assert_eq!(gate.clone().try_start("b").unwrap_err(), "a");
        drop(p);
        assert_eq!(gate.running(), None);
        let _b = gate.try_start("b").unwrap();
        assert_eq!(gate.running().as_deref(), Some("b"));
    }

    #[test]
    fn threads_racing_get_one_permit() {
        let gate = ScanGate::new();
        let barrier = Arc::new(std::sync::Barrier::new(8));
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let (gate, barrier) = (gate.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    // Keep the permit alive until the main thread has counted.
                    gate.try_start(format!("scan-{i}")).ok().map(std::mem::ManuallyDrop::new)
                })
            })
            .collect();
        let won: Vec<_> = handles.into_iter().filter_map(|h| h.join().unwrap()).collect();
        assert_eq!(won.len(), 1);
        assert_eq!(gate.running().as_deref(), Some(won[0].scan_id()));
    }

    #[tokio::test]
    async fn a_cancelled_scan_task_opens_the_gate() {
        let gate = ScanGate::new();
        let permit = gate.try_start("s").unwrap();
        let task = tokio::spawn(async move {
            let _permit = permit;
            std::future::pending::<()>().await;
        });
        tokio::task::yield_now().await;
        assert!(gate.try_start("t").is_err());
        task.abort();
        assert!(task.await.unwrap_err().is_cancelled());
        assert!(gate.try_start("t").is_ok());
    }
}
