//! What SQLite's result codes mean to the drift detector.

use drift_model::ErrorKind;

use crate::dialect::SqliteDialect;

/// The errors of this crate.
pub(crate) type SqliteError = drift_sql::SqlError<SqliteDialect>;

/// The error kind of an (extended) SQLite result code, and whether writing the report again may
/// succeed.
pub(crate) fn classify_code(code: &str) -> (ErrorKind, bool) {
    // Primary result code: the low byte of the extended code.
    match code.parse::<i32>().unwrap_or(0) & 0xff {
        5 | 6 => (ErrorKind::Conflict, true),           // SQLITE_BUSY, SQLITE_LOCKED
        8 | 23 => (ErrorKind::PermissionDenied, false), // SQLITE_READONLY, SQLITE_AUTH
        10 | 13 => (ErrorKind::Unavailable, true),      // SQLITE_IOERR, SQLITE_FULL
        14 => (ErrorKind::ConfigInvalid, false),        // SQLITE_CANTOPEN
        19 => (ErrorKind::InvalidInput, false),         // SQLITE_CONSTRAINT
        _ => (ErrorKind::Unexpected, false),
    }
}
