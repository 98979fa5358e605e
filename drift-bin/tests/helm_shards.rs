//! The Helm chart with several clusters shared by several replicas (issue 35, item 2): the
//! rendered drift.yaml passes `drift config check` with its `clusters:` and the election that
//! shards them; the Role of the Leases lets the replicas list the membership Leases; each
//! credentials Secret gets a Role of `get` on its name only, in its namespace; bad cluster
//! values are refused with a clear message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Command;

use common::chart::{chart, helm, objects};
use serde_json::{Value, json};

const VALUES: &str = r#"
detector:
  clusters:
    - name: home
      in_cluster: true
    - name: edge
      secret: {name: edge-cluster, namespace: argocd}
    - name: lab
      secret: {name: lab-kubeconfig}
      context: lab
  repositories:
    - name: platform
      url: https://github.com/example/platform-gitops.git
      ref: main
    - name: edge-apps
      url: https://github.com/example/edge.git
      clusters: [edge, lab]
replicaCount: 3
leaderElection:
  enabled: true
storage:
  type: bundled
"#;

fn template(home: &Path, values: &Path, sets: &[&str]) -> Result<String, String> {
    let chart = chart();
    let mut args = vec!["template", "drift", chart.to_str().unwrap(), "--namespace", "drift", "--values"];
    args.push(values.to_str().unwrap());
    for s in sets {
        args.extend(["--set", s]);
    }
    let out = helm(home, None, &args);
    if out.status.success() {
        Ok(String::from_utf8(out.stdout).unwrap())
    } else {
        Err(format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    }
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str, namespace: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name && o["metadata"]["namespace"] == namespace)
        .unwrap_or_else(|| panic!("no {kind} {namespace}/{name}"))
}

#[test]
fn several_clusters_over_several_replicas_render_a_valid_configuration_and_narrow_rights() {
    if !drift_testkit::charts::helm_available("several_clusters_over_several_replicas_render") {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let values = home.path().join("values-shards.yaml");
    std::fs::write(&values, VALUES).unwrap();
    let objects = objects(&template(home.path(), &values, &[]).unwrap());

    // The detector takes the configuration the chart renders.
    let yaml = find(&objects, "ConfigMap", "drift", "drift")["data"]["drift.yaml"].as_str().unwrap().to_owned();
    let file = home.path().join("drift.yaml");
    std::fs::write(&file, &yaml).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_drift"))
        .args(["config", "check"])
        .arg(&file)
        .env("HOME", home.path())
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    assert!(out.status.success(), "drift config check:\n{yaml}\n{}", String::from_utf8_lossy(&out.stderr));
    let config: Value = serde_saphyr::from_str(&yaml).unwrap();
    assert!(config.get("cluster").is_none(), "{yaml}");
    assert_eq!(
        config["clusters"][1],
        json!({"name": "edge", "secret": {"name": "edge-cluster", "namespace": "argocd"}})
    );
    assert_eq!(config["repositories"][1]["clusters"], json!(["edge", "lab"]));
    assert_eq!(config["leader_election"]["enabled"], true);
    assert_eq!(find(&objects, "Deployment", "drift", "drift")["spec"]["replicas"], 3);

    // Leases: the replicas create, renew, watch and list them (the membership is listed by label).
    let role = find(&objects, "Role", "drift-leader-election", "drift");
    assert_eq!(
        role["rules"],
        json!([{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create", "get", "list", "update", "watch"]}])
    );
    // Each credentials Secret: get on its name, in its namespace, and nothing else.
    for (namespace, name) in [("argocd", "edge-cluster"), ("drift", "lab-kubeconfig")] {
        let role = find(&objects, "Role", "drift-cluster-secrets", namespace);
        assert_eq!(
            role["rules"],
            json!([{"apiGroups": [""], "resources": ["secrets"], "resourceNames": [name], "verbs": ["get"]}])
        );
        let binding = find(&objects, "RoleBinding", "drift-cluster-secrets", namespace);
        assert_eq!(binding["subjects"][0], json!({"kind": "ServiceAccount", "name": "drift", "namespace": "drift"}));
    }

    // Bad values: a cluster the pod cannot reach, one named twice, a name a Lease cannot take,
    // several replicas without the election.
    let err = template(home.path(), &values, &["detector.clusters[0].in_cluster=false"]).unwrap_err();
    assert!(err.contains("cluster home needs in_cluster: true or a secret"), "{err}");
    let err = template(home.path(), &values, &["detector.clusters[1].name=home"]).unwrap_err();
    assert!(err.contains("the cluster home is given twice"), "{err}");
    let err = template(home.path(), &values, &["detector.clusters[1].name=Edge_1"]).unwrap_err();
    assert!(err.contains("detector.clusters.1.name"), "{err}");
    let err = template(home.path(), &values, &["leaderElection.enabled=false"]).unwrap_err();
    assert!(err.contains("leaderElection.enabled"), "{err}");
}
