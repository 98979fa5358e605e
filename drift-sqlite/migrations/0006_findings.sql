-- Policy findings (issue 15, docs/policies.md), as in the PostgreSQL store: one row per finding
-- episode, apart from the drifts. Times are INTEGER microseconds since the Unix epoch (UTC).
CREATE TABLE findings (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    fingerprint   TEXT    NOT NULL,
    finding_type  TEXT    NOT NULL DEFAULT 'policy_violation',
    detected_at   INTEGER NOT NULL,
    last_seen     INTEGER NOT NULL,
    occurrences   INTEGER NOT NULL DEFAULT 1 CHECK (occurrences >= 1),
    cluster       TEXT    NOT NULL,
    repository    TEXT    NOT NULL,
    rule          TEXT    NOT NULL,
    severity      TEXT    NOT NULL CHECK (severity IN ('LOW', 'MEDIUM', 'HIGH', 'CRITICAL')),
    side          TEXT    NOT NULL CHECK (side IN ('desired', 'live')),
    api_group     TEXT    NOT NULL DEFAULT '',
    resource_kind TEXT    NOT NULL,
    namespace     TEXT    NOT NULL DEFAULT '',
    resource_name TEXT    NOT NULL,
    container     TEXT,
    path          TEXT    NOT NULL,
    message       TEXT    NOT NULL,
    status        TEXT    NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'resolved')),
    resolved_at   INTEGER,
    CHECK ((status = 'resolved') = (resolved_at IS NOT NULL))
);

CREATE UNIQUE INDEX findings_open_fingerprint ON findings (fingerprint) WHERE status = 'open';
CREATE INDEX findings_open_scope ON findings (cluster, repository) WHERE status = 'open';
CREATE INDEX findings_namespace_id ON findings (namespace, id);
CREATE INDEX findings_resolved_at ON findings (resolved_at) WHERE status = 'resolved';
