-- Acting on drift (docs/notifications.md, docs/decisions.md), as in the PostgreSQL store:
-- waivers, acknowledgements, the outbox of events written with each report, their deliveries
-- to notifiers, decisions and the audit trail.
--
-- SQLite cannot change a CHECK constraint: the drifts table is rebuilt with the status
-- `waived` allowed and the new columns, rows and ids kept, and its indexes made again ("live"
-- rows, open or waived, are the ones a report updates or resolves).
CREATE TABLE drifts_new (
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
    status             TEXT    NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'waived', 'resolved')),
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
    resolution         TEXT    CHECK (resolution IN ('reverted', 'accepted', 'removed')),
    desired_digest     TEXT,
    waived_until       INTEGER,
    acknowledged_at    INTEGER,
    waived_by          TEXT,
    CHECK ((status = 'resolved') = (resolved_at IS NOT NULL)),
    CHECK ((status = 'waived') = (waived_until IS NOT NULL))
);
INSERT INTO drifts_new (id, detected_at, last_seen, occurrences, repository, namespace, resource_kind,
    resource_name, drift_type, severity, git_value, cluster_value, status, resolved_at, decision_source,
    recommended_action, cluster, api_group, path, fingerprint, changed_by, changed_at, classification,
    resolution, desired_digest)
SELECT id, detected_at, last_seen, occurrences, repository, namespace, resource_kind, resource_name,
    drift_type, severity, git_value, cluster_value, status, resolved_at, decision_source, recommended_action,
    cluster, api_group, path, fingerprint, changed_by, changed_at, classification, resolution, desired_digest
FROM drifts;
DROP TABLE drifts;
ALTER TABLE drifts_new RENAME TO drifts;

CREATE UNIQUE INDEX drifts_live_fingerprint ON drifts (fingerprint) WHERE status <> 'resolved';
CREATE INDEX drifts_live_scope ON drifts (cluster, repository) WHERE status <> 'resolved';
CREATE INDEX drifts_namespace_id ON drifts (namespace, id);
CREATE INDEX drifts_status_id ON drifts (status, id);
CREATE INDEX drifts_detected_at ON drifts (detected_at);
CREATE INDEX drifts_resolved_at ON drifts (resolved_at) WHERE status = 'resolved';
CREATE INDEX drifts_resolved_ttr ON drifts (((resolved_at - detected_at) / 1000), cluster, repository, namespace,
    resource_kind, drift_type, severity) WHERE status = 'resolved';
CREATE INDEX drifts_resolved_fingerprint ON drifts (fingerprint) WHERE status = 'resolved';
CREATE INDEX drifts_waived_until ON drifts (waived_until) WHERE status = 'waived';
-- The waived drifts of a scope (a report looks for those waived in Git).
CREATE INDEX drifts_waived_scope ON drifts (cluster, repository) WHERE status = 'waived';

CREATE TABLE events (
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    id       TEXT    NOT NULL UNIQUE,
    kind     TEXT    NOT NULL,
    batch    TEXT    NOT NULL,
    at       INTEGER NOT NULL,
    drift_id INTEGER,
    notifier TEXT,
    payload  TEXT    NOT NULL
);
CREATE INDEX events_at ON events (at);

CREATE TABLE notifier_cursors (
    notifier TEXT    PRIMARY KEY,
    seq      INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE deliveries (
    event_seq    INTEGER NOT NULL,
    notifier     TEXT    NOT NULL,
    batch        TEXT    NOT NULL,
    drift_id     INTEGER,
    kind         TEXT    NOT NULL,
    status       TEXT    NOT NULL CHECK (status IN ('pending', 'sent', 'parked', 'skipped')),
    attempts     INTEGER NOT NULL DEFAULT 0,
    due_at       INTEGER NOT NULL,
    locked_by    TEXT,
    locked_until INTEGER,
    last_error   TEXT,
    sent_at      INTEGER,
    PRIMARY KEY (event_seq, notifier)
);
CREATE INDEX deliveries_due ON deliveries (notifier, due_at) WHERE status = 'pending';
CREATE INDEX deliveries_drift ON deliveries (drift_id, event_seq);
CREATE INDEX deliveries_parked ON deliveries (event_seq) WHERE status = 'parked';

CREATE TABLE notified (
    drift_id INTEGER NOT NULL,
    notifier TEXT    NOT NULL,
    last_at  INTEGER NOT NULL,
    PRIMARY KEY (drift_id, notifier)
) WITHOUT ROWID;

CREATE TABLE decisions (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    drift_id   INTEGER NOT NULL,
    action     TEXT    NOT NULL CHECK (action IN ('acknowledge', 'accept', 'reject')),
    comment    TEXT,
    actor      TEXT    NOT NULL,
    decided_at INTEGER NOT NULL,
    expires_at INTEGER,
    manager    TEXT    NOT NULL,
    namespace  TEXT    NOT NULL,
    drift_type TEXT    NOT NULL,
    band       INTEGER NOT NULL
);
CREATE INDEX decisions_drift ON decisions (drift_id, id);
CREATE INDEX decisions_similar ON decisions (manager, namespace, drift_type, band);

CREATE TABLE audit (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    at       INTEGER NOT NULL,
    action   TEXT    NOT NULL,
    actor    TEXT    NOT NULL,
    drift_id INTEGER,
    scan_id  TEXT,
    notifier TEXT,
    event_id TEXT,
    status   TEXT    NOT NULL,
    attempts INTEGER,
    detail   TEXT    NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_drift ON audit (drift_id, id);
CREATE INDEX audit_at ON audit (at);
