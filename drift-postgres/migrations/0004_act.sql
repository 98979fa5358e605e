-- Acting on drift (docs/notifications.md, docs/decisions.md): waivers, acknowledgements, the
-- outbox of events written with each report, their deliveries to notifiers, decisions and the
-- audit trail.

-- A waived drift is still seen and still recorded, but not counted as open. "Live" rows (open
-- or waived) are the ones a report updates or resolves: at most one per fingerprint.
ALTER TABLE drifts DROP CONSTRAINT drifts_status_check;
ALTER TABLE drifts ADD CONSTRAINT drifts_status_check CHECK (status IN ('open', 'waived', 'resolved'));
ALTER TABLE drifts ADD COLUMN waived_until timestamptz;
ALTER TABLE drifts ADD COLUMN acknowledged_at timestamptz;
-- Who waived it: the token's name or CLI user of an accept decision, `git:<owner>` for a waiver in Git.
ALTER TABLE drifts ADD COLUMN waived_by text;
ALTER TABLE drifts ADD CONSTRAINT drifts_waived_until CHECK ((status = 'waived') = (waived_until IS NOT NULL));

DROP INDEX drifts_open_fingerprint;
CREATE UNIQUE INDEX drifts_live_fingerprint ON drifts (fingerprint) WHERE status <> 'resolved';
DROP INDEX drifts_open_scope;
CREATE INDEX drifts_live_scope ON drifts (cluster, repository) WHERE status <> 'resolved';
-- Whether a drift opened by a report was seen before (a `reopened` event).
CREATE INDEX drifts_resolved_fingerprint ON drifts (fingerprint) WHERE status = 'resolved';
-- Waivers that end.
CREATE INDEX drifts_waived_until ON drifts (waived_until) WHERE status = 'waived';
-- The waived drifts of a scope (a report looks for those waived in Git).
CREATE INDEX drifts_waived_scope ON drifts (cluster, repository) WHERE status = 'waived';

-- The outbox: one row per event, written in the transaction of the report (or of the decision,
-- the waiver expiry, the reminder round) that caused it. `id` is the stable idempotency key.
CREATE TABLE events (
    seq      bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id       text        NOT NULL UNIQUE,
    kind     text        NOT NULL,
    batch    text        NOT NULL,
    at       timestamptz NOT NULL,
    drift_id bigint,
    notifier text,
    payload  jsonb       NOT NULL
);
CREATE INDEX events_at ON events (at);

-- How far each notifier has routed the outbox (events after `seq` are not routed yet). The
-- row is locked while a process routes, so two processes never route the same events.
CREATE TABLE notifier_cursors (
    notifier text   PRIMARY KEY,
    seq      bigint NOT NULL
);

-- One event for one notifier. A worker leases pending deliveries (`locked_by`,
-- `locked_until`) before it sends them; another worker skips leased rows.
CREATE TABLE deliveries (
    event_seq    bigint      NOT NULL,
    notifier     text        NOT NULL,
    batch        text        NOT NULL,
    drift_id     bigint,
    kind         text        NOT NULL,
    status       text        NOT NULL CHECK (status IN ('pending', 'sent', 'parked', 'skipped')),
    attempts     bigint      NOT NULL DEFAULT 0,
    due_at       timestamptz NOT NULL,
    locked_by    text,
    locked_until timestamptz,
    last_error   text,
    sent_at      timestamptz,
    PRIMARY KEY (event_seq, notifier)
);
CREATE INDEX deliveries_due ON deliveries (notifier, due_at) WHERE status = 'pending';
CREATE INDEX deliveries_drift ON deliveries (drift_id, event_seq);
CREATE INDEX deliveries_parked ON deliveries (event_seq) WHERE status = 'parked';

-- When a notifier last told about a drift (reminders; a `resolved` is sent only for drifts the
-- notifier announced).
CREATE TABLE notified (
    drift_id bigint      NOT NULL,
    notifier text        NOT NULL,
    last_at  timestamptz NOT NULL,
    PRIMARY KEY (drift_id, notifier)
);

-- Human decisions. The similarity key (manager, namespace, type, band of the day) is kept with
-- each decision, for the learned classification.
CREATE TABLE decisions (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    drift_id   bigint      NOT NULL,
    action     text        NOT NULL CHECK (action IN ('acknowledge', 'accept', 'reject')),
    comment    text,
    actor      text        NOT NULL,
    decided_at timestamptz NOT NULL,
    expires_at timestamptz,
    manager    text        NOT NULL,
    namespace  text        NOT NULL,
    drift_type text        NOT NULL,
    band       bigint      NOT NULL
);
CREATE INDEX decisions_drift ON decisions (drift_id, id);
CREATE INDEX decisions_similar ON decisions (manager, namespace, drift_type, band);

-- The audit trail: decisions, waiver ends, notification attempts, scans. Never a secret.
CREATE TABLE audit (
    id       bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at       timestamptz NOT NULL,
    action   text        NOT NULL,
    actor    text        NOT NULL,
    drift_id bigint,
    scan_id  text,
    notifier text,
    event_id text,
    status   text        NOT NULL,
    attempts bigint,
    detail   jsonb       NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_drift ON audit (drift_id, id);
CREATE INDEX audit_at ON audit (at);
