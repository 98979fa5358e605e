//! Query-string parsing with clear 400 answers: unknown or repeated parameters, bad values.

use chrono::{DateTime, Utc};
use drift_model::act::{AuditAction, AuditFilter, DeliveryStatus};
use drift_model::finding::{Rule, Side};
use drift_model::sink::{DriftFilter, DriftStatus, FindingFilter, FindingStatus, PageRequest};
use drift_model::{DriftType, Severity};

use crate::error::ApiError;

/// The filter parameters shared by `GET /drifts` and `GET /stats`.
pub const FILTER_PARAMS: [&str; 8] =
    ["status", "severity", "drift_type", "namespace", "repository", "cluster", "kind", "since"];
/// The filter parameters of `GET /findings`.
pub const FINDING_PARAMS: [&str; 8] =
    ["status", "rule", "severity", "side", "namespace", "kind", "repository", "cluster"];
/// The pagination parameters of `GET /drifts`.
pub const PAGE_PARAMS: [&str; 2] = ["limit", "after"];
/// The filter parameters of `GET /audit`.
pub const AUDIT_PARAMS: [&str; 6] = ["action", "drift_id", "actor", "notifier", "status", "since"];
/// The filter parameters of `GET /notifications`.
pub const NOTIFICATION_PARAMS: [&str; 2] = ["status", "drift_id"];
/// Largest page.
pub const MAX_LIMIT: u32 = 1000;
/// Page size when `limit` is absent.
pub const DEFAULT_LIMIT: u32 = 100;
/// Largest id (of a drift, a row, a cursor): ids are `i64` in every store, so a larger number
/// answers 400, and the OpenAPI document says `maximum` 9223372036854775807.
pub const MAX_ID: i64 = i64::MAX;

/// Decoded `name=value` pairs of a query string, each name at most once and from `allowed`.
pub fn pairs(raw: Option<&str>, allowed: &[&str]) -> Result<Vec<(String, String)>, ApiError> {
    let pairs = decode(raw.unwrap_or(""))
        .ok_or_else(|| ApiError::bad_request("the query string is not valid URL-encoded UTF-8"))?;
    let mut seen: Vec<&str> = Vec::new();
    for (name, _) in &pairs {
        if !allowed.contains(&name.as_str()) {
            return Err(ApiError::bad_request(format!(
                "unknown query parameter {name:?} (allowed: {})",
                if allowed.is_empty() { "none".to_owned() } else { allowed.join(", ") }
            )));
        }
        if seen.contains(&name.as_str()) {
            return Err(ApiError::bad_request(format!("query parameter {name:?} is given more than once")));
        }
        seen.push(name);
    }
    Ok(pairs)
}

/// Splits and decodes `application/x-www-form-urlencoded` pairs strictly: a bad `%` escape or
/// bytes that are not UTF-8 give `None` (a lossy decoding would search for U+FFFD instead).
fn decode(raw: &str) -> Option<Vec<(String, String)>> {
    raw.split('&')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let (name, value) = part.split_once('=').unwrap_or((part, ""));
            Some((decode_component(name)?, decode_component(value)?))
        })
        .collect()
}

