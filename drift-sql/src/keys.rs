//! The key of the Secret-value hash, kept in table `settings` ([`drift_model::hash_key`]): one
//! row, `secret_hash_key`, whose value is `{"id": ..., "key": ...}` (`key` absent when the user
//! gives it). Created with `INSERT ... ON CONFLICT DO NOTHING`, so that every process on the
//! store, whichever asks first, reads back the same key; rotated in one transaction with the
//! values of the drifts it re-hashes.

use drift_model::hash_key::{HashKey, KeptHashKey, Rehash};
use serde_json::{Value, json};
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, QueryBuilder, Row, Type};

use crate::error::{SqlContext, SqlError};
use crate::{Dialect, Sql, SqlStore};

/// The name of the row.
const ROW: &str = "secret_hash_key";

/// Fingerprints per `IN` list read.
const FINGERPRINTS: usize = 1000;

fn encode(k: &KeptHashKey) -> String {
    match &k.key {
        Some(key) => json!({"id": k.id, "key": key.to_text()}).to_string(),
        None => json!({"id": k.id}).to_string(),
    }
}

/// The stored row; an error names the row, never its text (it holds the key).
fn decode<D>(text: &str) -> Result<KeptHashKey, SqlError<D>> {
    let corrupt = |what: &str| SqlError::config(format!("table settings, row {ROW}: {what}"));
    let v: Value = serde_json::from_str(text).map_err(|_| corrupt("not a JSON object"))?;
    let id = v.get("id").and_then(Value::as_str).ok_or_else(|| corrupt("no id"))?.to_owned();
    let key = match v.get("key").and_then(Value::as_str) {
        Some(t) => Some(HashKey::from_text(t).map_err(|_| corrupt("the key is not 64 hexadecimal digits"))?),
        None => None,
    };
    if key.as_ref().is_some_and(|k| k.id() != id) {
        return Err(corrupt("the key does not match its id"));
    }
    Ok(KeptHashKey { id, key })
}

type Conn<D> = <<D as Dialect>::Db as Database>::Connection;

