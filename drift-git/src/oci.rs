//! Charts in OCI registries, read through the OCI distribution API (`/v2/...`) as Flux's
//! source-controller and Argo CD's repo server read them: a tag chosen among the registry's
//! tags (or a version or digest given exactly), its manifest, and the layer of media type
//! `application/vnd.cncf.helm.chart.content.v1.tar+gzip`, whose bytes must have the digest the
//! manifest gives. The manifest's own digest is checked against the registry's
//! `Docker-Content-Digest` and against a digest the source pins (`OCIRepository`'s
//! `ref.digest`).
//!
//! Plain HTTP is used for loopback registries (as Docker and containerd do) and where the source
//! says so (Flux's `insecure: true`); HTTPS otherwise. Credentials come from where drift runs,
//! never from Git: `render.registry_auth_file` (or else `DRIFT_REGISTRY_AUTH_FILE`) names a
//! Docker `config.json` (the file of a `kubernetes.io/dockerconfigjson` Secret mounted into the
//! pod, or of `helm registry login`), whose `auths` entry for
//! the registry's host gives a user and password, used for a `Basic` challenge or to obtain a
//! `Bearer` token from the realm the registry names. They never appear in a message.

use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::charts::ChartError::{self, Refused, Unreachable};

/// The media type of a Helm chart's layer (`helm push`).
pub(crate) const HELM_CHART_LAYER: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";
const MANIFEST_TYPES: &str =
    "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";
/// The largest chart read (Flux's `--helm-chart-max-size` default).
const MAX_CHART: usize = 10 << 20;
const MAX_MANIFEST: usize = 4 << 20;
const MAX_TAG_PAGES: usize = 100;

/// A registry repository: `oci://HOST[:PORT]/PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OciRepo {
    pub host: String,
    pub name: String,
}

impl OciRepo {
    /// `oci://host/path` (or `host/path`, as Argo CD writes an OCI Helm repository).
    pub(crate) fn parse(url: &str) -> Result<OciRepo, String> {
        let rest = url.strip_prefix("oci://").unwrap_or(url).trim_end_matches('/');
        let (host, name) =
            rest.split_once('/').ok_or_else(|| format!("`{url}` names no repository in its registry"))?;
        let valid_name = !name.is_empty()
            && name.split('/').all(|c| {
                !c.is_empty() && c.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
            });
        if host.is_empty() || !valid_name || host.contains(['@', '?', '#']) {
            return Err(format!("`{url}` is not a registry repository (oci://HOST/PATH, lower case)"));
        }
        Ok(OciRepo { host: host.to_owned(), name: name.to_owned() })
    }

    /// Loopback registries are spoken to in plain HTTP, as Docker and containerd do.
    fn loopback(&self) -> bool {
        let host = self.host.rsplit_once(':').map_or(self.host.as_str(), |(h, port)| {
            if port.bytes().all(|b| b.is_ascii_digit()) { h } else { self.host.as_str() }
        });
        let host = host.trim_start_matches('[').trim_end_matches(']');
        host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }
}

/// What to fetch: a version constraint (resolved among the tags), or a digest.
pub(crate) struct Wanted<'a> {
    pub version: &'a str,
    pub digest: Option<&'a str>,
    pub insecure: bool,
}

/// The chart archive (gzipped tar) of `repo` and its sha256 in hexadecimal, verified; `cached`
/// says whether the archive of a digest is already kept (then it is not downloaded).
/// `auth_file` is the Docker `config.json` of the credentials, when one is set.
pub(crate) fn fetch(
    repo: &OciRepo,
    wanted: &Wanted<'_>,
    timeout: Duration,
    auth_file: Option<&std::path::Path>,
    cached: impl Fn(&str) -> bool,
) -> Result<(String, Option<Vec<u8>>), ChartError> {
    crate::charts::check_crypto_provider().map_err(Unreachable)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Unreachable(format!("cannot start an HTTP client: {e}")))?;
    runtime.block_on(async {
        let mut client = Client::new(repo, wanted.insecure, timeout, auth_file)?;
        let reference = match wanted.digest {
            Some(d) => {
                check_digest_form(d).map_err(Refused)?;
                d.to_owned()
            }
            None => client.tag(wanted.version).await?,
        };
        let (bytes, header_digest) =
            client.get_limited(&format!("manifests/{reference}"), MANIFEST_TYPES, MAX_MANIFEST).await?;
        let manifest_digest = format!("sha256:{}", hex::encode(Sha256::digest(&bytes)));
        if let Some(given) = header_digest.filter(|d| d.starts_with("sha256:"))
            && given != manifest_digest
        {
            return Err(Refused(format!(
                "the manifest of {}:{reference} has the digest {manifest_digest}, the registry says {given}; not used",
                repo.name
            )));
        }
        if let Some(pinned) = wanted.digest
            && pinned != manifest_digest
        {
            return Err(Refused(format!(
                "the manifest of {} has the digest {manifest_digest}, the source pins {pinned}; not used",
                repo.name
            )));
        }
        let manifest: Value = serde_json::from_slice(&bytes)
            .map_err(|e| Refused(format!("the manifest of {}:{reference} is not JSON: {e}", repo.name)))?;
        let layer = manifest
            .get("layers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|l| l.get("mediaType").and_then(Value::as_str) == Some(HELM_CHART_LAYER))
            .ok_or_else(|| {
                Refused(format!("{}:{reference} holds no Helm chart (no layer of type {HELM_CHART_LAYER})", repo.name))
            })?;
        let digest = layer.get("digest").and_then(Value::as_str).unwrap_or("");
        check_digest_form(digest).map_err(Refused)?;
        let hex_digest = digest.trim_start_matches("sha256:").to_owned();
        if cached(&hex_digest) {
            return Ok((hex_digest, None));
        }
        let (blob, _) = client.get_limited(&format!("blobs/{digest}"), "*/*", MAX_CHART).await?;
        let got = hex::encode(Sha256::digest(&blob));
        if got != hex_digest {
            return Err(Refused(format!(
                "the chart layer of {}:{reference} has sha256 {got}, its manifest says {hex_digest}; not used",
                repo.name
            )));
        }
        Ok((hex_digest, Some(blob)))
    })
}

