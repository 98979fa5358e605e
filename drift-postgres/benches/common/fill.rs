//! A year of drift history written by PostgreSQL itself (`generate_series`), for the benchmarks:
//! as of `drift_testkit::store_bench::now()`, 2% of the rows open, the rest resolved after 1
//! minute to 7 days; 3 clusters, 10 repositories, 200 namespaces, 8 kinds, 10 types, 4
//! severities. The triggers keep the rollups.

use drift_testkit::store_bench::now;
use sqlx::PgPool;

/// Inserts `rows` rows of history into `drifts`.
pub async fn fill(pool: &PgPool, rows: i64) {
    sqlx::query(
        "INSERT INTO drifts (detected_at, last_seen, occurrences, repository, namespace, resource_kind, \
           resource_name, drift_type, severity, git_value, cluster_value, status, resolved_at, decision_source, \
           recommended_action, cluster, api_group, path, fingerprint, changed_by, changed_at, classification) \
         SELECT d, d + interval '5 minutes' * (g % 12), 1 + g % 12, 'repo-' || (g % 10), 'ns-' || (g % 200), \
           (ARRAY['Deployment','Service','ConfigMap','Secret','StatefulSet','DaemonSet','Ingress','Job'])[1 + g % 8], \
           'app-' || (g % 5000), \
           (ARRAY['service_port_drift','image_tag_drift','resource_limit_drift','resource_request_drift', \
             'replicas_drift','configmap_drift','secret_drift','missing_resource','spec_drift', \
             'metadata_drift'])[1 + (g / 8) % 10], \
           (ARRAY['LOW','MEDIUM','HIGH','CRITICAL'])[1 + (g / 3) % 4], '\"git\"'::jsonb, to_jsonb(g % 100), \
           CASE WHEN g % 50 = 0 THEN 'open' ELSE 'resolved' END, \
           CASE WHEN g % 50 = 0 THEN NULL ELSE d + interval '1 minute' * (1 + (g * 7919) % 10080) END, \
           'scanner', 'suggest_revert', 'cluster-' || (g % 3), 'apps', 'spec.replicas', \
           md5(g::text) || md5((g + 1)::text), 'kubectl-edit', d, 'manual_change' \
         FROM (SELECT g, $1::timestamptz - interval '365 days' + interval '365 days' * g / $2::bigint AS d \
               FROM generate_series(1, $2::bigint) AS g) AS s",
    )
    .bind(now())
    .bind(rows)
    .execute(pool)
    .await
    .unwrap();
}