fn decode_component(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = s.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok().filter(|_| hex.bytes().all(|b| b.is_ascii_hexdigit()))?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

fn non_empty(name: &str, value: &str) -> Result<String, ApiError> {
    if value.is_empty() {
        return Err(ApiError::bad_request(format!("query parameter {name:?} is empty")));
    }
    Ok(value.to_owned())
}

/// Reads the filter parameters among `pairs` (others are ignored here).
pub fn filter(pairs: &[(String, String)]) -> Result<DriftFilter, ApiError> {
    let mut f = DriftFilter::default();
    for (name, value) in pairs {
        let bad = |e: drift_model::Error| ApiError::bad_request(e.message().to_owned());
        match name.as_str() {
            "status" => f.status = Some(value.parse::<DriftStatus>().map_err(bad)?),
            "severity" => f.severity = Some(value.parse::<Severity>().map_err(bad)?),
            "drift_type" => {
                f.drift_type = Some(value.parse::<DriftType>().map_err(|_| {
                    ApiError::bad_request(format!(
                        "unknown drift type {value:?} ({})",
                        DriftType::ALL.map(DriftType::as_str).join(", ")
                    ))
                })?)
            }
            // An empty namespace selects cluster-scoped objects.
            "namespace" => f.namespace = Some(value.clone()),
            "repository" => f.repository = Some(non_empty(name, value)?),
            "cluster" => f.cluster = Some(non_empty(name, value)?),
            "kind" => f.kind = Some(non_empty(name, value)?),
            "since" => f.since = Some(since(value)?),
            _ => {}
        }
    }
    Ok(f)
}

/// Reads the filter parameters of `GET /findings` among `pairs` (others are ignored here).
pub fn finding_filter(pairs: &[(String, String)]) -> Result<FindingFilter, ApiError> {
    let mut f = FindingFilter::default();
    for (name, value) in pairs {
        let bad = |e: drift_model::Error| ApiError::bad_request(e.message().to_owned());
        match name.as_str() {
            "status" => f.status = Some(value.parse::<FindingStatus>().map_err(bad)?),
            "rule" => f.rule = Some(value.parse::<Rule>().map_err(bad)?),
            "severity" => f.severity = Some(value.parse::<Severity>().map_err(bad)?),
            "side" => f.side = Some(value.parse::<Side>().map_err(bad)?),
            // An empty namespace selects cluster-scoped objects.
            "namespace" => f.namespace = Some(value.clone()),
            "kind" => f.kind = Some(non_empty(name, value)?),
            "repository" => f.repository = Some(non_empty(name, value)?),
            "cluster" => f.cluster = Some(non_empty(name, value)?),
            _ => {}
        }
    }
    Ok(f)
}

/// Reads the filter parameters of `GET /audit` among `pairs` (others are ignored here).
pub fn audit_filter(pairs: &[(String, String)]) -> Result<AuditFilter, ApiError> {
    let mut f = AuditFilter::default();
    for (name, value) in pairs {
        match name.as_str() {
            "action" => f.action = Some(value.parse::<AuditAction>().map_err(|e| ApiError::bad_request(e.message()))?),
            "drift_id" => f.drift_id = Some(positive_id("drift_id", value)?),
            "actor" => f.actor = Some(non_empty(name, value)?),
            "notifier" => f.notifier = Some(non_empty(name, value)?),
            "status" => f.status = Some(non_empty(name, value)?),
            "since" => f.since = Some(since(value)?),
            _ => {}
        }
    }
    Ok(f)
}

/// Reads the filter parameters of `GET /notifications` among `pairs`: the delivery status and
/// the drift.
pub fn delivery_filter(pairs: &[(String, String)]) -> Result<(Option<DeliveryStatus>, Option<i64>), ApiError> {
    let (mut status, mut drift_id) = (None, None);
    for (name, value) in pairs {
        match name.as_str() {
            "status" => {
                status = Some(value.parse::<DeliveryStatus>().map_err(|_| {
                    ApiError::bad_request(format!(
                        "unknown delivery status {value:?} ({})",
                        DeliveryStatus::ALL.map(DeliveryStatus::as_str).join(", ")
                    ))
                })?)
            }
            "drift_id" => drift_id = Some(positive_id("drift_id", value)?),
            _ => {}
        }
    }
    Ok((status, drift_id))
}

/// The value of a required parameter, 400 when absent or empty.
pub fn required(pairs: &[(String, String)], name: &str) -> Result<String, ApiError> {
    match pairs.iter().find(|(n, _)| n == name) {
        Some((_, value)) => non_empty(name, value),
        None => Err(ApiError::bad_request(format!("query parameter {name:?} is required"))),
    }
}

/// A positive id (a drift's, a row's), 400 otherwise.
pub fn positive_id(what: &str, value: &str) -> Result<i64, ApiError> {
    value
        .parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| ApiError::bad_request(format!("{what} {value:?} is not an integer from 1 to {MAX_ID}")))
}

fn since(value: &str) -> Result<DateTime<Utc>, ApiError> {
    DateTime::parse_from_rfc3339(value).map(|t| t.with_timezone(&Utc)).map_err(|_| {
        ApiError::bad_request(format!(
            "since {value:?} is not an RFC 3339 time such as 2026-11-30T12:00:00Z (write + as %2B)"
        ))
    })
}

/// Reads `limit` (1..=1000, default 100) and `after` (a positive id) among `pairs`.
pub fn page(pairs: &[(String, String)]) -> Result<PageRequest, ApiError> {
    let mut p = PageRequest { limit: DEFAULT_LIMIT, after: None };
    for (name, value) in pairs {
        match name.as_str() {
            "limit" => {
                p.limit = value.parse::<u32>().ok().filter(|l| (1..=MAX_LIMIT).contains(l)).ok_or_else(|| {
                    ApiError::bad_request(format!("limit {value:?} is not a number from 1 to {MAX_LIMIT}"))
                })?
            }
            "after" => {
                p.after = Some(value.parse::<i64>().ok().filter(|a| *a > 0).ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "after {value:?} is not a cursor (the `next` of the previous page, from 1 to {MAX_ID})"
                    ))
                })?)
            }
            _ => {}
        }
    }
    Ok(p)
}

