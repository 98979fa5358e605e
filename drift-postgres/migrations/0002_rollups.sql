-- Rollups for DriftStore::stats, so statistics do not aggregate the whole history on each call
-- (docs/storage.md, "How statistics are computed"), and the indexes two listings lacked.
--
-- Both rollups are keyed by the dimensions a stats filter can name (every DriftFilter field
-- but `since`) and hold, per key, what the rows with those values contribute:
--
-- drift_counts: n = rows, ttr_sum_ms = sum of their times to resolve (0 for open rows);
-- drift_daily:  opened = rows first detected that UTC day, resolved = rows resolved that day.
--
-- Statement-level triggers with transition tables keep them exact: each INSERT, UPDATE or
-- DELETE on drifts adds (new rows) minus (old rows) in one aggregated upsert per rollup, in the
-- statement's transaction, whoever runs it. Keys whose contribution nets to zero (a drift seen
-- again with the same severity) are not written. Keys can reach n = 0; readers skip them.

-- The time to resolve in whole milliseconds, truncated, kept by PostgreSQL itself (NULL while
-- open). Adding it rewrites the table once.
ALTER TABLE drifts ADD COLUMN ttr_ms bigint
    GENERATED ALWAYS AS (trunc(extract(epoch FROM resolved_at - detected_at) * 1000)::bigint) STORED;

CREATE TABLE drift_counts (
    cluster       text   NOT NULL,
    repository    text   NOT NULL,
    namespace     text   NOT NULL,
    resource_kind text   NOT NULL,
    drift_type    text   NOT NULL,
    severity      text   NOT NULL,
    status        text   NOT NULL,
    n             bigint NOT NULL,
    ttr_sum_ms    bigint NOT NULL,
    PRIMARY KEY (cluster, repository, namespace, resource_kind, drift_type, severity, status)
);

CREATE TABLE drift_daily (
    day           date   NOT NULL,
    cluster       text   NOT NULL,
    repository    text   NOT NULL,
    namespace     text   NOT NULL,
    resource_kind text   NOT NULL,
    drift_type    text   NOT NULL,
    severity      text   NOT NULL,
    status        text   NOT NULL,
    opened        bigint NOT NULL,
    resolved      bigint NOT NULL,
    PRIMARY KEY (day, cluster, repository, namespace, resource_kind, drift_type, severity, status)
);

-- Adds the contribution of `src` (rows of drifts with a sign column s, +1 or -1) to both
-- rollups. Called by the trigger function only, with its transition tables in `src`.
CREATE FUNCTION drifts_rollup() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    cols CONSTANT text :=
        'cluster, repository, namespace, resource_kind, drift_type, severity, status, detected_at, resolved_at, ttr_ms';
    src text;
BEGIN
    src := CASE TG_OP
        WHEN 'INSERT' THEN format('SELECT 1 AS s, %s FROM new_rows', cols)
        WHEN 'DELETE' THEN format('SELECT -1 AS s, %s FROM old_rows', cols)
        ELSE format('SELECT 1 AS s, %1$s FROM new_rows UNION ALL SELECT -1, %1$s FROM old_rows', cols)
    END;
    -- Keys in a fixed order, so concurrent writers lock rollup rows in the same order.
    EXECUTE format($q$
        INSERT INTO drift_counts AS c
            (cluster, repository, namespace, resource_kind, drift_type, severity, status, n, ttr_sum_ms)
        SELECT cluster, repository, namespace, resource_kind, drift_type, severity, status, sum(s),
            COALESCE(sum(s * ttr_ms), 0)
        FROM (%s) AS d
        GROUP BY 1, 2, 3, 4, 5, 6, 7
        HAVING sum(s) <> 0 OR COALESCE(sum(s * ttr_ms), 0) <> 0
        ORDER BY 1, 2, 3, 4, 5, 6, 7
        ON CONFLICT (cluster, repository, namespace, resource_kind, drift_type, severity, status) DO UPDATE
            SET n = c.n + EXCLUDED.n, ttr_sum_ms = c.ttr_sum_ms + EXCLUDED.ttr_sum_ms
    $q$, src);
    EXECUTE format($q$
        WITH d AS (%s)
        INSERT INTO drift_daily AS r
            (day, cluster, repository, namespace, resource_kind, drift_type, severity, status, opened, resolved)
        SELECT day, cluster, repository, namespace, resource_kind, drift_type, severity, status, sum(o), sum(x)
        FROM (
            SELECT (detected_at AT TIME ZONE 'UTC')::date AS day, cluster, repository, namespace, resource_kind,
                drift_type, severity, status, s AS o, 0 AS x FROM d
            UNION ALL
            SELECT (resolved_at AT TIME ZONE 'UTC')::date, cluster, repository, namespace, resource_kind,
                drift_type, severity, status, 0, s FROM d WHERE resolved_at IS NOT NULL
        ) AS e
        GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
        HAVING sum(o) <> 0 OR sum(x) <> 0
        ORDER BY 1, 2, 3, 4, 5, 6, 7, 8
        ON CONFLICT (day, cluster, repository, namespace, resource_kind, drift_type, severity, status) DO UPDATE
            SET opened = r.opened + EXCLUDED.opened, resolved = r.resolved + EXCLUDED.resolved
    $q$, src);
    RETURN NULL;
