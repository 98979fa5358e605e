//! The crate's private errors and their conversion into [`drift_core::Error`].

use drift_core::{Error, ErrorKind};

/// What can fail in this crate.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SqliteError {
    /// The configuration is invalid.
    #[error("{0}")]
    Config(String),
    /// A query or the database file failed.
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
    fn ctx(self, context: &'static str) -> Result<T, SqliteError>;
}

impl<T> SqlContext<T> for Result<T, sqlx::Error> {
    fn ctx(self, context: &'static str) -> Result<T, SqliteError> {
        self.map_err(|source| SqliteError::Sql { context, source })
    }
}

/// The error kind and temporary flag of a driver error.
fn classify(e: &sqlx::Error) -> (ErrorKind, bool) {
    match e {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::WorkerCrashed => {
            (ErrorKind::Unavailable, true)
        }
        sqlx::Error::Configuration(_) => (ErrorKind::ConfigInvalid, false),
        sqlx::Error::RowNotFound => (ErrorKind::NotFound, false),
        sqlx::Error::Database(db) => {
            // Primary result code: the low byte of the extended code.
            let code = db.code().and_then(|c| c.parse::<i32>().ok()).unwrap_or(0) & 0xff;
            match code {
                5 | 6 => (ErrorKind::Conflict, true),           // SQLITE_BUSY, SQLITE_LOCKED
                8 | 23 => (ErrorKind::PermissionDenied, false), // SQLITE_READONLY, SQLITE_AUTH
                10 | 13 => (ErrorKind::Unavailable, true),      // SQLITE_IOERR, SQLITE_FULL
                14 => (ErrorKind::ConfigInvalid, false),        // SQLITE_CANTOPEN
                19 => (ErrorKind::InvalidInput, false),         // SQLITE_CONSTRAINT
                _ => (ErrorKind::Unexpected, false),
            }
        }
        _ => (ErrorKind::Unexpected, false),
    }
}

impl SqliteError {
    /// Whether retrying the whole transaction may succeed (the database was busy).
    pub(crate) fn retryable(&self) -> bool {
        match self {
            SqliteError::Sql { source, .. } => classify(source).1,
            _ => false,
        }
    }
}

impl From<SqliteError> for Error {
    fn from(e: SqliteError) -> Self {
        match &e {
            SqliteError::Config(m) => Error::config(m.clone()),
            SqliteError::Sql { source, .. } => {
                let (kind, temporary) = classify(source);
                Error::new(kind, e.to_string()).temporary(temporary)
            }
            SqliteError::Migrate(_) | SqliteError::Corrupt { .. } => Error::unexpected(e.to_string()),
        }
        .with_context("sqlite store")
    }
}
