//! Defaulting of the common kinds, as the Kubernetes API server applies it on every write
//! (`SetDefaults_*` of the versioned types), plus the zero values the server's serialisation
//! shows (`status: {}`, `resources: {}`, `creationTimestamp: null` in templates) and the
//! canonical form of resource quantities.

use serde_json::{Map, Value, json};

use crate::quantity::{canonicalize_map, canonicalize_value};

/// Values the server allocates while defaulting (cluster IPs, node ports).
pub trait Allocator {
    /// A free cluster IP.
    fn cluster_ip(&mut self) -> String;
    /// A free node port.
    fn node_port(&mut self) -> u16;
}

fn obj(v: &mut Value) -> Option<&mut Map<String, Value>> {
    v.as_object_mut()
}

/// Set `key` to `val` when it is absent or null.
fn default(map: &mut Map<String, Value>, key: &str, val: Value) {
    match map.get(key) {
        None | Some(Value::Null) => {
            map.insert(key.to_owned(), val);
        }
        Some(_) => {}
    }
}

/// The object map at `key`, created empty when absent.
fn child<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    if !matches!(map.get(key), Some(Value::Object(_))) {
        map.insert(key.to_owned(), Value::Object(Map::new()));
    }
    match map.get_mut(key) {
        Some(Value::Object(m)) => m,
        // Inserted as an object just above.
        _ => unreachable!("child map was just inserted"),
    }
}

fn each_in(map: &mut Map<String, Value>, key: &str, mut f: impl FnMut(&mut Map<String, Value>)) {
    if let Some(Value::Array(items)) = map.get_mut(key) {
        for item in items.iter_mut() {
            if let Some(m) = item.as_object_mut() {
                f(m);
            }
        }
    }
}

