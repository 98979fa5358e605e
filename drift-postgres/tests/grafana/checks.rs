//! What each panel must show, from what the store's read side answers for the same selection
//! (`DriftStore::stats` is `GET /stats`, `DriftStore::list` is `GET /drifts`). A panel whose
//! title has no check here fails the test: a new panel gets a check with it.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, Utc};
use drift_model::sink::{DriftStats, DriftStatus, StoredDrift};

use crate::expand::TimeRange;
use crate::frame::{Frame, Target};

/// The titles of the panels checked here.
pub const CHECKED: &[&str] = &[
    "Total drifts",
    "Open",
    "CRITICAL",
    "HIGH",
    "Open by repository",
    "Open by namespace",
    "Open by type",
    "Drifts over time",
    "7-day trend",
    "Time to resolve",
    "Most drifting objects",
    "Drifts",
    "Worst clusters",
    "Open by cluster",
    "Open by cluster and namespace",
];

/// What the API answers for one selection of the dashboard's variables and time range.
#[derive(Debug)]
pub struct Expected {
    /// The selection, for messages.
    pub label: String,
    /// `GET /stats` with the selection as a filter, as of the end of the time range.
    pub stats: DriftStats,
    /// Every drift `GET /drifts` lists with that filter.
    pub rows: Vec<StoredDrift>,
    pub range: TimeRange,
    /// `$__interval` in seconds.
    pub interval: f64,
}

/// Checks one target's result.
pub fn check(t: &Target, f: &Frame, e: &Expected) {
    let ctx = format!("panel {:?} ({}) for {}", t.panel, t.ref_id, e.label);
    let s = &e.stats;
    let open = |m: &BTreeMap<String, i64>, k: &str| m.get(k).copied().unwrap_or(0);
    match t.panel.as_str() {
        "Total drifts" => assert_eq!(single(f, "total", &ctx), s.by_status.values().sum::<i64>(), "{ctx}"),
        "Open" => assert_eq!(single(f, "open", &ctx), open(&s.by_status, "open"), "{ctx}"),
        "CRITICAL" => assert_eq!(single(f, "critical", &ctx), open(&s.by_severity, "CRITICAL"), "{ctx}"),
        "HIGH" => assert_eq!(single(f, "high", &ctx), open(&s.by_severity, "HIGH"), "{ctx}"),
        "Open by repository" => breakdown(f, "repository", &s.by_repository, None, &ctx),
        "Open by namespace" => {
            let named = s
                .by_namespace
                .iter()
                .map(|(k, v)| (if k.is_empty() { "(cluster-scoped)".to_owned() } else { k.clone() }, *v))
                .collect();
            breakdown(f, "namespace", &named, Some(20), &ctx)
        }
        "Open by type" => breakdown(f, "type", &s.by_type, None, &ctx),
        "Drifts over time" => over_time(t, f, e, &ctx),
        "7-day trend" => {
            columns(f, &["time", "new", "resolved"], &ctx);
            let got: Vec<(NaiveDate, i64, i64)> = (0..f.rows.len())
                .map(|i| (f.time(i, "time").date_naive(), f.int(i, "new"), f.int(i, "resolved")))
                .collect();
            let want: Vec<(NaiveDate, i64, i64)> = s.trend.iter().map(|d| (d.day, d.new, d.resolved)).collect();
            assert_eq!(got, want, "{ctx}");
        }
        "Time to resolve" => {
            assert_eq!(f.rows.len(), 1, "{ctx}");
            assert_eq!(f.float(0, "mean"), s.mean_time_to_resolve_seconds, "{ctx}: mean");
            assert_eq!(f.float(0, "p95"), s.p95_time_to_resolve_seconds, "{ctx}: p95");
        }
        "Most drifting objects" => most_drifting(f, e, &ctx),
        "Drifts" => table(f, e, &ctx),
        "Worst clusters" => {
            columns(f, &["cluster", "open", "CRITICAL", "HIGH", "MEDIUM", "LOW"], &ctx);
            let got: Vec<(String, i64, [i64; 4])> = (0..f.rows.len())
                .map(|i| {
                    let sev = ["CRITICAL", "HIGH", "MEDIUM", "LOW"].map(|c| f.int(i, c));
                    (f.text(i, "cluster").expect("a cluster").to_owned(), f.int(i, "open"), sev)
                })
                .collect();
            let want: Vec<(String, i64, [i64; 4])> = s
                .by_cluster
                .iter()
                .take(10)
                .map(|c| {
                    (c.cluster.clone(), c.open, ["CRITICAL", "HIGH", "MEDIUM", "LOW"].map(|k| open(&c.by_severity, k)))
                })
                .collect();
            assert_eq!(got, want, "{ctx}: the worst clusters in the order of by_cluster");
        }
        "Open by cluster" => {
            let want = s.by_cluster.iter().map(|c| (c.cluster.clone(), c.open)).collect();
            breakdown(f, "cluster", &want, Some(20), &ctx)
        }
        "Open by cluster and namespace" => {
            let want = s
                .by_cluster
                .iter()
                .flat_map(|c| {
                    c.by_namespace.iter().map(|(ns, n)| {
                        (format!("{} / {}", c.cluster, if ns.is_empty() { "(cluster-scoped)" } else { ns }), *n)
                    })
                })
                .collect();
            breakdown(f, "cluster / namespace", &want, Some(20), &ctx)
        }
        other => panic!(
            "panel {other:?} has no check in drift-postgres/tests/grafana/checks.rs: add one that compares it with /stats or /drifts"
        ),
    }
}

