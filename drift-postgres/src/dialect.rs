//! PostgreSQL as the shared SQL store code sees it.

use chrono::{DateTime, Utc};
use drift_model::ErrorKind;
use drift_sql::{Dialect, SqlError};
use serde_json::Value;
use sqlx::postgres::{PgQueryResult, PgRow};
use sqlx::{QueryBuilder, Row};

/// PostgreSQL for the shared SQL store code: times are `timestamptz`, JSON values `jsonb`, error
/// codes SQLSTATEs.
#[derive(Debug)]
pub struct PgDialect;

/// The shared statements, in PostgreSQL.
pub(crate) type Sql = drift_sql::Sql<PgDialect>;

impl Dialect for PgDialect {
    type Db = sqlx::Postgres;
    type Time = DateTime<Utc>;

    const STORE: &'static str = "postgres store";

    fn time(t: DateTime<Utc>) -> DateTime<Utc> {
        t
    }

    fn from_time(t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        Some(t)
    }

    fn json(row: &PgRow, _id: i64, column: &str) -> Result<Option<Value>, SqlError<PgDialect>> {
        let value: Option<sqlx::types::Json<Value>> =
            row.try_get(column).map_err(|e| SqlError::sql("reading a drift row", e))?;
        Ok(value.map(|j| j.0))
    }

    const FOR_UPDATE: &'static str = " FOR UPDATE";
    const SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    // A transaction-level advisory lock (released at commit); the key is arbitrary and fixed.
    const OUTBOX_LOCK: Option<&'static str> = Some("SELECT pg_advisory_xact_lock(7171962001)");

    const CLAIM_LOCK: Option<&'static str> = Some("SELECT pg_advisory_xact_lock(7171962, hashtext($1))");

    fn push_ids(q: &mut QueryBuilder<sqlx::Postgres>, column: &str, ids: Vec<i64>) {
        q.push(column).push(" = ANY(").push_bind(ids).push(")");
    }

    fn push_texts(q: &mut QueryBuilder<sqlx::Postgres>, column: &str, values: Vec<String>) {
        q.push(column).push(" = ANY(").push_bind(values).push(")");
    }

    fn push_json(q: &mut QueryBuilder<sqlx::Postgres>, value: Value) {
        q.push_bind(sqlx::types::Json(value));
    }

    fn rows_affected(result: &PgQueryResult) -> u64 {
        result.rows_affected()
    }

    fn classify_code(code: &str) -> (ErrorKind, bool) {
        crate::error::classify_code(code)
    }
}
