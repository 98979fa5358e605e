//! Waivers written in Git, next to the manifests, so that a team reviews them like code: the
//! annotation [`WAIVERS_ANNOTATION`] of a desired object lists the paths whose drift is
//! intended for a while, each with an owner, a reason and an expiry (docs/decisions.md,
//! "Waivers in Git"):
//!
//! ```yaml
//! metadata:
//!   annotations:
//!     drift-detector.io/waivers: |
//!       - path: spec.replicas
//!         owner: alice
//!         reason: load test of the sale, scaled by hand
//!         expires: 2026-12-31
//! ```
//!
//! A drift a waiver covers is reported with it ([`drift_model::Drift::waiver`]) and recorded as
//! waived; once the waiver expires it stops applying by itself (the next scan reports the drift
//! as any other). A waiver that does not parse, or has expired, is a warning on its file.

use chrono::{DateTime, NaiveDate, Utc};
use serde::Deserialize;

use drift_model::report::ScanReport;
pub use drift_model::waiver::{MAX_DAYS, WAIVERS_ANNOTATION, Waiver};
use drift_model::{Resource, SourceWarning};

/// A waiver as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Written {
    path: String,
    owner: String,
    reason: String,
    /// A date (the waiver lasts to the end of that day, UTC) or an RFC 3339 time.
    expires: String,
}

/// Reads the waivers of an annotation's value; the error says what is wrong, for a person.
pub fn parse(text: &str) -> Result<Vec<Waiver>, String> {
    let written: Vec<Written> = serde_saphyr::from_str(text)
        .map_err(|e| format!("{WAIVERS_ANNOTATION}: not a list of {{path, owner, reason, expires}}: {e}"))?;
    written
        .into_iter()
        .map(|w| {
            for (field, value) in [("path", &w.path), ("owner", &w.owner), ("reason", &w.reason)] {
                if !drift_model::decision::has_visible_text(value) {
                    return Err(format!("{WAIVERS_ANNOTATION}: a waiver has an empty `{field}`"));
                }
            }
            Ok(Waiver { expires_at: expiry(&w.expires)?, path: w.path, owner: w.owner, reason: w.reason })
        })
        .collect()
}

fn expiry(text: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&Utc));
    }
    NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.succ_opt())
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
        .ok_or_else(|| {
            format!("{WAIVERS_ANNOTATION}: `expires: {text}` is not a date (2026-12-31) or an RFC 3339 time")
        })
}

/// The waivers of a desired object, or the warning its annotation deserves.
pub fn of(resource: &Resource) -> Result<Vec<Waiver>, String> {
    let text = resource
        .object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(WAIVERS_ANNOTATION))
        .and_then(serde_json::Value::as_str);
    text.map_or(Ok(Vec::new()), parse)
}

