//! A cluster's credentials from a Secret, in the formats users already keep them in:
//!
//! - an **Argo CD cluster Secret** (label `argocd.argoproj.io/secret-type: cluster`; keys
//!   `server`, optionally `name`, and `config`: JSON with `bearerToken`, or `username` and
//!   `password`, and `tlsClientConfig` {`caData`, `certData`, `keyData`, `insecure`,
//!   `serverName`}; the `*Data` values are base64 PEM, as Argo CD writes them);
//! - a **Flux kubeconfig Secret** (the `kubeConfig.secretRef` of a Kustomization or
//!   HelmRelease): a kubeconfig under the key `value` or `value.yaml`.
//!
//! The Secret comes from a file (a manifest, YAML or JSON, with `data` in base64 or
//! `stringData`) or from the home cluster (`get` on one Secret). Every error names the Secret
//! and the key, never a value: tokens and keys are not logged nor shown.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{K8sError, error_chain};

/// The label of an Argo CD cluster Secret, and its value.
pub const ARGOCD_SECRET_TYPE: (&str, &str) = ("argocd.argoproj.io/secret-type", "cluster");

/// Where a credentials Secret is: a file, or a Secret of the home cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct SecretRef {
    /// A file holding the Secret's manifest (YAML or JSON).
    #[serde(default)]
    pub file: Option<PathBuf>,
    /// The Secret's name in the home cluster.
    #[serde(default)]
    pub name: Option<String>,
    /// The Secret's namespace in the home cluster (default: the detector's namespace,
    /// `$POD_NAMESPACE`, else `default`).
    #[serde(default)]
    pub namespace: Option<String>,
    /// How often a long-running detector reads the Secret again, to take a rotated bearer
    /// token (default 1 minute; `0s`: never).
    #[serde(default = "default_refresh", with = "humantime_serde")]
    pub refresh: std::time::Duration,
}

fn default_refresh() -> std::time::Duration {
    std::time::Duration::from_secs(60)
}

impl SecretRef {
    /// Checks that exactly one place is named, without any I/O.
    pub fn validate(&self) -> drift_model::Result<()> {
        let bad = |m: &str| Err(drift_model::Error::config(format!("credentials secret: {m}")));
        match (&self.file, &self.name) {
            (Some(_), Some(_)) => bad("give `file` or `name`, not both"),
            (None, None) => bad("give `file` (a Secret manifest) or `name` (a Secret of the home cluster)"),
            (Some(_), None) if self.namespace.is_some() => bad("`namespace` goes with `name`, not with `file`"),
            (None, Some(n)) if n.trim().is_empty() => bad("`name` is empty"),
            _ => Ok(()),
        }
    }

    /// How the Secret is named in messages (never its content).
    pub fn describe(&self, default_namespace: &str) -> String {
        match (&self.file, &self.name) {
            (Some(f), _) => format!("Secret file {}", f.display()),
            (None, Some(n)) => format!("Secret {}/{n}", self.namespace.as_deref().unwrap_or(default_namespace)),
            (None, None) => "no Secret".to_owned(),
        }
    }
}

/// Which format a Secret was read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretFormat {
    /// An Argo CD cluster Secret.
    ArgoCd,
    /// A Flux kubeconfig Secret.
    Flux,
}

/// The credentials a Secret holds, as a kubeconfig (never printed: `Debug` shows the format and
/// the server only).
pub struct Credentials {
    /// The kubeconfig built from the Secret (Argo CD) or held by it (Flux).
    pub kubeconfig: kube::config::Kubeconfig,
    /// The format it was read as.
    pub format: SecretFormat,
    /// The `name` of an Argo CD cluster Secret (what Argo CD Applications' `destination.name`
    /// calls the cluster); `None` for a Flux Secret or an Argo CD one without it.
    pub name: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let servers: Vec<_> =
            self.kubeconfig.clusters.iter().filter_map(|c| c.cluster.as_ref()?.server.as_deref()).collect();
        f.debug_struct("Credentials").field("format", &self.format).field("servers", &servers).finish_non_exhaustive()
    }
}

fn config_error(what: &str, message: impl std::fmt::Display) -> drift_model::Error {
    K8sError::Config(format!("{what}: {message}")).into()
}