/// Reads a boolean parameter, `false` when absent. Its value is `true` or `false` and nothing
/// else, as the OpenAPI document says: an empty value (`?wait=`, a bare `?wait`), `1` or `yes`
/// answer 400 rather than guess.
pub fn flag(pairs: &[(String, String)], name: &str) -> Result<bool, ApiError> {
    match pairs.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str()) {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some("") => Err(ApiError::bad_request(format!("query parameter {name:?} is empty: give true or false"))),
        Some(other) => Err(ApiError::bad_request(format!("{name} {other:?} is not true or false"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Vec<&'static str> {
        FILTER_PARAMS.iter().chain(PAGE_PARAMS.iter()).copied().collect()
    }

    #[test]
    fn parses_every_filter() {
        let p = pairs(
            Some("status=open&severity=critical&drift_type=replicas_drift&namespace=shop&repository=r&cluster=c&kind=Deployment&since=2026-11-02T12:00:00%2B01:00"),
            &all(),
        )
        .unwrap();
        let f = filter(&p).unwrap();
        assert_eq!(f.status, Some(DriftStatus::Open));
        assert_eq!(f.severity, Some(Severity::Critical));
        assert_eq!(f.drift_type, Some(DriftType::ReplicasDrift));
        assert_eq!(f.namespace.as_deref(), Some("shop"));
        assert_eq!(f.repository.as_deref(), Some("r"));
        assert_eq!(f.cluster.as_deref(), Some("c"));
        assert_eq!(f.kind.as_deref(), Some("Deployment"));
        assert_eq!(f.since.unwrap().to_rfc3339(), "2026-11-02T11:00:00+00:00");
    }

    #[test]
    fn rejects_bad_values() {
        for q in [
            "status=closed",
            "severity=urgent",
            "drift_type=replicas",
            "since=yesterday",
            "since=2026-11-02",
            "kind=",
            "repository=",
            "cluster=",
        ] {
            let p = pairs(Some(q), &all()).unwrap();
            assert_eq!(filter(&p).unwrap_err().status(), 400, "{q}");
        }
        for q in ["limit=0", "limit=1001", "limit=-1", "limit=ten", "after=0", "after=-5", "after=x", "limit="] {
            let p = pairs(Some(q), &all()).unwrap();
            assert_eq!(page(&p).unwrap_err().status(), 400, "{q}");
        }
    }

    #[test]
    fn rejects_unknown_and_repeated_parameters() {
        assert!(pairs(Some("sevrity=LOW"), &all()).unwrap_err().message().contains("sevrity"));
        assert!(pairs(Some("limit=1&limit=2"), &all()).unwrap_err().message().contains("more than once"));
        assert!(pairs(Some("kind=%FF"), &all()).is_err());
        assert!(pairs(Some("kind=%G1"), &all()).is_err());
        assert!(pairs(Some("kind=%4"), &all()).is_err());
        assert!(pairs(Some("kind=%+1"), &all()).is_err());
    }

    #[test]
    fn decodes_form_encoding() {
        assert_eq!(decode("").unwrap(), vec![]);
        assert_eq!(
            decode("kind=Config%4Dap&namespace=&since=2026-11-02T12:00:00%2B01:00&x=a+b&&flag").unwrap(),
            vec![
                ("kind".to_owned(), "ConfigMap".to_owned()),
                ("namespace".to_owned(), String::new()),
                ("since".to_owned(), "2026-11-02T12:00:00+01:00".to_owned()),
                ("x".to_owned(), "a b".to_owned()),
                ("flag".to_owned(), String::new()),
            ]
        );
        assert_eq!(decode("n=%C3%A9").unwrap(), vec![("n".to_owned(), "\u{e9}".to_owned())]);
    }

    #[test]
    fn page_defaults_and_bounds() {
        assert_eq!(page(&[]).unwrap(), PageRequest { limit: 100, after: None });
        let p = pairs(Some("limit=1000&after=7"), &all()).unwrap();
        assert_eq!(page(&p).unwrap(), PageRequest { limit: 1000, after: Some(7) });
        let p = pairs(Some("limit=1"), &all()).unwrap();
        assert_eq!(page(&p).unwrap().limit, 1);
    }

    #[test]
    fn empty_namespace_selects_cluster_scoped() {
        let p = pairs(Some("namespace="), &all()).unwrap();
        assert_eq!(filter(&p).unwrap().namespace.as_deref(), Some(""));
    }

    #[test]
    fn audit_and_delivery_filters() {
        let all: Vec<&str> = AUDIT_PARAMS.iter().chain(PAGE_PARAMS.iter()).copied().collect();
        let p = pairs(
            Some("action=decision&drift_id=7&actor=alice&notifier=hook&status=accept&since=2026-11-02T12:00:00Z"),
            &all,
        )
        .unwrap();
        let f = audit_filter(&p).unwrap();
        assert_eq!(f.action, Some(AuditAction::Decision));
        assert_eq!(f.drift_id, Some(7));
        assert_eq!(
            (f.actor.as_deref(), f.notifier.as_deref(), f.status.as_deref()),
            (Some("alice"), Some("hook"), Some("accept"))
        );
        assert!(f.since.is_some());
        for q in ["action=vote", "drift_id=0", "drift_id=x", "actor=", "since=today"] {
            let p = pairs(Some(q), &all).unwrap();
            assert_eq!(audit_filter(&p).unwrap_err().status(), 400, "{q}");
        }
        let p = pairs(Some("status=parked&drift_id=3"), &NOTIFICATION_PARAMS).unwrap();
        assert_eq!(delivery_filter(&p).unwrap(), (Some(DeliveryStatus::Parked), Some(3)));
        let p = pairs(Some("status=lost"), &NOTIFICATION_PARAMS).unwrap();
        assert!(delivery_filter(&p).unwrap_err().message().contains("parked"));
        assert_eq!(required(&[], "notifier").unwrap_err().status(), 400);
        let p = pairs(Some("notifier="), &["notifier"]).unwrap();
        assert_eq!(required(&p, "notifier").unwrap_err().status(), 400);
    }

    #[test]
    fn finding_filters() {
        let all: Vec<&str> = FINDING_PARAMS.iter().chain(PAGE_PARAMS.iter()).copied().collect();
        let p = pairs(
            Some("status=resolved&rule=run-as-root&severity=high&side=live&namespace=&kind=Pod&repository=r&cluster=c"),
            &all,
        )
        .unwrap();
        let f = finding_filter(&p).unwrap();
        assert_eq!(
            (f.status, f.rule, f.severity, f.side),
            (Some(FindingStatus::Resolved), Some(Rule::RunAsRoot), Some(Severity::High), Some(Side::Live))
        );
        assert_eq!((f.namespace.as_deref(), f.kind.as_deref()), (Some(""), Some("Pod")));
        assert_eq!((f.repository.as_deref(), f.cluster.as_deref()), (Some("r"), Some("c")));
        for q in ["status=waived", "rule=latest", "rule=image_tag", "side=both", "severity=urgent", "kind=", "cluster="]
        {
            let p = pairs(Some(q), &all).unwrap();
            assert_eq!(finding_filter(&p).unwrap_err().status(), 400, "{q}");
        }
        assert!(finding_filter(&pairs(Some("rule=x"), &all).unwrap()).unwrap_err().message().contains("image-tag"));
    }

    #[test]
    fn flags() {
        let p = pairs(Some("wait=true"), &["wait"]).unwrap();
        assert!(flag(&p, "wait").unwrap());
        assert!(!flag(&[], "wait").unwrap());
        let p = pairs(Some("wait=false"), &["wait"]).unwrap();
        assert!(!flag(&p, "wait").unwrap());
        for q in ["wait=maybe", "wait=", "wait", "wait=1", "wait=0", "wait=TRUE", "wait=yes"] {
            let p = pairs(Some(q), &["wait"]).unwrap();
            assert_eq!(flag(&p, "wait").unwrap_err().status(), 400, "{q}");
        }
        let p = pairs(Some("dry_run"), &["dry_run"]).unwrap();
        assert!(flag(&p, "dry_run").unwrap_err().message().contains("empty"));
    }

    #[test]
    fn ids_above_i64_max_are_refused_and_the_maximum_is_taken() {
        let max = i64::MAX.to_string();
        assert_eq!(positive_id("drift id", &max).unwrap(), i64::MAX);
        assert_eq!(positive_id("drift id", "9223372036854775808").unwrap_err().status(), 400);
        let p = pairs(Some(&format!("after={max}")), &PAGE_PARAMS).unwrap();
        assert_eq!(page(&p).unwrap().after, Some(i64::MAX));
        let p = pairs(Some("after=9223372036854775808"), &PAGE_PARAMS).unwrap();
        assert_eq!(page(&p).unwrap_err().status(), 400);
    }
}
