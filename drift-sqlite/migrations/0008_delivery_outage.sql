-- Retries that outlast an outage (issue 31, item 3): a delivery keeps retrying for `retry_for`
-- from its first failure (`failing_since`, unix microseconds like the other times), then is
-- parked with a reason: `outage` (failures that may pass; probed, and put back in the queue
-- once the receiver takes a message again) or `refused` (a failure that will not pass; a person
-- requeues it). Deliveries parked before this version were parked after a count of attempts:
-- they count as an outage, so the first probe tries them again (a refusal parks them as such).
ALTER TABLE deliveries ADD COLUMN failing_since INTEGER;
ALTER TABLE deliveries ADD COLUMN park_reason TEXT CHECK (park_reason IN ('outage', 'refused'));
UPDATE deliveries SET park_reason = 'outage' WHERE status = 'parked';
