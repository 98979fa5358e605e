-- The live drifts of given objects: what a report that may resolve only the objects it names
-- (a watch's batch of changed objects, `drift_sql::resolvable_only`) reads, one probe per
-- object instead of every live drift of the cluster and repository.
CREATE INDEX drifts_live_object ON drifts (cluster, repository, namespace, resource_name)
    WHERE status <> 'resolved';
