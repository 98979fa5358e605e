//! PostgreSQL as the shared SQL store code sees it.

use chrono::{DateTime, Utc};
use drift_model::ErrorKind;
use drift_model::act::DriftEvent;
use drift_sql::{Dialect, SqlContext, SqlError, Writing};
use serde_json::Value;
use sqlx::postgres::{PgConnection, PgQueryResult, PgRow};
use sqlx::{QueryBuilder, Row};

/// Events into the outbox as column arrays, in their order (`seq` follows it).
const INSERT_EVENTS: &str = "INSERT INTO events (id, kind, batch, at, drift_id, notifier, payload) \
     SELECT id, kind, batch, at, drift_id, notifier, payload::jsonb \
     FROM UNNEST($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::bigint[], $6::text[], $7::text[]) \
         WITH ORDINALITY AS e(id, kind, batch, at, drift_id, notifier, payload, ord) \
     ORDER BY ord \
     ON CONFLICT (id) DO NOTHING";

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

    fn insert_events<'c>(conn: &'c mut PgConnection, events: &'c [DriftEvent]) -> Option<Writing<'c, PgDialect>> {
        Some(Box::pin(async move {
            let n = events.len();
            let (mut id, mut kind, mut batch, mut at) =
                (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
            let (mut drift_id, mut notifier, mut payload) =
                (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
            for e in events {
                id.push(e.id.as_str());
                kind.push(e.kind.as_str());
                batch.push(e.batch.as_str());
                at.push(e.at);
                drift_id.push(e.drift_id());
                notifier.push(e.notifier.clone());
                payload.push(serde_json::to_string(e).map_err(|err| SqlError::corrupt(0, "payload", err))?);
            }
            let done = sqlx::query(INSERT_EVENTS)
                .bind(id)
                .bind(kind)
                .bind(batch)
                .bind(at)
                .bind(drift_id)
                .bind(notifier)
                .bind(payload)
                .execute(conn)
                .await
                .ctx("writing events")?;
            Ok(done.rows_affected())
        }))
    }

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
