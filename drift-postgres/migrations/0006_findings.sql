-- Policy findings (issue 15, docs/policies.md): one row per finding episode, apart from the
-- drifts (their own lifecycle, counted in no drift rollup). A finding that is fixed and comes
-- back opens a new row with the same fingerprint.
CREATE TABLE findings (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    fingerprint   text        NOT NULL,
    finding_type  text        NOT NULL DEFAULT 'policy_violation',
    detected_at   timestamptz NOT NULL,
    last_seen     timestamptz NOT NULL,
    occurrences   bigint      NOT NULL DEFAULT 1 CHECK (occurrences >= 1),
    cluster       text        NOT NULL,
    repository    text        NOT NULL,
    rule          text        NOT NULL,
    severity      text        NOT NULL CHECK (severity IN ('LOW', 'MEDIUM', 'HIGH', 'CRITICAL')),
    side          text        NOT NULL CHECK (side IN ('desired', 'live')),
    api_group     text        NOT NULL DEFAULT '',
    resource_kind text        NOT NULL,
    namespace     text        NOT NULL DEFAULT '',
    resource_name text        NOT NULL,
    container     text,
    path          text        NOT NULL,
    message       text        NOT NULL,
    status        text        NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'resolved')),
    resolved_at   timestamptz,
    CHECK ((status = 'resolved') = (resolved_at IS NOT NULL))
);

-- At most one open row per fingerprint: two scanners racing cannot duplicate a finding.
CREATE UNIQUE INDEX findings_open_fingerprint ON findings (fingerprint) WHERE status = 'open';
-- Resolution candidates of a scan: the open rows of its cluster and repository.
CREATE INDEX findings_open_scope ON findings (cluster, repository) WHERE status = 'open';
-- Listing by namespace in id order (keyset pagination), and retention.
CREATE INDEX findings_namespace_id ON findings (namespace, id);
CREATE INDEX findings_resolved_at ON findings (resolved_at) WHERE status = 'resolved';
