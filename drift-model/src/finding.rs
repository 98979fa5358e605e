//! Policy findings as data: the rules ([`Rule`]), where a finding was found ([`Side`]), the
//! finding ([`Finding`]) and the `policies:` settings ([`PolicyConfig`]). The rules are
//! evaluated by `drift_engine::policy::Policy`; stores, the API and notifiers know findings
//! only through these types.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::drift::Severity;
use crate::resource::ResourceKey;

/// A policy rule. Its id (kebab-case, [`Rule::as_str`]) is stable: configuration, stores, the
/// API and metrics name rules by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// A container image without a tag, or with the tag `latest` (a digest pin passes).
    ImageTag,
    /// A container without a cpu or a memory request.
    ResourceRequests,
    /// A container without a cpu or a memory limit.
    ResourceLimits,
    /// A container with `securityContext.privileged: true`.
    Privileged,
    /// A pod with `hostNetwork: true`.
    HostNetwork,
    /// A pod with `hostPID: true`.
    HostPid,
    /// A container that may run as root: `runAsUser: 0`, or neither `runAsNonRoot: true` nor a
    /// non-zero `runAsUser` (container or pod level).
    RunAsRoot,
    /// A label the configuration requires is missing from the object's `metadata.labels`.
    RequiredLabels,
}

impl Rule {
    /// Every rule, in the order findings of one object are sorted by.
    pub const ALL: [Rule; 8] = [
        Rule::ImageTag,
        Rule::ResourceRequests,
        Rule::ResourceLimits,
        Rule::Privileged,
        Rule::HostNetwork,
        Rule::HostPid,
        Rule::RunAsRoot,
        Rule::RequiredLabels,
    ];

    /// The rule's id (`image-tag`).
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::ImageTag => "image-tag",
            Rule::ResourceRequests => "resource-requests",
            Rule::ResourceLimits => "resource-limits",
            Rule::Privileged => "privileged",
            Rule::HostNetwork => "host-network",
            Rule::HostPid => "host-pid",
            Rule::RunAsRoot => "run-as-root",
            Rule::RequiredLabels => "required-labels",
        }
    }

    /// The severity of its findings unless configured otherwise.
    pub fn default_severity(self) -> Severity {
        match self {
            Rule::Privileged | Rule::HostNetwork | Rule::HostPid => Severity::High,
            Rule::RunAsRoot | Rule::ImageTag => Severity::Medium,
            Rule::ResourceRequests | Rule::ResourceLimits | Rule::RequiredLabels => Severity::Low,
        }
    }

    /// Its position in [`Rule::ALL`] (a table of settings indexed by rule).
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Rule {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        Rule::ALL.into_iter().find(|r| r.as_str() == s).ok_or_else(|| {
            let ids: Vec<&str> = Rule::ALL.iter().map(|r| r.as_str()).collect();
            crate::Error::invalid_input(format!("unknown policy rule {s:?} ({})", ids.join(", ")))
        })
    }
}

/// Where a finding was found: in the object as Git declares it, or as the cluster runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The desired state (Git).
    Desired,
    /// The live state (the cluster).
    Live,
}

impl Side {
    /// Both sides.
    pub const ALL: [Side; 2] = [Side::Desired, Side::Live];

    /// snake_case name (`desired`, `live`).
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Desired => "desired",
            Side::Live => "live",
        }
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Side {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        Side::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| crate::Error::invalid_input(format!("unknown side {s:?} (desired, live)")))
    }
}

/// The type of a finding; the only one so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingType {
    /// A policy rule failed.
    #[default]
    PolicyViolation,
}

/// One rule that failed on one object (on one container of it, for the container rules).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Finding {
    /// The object (group, kind, namespace, name).
    pub resource: ResourceKey,
    /// Desired or live.
    pub side: Side,
    /// The rule.
    pub rule: Rule,
    /// JSON pointer (RFC 6901) of the offending field, or of where a required field is missing.
    pub path: String,
    /// The container the finding is about, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// `policy_violation`.
    #[serde(default)]
    pub finding_type: FindingType,
    /// The severity (the rule's default, or the configured one).
    pub severity: Severity,
    /// What is wrong, for people.
    pub message: String,
}

