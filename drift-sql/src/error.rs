//! The stores' private errors and their conversion into [`drift_model::Error`].

use std::fmt;
use std::marker::PhantomData;

use drift_model::{Error, ErrorKind};

use crate::Dialect;

/// What can fail in a SQL store of dialect `D`.
pub struct SqlError<D> {
    what: What,
    dialect: PhantomData<fn() -> D>,
}

#[derive(Debug, thiserror::Error)]
enum What {
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
    /// The request itself is wrong (an unknown id, a decision on a resolved drift, a bad page).
    #[error("{0}")]
    Core(Error),
    /// A stored value could not be read back.
    #[error("stored row {id} is invalid: {message}")]
    Corrupt {
        /// Row id.
        id: i64,
        /// What is wrong.
        message: String,
    },
}

impl<D> SqlError<D> {
    fn new(what: What) -> Self {
        SqlError { what, dialect: PhantomData }
    }

    /// The configuration is invalid.
    pub fn config(message: impl Into<String>) -> Self {
        Self::new(What::Config(message.into()))
    }

    /// A driver error, with what was being done.
    pub fn sql(context: &'static str, source: sqlx::Error) -> Self {
        Self::new(What::Sql { context, source })
    }

    /// A stored value of row `id` (0 when the row has no id) cannot be read back.
    pub fn corrupt(id: i64, column: &str, message: impl fmt::Display) -> Self {
        Self::new(What::Corrupt { id, message: format!("column {column}: {message}") })
    }
}

impl<D> From<Error> for SqlError<D> {
    fn from(e: Error) -> Self {
        Self::new(What::Core(e))
    }
}

impl<D> From<sqlx::Error> for SqlError<D> {
    fn from(e: sqlx::Error) -> Self {
        Self::sql("reading a row", e)
    }
}

impl<D> From<sqlx::migrate::MigrateError> for SqlError<D> {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        Self::new(What::Migrate(e))
    }
}

impl<D> fmt::Debug for SqlError<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.what.fmt(f)
    }
}

impl<D> fmt::Display for SqlError<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.what.fmt(f)
    }
}

impl<D> std::error::Error for SqlError<D> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.what)
    }
}

/// Adds what was being done to a driver error.
pub trait SqlContext<T> {
    /// The error of dialect `D` (inferred from where it goes) that says what was being done.
    fn ctx<D>(self, context: &'static str) -> Result<T, SqlError<D>>;
}

impl<T> SqlContext<T> for Result<T, sqlx::Error> {
    fn ctx<D>(self, context: &'static str) -> Result<T, SqlError<D>> {
        self.map_err(|source| SqlError::sql(context, source))
    }
}

/// The error kind of a driver error, and whether retrying the whole transaction may succeed.
pub fn classify<D: Dialect>(e: &sqlx::Error) -> (ErrorKind, bool) {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => (ErrorKind::Unavailable, true),
        sqlx::Error::Configuration(_) => (ErrorKind::ConfigInvalid, false),
        sqlx::Error::RowNotFound => (ErrorKind::NotFound, false),
        sqlx::Error::Database(db) => D::classify_code(db.code().as_deref().unwrap_or_default()),
        _ => (ErrorKind::Unexpected, false),
    }
}

impl<D: Dialect> SqlError<D> {
    /// Whether retrying the whole transaction may succeed (a lost connection, a deadlock, a
    /// busy database).
    pub fn retryable(&self) -> bool {
        match &self.what {
            What::Sql { source, .. } => classify::<D>(source).1,
            _ => false,
        }
    }
}

impl<D: Dialect> From<SqlError<D>> for Error {
    fn from(e: SqlError<D>) -> Self {
        if let What::Core(e) = e.what {
            return e;
        }
        match &e.what {
            What::Config(m) => Error::config(m.clone()),
            What::Sql { source, .. } => {
                let (kind, temporary) = classify::<D>(source);
                Error::new(kind, e.to_string()).temporary(temporary)
            }
            What::Migrate(_) | What::Corrupt { .. } | What::Core(_) => Error::unexpected(e.to_string()),
        }
        .with_context(D::STORE)
    }
}