/// Apply the defaults of `kind` to `object` (a full object with metadata), as decoding does
/// on the API server, before managedFields are recorded. See [`prepare`] for what follows.
pub fn apply(kind: &str, object: &mut Value) {
    let Some(o) = obj(object) else { return };
    match kind {
        "Namespace" => {
            let name = o.get("metadata").and_then(|m| m.get("name")).cloned().unwrap_or(Value::Null);
            let labels = child(child(o, "metadata"), "labels");
            labels.insert("kubernetes.io/metadata.name".into(), name);
        }
        "Secret" => {
            default(o, "type", json!("Opaque"));
            if let Some(Value::Object(string_data)) = o.remove("stringData") {
                use base64::Engine as _;
                let data = child(o, "data");
                for (k, v) in string_data {
                    let s = v.as_str().unwrap_or_default();
                    data.insert(k, json!(base64::engine::general_purpose::STANDARD.encode(s)));
                }
            }
        }
        "Service" => service(o),
        "PersistentVolumeClaim" => {
            let spec = child(o, "spec");
            default(spec, "volumeMode", json!("Filesystem"));
            resources(spec);
            default(child(o, "status"), "phase", json!("Pending"));
        }
        "Deployment" => {
            let spec = child(o, "spec");
            default(spec, "replicas", json!(1));
            let strategy = child(spec, "strategy");
            default(strategy, "type", json!("RollingUpdate"));
            if strategy.get("type") == Some(&json!("RollingUpdate")) {
                let ru = child(strategy, "rollingUpdate");
                default(ru, "maxUnavailable", json!("25%"));
                default(ru, "maxSurge", json!("25%"));
            }
            default(spec, "revisionHistoryLimit", json!(10));
            default(spec, "progressDeadlineSeconds", json!(600));
            pod_template(child(spec, "template"));
            child(o, "status");
        }
        "StatefulSet" => {
            let spec = child(o, "spec");
            default(spec, "replicas", json!(1));
            default(spec, "podManagementPolicy", json!("OrderedReady"));
            let us = child(spec, "updateStrategy");
            // Only a strategy whose type is defaulted gets a rollingUpdate; one given as
            // RollingUpdate gets its partition only if it has a rollingUpdate.
            if us.get("type").and_then(Value::as_str).is_none_or(str::is_empty) {
                us.insert("type".into(), json!("RollingUpdate"));
                child(us, "rollingUpdate");
            }
            if us.get("type") == Some(&json!("RollingUpdate"))
                && let Some(Value::Object(ru)) = us.get_mut("rollingUpdate")
            {
                default(ru, "partition", json!(0));
            }
            default(spec, "revisionHistoryLimit", json!(10));
            let policy = child(spec, "persistentVolumeClaimRetentionPolicy");
            default(policy, "whenDeleted", json!("Retain"));
            default(policy, "whenScaled", json!("Retain"));
            each_in(spec, "volumeClaimTemplates", |pvc| {
                default(pvc, "apiVersion", json!("v1"));
                default(pvc, "kind", json!("PersistentVolumeClaim"));
                let meta = child(pvc, "metadata");
                default(meta, "creationTimestamp", Value::Null);
                let pspec = child(pvc, "spec");
                default(pspec, "volumeMode", json!("Filesystem"));
                resources(pspec);
                default(child(pvc, "status"), "phase", json!("Pending"));
            });
            pod_template(child(spec, "template"));
            let status = child(o, "status");
            default(status, "replicas", json!(0));
            default(status, "availableReplicas", json!(0));
        }
        "DaemonSet" => {
            let spec = child(o, "spec");
            let us = child(spec, "updateStrategy");
            default(us, "type", json!("RollingUpdate"));
            if us.get("type") == Some(&json!("RollingUpdate")) {
                let ru = child(us, "rollingUpdate");
                default(ru, "maxUnavailable", json!(1));
                default(ru, "maxSurge", json!(0));
            }
            default(spec, "revisionHistoryLimit", json!(10));
            pod_template(child(spec, "template"));
            let status = child(o, "status");
            for k in ["currentNumberScheduled", "desiredNumberScheduled", "numberMisscheduled", "numberReady"] {
                default(status, k, json!(0));
            }
        }
        "Job" => {
            let spec = child(o, "spec");
            let no_counts = matches!(spec.get("completions"), None | Some(Value::Null))
                && matches!(spec.get("parallelism"), None | Some(Value::Null));
            if no_counts {
                spec.insert("completions".into(), json!(1));
                spec.insert("parallelism".into(), json!(1));
            }
            default(spec, "parallelism", json!(1));
            let per_index = !matches!(spec.get("backoffLimitPerIndex"), None | Some(Value::Null));
            default(spec, "backoffLimit", json!(if per_index { i64::from(i32::MAX) } else { 6 }));
            default(spec, "completionMode", json!("NonIndexed"));
            default(spec, "suspend", json!(false));
            let failure_policy = !matches!(spec.get("podFailurePolicy"), None | Some(Value::Null));
            default(spec, "podReplacementPolicy", json!(if failure_policy { "Failed" } else { "TerminatingOrFailed" }));
            if let Some(Value::Object(pfp)) = spec.get_mut("podFailurePolicy") {
                each_in(pfp, "rules", |rule| {
                    each_in(rule, "onPodConditions", |c| {
                        if c.get("status").and_then(Value::as_str).is_none_or(str::is_empty) {
                            c.insert("status".into(), json!("True"));
                        }
                    });
                });
            }
            // The Job's labels default to its pod template's, when it has none of its own.
            let template_labels =
                spec.get("template").and_then(|t| t.get("metadata")).and_then(|m| m.get("labels")).cloned();
            pod_template(child(spec, "template"));
            let meta = child(o, "metadata");
            let own = meta.get("labels").and_then(Value::as_object).is_some_and(|l| !l.is_empty());
            if let Some(Value::Object(l)) = template_labels
                && !own
                && !l.is_empty()
            {
                meta.insert("labels".into(), Value::Object(l));
            }
            child(o, "status");
        }
        "CronJob" => {
            let spec = child(o, "spec");
            default(spec, "concurrencyPolicy", json!("Allow"));
            default(spec, "suspend", json!(false));
            default(spec, "successfulJobsHistoryLimit", json!(3));
            default(spec, "failedJobsHistoryLimit", json!(1));
            let jt = child(spec, "jobTemplate");
            default(child(jt, "metadata"), "creationTimestamp", Value::Null);
            pod_template(child(child(jt, "spec"), "template"));
            child(o, "status");
        }
        "Ingress" => {
            let status = child(o, "status");
            child(status, "loadBalancer");
        }
        "NetworkPolicy" => {
            let spec = child(o, "spec");
            child(spec, "podSelector");
            let nonempty = |v: Option<&Value>| v.and_then(Value::as_array).is_some_and(|a| !a.is_empty());
            if !nonempty(spec.get("policyTypes")) {
                let mut types = vec![json!("Ingress")];
                if nonempty(spec.get("egress")) {
                    types.push(json!("Egress"));
                }
                spec.insert("policyTypes".into(), Value::Array(types));
            }
            for dir in ["ingress", "egress"] {
                each_in(spec, dir, |rule| {
                    each_in(rule, "ports", |p| default(p, "protocol", json!("TCP")));
                });
            }
        }
        "PodDisruptionBudget" => {
            // The disruption controller fills the status in; on create it is all zeros.
            child(o, "spec");
            let status = child(o, "status");
            for k in ["currentHealthy", "desiredHealthy", "disruptionsAllowed", "expectedPods"] {
                default(status, k, json!(0));
            }
        }
        "RoleBinding" | "ClusterRoleBinding" => {
            if let Some(Value::Object(r)) = o.get_mut("roleRef")
                && r.get("apiGroup").and_then(Value::as_str).is_none_or(str::is_empty)
            {
                r.insert("apiGroup".into(), json!("rbac.authorization.k8s.io"));
            }
            each_in(o, "subjects", |s| {
                let empty = s.get("apiGroup").and_then(Value::as_str).is_none_or(str::is_empty);
                match s.get("kind").and_then(Value::as_str) {
                    Some("User" | "Group") if empty => {
                        s.insert("apiGroup".into(), json!("rbac.authorization.k8s.io"));
                    }
                    // A ServiceAccount's apiGroup is "", which the API server does not write.
                    _ if empty => {
                        s.remove("apiGroup");
                    }
                    _ => {}
                }
            });
        }
        "Pod" => {
            let spec = child(o, "spec");
            pod_spec(spec);
            // SetDefaults_Pod: what a Pod gets and a pod template does not.
            for list in ["containers", "initContainers"] {
                each_in(spec, list, |c| {
                    let limits = c.get("resources").and_then(|r| r.get("limits")).and_then(Value::as_object).cloned();
                    if let Some(limits) = limits {
                        let requests = child(child(c, "resources"), "requests");
                        for (k, v) in limits {
                            requests.entry(k).or_insert(v);
                        }
                    }
                });
            }
            default(spec, "enableServiceLinks", json!(true));
            if spec.get("hostNetwork") == Some(&json!(true)) {
                for list in ["containers", "initContainers"] {
                    each_in(spec, list, |c| {
                        each_in(c, "ports", |p| {
                            if p.get("hostPort").and_then(Value::as_i64).unwrap_or(0) == 0
                                && let Some(cp) = p.get("containerPort").cloned()
                            {
                                p.insert("hostPort".into(), cp);
                            }
                        });
                    });
                }
            }
        }
        "HorizontalPodAutoscaler" => {
            let spec = child(o, "spec");
            default(spec, "minReplicas", json!(1));
            let empty = spec.get("metrics").and_then(Value::as_array).is_none_or(Vec::is_empty);
            if empty {
                spec.insert(
                    "metrics".into(),
                    json!([{"type": "Resource", "resource": {"name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 80}}}]),
                );
            }
            each_in(spec, "metrics", |m| {
                for source in ["resource", "pods", "object", "external", "containerResource"] {
                    if let Some(Value::Object(s)) = m.get_mut(source)
                        && let Some(Value::Object(t)) = s.get_mut("target")
                    {
                        for q in ["value", "averageValue"] {
                            if let Some(v) = t.get_mut(q) {
                                canonicalize_value(v);
                            }
                        }
                    }
                }
            });
            if let Some(Value::Object(b)) = spec.get_mut("behavior") {
                // Every rule left unset takes the controller's historic behaviour; scale-down's
                // stabilization window stays unset (the controller's flag decides it).
                let rules = |b: &mut Map<String, Value>, key: &str, window: Option<i64>, policies: Value| {
                    let r = child(b, key);
                    if let Some(w) = window {
                        default(r, "stabilizationWindowSeconds", json!(w));
                    }
                    default(r, "selectPolicy", json!("Max"));
                    default(r, "policies", policies);
                };
                rules(
                    b,
                    "scaleUp",
                    Some(0),
                    json!([{"type": "Pods", "value": 4, "periodSeconds": 15},
                        {"type": "Percent", "value": 100, "periodSeconds": 15}]),
                );
                rules(b, "scaleDown", None, json!([{"type": "Percent", "value": 100, "periodSeconds": 15}]));
            }
            default(child(o, "status"), "desiredReplicas", json!(0));
        }
        "CustomResourceDefinition" => {
            let spec = child(o, "spec");
            default(child(spec, "conversion"), "strategy", json!("None"));
            let names = spec.get("names").cloned().unwrap_or(json!({}));
            let stored: Vec<Value> = spec
                .get("versions")
                .and_then(Value::as_array)
                .map(|vs| {
                    vs.iter()
                        .filter(|v| v.get("storage") == Some(&json!(true)))
                        .filter_map(|v| v.get("name").cloned())
                        .collect()
                })
                .unwrap_or_default();
            let status = child(o, "status");
            status.insert("acceptedNames".into(), names);
            status.insert(
                "conditions".into(),
                json!([
                    {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                     "message": "no conflicts found", "lastTransitionTime": null},
                    {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                     "message": "the initial names have been accepted", "lastTransitionTime": null},
                ]),
            );
            default(status, "storedVersions", Value::Array(stored));
        }
        _ => {}
    }
}

fn resources(spec: &mut Map<String, Value>) {
    if let Some(Value::Object(r)) = spec.get_mut("resources") {
        canonicalize_map(r.get_mut("limits"));
        canonicalize_map(r.get_mut("requests"));
    }
}

fn service(o: &mut Map<String, Value>) {
    let spec = child(o, "spec");
    default(spec, "type", json!("ClusterIP"));
    let ty = spec.get("type").and_then(Value::as_str).unwrap_or("ClusterIP").to_owned();
    default(spec, "sessionAffinity", json!("None"));
    if spec.get("sessionAffinity") == Some(&json!("None")) {
        spec.remove("sessionAffinityConfig");
    } else if spec.get("sessionAffinity") == Some(&json!("ClientIP")) {
        let ip = child(child(spec, "sessionAffinityConfig"), "clientIP");
        default(ip, "timeoutSeconds", json!(10800));
    }
    each_in(spec, "ports", |p| {
        default(p, "protocol", json!("TCP"));
        if let Some(port) = p.get("port").cloned() {
            default(p, "targetPort", port);
        }
    });
    if ty != "ExternalName" {
        default(spec, "internalTrafficPolicy", json!("Cluster"));
        if ty == "NodePort" || ty == "LoadBalancer" {
            default(spec, "externalTrafficPolicy", json!("Cluster"));
        }
        if ty == "LoadBalancer" {
            default(spec, "allocateLoadBalancerNodePorts", json!(true));
        }
    }
    let status = child(o, "status");
    child(status, "loadBalancer");
}

/// What the Service storage allocates after defaulting (and after managedFields are
/// recorded): cluster IPs, IP families and node ports, kept from the stored object on updates.
fn service_allocate(o: &mut Map<String, Value>, old: Option<&Value>, alloc: &mut dyn Allocator) {
    let old_spec = old.and_then(|v| v.get("spec"));
    let spec = child(o, "spec");
    let ty = spec.get("type").and_then(Value::as_str).unwrap_or("ClusterIP").to_owned();
    let old_ports: Vec<Value> =
        old_spec.and_then(|s| s.get("ports")).and_then(Value::as_array).cloned().unwrap_or_default();
    if ty == "NodePort" || ty == "LoadBalancer" {
        each_in(spec, "ports", |p| {
            if !p.contains_key("nodePort") {
                let kept = old_ports
                    .iter()
                    .find(|op| op.get("port") == p.get("port"))
                    .and_then(|op| op.get("nodePort"))
                    .cloned();
                let np = kept.unwrap_or_else(|| json!(alloc.node_port()));
                p.insert("nodePort".into(), np);
            }
        });
    }
    if ty == "ExternalName" {
        return;
    }
    for key in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
        if !spec.contains_key(key)
            && let Some(v) = old_spec.and_then(|s| s.get(key))
        {
            spec.insert(key.to_owned(), v.clone());
        }
    }
    if !spec.contains_key("clusterIP") {
        let ip = spec.get("clusterIPs").and_then(|c| c.get(0)).cloned().unwrap_or_else(|| json!(alloc.cluster_ip()));
        spec.insert("clusterIP".into(), ip);
    }
    let ip = spec.get("clusterIP").cloned().unwrap_or(Value::Null);
    default(spec, "clusterIPs", json!([ip]));
    default(spec, "ipFamilies", json!(["IPv4"]));
    default(spec, "ipFamilyPolicy", json!("SingleStack"));
}

/// What the storage strategies of the API server set after the managedFields of a write are
/// recorded (`PrepareForCreate`, allocations): so these fields have no manager, as on a real
/// server. `old` is the stored object on updates.
pub fn prepare(kind: &str, object: &mut Value, old: Option<&Value>, alloc: &mut dyn Allocator) {
    let Some(o) = obj(object) else { return };
    match kind {
        "Namespace" => {
            default(child(o, "spec"), "finalizers", json!(["kubernetes"]));
            default(child(o, "status"), "phase", json!("Active"));
        }
        "Service" => service_allocate(o, old, alloc),
        "Pod" if old.is_none() => pod_status(o),
        "Job" if old.is_none() => {
            let uid = o.get("metadata").and_then(|m| m.get("uid")).cloned().unwrap_or(Value::Null);
            let name = o.get("metadata").and_then(|m| m.get("name")).cloned().unwrap_or(Value::Null);
            let spec = child(o, "spec");
            let manual = spec.get("manualSelector") == Some(&json!(true));
            if !manual && !spec.contains_key("selector") {
                spec.insert("selector".into(), json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}));
                let tmpl = child(spec, "template");
                let labels = child(child(tmpl, "metadata"), "labels");
                default(labels, "batch.kubernetes.io/controller-uid", uid.clone());
                default(labels, "batch.kubernetes.io/job-name", name.clone());
                default(labels, "controller-uid", uid);
                default(labels, "job-name", name);
            }
        }
        _ => {}
    }
}

/// A Pod's status on create (`PrepareForCreate`): Pending, its QoS class, and the condition
/// that says scheduling gates hold it.
fn pod_status(o: &mut Map<String, Value>) {
    let spec = o.get("spec").cloned().unwrap_or(json!({}));
    let gated = spec.get("schedulingGates").and_then(Value::as_array).is_some_and(|g| !g.is_empty());
    let mut status = json!({"phase": "Pending", "qosClass": qos_class(&spec)});
    if gated {
        status["conditions"] = json!([{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
            "message": "Scheduling is blocked due to non-empty scheduling gates", "lastProbeTime": null,
            "lastTransitionTime": null}]);
    }
    o.insert("status".into(), status);
}

/// The QoS class of a pod spec, as the API server computes it from the requests and limits of
/// cpu and memory of all its containers: BestEffort without any, Guaranteed when every
/// container limits both and the requests equal the limits, Burstable otherwise.
pub fn qos_class(spec: &Value) -> &'static str {
    use std::collections::BTreeMap;
    let mut requests: BTreeMap<&str, i128> = BTreeMap::new();
    let mut limits: BTreeMap<&str, i128> = BTreeMap::new();
    let mut guaranteed = true;
    for list in ["containers", "initContainers"] {
        for c in spec.get(list).and_then(Value::as_array).into_iter().flatten() {
            let resources = c.get("resources");
            let mut limited = 0;
            for (which, sums) in [("requests", &mut requests), ("limits", &mut limits)] {
                for name in ["cpu", "memory"] {
                    let q = resources
                        .and_then(|r| r.get(which))
                        .and_then(|m| m.get(name))
                        .and_then(crate::quantity::nanos)
                        .filter(|n| *n > 0);
                    if let Some(n) = q {
                        *sums.entry(name).or_insert(0) += n;
                        if which == "limits" {
                            limited += 1;
                        }
                    }
                }
            }
            if limited < 2 {
                guaranteed = false;
            }
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    if guaranteed && requests.len() == limits.len() && requests.iter().all(|(k, v)| limits.get(k) == Some(v)) {
        return "Guaranteed";
    }
    "Burstable"
}

/// The mount path of the service account token.
const TOKEN_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// What the default admission plugins of the API server do to a Pod on create, in their
/// order: ServiceAccount (the `default` account, its image pull secrets, the projected token
/// volume `kube-api-access-<suffix>` mounted in every container), Priority (priority and
/// preemption policy of the class; no default class exists) and DefaultTolerationSeconds (300
/// seconds on not-ready and unreachable nodes). `account` is the ServiceAccount, if stored.
/// An error is the reason the API server forbids the Pod.
pub fn admit_pod(o: &mut Map<String, Value>, account: Option<&Value>, suffix: &str) -> Result<(), String> {
    let mirror = o
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get("kubernetes.io/config.mirror"))
        .is_some();
    let spec = child(o, "spec");
    if !mirror {
        if spec.get("serviceAccountName").and_then(Value::as_str).is_none_or(str::is_empty) {
            spec.insert("serviceAccountName".into(), json!("default"));
            spec.insert("serviceAccount".into(), json!("default"));
        }
        let no_secrets = spec.get("imagePullSecrets").and_then(Value::as_array).is_none_or(Vec::is_empty);
        if let Some(Value::Array(secrets)) = account.and_then(|a| a.get("imagePullSecrets"))
            && no_secrets
            && !secrets.is_empty()
        {
            spec.insert("imagePullSecrets".into(), Value::Array(secrets.clone()));
        }
        let automount = spec
            .get("automountServiceAccountToken")
            .and_then(Value::as_bool)
            .or_else(|| account.and_then(|a| a.get("automountServiceAccountToken")).and_then(Value::as_bool))
            .unwrap_or(true);
        if automount {
            mount_token(spec, suffix);
        }
    }
    // Priority: without a PriorityClass named, the priority of no default class.
    let (priority, policy) = match spec.get("priorityClassName").and_then(Value::as_str).unwrap_or("") {
        "" => (0, "PreemptLowerPriority"),
        "system-cluster-critical" => (2_000_000_000, "PreemptLowerPriority"),
        "system-node-critical" => (2_000_001_000, "PreemptLowerPriority"),
        other => return Err(format!("no PriorityClass with name {other} was found")),
    };
    if let Some(given) = spec.get("priority").and_then(Value::as_i64)
        && given != priority
    {
        return Err(format!(
            "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"
        ));
    }
    if let Some(given) = spec.get("preemptionPolicy").and_then(Value::as_str)
        && given != policy
    {
        return Err(format!(
            "the string value of PreemptionPolicy ({given}) must not be provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name"
        ));
    }
    spec.insert("priority".into(), json!(priority));
    spec.insert("preemptionPolicy".into(), json!(policy));
    // DefaultTolerationSeconds.
    let tolerations: Vec<Value> = spec.get("tolerations").and_then(Value::as_array).cloned().unwrap_or_default();
    let tolerates = |key: &str| {
        tolerations.iter().any(|t| {
            let k = t.get("key").and_then(Value::as_str).unwrap_or("");
            let e = t.get("effect").and_then(Value::as_str).unwrap_or("");
            (k == key || k.is_empty()) && (e == "NoExecute" || e.is_empty())
        })
    };
    let mut added = tolerations.clone();
    for key in ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"] {
        if !tolerates(key) {
            added.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
        }
    }
    if added.len() != tolerations.len() {
        spec.insert("tolerations".into(), Value::Array(added));
    }
    Ok(())
}

