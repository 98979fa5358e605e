//! Injected faults: rules that match requests by verb, resource or kind, namespace, name, path
//! or dry run, and answer with latency, an error status (403, 404, 429 with Retry-After, 500,
//! ...), a watch that drops after some events, 410 Gone for a resourceVersion, or hold the
//! request until the test releases it (`TestApiServer::wait_held`, `release_held`), so that
//! another client can write in between without a timed race.
//!
//! ```yaml
//! faults:
//!   - match: {verb: list, resource: configmaps, namespace: team-a}
//!     action: {type: error, code: 403}
//!   - match: {resource: deployments}
//!     action: {type: latency, millis: 200}
//!   - match: {verb: watch}
//!     action: {type: dropWatch, afterEvents: 2}
//!     times: 1
//! ```

use serde::{Deserialize, Serialize};

/// A set of fault rules, as read from `--faults FILE` or `POST /_admin/faults`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Faults {
    /// The rules, tried in order; the first that matches applies.
    #[serde(default)]
    pub faults: Vec<FaultRule>,
}

/// One rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    /// Which requests it applies to; an empty match applies to every API request.
    #[serde(default, rename = "match")]
    pub matcher: FaultMatch,
    /// What happens.
    pub action: FaultAction,
    /// How many times it applies before it is spent; unlimited when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<u32>,
}

/// Request properties a rule matches; absent properties match anything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FaultMatch {
    /// Kubernetes verb: get, list, watch, create, update, patch, delete, deletecollection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verb: Option<String>,
    /// Plural resource (`deployments`) or kind (`Deployment`), case-insensitive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// API group (`apps`, `""` for core).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Object name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Subresource (`status`, `scale`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subresource: Option<String>,
    /// URL path prefix (`/apis/apps/v1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_prefix: Option<String>,
    /// Whether the request is a dry run (`dryRun=All`): `true` matches only dry runs, `false`
    /// only requests that change something.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
}

/// What a matching request gets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum FaultAction {
    /// Delay the response, then serve it normally.
    Latency {
        /// Delay in milliseconds.
        millis: u64,
    },
    /// Answer with a Kubernetes Status error of this HTTP code (401, 403, 404, 409, 429, 500,
    /// 503, ...); `retryAfterSeconds` sets the Retry-After header and the Status details.
    #[serde(rename_all = "camelCase")]
    Error {
        /// HTTP status code.
        code: u16,
        /// Retry-After in seconds (for 429 and 503).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_seconds: Option<u32>,
        /// Message in the Status.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// Close a watch stream after this many events (0: right after it opened).
    #[serde(rename_all = "camelCase")]
    DropWatch {
        /// Events sent before the connection is closed.
        after_events: u32,
    },
    /// Answer a list or watch that names a resourceVersion (or a continue token) with 410 Gone,
    /// as for a version that has been compacted.
    Expired,
    /// Hold the request before it is served (before the object is read) until the test
    /// releases it (`TestApiServer::release_held`, `POST /_admin/release`); then serve it
    /// normally. `TestApiServer::wait_held(n)` waits until `n` requests have been held, so a
    /// test can write the object with another client while a request is in flight.
    Hold,
}

/// What the request being served is, for matching.
#[derive(Debug, Clone, Default)]
pub struct RequestInfo {
    /// Kubernetes verb.
    pub verb: String,
    /// API group.
    pub group: String,
    /// Plural resource.
    pub resource: String,
    /// Kind.
    pub kind: String,
    /// Namespace, empty if none.
    pub namespace: String,
    /// Name, empty if none.
    pub name: String,
    /// Subresource, empty if none.
    pub subresource: String,
    /// URL path.
    pub path: String,
    /// Whether a resourceVersion or continue token was given.
    pub has_version: bool,
    /// Whether the request is a dry run (`dryRun=All`).
    pub dry_run: bool,
}

impl FaultMatch {
    /// Whether the request matches.
    pub fn matches(&self, r: &RequestInfo) -> bool {
        let eq = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        eq(&self.verb, &r.verb)
            && self
                .resource
                .as_deref()
                .is_none_or(|w| w.eq_ignore_ascii_case(&r.resource) || w.eq_ignore_ascii_case(&r.kind))
            && eq(&self.group, &r.group)
            && eq(&self.namespace, &r.namespace)
            && eq(&self.name, &r.name)
            && eq(&self.subresource, &r.subresource)
            && self.path_prefix.as_deref().is_none_or(|p| r.path.starts_with(p))
            && self.dry_run.is_none_or(|d| d == r.dry_run)
    }
}

impl Faults {
    /// Parse YAML or JSON (JSON is YAML).
    pub fn from_yaml(text: &str) -> Result<Faults, serde_saphyr::Error> {
        serde_saphyr::from_str(text)
    }

    /// The actions that apply to a request, consuming one use of limited rules. Latency is
    /// returned with the first other action, if any, so a rule list can both slow and fail.
    pub fn take(&mut self, r: &RequestInfo) -> Vec<FaultAction> {
        let mut out = Vec::new();
        for rule in &mut self.faults {
            if rule.times == Some(0) || !rule.matcher.matches(r) {
                continue;
            }
            let applies = match rule.action {
                FaultAction::DropWatch { .. } => r.verb == "watch",
                FaultAction::Expired => (r.verb == "watch" || r.verb == "list") && r.has_version,
                _ => true,
            };
            if !applies {
                continue;
            }
            let is_latency = matches!(rule.action, FaultAction::Latency { .. });
            if !is_latency && out.iter().any(|a| !matches!(a, FaultAction::Latency { .. })) {
                continue;
            }
            if let Some(t) = rule.times.as_mut() {
                *t -= 1;
            }
            out.push(rule.action.clone());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_file() {
        let f = Faults::from_yaml(
            "faults:\n  - match: {verb: list, resource: configmaps, namespace: team-a}\n    action: {type: error, code: 403}\n  - match: {resource: deployments}\n    action: {type: latency, millis: 200}\n  - match: {verb: watch}\n    action: {type: dropWatch, afterEvents: 2}\n    times: 1\n  - action: {type: error, code: 429, retryAfterSeconds: 3}\n  - action: {type: expired}\n",
        )
        .unwrap();
        assert_eq!(f.faults.len(), 5);
        assert_eq!(f.faults[3].action, FaultAction::Error { code: 429, retry_after_seconds: Some(3), message: None });
        assert!(Faults::from_yaml("faults:\n  - action: {type: nope}\n").is_err());
    }

    #[test]
    fn times_are_consumed() {
        let mut f = Faults {
            faults: vec![FaultRule {
                matcher: FaultMatch { resource: Some("ConfigMap".into()), ..Default::default() },
                action: FaultAction::Error { code: 500, retry_after_seconds: None, message: None },
                times: Some(1),
            }],
        };
        let r = RequestInfo {
            verb: "get".into(),
            resource: "configmaps".into(),
            kind: "ConfigMap".into(),
            ..Default::default()
        };
        assert_eq!(f.take(&r).len(), 1);
        assert!(f.take(&r).is_empty());
    }

    #[test]
    fn a_hold_can_match_only_the_requests_that_change_something() {
        let mut f =
            Faults::from_yaml("faults:\n  - match: {verb: patch, dryRun: false}\n    action: {type: hold}\n").unwrap();
        let patch = |dry_run| RequestInfo { verb: "patch".into(), dry_run, ..Default::default() };
        assert!(f.take(&patch(true)).is_empty(), "a dry run is not held");
        assert_eq!(f.take(&patch(false)), vec![FaultAction::Hold]);
    }
}