END
$fn$;

-- Transition tables allow one event per trigger.
CREATE TRIGGER drifts_rollup_insert AFTER INSERT ON drifts
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION drifts_rollup();
CREATE TRIGGER drifts_rollup_update AFTER UPDATE ON drifts
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION drifts_rollup();
CREATE TRIGGER drifts_rollup_delete AFTER DELETE ON drifts
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION drifts_rollup();

CREATE FUNCTION drifts_rollup_truncate() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    DELETE FROM drift_counts;
    DELETE FROM drift_daily;
    RETURN NULL;
END
$fn$;
CREATE TRIGGER drifts_rollup_truncate AFTER TRUNCATE ON drifts
    FOR EACH STATEMENT EXECUTE FUNCTION drifts_rollup_truncate();

-- Backfill from the rows already there.
INSERT INTO drift_counts
    (cluster, repository, namespace, resource_kind, drift_type, severity, status, n, ttr_sum_ms)
SELECT cluster, repository, namespace, resource_kind, drift_type, severity, status, count(*),
    COALESCE(sum(ttr_ms), 0)
FROM drifts
GROUP BY 1, 2, 3, 4, 5, 6, 7;

INSERT INTO drift_daily
    (day, cluster, repository, namespace, resource_kind, drift_type, severity, status, opened, resolved)
SELECT day, cluster, repository, namespace, resource_kind, drift_type, severity, status, sum(o), sum(x)
FROM (
    SELECT (detected_at AT TIME ZONE 'UTC')::date AS day, cluster, repository, namespace, resource_kind, drift_type,
        severity, status, 1 AS o, 0 AS x FROM drifts
    UNION ALL
    SELECT (resolved_at AT TIME ZONE 'UTC')::date, cluster, repository, namespace, resource_kind, drift_type,
        severity, status, 0, 1 FROM drifts WHERE resolved_at IS NOT NULL
) AS e
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8;

-- The 95th percentile of the time to resolve is an order statistic: read it from the top of
-- this index (about 5% of the resolved rows) in an index-only scan, filtering on the included
-- dimensions. Only resolved rows are in it, so recording open drifts never touches it.
CREATE INDEX drifts_resolved_ttr ON drifts (ttr_ms)
    INCLUDE (cluster, repository, namespace, resource_kind, drift_type, severity)
    WHERE status = 'resolved';

-- The open drifts of one namespace, newest first: a range of this index instead of a walk
-- through the namespace's whole history.
CREATE INDEX drifts_open_namespace_id ON drifts (namespace, id) WHERE status = 'open';
-- Open drifts gather in the namespaces that are broken: without this the planner multiplies
-- the two selectivities, expects a handful of open rows in a namespace that has thousands, and
-- sorts them all instead of reading the first page from the index above in id order.
CREATE STATISTICS drifts_namespace_status (dependencies) ON namespace, status FROM drifts;

-- Half of each new page stays free, so that every open drift on it can be updated in place
-- (a HOT update: no index entry written) when the next scan sees it again. With 85%, room for
-- about 3 of the 18 rows of a page: most updates of a persistent drift wrote a new entry in
-- every index. Pages written before this migration keep their layout.
ALTER TABLE drifts SET (fillfactor = 50);
