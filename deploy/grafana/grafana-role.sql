-- The read-only role Grafana connects as (docs/grafana.md), for the dashboard
-- deploy/grafana/drift-postgres.json. Run once by an administrator (a role with CREATEROLE,
-- for example the `postgres` superuser), connected to the detector's database, after
-- `drift migrate` has created the tables:
--
--   psql "postgres://postgres@db.example:5432/drift" -f deploy/grafana/grafana-role.sql
--   psql "postgres://postgres@db.example:5432/drift" -c '\password drift_grafana'
--
-- The second command asks for the password and sends it hashed: it is never in this file, in
-- a shell history or in the server's statement log. Running this file again changes nothing.
--
-- What the role can do: read the three tables the panels read (drifts, and the rollups
-- drift_counts and drift_daily that triggers keep), nothing else. Its sessions are read-only
-- and a statement that runs longer than 30 seconds is cancelled, so a heavy panel cannot hold
-- the detector's database. It reads no scans, events, deliveries, decisions or audit trail.

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'drift_grafana') THEN
        CREATE ROLE drift_grafana LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION;
    END IF;
END
$$;

ALTER ROLE drift_grafana SET default_transaction_read_only = on;
ALTER ROLE drift_grafana SET statement_timeout = '30s';

DO $$
BEGIN
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO drift_grafana', current_database());
END
$$;

GRANT USAGE ON SCHEMA public TO drift_grafana;
GRANT SELECT ON TABLE drifts, drift_counts, drift_daily TO drift_grafana;