/// The projected service account token, mounted read-only in every container and init
/// container that has nothing at its path.
fn mount_token(spec: &mut Map<String, Value>, suffix: &str) {
    let existing = spec
        .get("volumes")
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter().filter_map(|v| v.get("name").and_then(Value::as_str)).find(|n| n.starts_with("kube-api-access-"))
        })
        .map(str::to_owned);
    let name = existing.clone().unwrap_or_else(|| format!("kube-api-access-{suffix}"));
    let mut needed = false;
    for list in ["initContainers", "containers"] {
        each_in(spec, list, |c| {
            let mounted = c
                .get("volumeMounts")
                .and_then(Value::as_array)
                .is_some_and(|m| m.iter().any(|vm| vm.get("mountPath").and_then(Value::as_str) == Some(TOKEN_PATH)));
            if !mounted {
                let mounts = c.entry("volumeMounts").or_insert_with(|| json!([]));
                if let Value::Array(m) = mounts {
                    m.push(json!({"name": name, "readOnly": true, "mountPath": TOKEN_PATH}));
                }
                needed = true;
            }
        });
    }
    if needed && existing.is_none() {
        let volume = json!({"name": name, "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace",
                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ]}});
        let volumes = spec.entry("volumes").or_insert_with(|| json!([]));
        if let Value::Array(vs) = volumes {
            vs.push(volume);
        }
    }
}