impl Finding {
    /// The identity of a finding across scans: SHA-256 (hex) of cluster, repository, rule,
    /// side, group, kind, namespace, name, container and path. Severity and message are not
    /// part of it.
    pub fn fingerprint(&self, cluster: &str, repository: &str) -> String {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        let k = &self.resource;
        for part in [
            cluster,
            repository,
            self.rule.as_str(),
            self.side.as_str(),
            &k.group,
            &k.kind,
            k.namespace.as_deref().unwrap_or(""),
            &k.name,
            self.container.as_deref().unwrap_or(""),
            &self.path,
        ] {
            h.update((part.len() as u64).to_be_bytes());
            h.update(part.as_bytes());
        }
        hex::encode(h.finalize())
    }
}

/// Counts of findings, apart from the drift summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FindingSummary {
    /// Findings in all.
    pub findings: usize,
    /// By severity.
    pub by_severity: BTreeMap<Severity, usize>,
    /// By rule.
    pub by_rule: BTreeMap<Rule, usize>,
}

impl FindingSummary {
    /// Counts a list of findings.
    pub fn of(findings: &[Finding]) -> Self {
        let mut s = FindingSummary { findings: findings.len(), ..Default::default() };
        for f in findings {
            *s.by_severity.entry(f.severity).or_default() += 1;
            *s.by_rule.entry(f.rule).or_default() += 1;
        }
        s
    }
}

/// The settings of one rule (`policies.rules.<id>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSetting {
    /// Whether the rule runs (default true).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Its severity (default: [`Rule::default_severity`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
}

fn yes() -> bool {
    true
}

fn both_sides() -> Vec<Side> {
    Side::ALL.to_vec()
}

/// `policies:` of drift.yaml: which sides are checked, the labels every object must carry, and
/// each rule's settings. Validated without I/O ([`PolicyConfig::validate`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// Whether scans check policies at all (default false).
    #[serde(default)]
    pub enabled: bool,
    /// The sides checked (default both: `[desired, live]`).
    #[serde(default = "both_sides")]
    pub on: Vec<Side>,
    /// Labels every object must carry (`required-labels`; default none).
    #[serde(default)]
    pub required_labels: Vec<String>,
    /// Settings per rule id; rules not named run at their default severity.
    #[serde(default)]
    pub rules: BTreeMap<Rule, RuleSetting>,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig { enabled: false, on: both_sides(), required_labels: Vec::new(), rules: BTreeMap::new() }
    }
}

impl PolicyConfig {
    /// Checks the settings: at least one side, label names that are valid Kubernetes label keys
    /// (an optional DNS-subdomain prefix and `/`, then 1 to 63 letters, digits, `-`, `_`, `.`,
    /// starting and ending with a letter or digit), each named once.
    pub fn validate(&self) -> crate::Result<()> {
        let bad = |m: String| Err(crate::Error::config(m));
        if self.on.is_empty() {
            return bad("`policies.on` is empty: name `desired`, `live` or both".into());
        }
        let mut seen = std::collections::BTreeSet::new();
        for label in &self.required_labels {
            if !valid_label_key(label) {
                return bad(format!(
                    "`policies.required_labels`: {label:?} is not a label key (an optional DNS prefix and `/`, then 1 to \
                     63 letters, digits, `-`, `_` or `.`, starting and ending with a letter or digit)"
                ));
            }
            if !seen.insert(label) {
                return bad(format!("`policies.required_labels`: {label:?} is listed twice"));
            }
        }
        Ok(())
    }
}

fn valid_label_key(key: &str) -> bool {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let alnum = |c: char| c.is_ascii_alphanumeric();
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.'))
        && name.starts_with(alnum)
        && name.ends_with(alnum);
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && l.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && l.starts_with(alnum)
                    && l.ends_with(alnum)
            })
    });
    name_ok && prefix_ok
}
