//! The dashboard file as data (its panels' SQL targets and its template variables), and the
//! result of one query as Grafana receives it: columns and text values, read through
//! PostgreSQL's simple query protocol, the way Grafana sends a panel's SQL (one statement,
//! no parameters).

use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};
use serde_json::Value;
use sqlx::{Column, PgConnection, Row, TypeInfo};

/// One SQL query of a panel.
#[derive(Debug, Clone)]
pub struct Target {
    pub panel: String,
    pub ref_id: String,
    pub format: String,
    pub sql: String,
}

/// A query variable of the dashboard.
#[derive(Debug, Clone)]
pub struct Variable {
    pub name: String,
    pub sql: String,
}

/// The path of a file of deploy/grafana.
pub fn deploy_file(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/grafana").join(name)
}

/// The dashboard JSON.
pub fn dashboard() -> Value {
    let path = deploy_file("drift-postgres.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// Every SQL target of every panel (rows' nested panels included), in file order.
pub fn targets(dashboard: &Value) -> Vec<Target> {
    let mut out = Vec::new();
    let mut panels: Vec<&Value> = dashboard["panels"].as_array().expect("panels").iter().collect();
    while let Some(panel) = panels.first().copied() {
        panels.remove(0);
        if let Some(nested) = panel["panels"].as_array() {
            panels.extend(nested.iter());
        }
        let title = panel["title"].as_str().expect("every panel has a title").to_owned();
        for t in panel["targets"].as_array().into_iter().flatten() {
            let sql = t["rawSql"].as_str().unwrap_or_else(|| panic!("panel {title}: a target without rawSql"));
            out.push(Target {
                panel: title.clone(),
                ref_id: t["refId"].as_str().unwrap_or("A").to_owned(),
                format: t["format"].as_str().unwrap_or("table").to_owned(),
                sql: sql.to_owned(),
            });
        }
    }
    out
}

/// The query variables, in the order Grafana resolves them (file order).
pub fn variables(dashboard: &Value) -> Vec<Variable> {
    dashboard["templating"]["list"]
        .as_array()
        .expect("templating.list")
        .iter()
        .filter(|v| v["type"] == "query")
        .map(|v| {
            let name = v["name"].as_str().expect("a variable name").to_owned();
            assert_eq!(
                (v["multi"].as_bool(), v["includeAll"].as_bool()),
                (Some(true), Some(true)),
                "variable {name}: multi-value with All"
            );
            assert!(v["allValue"].is_null(), "variable {name}: no custom all value (All is every option)");
            let sql = v["query"].as_str().or(v["query"]["rawSql"].as_str()).expect("a variable's SQL").to_owned();
            Variable { name, sql }
        })
        .collect()
}

/// A query's result: column names and types, and each value as PostgreSQL's text.
#[derive(Debug, Clone)]
pub struct Frame {
    pub columns: Vec<String>,
    pub types: Vec<String>,
    pub rows: Vec<Vec<Option<String>>>,
}

/// Runs one statement through the simple query protocol.
pub async fn run(conn: &mut PgConnection, sql: &str) -> Result<Frame, sqlx::Error> {
    let rows = sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned())).fetch_all(&mut *conn).await?;
    let mut frame = Frame { columns: Vec::new(), types: Vec::new(), rows: Vec::new() };
    if let Some(first) = rows.first() {
        frame.columns = first.columns().iter().map(|c| c.name().to_owned()).collect();
        frame.types = first.columns().iter().map(|c| c.type_info().name().to_owned()).collect();
    }
    for row in &rows {
        let values = (0..row.columns().len())
            .map(|i| row.try_get_unchecked::<Option<String>, _>(i))
            .collect::<Result<_, _>>()?;
        frame.rows.push(values);
    }
    Ok(frame)
}

impl Frame {
    fn index(&self, column: &str) -> usize {
        self.columns
            .iter()
            .position(|c| c == column)
            .unwrap_or_else(|| panic!("no column {column:?} in {:?}", self.columns))
    }

    /// The text of a column of a row.
    pub fn text(&self, row: usize, column: &str) -> Option<&str> {
        self.rows[row][self.index(column)].as_deref()
    }

    /// A number column (integer, numeric or float) of a row; `None` for NULL.
    pub fn float(&self, row: usize, column: &str) -> Option<f64> {
        self.text(row, column).map(|t| t.parse().unwrap_or_else(|_| panic!("{column}: {t:?} is not a number")))
    }

    /// An integer column of a row (NULL is an error).
    pub fn int(&self, row: usize, column: &str) -> i64 {
        let t = self.text(row, column).unwrap_or_else(|| panic!("{column} is NULL"));
        t.parse().unwrap_or_else(|_| panic!("{column}: {t:?} is not an integer"))
    }

    /// A time column: a timestamp with time zone (the session is in UTC) or Unix seconds, as
    /// Grafana reads a `time` column.
    pub fn time(&self, row: usize, column: &str) -> DateTime<Utc> {
        let t = self.text(row, column).unwrap_or_else(|| panic!("{column} is NULL"));
        if let Ok(seconds) = t.parse::<f64>() {
            return Utc.timestamp_opt(seconds as i64, 0).single().expect("a time in range");
        }
        if let Ok(at) = DateTime::parse_from_str(t, "%Y-%m-%d %H:%M:%S%.f%#z") {
            return at.with_timezone(&Utc);
        }
        NaiveDateTime::parse_from_str(t, "%Y-%m-%d %H:%M:%S%.f")
            .unwrap_or_else(|e| panic!("{column}: {t:?}: {e}"))
            .and_utc()
    }
}
