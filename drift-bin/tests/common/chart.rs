//! The Helm chart under test (deploy/helm/drift) and the real `helm`, run with its
//! configuration, cache and data in a throwaway home (never the user's).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// The chart's folder.
pub fn chart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/helm/drift")
}

/// `helm ARGS` with its homes in `home`, nothing else from the environment but PATH, and, when
/// given, a kubeconfig.
pub fn helm(home: &Path, kubeconfig: Option<&Path>, args: &[&str]) -> Output {
    let mut c = Command::new("helm");
    c.args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("HELM_CONFIG_HOME", home.join("helm/config"))
        .env("HELM_CACHE_HOME", home.join("helm/cache"))
        .env("HELM_DATA_HOME", home.join("helm/data"))
        .stdin(Stdio::null());
    if let Some(kc) = kubeconfig {
        c.env("KUBECONFIG", kc);
    }
    c.output().unwrap()
}

/// The objects of a rendered multi-document YAML text (documents split at `---` lines; empty
/// documents left out).
pub fn objects(rendered: &str) -> Vec<Value> {
    let mut docs = vec![String::new()];
    for line in rendered.lines() {
        if line == "---" {
            docs.push(String::new());
        } else {
            let doc = docs.last_mut().unwrap();
            doc.push_str(line);
            doc.push('\n');
        }
    }
    docs.iter()
        .map(|d| serde_saphyr::from_str::<Value>(d).unwrap_or_else(|e| panic!("{e}: {d}")))
        .filter(|v| !v.is_null())
        .collect()
}

/// The object of this kind and name; the kinds and names there are in the panic when none is.
pub fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects.iter().find(|o| o["kind"] == kind && o["metadata"]["name"] == name).unwrap_or_else(|| {
        let there: Vec<String> = objects
            .iter()
            .map(|o| format!("{}/{}", o["kind"].as_str().unwrap_or("?"), o["metadata"]["name"]))
            .collect();
        panic!("no {kind} {name} in {there:?}")
    })
}
