//! What Grafana does to a panel's SQL before PostgreSQL sees it, written from Grafana's
//! documentation of its PostgreSQL data source (query editor: macros, template variables) and
//! of dashboard variables:
//!
//! 1. the browser replaces template variables: `$name`, `${name}` and `[[name]]`; a variable
//!    that is multi-value or has an "All" option becomes its values, each quoted as an SQL
//!    string literal (`'` doubled) and joined with `,`; "All" (without a custom all value) is
//!    every option of the variable; `$__interval` is the panel's interval (`1h`) and
//!    `$__interval_ms` the same in milliseconds. Other `$__` names are left to the server;
//! 2. the server expands the macros `$__name(args)` (arguments split at `,` and trimmed, no
//!    parentheses inside), with times in UTC as RFC 3339 with nanoseconds (Go's
//!    `time.RFC3339Nano`: trailing zeros of the fraction dropped) and intervals in seconds as
//!    Go prints a float64 with `%v`:
//!    - `$__time(c)` → `c AS "time"`, `$__timeEpoch(c)` → `extract(epoch from c) as "time"`;
//!    - `$__timeFilter(c)` → `c BETWEEN 'FROM' AND 'TO'`, `$__timeFrom()` → `'FROM'`,
//!      `$__timeTo()` → `'TO'`;
//!    - `$__timeGroup(c, '1h'[, fill])` → `floor(extract(epoch from c)/3600)*3600` (the fill
//!      value only tells Grafana how to fill missing points of the result);
//!      `$__timeGroupAlias(...)` adds ` AS "time"`, and so does a `$__timeGroup(...)` followed
//!      directly by `,` (the form of Grafana before 5.3);
//!    - `$__unixEpochFilter(c)` → `c >= FROM AND c <= TO` in Unix seconds,
//!      `$__unixEpochFrom()`/`$__unixEpochTo()` → those seconds;
//!    - `$__unixEpochGroup(c, '1h')` → `floor((c)/3600)*3600`, with `Alias` as above.
//!
//! TimescaleDB's `time_bucket` form is not modelled: the data source of deploy/grafana has
//! `timescaledb: false`.

use std::collections::BTreeMap;

use chrono::{DateTime, Timelike, Utc};

