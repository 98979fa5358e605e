//! SQLite as the shared SQL store code sees it.

use chrono::{DateTime, Utc};
use drift_model::ErrorKind;
use drift_sql::{Dialect, SqlError};
use serde_json::Value;
use sqlx::sqlite::{SqliteQueryResult, SqliteRow};
use sqlx::{QueryBuilder, Row};

/// SQLite for the shared SQL store code: times are microseconds since the epoch in an
/// `INTEGER`, JSON values `TEXT`, error codes SQLite's result codes.
#[derive(Debug)]
pub struct SqliteDialect;

/// The shared statements, in SQLite.
pub(crate) type Sql = drift_sql::Sql<SqliteDialect>;

impl Dialect for SqliteDialect {
    type Db = sqlx::Sqlite;
    type Time = i64;

    const STORE: &'static str = "sqlite store";

    fn time(t: DateTime<Utc>) -> i64 {
        micros(t)
    }

    fn from_time(t: i64) -> Option<DateTime<Utc>> {
        DateTime::from_timestamp_micros(t)
    }

    fn json(row: &SqliteRow, id: i64, column: &str) -> Result<Option<Value>, SqlError<SqliteDialect>> {
        let text: Option<String> = row.try_get(column).map_err(|e| SqlError::sql("reading a drift row", e))?;
        text.map(|s| serde_json::from_str(&s).map_err(|e| SqlError::corrupt(id, column, e))).transpose()
    }

    // A write transaction (`BEGIN IMMEDIATE`) holds the database's one write lock.
    const FOR_UPDATE: &'static str = "";
    const SKIP_LOCKED: &'static str = "";
    const OUTBOX_LOCK: Option<&'static str> = None;

    const CLAIM_LOCK: Option<&'static str> = None;

    fn push_ids(q: &mut QueryBuilder<sqlx::Sqlite>, column: &str, ids: Vec<i64>) {
        q.push(column).push(" IN (SELECT value FROM json_each(").push_bind(sqlx::types::Json(ids)).push("))");
    }

    fn push_texts(q: &mut QueryBuilder<sqlx::Sqlite>, column: &str, values: Vec<String>) {
        q.push(column).push(" IN (SELECT value FROM json_each(").push_bind(sqlx::types::Json(values)).push("))");
    }

    fn push_json(q: &mut QueryBuilder<sqlx::Sqlite>, value: Value) {
        q.push_bind(value.to_string());
    }

    fn rows_affected(result: &SqliteQueryResult) -> u64 {
        result.rows_affected()
    }

    fn classify_code(code: &str) -> (ErrorKind, bool) {
        crate::error::classify_code(code)
    }
}

/// Microseconds since the epoch, the stored form of a time.
pub(crate) fn micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}
