//! `drift diff --desired FILES --live FILES` matching objects the way a user expects
//! (docs/architecture.md, "Matching objects in file mode"): manifests that leave the namespace to
//! Kustomize or the Argo CD destination against a real `kubectl get -o yaml` dump of the test
//! API server; a name found in several namespaces; a namespace given to a cluster-scoped custom
//! kind; and objects the cluster has that Git does not declare (`--orphans`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{ClusterHome, SHOP};
use drift_test_apiserver::Options;
use serde_json::Value;

struct Env(ClusterHome);

impl std::ops::Deref for Env {
    type Target = ClusterHome;
    fn deref(&self) -> &ClusterHome {
        &self.0
    }
}

impl Env {
    /// The test API server with the shop applied by kubectl.
    fn start() -> Env {
        let env = Env(ClusterHome::start(Options::default()));
        for (name, text) in SHOP {
            env.write(&format!("applied/{name}"), text);
        }
        env.kubectl(&["apply", "-R", "-f", env.path("applied").to_str().unwrap()]);
        env
    }

    /// The shop as a GitOps repository leaves it to Kustomize: no namespace anywhere.
    fn desired_without_namespaces(&self) -> PathBuf {
        for (name, text) in SHOP.iter().filter(|(n, _)| *n != "namespace.yaml") {
            let text: String =
                text.lines().filter(|l| l.trim() != "namespace: shop").map(|l| format!("{l}\n")).collect();
            assert!(!text.contains("namespace:"), "{name}");
            self.write(&format!("desired/{name}"), &text);
        }
        self.path("desired")
    }

    /// `kubectl get ... -o yaml` of every namespace into a file, as a user dumps a cluster.
    fn dump(&self, kinds: &str) -> PathBuf {
        let text = self.kubectl(&["get", kinds, "-A", "-o", "yaml"]);
        self.write("live.yaml", &text)
    }
}

/// `drift diff -o json` with extra arguments: exit code and the document.
fn diff(desired: &Path, live: &Path, extra: &[&str]) -> (i32, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_drift"))
        .args(["diff", "--desired", desired.to_str().unwrap(), "--live", live.to_str().unwrap(), "-o", "json"])
        .args(extra)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let doc = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap(), doc)
}

fn messages(doc: &Value, fatal: bool) -> Vec<String> {
    doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["fatal"].as_bool().unwrap_or(false) == fatal)
        .map(|w| w["message"].as_str().unwrap().to_owned())
        .collect()
}