/// Defaults of a pod template (`spec.template` of the workload kinds).
pub fn pod_template(tmpl: &mut Map<String, Value>) {
    default(child(tmpl, "metadata"), "creationTimestamp", Value::Null);
    pod_spec(child(tmpl, "spec"));
}

/// Defaults of a pod spec (`SetDefaults_PodSpec` and the container defaults).
pub fn pod_spec(spec: &mut Map<String, Value>) {
    default(spec, "restartPolicy", json!("Always"));
    default(spec, "terminationGracePeriodSeconds", json!(30));
    default(spec, "dnsPolicy", json!("ClusterFirst"));
    default(spec, "securityContext", json!({}));
    default(spec, "schedulerName", json!("default-scheduler"));
    // serviceAccount is the deprecated alias of serviceAccountName: read when the name is not
    // given, and written back equal to it, as conversion does.
    let name = spec.get("serviceAccountName").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned);
    let alias = spec.get("serviceAccount").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned);
    match (name, alias) {
        (Some(n), _) => {
            spec.insert("serviceAccount".into(), json!(n));
        }
        (None, Some(a)) => {
            spec.insert("serviceAccountName".into(), json!(a));
        }
        (None, None) => {}
    }
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        each_in(spec, list, container);
    }
    each_in(spec, "volumes", volume);
}

