-- History at fleet size (issue 35, item 3; docs/storage.md, "Partitions of the history").
--
-- `drifts` is both the current state (live rows: open or waived, at most one per fingerprint)
-- and the history (resolved rows, one per episode). Only the history grows without bound, and
-- a resolved row never becomes live again (a drift that comes back opens a new row), so the
-- table is partitioned by RANGE (resolved_at), one partition per UTC month:
--
-- - `drifts_live`, the DEFAULT partition: every live row (resolved_at is NULL), and any
--   resolved row of a month that has no partition of its own yet. Small and hot: fillfactor 50
--   keeps the updates of a drift seen again HOT, as before.
-- - `drifts_pYYYY_MM`: the drifts resolved that month, created ahead by the store
--   (`drift_history_ensure`), dropped whole by retention (`drift_history_drop`).
--
-- Resolving a drift moves its row from `drifts_live` to its month (an UPDATE across partitions);
-- the statement triggers on `drifts` see it as an update, so the rollups stay exact. Rows keep
-- their ids. A unique index on a partitioned table must hold the partition key: the one live row
-- per fingerprint is (fingerprint, resolved_at) NULLS NOT DISTINCT over the live rows, whose
-- resolved_at is always NULL, so it is the same rule (the upsert names both columns).
--
-- The existing rows are copied into the new table in this migration (one rewrite of the history;
-- about a minute per few million rows), their rollups untouched (the triggers are created after
-- the copy).

-- NULLS NOT DISTINCT is PostgreSQL 15's: on an older server, say so before anything changes.
DO $$
BEGIN
    IF current_setting('server_version_num')::int < 150000 THEN
        RAISE EXCEPTION 'the drift detector needs PostgreSQL 15 or later (this server is %): its history is partitioned with a NULLS NOT DISTINCT unique index (docs/storage.md)',
            current_setting('server_version');
    END IF;
END
$$;

LOCK TABLE drifts IN ACCESS EXCLUSIVE MODE;
ALTER TABLE drifts RENAME TO drifts_unpartitioned;
ALTER TABLE drifts_unpartitioned ALTER COLUMN id DROP IDENTITY IF EXISTS;
DROP TRIGGER drifts_rollup_insert ON drifts_unpartitioned;
DROP TRIGGER drifts_rollup_update ON drifts_unpartitioned;
DROP TRIGGER drifts_rollup_delete ON drifts_unpartitioned;
DROP TRIGGER drifts_rollup_truncate ON drifts_unpartitioned;
DROP STATISTICS IF EXISTS drifts_namespace_status;

CREATE TABLE drifts (
    id                 bigint      GENERATED ALWAYS AS IDENTITY,
    detected_at        timestamptz NOT NULL,
    last_seen          timestamptz NOT NULL,
    occurrences        bigint      NOT NULL DEFAULT 1 CHECK (occurrences >= 1),
    repository         text        NOT NULL,
    namespace          text        NOT NULL DEFAULT '',
    resource_kind      text        NOT NULL,
    resource_name      text        NOT NULL,
    drift_type         text        NOT NULL,
    severity           text        NOT NULL CHECK (severity IN ('LOW', 'MEDIUM', 'HIGH', 'CRITICAL')),
    git_value          jsonb,
    cluster_value      jsonb,
    status             text        NOT NULL DEFAULT 'open',
    resolved_at        timestamptz,
    decision_source    text        NOT NULL,
    recommended_action text        NOT NULL,
    cluster            text        NOT NULL,
    api_group          text        NOT NULL DEFAULT '',
    path               text        NOT NULL DEFAULT '',
    fingerprint        text        NOT NULL,
    changed_by         text,
    changed_at         timestamptz,
    classification     text        NOT NULL,
    ttr_ms             bigint GENERATED ALWAYS AS (trunc(extract(epoch FROM resolved_at - detected_at) * 1000)::bigint) STORED,
    resolution         text        CHECK (resolution IN ('reverted', 'accepted', 'removed')),
    desired_digest     text,
    waived_until       timestamptz,
    acknowledged_at    timestamptz,
    waived_by          text,
    revert             jsonb,
    changed_by_user    jsonb,
    CONSTRAINT drifts_status_check CHECK (status IN ('open', 'waived', 'resolved')),
    CONSTRAINT drifts_resolved_at_check CHECK ((status = 'resolved') = (resolved_at IS NOT NULL)),
    CONSTRAINT drifts_waived_until CHECK ((status = 'waived') = (waived_until IS NOT NULL))
) PARTITION BY RANGE (resolved_at);

