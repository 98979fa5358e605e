//! The person behind a drift's change ([`drift_model::identity`]), kept in the JSON column
//! `drifts.changed_by_user` (migration 0010) with the `changed_at` it was joined for: a row
//! whose field changed again reads back without it ([`ChangeIdentity::applies_to`]).

use drift_model::identity::ChangeIdentity;
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, QueryBuilder, Type};

use crate::error::{SqlContext, SqlError};
use crate::{Dialect, Sql, SqlStore};

impl<D: Dialect> Sql<D>
where
    for<'c> &'c mut <D::Db as Database>::Connection: Executor<'c, Database = D::Db>,
    for<'a> &'a str: ColumnIndex<<D::Db as Database>::Row>,
    String: for<'q> Encode<'q, D::Db> + for<'r> Decode<'r, D::Db> + Type<D::Db>,
    i64: for<'q> Encode<'q, D::Db> + for<'r> Decode<'r, D::Db> + Type<D::Db>,
    <D::Db as Database>::Arguments: IntoArguments<D::Db>,
    usize: ColumnIndex<<D::Db as Database>::Row>,
{
    /// [`ChangeIdentities::identify`](drift_model::identity::ChangeIdentities::identify).
    pub async fn identify<S: SqlStore<Dialect = D>>(
        store: &S,
        drift_id: i64,
        identity: &ChangeIdentity,
    ) -> Result<bool, SqlError<D>> {
        let value = serde_json::to_value(identity)
            .map_err(|e| SqlError::config(format!("the identity of drift {drift_id} is not JSON: {e}")))?;
        let mut tx = store.begin().await?;
        let mut q = QueryBuilder::<D::Db>::new("UPDATE drifts SET changed_by_user = ");
        D::push_json(&mut q, value);
        q.push(" WHERE id = ").push_bind(drift_id);
        let done = q.build().execute(&mut *tx).await.ctx::<D>("storing who changed a drift")?;
        tx.commit().await.ctx::<D>("committing who changed a drift")?;
        Ok(D::rows_affected(&done) > 0)
    }
}
