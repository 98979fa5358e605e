//! Charts that Flux (`HelmRepository`, `HelmChart`, `OCIRepository`) and Argo CD (`chart:`
//! sources) take from a Helm chart repository over HTTP or from an OCI registry (`oci.rs`): for
//! HTTP, the version resolved from the repository's `index.yaml` and the archive downloaded from
//! the entry's URL, verified against the digest the index gives; either way cached by that
//! digest (`<cache>/charts/<sha256>/`), so that a cached chart is never fetched again and a
//! changed one never used unverified.

use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::config::RenderConfig;
use ChartError::{Refused, Unreachable};

/// Where a chart comes from, as a unit names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct RemoteChart {
    /// The repository's URL: `https://charts.example.com`, or `oci://registry.example/charts`
    /// for a registry (the chart is the repository `charts/<chart>` in it).
    pub repo: String,
    pub chart: String,
    /// A version or a constraint: exact, empty or `*` (the highest), `1.2.*`, `1.*`.
    pub version: String,
    /// An OCI manifest digest the source pins (`OCIRepository`'s `ref.digest`).
    pub digest: Option<String>,
    /// Plain HTTP to an OCI registry (Flux's `insecure: true`).
    pub insecure: bool,
}

impl RemoteChart {
    /// A chart of a Helm repository (HTTP or OCI) at a version or constraint.
    pub(crate) fn new(repo: &str, chart: &str, version: &str) -> RemoteChart {
        RemoteChart {
            repo: repo.to_owned(),
            chart: chart.to_owned(),
            version: version.to_owned(),
            digest: None,
            insecure: false,
        }
    }

    /// The unit root of such a chart: a name no repository path can be within.
    pub(crate) fn root(&self) -> String {
        format!(":chart:{}/{}@{}", self.repo, self.chart, self.digest.as_deref().unwrap_or(&self.version))
    }

    fn is_oci(&self) -> bool {
        self.repo.starts_with("oci://")
    }
}

/// Why a chart is not rendered.
pub(crate) enum ChartError {
    /// The repository or helm cannot be reached or run: a note, as for any source drift cannot
    /// read (the release object itself is still compared).
    Unreachable(String),
    /// The repository answered something wrong (no such chart or version, a digest that does
    /// not match): an error.
    Refused(String),
}

/// The chart's folder in the cache, fetched and verified when it is not there yet.
pub(crate) fn fetch(cfg: &RenderConfig, remote: &RemoteChart) -> Result<PathBuf, ChartError> {
    let cache = cfg.chart_cache.clone().unwrap_or_else(|| crate::config::default_cache_dir("charts"));
    if remote.is_oci() {
        let base = crate::oci::OciRepo::parse(&remote.repo).map_err(Refused)?;
        let repo = crate::oci::OciRepo { name: format!("{}/{}", base.name, remote.chart), ..base };
        let wanted = crate::oci::Wanted {
            version: &remote.version,
            digest: remote.digest.as_deref(),
            insecure: remote.insecure,
        };
        let auth = crate::oci::auth_file(cfg.registry_auth_file.as_deref());
        let (digest, bytes) = crate::oci::fetch(&repo, &wanted, cfg.render_timeout, auth.as_deref(), |d| {
            chart_in(&cache.join(d)).is_some()
        })?;
        return match bytes {
            None => {
                chart_in(&cache.join(&digest)).ok_or_else(|| Unreachable(format!("the cached chart {digest} is gone")))
            }
            Some(bytes) => place(&cache, &digest, &bytes, &remote.chart),
        };
    }
    let auth = crate::oci::auth_file(cfg.registry_auth_file.as_deref());
    let (digest, bytes) =
        fetch_http(remote, cfg.render_timeout, auth.as_deref(), |d| chart_in(&cache.join(d)).is_some())?;
    match bytes {
        None => chart_in(&cache.join(&digest)).ok_or_else(|| Unreachable(format!("the cached chart {digest} is gone"))),
        Some(bytes) => place(&cache, &digest, &bytes, &remote.chart),
    }
}

