-- Settings of the store itself (issue 37): one row per setting. `secret_hash_key` holds the key
-- of the Secret-value hash (JSON: {"id": ..., "key": ...}; only the id when the user gives the
-- key), created by the first process that needs it, so that every process on this store hashes
-- Secret values alike (docs/security.md, "Secret values").
CREATE TABLE settings (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
