//! Counters of a source: what was fetched, read, parsed and rendered, and what the caches
//! saved.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

/// Counters of a source, for logs, metrics and tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SourceStats {
    /// Calls to `fetch`.
    pub fetches: u64,
    /// Fetches answered from the snapshot of an unchanged commit (nothing read or rendered).
    pub snapshot_cache_hits: u64,
    /// Revisions whose files were read (a new commit, or a changed folder).
    pub revisions_read: u64,
    /// Files parsed.
    pub files_parsed: u64,
    /// Files whose parsed objects were reused (same path, same content).
    pub file_cache_hits: u64,
    /// Kustomize / Helm renders run.
    pub renders: u64,
    /// Renders whose output was reused (same inputs).
    pub render_cache_hits: u64,
    /// Network transfers of repository content (git packs received, GitHub archives).
    pub downloads: u64,
    /// HTTP requests sent (GitHub source).
    pub requests: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub fetches: AtomicU64,
    pub snapshot_cache_hits: AtomicU64,
    pub revisions_read: AtomicU64,
    pub files_parsed: AtomicU64,
    pub file_cache_hits: AtomicU64,
    pub renders: AtomicU64,
    pub render_cache_hits: AtomicU64,
    pub downloads: AtomicU64,
    pub requests: AtomicU64,
    /// Where the files parsed and the renders run are also counted, for a progress line.
    pub progress: drift_model::progress::Progress,
}

impl Stats {
    pub fn observed(progress: drift_model::progress::Progress) -> Self {
        Stats { progress, ..Stats::default() }
    }
    pub fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
    pub fn snapshot(&self) -> SourceStats {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        SourceStats {
            fetches: g(&self.fetches),
            snapshot_cache_hits: g(&self.snapshot_cache_hits),
            revisions_read: g(&self.revisions_read),
            files_parsed: g(&self.files_parsed),
            file_cache_hits: g(&self.file_cache_hits),
            renders: g(&self.renders),
            render_cache_hits: g(&self.render_cache_hits),
            downloads: g(&self.downloads),
            requests: g(&self.requests),
        }
    }
}