/// The largest repository index read (Flux's `--helm-index-max-size` default).
const MAX_INDEX: usize = 50 << 20;
/// The largest chart read (Flux's `--helm-chart-max-size` default).
const MAX_CHART: usize = 10 << 20;

/// A chart of a repository over HTTP(S), as helm fetches it: the repository's `index.yaml`, the
/// version the constraint picks, the archive at the entry's first URL (relative to the
/// repository's), its sha256 checked against the index's `digest`. Credentials of the auth file
/// for the repository's host are sent to the repository's own origin only (helm's default
/// without `--pass-credentials`). Gives the digest in hexadecimal and the verified archive, or
/// no archive when `cached` says that digest is kept.
fn fetch_http(
    remote: &RemoteChart,
    timeout: std::time::Duration,
    auth_file: Option<&Path>,
    cached: impl Fn(&str) -> bool,
) -> Result<(String, Option<Vec<u8>>), ChartError> {
    let base = url::Url::parse(&format!("{}/", remote.repo.trim_end_matches('/')))
        .map_err(|e| Refused(format!("the repository URL `{}` is not a URL: {e}", remote.repo)))?;
    let origin = base.origin();
    let host = match base.port() {
        Some(port) => format!("{}:{port}", base.host_str().unwrap_or("")),
        None => base.host_str().unwrap_or("").to_owned(),
    };
    let credentials =
        auth_file.map(|f| crate::oci::credentials_for(f, &host)).transpose().map_err(Unreachable)?.flatten();
    check_crypto_provider().map_err(Unreachable)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Unreachable(format!("cannot start an HTTP client: {e}")))?;
    runtime.block_on(async {
        let client = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(5))
            .timeout(timeout)
            .build()
            .map_err(|e| Unreachable(format!("cannot start an HTTP client: {e}")))?;
        let get = |url: url::Url, max: usize| {
            let request = client.get(url.clone());
            let request = match &credentials {
                Some((user, password)) if url.origin() == origin => request.basic_auth(user, Some(password)),
                _ => request,
            };
            let shown = format!("{}{}", url.origin().ascii_serialization(), url.path());
            let has_credentials = credentials.is_some();
            async move {
                let response = request
                    .send()
                    .await
                    .map_err(|e| Unreachable(format!("cannot read {shown}: {}", crate::oci::plain(e))))?;
                let status = response.status();
                if !status.is_success() {
                    let hint = match (status.as_u16(), has_credentials) {
                        (401 | 403, true) => " (the credentials of the registry auth file were refused)",
                        (401 | 403, false) => {
                            " (set render.registry_auth_file or DRIFT_REGISTRY_AUTH_FILE to a Docker config.json with credentials for this repository)"
                        }
                        _ => "",
                    };
                    return Err(Unreachable(format!("cannot read {shown}: HTTP {status}{hint}")));
                }
                crate::oci::read_limited(response, max, &shown).await
            }
        };
        let index_url = base.join("index.yaml").map_err(|e| Refused(e.to_string()))?;
        let text = get(index_url, MAX_INDEX).await?;
        let text = String::from_utf8(text)
            .map_err(|_| Refused(format!("the index of {} is not text", remote.repo)))?;
        let index = drift_manifest::read_yaml_value(&text)
            .map_err(|e| Refused(format!("the index of {}: {e}", remote.repo)))?;
        let (version, digest, url) = resolve(&index, &remote.chart, &remote.version)?;
        // The digest names a folder: only a sha256 in hexadecimal is one.
        if digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Refused(format!(
                "the repository index gives chart {} {version} the digest {digest:?}, not a sha256",
                remote.chart
            )));
        }
        let digest = digest.to_ascii_lowercase();
        if cached(&digest) {
            return Ok((digest, None));
        }
        let chart_url = base
            .join(&url)
            .map_err(|e| Refused(format!("the index gives chart {} {version} the URL `{url}`: {e}", remote.chart)))?;
        if !matches!(chart_url.scheme(), "http" | "https") {
            return Err(Refused(format!("the index gives chart {} {version} the URL `{url}`, not HTTP(S)", remote.chart)));
        }
        let bytes = get(chart_url, MAX_CHART).await?;
        let got = hex::encode(Sha256::digest(&bytes));
        if got != digest {
            return Err(Refused(format!(
                "chart {} {version} from {} does not match the repository index: sha256 {got}, the index says {digest}; not used",
                remote.chart, remote.repo
            )));
        }
        Ok((digest, Some(bytes)))
    })
}

