-- The history's listings filtered on status = 'resolved' (issue 35, docs/benchmarks.md "History
-- at fleet size"): they merge each partition's rows in id order, and in drifts_live, where
-- nearly every row is live, the walk of its id index rejected every row before it ended (30 ms
-- at 60,000 live rows). This index holds only the resolved rows that wait there for their
-- month's partition (usually none), so that walk ends at once. On drifts_live only: the months
-- hold resolved rows alone.
CREATE INDEX drifts_live_resolved_id ON drifts_live (id) WHERE status = 'resolved';
