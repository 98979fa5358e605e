-- The drift history (DESIGN section 5). One row per drift episode: a drift that comes back
-- after being resolved opens a new row with the same fingerprint.
CREATE TABLE drifts (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
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
    status             text        NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'resolved')),
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
    CHECK ((status = 'resolved') = (resolved_at IS NOT NULL))
) WITH (fillfactor = 85);

-- At most one open row per fingerprint: two scanners racing cannot duplicate a drift.
CREATE UNIQUE INDEX drifts_open_fingerprint ON drifts (fingerprint) WHERE status = 'open';
-- Resolution candidates of a scan: the open rows of its cluster and repository.
CREATE INDEX drifts_open_scope ON drifts (cluster, repository) WHERE status = 'open';
-- Listing: keyset pagination walks the primary key backwards and filters; the namespace
-- filter (the most selective one operators use) has its own index. Few indexes on purpose:
-- every index costs each of the thousands of upserts a scan makes, and none on last_seen
-- lets the update of a drift seen again stay a HOT update.
CREATE INDEX drifts_namespace_id ON drifts (namespace, id);
-- Trend and retention.
CREATE INDEX drifts_detected_at ON drifts (detected_at);
CREATE INDEX drifts_resolved_at ON drifts (resolved_at) WHERE status = 'resolved';

-- One row per recorded scan; its primary key makes recording idempotent per scan id.
CREATE TABLE scans (
    scan_id     text        PRIMARY KEY,
    cluster     text        NOT NULL,
    repository  text        NOT NULL,
    revision    text,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz NOT NULL,
    outcome     text        NOT NULL CHECK (outcome IN ('success', 'partial', 'failed')),
    drifts      bigint      NOT NULL,
    warnings    bigint      NOT NULL,
    opened      bigint      NOT NULL DEFAULT 0,
    updated     bigint      NOT NULL DEFAULT 0,
    resolved    bigint      NOT NULL DEFAULT 0,
    errors      jsonb       NOT NULL DEFAULT '[]',
    coverage    jsonb       NOT NULL DEFAULT '[]',
    recorded_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX scans_started ON scans (started_at DESC, scan_id DESC);
CREATE INDEX scans_finished ON scans (finished_at);
