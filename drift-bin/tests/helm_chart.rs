//! deploy/helm/drift with the real helm 3: `helm lint --strict` with each values file, `helm
//! template` of the default, the homelab profile, PostgreSQL from a Secret and leader election,
//! each rendering applied with kubectl to the test API server and its embedded drift.yaml
//! passed through `drift config check`; the promised RBAC and security context; the schema and
//! the chart's checks refusing bad values with a clear message; `helm install` and `helm
//! upgrade` against the test API server keeping the generated token and password; and `drift
//! serve` running with the chart's drift.yaml and container environment on a real PostgreSQL.
//!
//! Without helm on PATH the tests say that they are skipped, unless `DRIFT_REQUIRE_TOOLS=1`
//! (set by `scripts/test`, which installs a pinned helm) makes that a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::chart::{chart, find, helm, objects};
use common::{GitRepo, Serve, http, kubectl, wait_for};
use drift_test_apiserver::{Options, TestApiServer};
use drift_testkit_pg::PgServer;
use serde_json::Value;

fn helm_available(test: &str) -> bool {
    drift_testkit::charts::helm_available(test)
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// `helm template drift CHART -n drift -f FILE...`: the rendered text, or helm's error.
fn template(home: &Path, values: &[&Path], sets: &[&str]) -> Result<String, String> {
    template_with(home, values, sets, &[])
}

/// [`template`] with more flags of `helm template`.
fn template_with(home: &Path, values: &[&Path], sets: &[&str], flags: &[&str]) -> Result<String, String> {
    let chart = chart();
    let mut args = vec!["template", "drift", chart.to_str().unwrap(), "--namespace", "drift"];
    args.extend(flags);
    for v in values {
        args.extend(["--values", v.to_str().unwrap()]);
    }
    for s in sets {
        args.extend(["--set", s]);
    }
    let out = helm(home, None, &args);
    if out.status.success() { Ok(String::from_utf8(out.stdout).unwrap()) } else { Err(text(&out)) }
}

fn kinds(objects: &[Value]) -> Vec<String> {
    objects
        .iter()
        .map(|o| format!("{}/{}", o["kind"].as_str().unwrap(), o["metadata"]["name"].as_str().unwrap()))
        .collect()
}

fn drift(args: &[&str], home: &Path) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_drift"))
        .args(args)
        .env("HOME", home)
        .env_remove("KUBECONFIG")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (out.status.code().unwrap(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

/// The drift.yaml of the chart's ConfigMap, written to a file; `drift config check` must take it.
fn config_check(objects: &[Value], home: &Path) -> String {
    let yaml = find(objects, "ConfigMap", "drift")["data"]["drift.yaml"].as_str().unwrap().to_owned();
    let file = home.join("drift.yaml");
    std::fs::write(&file, &yaml).unwrap();
    let (code, out, err) = drift(&["config", "check", file.to_str().unwrap()], home);
    assert_eq!(code, 0, "drift config check of the chart's drift.yaml:\n{yaml}\n{out}{err}");
    yaml
}

/// The promises of the chart about its pods, for the detector's Deployment and any StatefulSet.
fn assert_locked_down(objects: &[Value]) {
    let pods: Vec<&Value> =
        objects.iter().filter(|o| o["kind"] == "Deployment" || o["kind"] == "StatefulSet").collect();
    assert!(!pods.is_empty());
    for o in pods {
        let name = o["metadata"]["name"].as_str().unwrap();
        let spec = &o["spec"]["template"]["spec"];
        assert_eq!(spec["securityContext"]["runAsNonRoot"], true, "{name}");
        assert!(spec["securityContext"]["runAsUser"].as_u64().unwrap() > 0, "{name}");
        assert_eq!(spec["securityContext"]["seccompProfile"]["type"], "RuntimeDefault", "{name}");
        for c in spec["containers"].as_array().unwrap() {
            let sc = &c["securityContext"];
            assert_eq!(sc["allowPrivilegeEscalation"], false, "{name}");
            assert_eq!(sc["readOnlyRootFilesystem"], true, "{name}");
            assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]), "{name}");
            assert!(sc["capabilities"].get("add").is_none(), "{name}");
            assert!(c["resources"]["requests"]["memory"].is_string(), "{name}: {}", c["resources"]);
            assert!(c["resources"]["limits"]["memory"].is_string(), "{name}: {}", c["resources"]);
        }
    }
    let detector = find(objects, "Deployment", "drift");
    let c = &detector["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/health");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/ready");
}

/// Every rule of the detector's ClusterRole reads and nothing else.
fn assert_read_only(objects: &[Value]) {
    let role = find(objects, "ClusterRole", "drift-read");
    let rules = role["rules"].as_array().unwrap();
    assert!(rules.len() >= 5, "{role}");
    for rule in rules {
        assert_eq!(rule["verbs"], serde_json::json!(["get", "list", "watch"]), "{rule}");
    }
    assert!(!objects.iter().any(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] != "drift-read"));
}

/// A Secret's value, decoded.
fn secret_value(objects: &[Value], name: &str, key: &str) -> String {
    let b64 = find(objects, "Secret", name)["data"][key].as_str().unwrap().to_owned();
    let out = Command::new("base64").arg("-d").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    use std::io::Write;
    out.stdin.as_ref().unwrap().write_all(b64.as_bytes()).unwrap();
    let out = out.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap()
}

fn env_of(objects: &[Value]) -> Vec<Value> {
    find(objects, "Deployment", "drift")["spec"]["template"]["spec"]["containers"][0]["env"].as_array().unwrap().clone()
}

/// The applied objects, as the test API server holds them: each kind's names in the namespace.
fn applied(kc: &Path, home: &Path, kind: &str, namespaced: bool) -> Vec<String> {
    let mut args = vec!["get", kind, "-o", "json"];
    if namespaced {
        args.extend(["-n", "drift"]);
    }
    let list: Value = serde_json::from_str(&kubectl(kc, home, &args, &[])).unwrap();
    list["items"].as_array().unwrap().iter().map(|o| o["metadata"]["name"].as_str().unwrap().to_owned()).collect()
}

