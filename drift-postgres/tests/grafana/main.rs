//! The Grafana dashboard on PostgreSQL (deploy/grafana/drift-postgres.json, docs/grafana.md):
//! every SQL target of every panel, with Grafana's variables and macros expanded as Grafana
//! expands them ([`expand`]), runs as the read-only role of deploy/grafana/grafana-role.sql
//! against a real PostgreSQL seeded through the store's API ([`seed`]), and shows what
//! `GET /stats` and `GET /drifts` answer for the same selection ([`checks`]). The role reads
//! those tables and writes nothing; the provisioning files load both dashboards and hold no
//! password.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod checks;
mod expand;
mod frame;
mod seed;

use std::collections::{BTreeMap, BTreeSet};

use chrono::Duration;
use drift_model::DriftStore;
use drift_model::sink::{DriftFilter, DriftStatus, PageRequest, StoredDrift};
use drift_postgres::PostgresStore;
use drift_testkit_pg::PgServer;
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection};

use crate::expand::{TimeRange, Value};
use crate::frame::{Frame, Target, Variable};

/// The role of grafana-role.sql.
const ROLE: &str = "drift_grafana";

fn server() -> PgServer {
    PgServer::start().expect("start a throwaway PostgreSQL (scripts/install-postgres.sh installs it)")
}

/// A migrated store on a new database, and the database's URL.
async fn store(server: &PgServer) -> (PostgresStore, String) {
    let url = server.create_database().await.expect("create a database");
    (PostgresStore::connect(&url).await.expect("connect and migrate"), url)
}