/// Reads a Secret manifest from a file (YAML or JSON; one document).
pub fn secret_from_file(path: &Path) -> drift_model::Result<Value> {
    let what = format!("Secret file {}", path.display());
    let text = std::fs::read_to_string(path).map_err(|e| config_error(&what, e))?;
    // The parser's message may quote the text it stopped at: a value of the Secret. Only where
    // is said.
    let value: Value = serde_saphyr::from_str(&text).map_err(|e| {
        let at = e.to_string().lines().find(|l| l.contains("line")).map(str::to_owned);
        config_error(&what, format!("not a YAML or JSON manifest{}", at.map(|a| format!(" ({a})")).unwrap_or_default()))
    })?;
    Ok(value)
}

/// Reads a Secret of the home cluster through `client` (needs `get` on it).
pub async fn secret_from_cluster(client: &kube::Client, namespace: &str, name: &str) -> drift_model::Result<Value> {
    let api: kube::Api<k8s_openapi::api::core::v1::Secret> = kube::Api::namespaced(client.clone(), namespace);
    let secret = api
        .get(name)
        .await
        .map_err(|e| config_error(&format!("Secret {namespace}/{name} of the home cluster"), error_chain(&e)))?;
    serde_json::to_value(secret).map_err(|e| config_error(&format!("Secret {namespace}/{name}"), e))
}

/// The keys of a Secret with their bytes: `data` (base64) with `stringData` over it, as the API
/// server merges them.
fn keys(secret: &Value, what: &str) -> drift_model::Result<std::collections::BTreeMap<String, Vec<u8>>> {
    if let Some(kind) = secret.get("kind").and_then(Value::as_str)
        && kind != "Secret"
    {
        return Err(config_error(what, format!("is a {kind}, not a Secret")));
    }
    let mut out = std::collections::BTreeMap::new();
    if let Some(data) = secret.get("data").and_then(Value::as_object) {
        for (k, v) in data {
            let text = v.as_str().ok_or_else(|| config_error(what, format!("data key {k:?} is not a string")))?;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text.trim())
                .map_err(|_| config_error(what, format!("data key {k:?} is not base64")))?;
            out.insert(k.clone(), bytes);
        }
    }
    if let Some(data) = secret.get("stringData").and_then(Value::as_object) {
        for (k, v) in data {
            let text = v.as_str().ok_or_else(|| config_error(what, format!("stringData key {k:?} is not a string")))?;
            out.insert(k.clone(), text.as_bytes().to_vec());
        }
    }
    Ok(out)
}

fn text(keys: &std::collections::BTreeMap<String, Vec<u8>>, key: &str, what: &str) -> drift_model::Result<String> {
    let bytes = keys.get(key).ok_or_else(|| config_error(what, format!("no key {key:?}")))?;
    String::from_utf8(bytes.clone()).map_err(|_| config_error(what, format!("key {key:?} is not UTF-8 text")))
}

/// The credentials of a Secret (`what` names it in errors): an Argo CD cluster Secret (its
/// label, or the keys `server` and `config`) or a Flux kubeconfig Secret (`value` or
/// `value.yaml`).
pub fn credentials_from_secret(secret: &Value, what: &str) -> drift_model::Result<Credentials> {
    let keys = keys(secret, what)?;
    let labelled_argo = secret
        .pointer("/metadata/labels")
        .and_then(|l| l.get(ARGOCD_SECRET_TYPE.0))
        .and_then(Value::as_str)
        .is_some_and(|v| v == ARGOCD_SECRET_TYPE.1);
    if labelled_argo || (keys.contains_key("server") && keys.contains_key("config")) {
        return argocd(&keys, what);
    }
    for key in ["value", "value.yaml"] {
        if keys.contains_key(key) {
            let yaml = text(&keys, key, what)?;
            let kubeconfig = kube::config::Kubeconfig::from_yaml(&yaml)
                .map_err(|_| config_error(what, format!("key {key:?} does not hold a kubeconfig")))?;
            return Ok(Credentials { kubeconfig, format: SecretFormat::Flux, name: None });
        }
    }
    Err(config_error(
        what,
        format!(
            "neither an Argo CD cluster Secret (label {}: {}, keys server and config) nor a Flux kubeconfig Secret (key value or value.yaml); its keys: {:?}",
            ARGOCD_SECRET_TYPE.0,
            ARGOCD_SECRET_TYPE.1,
            keys.keys().collect::<Vec<_>>()
        ),
    ))
}

/// The `config` of an Argo CD cluster Secret (the fields this reader takes; any other is an
/// error naming it, so that credentials are never half-used).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ArgoConfig {
    #[serde(default)]
    bearer_token: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    tls_client_config: ArgoTls,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ArgoTls {
    #[serde(default)]
    insecure: bool,
    #[serde(default)]
    server_name: Option<String>,
    #[serde(default)]
    ca_data: Option<String>,
    #[serde(default)]
    cert_data: Option<String>,
    #[serde(default)]
    key_data: Option<String>,
}