/// `drift diff --cluster` of the rendering against what the API server holds: every object
/// compared, none drifted (the detector finds its own installation in sync). Returns the
/// output, for checks that no secret value is printed.
fn assert_in_sync(rendered: &str, objects: &[Value], kc: &Path, home: &Path) -> String {
    let desired = home.join("desired.yaml");
    std::fs::write(&desired, rendered).unwrap();
    let (code, out, err) = drift(
        &[
            "diff",
            "--desired",
            desired.to_str().unwrap(),
            "--cluster",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "-o",
            "json",
        ],
        home,
    );
    assert_eq!(code, 0, "the installation is in sync with its rendering: {out}{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["summary"]["resources_compared"], objects.len(), "{out}");
    format!("{out}{err}")
}

/// `kubectl apply -f` of a rendering into the namespace `drift` of a fresh test API server.
fn apply(rendered: &str, home: &Path) -> TestApiServer {
    let server = TestApiServer::start(Options::default()).unwrap();
    let kc = server.kubeconfig_path();
    let file = home.join("rendered.yaml");
    std::fs::write(&file, rendered).unwrap();
    kubectl(kc, home, &["create", "namespace", "drift"], &[]);
    kubectl(kc, home, &["apply", "-f", file.to_str().unwrap()], &[]);
    server
}

#[test]
fn the_chart_lints_strictly_with_each_values_file() {
    if !helm_available("the_chart_lints_strictly_with_each_values_file") {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let chart = chart();
    let homelab = chart.join("values-homelab.yaml");
    let secret = home.path().join("values-postgresql.yaml");
    std::fs::write(&secret, POSTGRESQL_FROM_SECRET).unwrap();
    let ha = home.path().join("values-ha.yaml");
    std::fs::write(&ha, LEADER_ELECTION).unwrap();
    for values in [None, Some(&homelab), Some(&secret), Some(&ha)] {
        let mut args = vec!["lint", "--strict", chart.to_str().unwrap()];
        if let Some(v) = values {
            args.extend(["--values", v.to_str().unwrap()]);
        }
        let out = helm(home.path(), None, &args);
        assert!(out.status.success(), "helm lint --strict with {values:?}: {}", text(&out));
        assert!(text(&out).contains("0 chart(s) failed"), "{}", text(&out));
    }
}

#[test]
fn the_default_rendering_applies_and_the_detector_finds_its_installation_in_sync() {
    if !helm_available("the_default_rendering_applies_and_the_detector_finds_its_installation_in_sync") {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let rendered = template(home.path(), &[], &[]).unwrap();
    let objects = objects(&rendered);
    assert_eq!(
        kinds(&objects),
        [
            "ServiceAccount/drift",
            "Secret/drift-api-token",
            "ConfigMap/drift",
            "PersistentVolumeClaim/drift-data",
            "ClusterRole/drift-read",
            "ClusterRoleBinding/drift-read",
            "Service/drift",
            "Deployment/drift",
        ]
    );
    let yaml = config_check(&objects, home.path());
    assert!(yaml.contains("store: sqlite:///var/lib/drift/drift.db\n"), "{yaml}");
    assert!(yaml.contains("listen: \"0.0.0.0:8080\""), "{yaml}");
    assert!(!yaml.contains("leader_election"), "{yaml}");
    assert_read_only(&objects);
    assert_locked_down(&objects);
    let deployment = find(&objects, "Deployment", "drift");
    assert_eq!(deployment["spec"]["replicas"], 1);
    assert_eq!(deployment["spec"]["strategy"]["type"], "Recreate");
    let token = secret_value(&objects, "drift-api-token", "token");
    assert_eq!(token.len(), 40, "a random token of 40 characters");
    let service = find(&objects, "Service", "drift");
    assert_eq!(service["spec"]["type"], "ClusterIP");
    // The resources of the kustomize base.
    let c = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        c["resources"],
        serde_json::json!({"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "1Gi"}})
    );

    let server = apply(&rendered, home.path());
    let kc = server.kubeconfig_path();
    assert_eq!(applied(kc, home.path(), "deployments", true), ["drift"]);
    assert_eq!(applied(kc, home.path(), "clusterroles", false), ["drift-read"]);
    let shown = assert_in_sync(&rendered, &objects, kc, home.path());
    assert!(!shown.contains(&token), "the token is never printed");
}

#[test]
fn the_homelab_profile_has_its_node_ports_the_bundled_postgresql_and_a_scan_every_five_minutes() {
    if !helm_available("the_homelab_profile_has_its_node_ports_the_bundled_postgresql_and_a_scan_every_five_minutes") {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let rendered = template(home.path(), &[&chart().join("values-homelab.yaml")], &[]).unwrap();
    let objects = objects(&rendered);
    let yaml = config_check(&objects, home.path());
    let config: Value = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(config["interval"], "5m");
    assert_eq!(config["watch"], true);
    assert_eq!(
        config["store"],
        serde_json::json!({"type": "postgres", "url": "postgres://drift@drift-postgresql:5432/drift",
            "password_env": "DRIFT_DB_PASSWORD", "retention_days": 90})
    );
    let api = find(&objects, "Service", "drift");
    assert_eq!(
        (api["spec"]["type"].as_str(), api["spec"]["ports"][0]["nodePort"].as_u64()),
        (Some("NodePort"), Some(30300))
    );
    let pg = find(&objects, "Service", "drift-postgresql");
    assert_eq!(
        (pg["spec"]["type"].as_str(), pg["spec"]["ports"][0]["nodePort"].as_u64()),
        (Some("NodePort"), Some(30301))
    );
    // The detector and the database share the generated password, through the Secret only.
    let password = secret_value(&objects, "drift-postgresql", "password");
    assert_eq!(password.len(), 40);
    assert!(!rendered.contains(&password), "the password is in the rendering only base64-encoded");
    let secret_ref = |env: &[Value], name: &str| {
        env.iter().find(|e| e["name"] == name).unwrap_or_else(|| panic!("{name} in {env:?}"))["valueFrom"]["secretKeyRef"]
            .clone()
    };
    assert_eq!(
        secret_ref(&env_of(&objects), "DRIFT_DB_PASSWORD"),
        serde_json::json!({"name": "drift-postgresql", "key": "password"})
    );
    let sts = find(&objects, "StatefulSet", "drift-postgresql");
    let pg_env = sts["spec"]["template"]["spec"]["containers"][0]["env"].as_array().unwrap().clone();
    assert_eq!(
        secret_ref(&pg_env, "POSTGRES_PASSWORD"),
        serde_json::json!({"name": "drift-postgresql", "key": "password"})
    );
    assert!(!objects.iter().any(|o| o["kind"] == "PersistentVolumeClaim"), "the detector's volume is a cache");
    assert_locked_down(&objects);
    assert_read_only(&objects);

    let server = apply(&rendered, home.path());
    let kc = server.kubeconfig_path();
    assert_eq!(applied(kc, home.path(), "statefulsets", true), ["drift-postgresql"]);
    assert_eq!(applied(kc, home.path(), "services", true), ["drift", "drift-postgresql"]);
    let svc: Value =
        serde_json::from_str(&kubectl(kc, home.path(), &["get", "service", "drift", "-n", "drift", "-o", "json"], &[]))
            .unwrap();
    assert_eq!(svc["spec"]["ports"][0]["nodePort"], 30300, "the API server kept the node port");
    let shown = assert_in_sync(&rendered, &objects, kc, home.path());
    assert!(!shown.contains(&password), "the password is never printed");
}

/// PostgreSQL from an existing Secret, with the parts of drift.yaml users set: named and read
/// tokens, a notifier with its secret from the environment, remediation, self-heal, and the
/// optional objects (ServiceMonitor, NetworkPolicy).
const POSTGRESQL_FROM_SECRET: &str = r#"
detector:
  cluster: prod-eu
  interval: 2m
  repositories:
    - name: platform
      url: https://git.example.com/platform.git
      ref: main
      token_env: GIT_TOKEN
    - name: apps
      url: https://git.example.com/apps.git
      renderer: helm
      helm: {release_name: apps, namespace: apps, values_files: [values-prod.yaml]}
  live: {concurrency: 4, request_timeout: 20s}
  ignore:
    - {kind: Deployment, name: "*-canary", jsonPointers: [/spec/replicas]}
  severity: {replicas_drift: MEDIUM}
  policies:
    enabled: true
    required_labels: [team]
    rules: {image-tag: {severity: HIGH}, resource-limits: {enabled: false}}
  notify:
    - type: slack
      name: ops
      url_env: DRIFT_SLACK_URL
      route: {min_severity: HIGH}
  notifications: {link: "https://drift.example.com", lease: 90s}
  remediation: {author_name: drift-bot, author_email: drift@example.com}
  heal: {dry_run: true, namespaces: [shop], grace: 15m}
api:
  allowedHosts: [drift.example.com]
  readToken: {enabled: true, existingSecret: drift-read, key: token}
  writeToken: {enabled: true, existingSecret: drift-write, key: token}
  tokens:
    - {name: alice, existingSecret: drift-token-alice}
storage:
  type: postgresql
  retentionDays: 30
  postgresql: {existingSecret: drift-database, key: url}
repositoryTokens:
  - {env: GIT_TOKEN, secretName: git-token, key: token}
extraSecretEnv:
  - {env: DRIFT_SLACK_URL, secretName: drift-slack, key: url}
serviceMonitor:
  enabled: true
  labels: {release: prometheus}
networkPolicy:
  enabled: true
  apiFrom:
    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}
"#;

/// A CustomResourceDefinition of the Prometheus Operator's ServiceMonitor, as much of it as the
/// chart's object needs (written for this test).
const SERVICE_MONITOR_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {plural: servicemonitors, singular: servicemonitor, kind: ServiceMonitor, listKind: ServiceMonitorList}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              x-kubernetes-preserve-unknown-fields: true
"#;

#[test]
fn postgresql_from_a_secret_with_tokens_notifiers_and_self_heal_renders_a_valid_configuration() {
    if !helm_available("postgresql_from_a_secret_with_tokens_notifiers_and_self_heal_renders_a_valid_configuration") {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let values = home.path().join("values-postgresql.yaml");
    std::fs::write(&values, POSTGRESQL_FROM_SECRET).unwrap();
    let rendered = template(home.path(), &[&values], &[]).unwrap();
    let objects = objects(&rendered);
    let yaml = config_check(&objects, home.path());
    let config: Value = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(config["database_env"], "DRIFT_DATABASE_URL");
    assert_eq!(config["retention_days"], 30);
    assert!(config.get("store").is_none(), "{yaml}");
    assert_eq!(
        config["api"],
        serde_json::json!({"listen": "0.0.0.0:8080", "allowed_hosts": ["drift.example.com"], "token_env": "DRIFT_API_TOKEN",
            "read_token_env": "DRIFT_API_READ_TOKEN", "tokens": [{"name": "alice", "token_env": "DRIFT_API_TOKEN_ALICE"}]}),
        "the Ingress's name is answered (api.allowedHosts)"
    );
    assert_eq!(config["repositories"][0]["token_env"], "GIT_TOKEN");
    assert_eq!(config["repositories"][1]["helm"]["values_files"], serde_json::json!(["values-prod.yaml"]));
    assert_eq!(config["notify"][0]["url_env"], "DRIFT_SLACK_URL");
    assert_eq!(config["heal"]["grace"], "15m");
    assert_eq!(config["remediation"]["author_name"], "drift-bot");
    assert_eq!(config["notifications"]["lease"], "90s");
    assert_eq!(
        config["policies"],
        serde_json::json!({"enabled": true, "required_labels": ["team"],
            "rules": {"image-tag": {"severity": "HIGH"}, "resource-limits": {"enabled": false}}}),
        "detector.policies is drift.yaml's policies, which `drift config check` accepted"
    );

    // Every secret comes from a Secret the user named; the chart creates none.
    assert!(!objects.iter().any(|o| o["kind"] == "Secret"), "{:?}", kinds(&objects));
    let env: Vec<(String, String)> = env_of(&objects)
        .iter()
        .filter_map(|e| {
            let r = e["valueFrom"].get("secretKeyRef")?;
            Some((e["name"].as_str()?.to_owned(), format!("{}/{}", r["name"].as_str()?, r["key"].as_str()?)))
        })
        .collect();
    let expected = [
        ("DRIFT_API_TOKEN", "drift-write/token"),
        ("DRIFT_API_READ_TOKEN", "drift-read/token"),
        ("DRIFT_API_TOKEN_ALICE", "drift-token-alice/token"),
        ("DRIFT_DATABASE_URL", "drift-database/url"),
        ("GIT_TOKEN", "git-token/token"),
        ("DRIFT_SLACK_URL", "drift-slack/url"),
    ];
    assert_eq!(env, expected.map(|(a, b)| (a.to_owned(), b.to_owned())));
    let deployment = find(&objects, "Deployment", "drift");
    assert!(deployment["spec"]["template"]["spec"]["volumes"][1]["emptyDir"].is_object(), "the cache only");
    let monitor = find(&objects, "ServiceMonitor", "drift");
    assert_eq!(monitor["spec"]["endpoints"][0]["path"], "/metrics");
    assert_eq!(monitor["metadata"]["labels"]["release"], "prometheus");
    let policy = find(&objects, "NetworkPolicy", "drift");
    assert_eq!(
        policy["spec"]["ingress"][0]["from"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
        "monitoring"
    );
    assert_locked_down(&objects);
    assert_read_only(&objects);

    let server = TestApiServer::start(Options::default()).unwrap();
    let kc = server.kubeconfig_path();
    let crd = home.path().join("crd.yaml");
    std::fs::write(&crd, SERVICE_MONITOR_CRD).unwrap();
    kubectl(kc, home.path(), &["apply", "-f", crd.to_str().unwrap()], &[]);
    let file = home.path().join("rendered.yaml");
    std::fs::write(&file, &rendered).unwrap();
    kubectl(kc, home.path(), &["create", "namespace", "drift"], &[]);
    kubectl(kc, home.path(), &["apply", "-f", file.to_str().unwrap()], &[]);
    assert_eq!(applied(kc, home.path(), "servicemonitors", true), ["drift"]);
    assert_eq!(applied(kc, home.path(), "networkpolicies", true), ["drift"]);
    assert_in_sync(&rendered, &objects, kc, home.path());
}

/// Two replicas with leader election on PostgreSQL from a Secret, with a PodDisruptionBudget.
const LEADER_ELECTION: &str = r#"
replicaCount: 2
leaderElection:
  enabled: true
  leaseDuration: 20s
storage:
  type: postgresql
  postgresql: {existingSecret: drift-database}
podDisruptionBudget:
  enabled: true
  minAvailable: 1
"#;

/// The leader-election rendering (its `drift config check` comes with the leader-election
/// configuration, on the branch that adds it).
#[test]
fn leader_election_renders_its_lease_role_identity_and_configuration_block() {
    if !helm_available("leader_election_renders_its_lease_role_identity_and_configuration_block") {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let values = home.path().join("values-ha.yaml");
    std::fs::write(&values, LEADER_ELECTION).unwrap();
    let rendered = template(home.path(), &[&values], &[]).unwrap();
    let objects = objects(&rendered);
    // The detector accepts the block the chart renders.
    config_check(&objects, home.path());
    let yaml = find(&objects, "ConfigMap", "drift")["data"]["drift.yaml"].as_str().unwrap().to_owned();
    let config: Value = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(
        config["leader_election"],
        serde_json::json!({"enabled": true, "lease": "drift", "namespace": "drift", "lease_duration": "20s",
            "renew_deadline": "3s", "retry_period": "1s"})
    );
    let deployment = find(&objects, "Deployment", "drift");
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(deployment["spec"]["strategy"]["type"], "RollingUpdate");
    let env = env_of(&objects);
    let field =
        |name: &str| env.iter().find(|e| e["name"] == name).unwrap()["valueFrom"]["fieldRef"]["fieldPath"].clone();
    assert_eq!((field("POD_NAME"), field("POD_NAMESPACE")), ("metadata.name".into(), "metadata.namespace".into()));
    let role = find(&objects, "Role", "drift-leader-election");
    assert_eq!(
        role["rules"],
        serde_json::json!([
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["drift"], "verbs": ["get", "update", "watch"]}
        ])
    );
    let binding = find(&objects, "RoleBinding", "drift-leader-election");
    assert_eq!(binding["subjects"][0]["name"], "drift");
    let pdb = find(&objects, "PodDisruptionBudget", "drift");
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert_read_only(&objects);
    assert_locked_down(&objects);

    let server = apply(&rendered, home.path());
    let kc = server.kubeconfig_path();
    assert_eq!(applied(kc, home.path(), "roles", true), ["drift-leader-election"]);
    assert_eq!(applied(kc, home.path(), "poddisruptionbudgets", true), ["drift"]);
    assert_in_sync(&rendered, &objects, kc, home.path());

    // Without the election, or on SQLite, two replicas are refused.
    let err = template(home.path(), &[&values], &["leaderElection.enabled=false"]).unwrap_err();
    assert!(err.contains("leaderElection") && err.contains("enabled"), "{err}");
    let err = template(home.path(), &[&values], &["replicaCount=1", "storage.type=sqlite"]).unwrap_err();
    assert!(err.contains(r#"storage.type must be one of the following: "postgresql", "bundled""#), "{err}");
    // The chart's own check says why, when the schema is not consulted.
    let err = template_with(
        home.path(),
        &[&values],
        &["replicaCount=1", "storage.type=sqlite"],
        &["--skip-schema-validation"],
    );
    assert!(err.unwrap_err().contains("leaderElection.enabled needs PostgreSQL storage"));
}

/// `sops.ageKeySecret` mounts the age identities read-only and names them by
/// `SOPS_AGE_KEY_FILE`; without it nothing of SOPS is rendered.
#[test]
fn the_sops_age_key_secret_is_mounted_and_named_by_sops_age_key_file() {
    if !helm_available("the_sops_age_key_secret_is_mounted_and_named_by_sops_age_key_file") {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let plain = template(home.path(), &[], &[]).unwrap();
    assert!(!plain.contains("SOPS_AGE_KEY_FILE") && !plain.contains("sops-age"));
    let rendered = template(home.path(), &[], &["sops.ageKeySecret=drift-sops-age"]).unwrap();
    let objects = objects(&rendered);
    let env = env_of(&objects);
    let file = env.iter().find(|e| e["name"] == "SOPS_AGE_KEY_FILE").unwrap();
    assert_eq!(file["value"], "/etc/drift-sops/keys.txt");
    let pod = &find(&objects, "Deployment", "drift")["spec"]["template"]["spec"];
    let mount =
        pod["containers"][0]["volumeMounts"].as_array().unwrap().iter().find(|m| m["name"] == "sops-age").unwrap();
    assert_eq!((&mount["mountPath"], &mount["readOnly"]), (&"/etc/drift-sops".into(), &true.into()));
    let volume = pod["volumes"].as_array().unwrap().iter().find(|v| v["name"] == "sops-age").unwrap();
    assert_eq!(
        volume["secret"],
        serde_json::json!({"secretName": "drift-sops-age", "defaultMode": 256, "items": [{"key": "keys.txt", "path": "keys.txt"}]})
    );
    assert_locked_down(&objects);
    let err = template(home.path(), &[], &["sops.ageKeySecret=Not_A_Name"]).unwrap_err();
    assert!(err.contains("ageKeySecret"), "{err}");
}

/// Bad values stop `helm template` with a message that names the value.
#[test]
fn bad_values_are_refused_with_a_clear_message() {
    if !helm_available("bad_values_are_refused_with_a_clear_message") {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &str)] = &[
        // The schema: unknown keys, wrong types and enums, and the security promises.
        (&["detector.clustr=x"], "clustr"),
        (&["storage.type=mysql"], "storage.type"),
        (&["detector.interval=five minutes"], "detector.interval"),
        (&["replicaCount=0"], "replicaCount"),
        (&["api.service.type=LoadBalancer"], "api.service.type"),
        (&["api.service.nodePort=80", "api.service.type=NodePort"], "api.service.nodePort"),
        (&["detector.live.kubeconfig=/root/.kube/config"], "kubeconfig"),
        (&["securityContext.readOnlyRootFilesystem=false"], "securityContext.readOnlyRootFilesystem"),
        (&["podSecurityContext.runAsNonRoot=false"], "podSecurityContext.runAsNonRoot"),
        (&["detector.severity.replicas_drift=URGENT"], "replicas_drift"),
        (&["detector.policies.rules.latest.enabled=false"], "detector.policies.rules"),
        (&["detector.policies.on={cluster}"], "detector.policies.on"),
        (&["detector.repositories=null"], "repositories"),
        (&["replicaCount=2"], "leaderElection.enabled"),
        // The chart's own checks.
        (&["storage.type=postgresql"], "storage.type is postgresql: set storage.postgresql.existingSecret"),
        (&["api.service.nodePort=30300"], "api.service.nodePort is 30300 but api.service.type is ClusterIP"),
        (&["podDisruptionBudget.enabled=true"], "podDisruptionBudget.minAvailable is 1 with replicaCount 1"),
    ];
    for (sets, expected) in cases {
        let err = template(home.path(), &[], sets).expect_err(&format!("{sets:?} must be refused"));
        assert!(err.contains(expected), "{sets:?}: the error names {expected:?}: {err}");
    }
}

/// `helm install` and `helm upgrade` against the test API server: the generated token and
/// password stay the same across an upgrade, NOTES say where the token is without printing it,
/// and the password Secret outlives `helm uninstall`.
#[test]
fn install_and_upgrade_keep_the_generated_token_and_password() {
    if !helm_available("install_and_upgrade_keep_the_generated_token_and_password") {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let server = TestApiServer::start(Options::default()).unwrap();
    let kc = server.kubeconfig_path();
    let chart = chart();
    let homelab = chart.join("values-homelab.yaml");
    let install = |verb: &str, extra: &[&str]| {
        let mut args = vec![verb, "drift", chart.to_str().unwrap(), "-n", "drift", "-f", homelab.to_str().unwrap()];
        args.extend(extra);
        let out = helm(home.path(), Some(kc), &args);
        assert!(out.status.success(), "helm {verb}: {}", text(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let secret = |name: &str, key: &str| {
        let s: Value =
            serde_json::from_str(&kubectl(kc, home.path(), &["get", "secret", name, "-n", "drift", "-o", "json"], &[]))
                .unwrap();
        s["data"][key].as_str().unwrap().to_owned()
    };
    let notes = install("install", &["--create-namespace"]);
    let token = secret("drift-api-token", "token");
    let password = secret("drift-postgresql", "password");
    assert!(notes.contains("kubectl -n drift get secret drift-api-token"), "{notes}");
    assert!(notes.contains("node port 30301"), "{notes}");
    let decoded = secret_value(
        &objects(&kubectl(kc, home.path(), &["get", "secret", "drift-api-token", "-n", "drift", "-o", "yaml"], &[])),
        "drift-api-token",
        "token",
    );
    assert!(!notes.contains(&token) && !notes.contains(&decoded), "NOTES never print the token");

    install("upgrade", &["--set", "detector.interval=10m"]);
    let cm: Value = serde_json::from_str(&kubectl(
        kc,
        home.path(),
        &["get", "configmap", "drift", "-n", "drift", "-o", "json"],
        &[],
    ))
    .unwrap();
    assert!(cm["data"]["drift.yaml"].as_str().unwrap().contains("interval: \"10m\""), "the upgrade happened");
    assert_eq!(secret("drift-api-token", "token"), token, "the token survives an upgrade");
    assert_eq!(secret("drift-postgresql", "password"), password, "the password survives an upgrade");

    let out = helm(home.path(), Some(kc), &["uninstall", "drift", "-n", "drift"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(applied(kc, home.path(), "secrets", true), ["drift-postgresql"], "the password stays with the data");
}

/// Every key of values.yaml and values-homelab.yaml is described by values.schema.json, with a
/// description, and every object the schema describes refuses keys it does not know.
#[test]
fn every_value_is_described_by_the_schema() {
    let chart = chart();
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(chart.join("values.schema.json")).unwrap()).unwrap();
    assert_eq!(schema["additionalProperties"], false);
    fn walk(path: &str, value: &Value, schema: &Value, described: &mut usize) {
        let Some(map) = value.as_object().filter(|m| !m.is_empty()) else { return };
        let Some(props) = schema.get("properties").and_then(Value::as_object) else {
            // A free map (labels, annotations, resources' requests): its values are typed by
            // additionalProperties.
            assert!(schema.get("additionalProperties").is_some_and(|a| a != &Value::Bool(false)), "{path}: {schema}");
            return;
        };
        assert_eq!(schema["additionalProperties"], false, "{path} refuses unknown keys");
        for (key, child) in map {
            let sub = props.get(key).unwrap_or_else(|| panic!("{path}.{key} is not in values.schema.json"));
            let desc = sub.get("description").and_then(Value::as_str).unwrap_or_default();
            assert!(desc.len() > 5, "{path}.{key} has a description in values.schema.json");
            *described += 1;
            let sub = sub
                .get("oneOf")
                .and_then(Value::as_array)
                .and_then(|alts| alts.iter().find(|a| a["type"] == "object"))
                .unwrap_or(sub);
            match child {
                Value::Object(_) => walk(&format!("{path}.{key}"), child, sub, described),
                Value::Array(items) => {
                    for item in items {
                        walk(&format!("{path}.{key}[]"), item, &sub["items"], described);
                    }
                }
                _ => {}
            }
        }
    }
    for file in ["values.yaml", "values-homelab.yaml"] {
        let values: Value = serde_saphyr::from_str(&std::fs::read_to_string(chart.join(file)).unwrap()).unwrap();
        let mut described = 0;
        walk(file, &values, &schema, &mut described);
        assert!(described > 20, "{file}: {described} values");
    }
}

/// The variables of the detector's container as the kubelet would set them: plain values, and
/// each `secretKeyRef` looked up in `secrets` (name/key to value). A reference to a Secret
/// that is not there fails the test, as it would keep the pod from starting.
fn container_env(objects: &[Value], secrets: &BTreeMap<String, String>) -> Vec<(String, String)> {
    env_of(objects)
        .iter()
        .filter_map(|e| {
            let name = e["name"].as_str().unwrap().to_owned();
            if let Some(v) = e["value"].as_str() {
                return Some((name, v.to_owned()));
            }
            let r = e["valueFrom"].get("secretKeyRef")?;
            let key = format!("{}/{}", r["name"].as_str().unwrap(), r["key"].as_str().unwrap());
            let value =
                secrets.get(&key).unwrap_or_else(|| panic!("{name} needs Secret key {key}, which is not there"));
            Some((name, value.clone()))
        })
        .collect()
}

/// A free port of the loopback, for `api.port`.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The detector, configured by the chart: its drift.yaml from the ConfigMap, its environment
/// from the Deployment with the Secrets the chart generates or names, on a real PostgreSQL (the
/// URL in a Secret), scanning the test API server. The wiring holds: health and readiness,
/// reads need the read token, writes the generated write token or a named one, and the
/// first scan is recorded in the database.
#[test]
fn the_detector_runs_with_the_configuration_and_environment_the_chart_gives_it() {
    if !helm_available("the_detector_runs_with_the_configuration_and_environment_the_chart_gives_it") {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let pg = PgServer::start().unwrap();
    let db_url = tokio::runtime::Runtime::new().unwrap().block_on(pg.create_database()).unwrap();
    let server = TestApiServer::start(Options::default()).unwrap();
    let kc = server.kubeconfig_path();
    let repo = GitRepo::shop(home.path().join("repo"));
    kubectl(kc, home.path(), &["apply", "-R", "-f", repo.dir.join("apps").to_str().unwrap()], &[]);

    let port = free_port();
    let values = home.path().join("values-e2e.yaml");
    std::fs::write(
        &values,
        format!(
            "detector:\n  cluster: chart-e2e\n  interval: 1h\n  watch: false\n  repositories:\n    - name: shop\n      url: file://{repo}\n      ref: main\n      path: apps\n      cache_dir: {cache}\n\
             api:\n  port: {port}\n  readToken: {{enabled: true}}\n  tokens:\n    - {{name: alice, existingSecret: drift-token-alice}}\n\
             storage:\n  type: postgresql\n  postgresql: {{existingSecret: drift-database}}\n",
            repo = repo.dir.display(),
            cache = home.path().join("cache").display(),
        ),
    )
    .unwrap();
    let rendered = template(home.path(), &[&values], &[]).unwrap();
    let objects = objects(&rendered);
    let yaml = config_check(&objects, home.path());
    let config = home.path().join("drift.yaml");
    std::fs::write(&config, &yaml).unwrap();
    let args = &find(&objects, "Deployment", "drift")["spec"]["template"]["spec"]["containers"][0]["args"];
    assert_eq!(args, &serde_json::json!(["serve", "--config", "/etc/drift/drift.yaml", "--log-format", "json"]));

    // The Secrets: the two tokens the chart generates, and the two the user created.
    let write_token = secret_value(&objects, "drift-api-token", "token");
    let read_token = secret_value(&objects, "drift-api-read-token", "token");
    let alice = "alice-token-3b9f1c";
    let secrets: BTreeMap<String, String> = [
        ("drift-api-token/token", write_token.as_str()),
        ("drift-api-read-token/token", read_token.as_str()),
        ("drift-token-alice/token", alice),
        ("drift-database/url", db_url.as_str()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let mut env = container_env(&objects, &secrets);
    assert_eq!(
        env.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        ["DRIFT_LOG", "DRIFT_API_TOKEN", "DRIFT_API_READ_TOKEN", "DRIFT_API_TOKEN_ALICE", "DRIFT_DATABASE_URL"]
    );
    env.push(("DRIFT_LOG_FORMAT".into(), "json".into()));
    env.push(("KUBECONFIG".into(), kc.to_str().unwrap().into()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let serve = Serve::start(&config, &env);
    assert_eq!(serve.addr, format!("0.0.0.0:{port}"), "the API listens where the Service sends");
    let addr = format!("127.0.0.1:{port}");

    assert_eq!(http(&addr, "GET", "/health", None).0, 200);
    wait_for(Duration::from_secs(60), "the first pass to be recorded", || {
        (http(&addr, "GET", "/ready", None).0 == 200).then_some(())
    });
    assert_eq!(http(&addr, "GET", "/drifts", None).0, 401, "reads need the read token");
    assert_eq!(http(&addr, "GET", "/drifts", Some(&read_token)).0, 200);
    assert_eq!(http(&addr, "POST", "/scan?wait=true", Some(&read_token)).0, 401, "the read token does not write");
    let (status, body) = http(&addr, "POST", "/scan?wait=true", Some(&write_token));
    assert_eq!(status, 200, "the generated write token writes: {body}");
    // A hand change, scanned with the named token, is kept in PostgreSQL and read back.
    kubectl(kc, home.path(), &["scale", "deployment", "web", "-n", "shop", "--replicas=5"], &[]);
    let (status, body) = http(&addr, "POST", "/scan?wait=true", Some(alice));
    assert_eq!(status, 200, "a named token writes: {body}");
    let (status, body) = http(&addr, "GET", "/drifts?status=open", Some(&read_token));
    assert_eq!(status, 200, "{body}");
    let page: Value = serde_json::from_str(&body).unwrap();
    let types: Vec<&str> =
        page["items"].as_array().unwrap().iter().map(|d| d["drift_type"].as_str().unwrap()).collect();
    assert_eq!(types, ["replicas_drift"], "{body}");
    assert_eq!(page["items"][0]["cluster"], "chart-e2e");
    let log = serve.stop();
    for secret in [write_token.as_str(), read_token.as_str(), alice] {
        assert!(!log.contains(secret), "no token in the log");
    }
    assert!(log.lines().any(|l| l.starts_with('{')), "JSON logs: {log}");
}

/// Rights beyond reading (patch, for reverts) go to a second ClusterRole; the read role stays
/// read-only.
#[test]
fn extra_rules_go_to_a_second_role_and_the_read_role_stays_read_only() {
    if !helm_available("extra_rules_go_to_a_second_role_and_the_read_role_stays_read_only") {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let values = home.path().join("values-revert.yaml");
    std::fs::write(
        &values,
        "rbac:\n  extraRules:\n    - {apiGroups: [apps], resources: [deployments], verbs: [patch]}\n",
    )
    .unwrap();
    let objects = objects(&template(home.path(), &[&values], &[]).unwrap());
    let read = find(&objects, "ClusterRole", "drift-read");
    for rule in read["rules"].as_array().unwrap() {
        assert_eq!(rule["verbs"], serde_json::json!(["get", "list", "watch"]), "{rule}");
    }
    let extra = find(&objects, "ClusterRole", "drift-extra");
    assert_eq!(
        extra["rules"],
        serde_json::json!([{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["patch"]}])
    );
    let binding = find(&objects, "ClusterRoleBinding", "drift-extra");
    assert_eq!(binding["subjects"][0]["name"], "drift");
    assert_eq!(binding["roleRef"]["name"], "drift-extra");
}

/// One notifier of each kind drift-notify added after webhook, slack and email, each with a
/// template, their secrets named by `*_env` keys and given with extraSecretEnv; automatic pull
/// requests with a rule; the audit join (webhook only).
const NOTIFIERS_ACCEPT_AUDIT: &str = r#"
detector:
  repositories:
    - name: platform
      url: https://git.example.com/platform.git
      token_env: GIT_TOKEN
  notify:
    - name: phone
      type: ntfy
      url: https://ntfy.example.com
      topic: drift-alerts
      token_env: DRIFT_NTFY_TOKEN
      route: {min_severity: HIGH}
      template: "{{ title }}"
    - name: push
      type: gotify
      url: https://gotify.example.com
      token_env: DRIFT_GOTIFY_TOKEN
      template: "{{ title }}"
    - name: chat
      type: discord
      url_env: DRIFT_DISCORD_WEBHOOK
      template: "**{{ title }}**"
    - name: bot
      type: telegram
      bot_token_env: DRIFT_TELEGRAM_TOKEN
      chat_id: -1001234567890
      message_thread_id: 42
      template: "<b>{{ title }}</b>"
    - name: channel
      type: teams
      url_env: DRIFT_TEAMS_WEBHOOK
      template: "{{ title }}"
    - name: alerts
      type: alertmanager
      url: http://alertmanager.monitoring:9093
      token_env: DRIFT_ALERTMANAGER_TOKEN
      ends_after: 24h
      reminder: 4h
      labels: {team: platform}
      template: "{{ title }}"
  accept:
    auto:
      rules:
        - drift_types: [replicas_drift]
          classifications: [manual_change]
          namespaces: [staging]
          min_age: 30m
          min_confidence: 0.8
      max: 3
      per: 1h
      tick: 1m
  audit: {window: 10s}
repositoryTokens:
  - {env: GIT_TOKEN, secretName: git-token, key: token}
extraSecretEnv:
  - {env: DRIFT_NTFY_TOKEN, secretName: drift-notify, key: ntfy}
  - {env: DRIFT_GOTIFY_TOKEN, secretName: drift-notify, key: gotify}
  - {env: DRIFT_DISCORD_WEBHOOK, secretName: drift-notify, key: discord}
  - {env: DRIFT_TELEGRAM_TOKEN, secretName: drift-notify, key: telegram}
  - {env: DRIFT_TEAMS_WEBHOOK, secretName: drift-notify, key: teams}
  - {env: DRIFT_ALERTMANAGER_TOKEN, secretName: drift-notify, key: alertmanager}
"#;

/// Every notifier kind of drift.yaml, `accept.auto` and `audit` pass the chart's schema, render
/// into drift.yaml as given and pass `drift config check`; the schema still refuses an unknown
/// key in a notifier, a key of another kind, a webhook template, a URL given twice, automatic
/// pull requests without a rule and an audit log file the pod cannot have.
#[test]
fn the_new_notifiers_automatic_pull_requests_and_the_audit_join_render_a_valid_configuration() {
    if !helm_available("the_new_notifiers_automatic_pull_requests_and_the_audit_join_render_a_valid_configuration") {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let values = home.path().join("values-notifiers.yaml");
    std::fs::write(&values, NOTIFIERS_ACCEPT_AUDIT).unwrap();
    let rendered = template(home.path(), &[&values], &[]).unwrap();
    let objects = objects(&rendered);
    let yaml = config_check(&objects, home.path());
    let config: Value = serde_saphyr::from_str(&yaml).unwrap();
    let types: Vec<&str> = config["notify"].as_array().unwrap().iter().map(|n| n["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["ntfy", "gotify", "discord", "telegram", "teams", "alertmanager"], "{yaml}");
    assert!(config["notify"].as_array().unwrap().iter().all(|n| n["template"].is_string()), "{yaml}");
    assert_eq!(config["notify"][3]["chat_id"], -1001234567890_i64, "a chat id stays a number: {yaml}");
    assert_eq!(config["notify"][5]["labels"], serde_json::json!({"team": "platform"}));
    assert_eq!(
        config["accept"],
        serde_json::json!({"auto": {"rules": [{"drift_types": ["replicas_drift"], "classifications": ["manual_change"],
            "namespaces": ["staging"], "min_age": "30m", "min_confidence": 0.8}], "max": 3, "per": "1h", "tick": "1m"}})
    );
    assert_eq!(config["audit"], serde_json::json!({"window": "10s"}));
    // The secrets: named in drift.yaml, taken from the Secret by the container, never rendered.
    let env: Vec<(String, String)> = env_of(&objects)
        .iter()
        .filter_map(|e| {
            let r = e["valueFrom"].get("secretKeyRef")?;
            Some((e["name"].as_str()?.to_owned(), format!("{}/{}", r["name"].as_str()?, r["key"].as_str()?)))
        })
        .filter(|(name, _)| name != "DRIFT_API_TOKEN")
        .collect();
    let expected = [
        ("GIT_TOKEN", "git-token/token"),
        ("DRIFT_NTFY_TOKEN", "drift-notify/ntfy"),
        ("DRIFT_GOTIFY_TOKEN", "drift-notify/gotify"),
        ("DRIFT_DISCORD_WEBHOOK", "drift-notify/discord"),
        ("DRIFT_TELEGRAM_TOKEN", "drift-notify/telegram"),
        ("DRIFT_TEAMS_WEBHOOK", "drift-notify/teams"),
        ("DRIFT_ALERTMANAGER_TOKEN", "drift-notify/alertmanager"),
    ];
    assert_eq!(env, expected.map(|(a, b)| (a.to_owned(), b.to_owned())));
    // The defaults render neither block.
    let plain = objects_config(home.path(), &[]);
    assert!(plain.get("accept").is_none() && plain.get("audit").is_none(), "{plain}");

    let cases: &[(&[&str], &str)] = &[
        (&["detector.notify[0].colour=red"], "Additional property colour is not allowed"),
        (&["detector.notify[1].topic=drift"], r#"Property name of "topic" does not match"#),
        (
            &["detector.notify[2].url=https://discord.example.com/api/webhooks/1/x"],
            "detector.notify.2: Must validate one and only one schema (oneOf)",
        ),
        (&["detector.notify[3].chat_id=channel"], "detector.notify.3.chat_id"),
        (&["detector.notify[5].labels.bad-name=x"], "detector.notify.5.labels"),
        (&["detector.accept.auto.rules[0].min_confidence=2"], "min_confidence"),
        (&["detector.accept.auto.surprise=1"], "Additional property surprise is not allowed"),
        (&["detector.audit.log=/var/log/kubernetes/audit.log"], "Additional property log is not allowed"),
    ];
    for (sets, expected) in cases {
        let err = template(home.path(), &[&values], sets).expect_err(&format!("{sets:?} must be refused"));
        assert!(err.contains(expected), "{sets:?}: the error names {expected:?}: {err}");
    }
    let webhook = home.path().join("values-webhook.yaml");
    std::fs::write(
        &webhook,
        "detector:\n  notify:\n    - {type: webhook, url: https://hooks.example.com, secret_env: S, template: x}\n",
    )
    .unwrap();
    let err = template(home.path(), &[&webhook], &[]).unwrap_err();
    assert!(err.contains(r#"Property name of "template" does not match"#), "a webhook has no template: {err}");
    let no_rule = home.path().join("values-no-rule.yaml");
    std::fs::write(&no_rule, "detector:\n  accept:\n    auto: {max: 2}\n").unwrap();
    let err = template(home.path(), &[&no_rule], &[]).unwrap_err();
    assert!(err.contains("detector.accept.auto: rules is required"), "automatic pull requests need a rule: {err}");
}

/// The drift.yaml the chart renders with these values files, read.
fn objects_config(home: &Path, values: &[&Path]) -> Value {
    let objects = objects(&template(home, values, &[]).unwrap());
    serde_saphyr::from_str(find(&objects, "ConfigMap", "drift")["data"]["drift.yaml"].as_str().unwrap()).unwrap()
}

/// `detector.alerts` renders into drift.yaml's `alerts` and `secretHash` names the Secret of the
/// hash key: the container takes it as DRIFT_SECRET_HASH_KEY and drift.yaml names that
/// variable; `drift config check` takes both; the defaults render neither; the schema refuses an
/// unknown key and a Secret name Kubernetes would refuse.
#[test]
fn alerts_and_the_secret_hash_key_render_into_the_configuration_and_the_environment() {
    if !helm_available("alerts_and_the_secret_hash_key_render_into_the_configuration_and_the_environment") {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let values = home.path().join("values-alerts.yaml");
    std::fs::write(
        &values,
        "detector:\n  alerts: {window: 30m, notify: false}\nsecretHash:\n  existingSecret: drift-hash\n  key: hex\n",
    )
    .unwrap();
    let rendered = objects(&template(home.path(), &[&values], &[]).unwrap());
    let yaml = config_check(&rendered, home.path());
    let config: Value = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(config["alerts"], serde_json::json!({"window": "30m", "notify": false}), "{yaml}");
    assert_eq!(config["secret_hash"], serde_json::json!({"key_env": "DRIFT_SECRET_HASH_KEY"}), "{yaml}");
    let hash_env: Vec<Value> = env_of(&rendered).into_iter().filter(|e| e["name"] == "DRIFT_SECRET_HASH_KEY").collect();
    assert_eq!(hash_env.len(), 1, "one DRIFT_SECRET_HASH_KEY in the container");
    assert_eq!(hash_env[0]["valueFrom"]["secretKeyRef"], serde_json::json!({"name": "drift-hash", "key": "hex"}));

    let plain_objects = objects(&template(home.path(), &[], &[]).unwrap());
    let plain_config: Value =
        serde_saphyr::from_str(find(&plain_objects, "ConfigMap", "drift")["data"]["drift.yaml"].as_str().unwrap())
            .unwrap();
    assert!(plain_config.get("alerts").is_none() && plain_config.get("secret_hash").is_none(), "{plain_config}");
    assert!(env_of(&plain_objects).iter().all(|e| e["name"] != "DRIFT_SECRET_HASH_KEY"));

    let cases: &[(&[&str], &str)] = &[
        (&["detector.alerts.surprise=1"], "Additional property surprise is not allowed"),
        (&["detector.alerts.window=soon"], "detector.alerts.window"),
        (&["secretHash.existingSecret=Not_A_Name"], "secretHash.existingSecret"),
    ];
    for (sets, expected) in cases {
        let err = template(home.path(), &[], sets).expect_err(&format!("{sets:?} must be refused"));
        assert!(err.contains(expected), "{sets:?}: the error names {expected:?}: {err}");
    }
}