impl<D: Dialect> Sql<D>
where
    for<'c> &'c mut <D::Db as Database>::Connection: Executor<'c, Database = D::Db>,
    for<'a> &'a str: ColumnIndex<<D::Db as Database>::Row>,
    String: for<'q> Encode<'q, D::Db> + for<'r> Decode<'r, D::Db> + Type<D::Db>,
    i64: for<'q> Encode<'q, D::Db> + for<'r> Decode<'r, D::Db> + Type<D::Db>,
    <D::Db as Database>::Arguments: IntoArguments<D::Db>,
    usize: ColumnIndex<<D::Db as Database>::Row>,
{
    async fn read_key(conn: &mut Conn<D>, lock: bool) -> Result<Option<KeptHashKey>, SqlError<D>> {
        let mut q = QueryBuilder::<D::Db>::new("SELECT value FROM settings WHERE name = ");
        q.push_bind(ROW.to_owned());
        if lock {
            q.push(D::FOR_UPDATE);
        }
        let text: Option<String> =
            q.build_query_scalar().fetch_optional(&mut *conn).await.ctx::<D>("reading the Secret hash key")?;
        text.as_deref().map(decode).transpose()
    }

    /// [`HashKeyStore::hash_key`](drift_model::hash_key::HashKeyStore::hash_key).
    pub async fn hash_key<S: SqlStore<Dialect = D>>(
        store: &S,
        proposed: &KeptHashKey,
    ) -> Result<KeptHashKey, SqlError<D>> {
        let mut tx = store.begin().await?;
        let mut q = QueryBuilder::<D::Db>::new("INSERT INTO settings (name, value) VALUES (");
        q.push_bind(ROW.to_owned()).push(", ").push_bind(encode(proposed)).push(") ON CONFLICT (name) DO NOTHING");
        q.build().execute(&mut *tx).await.ctx::<D>("storing the Secret hash key")?;
        let kept = Self::read_key(&mut tx, false).await?.ok_or_else(|| {
            SqlError::config("table settings: the Secret hash key row is missing after it was written")
        })?;
        tx.commit().await.ctx::<D>("committing the Secret hash key")?;
        Ok(kept)
    }

    /// [`HashKeyStore::rotate_hash_key`](drift_model::hash_key::HashKeyStore::rotate_hash_key).
    pub async fn rotate_hash_key<S: SqlStore<Dialect = D>>(
        store: &S,
        from: &str,
        to: &KeptHashKey,
        rehash: &[Rehash],
    ) -> Result<usize, SqlError<D>> {
        let mut tx = store.begin().await?;
        match Self::read_key(&mut tx, true).await? {
            Some(k) if k.id == from => {}
            Some(k) => {
                return Err(drift_model::Error::conflict(format!(
                    "the store's Secret hash key is {} now, not {from}: another rotation ran; nothing was changed",
                    k.id
                ))
                .into());
            }
            None => {
                return Err(drift_model::Error::conflict(
                    "the store keeps no Secret hash key yet: run a scan first; nothing was changed",
                )
                .into());
            }
        }
        let by_fingerprint: std::collections::HashMap<&str, &Rehash> =
            rehash.iter().map(|r| (r.fingerprint.as_str(), r)).collect();
        let mut rewrites: Vec<(i64, &Rehash)> = Vec::new();
        let fingerprints: Vec<String> = by_fingerprint.keys().map(|f| (*f).to_owned()).collect();
        for chunk in fingerprints.chunks(FINGERPRINTS) {
            let mut q = QueryBuilder::<D::Db>::new(
                "SELECT id, fingerprint, git_value, cluster_value FROM drifts WHERE status <> 'resolved' AND ",
            );
            D::push_texts(&mut q, "fingerprint", chunk.to_vec());
            q.push(D::FOR_UPDATE);
            let rows = q.build().fetch_all(&mut *tx).await.ctx::<D>("reading live drifts to re-hash")?;
            for row in rows {
                let id: i64 = row.try_get(0)?;
                let fingerprint: String = row.try_get(1)?;
                let Some(r) = by_fingerprint.get(fingerprint.as_str()) else { continue };
                let stored = (D::json(&row, id, "git_value")?, D::json(&row, id, "cluster_value")?);
                if stored == r.before {
                    rewrites.push((id, r));
                }
            }
        }
        for (id, r) in &rewrites {
            let mut q = QueryBuilder::<D::Db>::new("UPDATE drifts SET git_value = ");
            push_opt_json::<D>(&mut q, r.after.0.clone());
            q.push(", cluster_value = ");
            push_opt_json::<D>(&mut q, r.after.1.clone());
            q.push(" WHERE id = ").push_bind(*id);
            q.build().execute(&mut *tx).await.ctx::<D>("re-hashing a drift's values")?;
        }
        let mut q = QueryBuilder::<D::Db>::new("UPDATE settings SET value = ");
        q.push_bind(encode(to)).push(" WHERE name = ").push_bind(ROW.to_owned());
        q.build().execute(&mut *tx).await.ctx::<D>("storing the new Secret hash key")?;
        tx.commit().await.ctx::<D>("committing the Secret hash key rotation")?;
        Ok(rewrites.len())
    }
}

fn push_opt_json<D: Dialect>(q: &mut QueryBuilder<D::Db>, value: Option<Value>) {
    match value {
        Some(v) => D::push_json(q, v),
        None => {
            q.push("NULL");
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    struct Nothing;

    #[test]
    fn a_stored_key_reads_back_and_a_damaged_row_is_refused_without_showing_it() {
        let key = HashKey::new([9; 32]);
        assert_eq!(
            decode::<Nothing>(&encode(&KeptHashKey::kept(key.clone()))).unwrap(),
            KeptHashKey::kept(key.clone())
        );
        assert_eq!(decode::<Nothing>(&encode(&KeptHashKey::given(&key))).unwrap(), KeptHashKey::given(&key));
        let other = json!({"id": "0000000000000000", "key": key.to_text()}).to_string();
        let e = decode::<Nothing>(&other).unwrap_err().to_string();
        assert!(e.contains("does not match its id") && !e.contains(&key.to_text()), "{e}");
        let e = decode::<Nothing>(&json!({"id": "x", "key": "09".repeat(31)}).to_string()).unwrap_err().to_string();
        assert!(!e.contains(&"09".repeat(31)), "{e}");
    }
}
