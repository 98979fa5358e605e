//! What differs between the databases in the shared code: the driver, how a time and a JSON
//! value are stored, and what a database error code means.

use std::future::Future;
use std::pin::Pin;

use chrono::{DateTime, Utc};
use drift_model::ErrorKind;
use drift_model::act::DriftEvent;
use serde_json::Value;
use sqlx::{Database, Decode, Encode, QueryBuilder, Type};

use crate::error::SqlError;

/// A write the dialect does itself ([`Dialect::insert_events`]): how many rows were new.
pub type Writing<'c, D> = Pin<Box<dyn Future<Output = Result<u64, SqlError<D>>> + Send + 'c>>;

/// One SQL database as the shared store code sees it. Implemented by a unit type in each store
/// crate (`drift_postgres`, `drift_sqlite`).
pub trait Dialect: Send + Sync + Sized + 'static {
    /// The sqlx driver.
    type Db: Database;
    /// The stored form of a time: `timestamptz` in PostgreSQL, microseconds since the epoch in
    /// an `INTEGER` in SQLite.
    type Time: for<'q> Encode<'q, Self::Db> + for<'r> Decode<'r, Self::Db> + Type<Self::Db> + Send + Sync;

    /// What the errors of this store say they come from (`postgres store`).
    const STORE: &'static str;

    /// A time as stored.
    fn time(t: DateTime<Utc>) -> Self::Time;

    /// A stored time, or `None` when it is out of range.
    fn from_time(t: Self::Time) -> Option<DateTime<Utc>>;

    /// Reads a JSON column of a row (`jsonb` in PostgreSQL, `TEXT` in SQLite); `id` names the
    /// row in the error when the value cannot be read.
    fn json(row: &<Self::Db as Database>::Row, id: i64, column: &str) -> Result<Option<Value>, SqlError<Self>>;

    /// What ends a `SELECT` that locks the rows it reads until the transaction ends
    /// (` FOR UPDATE`); empty where a write transaction locks the whole database already.
    const FOR_UPDATE: &'static str;

    /// Like [`FOR_UPDATE`](Self::FOR_UPDATE), skipping rows another transaction holds (` FOR
    /// UPDATE SKIP LOCKED`): how two workers claim different deliveries.
    const SKIP_LOCKED: &'static str;

    /// A statement that makes the transactions writing events to the outbox commit one after
    /// the other, so that events commit in the order of their `seq` (a notifier's cursor never
    /// passes an event still being written); `None` where writers are serialised already.
    const OUTBOX_LOCK: Option<&'static str>;

    /// A statement, with the notifier's name as its one bind parameter, that makes the claims
    /// of one notifier's deliveries wait for each other until their transactions end, so that a
    /// batch is claimed whole by one worker; `None` where writers are serialised already.
    const CLAIM_LOCK: Option<&'static str>;

    /// Writes `events` to the outbox in one statement where the database takes column arrays
    /// (PostgreSQL's `UNNEST`): one statement text whatever their number, prepared once per
    /// connection, where rows of `VALUES` made a new statement (parsed and planned, a round
    /// trip more) for every number of events. Returns how many were new (an id stored already
    /// is skipped); `None` where the database cannot, and the shared code writes rows of
    /// `VALUES`. Called with the outbox lock held.
    fn insert_events<'c>(
        _conn: &'c mut <Self::Db as Database>::Connection,
        _events: &'c [DriftEvent],
    ) -> Option<Writing<'c, Self>> {
        None
    }

    /// Appends a condition that `column` is one of `ids` (one bind parameter).
    fn push_ids(q: &mut QueryBuilder<Self::Db>, column: &str, ids: Vec<i64>);

    /// Appends a condition that `column` is one of `values` (one bind parameter).
    fn push_texts(q: &mut QueryBuilder<Self::Db>, column: &str, values: Vec<String>);

    /// Appends a JSON value as a bind parameter, in the form the JSON columns keep.
    fn push_json(q: &mut QueryBuilder<Self::Db>, value: Value);

    /// How many rows a statement changed.
    fn rows_affected(result: &<Self::Db as Database>::QueryResult) -> u64;

    /// The kind of a database error by its code (SQLSTATE, SQLite result code), and whether
    /// writing the report again may succeed.
    fn classify_code(code: &str) -> (ErrorKind, bool);
}