/// The chart folder (the one holding a `Chart.yaml`) of a cache entry, when it is there.
fn chart_in(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir).ok()?.flatten().map(|e| e.path()).find(|p| p.join("Chart.yaml").is_file())
}

/// Unpacks a verified chart archive into `<cache>/<digest>/` and gives its chart folder.
fn place(cache: &Path, digest: &str, bytes: &[u8], chart: &str) -> Result<PathBuf, ChartError> {
    let work = tempfile::tempdir().map_err(|e| Unreachable(format!("cannot make a folder for the chart: {e}")))?;
    let staging = work.path().join("unpacked");
    tar::Archive::new(flate2::read::GzDecoder::new(bytes))
        .unpack(&staging)
        .map_err(|e| Refused(format!("cannot unpack chart {chart}: {e}")))?;
    if chart_in(&staging).is_none() {
        return Err(Refused(format!("the archive of chart {chart} holds no folder with a Chart.yaml")));
    }
    std::fs::create_dir_all(cache)
        .map_err(|e| Unreachable(format!("cannot make the chart cache {}: {e}", cache.display())))?;
    let dir = cache.join(digest);
    // Another render may have placed it meanwhile: either copy is the same, verified, chart.
    if std::fs::rename(&staging, &dir).is_err() && chart_in(&dir).is_none() {
        return Err(Unreachable(format!("cannot place chart {chart} in {}", dir.display())));
    }
    chart_in(&dir).ok_or_else(|| Unreachable(format!("cannot place chart {chart} in {}", dir.display())))
}

/// reqwest is built without a crypto provider: the program installs one (see `source.rs`).
pub(crate) fn check_crypto_provider() -> Result<(), String> {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        return Err("no rustls crypto provider is installed; the program must install one, \
             for example `rustls::crypto::ring::default_provider().install_default()`"
            .to_owned());
    }
    Ok(())
}

/// The version the constraint picks among the index's entries of `chart` (the highest that
/// matches, pre-releases only when asked for exactly), as the index writes it, and its digest.
/// A constraint drift does not evaluate (`>=1.0`, `~1.2`, `^4`) is a note, not an error.
fn resolve(index: &Value, chart: &str, constraint: &str) -> Result<(String, String, String), ChartError> {
    let entries = index
        .pointer(&format!("/entries/{chart}"))
        .and_then(Value::as_array)
        .ok_or_else(|| Refused(format!("the repository has no chart {chart}")))?;
    let listed: Vec<(&str, &str, &str)> = entries
        .iter()
        .filter_map(|e| {
            let url = e.get("urls").and_then(Value::as_array).and_then(|u| u.first()).and_then(Value::as_str);
            Some((e.get("version")?.as_str()?, e.get("digest")?.as_str()?, url.unwrap_or("")))
        })
        .collect();
    let best = best_version(listed.iter().map(|(v, _, _)| *v), constraint)
        .map_err(|e| Unreachable(format!("{e} of chart {chart}")))?
        .ok_or_else(|| Refused(format!("the repository has no version `{}` of chart {chart}", constraint.trim())))?;
    let (_, digest, url) = listed.iter().find(|(v, _, _)| *v == best).copied().unwrap_or_default();
    if url.is_empty() {
        return Err(Refused(format!("the repository index gives chart {chart} {best} no URL")));
    }
    Ok((best.to_owned(), digest.to_owned(), url.to_owned()))
}

