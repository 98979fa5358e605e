//! The kubeconfig the server writes for its clients (kubectl, kube-rs).

use std::path::Path;

/// The kubeconfig text for a server at `url`, with a bearer token if one is required and the
/// CA certificate for HTTPS.
pub fn render(url: &str, token: Option<&str>, ca_pem: Option<&str>) -> String {
    use base64::Engine as _;
    let ca = match ca_pem {
        Some(pem) => {
            format!("    certificate-authority-data: {}\n", base64::engine::general_purpose::STANDARD.encode(pem))
        }
        None => String::new(),
    };
    let user = match token {
        Some(t) => format!("  user:\n    token: {}\n", serde_json::Value::String(t.to_owned())),
        None => "  user: {}\n".to_owned(),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: drift-test\n  cluster:\n{ca}    server: {url}\ncontexts:\n- name: drift-test\n  context:\n    cluster: drift-test\n    user: drift-test\n    namespace: default\ncurrent-context: drift-test\npreferences: {{}}\nusers:\n- name: drift-test\n{user}"
    )
}

/// Write the kubeconfig to `path`.
pub fn write(path: &Path, url: &str, token: Option<&str>, ca_pem: Option<&str>) -> std::io::Result<()> {
    std::fs::write(path, render(url, token, ca_pem))
}
