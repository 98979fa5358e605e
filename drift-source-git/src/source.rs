//! What the three sources share: the last snapshot per revision, names, URL redaction.

use std::sync::{Arc, Mutex};

use drift_core::DesiredSnapshot;

/// Removes `user:password@` from a URL, so it can be logged and reported.
pub(crate) fn redact_url(url: &str) -> String {
    match url.find("://") {
        Some(i) => {
            let rest = &url[i + 3..];
            let host_end = rest.find('/').unwrap_or(rest.len());
            match rest[..host_end].rfind('@') {
                Some(at) => format!("{}{}", &url[..i + 3], &rest[at + 1..]),
                None => url.to_owned(),
            }
        }
        None => url.to_owned(),
    }
}

/// The snapshot of the last revision read, keyed by revision: the same commit twice is not
/// read or rendered twice.
#[derive(Debug)]
pub(crate) struct LastSnapshot(Mutex<Option<(String, Arc<DesiredSnapshot>)>>, bool);

impl LastSnapshot {
    /// A slot that keeps the last snapshot when `keep`, else forgets it (the caller then holds
    /// the only copy and may take it without cloning).
    pub fn new(keep: bool) -> Self {
        LastSnapshot(Mutex::new(None), keep)
    }
    pub fn get(&self, revision: &str) -> Option<Arc<DesiredSnapshot>> {
        let guard = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        guard.as_ref().filter(|(r, _)| r == revision).map(|(_, s)| Arc::clone(s))
    }
    pub fn revision(&self) -> Option<String> {
        let guard = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        guard.as_ref().map(|(r, _)| r.clone())
    }
    pub fn set(&self, revision: String, snapshot: DesiredSnapshot) -> Arc<DesiredSnapshot> {
        let snapshot = Arc::new(snapshot);
        if !self.1 {
            return snapshot;
        }
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some((revision, Arc::clone(&snapshot)));
        snapshot
    }
}

/// A source that talks HTTP(S) through gix (reqwest with `rustls-no-provider`) needs the
/// process-level rustls crypto provider, which the program installs (only a binary chooses it;
/// two providers in one binary make kube-rs panic). Without one, reqwest would panic on the
/// first fetch: say so when the source is built instead.
pub(crate) fn require_crypto_provider(url: &str) -> drift_core::Result<()> {
    let http = url.starts_with("http://") || url.starts_with("https://");
    if http && rustls::crypto::CryptoProvider::get_default().is_none() {
        return Err(drift_core::Error::config(format!(
            "git source {}: no rustls crypto provider is installed; the program must install one \
             before it builds an HTTP(S) git source, for example \
             `rustls::crypto::ring::default_provider().install_default()`",
            redact_url(url)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_removed_from_urls() {
        assert_eq!(redact_url("https://x-access-token:ghp_abc@github.com/o/r.git"), "https://github.com/o/r.git");
        assert_eq!(redact_url("https://github.com/o/r.git"), "https://github.com/o/r.git");
        assert_eq!(redact_url("git@github.com:o/r.git"), "git@github.com:o/r.git");
    }
}
