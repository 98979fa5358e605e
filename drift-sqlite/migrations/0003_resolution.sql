-- How a resolved drift went away, and the digest of Git's object when the drift was last seen
-- (drift_core::ScanReport::resolution compares it with the resolving scan's digest).
ALTER TABLE drifts ADD COLUMN resolution TEXT
    CHECK (resolution IN ('reverted', 'accepted', 'removed'));
ALTER TABLE drifts ADD COLUMN desired_digest TEXT;
