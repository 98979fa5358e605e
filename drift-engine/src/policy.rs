//! Policy checks (opt-in, `policies:` in drift.yaml, `--policies` for `drift diff`): rules
//! evaluated over one object, as Git declares it (the `desired` side) or as the cluster runs it
//! (the `live` side), each failure a [`Finding`] of type `policy_violation` with the rule's id, a
//! severity, the object's key, the JSON pointer of the offending field (or of where a required
//! field is missing) and, for a container, its name. Findings are not drifts: a scan report
//! carries them in a list of their own ([`drift_model::ScanReport::findings`]), stores keep them in a
//! table of their own, and they count in no drift summary. docs/policies.md lists the rules.
//!
//! Pod specs are found in Pods (`spec`), Deployments, StatefulSets, DaemonSets, ReplicaSets and
//! Jobs (`spec.template.spec`) and CronJobs (`spec.jobTemplate.spec.template.spec`); containers,
//! init containers and ephemeral containers are checked (ephemeral containers take no
//! resources, so the resource rules skip them). `required-labels` looks at the labels of any
//! object. No rule reads anything but a pod spec and `metadata.labels`: a Secret's data is never
//! read, so it never reaches a finding.
//!
//! ```
//! use drift_engine::policy::{Policy, PolicyConfig, Rule, Side};
//! use serde_json::json;
//!
//! let deployment = json!({
//!     "apiVersion": "apps/v1", "kind": "Deployment",
//!     "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
//!     "spec": {"template": {"spec": {
//!         "securityContext": {"runAsNonRoot": true},
//!         "containers": [{"name": "web", "image": "nginx:latest",
//!             "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
//!                           "limits": {"cpu": "1", "memory": "128Mi"}}}]}}}
//! });
//! let config = PolicyConfig { required_labels: vec!["team".into()], ..PolicyConfig::default() };
//! let policy = Policy::new(&config).unwrap();
//! let findings = policy.evaluate(&deployment, Side::Desired);
//! let found: Vec<(Rule, &str)> = findings.iter().map(|f| (f.rule, f.path.as_str())).collect();
//! assert_eq!(found, [
//!     (Rule::ImageTag, "/spec/template/spec/containers/0/image"),
//!     (Rule::RequiredLabels, "/metadata/labels/team"),
//! ]);
//! assert_eq!(findings[0].container.as_deref(), Some("web"));
//! assert_eq!(findings[0].severity.as_str(), "MEDIUM");
//! ```

use serde_json::Value;

use drift_model::drift::Severity;
pub use drift_model::finding::*;
use drift_model::{Resource, ResourceKey};

/// The rules of a configuration, ready to evaluate objects. `Policy::default()` runs every rule
/// at its default severity on both sides and requires no label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    sides: Vec<Side>,
    rules: [Option<Severity>; 8],
    required_labels: Vec<String>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            sides: Side::ALL.to_vec(),
            rules: Rule::ALL.map(|r| Some(r.default_severity())),
            required_labels: Vec::new(),
        }
    }
}

impl Policy {
    /// The policy of a configuration (validated first). `enabled` is the caller's business: a
    /// policy built from a configuration that is off still evaluates.
    pub fn new(config: &PolicyConfig) -> drift_model::Result<Self> {
        config.validate()?;
        let mut policy = Policy::default();
        let mut sides = config.on.clone();
        sides.sort();
        sides.dedup();
        policy.sides = sides;
        for (rule, setting) in &config.rules {
            policy.rules[rule.index()] =
                setting.enabled.then(|| setting.severity.unwrap_or_else(|| rule.default_severity()));
        }
        policy.required_labels = config.required_labels.clone();
        Ok(policy)
    }

    /// The sides this policy checks, sorted.
    pub fn sides(&self) -> &[Side] {
        &self.sides
    }

    /// Whether it checks this side.
    pub fn checks(&self, side: Side) -> bool {
        self.sides.contains(&side)
    }

