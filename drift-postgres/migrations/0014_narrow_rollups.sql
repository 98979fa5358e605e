-- Statistics at fleet size (issue 35; docs/storage.md "How statistics are computed",
-- docs/benchmarks.md "History at fleet size"): `drift_counts` and `drift_daily` have one row per
-- combination of all seven dimensions (about 120,000 rows a million history rows), and every
-- unfiltered /stats read them whole, three times; the 95th percentile read the top 5% of the
-- resolved rows' index. This adds narrower rollups, kept by the same statement triggers in the
-- same transactions, exact like them:
--
-- drift_counts_kinds (status, severity, drift_type, repository, cluster): n, ttr_sum_ms
-- drift_counts_scope (status, cluster, namespace, severity): n, ttr_sum_ms
-- drift_counts_type  (status, cluster, namespace, severity, drift_type): n, ttr_sum_ms
-- drift_counts_repo  (status, cluster, namespace, severity, repository): n, ttr_sum_ms
-- drift_daily_status (day, status, severity, cluster): opened, resolved
-- drift_daily_scope  (day, status, cluster, namespace, severity): opened, resolved
-- drift_ttr_buckets  (dim, value, bucket, cluster): n = resolved rows of the cluster whose time
--     to resolve falls in the bucket, for the whole history (dim = value = '') and for each value
--     of each dimension but status (dim = 'cluster', value = 'cluster-03', ...).
--
-- Every narrow key holds the cluster (drift_counts_kinds, drift_daily_status and
-- drift_ttr_buckets have it last, only for this; readers sum over it): a report writes rows of
-- its own cluster only, so the writers of different clusters (each cluster written by its own
-- replica or task in a fleet) never update, hence never lock or wait for, the same rollup row.
--
-- A statistic reads the narrowest rollup holding the columns it groups by and the columns the
-- filter names; `drift_counts`/`drift_daily` remain for the filters no narrow one covers
-- (drift-postgres/src/stats.rs). Status comes first in the count rollups' keys: the open
-- breakdown and the fleet overview read the open keys only.

-- No report may commit while the narrow rollups are filled from the wide ones and the rows: a
-- replica of the version before, still running, writes `drifts`, `drift_counts` and
-- `drift_daily` through the trigger of 0013, which knows nothing of the new tables, and what it
-- committed after the backfill's snapshot would be missing from them for good. SHARE conflicts
-- with every writer's ROW EXCLUSIVE (on a partitioned table the lock covers its partitions):
-- writers in progress are waited for, new ones wait until this migration commits, and then run
-- the new trigger. Readers are not blocked. The same order as a writer's (drifts first, then the
-- rollups its trigger writes).
LOCK TABLE drifts, drift_counts, drift_daily IN SHARE MODE;

-- The bucket of a time to resolve (ms): the value itself below 512 ms, else the value with all
-- but its 9 most significant bits cleared, which is the bucket's lowest value: 256 buckets per
-- power of two, each at most 1/256 (0.4%) of its values wide. The percentile finds its bucket
-- from the counts and reads the exact values of that bucket only from `drifts_resolved_ttr`.
CREATE FUNCTION drift_ttr_bucket(ms bigint) RETURNS bigint LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
    SELECT CASE WHEN ms < 512 THEN ms
        ELSE (ms >> (56 - position('1' IN ms::bit(64)::text))) << (56 - position('1' IN ms::bit(64)::text))
    END
$fn$;

CREATE TABLE drift_counts_kinds (
    status     text   NOT NULL,
    severity   text   NOT NULL,
    drift_type text   NOT NULL,
    repository text   NOT NULL,
    cluster    text   NOT NULL,
    n          bigint NOT NULL,
    ttr_sum_ms bigint NOT NULL,
    PRIMARY KEY (status, severity, drift_type, repository, cluster)
);

CREATE TABLE drift_counts_scope (
    status     text   NOT NULL,
    cluster    text   NOT NULL,
    namespace  text   NOT NULL,
    severity   text   NOT NULL,
    n          bigint NOT NULL,
    ttr_sum_ms bigint NOT NULL,
    PRIMARY KEY (status, cluster, namespace, severity)
);

