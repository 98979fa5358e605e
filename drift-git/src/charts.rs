//! Charts that Flux (`HelmRepository`) and Argo CD (`chart:` sources) take from a Helm chart
//! repository over HTTP: the version resolved from the repository's `index.yaml`, the chart
//! fetched with the real `helm pull`, verified against the digest the index gives, and cached
//! by that digest (`<cache>/charts/<sha256>/`), so that a cached chart is never fetched again
//! and a changed one never used unverified.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::config::RenderConfig;

/// Where a chart comes from, as a unit names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct RemoteChart {
    /// The repository's URL (`https://charts.example.com`).
    pub repo: String,
    pub chart: String,
    /// A version or a constraint: exact, empty or `*` (the highest), `1.2.*`, `1.*`.
    pub version: String,
}

impl RemoteChart {
    /// The unit root of such a chart: a name no repository path can be within.
    pub(crate) fn root(&self) -> String {
        format!(":chart:{}/{}@{}", self.repo, self.chart, self.version)
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
    use ChartError::{Refused, Unreachable};
    let index = get_index(&remote.repo, cfg.render_timeout).map_err(Unreachable)?;
    let (version, digest) = resolve(&index, &remote.chart, &remote.version)?;
    // The digest names a folder: only a sha256 in hexadecimal is one.
    if digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Refused(format!(
            "the repository index gives chart {} {version} the digest {digest:?}, not a sha256",
            remote.chart
        )));
    }
    let digest = digest.to_ascii_lowercase();
    let cache = cfg.chart_cache.clone().unwrap_or_else(|| crate::config::default_cache_dir("charts"));
    let dir = cache.join(&digest);
    let chart_dir = dir.join(&remote.chart);
    if chart_dir.join("Chart.yaml").is_file() {
        return Ok(chart_dir);
    }
    let work = tempfile::tempdir().map_err(|e| Unreachable(format!("cannot make a folder for the chart: {e}")))?;
    let helm = cfg.helm.binary.clone().unwrap_or_else(|| "helm".to_owned());
    let program = crate::render::find_program(&helm)
        .ok_or_else(|| Unreachable(format!("`{helm}` was not found on PATH; install Helm 3 to fetch charts")))?;
    let out = Command::new(&program)
        .args(["pull", &remote.chart, "--repo", &remote.repo, "--version", &version, "--destination"])
        .arg(work.path())
        .env("HELM_CACHE_HOME", work.path().join("helm-cache"))
        .env("HELM_CONFIG_HOME", work.path().join("helm-config"))
        .env("HELM_DATA_HOME", work.path().join("helm-data"))
        .output()
        .map_err(|e| Unreachable(format!("cannot start helm: {e}")))?;
    if !out.status.success() {
        return Err(Unreachable(format!(
            "helm pull of {} {version} from {} failed: {}",
            remote.chart,
            remote.repo,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let archive = work.path().join(format!("{}-{version}.tgz", remote.chart));
    let bytes =
        std::fs::read(&archive).map_err(|e| Refused(format!("helm pull left no {}: {e}", archive.display())))?;
    let got = hex::encode(Sha256::digest(&bytes));
    if got != digest {
        return Err(Refused(format!(
            "chart {} {version} from {} does not match the repository index: sha256 {got}, the index says {digest}; not used",
            remote.chart, remote.repo
        )));
    }
    let staging = work.path().join("unpacked");
    tar::Archive::new(flate2::read::GzDecoder::new(bytes.as_slice()))
        .unpack(&staging)
        .map_err(|e| Refused(format!("cannot unpack chart {} {version}: {e}", remote.chart)))?;
    std::fs::create_dir_all(&cache)
        .map_err(|e| Unreachable(format!("cannot make the chart cache {}: {e}", cache.display())))?;
    // Another render may have placed it meanwhile: either copy is the same, verified, chart.
    if std::fs::rename(&staging, &dir).is_err() && !chart_dir.join("Chart.yaml").is_file() {
        return Err(Unreachable(format!("cannot place chart {} in {}", remote.chart, dir.display())));
    }
    Ok(chart_dir)
}

fn get_index(repo: &str, timeout: std::time::Duration) -> Result<Value, String> {
    let url = format!("{}/index.yaml", repo.trim_end_matches('/'));
    // reqwest is built without a provider: the program installs one (see `source.rs`).
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        return Err(format!(
            "cannot read {url}: no rustls crypto provider is installed; the program must install one, \
             for example `rustls::crypto::ring::default_provider().install_default()`"
        ));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot read {url}: {e}"))?;
    let text = runtime.block_on(async {
        let client = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(5))
            .timeout(timeout)
            .build()
            .map_err(|e| format!("cannot read {url}: {e}"))?;
        let response = client.get(&url).send().await.map_err(|e| format!("cannot read {url}: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("cannot read {url}: HTTP {}", response.status()));
        }
        response.text().await.map_err(|e| format!("cannot read {url}: {e}"))
    })?;
    drift_manifest::read_yaml_value(&text).map_err(|e| format!("{url}: {e}"))
}

/// The version the constraint picks among the index's entries of `chart` (the highest that
/// matches, pre-releases only when asked for exactly), as the index writes it, and its digest.
/// A constraint drift does not evaluate (`>=1.0`, `~1.2`, `^4`) is a note, not an error.
fn resolve(index: &Value, chart: &str, constraint: &str) -> Result<(String, String), ChartError> {
    let entries = index
        .pointer(&format!("/entries/{chart}"))
        .and_then(Value::as_array)
        .ok_or_else(|| ChartError::Refused(format!("the repository has no chart {chart}")))?;
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
        return Err(ChartError::Unreachable(format!(
            "version constraint `{constraint}` of chart {chart} is not resolved by drift; give a version or `1.2.*`"
        )));
    }
    let best = entries
        .iter()
        .filter_map(|e| Some((e.get("version")?.as_str()?, e.get("digest")?.as_str()?)))
        .filter(|(v, _)| matches(v))
        .max_by(|a, b| semver_key(&bare(a.0)).cmp(&semver_key(&bare(b.0))))
        .ok_or_else(|| ChartError::Refused(format!("the repository has no version `{constraint}` of chart {chart}")))?;
    Ok((best.0.to_owned(), best.1.to_owned()))
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
        let index = json!({"entries": {"web": [
            {"version": "1.2.0", "digest": "a"}, {"version": "1.10.0", "digest": "b"},
            {"version": "2.0.0-rc.1", "digest": "c"}, {"version": "1.2.3", "digest": "d"}
        ]}});
        let ok = |c: &str| resolve(&index, "web", c).ok();
        assert_eq!(ok(""), Some(("1.10.0".into(), "b".into())));
        assert_eq!(ok("1.2.*"), Some(("1.2.3".into(), "d".into())));
        assert_eq!(ok("2.0.0-rc.1"), Some(("2.0.0-rc.1".into(), "c".into())));
        assert_eq!(ok("v1.2.0"), Some(("1.2.0".into(), "a".into())));
        assert!(matches!(resolve(&index, "web", "3.0.0"), Err(ChartError::Refused(_))));
        assert!(
            matches!(resolve(&index, "web", ">=1.0.0"), Err(ChartError::Unreachable(m)) if m.contains("not resolved by drift"))
        );
        assert!(matches!(resolve(&index, "api", "*"), Err(ChartError::Refused(_))));
        let with_v = json!({"entries": {"web": [{"version": "v1.0.0+build-1", "digest": "e"}]}});
        assert_eq!(
            resolve(&with_v, "web", "*").ok(),
            Some(("v1.0.0+build-1".into(), "e".into())),
            "a release with build metadata, named as the index names it"
        );
    }
}