    /// The severity of a rule, `None` when it is disabled.
    pub fn severity(&self, rule: Rule) -> Option<Severity> {
        self.rules[rule.index()]
    }

    /// The findings of one object on one side (whether this policy checks that side or not),
    /// sorted by rule, then path. An object without `apiVersion`, `kind` or `metadata.name`
    /// has none.
    pub fn check(&self, resource: &Resource, side: Side) -> Vec<Finding> {
        self.findings(&resource.key, &resource.object, side)
    }

    /// The findings of one object given as JSON (see [`Policy::check`]).
    pub fn evaluate(&self, object: &Value, side: Side) -> Vec<Finding> {
        match Resource::from_object(object.clone()) {
            Ok(r) => self.findings(&r.key, object, side),
            Err(_) => Vec::new(),
        }
    }

    fn findings(&self, key: &ResourceKey, object: &Value, side: Side) -> Vec<Finding> {
        let mut out = Vec::new();
        let mut add = |rule: Rule, path: String, container: Option<&str>, message: String| {
            if let Some(severity) = self.severity(rule) {
                out.push(Finding {
                    resource: key.clone(),
                    side,
                    rule,
                    path,
                    container: container.map(str::to_owned),
                    finding_type: FindingType::PolicyViolation,
                    severity,
                    message,
                });
            }
        };
        if let Some(at) = pod_spec_path(&key.group, &key.kind)
            && let Some(spec) = object.pointer(at).filter(|s| s.is_object())
        {
            check_pod_spec(at, spec, &mut add);
        }
        if self.severity(Rule::RequiredLabels).is_some() {
            let labels = object.pointer("/metadata/labels");
            for label in &self.required_labels {
                if labels.and_then(|l| l.get(label)).is_none() {
                    add(
                        Rule::RequiredLabels,
                        format!("/metadata/labels/{}", escape(label)),
                        None,
                        format!("label {label:?} is missing"),
                    );
                }
            }
        }
        out.sort_by(|a, b| (a.rule, &a.path, &a.container).cmp(&(b.rule, &b.path, &b.container)));
        // Two containers of one name (refused by the API server, possible in Git) would repeat
        // a pod-level finding told per container.
        out.dedup_by(|a, b| (a.rule, &a.path, &a.container) == (b.rule, &b.path, &b.container));
        out
    }
}

/// Where the pod spec of a kind is (a JSON pointer), for the kinds that have one.
pub fn pod_spec_path(group: &str, kind: &str) -> Option<&'static str> {
    match (group, kind) {
        ("", "Pod") => Some("/spec"),
        ("apps", "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet") | ("batch", "Job") => {
            Some("/spec/template/spec")
        }
        ("batch", "CronJob") => Some("/spec/jobTemplate/spec/template/spec"),
        _ => None,
    }
}

/// RFC 6901 escaping of one reference token.
fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

fn check_pod_spec(at: &str, spec: &Value, add: &mut impl FnMut(Rule, String, Option<&str>, String)) {
    for (field, rule, what) in
        [("hostNetwork", Rule::HostNetwork, "the host's network"), ("hostPID", Rule::HostPid, "the host's process ids")]
    {
        if spec.get(field) == Some(&Value::Bool(true)) {
            add(rule, format!("{at}/{field}"), None, format!("the pod uses {what} ({field}: true)"));
        }
    }
    let pod_security = spec.get("securityContext");
    for list in CONTAINER_LISTS {
        let Some(containers) = spec.get(list).and_then(Value::as_array) else { continue };
        for (i, c) in containers.iter().enumerate() {
            if !c.is_object() {
                continue;
            }
            let here = format!("{at}/{list}/{i}");
            let name = c.get("name").and_then(Value::as_str);
            let who = name.map_or_else(|| format!("container {i} of {list}"), |n| format!("container {n:?}"));
            check_image(c, &here, name, &who, add);
            if list != "ephemeralContainers" {
                for (rule, kind, noun) in
                    [(Rule::ResourceRequests, "requests", "request"), (Rule::ResourceLimits, "limits", "limit")]
                {
                    for resource in ["cpu", "memory"] {
                        if c.pointer(&format!("/resources/{kind}/{resource}")).is_none_or(Value::is_null) {
                            add(
                                rule,
                                format!("{here}/resources/{kind}/{resource}"),
                                name,
                                format!("{who} has no {resource} {noun}"),
                            );
                        }
                    }
                }
            }
            let security = c.get("securityContext");
            if security.and_then(|s| s.get("privileged")) == Some(&Value::Bool(true)) {
                add(
                    Rule::Privileged,
                    format!("{here}/securityContext/privileged"),
                    name,
                    format!("{who} is privileged"),
                );
            }
            check_root(at, pod_security, &here, security, name, &who, add);
        }
    }
}