CREATE TABLE drift_counts_type (
    status     text   NOT NULL,
    cluster    text   NOT NULL,
    namespace  text   NOT NULL,
    severity   text   NOT NULL,
    drift_type text   NOT NULL,
    n          bigint NOT NULL,
    ttr_sum_ms bigint NOT NULL,
    PRIMARY KEY (status, cluster, namespace, severity, drift_type)
);

CREATE TABLE drift_counts_repo (
    status     text   NOT NULL,
    cluster    text   NOT NULL,
    namespace  text   NOT NULL,
    severity   text   NOT NULL,
    repository text   NOT NULL,
    n          bigint NOT NULL,
    ttr_sum_ms bigint NOT NULL,
    PRIMARY KEY (status, cluster, namespace, severity, repository)
);

CREATE TABLE drift_daily_status (
    day      date   NOT NULL,
    status   text   NOT NULL,
    severity text   NOT NULL,
    cluster  text   NOT NULL,
    opened   bigint NOT NULL,
    resolved bigint NOT NULL,
    PRIMARY KEY (day, status, severity, cluster)
);

CREATE TABLE drift_daily_scope (
    day       date   NOT NULL,
    status    text   NOT NULL,
    cluster   text   NOT NULL,
    namespace text   NOT NULL,
    severity  text   NOT NULL,
    opened    bigint NOT NULL,
    resolved  bigint NOT NULL,
    PRIMARY KEY (day, status, cluster, namespace, severity)
);

CREATE TABLE drift_ttr_buckets (
    dim     text   NOT NULL,
    value   text   NOT NULL,
    bucket  bigint NOT NULL,
    cluster text   NOT NULL,
    n       bigint NOT NULL,
    PRIMARY KEY (dim, value, bucket, cluster)
);

-- The statements that add the contribution of `src` (rows of drifts with a sign column s, +1
-- or -1, and the columns cluster, repository, namespace, resource_kind, drift_type, severity,
-- status, detected_at, resolved_at, ttr_ms) to every rollup, in a fixed order (tables, then
-- keys), so that concurrent writers lock rollup rows in the same order. The trigger runs them
-- on its transition tables (which only its own statements can see, hence text), the retention
-- by partitions on a partition with s = -1.
CREATE FUNCTION drift_rollup_statements(src text) RETURNS SETOF text LANGUAGE plpgsql IMMUTABLE AS $fn$
DECLARE
    narrow record;