fn drifts(doc: &Value) -> Vec<(String, String, String)> {
    let mut out: Vec<_> = doc["drifts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["resource"]["name"].as_str().unwrap().to_owned(),
                d["drift_type"].as_str().unwrap().to_owned(),
                d["severity"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn manifests_without_namespace_match_a_kubectl_dump_and_say_where() {
    let env = Env::start();
    let desired = env.desired_without_namespaces();
    let live = env.dump("deployments,services,configmaps");
    let (code, doc) = diff(&desired, &live, &[]);
    assert_eq!(code, 0, "in sync once matched: {doc}");
    assert_eq!(doc["summary"]["resources_compared"], 3, "{doc}");
    let notes = messages(&doc, false);
    assert_eq!(notes.len(), 3, "one note per object placed: {notes:?}");
    assert!(notes.iter().all(|n| n.contains("namespace shop") && n.contains("-n")), "{notes:?}");

    // A real change is still found once matched.
    env.kubectl(&["scale", "deployment/web", "-n", "shop", "--replicas=7"]);
    let live = env.dump("deployments,services,configmaps");
    let (code, doc) = diff(&desired, &live, &[]);
    assert_eq!(code, 1, "{doc}");
    assert_eq!(drifts(&doc), vec![("web".to_owned(), "replicas_drift".to_owned(), "LOW".to_owned())]);

    // The same name in a second namespace: the choice is the user's.
    env.kubectl(&["create", "namespace", "staging"]);
    env.kubectl(&["create", "configmap", "settings", "-n", "staging", "--from-literal=mode=fast"]);
    let live = env.dump("deployments,services,configmaps");
    let (code, doc) = diff(&desired, &live, &[]);
    assert_eq!(code, 2, "an object that cannot be matched is an error: {doc}");
    let errors = messages(&doc, true);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("settings") && errors[0].contains("shop, staging") && errors[0].contains("-n"));
    assert!(
        drifts(&doc).iter().all(|(_, t, _)| t != "missing_resource"),
        "the ambiguous object is not reported missing: {doc}"
    );
    assert_eq!(doc["summary"]["resources_compared"], 2);

    // `-n` decides, for every object that names none; no notes then.
    let (code, doc) = diff(&desired, &live, &["-n", "staging"]);
    assert_eq!(code, 1);
    let missing: Vec<_> = drifts(&doc).into_iter().filter(|(_, t, _)| t == "missing_resource").collect();
    assert_eq!(missing.len(), 2, "web's Deployment and Service are not in staging: {doc}");
    let (code, doc) = diff(&desired, &live, &["--namespace", "shop"]);
    assert_eq!(code, 1, "{doc}");
    assert_eq!(drifts(&doc).len(), 1, "only the scaled replicas: {doc}");
    assert!(messages(&doc, false).is_empty());
}

#[test]
fn a_namespace_on_a_cluster_scoped_custom_kind_is_ignored() {
    let home = tempfile::tempdir().unwrap();
    let desired = home.path().join("issuer.yaml");
    std::fs::write(
        &desired,
        "apiVersion: cert-manager.io/v1\nkind: ClusterIssuer\nmetadata:\n  name: letsencrypt\n  namespace: cert-manager\n\
         spec:\n  acme:\n    email: ops@example.com\n",
    )
    .unwrap();
    let live = home.path().join("live.yaml");
    std::fs::write(
        &live,
        "apiVersion: cert-manager.io/v1\nkind: ClusterIssuer\nmetadata:\n  name: letsencrypt\n  uid: 1\n\
         spec:\n  acme:\n    email: root@example.com\n",
    )
    .unwrap();
    let (code, doc) = diff(&desired, &live, &[]);
    assert_eq!(code, 1, "{doc}");
    let d = &doc["drifts"][0];
    assert_eq!(d["path"], "spec.acme.email", "compared, not missing: {doc}");
    assert!(d["resource"]["namespace"].is_null());
}

#[test]
fn orphans_are_the_objects_a_person_made_that_git_does_not_declare() {
    let env = Env::start();
    // Git also holds a Secret in shop, so Secrets there are managed.
    let secret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: tls\n  namespace: shop\nstringData:\n  key: k\n";
    env.write("applied/secret.yaml", secret);
    env.kubectl(&["apply", "-f", env.path("applied/secret.yaml").to_str().unwrap()]);
    env.kubectl(&["create", "configmap", "debug", "-n", "shop", "--from-literal=verbose=1"]);
    env.kubectl(&["create", "secret", "generic", "stolen", "-n", "shop", "--from-literal=token=canary-7f3e91"]);
    let stray = common::DEPLOYMENT.replace("name: web", "name: stray");
    env.write("stray.yaml", &stray);
    env.kubectl(&["apply", "-f", env.path("stray.yaml").to_str().unwrap()]);
    // Made by someone else's controller (an owner reference): not a person's.
    let owned = concat!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: generated\n  namespace: shop\n",
        "  ownerReferences:\n  - {apiVersion: apps/v1, kind: Deployment, name: web, uid: 6a1f}\ndata: {a: b}\n",
    );
    env.write("owned.yaml", owned);
    env.kubectl(&["apply", "-f", env.path("owned.yaml").to_str().unwrap()]);
    // Outside the scope: Git has no ConfigMap in default.
    env.kubectl(&["create", "configmap", "elsewhere", "-n", "default", "--from-literal=a=b"]);

    let desired = env.path("applied");
    let live = env.dump("namespaces,deployments,services,configmaps,secrets");
    let (code, doc) = diff(&desired, &live, &[]);
    assert_eq!(code, 0, "off unless asked for: {doc}");
    let (code, doc) = diff(&desired, &live, &["--orphans"]);
    assert_eq!(code, 1, "{doc}");
    let unmanaged: Vec<_> = drifts(&doc).into_iter().filter(|(_, t, _)| t == "unmanaged_resource").collect();
    let want = |n: &str, s: &str| (n.to_owned(), "unmanaged_resource".to_owned(), s.to_owned());
    assert_eq!(unmanaged, vec![want("debug", "MEDIUM"), want("stolen", "HIGH"), want("stray", "MEDIUM")], "{doc}");
    let text = doc.to_string();
    assert!(!text.contains("canary-7f3e91") && !text.contains("Y2FuYXJ5LTdmM2U5MQ"), "no Secret value in the report");

    // An ignore rule that names an object leaves it out.
    let rules = env.write("ignore.yaml", "- kind: ConfigMap\n  name: debug\n");
    let (_, doc) = diff(&desired, &live, &["--orphans", "--ignore", rules.to_str().unwrap()]);
    let names: Vec<_> = drifts(&doc).into_iter().map(|(n, _, _)| n).collect();
    assert_eq!(names, vec!["stolen", "stray"]);

    // The same against the cluster itself.
    let out = Command::new(env!("CARGO_BIN_EXE_drift"))
        .args(["diff", "--desired", desired.to_str().unwrap(), "--cluster", "--orphans", "-o", "json"])
        .arg("--kubeconfig")
        .arg(env.server.kubeconfig_path())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{doc}");
    let names: Vec<_> = drifts(&doc).into_iter().map(|(n, _, _)| n).collect();
    assert_eq!(names, vec!["debug", "stolen", "stray"]);
    // The cluster keeps managedFields (a `kubectl get` dump leaves them out): who made each.
    let mut by: Vec<_> = doc["drifts"].as_array().unwrap().iter().map(|d| d["changed_by"].as_str().unwrap()).collect();
    by.sort_unstable();
    assert_eq!(by, ["kubectl-client-side-apply", "kubectl-create", "kubectl-create"], "{doc}");
}

/// A live folder that holds one object twice (two dumps that overlap): the later one counts,
/// also for an item of a desired `List` (let go of once compared, read again from its file by
/// its key among the items of its document).
#[test]
fn a_live_object_given_twice_counts_as_its_later_copy_for_a_list_item_too() {
    let dir = tempfile::tempdir().unwrap();
    let (desired, live) = (dir.path().join("desired"), dir.path().join("live"));
    std::fs::create_dir_all(&desired).unwrap();
    std::fs::create_dir_all(&live).unwrap();
    std::fs::write(
        desired.join("apps.yaml"),
        "apiVersion: v1\nkind: List\nitems:\n\
         - {apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: x}, data: {k: '1'}}\n\
         - {apiVersion: v1, kind: ConfigMap, metadata: {name: b, namespace: x}, data: {k: '1'}}\n",
    )
    .unwrap();
    let cm = |name: &str, k: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: x}}\ndata: {{k: '{k}'}}\n")
    };
    // The first dump has both in sync; the second, read after it, has b changed.
    std::fs::write(live.join("1.yaml"), format!("{}---\n{}", cm("a", "1"), cm("b", "1"))).unwrap();
    std::fs::write(live.join("2.yaml"), cm("b", "2")).unwrap();
    let (code, doc) = diff(&desired, &live, &[]);
    assert_eq!(messages(&doc, true), Vec::<String>::new());
    assert_eq!(drifts(&doc), [("b".to_owned(), "configmap_drift".to_owned(), "MEDIUM".to_owned())]);
    assert_eq!(code, 1);
}