/// The defaults of one volume (`SetDefaults_Volume` and those of each volume source).
fn volume(v: &mut Map<String, Value>) {
    // A volume without a source is an emptyDir.
    if v.keys().all(|k| k == "name") {
        v.insert("emptyDir".into(), json!({}));
    }
    for source in ["configMap", "secret", "projected", "downwardAPI"] {
        if let Some(Value::Object(s)) = v.get_mut(source) {
            default(s, "defaultMode", json!(420));
        }
    }
    if let Some(Value::Object(d)) = v.get_mut("downwardAPI") {
        each_in(d, "items", downward_api_file);
    }
    if let Some(Value::Object(p)) = v.get_mut("projected") {
        each_in(p, "sources", |src| {
            if let Some(Value::Object(t)) = src.get_mut("serviceAccountToken") {
                default(t, "expirationSeconds", json!(3600));
            }
            if let Some(Value::Object(d)) = src.get_mut("downwardAPI") {
                each_in(d, "items", downward_api_file);
            }
        });
    }
    if let Some(Value::Object(h)) = v.get_mut("hostPath") {
        default(h, "type", json!(""));
    }
    if let Some(Value::Object(e)) = v.get_mut("emptyDir")
        && let Some(s) = e.get_mut("sizeLimit")
    {
        canonicalize_value(s);
    }
    if let Some(Value::Object(i)) = v.get_mut("iscsi") {
        default(i, "iscsiInterface", json!("default"));
    }
    if let Some(Value::Object(a)) = v.get_mut("azureDisk") {
        default(a, "cachingMode", json!("ReadWrite"));
        default(a, "kind", json!("Shared"));
        default(a, "fsType", json!("ext4"));
        default(a, "readOnly", json!(false));
    }
    if let Some(Value::Object(s)) = v.get_mut("scaleIO") {
        default(s, "storageMode", json!("ThinProvisioned"));
        default(s, "fsType", json!("xfs"));
    }
}

