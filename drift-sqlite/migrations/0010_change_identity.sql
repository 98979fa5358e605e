-- The person behind a change (issue 34, item 5): who sent the write a drift's field manager
-- names, joined from the Kubernetes audit log. A JSON object (username, groups, source_ips,
-- user_agent, verb, audit_id, request_time, changed_at); it applies while the drift's
-- changed_at equals its changed_at, so a later change of the field reads back without it.
ALTER TABLE drifts ADD COLUMN changed_by_user TEXT;