fn argocd(keys: &std::collections::BTreeMap<String, Vec<u8>>, what: &str) -> drift_model::Result<Credentials> {
    let server = text(keys, "server", what)?;
    let config_text = text(keys, "config", what)?;
    let raw: Value = serde_json::from_str(&config_text)
        .map_err(|_| config_error(what, "key \"config\" is not JSON (Argo CD's cluster config)"))?;
    for unsupported in ["execProviderConfig", "awsAuthConfig"] {
        if raw.get(unsupported).is_some() {
            return Err(config_error(
                what,
                format!(
                    "`{unsupported}` in key \"config\" is not supported; give the cluster a bearerToken or client certificate, or a kubeconfig"
                ),
            ));
        }
    }
    // serde's message names the unknown field, never a value.
    let config: ArgoConfig =
        serde_json::from_value(raw).map_err(|e| config_error(what, format!("key \"config\": {e}")))?;
    if config.bearer_token.is_none() && config.username.is_none() && config.tls_client_config.cert_data.is_none() {
        return Err(config_error(
            what,
            "key \"config\" holds no credentials (bearerToken, username and password, or tlsClientConfig.certData and keyData)",
        ));
    }
    if config.tls_client_config.cert_data.is_some() != config.tls_client_config.key_data.is_some() {
        return Err(config_error(what, "tlsClientConfig needs both certData and keyData"));
    }
    if config.username.is_some() != config.password.is_some() {
        return Err(config_error(what, "key \"config\" needs both username and password"));
    }
    let argo_name = keys.get("name").and_then(|n| String::from_utf8(n.clone()).ok()).filter(|n| !n.trim().is_empty());
    let name = argo_name.clone().unwrap_or_else(|| "argocd".to_owned());
    let tls = &config.tls_client_config;
    let mut cluster = json!({"server": server});
    if let Some(ca) = &tls.ca_data {
        cluster["certificate-authority-data"] = json!(ca);
    }
    if tls.insecure {
        cluster["insecure-skip-tls-verify"] = json!(true);
    }
    if let Some(sn) = &tls.server_name {
        cluster["tls-server-name"] = json!(sn);
    }
    let mut user = json!({});
    if let Some(t) = &config.bearer_token {
        user["token"] = json!(t);
    }
    if let (Some(u), Some(p)) = (&config.username, &config.password) {
        user["username"] = json!(u);
        user["password"] = json!(p);
    }
    if let (Some(c), Some(k)) = (&tls.cert_data, &tls.key_data) {
        user["client-certificate-data"] = json!(c);
        user["client-key-data"] = json!(k);
    }
    let kubeconfig = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    });
    let kubeconfig: kube::config::Kubeconfig = serde_json::from_value(kubeconfig)
        .map_err(|_| config_error(what, "the cluster config does not make a kubeconfig"))?;
    Ok(Credentials { kubeconfig, format: SecretFormat::ArgoCd, name: argo_name })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    const TOKEN: &str = "argo-token-9f8e7d-never-shown";

    fn argo(config: &str) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "east", "labels": {"argocd.argoproj.io/secret-type": "cluster"}},
            "data": {"name": b64("east"), "server": b64("https://10.0.0.1:6443"), "config": b64(config)},
        })
    }

    #[test]
    fn an_argocd_cluster_secret_becomes_a_kubeconfig_with_its_token_and_tls() {
        let config = format!(r#"{{"bearerToken":"{TOKEN}","tlsClientConfig":{{"insecure":false,"caData":"Q0E="}}}}"#);
        let c = credentials_from_secret(&argo(&config), "Secret argocd/east").unwrap();
        assert_eq!(c.format, SecretFormat::ArgoCd);
        assert_eq!(c.name.as_deref(), Some("east"), "the Secret's name, for Argo CD destinations");
        let kc = &c.kubeconfig;
        assert_eq!(kc.current_context.as_deref(), Some("east"));
        let cluster = kc.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://10.0.0.1:6443"));
        assert_eq!(cluster.certificate_authority_data.as_deref(), Some("Q0E="));
        let user = kc.auth_infos[0].auth_info.as_ref().unwrap();
        assert!(user.token.is_some());
        assert!(!format!("{c:?}").contains(TOKEN), "Debug never shows the token: {c:?}");
    }

    #[test]
    fn argocd_client_certificates_and_insecure_are_taken() {
        let c = credentials_from_secret(
            &argo(r#"{"tlsClientConfig":{"insecure":true,"certData":"Q0VSVA==","keyData":"S0VZ"}}"#),
            "s",
        )
        .unwrap();
        let cluster = c.kubeconfig.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.insecure_skip_tls_verify, Some(true));
        let user = c.kubeconfig.auth_infos[0].auth_info.as_ref().unwrap();
        assert_eq!(user.client_certificate_data.as_deref(), Some("Q0VSVA=="));
    }

    #[test]
    fn argocd_errors_name_the_key_never_the_value() {
        let e = credentials_from_secret(&argo(&format!(r#"{{"bearerToken":"{TOKEN}","awsAuthConfig":{{}}}}"#)), "s")
            .unwrap_err()
            .to_string();
        assert!(e.contains("awsAuthConfig") && !e.contains(TOKEN), "{e}");
        let e = credentials_from_secret(&argo(&format!(r#"{{"bearerToken":"{TOKEN}","bearerTokn":"x"}}"#)), "s")
            .unwrap_err()
            .to_string();
        assert!(e.contains("bearerTokn") && !e.contains(TOKEN), "{e}");
        let e = credentials_from_secret(&argo(&format!("not json {TOKEN}")), "s").unwrap_err().to_string();
        assert!(e.contains("not JSON") && !e.contains(TOKEN), "{e}");
        let e =
            credentials_from_secret(&argo(r#"{"tlsClientConfig":{"insecure":true}}"#), "s").unwrap_err().to_string();
        assert!(e.contains("no credentials"), "{e}");
        let e = credentials_from_secret(&argo(r#"{"tlsClientConfig":{"certData":"Q0VSVA=="}}"#), "s")
            .unwrap_err()
            .to_string();
        assert!(e.contains("both certData and keyData"), "{e}");
    }

    #[test]
    fn a_flux_kubeconfig_secret_is_read_from_value_or_value_yaml() {
        let kubeconfig = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://10.0.0.2:6443\nusers:\n- name: u\n  user:\n    token: {TOKEN}\ncontexts:\n- name: west\n  context: {{cluster: c, user: u}}\ncurrent-context: west\n"
        );
        for key in ["value", "value.yaml"] {
            let secret = json!({"kind": "Secret", "metadata": {"name": "w"}, "data": {key: b64(&kubeconfig)}});
            let c = credentials_from_secret(&secret, "s").unwrap();
            assert_eq!(c.format, SecretFormat::Flux);
            assert_eq!(c.kubeconfig.current_context.as_deref(), Some("west"));
        }
        let secret = json!({"kind": "Secret", "stringData": {"value": kubeconfig}});
        assert_eq!(credentials_from_secret(&secret, "s").unwrap().format, SecretFormat::Flux);
        let secret = json!({"kind": "Secret", "stringData": {"value": format!("{TOKEN}: [")}});
        let e = credentials_from_secret(&secret, "s").unwrap_err().to_string();
        assert!(e.contains("does not hold a kubeconfig") && !e.contains(TOKEN), "{e}");
    }

    #[test]
    fn other_secrets_and_objects_are_refused_with_their_keys() {
        let e = credentials_from_secret(&json!({"kind": "Secret", "data": {"token": b64(TOKEN)}}), "s")
            .unwrap_err()
            .to_string();
        assert!(e.contains("neither an Argo CD") && e.contains("\"token\"") && !e.contains(TOKEN), "{e}");
        let e = credentials_from_secret(&json!({"kind": "ConfigMap"}), "s").unwrap_err().to_string();
        assert!(e.contains("not a Secret"), "{e}");
        let e =
            credentials_from_secret(&json!({"kind": "Secret", "data": {"value": "%%%"}}), "s").unwrap_err().to_string();
        assert!(e.contains("not base64"), "{e}");
    }

    #[test]
    fn a_reference_names_one_place() {
        let r = |file: Option<&str>, name: Option<&str>, ns: Option<&str>| SecretRef {
            file: file.map(PathBuf::from),
            name: name.map(str::to_owned),
            namespace: ns.map(str::to_owned),
            refresh: default_refresh(),
        };
        r(Some("/s.yaml"), None, None).validate().unwrap();
        r(None, Some("east"), Some("argocd")).validate().unwrap();
        assert!(r(Some("/s.yaml"), Some("east"), None).validate().is_err());
        assert!(r(None, None, None).validate().is_err());
        assert!(r(Some("/s.yaml"), None, Some("argocd")).validate().is_err());
        assert_eq!(r(None, Some("east"), None).describe("drift"), "Secret drift/east");
    }
}
