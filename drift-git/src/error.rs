//! The crate's private error enum and its conversion into [`drift_model::Error`].

use drift_model::{Error, ErrorKind};

/// Everything that can stop a whole fetch. Per-file and per-application problems are not
/// errors: they become [`drift_model::SourceWarning`]s in the snapshot.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SourceError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("git {operation} of {url} failed: {message}")]
    Git { operation: &'static str, url: String, message: String },
    #[error("reference `{reference}` not found in {repository}")]
    RefNotFound { reference: String, repository: String },
    #[error("path `{path}` not found in {repository} at {revision}")]
    PathNotFound { path: String, repository: String, revision: String },
    #[error("GitHub answered {status} for {what}: {message}")]
    GitHubStatus { status: u16, what: String, message: String },
    #[error("GitHub request for {what} failed: {message}")]
    GitHubTransport { what: String, message: String },
    #[error("GitHub rate limit exhausted until {reset} ({what}); not retrying before then")]
    RateLimited { what: String, reset: String },
    #[error("archive of {repository} at {revision} is unreadable: {message}")]
    Archive { repository: String, revision: String, message: String },
    #[error("background task failed: {0}")]
    Join(String),
    /// A change that cannot be proposed as asked (bad path, bad branch name, nothing changed).
    #[error("cannot publish the change: {0}")]
    Publish(String),
    /// An operation the source kind does not have (a folder has no remote).
    #[error("{0}")]
    Unsupported(String),
}

impl SourceError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        SourceError::Io { what: what.into(), source }
    }
}

/// Classifies the text of a git transport failure, which gix reports as a chain of messages.
fn git_kind(message: &str) -> (ErrorKind, bool) {
    let m = message.to_ascii_lowercase();
    if m.contains("401")
        || m.contains("403")
        || m.contains("authentication")
        || m.contains("permission denied")
        || m.contains("credentials")
        || m.contains("could not read username")
        || m.contains("could not read password")
    {
        (ErrorKind::PermissionDenied, false)
    } else if m.contains("404")
        || m.contains("not found")
        || m.contains("does not exist")
        || m.contains("does not appear to be a git repository")
        || m.contains("no such file")
    {
        (ErrorKind::NotFound, false)
    } else {
        // Connection refused, timeouts, broken pipes, 5xx: worth retrying later.
        (ErrorKind::Unavailable, true)
    }
}

impl From<SourceError> for Error {
    fn from(e: SourceError) -> Self {
        let message = e.to_string();
        match &e {
            SourceError::Config(_) => Error::config(message),
            SourceError::Io { .. } => Error::unexpected(message),
            SourceError::Git { message: m, .. } => {
                let (kind, temporary) = git_kind(m);
                Error::new(kind, message).temporary(temporary)
            }
            SourceError::RefNotFound { .. } | SourceError::PathNotFound { .. } => Error::not_found(message),
            SourceError::GitHubStatus { status, .. } => match status {
                401 | 403 => Error::permission_denied(message),
                404 => Error::not_found(message),
                429 => Error::unavailable(message),
                s if *s >= 500 => Error::unavailable(message),
                _ => Error::unexpected(message),
            },
            SourceError::GitHubTransport { .. } | SourceError::RateLimited { .. } => Error::unavailable(message),
            SourceError::Archive { .. } => Error::new(ErrorKind::InvalidInput, message),
            SourceError::Join(_) => Error::unexpected(message),
            SourceError::Publish(_) => Error::invalid_input(message),
            SourceError::Unsupported(_) => Error::unsupported(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_temporary_flags() {
        let e: Error = SourceError::Git {
            operation: "fetch",
            url: "https://h/r".into(),
            message: "HTTP 401 authentication required".into(),
        }
        .into();
        assert_eq!(e.kind(), ErrorKind::PermissionDenied);
        assert!(!e.is_temporary());
        let e: Error =
            SourceError::Git { operation: "fetch", url: "x".into(), message: "connection refused".into() }.into();
        assert_eq!(e.kind(), ErrorKind::Unavailable);
        assert!(e.is_temporary());
        let e: Error = SourceError::RateLimited { what: "x".into(), reset: "later".into() }.into();
        assert!(e.is_temporary());
        let e: Error =
            SourceError::GitHubStatus { status: 404, what: "ref".into(), message: "Not Found".into() }.into();
        assert_eq!(e.kind(), ErrorKind::NotFound);
    }
}