/// A desired folder that holds what `drift scan` renders (a Flux Kustomization with a
/// substitution, a kustomization) is read as `drift render` reads it: objects substituted, and
/// the same notes (a variable drift cannot know, left out of the comparison).
#[test]
fn a_gitops_folder_is_read_as_drift_render_reads_it_with_the_same_notes() {
    let home = tempfile::tempdir().unwrap();
    let w = |p: &str, t: &str| {
        let f = home.path().join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(&f, t).unwrap();
        f
    };
    w(
        "repo/clusters/apps.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: apps, namespace: flux-system}\nspec:\n  path: ./apps\n  sourceRef: {kind: GitRepository, name: flux-system}\n  postBuild:\n    substitute: {DOMAIN: example.com}\n    substituteFrom: [{kind: ConfigMap, name: cluster-vars}]\n",
    );
    w(
        "repo/apps/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: shop}\ndata:\n  host: web.${DOMAIN}\n  region: ${REGION}\n",
    );
    let live = w(
        "live.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: shop}\ndata:\n  host: web.example.com\n  region: eu-west-1\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: apps, namespace: flux-system}\nspec:\n  path: ./apps\n  sourceRef: {kind: GitRepository, name: flux-system}\n  postBuild:\n    substitute: {DOMAIN: example.com}\n    substituteFrom: [{kind: ConfigMap, name: cluster-vars}]\n",
    );
    let repo = home.path().join("repo");
    let (code, doc) = diff(&repo, &live, &[]);
    assert_eq!(code, 0, "the host substituted, the region left out: {doc}");
    assert_eq!(doc["summary"]["resources_compared"], 2, "{doc}");
    let notes = |doc: &Value| -> Vec<String> {
        let mut m: Vec<String> =
            doc["warnings"].as_array().unwrap().iter().map(|w| w["message"].as_str().unwrap().to_owned()).collect();
        m.sort();
        m
    };
    let render = Command::new(env!("CARGO_BIN_EXE_drift"))
        .args(["render", "--repo", repo.to_str().unwrap(), "-o", "json"])
        .output()
        .unwrap();
    let rendered: Value = serde_json::from_slice(&render.stdout).unwrap();
    assert_eq!(notes(&doc), notes(&rendered), "the same notes as drift render");
    assert!(notes(&doc).iter().any(|m| m.contains("variable REGION") && m.contains("/data/region")), "{doc}");

    // The live value changed by hand: one drift, on the substituted field.
    std::fs::write(&live, std::fs::read_to_string(&live).unwrap().replace("web.example.com", "web.example.org"))
        .unwrap();
    let (code, doc) = diff(&repo, &live, &[]);
    assert_eq!(code, 1, "{doc}");
    let drifts = doc["drifts"].as_array().unwrap();
    assert_eq!(drifts.len(), 1, "{doc}");
    assert_eq!(drifts[0]["path"], "data.host");
}
