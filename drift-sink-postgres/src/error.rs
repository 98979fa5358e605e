//! The crate's private errors and their conversion into [`drift_core::Error`].

use drift_core::{Error, ErrorKind};

/// What can fail in this crate.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PgError {
    /// The configuration is invalid.
    #[error("{0}")]
    Config(String),
    /// A query or the connection failed.
    #[error("{context}: {source}")]
    Sql {
        /// What was being done.
        context: &'static str,
        /// The driver's error.
        source: sqlx::Error,
    },
    /// The embedded migrations failed.
    #[error("migrating the schema: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A stored value could not be read back.
    #[error("stored row {id} is invalid: {message}")]
    Corrupt {
        /// Row id.
        id: i64,
        /// What is wrong.
        message: String,
    },
}

/// Adds what was being done to a driver error.
pub(crate) trait SqlContext<T> {
    fn ctx(self, context: &'static str) -> Result<T, PgError>;
}

impl<T> SqlContext<T> for Result<T, sqlx::Error> {
    fn ctx(self, context: &'static str) -> Result<T, PgError> {
        self.map_err(|source| PgError::Sql { context, source })
    }
}

/// The error kind and temporary flag of a driver error.
pub(crate) fn classify(e: &sqlx::Error) -> (ErrorKind, bool) {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => (ErrorKind::Unavailable, true),
        sqlx::Error::Configuration(_) => (ErrorKind::ConfigInvalid, false),
        sqlx::Error::RowNotFound => (ErrorKind::NotFound, false),
        sqlx::Error::Database(db) => {
            let code = db.code().map(|c| c.into_owned()).unwrap_or_default();
            match code.get(..2) {
                // connection exceptions; insufficient resources; operator intervention
                // (admin shutdown, crash shutdown, cannot connect now)
                Some("08" | "53" | "57") => (ErrorKind::Unavailable, true),
                // serialization failure, deadlock detected
                Some("40") => (ErrorKind::Conflict, true),
                // invalid authorization; insufficient privilege (42501)
                Some("28") => (ErrorKind::PermissionDenied, false),
                _ if code == "42501" => (ErrorKind::PermissionDenied, false),
                // invalid catalog name: the database does not exist
                Some("3D") => (ErrorKind::ConfigInvalid, false),
                // data exceptions, integrity violations
                Some("22" | "23") => (ErrorKind::InvalidInput, false),
                _ => (ErrorKind::Unexpected, false),
            }
        }
        _ => (ErrorKind::Unexpected, false),
    }
}

impl PgError {
    /// Whether retrying the whole transaction may succeed (lost connection, deadlock).
    pub(crate) fn retryable(&self) -> bool {
        match self {
            PgError::Sql { source, .. } => classify(source).1,
            _ => false,
        }
    }
}

impl From<PgError> for Error {
    fn from(e: PgError) -> Self {
        match &e {
            PgError::Config(m) => Error::config(m.clone()),
            PgError::Sql { source, .. } => {
                let (kind, temporary) = classify(source);
                Error::new(kind, e.to_string()).temporary(temporary)
            }
            PgError::Migrate(_) => Error::unexpected(e.to_string()),
            PgError::Corrupt { .. } => Error::unexpected(e.to_string()),
        }
        .with_context("postgres store")
    }
}
