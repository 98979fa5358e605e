-- Change storms (issue 33; docs/benchmarks.md "Change storms", docs/storage.md "How statistics
-- are computed"): the statement triggers of `drifts` ran their nine rollup statements for every
-- statement that wrote `drifts`, each planned anew (EXECUTE), even when the rows they add and
-- take away cancel out. A watch batch's upsert is mostly such rows: a drift seen again with a
-- new cluster value keeps its cluster, repository, namespace, kind, type, severity, status and
-- times, so its new row adds exactly what its old row takes away; and an upsert that only
-- updated fires the INSERT trigger too, with no new row. Those eighteen statements were two
-- thirds of the upsert's time in a storm.
--
-- Now the trigger returns at once when the rows it would add and those it would take away are
-- the same multiset of the columns the rollups read (no row at all, for an INSERT or DELETE
-- trigger): every rollup is a sum of +1/-1 over those rows grouped by some of these columns, so
-- the statements would have changed nothing (their HAVING leaves out the sums that are zero).
-- Otherwise it runs them as before, on all the rows.
CREATE OR REPLACE FUNCTION drifts_rollup() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    cols CONSTANT text :=
        'cluster, repository, namespace, resource_kind, drift_type, severity, status, detected_at, resolved_at, ttr_ms';
    src text;
    statement text;
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NOT EXISTS (SELECT 1 FROM new_rows) THEN
            RETURN NULL;
        END IF;
    ELSIF TG_OP = 'DELETE' THEN
        IF NOT EXISTS (SELECT 1 FROM old_rows) THEN
            RETURN NULL;
        END IF;
    ELSIF NOT EXISTS (
        SELECT cluster, repository, namespace, resource_kind, drift_type, severity, status, detected_at, resolved_at,
            ttr_ms FROM new_rows
        EXCEPT ALL
        SELECT cluster, repository, namespace, resource_kind, drift_type, severity, status, detected_at, resolved_at,
            ttr_ms FROM old_rows
    ) AND NOT EXISTS (
        SELECT cluster, repository, namespace, resource_kind, drift_type, severity, status, detected_at, resolved_at,
            ttr_ms FROM old_rows
        EXCEPT ALL
        SELECT cluster, repository, namespace, resource_kind, drift_type, severity, status, detected_at, resolved_at,
            ttr_ms FROM new_rows
    ) THEN
        RETURN NULL;
    END IF;
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
