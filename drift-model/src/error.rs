//! The one error type of the core, shared by every adapter.
//!
//! Adapters keep their own `thiserror` enums and convert into [`Error`], so the scanner makes a
//! single retry decision for every backend from [`Error::kind`] and [`Error::is_temporary`].

use std::fmt;

/// What went wrong, independent of the backend that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The input (a manifest, a request, a query parameter) is malformed.
    InvalidInput,
    /// The thing asked for does not exist.
    NotFound,
    /// The credentials do not allow the operation (HTTP 401/403, a Git auth failure).
    PermissionDenied,
    /// The backend cannot be reached or is overloaded (timeouts, 5xx, 429, connection refused).
    Unavailable,
    /// A concurrent change won (a scan already running, a write conflict).
    Conflict,
    /// The configuration is invalid.
    ConfigInvalid,
    /// The operation is not supported by this backend (for example watch on a snapshot source).
    Unsupported,
    /// Anything else: a bug or an unexpected answer.
    Unexpected,
}

impl ErrorKind {
    /// Stable snake_case name, used in metrics labels and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidInput => "invalid_input",
            ErrorKind::NotFound => "not_found",
            ErrorKind::PermissionDenied => "permission_denied",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Conflict => "conflict",
            ErrorKind::ConfigInvalid => "config_invalid",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Unexpected => "unexpected",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The core error: a kind, a message, whether retrying may help, and context lines.
///
/// ```
/// use drift_model::{Error, ErrorKind};
/// let e = Error::unavailable("API server answered 503").with_context("listing apps/Deployment");
/// assert_eq!(e.kind(), ErrorKind::Unavailable);
/// assert!(e.is_temporary());
/// assert_eq!(e.to_string(), "unavailable: API server answered 503 (listing apps/Deployment)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    temporary: bool,
    context: Vec<String>,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)?;
        if !self.context.is_empty() {
            write!(f, " ({})", self.context.join("; "))?;
        }
        Ok(())
    }
}

impl Error {
    /// A new error. `temporary` defaults to true only for [`ErrorKind::Unavailable`] and
    /// [`ErrorKind::Conflict`].
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        let temporary = matches!(kind, ErrorKind::Unavailable | ErrorKind::Conflict);
        Error { kind, message: message.into(), temporary, context: Vec::new() }
    }
    /// Shorthand for [`ErrorKind::InvalidInput`].
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidInput, message)
    }
    /// Shorthand for [`ErrorKind::NotFound`].
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }
    /// Shorthand for [`ErrorKind::PermissionDenied`].
    pub fn permission_denied(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::PermissionDenied, message)
    }
    /// Shorthand for [`ErrorKind::Unavailable`] (temporary).
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, message)
    }
    /// Shorthand for [`ErrorKind::Conflict`] (temporary).
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, message)
    }
    /// Shorthand for [`ErrorKind::ConfigInvalid`].
    pub fn config(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::ConfigInvalid, message)
    }
    /// Shorthand for [`ErrorKind::Unsupported`].
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unsupported, message)
    }
    /// Shorthand for [`ErrorKind::Unexpected`].
    pub fn unexpected(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unexpected, message)
    }
    /// Overrides the temporary flag.
    pub fn temporary(mut self, temporary: bool) -> Self {
        self.temporary = temporary;
        self
    }
    /// Adds a line of context (what was being done), outermost last.
    pub fn with_context(mut self, context: impl Into<String>) -> Self {
        self.context.push(context.into());
        self
    }
    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
    /// The message without kind or context.
    pub fn message(&self) -> &str {
        &self.message
    }
    /// Context lines, innermost first.
    pub fn context(&self) -> &[String] {
        &self.context
    }
    /// Whether retrying the same operation later may succeed.
    pub fn is_temporary(&self) -> bool {
        self.temporary
    }
}

/// Result alias of the core.
pub type Result<T, E = Error> = std::result::Result<T, E>;