/// The highest of `versions` that the constraint allows (exact, empty or `*`, `1.2.*`, `1.*`,
/// `1.x`; pre-releases only when asked for exactly), as written; an error for a constraint drift
/// does not evaluate.
pub(crate) fn best_version<'a>(
    versions: impl Iterator<Item = &'a str>,
    constraint: &str,
) -> Result<Option<&'a str>, String> {
    let constraint = constraint.trim();
    let bare = |v: &str| v.trim_start_matches('v').to_owned();
    let wanted = bare(constraint);
    // A pre-release has a `-` before any build metadata.
    let release = |v: &str| !v.split('+').next().unwrap_or(v).contains('-');
    let matches = |v: &str| -> bool {
        let v = bare(v);
        match wanted.as_str() {
            "" | "*" => release(&v),
            c if c.ends_with(".*") || c.ends_with(".x") => release(&v) && v.starts_with(&c[..c.len() - 1]),
            c => v == c,
        }
    };
    let supported = wanted.is_empty()
        || wanted == "*"
        || wanted.ends_with(".*")
        || wanted.ends_with(".x")
        || wanted.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '+');
    if !supported {
        return Err(format!("version constraint `{constraint}` is not resolved by drift; give a version or `1.2.*`"));
    }
    Ok(versions.filter(|v| matches(v)).max_by(|a, b| semver_key(&bare(a)).cmp(&semver_key(&bare(b)))))
}

/// A version's order: its numbers, a release after its pre-releases.
fn semver_key(v: &str) -> (Vec<u64>, bool, String) {
    let (core, pre) = v.split_once('-').unwrap_or((v, ""));
    let core = core.split('+').next().unwrap_or(core);
    (core.split('.').map(|n| n.parse().unwrap_or(0)).collect(), pre.is_empty(), pre.to_owned())
}

/// The folder a remote chart is rendered from, for messages.
pub(crate) fn shown(remote: &RemoteChart) -> String {
    format!("{} {} from {}", remote.chart, remote.version, remote.repo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn versions_resolve_as_helm_orders_them() {
        let entry = |v: &str, d: &str| json!({"version": v, "digest": d, "urls": [format!("web-{v}.tgz")]});
        let index = json!({"entries": {"web": [
            entry("1.2.0", "a"), entry("1.10.0", "b"), entry("2.0.0-rc.1", "c"), entry("1.2.3", "d")
        ]}});
        let ok = |c: &str| resolve(&index, "web", c).ok().map(|(v, d, _)| (v, d));
        assert_eq!(ok(""), Some(("1.10.0".into(), "b".into())));
        assert_eq!(ok("1.2.*"), Some(("1.2.3".into(), "d".into())));
        assert_eq!(ok("2.0.0-rc.1"), Some(("2.0.0-rc.1".into(), "c".into())));
        assert_eq!(ok("v1.2.0"), Some(("1.2.0".into(), "a".into())));
        assert_eq!(resolve(&index, "web", "1.2.3").ok().map(|(_, _, u)| u).as_deref(), Some("web-1.2.3.tgz"));
        assert!(matches!(resolve(&index, "web", "3.0.0"), Err(ChartError::Refused(_))));
        assert!(
            matches!(resolve(&index, "web", ">=1.0.0"), Err(ChartError::Unreachable(m)) if m.contains("not resolved by drift"))
        );
        assert!(matches!(resolve(&index, "api", "*"), Err(ChartError::Refused(_))));
        let with_v = json!({"entries": {"web": [{"version": "v1.0.0+build-1", "digest": "e", "urls": ["x.tgz"]}]}});
        assert_eq!(
            resolve(&with_v, "web", "*").ok().map(|(v, d, _)| (v, d)),
            Some(("v1.0.0+build-1".into(), "e".into())),
            "a release with build metadata, named as the index names it"
        );
        let no_url = json!({"entries": {"web": [{"version": "1.0.0", "digest": "e"}]}});
        assert!(matches!(resolve(&no_url, "web", "*"), Err(ChartError::Refused(m)) if m.contains("no URL")));
    }
}