fn downward_api_file(f: &mut Map<String, Value>) {
    if let Some(Value::Object(fr)) = f.get_mut("fieldRef") {
        default(fr, "apiVersion", json!("v1"));
    }
}

/// The image pull policy the server chooses for an image reference.
pub fn image_pull_policy(image: &str) -> &'static str {
    // A reference with a digest has no implied tag; one that does not parse (empty) neither.
    if image.contains('@') || image.is_empty() {
        return "IfNotPresent";
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        Some((_, "latest")) | None => "Always",
        Some(_) => "IfNotPresent",
    }
}

fn probe(p: &mut Map<String, Value>) {
    default(p, "timeoutSeconds", json!(1));
    default(p, "periodSeconds", json!(10));
    default(p, "successThreshold", json!(1));
    default(p, "failureThreshold", json!(3));
    handler(p);
    if let Some(Value::Object(g)) = p.get_mut("grpc") {
        default(g, "service", json!(""));
    }
}

/// The defaults of an action (`HTTPGetAction`: path `/`, scheme HTTP).
fn handler(h: &mut Map<String, Value>) {
    if let Some(Value::Object(g)) = h.get_mut("httpGet") {
        if g.get("path").and_then(Value::as_str).is_none_or(str::is_empty) {
            g.insert("path".into(), json!("/"));
        }
        default(g, "scheme", json!("HTTP"));
    }
}