fn check_digest_form(digest: &str) -> Result<(), String> {
    match digest.strip_prefix("sha256:") {
        Some(h) if h.len() == 64 && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) => Ok(()),
        _ => Err(format!("`{digest}` is not a sha256 digest (sha256:<64 lower-case hexadecimal digits>)")),
    }
}

struct Client<'a> {
    http: reqwest::Client,
    repo: &'a OciRepo,
    base: String,
    credentials: Option<(String, String)>,
    authorization: Option<String>,
}

impl<'a> Client<'a> {
    fn new(
        repo: &'a OciRepo,
        insecure: bool,
        timeout: Duration,
        auth_file: Option<&std::path::Path>,
    ) -> Result<Client<'a>, ChartError> {
        let scheme = if insecure || repo.loopback() { "http" } else { "https" };
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(timeout)
            .build()
            .map_err(|e| Unreachable(format!("cannot start an HTTP client: {e}")))?;
        Ok(Client {
            http,
            repo,
            base: format!("{scheme}://{}/v2/{}/", repo.host, repo.name),
            credentials: auth_file.map(|f| credentials_for(f, &repo.host)).transpose().map_err(Unreachable)?.flatten(),
            authorization: None,
        })
    }

    /// The tag of the highest version the constraint allows (Helm writes `+` as `_` in tags);
    /// an exact version is its own tag, without listing.
    async fn tag(&mut self, constraint: &str) -> Result<String, ChartError> {
        let c = constraint.trim();
        let exact = !c.is_empty()
            && c != "*"
            && !c.ends_with(".*")
            && !c.ends_with(".x")
            && c.chars().all(|ch| ch.is_ascii_alphanumeric() || ".-+_".contains(ch));
        if exact {
            return Ok(c.replace('+', "_"));
        }
        let mut tags: Vec<String> = Vec::new();
        let mut next = Some("tags/list?n=1000".to_owned());
        let mut pages = 0;
        while let Some(path) = next.take() {
            pages += 1;
            if pages > MAX_TAG_PAGES {
                return Err(Refused(format!("{} lists more than {MAX_TAG_PAGES} pages of tags", self.repo.name)));
            }
            let response = self.send(&path, "application/json").await?;
            next = next_page(response.headers());
            let body = read_limited(response, MAX_MANIFEST, &self.repo.name).await?;
            let list: Value = serde_json::from_slice(&body)
                .map_err(|e| Refused(format!("the tag list of {} is not JSON: {e}", self.repo.name)))?;
            tags.extend(
                list.get("tags")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_owned),
            );
        }
        let versions: Vec<String> = tags.iter().map(|t| t.replace('_', "+")).collect();
        let best = crate::charts::best_version(versions.iter().map(String::as_str), c)
            .map_err(Unreachable)?
            .ok_or_else(|| Refused(format!("{} has no tag matching version `{c}`", self.repo.name)))?;
        Ok(best.replace('+', "_"))
    }

    async fn get_limited(
        &mut self,
        path: &str,
        accept: &str,
        max: usize,
    ) -> Result<(Vec<u8>, Option<String>), ChartError> {
        let response = self.send(path, accept).await?;
        let digest = response.headers().get("docker-content-digest").and_then(|v| v.to_str().ok()).map(str::to_owned);
        Ok((read_limited(response, max, &self.repo.name).await?, digest))
    }

    /// A GET, answering the registry's challenge once (`Basic`, or a `Bearer` token from its
    /// realm) when it asks for one.
    async fn send(&mut self, path: &str, accept: &str) -> Result<reqwest::Response, ChartError> {
        let url = format!("{}{path}", self.base);
        let shown = format!("{}/{}", self.repo.host, self.repo.name);
        for attempt in 0..2 {
            let mut request = self.http.get(&url).header("Accept", accept);
            if let Some(a) = &self.authorization {
                request = request.header("Authorization", a);
            }
            let response =
                request.send().await.map_err(|e| Unreachable(format!("cannot read {shown}: {}", plain(e))))?;
            let status = response.status();
            if status == reqwest::StatusCode::UNAUTHORIZED && attempt == 0 {
                let challenge =
                    response.headers().get("www-authenticate").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
                self.authorization = Some(self.answer(&challenge).await?);
                continue;
            }
            if status == reqwest::StatusCode::NOT_FOUND {
                return Err(Refused(format!("{shown}: {path} not found in the registry")));
            }
            if !status.is_success() {
                let hint = if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
                    match self.credentials {
                        Some(_) => " (the credentials of the registry auth file were refused)",
                        None => {
                            " (set render.registry_auth_file or DRIFT_REGISTRY_AUTH_FILE to a Docker config.json with credentials for this registry)"
                        }
                    }
                } else {
                    ""
                };
                return Err(Unreachable(format!("cannot read {shown}: HTTP {status}{hint}")));
            }
            return Ok(response);
        }
        Err(Unreachable(format!("cannot read {shown}: the registry asks for credentials again")))
    }

    async fn answer(&self, challenge: &str) -> Result<String, ChartError> {
        let shown = &self.repo.host;
        let basic = self
            .credentials
            .as_ref()
            .map(|(u, p)| format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))));
        let (scheme, params) = challenge.split_once(' ').unwrap_or((challenge, ""));
        if scheme.eq_ignore_ascii_case("basic") {
            return basic.ok_or_else(|| {
                Unreachable(format!(
                    "{shown} asks for credentials; set render.registry_auth_file or DRIFT_REGISTRY_AUTH_FILE to a Docker config.json that has them"
                ))
            });
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(Unreachable(format!("{shown} asks for an authentication drift does not speak ({scheme})")));
        }
        let params = challenge_params(params);
        let realm = params
            .iter()
            .find(|(k, _)| k == "realm")
            .map(|(_, v)| v.clone())
            .ok_or_else(|| Unreachable(format!("{shown} asks for a token without naming where to get it")))?;
        let mut query: Vec<(String, String)> =
            params.into_iter().filter(|(k, _)| k == "service" || k == "scope").collect();
        if !query.iter().any(|(k, _)| k == "scope") {
            query.push(("scope".into(), format!("repository:{}:pull", self.repo.name)));
        }
        let realm = url::Url::parse_with_params(&realm, &query)
            .map_err(|e| Unreachable(format!("{shown} names a token realm that is not a URL: {e}")))?;
        let mut request = self.http.get(realm);
        if let Some(b) = &basic {
            request = request.header("Authorization", b);
        }
        let response =
            request.send().await.map_err(|e| Unreachable(format!("cannot get a token for {shown}: {}", plain(e))))?;
        if !response.status().is_success() {
            return Err(Unreachable(format!("cannot get a token for {shown}: HTTP {}", response.status())));
        }
        let body = read_limited(response, 1 << 20, shown).await?;
        let token: Value = serde_json::from_slice(&body)
            .map_err(|e| Unreachable(format!("the token answer of {shown} is not JSON: {e}")))?;
        let token = token
            .get("token")
            .or_else(|| token.get("access_token"))
            .and_then(Value::as_str)
            .ok_or_else(|| Unreachable(format!("the token answer of {shown} has no token")))?;
        Ok(format!("Bearer {token}"))
    }
}