CREATE TABLE drifts_live PARTITION OF drifts DEFAULT WITH (fillfactor = 50);

-- The month partition of `month` (its first day), created when missing: built beside the table,
-- filled with the resolved rows of that month that waited in `drifts_live`, then attached (which
-- locks `drifts` for SHARE UPDATE EXCLUSIVE only: readers and writers go on; `drifts_live` is
-- locked for the check that no row of the month is left in it). The rows moved keep their ids
-- and their share of the rollups (no trigger of `drifts` fires for a statement on a partition).
-- Returns whether it created the partition.
CREATE FUNCTION drift_history_partition(month date) RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
    first date := date_trunc('month', month)::date;
    name text := format('drifts_p%s', to_char(first, 'YYYY_MM'));
    lower timestamptz := (first::timestamp AT TIME ZONE 'UTC');
    upper timestamptz := ((first + interval '1 month')::timestamp AT TIME ZONE 'UTC');
    cols text;
BEGIN
    IF to_regclass(name) IS NOT NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE TABLE %I (LIKE drifts INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED)', name);
    -- Only resolved rows: lets the planner skip the month for the live rows (constraint exclusion).
    EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (status = ''resolved'')', name, name || '_resolved');
    -- Every column but the generated one, which the new table computes again.
    SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO cols
    FROM pg_attribute
    WHERE attrelid = 'drifts'::regclass AND attnum > 0 AND NOT attisdropped AND attgenerated = '';
    EXECUTE format($q$
        WITH moved AS (
            DELETE FROM drifts_live WHERE status = 'resolved' AND resolved_at >= %L AND resolved_at < %L RETURNING %s
        )
        INSERT INTO %I (%s) SELECT %s FROM moved
    $q$, lower, upper, cols, name, cols, cols);
    EXECUTE format('ALTER TABLE drifts ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', name, lower, upper);
    RETURN true;
END
$fn$;

-- The months of the partitions of the history, oldest first (their names say them).
CREATE FUNCTION drift_history_months() RETURNS SETOF date LANGUAGE sql STABLE AS $fn$
    SELECT to_date(substr(c.relname, 9), 'YYYY_MM')
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'drifts'::regclass AND c.relname ~ '^drifts_p[0-9]{4}_[0-9]{2}$'
    ORDER BY 1
$fn$;

