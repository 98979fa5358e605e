//! What PostgreSQL's error codes mean to the drift detector.

use drift_model::ErrorKind;

use crate::dialect::PgDialect;

/// The errors of this crate.
pub(crate) type PgError = drift_sql::SqlError<PgDialect>;

/// The error kind of an SQLSTATE, and whether writing the report again may succeed.
pub(crate) fn classify_code(code: &str) -> (ErrorKind, bool) {
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