/// The columns of a result (a result without rows carries none).
fn columns(f: &Frame, want: &[&str], ctx: &str) {
    if !f.rows.is_empty() {
        assert_eq!(f.columns, want, "{ctx}");
    }
}

/// The one value of a stat query.
fn single(f: &Frame, column: &str, ctx: &str) -> i64 {
    assert_eq!((f.rows.len(), f.columns.as_slice()), (1, [column.to_owned()].as_slice()), "{ctx}");
    f.int(0, column)
}

/// Rows (label, open) in descending order of count, equal to the API's map (its largest
/// `limit` entries when it is limited).
fn breakdown(f: &Frame, label: &str, want: &BTreeMap<String, i64>, limit: Option<usize>, ctx: &str) {
    columns(f, &[label, "open"], ctx);
    let got: Vec<(String, i64)> =
        (0..f.rows.len()).map(|i| (f.text(i, label).expect("a label").to_owned(), f.int(i, "open"))).collect();
    assert!(got.windows(2).all(|w| w[0].1 >= w[1].1), "{ctx}: not in descending order: {got:?}");
    let got_map: BTreeMap<String, i64> = got.iter().cloned().collect();
    match limit {
        Some(n) if want.len() > n => {
            assert_eq!(got.len(), n, "{ctx}");
            assert!(got_map.iter().all(|(k, v)| want.get(k) == Some(v)), "{ctx}: {got:?} vs {want:?}");
            let least = got.last().map(|g| g.1).unwrap_or(0);
            assert!(
                want.iter().filter(|(k, _)| !got_map.contains_key(*k)).all(|(_, v)| *v <= least),
                "{ctx}: not the largest"
            );
        }
        _ => assert_eq!(&got_map, want, "{ctx}"),
    }
}

fn bucket(t: DateTime<Utc>, interval: f64) -> i64 {
    let seconds = t.timestamp() as f64 + f64::from(t.timestamp_subsec_nanos()) / 1e9;
    ((seconds / interval).floor() * interval) as i64
}

fn in_range(t: DateTime<Utc>, r: TimeRange) -> bool {
    r.from <= t && t <= r.to
}

/// Detected (A) or resolved (B) per interval, from the listed drifts' times.
fn over_time(t: &Target, f: &Frame, e: &Expected, ctx: &str) {
    let (column, times): (&str, Vec<DateTime<Utc>>) = match t.ref_id.as_str() {
        "A" => ("detected", e.rows.iter().map(|r| r.detected_at).collect()),
        "B" => (
            "resolved",
            e.rows.iter().filter(|r| r.status == DriftStatus::Resolved).filter_map(|r| r.resolved_at).collect(),
        ),
        other => panic!("{ctx}: unexpected target {other}"),
    };
    let mut want: BTreeMap<i64, i64> = BTreeMap::new();
    for time in times.into_iter().filter(|x| in_range(*x, e.range)) {
        *want.entry(bucket(time, e.interval)).or_default() += 1;
    }
    assert_eq!(t.format, "time_series", "{ctx}");
    columns(f, &["time", column], ctx);
    let got: Vec<(i64, i64)> = (0..f.rows.len()).map(|i| (f.time(i, "time").timestamp(), f.int(i, column))).collect();
    assert!(got.windows(2).all(|w| w[0].0 < w[1].0), "{ctx}: time series not sorted by time");
    assert_eq!(got.into_iter().collect::<BTreeMap<_, _>>(), want, "{ctx}");
}

/// `kind namespace/name` or `kind name` for cluster-scoped objects.
fn object(r: &StoredDrift) -> String {
    if r.namespace.is_empty() {
        format!("{} {}", r.resource_kind, r.resource_name)
    } else {
        format!("{} {}/{}", r.resource_kind, r.namespace, r.resource_name)
    }
}

