-- The drift history (DESIGN section 5), as in the PostgreSQL store. Times are INTEGER
-- microseconds since the Unix epoch (UTC), JSON values are TEXT.
CREATE TABLE drifts (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    detected_at        INTEGER NOT NULL,
    last_seen          INTEGER NOT NULL,
    occurrences        INTEGER NOT NULL DEFAULT 1 CHECK (occurrences >= 1),
    repository         TEXT    NOT NULL,
    namespace          TEXT    NOT NULL DEFAULT '',
    resource_kind      TEXT    NOT NULL,
    resource_name      TEXT    NOT NULL,
    drift_type         TEXT    NOT NULL,
    severity           TEXT    NOT NULL CHECK (severity IN ('LOW', 'MEDIUM', 'HIGH', 'CRITICAL')),
    git_value          TEXT,
    cluster_value      TEXT,
    status             TEXT    NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'resolved')),
    resolved_at        INTEGER,
    decision_source    TEXT    NOT NULL,
    recommended_action TEXT    NOT NULL,
    cluster            TEXT    NOT NULL,
    api_group          TEXT    NOT NULL DEFAULT '',
    path               TEXT    NOT NULL DEFAULT '',
    fingerprint        TEXT    NOT NULL,
    changed_by         TEXT,
    changed_at         INTEGER,
    classification     TEXT    NOT NULL,
    CHECK ((status = 'resolved') = (resolved_at IS NOT NULL))
);

-- At most one open row per fingerprint.
CREATE UNIQUE INDEX drifts_open_fingerprint ON drifts (fingerprint) WHERE status = 'open';
CREATE INDEX drifts_open_scope ON drifts (cluster, repository) WHERE status = 'open';
-- Listing: keyset pagination walks the primary key backwards and filters; the namespace
-- filter (the most selective one operators use) has its own index. Few indexes on purpose:
-- every index costs each of the thousands of upserts a scan makes, and none on last_seen
-- lets the update of a drift seen again stay a HOT update.
CREATE INDEX drifts_namespace_id ON drifts (namespace, id);
-- SQLite would otherwise list open drifts through the partial indexes above and sort them.
CREATE INDEX drifts_status_id ON drifts (status, id);
CREATE INDEX drifts_detected_at ON drifts (detected_at);
CREATE INDEX drifts_resolved_at ON drifts (resolved_at) WHERE status = 'resolved';

CREATE TABLE scans (
    scan_id     TEXT    PRIMARY KEY,
    cluster     TEXT    NOT NULL,
    repository  TEXT    NOT NULL,
    revision    TEXT,
    started_at  INTEGER NOT NULL,
    finished_at INTEGER NOT NULL,
    outcome     TEXT    NOT NULL CHECK (outcome IN ('success', 'partial', 'failed')),
    drifts      INTEGER NOT NULL,
    warnings    INTEGER NOT NULL,
    opened      INTEGER NOT NULL DEFAULT 0,
    updated     INTEGER NOT NULL DEFAULT 0,
    resolved    INTEGER NOT NULL DEFAULT 0,
    errors      TEXT    NOT NULL DEFAULT '[]',
    coverage    TEXT    NOT NULL DEFAULT '[]',
    recorded_at INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER))
);

CREATE INDEX scans_started ON scans (started_at DESC, scan_id DESC);
CREATE INDEX scans_finished ON scans (finished_at);