/// Marks each drift of `report` that a waiver of its desired object covers at `now` (the first
/// such waiver), and warns, on the object's file, about annotations that do not parse,
/// waivers that have expired and waivers that run longer than [`MAX_DAYS`] (those do not
/// apply).
pub fn apply(report: &mut ScanReport, desired: &[Resource], now: DateTime<Utc>) {
    for resource in desired {
        let annotated = resource.object.pointer("/metadata/annotations").and_then(|a| a.get(WAIVERS_ANNOTATION));
        if annotated.is_none() {
            continue;
        }
        let warn = |message: String| {
            SourceWarning::note(format!("{}: {message}", resource.key)).at(
                resource.provenance.path.clone().unwrap_or_default(),
                resource.provenance.document,
                None,
            )
        };
        let waivers = match of(resource) {
            Ok(w) => w,
            Err(message) => {
                report.warnings.push(warn(message));
                continue;
            }
        };
        let mut live = Vec::new();
        for w in waivers {
            if w.expires_at <= now {
                report.warnings.push(warn(format!(
                    "the waiver of {} by {} expired at {}; the drift counts again",
                    w.path, w.owner, w.expires_at
                )));
            } else if w.expires_at > now + chrono::Duration::days(MAX_DAYS) {
                report.warnings.push(warn(format!(
                    "the waiver of {} by {} runs past {MAX_DAYS} days; it does not apply",
                    w.path, w.owner
                )));
            } else {
                live.push(w);
            }
        }
        for d in report.drifts.iter_mut().filter(|d| d.key() == resource.key) {
            d.waiver = live.iter().find(|w| w.covers(&d.path)).cloned();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn a_waiver_covers_its_path_the_paths_under_it_and_star_covers_all() {
        let w = |path: &str| Waiver {
            path: path.into(),
            owner: "a".into(),
            reason: "r".into(),
            expires_at: Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap(),
        };
        assert!(w("spec.replicas").covers("spec.replicas"));
        assert!(!w("spec.replicas").covers("spec.replicasX"));
        assert!(w("spec.template").covers("spec.template.spec.containers[name=web].image"));
        assert!(w("spec.template.spec.containers").covers("spec.template.spec.containers[name=web].image"));
        assert!(!w("spec.template").covers("spec.replicas"));
        assert!(w("*").covers("metadata.labels.team"));
    }

    #[test]
    fn waivers_parse_from_yaml_or_json_with_a_date_or_a_time_and_refuse_the_rest() {
        let ws = parse("- path: spec.replicas\n  owner: alice\n  reason: load test\n  expires: 2026-12-31\n").unwrap();
        assert_eq!(ws[0].expires_at, Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap(), "to the end of the day");
        let ws =
            parse(r#"[{"path": "*", "owner": "bob", "reason": "migration", "expires": "2026-12-05T10:00:00+01:00"}]"#)
                .unwrap();
        assert_eq!(ws[0].expires_at, Utc.with_ymd_and_hms(2026, 12, 5, 9, 0, 0).unwrap());
        for bad in [
            "- path: spec.replicas\n  owner: alice\n  expires: 2026-12-31\n",
            "- path: spec.replicas\n  owner: alice\n  reason: x\n  expires: soon\n",
            "- path: spec.replicas\n  owner: ' '\n  reason: x\n  expires: 2026-12-31\n",
            // A reason of zero-width characters only says nothing (issue 37, item 6).
            "- path: spec.replicas\n  owner: alice\n  reason: \"\\u200B\\u2060\\uFEFF\"\n  expires: 2026-12-31\n",
            "- path: a\n  owner: b\n  reason: c\n  expires: 2026-12-31\n  extra: 1\n",
            "path: spec.replicas",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.starts_with(WAIVERS_ANNOTATION), "{e}");
        }
    }

    fn scan(annotation: &str, clock: fn() -> DateTime<Utc>) -> ScanReport {
        use crate::scan::{ScanOptions, compare_snapshots};
        use crate::{Engine, EngineConfig};
        use drift_model::{CoverageStatus, DesiredSnapshot, GroupKind, LiveSnapshot};
        let cm = |mode: &str, annotations: serde_json::Value| {
            Resource::from_object(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c", "namespace": "shop", "annotations": annotations},
                "data": {"mode": mode, "size": "s"}}))
            .unwrap()
        };
        let mut desired = cm("fast", serde_json::json!({WAIVERS_ANNOTATION: annotation}));
        desired.provenance.path = Some("apps/cm.yaml".into());
        let desired =
            DesiredSnapshot { repository: "r".into(), revision: None, resources: vec![desired], warnings: Vec::new() };
        let mut live = LiveSnapshot {
            cluster: "c".into(),
            resources: vec![cm("slow", serde_json::json!({}))],
            coverage: Default::default(),
        };
        live.coverage.set(&GroupKind::new("", "ConfigMap"), Some("shop"), CoverageStatus::Complete);
        let mut options = ScanOptions::new("s");
        options.clock = clock;
        compare_snapshots(desired, live, &Engine::new(&EngineConfig::default()).unwrap(), &options)
    }

    #[test]
    fn a_scan_marks_the_drifts_a_waiver_covers_and_never_reports_the_annotation() {
        fn now() -> DateTime<Utc> {
            Utc.with_ymd_and_hms(2026, 12, 1, 12, 0, 0).unwrap()
        }
        fn next_year() -> DateTime<Utc> {
            Utc.with_ymd_and_hms(2027, 1, 2, 0, 0, 0).unwrap()
        }
        let text = "- {path: data.mode, owner: alice, reason: load test, expires: 2026-12-31}";
        let r = scan(text, now);
        assert_eq!(r.drifts.len(), 1, "the annotation itself is not a drift: {:?}", r.drifts);
        let w = r.drifts[0].waiver.as_ref().expect("covered");
        assert_eq!((w.owner.as_str(), w.reason.as_str()), ("alice", "load test"));
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        // Expired: the drift counts again, and the file says why.
        let r = scan(text, next_year);
        assert_eq!(r.drifts[0].waiver, None);
        assert!(r.warnings[0].message.contains("expired"), "{:?}", r.warnings);
        assert_eq!(r.warnings[0].path.as_deref(), Some("apps/cm.yaml"));
        assert!(!r.warnings[0].fatal, "a note, not an error");
        // Another path, or a waiver that does not parse: not covered.
        let other = scan("- {path: data.size, owner: a, reason: b, expires: 2026-12-31}", now);
        assert_eq!(other.drifts[0].waiver, None);
        let bad = scan("- {path: data.mode, owner: a}", now);
        assert_eq!(bad.drifts[0].waiver, None);
        assert!(bad.warnings[0].message.contains(WAIVERS_ANNOTATION));
        let far = scan("- {path: data.mode, owner: a, reason: b, expires: 2028-12-31}", now);
        assert_eq!(far.drifts[0].waiver, None);
        assert!(far.warnings[0].message.contains("366 days"));
    }
}
