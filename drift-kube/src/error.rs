//! The errors of this crate, their conversion into the core error and into coverage.

use drift_model::{CoverageStatus, ErrorKind};

/// What went wrong talking to a cluster.
#[derive(Debug, thiserror::Error)]
pub enum K8sError {
    /// The settings are wrong (no kubeconfig, unknown context, no service account).
    #[error("kubernetes configuration: {0}")]
    Config(String),
    /// The API server answered with an error status.
    #[error("{verb} {what}: HTTP {code} {reason}: {message}")]
    Api {
        /// What was being done (`list`, `discovery`, `dry-run apply`).
        verb: &'static str,
        /// On what (`apps/Deployment in shop`).
        what: String,
        /// HTTP status.
        code: u16,
        /// Kubernetes reason (`Forbidden`, `TooManyRequests`).
        reason: String,
        /// Message of the Status.
        message: String,
        /// Seconds the server asked to wait (429, 503).
        retry_after: Option<u32>,
    },
    /// The request did not complete (connection refused, reset, timeout).
    #[error("{verb} {what}: {message}")]
    Transport {
        /// What was being done.
        verb: &'static str,
        /// On what.
        what: String,
        /// Why.
        message: String,
    },
    /// The answer could not be read.
    #[error("{verb} {what}: unreadable answer: {message}")]
    Decode {
        /// What was being done.
        verb: &'static str,
        /// On what.
        what: String,
        /// Why.
        message: String,
    },
}

impl K8sError {
    /// Wraps a kube client error.
    pub(crate) fn from_kube(verb: &'static str, what: impl Into<String>, e: kube::Error) -> Self {
        let what = what.into();
        match e {
            kube::Error::Api(s) => K8sError::Api {
                verb,
                what,
                code: s.code,
                reason: s.reason.clone(),
                message: s.message.clone(),
                retry_after: s.details.as_ref().map(|d| d.retry_after_seconds).filter(|s| *s > 0),
            },
            kube::Error::SerdeError(e) => K8sError::Decode { verb, what, message: e.to_string() },
            other => K8sError::Transport { verb, what, message: error_chain(&other) },
        }
    }

    /// The HTTP status, for API errors.
    pub fn code(&self) -> Option<u16> {
        match self {
            K8sError::Api { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether another attempt may succeed: 429, 5xx, transport failures and timeouts.
    pub fn is_retryable(&self) -> bool {
        match self {
            K8sError::Api { code, .. } => *code == 429 || *code >= 500,
            K8sError::Transport { .. } => true,
            K8sError::Config(_) | K8sError::Decode { .. } => false,
        }
    }

    /// The server's `Retry-After`, in seconds.
    pub fn retry_after(&self) -> Option<u32> {
        match self {
            K8sError::Api { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The coverage this failure means for a (kind, namespace): 403 is forbidden, 404 is not
    /// served, anything else failed.
    pub fn coverage(&self) -> CoverageStatus {
        let message = self.to_string();
        match self.code() {
            Some(401 | 403) => CoverageStatus::Forbidden { message },
            Some(404) => CoverageStatus::NotServed { message },
            _ => CoverageStatus::Failed { message },
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            K8sError::Config(_) => ErrorKind::ConfigInvalid,
            K8sError::Api { code: 401 | 403, .. } => ErrorKind::PermissionDenied,
            K8sError::Api { code: 404, .. } => ErrorKind::NotFound,
            K8sError::Api { code: 409, .. } => ErrorKind::Conflict,
            K8sError::Api { code: 400 | 422, .. } => ErrorKind::InvalidInput,
            K8sError::Api { .. } | K8sError::Transport { .. } => ErrorKind::Unavailable,
            K8sError::Decode { .. } => ErrorKind::Unexpected,
        }
    }
}

impl From<K8sError> for drift_model::Error {
    fn from(e: K8sError) -> Self {
        let temporary = e.is_retryable();
        drift_model::Error::new(e.kind(), e.to_string()).temporary(temporary)
    }
}

/// The message of an error and of its sources, joined (kube errors hide the cause otherwise).
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> K8sError {
        K8sError::Api {
            verb: "list",
            what: "ConfigMap in shop".into(),
            code,
            reason: "X".into(),
            message: "m".into(),
            retry_after: None,
        }
    }

    #[test]
    fn status_codes_map_to_coverage_and_retries() {
        assert_eq!(api(403).coverage().label(), "forbidden");
        assert_eq!(api(404).coverage().label(), "not_served");
        assert_eq!(api(500).coverage().label(), "failed");
        assert!(api(429).is_retryable());
        assert!(api(503).is_retryable());
        assert!(!api(403).is_retryable());
        assert!(!api(404).is_retryable());
        let core: drift_model::Error = api(403).into();
        assert_eq!(core.kind(), ErrorKind::PermissionDenied);
        assert!(!core.is_temporary());
        let core: drift_model::Error = api(503).into();
        assert!(core.is_temporary());
    }
}
