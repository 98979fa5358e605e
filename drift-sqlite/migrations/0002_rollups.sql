-- Rollups for DriftStore::stats, so statistics do not aggregate the whole history on each call
-- (docs/storage.md, "How statistics are computed").
--
-- Both rollups are keyed by the dimensions a stats filter can name (every DriftFilter field
-- but `since`) and hold, per key, what the rows with those values contribute:
--
-- drift_counts: n = rows, ttr_sum_ms = sum of their times to resolve (0 for open rows);
-- drift_daily:  opened = rows first detected that UTC day, resolved = rows resolved that day
--               (day = days since 1970-01-01).
--
-- The store keeps them in the transaction of each write (src/rollup.rs): before a statement
-- that changes drifts it subtracts the contribution of the rows the statement will touch, after
-- it adds theirs back, each in one aggregated upsert. The writer holds SQLite's write lock for
-- the whole transaction, so nothing can change those rows in between. Keys can reach n = 0;
-- readers skip them.

CREATE TABLE drift_counts (
    cluster       TEXT    NOT NULL,
    repository    TEXT    NOT NULL,
    namespace     TEXT    NOT NULL,
    resource_kind TEXT    NOT NULL,
    drift_type    TEXT    NOT NULL,
    severity      TEXT    NOT NULL,
    status        TEXT    NOT NULL,
    n             INTEGER NOT NULL,
    ttr_sum_ms    INTEGER NOT NULL,
    PRIMARY KEY (cluster, repository, namespace, resource_kind, drift_type, severity, status)
) WITHOUT ROWID;

CREATE TABLE drift_daily (
    day           INTEGER NOT NULL,
    cluster       TEXT    NOT NULL,
    repository    TEXT    NOT NULL,
    namespace     TEXT    NOT NULL,
    resource_kind TEXT    NOT NULL,
    drift_type    TEXT    NOT NULL,
    severity      TEXT    NOT NULL,
    status        TEXT    NOT NULL,
    opened        INTEGER NOT NULL,
    resolved      INTEGER NOT NULL,
    PRIMARY KEY (day, cluster, repository, namespace, resource_kind, drift_type, severity, status)
) WITHOUT ROWID;

-- Backfill from the rows already there.
INSERT INTO drift_counts
    (cluster, repository, namespace, resource_kind, drift_type, severity, status, n, ttr_sum_ms)
SELECT cluster, repository, namespace, resource_kind, drift_type, severity, status, count(*),
    COALESCE(sum((resolved_at - detected_at) / 1000), 0)
FROM drifts
GROUP BY 1, 2, 3, 4, 5, 6, 7;

INSERT INTO drift_daily
    (day, cluster, repository, namespace, resource_kind, drift_type, severity, status, opened, resolved)
SELECT day, cluster, repository, namespace, resource_kind, drift_type, severity, status, sum(o), sum(x)
FROM (
    SELECT detected_at / 86400000000 AS day, cluster, repository, namespace, resource_kind, drift_type, severity,
        status, 1 AS o, 0 AS x FROM drifts
    UNION ALL
    SELECT resolved_at / 86400000000, cluster, repository, namespace, resource_kind, drift_type, severity, status,
        0, 1 FROM drifts WHERE resolved_at IS NOT NULL
)
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8;

-- The 95th percentile of the time to resolve is an order statistic: read it from the top of
-- this index (about 5% of the resolved rows), filtering on the dimensions it also holds
-- without visiting the table. Only resolved rows are in it, so recording open drifts never
-- touches it. Queries must spell the expression exactly so for SQLite to use it.
CREATE INDEX drifts_resolved_ttr ON drifts (((resolved_at - detected_at) / 1000), cluster, repository, namespace,
    resource_kind, drift_type, severity) WHERE status = 'resolved';