fn container(c: &mut Map<String, Value>) {
    let image = c.get("image").and_then(Value::as_str).unwrap_or("").to_owned();
    default(c, "imagePullPolicy", json!(image_pull_policy(&image)));
    default(c, "terminationMessagePath", json!("/dev/termination-log"));
    default(c, "terminationMessagePolicy", json!("File"));
    each_in(c, "ports", |p| default(p, "protocol", json!("TCP")));
    default(c, "resources", json!({}));
    resources(c);
    for p in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(Value::Object(pm)) = c.get_mut(p) {
            probe(pm);
        }
    }
    if let Some(Value::Object(l)) = c.get_mut("lifecycle") {
        for hook in ["postStart", "preStop"] {
            if let Some(Value::Object(h)) = l.get_mut(hook) {
                handler(h);
            }
        }
    }
    each_in(c, "env", |e| {
        if let Some(Value::Object(vf)) = e.get_mut("valueFrom")
            && let Some(Value::Object(fr)) = vf.get_mut("fieldRef")
        {
            default(fr, "apiVersion", json!("v1"));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::image_pull_policy;

    #[test]
    fn pull_policy_follows_the_tag() {
        assert_eq!(image_pull_policy("nginx"), "Always");
        assert_eq!(image_pull_policy("nginx:latest"), "Always");
        assert_eq!(image_pull_policy("nginx:1.25"), "IfNotPresent");
        assert_eq!(image_pull_policy("registry:5000/nginx"), "Always");
        assert_eq!(image_pull_policy("registry:5000/nginx:1.2"), "IfNotPresent");
        assert_eq!(image_pull_policy("nginx@sha256:abc"), "IfNotPresent");
    }
}

#[cfg(test)]
mod kind_tests {
    use super::*;

    struct Seq(u32);

    impl Allocator for Seq {
        fn cluster_ip(&mut self) -> String {
            self.0 += 1;
            format!("10.96.0.{}", self.0)
        }
        fn node_port(&mut self) -> u16 {
            30000
        }
    }

    fn defaulted(kind: &str, mut v: Value) -> Value {
        apply(kind, &mut v);
        prepare(kind, &mut v, None, &mut Seq(9));
        v
    }

    #[test]
    fn network_policy_rbac_and_hpa() {
        let np =
            defaulted("NetworkPolicy", json!({"spec": {"podSelector": {}, "egress": [{"ports": [{"port": 53}]}]}}));
        assert_eq!(
            np["spec"],
            json!({"podSelector": {}, "egress": [{"ports": [{"port": 53, "protocol": "TCP"}]}],
                "policyTypes": ["Ingress", "Egress"]})
        );
        let rb = defaulted(
            "RoleBinding",
            json!({"subjects": [{"kind": "ServiceAccount", "name": "a"}, {"kind": "User", "name": "b"}]}),
        );
        // A ServiceAccount's apiGroup is "", which is not written.
        assert!(rb["subjects"][0].get("apiGroup").is_none());
        assert_eq!(rb["subjects"][1]["apiGroup"], "rbac.authorization.k8s.io");
        let hpa = defaulted("HorizontalPodAutoscaler", json!({"spec": {"maxReplicas": 3}}));
        assert_eq!(hpa["spec"]["minReplicas"], 1);
        assert_eq!(hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"], 80);
    }

    #[test]
    fn pod_disruption_budget_status_starts_at_zero() {
        let pdb = defaulted("PodDisruptionBudget", json!({"spec": {"minAvailable": 1}}));
        assert_eq!(pdb["spec"], json!({"minAvailable": 1}));
        assert_eq!(
            pdb["status"],
            json!({"currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0, "expectedPods": 0})
        );
    }

    #[test]
    fn node_port_service() {
        let svc = defaulted("Service", json!({"spec": {"type": "LoadBalancer", "ports": [{"port": 443}]}}));
        assert_eq!(
            svc["spec"],
            json!({"type": "LoadBalancer", "sessionAffinity": "None",
                "ports": [{"port": 443, "protocol": "TCP", "targetPort": 443, "nodePort": 30000}],
                "internalTrafficPolicy": "Cluster", "externalTrafficPolicy": "Cluster",
                "allocateLoadBalancerNodePorts": true, "clusterIP": "10.96.0.10",
                "clusterIPs": ["10.96.0.10"], "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack"})
        );
        let external = defaulted("Service", json!({"spec": {"type": "ExternalName", "externalName": "x.example"}}));
        assert!(external["spec"].get("clusterIP").is_none());
    }

    #[test]
    fn probes_volumes_and_env() {
        let mut spec = json!({"containers": [{"name": "c", "image": "i:1",
            "livenessProbe": {"httpGet": {"port": 80}},
            "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
            "resources": {"requests": {"memory": "0.5Gi", "cpu": 2}}}],
            "volumes": [{"name": "v", "configMap": {"name": "x"}}]});
        pod_spec(spec.as_object_mut().unwrap());
        let c = &spec["containers"][0];
        assert_eq!(
            c["livenessProbe"],
            json!({"httpGet": {"path": "/", "port": 80, "scheme": "HTTP"}, "timeoutSeconds": 1, "periodSeconds": 10,
                "successThreshold": 1, "failureThreshold": 3})
        );
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
        assert_eq!(c["resources"]["requests"], json!({"memory": "512Mi", "cpu": "2"}));
        assert_eq!(spec["volumes"][0]["configMap"]["defaultMode"], 420);
    }
}
