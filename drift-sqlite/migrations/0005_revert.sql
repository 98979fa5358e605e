-- Remediation (issue 13): each live drift keeps the RFC 6902 patch that puts its field back to
-- Git's value, and the kubectl command that sends it (JSON: {"patch": [...], "command": "..."}),
-- as the last scan made them. NULL for a missing object, a Secret, or a comparator without one.
ALTER TABLE drifts ADD COLUMN revert TEXT;
