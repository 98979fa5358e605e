//! How far a long job has come: counters that the parts of a job (the file loader, the Git
//! source's pipeline, the cluster source, the scan pass) add to, and that a front end reads
//! when it wants to (the CLI's progress line polls them a few times a second).
//!
//! Counting is a relaxed atomic addition on a shared handle: nobody has to watch, nothing
//! waits, and a job that is given no handle counts into one nobody reads.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A shared set of counters; clones count into the same ones.
#[derive(Debug, Clone, Default)]
pub struct Progress(Arc<Counters>);

#[derive(Debug, Default)]
struct Counters {
    files: AtomicU64,
    renders: AtomicU64,
    live: AtomicU64,
    to_compare: AtomicU64,
    compared: AtomicU64,
}

/// The counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProgressSnapshot {
    /// Manifest files read and parsed.
    pub files_read: u64,
    /// Kustomize builds and Helm charts rendered.
    pub renders: u64,
    /// Live objects read from the cluster or from files.
    pub live_objects: u64,
    /// Desired objects handed to the comparison so far.
    pub to_compare: u64,
    /// Desired objects compared.
    pub compared: u64,
}

impl Progress {
    /// New counters at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// `n` manifest files were read.
    pub fn files_read(&self, n: u64) {
        self.0.files.fetch_add(n, Ordering::Relaxed);
    }

    /// One Kustomize build or Helm chart was rendered.
    pub fn rendered(&self) {
        self.0.renders.fetch_add(1, Ordering::Relaxed);
    }

    /// `n` live objects were read.
    pub fn live_read(&self, n: u64) {
        self.0.live.fetch_add(n, Ordering::Relaxed);
    }

    /// `n` more desired objects are about to be compared.
    pub fn comparing(&self, n: u64) {
        self.0.to_compare.fetch_add(n, Ordering::Relaxed);
    }

    /// `n` desired objects were compared.
    pub fn compared(&self, n: u64) {
        self.0.compared.fetch_add(n, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> ProgressSnapshot {
        let c = &self.0;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ProgressSnapshot {
            files_read: g(&c.files),
            renders: g(&c.renders),
            live_objects: g(&c.live),
            to_compare: g(&c.to_compare),
            compared: g(&c.compared),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_count_into_the_same_counters_from_several_threads() {
        let progress = Progress::new();
        std::thread::scope(|s| {
            for _ in 0..4 {
                let p = progress.clone();
                s.spawn(move || {
                    for _ in 0..1000 {
                        p.files_read(1);
                        p.live_read(2);
                    }
                    p.rendered();
                    p.comparing(10);
                    p.compared(7);
                });
            }
        });
        let s = progress.snapshot();
        assert_eq!(
            s,
            ProgressSnapshot { files_read: 4000, renders: 4, live_objects: 8000, to_compare: 40, compared: 28 }
        );
        assert_eq!(Progress::new().snapshot(), ProgressSnapshot::default());
    }
}