fn check_image(
    c: &Value,
    here: &str,
    name: Option<&str>,
    who: &str,
    add: &mut impl FnMut(Rule, String, Option<&str>, String),
) {
    let Some(image) = c.get("image").and_then(Value::as_str).filter(|i| !i.is_empty()) else { return };
    if image.contains('@') {
        return; // pinned by digest
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    let problem = match last.rsplit_once(':') {
        None => "has no tag (it means `latest`)",
        Some((_, "latest")) => "uses the tag `latest`",
        Some(_) => return,
    };
    add(Rule::ImageTag, format!("{here}/image"), name, format!("{who}: image {image:?} {problem}"));
}

/// `run-as-root`: the container's `runAsUser` wins over the pod's, and so does its
/// `runAsNonRoot`. User 0 fails (at the field that sets it); otherwise a container needs
/// `runAsNonRoot: true` or a non-zero `runAsUser`, from either level.
fn check_root(
    at: &str,
    pod: Option<&Value>,
    here: &str,
    container: Option<&Value>,
    name: Option<&str>,
    who: &str,
    add: &mut impl FnMut(Rule, String, Option<&str>, String),
) {
    fn field<'v>(level: Option<&'v Value>, f: &str) -> Option<&'v Value> {
        level.and_then(|s| s.get(f)).filter(|v| !v.is_null())
    }
    let user = field(container, "runAsUser")
        .map(|v| (v, format!("{here}/securityContext/runAsUser")))
        .or_else(|| field(pod, "runAsUser").map(|v| (v, format!("{at}/securityContext/runAsUser"))));
    match user {
        Some((v, path)) if v.as_i64() == Some(0) || v.as_str() == Some("0") => {
            add(Rule::RunAsRoot, path, name, format!("{who} runs as root (runAsUser: 0)"));
        }
        Some(_) => {}
        None => {
            let non_root = field(container, "runAsNonRoot").or_else(|| field(pod, "runAsNonRoot"));
            if non_root != Some(&Value::Bool(true)) {
                add(
                    Rule::RunAsRoot,
                    format!("{here}/securityContext/runAsNonRoot"),
                    name,
                    format!("{who} may run as root (neither runAsNonRoot: true nor a non-zero runAsUser)"),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod_spec(kind: &str, spec: Value) -> Value {
        let (api, inner) = match kind {
            "Pod" => ("v1", spec),
            "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" => {
                ("apps/v1", json!({"template": {"spec": spec}}))
            }
            "Job" => ("batch/v1", json!({"template": {"spec": spec}})),
            "CronJob" => ("batch/v1", json!({"jobTemplate": {"spec": {"template": {"spec": spec}}}})),
            _ => ("v1", spec),
        };
        json!({"apiVersion": api, "kind": kind, "metadata": {"name": "x", "namespace": "a"}, "spec": inner})
    }

    /// A container that passes every container rule.
    fn good(name: &str) -> Value {
        json!({"name": name, "image": "nginx:1.27",
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "128Mi"}},
            "securityContext": {"runAsNonRoot": true}})
    }

    fn found(policy: &Policy, object: &Value) -> Vec<(Rule, String, Option<String>)> {
        policy.evaluate(object, Side::Desired).into_iter().map(|f| (f.rule, f.path, f.container)).collect()
    }

    fn with(mut c: Value, pointer: &str, v: Value) -> Value {
        let (parent, last) = pointer.rsplit_once('/').unwrap();
        let mut target = &mut c;
        for token in parent.split('/').skip(1) {
            target = target.as_object_mut().unwrap().entry(token).or_insert_with(|| json!({}));
        }
        target.as_object_mut().unwrap().insert(last.to_owned(), v);
        c
    }

    #[test]
    fn a_good_pod_spec_passes_in_every_kind() {
        for kind in ["Pod", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob"] {
            let o = pod_spec(kind, json!({"containers": [good("web")], "initContainers": [good("init")]}));
            assert_eq!(found(&Policy::default(), &o), vec![], "{kind}");
        }
    }

    #[test]
    fn every_pod_spec_location_is_checked() {
        let at = [
            ("Pod", "/spec"),
            ("Deployment", "/spec/template/spec"),
            ("StatefulSet", "/spec/template/spec"),
            ("DaemonSet", "/spec/template/spec"),
            ("ReplicaSet", "/spec/template/spec"),
            ("Job", "/spec/template/spec"),
            ("CronJob", "/spec/jobTemplate/spec/template/spec"),
        ];
        for (kind, spec) in at {
            let o = pod_spec(kind, json!({"hostPID": true, "containers": [with(good("web"), "/image", json!("web"))]}));
            assert_eq!(
                found(&Policy::default(), &o),
                vec![
                    (Rule::ImageTag, format!("{spec}/containers/0/image"), Some("web".into())),
                    (Rule::HostPid, format!("{spec}/hostPID"), None),
                ],
                "{kind}"
            );
        }
        // A ConfigMap has no pod spec, even if it has a field named so.
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "spec": {"template": {"spec": {"hostNetwork": true}}}});
        assert_eq!(found(&Policy::default(), &cm), vec![]);
    }

    #[test]
    fn init_and_ephemeral_containers_are_checked_and_ephemeral_ones_need_no_resources() {
        let ephemeral = json!({"name": "debug", "image": "busybox", "securityContext": {"privileged": true}});
        let o = pod_spec(
            "Pod",
            json!({"containers": [good("web")], "initContainers": [with(good("init"), "/image", json!("x:latest"))],
                   "ephemeralContainers": [ephemeral]}),
        );
        assert_eq!(
            found(&Policy::default(), &o),
            vec![
                (Rule::ImageTag, "/spec/ephemeralContainers/0/image".into(), Some("debug".into())),
                (Rule::ImageTag, "/spec/initContainers/0/image".into(), Some("init".into())),
                (
                    Rule::Privileged,
                    "/spec/ephemeralContainers/0/securityContext/privileged".into(),
                    Some("debug".into())
                ),
                (
                    Rule::RunAsRoot,
                    "/spec/ephemeralContainers/0/securityContext/runAsNonRoot".into(),
                    Some("debug".into())
                ),
            ]
        );
    }

    #[test]
    fn image_tags() {
        let policy = Policy::default();
        let image = |i: &str| {
            let o = pod_spec("Pod", json!({"containers": [with(good("web"), "/image", json!(i))]}));
            policy.evaluate(&o, Side::Live).into_iter().map(|f| f.message).collect::<Vec<_>>()
        };
        for pass in [
            "nginx:1.27",
            "registry.example:5000/team/web:2.0.1",
            "nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "registry.example:5000/web:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(image(pass), Vec::<String>::new(), "{pass}");
        }
        assert_eq!(image("nginx"), vec![r#"container "web": image "nginx" has no tag (it means `latest`)"#]);
        assert_eq!(image("registry.example:5000/web").len(), 1, "a registry port is not a tag");
        assert_eq!(image("nginx:latest"), vec![r#"container "web": image "nginx:latest" uses the tag `latest`"#]);
        assert_eq!(image("ghcr.io/a/b:latest").len(), 1);
    }

    #[test]
    fn resource_requests_and_limits_of_cpu_and_memory() {
        let mut c = good("web");
        c["resources"] = json!({"requests": {"cpu": "100m"}, "limits": {"memory": "1Gi"}});
        let o = pod_spec("Deployment", json!({"containers": [c]}));
        let p = "/spec/template/spec/containers/0/resources";
        assert_eq!(
            found(&Policy::default(), &o),
            vec![
                (Rule::ResourceRequests, format!("{p}/requests/memory"), Some("web".into())),
                (Rule::ResourceLimits, format!("{p}/limits/cpu"), Some("web".into())),
            ]
        );
        let mut bare = good("web");
        bare.as_object_mut().unwrap().remove("resources");
        let o = pod_spec("Pod", json!({"containers": [bare]}));
        assert_eq!(found(&Policy::default(), &o).len(), 4, "both resources, both kinds");
    }

    #[test]
    fn privileged_host_network_and_host_pid() {
        let o = pod_spec(
            "DaemonSet",
            json!({"hostNetwork": true, "hostPID": false,
                   "containers": [with(good("agent"), "/securityContext/privileged", json!(true))]}),
        );
        let s = "/spec/template/spec";
        assert_eq!(
            found(&Policy::default(), &o),
            vec![
                (Rule::Privileged, format!("{s}/containers/0/securityContext/privileged"), Some("agent".into())),
                (Rule::HostNetwork, format!("{s}/hostNetwork"), None),
            ]
        );
        let off = pod_spec(
            "DaemonSet",
            json!({"hostNetwork": false, "containers": [with(good("agent"), "/securityContext/privileged", json!(false))]}),
        );
        assert_eq!(found(&Policy::default(), &off), vec![]);
    }

    #[test]
    fn run_as_root_reads_the_container_then_the_pod() {
        let root = |pod: Value, container: Value| {
            let mut c = good("web");
            c["securityContext"] = container;
            let o = pod_spec("Pod", json!({"securityContext": pod, "containers": [c]}));
            found(&Policy::default(), &o).into_iter().map(|(_, path, _)| path).collect::<Vec<_>>()
        };
        let none: Vec<String> = Vec::new();
        assert_eq!(root(json!({"runAsNonRoot": true}), json!({})), none, "the pod says non-root");
        assert_eq!(root(json!({"runAsUser": 1000}), json!({})), none, "the pod sets a user");
        assert_eq!(root(json!({}), json!({"runAsUser": 1000})), none, "the container sets a user");
        assert_eq!(root(json!({}), json!({})), vec!["/spec/containers/0/securityContext/runAsNonRoot"]);
        assert_eq!(
            root(json!({"runAsNonRoot": true}), json!({"runAsNonRoot": false})),
            vec!["/spec/containers/0/securityContext/runAsNonRoot"],
            "the container's false wins"
        );
        assert_eq!(root(json!({"runAsUser": 0}), json!({})), vec!["/spec/securityContext/runAsUser"]);
        assert_eq!(
            root(json!({"runAsUser": 1000, "runAsNonRoot": true}), json!({"runAsUser": 0})),
            vec!["/spec/containers/0/securityContext/runAsUser"],
            "user 0 in the container wins, whatever runAsNonRoot says"
        );
        assert_eq!(root(json!({"runAsUser": 0}), json!({"runAsUser": 1000})), none, "the container's user wins");
    }

    #[test]
    fn required_labels_on_any_kind_with_escaped_paths() {
        let config = PolicyConfig {
            required_labels: vec!["team".into(), "app.kubernetes.io/name".into()],
            ..PolicyConfig::default()
        };
        let policy = Policy::new(&config).unwrap();
        let ns =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "labels": {"team": "a"}}});
        assert_eq!(
            found(&policy, &ns),
            vec![(Rule::RequiredLabels, "/metadata/labels/app.kubernetes.io~1name".into(), None)]
        );
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "a"},
            "data": {"password": "aHVudGVyMg=="}});
        let findings = policy.evaluate(&secret, Side::Live);
        assert_eq!(findings.len(), 2);
        let text = serde_json::to_string(&findings).unwrap();
        assert!(!text.contains("aHVudGVyMg") && !text.contains("password"), "a Secret's data never reaches a finding");
    }

    #[test]
    fn rules_can_be_disabled_and_their_severity_changed() {
        let config: PolicyConfig = serde_json::from_value(json!({
            "enabled": true, "on": ["live"],
            "rules": {"image-tag": {"severity": "CRITICAL"}, "run-as-root": {"enabled": false},
                      "resource-requests": {"enabled": false}, "resource-limits": {"enabled": false}}
        }))
        .unwrap();
        let policy = Policy::new(&config).unwrap();
        assert_eq!(policy.sides(), [Side::Live]);
        assert!(!policy.checks(Side::Desired));
        let o = pod_spec("Pod", json!({"containers": [{"name": "web", "image": "nginx"}]}));
        let f = policy.evaluate(&o, Side::Live);
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].rule, f[0].severity, f[0].side), (Rule::ImageTag, Severity::Critical, Side::Live));
        assert_eq!(serde_json::to_value(&f[0]).unwrap()["finding_type"], "policy_violation");
    }

    #[test]
    fn bad_configuration_is_refused_with_a_clear_error() {
        let parse = |v: Value| serde_json::from_value::<PolicyConfig>(v).map_err(|e| e.to_string());
        assert!(parse(json!({"rules": {"image-tags": {}}})).unwrap_err().contains("unknown variant `image-tags`"));
        assert!(
            parse(json!({"rules": {"image-tag": {"level": "LOW"}}})).unwrap_err().contains("unknown field `level`")
        );
        assert!(parse(json!({"on": ["cluster"]})).unwrap_err().contains("unknown variant `cluster`"));
        assert!(parse(json!({"enable": true})).unwrap_err().contains("unknown field `enable`"));
        let invalid = |c: PolicyConfig| c.validate().unwrap_err().to_string();
        assert!(invalid(PolicyConfig { on: vec![], ..Default::default() }).contains("`policies.on` is empty"));
        for label in ["", "-team", "a/b/c", "Example.com/x", &"x".repeat(64), "team!"] {
            let e = invalid(PolicyConfig { required_labels: vec![label.to_owned()], ..Default::default() });
            assert!(e.contains("is not a label key"), "{label:?}: {e}");
        }
        let twice = PolicyConfig { required_labels: vec!["team".into(), "team".into()], ..Default::default() };
        assert!(invalid(twice).contains("listed twice"));
        let ok = PolicyConfig {
            required_labels: vec!["team".into(), "app.kubernetes.io/name".into()],
            ..Default::default()
        };
        ok.validate().unwrap();
    }

    #[test]
    fn rule_ids_round_trip() {
        for rule in Rule::ALL {
            assert_eq!(rule.as_str().parse::<Rule>().unwrap(), rule);
            assert_eq!(serde_json::to_value(rule).unwrap(), json!(rule.as_str()));
        }
        assert!("image_tag".parse::<Rule>().is_err());
    }

    #[test]
    fn the_fingerprint_names_the_finding_not_its_severity_or_message() {
        let o = pod_spec("Pod", json!({"containers": [{"name": "web", "image": "nginx"}]}));
        let f = Policy::default().evaluate(&o, Side::Desired).remove(0);
        let mut g = f.clone();
        g.severity = Severity::Critical;
        g.message = "other".into();
        assert_eq!(f.fingerprint("c", "r"), g.fingerprint("c", "r"));
        let mut live = f.clone();
        live.side = Side::Live;
        assert_ne!(f.fingerprint("c", "r"), live.fingerprint("c", "r"));
        assert_ne!(f.fingerprint("c", "r"), f.fingerprint("c", "other"));
    }
}