BEGIN
    RETURN NEXT format($q$
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
    FOR narrow IN SELECT * FROM (VALUES
        ('drift_counts_kinds', 'status, severity, drift_type, repository, cluster', '1, 2, 3, 4, 5'),
        ('drift_counts_scope', 'status, cluster, namespace, severity', '1, 2, 3, 4'),
        ('drift_counts_type', 'status, cluster, namespace, severity, drift_type', '1, 2, 3, 4, 5'),
        ('drift_counts_repo', 'status, cluster, namespace, severity, repository', '1, 2, 3, 4, 5')
    ) AS t(name, keys, positions) LOOP
        RETURN NEXT format($q$
            INSERT INTO %1$I AS c (%2$s, n, ttr_sum_ms)
            SELECT %2$s, sum(s), COALESCE(sum(s * ttr_ms), 0)
            FROM (%4$s) AS d
            GROUP BY %3$s
            HAVING sum(s) <> 0 OR COALESCE(sum(s * ttr_ms), 0) <> 0
            ORDER BY %3$s
            ON CONFLICT (%2$s) DO UPDATE SET n = c.n + EXCLUDED.n, ttr_sum_ms = c.ttr_sum_ms + EXCLUDED.ttr_sum_ms
        $q$, narrow.name, narrow.keys, narrow.positions, src);
    END LOOP;
    RETURN NEXT format($q$
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
    FOR narrow IN SELECT * FROM (VALUES
        ('drift_daily_status', 'status, severity, cluster', '1, 2, 3, 4'),
        ('drift_daily_scope', 'status, cluster, namespace, severity', '1, 2, 3, 4, 5')
    ) AS t(name, keys, positions) LOOP
        RETURN NEXT format($q$
            WITH d AS (%4$s)
            INSERT INTO %1$I AS r (day, %2$s, opened, resolved)
            SELECT day, %2$s, sum(o), sum(x)
            FROM (
                SELECT (detected_at AT TIME ZONE 'UTC')::date AS day, %2$s, s AS o, 0 AS x FROM d
                UNION ALL
                SELECT (resolved_at AT TIME ZONE 'UTC')::date, %2$s, 0, s FROM d WHERE resolved_at IS NOT NULL
            ) AS e
            GROUP BY %3$s
            HAVING sum(o) <> 0 OR sum(x) <> 0
            ORDER BY %3$s
            ON CONFLICT (day, %2$s) DO UPDATE
                SET opened = r.opened + EXCLUDED.opened, resolved = r.resolved + EXCLUDED.resolved
        $q$, narrow.name, narrow.keys, narrow.positions, src);
    END LOOP;
    -- GROUPING(...) has a 0 bit for each column the row is grouped by (leftmost = 32). `writer`
    -- is the cluster again, the last column of every key; OFFSET 0 keeps the subquery from being
    -- pulled up, which would make it the same column as `cluster` for GROUPING.
    RETURN NEXT format($q$
        INSERT INTO drift_ttr_buckets AS b (dim, value, bucket, cluster, n)
        SELECT CASE GROUPING(cluster, namespace, severity, repository, drift_type, resource_kind)
                WHEN 31 THEN 'cluster' WHEN 47 THEN 'namespace' WHEN 55 THEN 'severity'
                WHEN 59 THEN 'repository' WHEN 61 THEN 'drift_type' WHEN 62 THEN 'resource_kind' ELSE '' END,
            COALESCE(cluster, namespace, severity, repository, drift_type, resource_kind, ''),
            bucket, writer, sum(s)
        FROM (SELECT s, drift_ttr_bucket(ttr_ms) AS bucket, cluster AS writer, cluster, namespace, severity,
                repository, drift_type, resource_kind FROM (%s) AS x WHERE status = 'resolved'
            OFFSET 0) AS d
        GROUP BY GROUPING SETS ((bucket, writer), (bucket, writer, cluster), (bucket, writer, namespace),
            (bucket, writer, severity), (bucket, writer, repository), (bucket, writer, drift_type),
            (bucket, writer, resource_kind))
        HAVING sum(s) <> 0
        ORDER BY 1, 2, 3, 4
        ON CONFLICT (dim, value, bucket, cluster) DO UPDATE SET n = b.n + EXCLUDED.n
    $q$, src);
END
$fn$;

CREATE OR REPLACE FUNCTION drifts_rollup() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    cols CONSTANT text :=
        'cluster, repository, namespace, resource_kind, drift_type, severity, status, detected_at, resolved_at, ttr_ms';
    src text;
    statement text;
BEGIN
    src := CASE TG_OP
        WHEN 'INSERT' THEN format('SELECT 1 AS s, %s FROM new_rows', cols)
        WHEN 'DELETE' THEN format('SELECT -1 AS s, %s FROM old_rows', cols)
        ELSE format('SELECT 1 AS s, %1$s FROM new_rows UNION ALL SELECT -1, %1$s FROM old_rows', cols)
    END;
    FOR statement IN SELECT drift_rollup_statements(src) LOOP
        EXECUTE statement;
    END LOOP;
    RETURN NULL;
END
$fn$;

CREATE OR REPLACE FUNCTION drifts_rollup_truncate() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    DELETE FROM drift_counts;
    DELETE FROM drift_daily;
    DELETE FROM drift_counts_kinds;
    DELETE FROM drift_counts_scope;
    DELETE FROM drift_counts_type;
    DELETE FROM drift_counts_repo;
    DELETE FROM drift_daily_status;
    DELETE FROM drift_daily_scope;
    DELETE FROM drift_ttr_buckets;
    RETURN NULL;
END
$fn$;

-- Retention by whole months (0012), now taking each dropped partition's share out of every
-- rollup with the trigger's own statements.
CREATE OR REPLACE FUNCTION drift_history_drop(cutoff timestamptz) RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
    m date;
    name text;
    n bigint;
    total bigint := 0;
    statement text;
    cols CONSTANT text :=
        'cluster, repository, namespace, resource_kind, drift_type, severity, status, detected_at, resolved_at, ttr_ms';
BEGIN
    FOR m IN SELECT * FROM drift_history_months() LOOP
        EXIT WHEN ((m + interval '1 month')::timestamp AT TIME ZONE 'UTC') > cutoff;
        name := format('drifts_p%s', to_char(m, 'YYYY_MM'));
        EXECUTE format('LOCK TABLE drifts IN ACCESS EXCLUSIVE MODE');
        FOR statement IN SELECT drift_rollup_statements(format('SELECT -1 AS s, %s FROM %I', cols, name)) LOOP
            EXECUTE statement;
        END LOOP;
        EXECUTE format('SELECT count(*) FROM %I', name) INTO n;
        EXECUTE format('DROP TABLE %I', name);
        total := total + n;
    END LOOP;
    -- Days before the cutoff that no row contributes to any more.
    DELETE FROM drift_daily WHERE day < (cutoff AT TIME ZONE 'UTC')::date AND opened = 0 AND resolved = 0;
    DELETE FROM drift_daily_status WHERE day < (cutoff AT TIME ZONE 'UTC')::date AND opened = 0 AND resolved = 0;
    DELETE FROM drift_daily_scope WHERE day < (cutoff AT TIME ZONE 'UTC')::date AND opened = 0 AND resolved = 0;
    RETURN total;
END
$fn$;

-- Backfill: the narrow counts from the exact wide ones (a few hundred thousand rows at most),
-- the buckets from the resolved rows' index `drifts_resolved_ttr` (it holds every column they
-- need: an index-only scan of the history, about a second per million resolved rows).
INSERT INTO drift_counts_kinds (status, severity, drift_type, repository, cluster, n, ttr_sum_ms)
SELECT status, severity, drift_type, repository, cluster, sum(n), sum(ttr_sum_ms)
FROM drift_counts GROUP BY 1, 2, 3, 4, 5 HAVING sum(n) <> 0 OR sum(ttr_sum_ms) <> 0;
INSERT INTO drift_counts_scope (status, cluster, namespace, severity, n, ttr_sum_ms)
SELECT status, cluster, namespace, severity, sum(n), sum(ttr_sum_ms)
FROM drift_counts GROUP BY 1, 2, 3, 4 HAVING sum(n) <> 0 OR sum(ttr_sum_ms) <> 0;
INSERT INTO drift_counts_type (status, cluster, namespace, severity, drift_type, n, ttr_sum_ms)
SELECT status, cluster, namespace, severity, drift_type, sum(n), sum(ttr_sum_ms)
FROM drift_counts GROUP BY 1, 2, 3, 4, 5 HAVING sum(n) <> 0 OR sum(ttr_sum_ms) <> 0;
INSERT INTO drift_counts_repo (status, cluster, namespace, severity, repository, n, ttr_sum_ms)
SELECT status, cluster, namespace, severity, repository, sum(n), sum(ttr_sum_ms)
FROM drift_counts GROUP BY 1, 2, 3, 4, 5 HAVING sum(n) <> 0 OR sum(ttr_sum_ms) <> 0;
INSERT INTO drift_daily_status (day, status, severity, cluster, opened, resolved)
SELECT day, status, severity, cluster, sum(opened), sum(resolved)
FROM drift_daily GROUP BY 1, 2, 3, 4 HAVING sum(opened) <> 0 OR sum(resolved) <> 0;
INSERT INTO drift_daily_scope (day, status, cluster, namespace, severity, opened, resolved)
SELECT day, status, cluster, namespace, severity, sum(opened), sum(resolved)
FROM drift_daily GROUP BY 1, 2, 3, 4, 5 HAVING sum(opened) <> 0 OR sum(resolved) <> 0;
DO $$
DECLARE
    statement text;
BEGIN
    FOR statement IN SELECT q FROM drift_rollup_statements('SELECT 1 AS s, cluster, repository, namespace, '
        'resource_kind, drift_type, severity, status, detected_at, resolved_at, ttr_ms FROM drifts '
        'WHERE status = ''resolved''') AS q WHERE q LIKE '%INSERT INTO drift_ttr_buckets%' LOOP
        EXECUTE statement;
    END LOOP;
END
$$;
ANALYZE drift_counts_kinds, drift_counts_scope, drift_counts_type, drift_counts_repo, drift_daily_status,
    drift_daily_scope, drift_ttr_buckets;