/// An error without the URL's query (a token realm's query may name a user).
pub(crate) fn plain(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

pub(crate) async fn read_limited(
    mut response: reqwest::Response,
    max: usize,
    shown: &str,
) -> Result<Vec<u8>, ChartError> {
    let mut out = Vec::new();
    while let Some(chunk) =
        response.chunk().await.map_err(|e| Unreachable(format!("cannot read {shown}: {}", plain(e))))?
    {
        if out.len() + chunk.len() > max {
            return Err(Refused(format!(
                "{shown}: an answer of the registry is larger than {} MiB; not read",
                max >> 20
            )));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// The next page of a tag list (`Link: </v2/name/tags/list?n=..&last=..>; rel="next"`), relative
/// to the repository's base.
fn next_page(headers: &reqwest::header::HeaderMap) -> Option<String> {
    let link = headers.get("link")?.to_str().ok()?;
    let target = link.split(';').next()?.trim().strip_prefix('<')?.strip_suffix('>')?;
    let at = target.find("/tags/list")?;
    Some(target[at + 1..].to_owned())
}

/// `realm="https://auth",service="registry",scope="repository:x:pull"` as pairs.
fn challenge_params(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let Some((key, after)) = rest.split_once('=') else { break };
        let key = key.trim().trim_start_matches(',').trim().to_ascii_lowercase();
        let (value, tail) = match after.strip_prefix('"') {
            Some(quoted) => match quoted.find('"') {
                Some(end) => (&quoted[..end], &quoted[end + 1..]),
                None => (quoted, ""),
            },
            None => after.split_once(',').unwrap_or((after, "")),
        };
        out.push((key, value.to_owned()));
        rest = tail.trim_start_matches(',').trim();
    }
    out
}

/// The file of registry credentials: `render.registry_auth_file`, else the file
/// `DRIFT_REGISTRY_AUTH_FILE` names.
pub(crate) fn auth_file(configured: Option<&std::path::Path>) -> Option<std::path::PathBuf> {
    configured
        .map(std::path::Path::to_path_buf)
        .or_else(|| std::env::var_os("DRIFT_REGISTRY_AUTH_FILE").filter(|f| !f.is_empty()).map(Into::into))
}

/// The user and password for `host` in a Docker `config.json` (`auths.<host>.auth`, base64 of
/// `user:password`, or `username` and `password`).
pub(crate) fn credentials_for(file: &std::path::Path, host: &str) -> Result<Option<(String, String)>, String> {
    let shown = file.display().to_string();
    let text = std::fs::read(file).map_err(|e| format!("cannot read the registry auth file {shown}: {e}"))?;
    let config: Value = serde_json::from_slice(&text)
        .map_err(|_| format!("the registry auth file {shown} is not a Docker config.json (JSON with `auths`)"))?;
    let Some(auths) = config.get("auths").and_then(Value::as_object) else {
        return Ok(None);
    };
    let entry = auths.iter().find(|(key, _)| {
        let key = key.trim_start_matches("https://").trim_start_matches("http://");
        key.split('/').next() == Some(host)
    });
    let Some((_, entry)) = entry else { return Ok(None) };
    if let (Some(u), Some(p)) =
        (entry.get("username").and_then(Value::as_str), entry.get("password").and_then(Value::as_str))
    {
        return Ok(Some((u.to_owned(), p.to_owned())));
    }
    let Some(auth) = entry.get("auth").and_then(Value::as_str) else { return Ok(None) };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(auth.trim())
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| {
            format!("the `auth` of {host} in the registry auth file {shown} is not base64 of user:password")
        })?;
    let (u, p) = decoded.split_once(':').ok_or_else(|| {
        format!("the `auth` of {host} in the registry auth file {shown} is not base64 of user:password")
    })?;
    Ok(Some((u.to_owned(), p.to_owned())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repositories_parse_as_oci_references() {
        let r = OciRepo::parse("oci://127.0.0.1:5000/charts/web").unwrap();
        assert_eq!((r.host.as_str(), r.name.as_str(), r.loopback()), ("127.0.0.1:5000", "charts/web", true));
        let argo = OciRepo::parse("ghcr.io/stefanprodan/charts/").unwrap();
        assert_eq!(
            (argo.host.as_str(), argo.name.as_str(), argo.loopback()),
            ("ghcr.io", "stefanprodan/charts", false)
        );
        assert!(OciRepo::parse("oci://[::1]:5000/c").unwrap().loopback());
        assert!(OciRepo::parse("localhost/c").unwrap().loopback());
        for bad in
            ["oci://host", "oci://host/", "oci://host/Upper", "oci://host//x", "oci://u@host/x", "oci://host/a b"]
        {
            assert!(OciRepo::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn challenges_and_links_are_read() {
        assert_eq!(
            challenge_params(
                r#"realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push""#
            ),
            vec![
                ("realm".into(), "https://auth.example/token".into()),
                ("service".into(), "registry.example".into()),
                ("scope".into(), "repository:a/b:pull,push".into())
            ]
        );
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("link", r#"</v2/charts/web/tags/list?last=1.0.0&n=1000>; rel="next""#.parse().unwrap());
        assert_eq!(next_page(&headers).as_deref(), Some("tags/list?last=1.0.0&n=1000"));
        assert!(check_digest_form(&format!("sha256:{}", "a".repeat(64))).is_ok());
        assert!(check_digest_form(&format!("sha256:{}", "A".repeat(64))).is_err());
        assert!(check_digest_form("sha256:../../x").is_err());
    }
}