/// The dashboard's time range.
#[derive(Debug, Clone, Copy)]
pub struct TimeRange {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

/// The value of a template variable as a user picked it.
#[derive(Debug, Clone)]
pub enum Value {
    /// "All": every option of the variable.
    All(Vec<String>),
    /// Some options.
    Picked(Vec<String>),
}

impl Value {
    /// The values the query sees.
    pub fn values(&self) -> &[String] {
        match self {
            Value::All(v) | Value::Picked(v) => v,
        }
    }
}

/// A multi-value (or "All") variable formatted for SQL: each value quoted, joined with `,`.
pub fn sql_values(values: &[String]) -> String {
    values.iter().map(|v| format!("'{}'", v.replace('\'', "''"))).collect::<Vec<_>>().join(",")
}

/// Step 1: template variables of `vars` (all multi-value with "All") and `$__interval`.
/// A `$name` that is neither a known variable nor a `$__` name is an error (a typo in the
/// dashboard), where Grafana would leave it as it is.
pub fn interpolate(sql: &str, vars: &BTreeMap<&str, Value>, interval: &str) -> Result<String, String> {
    let interval_ms = parse_interval(interval)? * 1000.0;
    let lookup = |name: &str| -> Option<Result<String, String>> {
        match name {
            "__interval" => Some(Ok(interval.to_owned())),
            "__interval_ms" => Some(Ok(format!("{interval_ms}"))),
            _ if name.starts_with("__") => None,
            _ => {
                Some(vars.get(name).map(|v| sql_values(v.values())).ok_or_else(|| format!("unknown variable ${name}")))
            }
        }
    };
    let mut out = String::with_capacity(sql.len());
    let mut rest = sql;
    while let Some(i) = rest.find(['$', '[']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        let (name, len) = if let Some(inner) = tail.strip_prefix("${") {
            let end = inner.find('}').ok_or("unclosed ${")?;
            let name = &inner[..end];
            if name.contains([':', '.']) {
                return Err(format!("variable format or field ${{{name}}} is not modelled"));
            }
            (name, end + 3)
        } else if let Some(inner) = tail.strip_prefix("[[") {
            match inner.find("]]") {
                Some(end) if inner[..end].chars().all(is_word) && end > 0 => (&inner[..end], end + 4),
                _ => ("", 1),
            }
        } else if let Some(inner) = tail.strip_prefix('$') {
            let n = inner.find(|c: char| !is_word(c)).unwrap_or(inner.len());
            (&inner[..n], 1 + n)
        } else {
            ("", 1)
        };
        match (!name.is_empty()).then(|| lookup(name)).flatten() {
            Some(value) => out.push_str(&value?),
            None => out.push_str(&tail[..len]),
        }
        rest = &tail[len..];
    }
    out.push_str(rest);
    Ok(out)
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Step 2: the macros of Grafana's PostgreSQL data source.
pub fn expand_macros(sql: &str, range: TimeRange) -> Result<String, String> {
    let mut out = String::with_capacity(sql.len());
    let mut rest = sql;
    let mut offset = 0;
    while let Some(i) = rest.find('$') {
        let tail = &rest[i + 1..];
        let n = tail.find(|c: char| !is_word(c)).unwrap_or(tail.len());
        let (name, after) = (&tail[..n], &tail[n..]);
        let Some(args_end) = after.strip_prefix('(').and_then(|a| a.find(')')) else {
            out.push_str(&rest[..i + 1]);
            rest = tail;
            offset += i + 1;
            continue;
        };
        out.push_str(&rest[..i]);
        let whole_len = 1 + n + 1 + args_end + 1;
        let whole = &rest[i..i + whole_len];
        let args: Vec<&str> = after[1..1 + args_end].split(',').map(|a| a.trim_matches(' ')).collect();
        // Grafana looks at the character after the first occurrence of the same text.
        let first = sql.find(whole).unwrap_or(offset + i) + whole.len();
        let name = if name == "__timeGroup" && sql[first..].starts_with(',') { "__timeGroupAlias" } else { name };
        out.push_str(&macro_value(name, &args, range)?);
        rest = &rest[i + whole_len..];
        offset += i + whole_len;
    }
    out.push_str(rest);
    Ok(out)
}

fn macro_value(name: &str, args: &[&str], range: TimeRange) -> Result<String, String> {
    let column = || match args.first() {
        Some(c) if !c.is_empty() => Ok(*c),
        _ => Err(format!("missing time column argument for macro {name}")),
    };
    let group = |alias: bool, epoch: bool| -> Result<String, String> {
        if args.len() < 2 {
            return Err(format!("macro {name} needs time column and interval and optional fill value"));
        }
        let seconds = go_float(parse_interval(args[1].trim_matches('\''))?);
        let expr = if epoch {
            format!("floor(({})/{seconds})*{seconds}", args[0])
        } else {
            format!("floor(extract(epoch from {})/{seconds})*{seconds}", args[0])
        };
        Ok(if alias { format!("{expr} AS \"time\"") } else { expr })
    };
    let (from, to) = (rfc3339_nano(range.from), rfc3339_nano(range.to));
    Ok(match name {
        "__time" => format!("{} AS \"time\"", column()?),
        "__timeEpoch" => format!("extract(epoch from {}) as \"time\"", column()?),
        "__timeFilter" => format!("{} BETWEEN '{from}' AND '{to}'", column()?),
        "__timeFrom" => format!("'{from}'"),
        "__timeTo" => format!("'{to}'"),
        "__timeGroup" => group(false, false)?,
        "__timeGroupAlias" => group(true, false)?,
        "__unixEpochFilter" => {
            let c = column()?;
            format!("{c} >= {} AND {c} <= {}", range.from.timestamp(), range.to.timestamp())
        }
        "__unixEpochFrom" => range.from.timestamp().to_string(),
        "__unixEpochTo" => range.to.timestamp().to_string(),
        "__unixEpochGroup" => group(false, true)?,
        "__unixEpochGroupAlias" => group(true, true)?,
        _ => return Err(format!("unknown macro \"{name}\"")),
    })
}

/// An interval of Grafana (`30s`, `5m`, `1h`, `1d`, `1w`, `500ms`): seconds.
pub fn parse_interval(text: &str) -> Result<f64, String> {
    let digits = text.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let n: f64 = number.parse().map_err(|_| format!("error parsing interval {text}"))?;
    let unit_seconds = match unit {
        "ms" => 0.001,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        "w" => 7.0 * 86400.0,
        _ => return Err(format!("interval {text}: unit {unit:?} is not modelled")),
    };
    Ok(n * unit_seconds)
}

/// A float64 as Go's `%v` prints it (`strconv.FormatFloat(f, 'g', -1, 64)`): the shortest
/// representation, with an exponent (`2.592e+06`) when the decimal exponent is below -4 or
/// 6 and more.
pub fn go_float(x: f64) -> String {
    let sci = format!("{x:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if (-4..6).contains(&exponent) {
        format!("{x}")
    } else {
        format!("{mantissa}e{}{:02}", if exponent < 0 { '-' } else { '+' }, exponent.abs())
    }
}

/// Go's `time.RFC3339Nano` of a UTC time: `2006-01-02T15:04:05.999999999Z`, the fraction
/// without trailing zeros and left out when zero.
pub fn rfc3339_nano(t: DateTime<Utc>) -> String {
    let base = t.format("%Y-%m-%dT%H:%M:%S").to_string();
    let nanos = t.nanosecond() % 1_000_000_000;
    if nanos == 0 {
        return format!("{base}Z");
    }
    let fraction = format!("{nanos:09}");
    format!("{base}.{}Z", fraction.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn range() -> TimeRange {
        TimeRange {
            from: Utc.with_ymd_and_hms(2026, 11, 13, 12, 0, 0).unwrap(),
            to: Utc.with_ymd_and_hms(2026, 11, 20, 12, 0, 0).unwrap() + chrono::Duration::milliseconds(250),
        }
    }

    #[test]
    fn time_macros_expand_as_grafanas_postgres_data_source_does() {
        let sql = "SELECT $__timeGroupAlias(detected_at, '1h', 0), $__timeGroup(t,'1d'), x FROM d \
                   WHERE $__timeFilter(detected_at) AND a >= $__timeFrom() AND a <= $__timeTo() AND $__unixEpochFilter(e)";
        assert_eq!(
            expand_macros(sql, range()).unwrap(),
            "SELECT floor(extract(epoch from detected_at)/3600)*3600 AS \"time\", \
             floor(extract(epoch from t)/86400)*86400 AS \"time\", x FROM d \
             WHERE detected_at BETWEEN '2026-11-13T12:00:00Z' AND '2026-11-20T12:00:00.25Z' \
             AND a >= '2026-11-13T12:00:00Z' AND a <= '2026-11-20T12:00:00.25Z' AND e >= 1794571200 AND e <= 1795176000"
        );
        assert_eq!(
            expand_macros("$__timeGroup(t, '5m') ORDER BY 1", range()).unwrap(),
            "floor(extract(epoch from t)/300)*300 ORDER BY 1"
        );
        assert!(expand_macros("$__nope(x)", range()).unwrap_err().contains("unknown macro"));
        assert!(expand_macros("$__timeGroup(t)", range()).is_err());
        assert_eq!(expand_macros("'$1' $ x", range()).unwrap(), "'$1' $ x");
    }

    #[test]
    fn large_intervals_are_printed_as_go_prints_floats() {
        assert_eq!(go_float(3600.0), "3600");
        assert_eq!(go_float(604800.0), "604800");
        assert_eq!(go_float(2592000.0), "2.592e+06");
        assert_eq!(go_float(0.5), "0.5");
    }

    #[test]
    fn multi_value_variables_are_quoted_and_all_is_every_option() {
        let vars = BTreeMap::from([
            ("cluster", Value::All(vec!["homelab".into(), "prod".into()])),
            ("repository", Value::Picked(vec!["ops'lab".into()])),
        ]);
        assert_eq!(
            interpolate(
                "c IN ($cluster) AND r = ANY(ARRAY[${repository}]) AND [[cluster]] $__timeFilter(x) $__interval",
                &vars,
                "1h"
            )
            .unwrap(),
            "c IN ('homelab','prod') AND r = ANY(ARRAY['ops''lab']) AND 'homelab','prod' $__timeFilter(x) 1h"
        );
        assert_eq!(interpolate("$__interval_ms", &vars, "1d").unwrap(), "86400000");
        assert!(interpolate("$clustr", &vars, "1h").is_err());
        assert_eq!(interpolate("x[1]", &vars, "1h").unwrap(), "x[1]");
        let empty = BTreeMap::from([("cluster", Value::All(vec![]))]);
        assert_eq!(interpolate("ARRAY[$cluster]", &empty, "1h").unwrap(), "ARRAY[]");
    }
}