/// Runs grafana-role.sql as the superuser, as an administrator would with psql.
async fn create_role(url: &str) {
    let path = frame::deploy_file("grafana-role.sql");
    let sql = std::fs::read_to_string(&path).unwrap();
    let mut admin = PgConnection::connect(url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(&mut admin)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// A session of the Grafana role (in UTC, as the checks read times).
async fn grafana(url: &str) -> PgConnection {
    let options: PgConnectOptions = url.parse().unwrap();
    options.username(ROLE).options([("TimeZone", "UTC")]).connect().await.expect("connect as the Grafana role")
}

/// Expands and runs one SQL text of the dashboard.
async fn query(
    conn: &mut PgConnection,
    sql: &str,
    vars: &BTreeMap<&str, Value>,
    range: TimeRange,
    interval: &str,
) -> Frame {
    let expanded = expand::interpolate(sql, vars, interval).and_then(|s| expand::expand_macros(&s, range));
    let expanded = expanded.unwrap_or_else(|e| panic!("expanding {sql:?}: {e}"));
    frame::run(conn, &expanded).await.unwrap_or_else(|e| panic!("running {expanded:?} as {ROLE}: {e}"))
}

/// The options of a query variable, given the variables before it.
async fn options(
    conn: &mut PgConnection,
    var: &Variable,
    vars: &BTreeMap<&str, Value>,
    range: TimeRange,
) -> Vec<String> {
    let f = query(conn, &var.sql, vars, range, "1h").await;
    (0..f.rows.len()).map(|i| f.rows[i][0].clone().expect("an option")).collect()
}

/// Every drift the filter keeps, through the paged listing.
async fn list_all(store: &PostgresStore, filter: &DriftFilter) -> Vec<StoredDrift> {
    let mut out = Vec::new();
    let mut page = PageRequest { limit: 1000, after: None };
    loop {
        let p = store.list(filter, page).await.unwrap();
        out.extend(p.items);
        match p.next {
            Some(next) => page.after = Some(next),
            None => return out,
        }
    }
}

/// A selection of the variables, and the same as a `/drifts` filter.
struct Selection {
    cluster: Value,
    repository: Value,
    filter: DriftFilter,
}

fn single(v: &Value) -> Option<String> {
    match v {
        Value::Picked(p) if p.len() == 1 => Some(p[0].clone()),
        Value::Picked(p) => panic!("the checks model one picked value, not {p:?}"),
        Value::All(_) => None,
    }
}

/// "All" and every single value of each variable, alone and combined, with each variable's
/// options as Grafana lists them (checked against the values the API lists).
async fn selections(
    conn: &mut PgConnection,
    store: &PostgresStore,
    vars: &[Variable],
    range: TimeRange,
) -> Vec<Selection> {
    assert_eq!(vars.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(), ["cluster", "repository"]);
    let distinct = |rows: &[StoredDrift], f: fn(&StoredDrift) -> &str| -> Vec<String> {
        rows.iter().map(f).map(str::to_owned).collect::<BTreeSet<_>>().into_iter().collect()
    };
    let clusters = options(conn, &vars[0], &BTreeMap::new(), range).await;
    let everything = list_all(store, &DriftFilter::default()).await;
    assert_eq!(clusters, distinct(&everything, |r| r.cluster.as_str()), "cluster options");
    let mut picks = vec![(Value::All(clusters.clone()), None)];
    picks.extend(clusters.iter().map(|c| (Value::Picked(vec![c.clone()]), Some(c.clone()))));
    let mut out = Vec::new();
    for (cluster, cluster_filter) in picks {
        let before = BTreeMap::from([("cluster", cluster.clone())]);
        let repos = options(conn, &vars[1], &before, range).await;
        let rows = list_all(store, &DriftFilter { cluster: cluster_filter.clone(), ..Default::default() }).await;
        assert_eq!(repos, distinct(&rows, |r| r.repository.as_str()), "repository options for {cluster:?}");
        let mut repo_picks = vec![Value::All(repos.clone())];
        repo_picks.extend(repos.iter().map(|r| Value::Picked(vec![r.clone()])));
        for repository in repo_picks {
            let filter =
                DriftFilter { cluster: single(&cluster), repository: single(&repository), ..Default::default() };
            out.push(Selection { cluster: cluster.clone(), repository, filter });
        }
    }
    out
}

/// Runs every target for every selection, range and interval; returns the number of queries.
async fn check_every_panel(store: &PostgresStore, url: &str, ranges: &[TimeRange]) -> usize {
    let dashboard = frame::dashboard();
    let targets: Vec<Target> = frame::targets(&dashboard);
    let titles: BTreeSet<&str> = targets.iter().map(|t| t.panel.as_str()).collect();
    assert_eq!(titles, checks::CHECKED.iter().copied().collect(), "panels of the dashboard and panels checked");
    let vars = frame::variables(&dashboard);
    let mut conn = grafana(url).await;
    let mut queries = 0;
    for &range in ranges {
        for sel in selections(&mut conn, store, &vars, range).await {
            let values = BTreeMap::from([("cluster", sel.cluster.clone()), ("repository", sel.repository.clone())]);
            for interval in ["1h", "1d"] {
                let expected = checks::Expected {
                    label: format!(
                        "cluster {:?}, repository {:?}, {range:?}, $__interval {interval}",
                        sel.cluster, sel.repository
                    ),
                    stats: store.stats(&sel.filter, range.to).await.unwrap(),
                    rows: list_all(store, &sel.filter).await,
                    range,
                    interval: expand::parse_interval(interval).unwrap(),
                };
                for t in &targets {
                    let f = query(&mut conn, &t.sql, &values, range, interval).await;
                    checks::check(t, &f, &expected);
                    queries += 1;
                }
            }
        }
    }
    queries
}

#[tokio::test]
async fn every_panel_shows_what_stats_and_drifts_answer_for_each_cluster_and_repository() {
    let server = server();
    let (store, url) = store(&server).await;
    seed::seed(&store).await;
    create_role(&url).await;
    let now = seed::now();
    // The default range (the last 7 days), and a past range that ends before today and
    // starts inside the history.
    let ranges = [
        TimeRange { from: now - Duration::days(7), to: now },
        TimeRange { from: seed::at(-3, 0), to: seed::at(-1, 12) + Duration::milliseconds(500) },
    ];
    let queries = check_every_panel(&store, &url, &ranges).await;
    // The seed reaches what the panels distinguish: two clusters, every status, cluster-scoped
    // objects, drifts that came back, history outside the ranges.
    let stats = store.stats(&DriftFilter::default(), now).await.unwrap();
    assert!(["open", "waived", "resolved"].iter().all(|s| stats.by_status.get(*s) > Some(&0)), "{:?}", stats.by_status);
    assert!(stats.by_namespace.contains_key(""), "a cluster-scoped drift is open");
    assert!(stats.by_cluster.len() >= 2, "drifts are open in two clusters (the fleet panels): {:?}", stats.by_cluster);
    assert!(stats.p95_time_to_resolve_seconds > stats.mean_time_to_resolve_seconds);
    let all = list_all(&store, &DriftFilter::default()).await;
    assert!(all.iter().any(|r| r.detected_at < ranges[0].from), "history before the default range");
    let gw = all.iter().filter(|r| r.resource_name == "gw").count();
    assert_eq!(gw, 3, "the gateway's port drifted three times");
    let waived = all.iter().filter(|r| r.status == DriftStatus::Waived).count();
    assert_eq!(waived, 1);
    println!("{queries} panel queries checked");
}

#[tokio::test]
async fn every_panel_runs_on_a_database_without_drifts() {
    let server = server();
    let (store, url) = store(&server).await;
    create_role(&url).await;
    let now = seed::now();
    let queries = check_every_panel(&store, &url, &[TimeRange { from: now - Duration::days(7), to: now }]).await;
    assert_eq!(
        queries,
        2 * frame::targets(&frame::dashboard()).len(),
        "one selection (All, with no options), two intervals"
    );
}

/// The SQLSTATE of a failed statement.
fn sqlstate(result: Result<Frame, sqlx::Error>, statement: &str) -> String {
    match result {
        Ok(_) => panic!("{ROLE} ran {statement:?}"),
        Err(e) => e
            .as_database_error()
            .and_then(|d| d.code())
            .map(|c| c.into_owned())
            .unwrap_or_else(|| panic!("{statement}: {e}")),
    }
}

#[tokio::test]
async fn the_grafana_role_reads_the_panels_tables_and_writes_nothing() {
    let server = server();
    let (store, url) = store(&server).await;
    seed::seed(&store).await;
    create_role(&url).await;
    create_role(&url).await; // a second run changes nothing and does not fail
    let mut conn = grafana(&url).await;
    let setting = |f: Frame| f.rows[0][0].clone().unwrap();
    assert_eq!(setting(frame::run(&mut conn, "SHOW default_transaction_read_only").await.unwrap()), "on");
    assert_eq!(setting(frame::run(&mut conn, "SHOW statement_timeout").await.unwrap()), "30s");
    for table in ["drifts", "drift_counts", "drift_daily"] {
        frame::run(&mut conn, &format!("SELECT count(*) FROM {table}"))
            .await
            .unwrap_or_else(|e| panic!("{table}: {e}"));
    }
    let before = list_all(&store, &DriftFilter::default()).await;

    let writes = [
        "INSERT INTO drifts (detected_at) VALUES (now())",
        "UPDATE drifts SET status = 'resolved'",
        "DELETE FROM drifts",
        "TRUNCATE drifts",
        "UPDATE drift_counts SET n = 0",
        "DELETE FROM drift_daily",
        "CREATE TABLE public.grafana_was_here (a int)",
        "CREATE TEMPORARY TABLE grafana_was_here (a int)",
    ];
    // Refused by the read-only session ...
    for w in writes {
        assert_eq!(sqlstate(frame::run(&mut conn, w).await, w), "25006", "{w}");
    }
    // ... and by the privileges when the session asks to write.
    frame::run(&mut conn, "SET default_transaction_read_only = off").await.unwrap();
    for w in &writes[..7] {
        assert_eq!(sqlstate(frame::run(&mut conn, w).await, w), "42501", "{w}");
    }
    for table in
        ["scans", "events", "deliveries", "notified", "notifier_cursors", "decisions", "audit", "_sqlx_migrations"]
    {
        let q = format!("SELECT * FROM {table}");
        assert_eq!(sqlstate(frame::run(&mut conn, &q).await, &q), "42501", "{q}");
    }
    // PostgreSQL lets every role change its own session defaults (so the read-only default is
    // a second line, the privileges the first), not its attributes.
    for alter in [
        "ALTER ROLE drift_grafana CREATEROLE",
        "ALTER ROLE drift_grafana SUPERUSER",
        "ALTER ROLE drift_grafana BYPASSRLS",
    ] {
        assert_eq!(sqlstate(frame::run(&mut conn, alter).await, alter), "42501", "{alter}");
    }
    assert_eq!(list_all(&store, &DriftFilter::default()).await, before, "nothing changed");
}

#[test]
fn the_provisioning_files_load_both_dashboards_and_hold_no_password() {
    let yaml = |name: &str| -> serde_json::Value {
        let path = frame::deploy_file(name);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let sources = yaml("provisioning/datasources/drift-postgres.yaml");
    assert_eq!(sources["apiVersion"], 1);
    let ds = &sources["datasources"][0];
    assert!(matches!(ds["type"].as_str(), Some("postgres" | "grafana-postgresql-datasource")), "{ds}");
    assert_eq!(ds["user"], ROLE, "Grafana connects as the role of grafana-role.sql");
    let role_sql = std::fs::read_to_string(frame::deploy_file("grafana-role.sql")).unwrap();
    assert!(role_sql.contains(&format!("CREATE ROLE {ROLE} LOGIN")));
    let lower = role_sql.to_lowercase();
    assert!(
        !["password '", "password e'", "password $"].iter().any(|p| lower.contains(p)),
        "no password in the role's SQL"
    );
    assert!(ds["jsonData"]["database"].is_string(), "the database under jsonData");
    // Every password-like value comes from Grafana's environment.
    fn secrets<'a>(v: &'a serde_json::Value, out: &mut Vec<(String, &'a serde_json::Value)>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    if k.to_lowercase().contains("password") {
                        out.push((k.clone(), v));
                    }
                    secrets(v, out);
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| secrets(v, out)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    secrets(&sources, &mut found);
    assert_eq!(found.len(), 1, "{found:?}");
    let password = found[0].1.as_str().unwrap();
    assert!(
        password.starts_with("$__env{") && password.ends_with('}') && !password[7..].contains(['$', '{']),
        "{password}"
    );

    let providers = yaml("provisioning/dashboards/drift.yaml");
    let p = &providers["providers"][0];
    assert_eq!((p["type"].as_str(), p["options"]["path"].is_string()), (Some("file"), true), "{p}");
    // Both dashboards sit in deploy/grafana, with distinct uids, for the provider's folder.
    let mut uids = BTreeSet::new();
    for name in ["drift-dashboard.json", "drift-postgres.json"] {
        let d: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(frame::deploy_file(name)).unwrap()).unwrap();
        assert!(uids.insert(d["uid"].as_str().unwrap().to_owned()), "{name}: uid");
    }

    let d = frame::dashboard();
    let schema = d["schemaVersion"].as_i64().unwrap();
    assert!((37..=41).contains(&schema), "schemaVersion {schema} of Grafana 10 or 11");
    let ds_var = d["templating"]["list"].as_array().unwrap().iter().find(|v| v["type"] == "datasource").unwrap();
    assert_eq!(
        (ds_var["name"].as_str(), ds_var["query"].as_str()),
        (Some("datasource"), Some("grafana-postgresql-datasource"))
    );
    for panel in d["panels"].as_array().unwrap() {
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{}", panel["title"]);
        for t in panel["targets"].as_array().unwrap() {
            assert_eq!(t["datasource"]["uid"], "${datasource}", "{}", panel["title"]);
            assert!(!t["rawSql"].as_str().unwrap().contains(';'), "one statement per target: {}", panel["title"]);
        }
    }
    // The seed's top row: Total drifts, Open, CRITICAL, HIGH.
    let mut top: Vec<(i64, &str, &str)> = d["panels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["gridPos"]["y"] == 0)
        .map(|p| (p["gridPos"]["x"].as_i64().unwrap(), p["title"].as_str().unwrap(), p["type"].as_str().unwrap()))
        .collect();
    top.sort();
    let top: Vec<(&str, &str)> = top.into_iter().map(|(_, t, k)| (t, k)).collect();
    assert_eq!(top, [("Total drifts", "stat"), ("Open", "stat"), ("CRITICAL", "stat"), ("HIGH", "stat")]);
}