-- Makes every month from the last partition (or from `now`'s month when there is none) to
-- `ahead` months after `now` have its partition, without gaps; returns how many it created.
CREATE FUNCTION drift_history_ensure(now timestamptz, ahead integer) RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
    target date := date_trunc('month', (now AT TIME ZONE 'UTC') + make_interval(months => ahead))::date;
    month date := COALESCE((SELECT max(m) + interval '1 month' FROM drift_history_months() AS m)::date,
        date_trunc('month', now AT TIME ZONE 'UTC')::date);
    created integer := 0;
BEGIN
    WHILE month <= target LOOP
        IF drift_history_partition(month) THEN
            created := created + 1;
        END IF;
        month := (month + interval '1 month')::date;
    END LOOP;
    RETURN created;
END
$fn$;

-- Retention by whole months: drops the partitions whose month ended before `cutoff`, oldest
-- first, after taking their rows' share out of the rollups (DROP fires no trigger). Returns the
-- number of rows dropped. Rows resolved before the first partition (in `drifts_live`) are
-- deleted row by row by the retention pass, as without partitions.
CREATE FUNCTION drift_history_drop(cutoff timestamptz) RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
    m date;
    name text;
    n bigint;
    total bigint := 0;
    cols CONSTANT text :=
        'cluster, repository, namespace, resource_kind, drift_type, severity, status, detected_at, resolved_at, ttr_ms';
BEGIN
    FOR m IN SELECT * FROM drift_history_months() LOOP
        EXIT WHEN ((m + interval '1 month')::timestamp AT TIME ZONE 'UTC') > cutoff;
        name := format('drifts_p%s', to_char(m, 'YYYY_MM'));
        EXECUTE format('LOCK TABLE drifts IN ACCESS EXCLUSIVE MODE');
        EXECUTE format($q$
            INSERT INTO drift_counts AS c
                (cluster, repository, namespace, resource_kind, drift_type, severity, status, n, ttr_sum_ms)
            SELECT cluster, repository, namespace, resource_kind, drift_type, severity, status, -count(*),
                -COALESCE(sum(ttr_ms), 0)
            FROM %I
            GROUP BY 1, 2, 3, 4, 5, 6, 7
            ORDER BY 1, 2, 3, 4, 5, 6, 7
            ON CONFLICT (cluster, repository, namespace, resource_kind, drift_type, severity, status) DO UPDATE
                SET n = c.n + EXCLUDED.n, ttr_sum_ms = c.ttr_sum_ms + EXCLUDED.ttr_sum_ms
        $q$, name);
        EXECUTE format($q$
            INSERT INTO drift_daily AS r
                (day, cluster, repository, namespace, resource_kind, drift_type, severity, status, opened, resolved)
            SELECT day, cluster, repository, namespace, resource_kind, drift_type, severity, status, -sum(o), -sum(x)
            FROM (
                SELECT (detected_at AT TIME ZONE 'UTC')::date AS day, cluster, repository, namespace, resource_kind,
                    drift_type, severity, status, 1 AS o, 0 AS x FROM %1$I
                UNION ALL
                SELECT (resolved_at AT TIME ZONE 'UTC')::date, cluster, repository, namespace, resource_kind,
                    drift_type, severity, status, 0, 1 FROM %1$I
            ) AS e
            GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
            ORDER BY 1, 2, 3, 4, 5, 6, 7, 8
            ON CONFLICT (day, cluster, repository, namespace, resource_kind, drift_type, severity, status) DO UPDATE
                SET opened = r.opened + EXCLUDED.opened, resolved = r.resolved + EXCLUDED.resolved
        $q$, name);
        EXECUTE format('SELECT count(*) FROM %I', name) INTO n;
        EXECUTE format('DROP TABLE %I', name);
        total := total + n;
    END LOOP;
    -- Days before the cutoff that no row contributes to any more.
    DELETE FROM drift_daily WHERE day < (cutoff AT TIME ZONE 'UTC')::date AND opened = 0 AND resolved = 0;
    RETURN total;
END
$fn$;

-- The first instant of the partitioned history: rows resolved before it are in `drifts_live`.
CREATE FUNCTION drift_history_start() RETURNS timestamptz LANGUAGE sql STABLE AS $fn$
    SELECT COALESCE((min(m)::timestamp AT TIME ZONE 'UTC'), 'infinity'::timestamptz) FROM drift_history_months() AS m
$fn$;

-- One partition per month of the rows already resolved, then the copy (ids kept).
SELECT drift_history_partition(m::date)
FROM generate_series(
    date_trunc('month', (SELECT min(resolved_at) AT TIME ZONE 'UTC' FROM drifts_unpartitioned)),
    -- A row resolved in the far future (a clock gone wrong) gets no partition: it waits in drifts_live.
    LEAST(date_trunc('month', (SELECT max(resolved_at) AT TIME ZONE 'UTC' FROM drifts_unpartitioned)),
        date_trunc('month', now() AT TIME ZONE 'UTC') + interval '2 months'),
    interval '1 month') AS m;

INSERT INTO drifts (id, detected_at, last_seen, occurrences, repository, namespace, resource_kind, resource_name,
    drift_type, severity, git_value, cluster_value, status, resolved_at, decision_source, recommended_action, cluster,
    api_group, path, fingerprint, changed_by, changed_at, classification, resolution, desired_digest, waived_until,
    acknowledged_at, waived_by, revert, changed_by_user)
OVERRIDING SYSTEM VALUE
SELECT id, detected_at, last_seen, occurrences, repository, namespace, resource_kind, resource_name,
    drift_type, severity, git_value, cluster_value, status, resolved_at, decision_source, recommended_action, cluster,
    api_group, path, fingerprint, changed_by, changed_at, classification, resolution, desired_digest, waived_until,
    acknowledged_at, waived_by, revert, changed_by_user
FROM drifts_unpartitioned;

SELECT setval(pg_get_serial_sequence('drifts', 'id'), COALESCE((SELECT max(id) FROM drifts_unpartitioned), 0) + 1, false);

DROP TABLE drifts_unpartitioned;

-- The indexes of before (every one a partitioned index, on each partition), with the partition
-- key where the index is unique.
-- Named as before on the partition that holds the live rows (the error of a second live row
-- names it); the index of the whole table takes it as its own and builds the others.
CREATE UNIQUE INDEX drifts_live_fingerprint ON drifts_live (fingerprint, resolved_at) NULLS NOT DISTINCT
    WHERE status <> 'resolved';
CREATE UNIQUE INDEX drifts_live_fingerprint_all ON drifts (fingerprint, resolved_at) NULLS NOT DISTINCT
    WHERE status <> 'resolved';
-- A drift by id (the API's /drifts/{id}, decisions): one probe per partition.
CREATE INDEX drifts_id ON drifts (id);
CREATE INDEX drifts_live_scope ON drifts (cluster, repository) WHERE status <> 'resolved';
CREATE INDEX drifts_live_object ON drifts (cluster, repository, namespace, resource_name) WHERE status <> 'resolved';
CREATE INDEX drifts_resolved_fingerprint ON drifts (fingerprint) WHERE status = 'resolved';
CREATE INDEX drifts_waived_until ON drifts (waived_until) WHERE status = 'waived';
CREATE INDEX drifts_waived_scope ON drifts (cluster, repository) WHERE status = 'waived';
CREATE INDEX drifts_detected_at ON drifts (detected_at);
CREATE INDEX drifts_resolved_at ON drifts (resolved_at) WHERE status = 'resolved';
CREATE INDEX drifts_resolved_ttr ON drifts (ttr_ms)
    INCLUDE (cluster, repository, namespace, resource_kind, drift_type, severity)
    WHERE status = 'resolved';
-- The page's filters, newest first (keyset pagination walks id backwards): each filter the
-- page offers has an index that gives its rows in id order, in every month.
CREATE INDEX drifts_namespace_id ON drifts (namespace, id);
CREATE INDEX drifts_open_namespace_id ON drifts (namespace, id) WHERE status = 'open';
CREATE INDEX drifts_cluster_id ON drifts (cluster, id);
CREATE INDEX drifts_repository_id ON drifts (repository, id);
CREATE INDEX drifts_severity_id ON drifts (severity, id);
CREATE INDEX drifts_type_id ON drifts (drift_type, id);
CREATE STATISTICS drifts_namespace_status (dependencies) ON namespace, status FROM drifts;

CREATE TRIGGER drifts_rollup_insert AFTER INSERT ON drifts
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION drifts_rollup();
CREATE TRIGGER drifts_rollup_update AFTER UPDATE ON drifts
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION drifts_rollup();
CREATE TRIGGER drifts_rollup_delete AFTER DELETE ON drifts
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION drifts_rollup();
CREATE TRIGGER drifts_rollup_truncate AFTER TRUNCATE ON drifts
    FOR EACH STATEMENT EXECUTE FUNCTION drifts_rollup_truncate();

ANALYZE drifts;