/// Objects with the most drift rows open at some time of the range: first detected before
/// its end, and not resolved before its start.
fn most_drifting(f: &Frame, e: &Expected, ctx: &str) {
    columns(f, &["cluster", "object", "drifts", "open", "occurrences", "last seen"], ctx);
    type Figures = (i64, i64, i64, DateTime<Utc>);
    let mut want: BTreeMap<(String, String, String), Figures> = BTreeMap::new();
    let overlaps = |r: &&StoredDrift| r.detected_at <= e.range.to && r.resolved_at.is_none_or(|t| t >= e.range.from);
    for r in e.rows.iter().filter(overlaps) {
        let entry = want.entry((r.cluster.clone(), r.api_group.clone(), object(r))).or_insert((0, 0, 0, r.last_seen));
        entry.0 += 1;
        entry.1 += i64::from(r.status == DriftStatus::Open);
        entry.2 += r.occurrences;
        entry.3 = entry.3.max(r.last_seen);
    }
    let mut ranked: Vec<(i64, i64)> = want.values().map(|v| (v.0, v.2)).collect();
    ranked.sort_by(|a, b| b.cmp(a));
    ranked.truncate(10);
    let got: Vec<(String, String, Figures)> = (0..f.rows.len())
        .map(|i| {
            let figures = (f.int(i, "drifts"), f.int(i, "open"), f.int(i, "occurrences"), f.time(i, "last seen"));
            (f.text(i, "cluster").unwrap_or("").to_owned(), f.text(i, "object").unwrap_or("").to_owned(), figures)
        })
        .collect();
    // The ranking (ties broken by names, in the database's collation) ...
    assert_eq!(got.iter().map(|g| (g.2.0, g.2.2)).collect::<Vec<_>>(), ranked, "{ctx}: ranking");
    // ... and the figures of each object shown.
    for (cluster, obj, figures) in &got {
        let matches: Vec<_> = want.iter().filter(|((c, _, o), _)| c == cluster && o == obj).map(|(_, v)| v).collect();
        assert!(matches.contains(&figures), "{ctx}: {cluster} {obj} shows {figures:?}, the API gives {matches:?}");
    }
}

/// Open, then waived, then drifts resolved in the range; newest first in each.
fn table(f: &Frame, e: &Expected, ctx: &str) {
    let columns = [
        "id",
        "status",
        "severity",
        "type",
        "cluster",
        "repository",
        "object",
        "path",
        "expected",
        "actual",
        "changed by",
        "first seen",
        "last seen",
        "occurrences",
    ];
    self::columns(f, &columns, ctx);
    let rank = |s: DriftStatus| match s {
        DriftStatus::Open => 0,
        DriftStatus::Waived => 1,
        DriftStatus::Resolved => 2,
    };
    let mut want: Vec<&StoredDrift> = e
        .rows
        .iter()
        .filter(|r| r.status != DriftStatus::Resolved || r.resolved_at.is_some_and(|t| in_range(t, e.range)))
        .collect();
    want.sort_by_key(|r| (rank(r.status), std::cmp::Reverse(r.id)));
    want.truncate(500);
    let ids: Vec<i64> = (0..f.rows.len()).map(|i| f.int(i, "id")).collect();
    assert_eq!(ids, want.iter().map(|r| r.id).collect::<Vec<_>>(), "{ctx}: rows and their order");
    let json = |t: Option<&str>| t.map(|t| serde_json::from_str::<serde_json::Value>(t).expect("a JSON value"));
    for (i, r) in want.iter().enumerate() {
        let row = format!("{ctx}: drift {}", r.id);
        assert_eq!(f.text(i, "status"), Some(r.status.as_str()), "{row}");
        assert_eq!(f.text(i, "severity"), Some(r.severity.as_str()), "{row}");
        assert_eq!(f.text(i, "type"), Some(r.drift_type.as_str()), "{row}");
        assert_eq!(f.text(i, "cluster"), Some(r.cluster.as_str()), "{row}");
        assert_eq!(f.text(i, "repository"), Some(r.repository.as_str()), "{row}");
        assert_eq!(f.text(i, "object").map(str::to_owned), Some(object(r)), "{row}");
        assert_eq!(f.text(i, "path"), Some(r.path.as_str()), "{row}");
        assert_eq!(json(f.text(i, "expected")), r.git_value, "{row}");
        assert_eq!(json(f.text(i, "actual")), r.cluster_value, "{row}");
        assert_eq!(f.text(i, "changed by"), r.changed_by.as_deref(), "{row}");
        assert_eq!(f.time(i, "first seen"), r.detected_at, "{row}");
        assert_eq!(f.time(i, "last seen"), r.last_seen, "{row}");
        assert_eq!(f.int(i, "occurrences"), r.occurrences, "{row}");
    }
}
