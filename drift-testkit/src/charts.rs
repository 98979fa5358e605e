//! Helm chart repositories for tests, with the real tools: charts packaged and pushed by the
//! real `helm`, a chart repository served over HTTP on loopback ([`ChartServer`]) and an OCI
//! registry on loopback ([`Registry`], Debian's `docker-registry`, which `scripts/test`
//! installs). [`registry_available`] says when a test is skipped without it (a failure under
//! `DRIFT_REQUIRE_TOOLS=1`).

use std::path::Path;

pub(crate) fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

/// Writes `text` at `root/path`, folders made as needed.
fn put(root: &Path, path: &str, text: &str) {
    let f = root.join(path);
    std::fs::create_dir_all(f.parent().unwrap()).unwrap();
    std::fs::write(f, text).unwrap();
}

/// Runs the real `helm`; must succeed.
pub fn helm(args: &[&str]) {
    let out = std::process::Command::new("helm").args(args).output().unwrap();
    assert!(out.status.success(), "helm {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Whether `program` is on `PATH` for the test named `test`; when it is not, prints that the
/// test is skipped and how to get it (`how`), or fails under `DRIFT_REQUIRE_TOOLS=1` (set by
/// `scripts/test`, which installs every tool the tests use).
///
/// # Panics
///
/// When the program is missing and `DRIFT_REQUIRE_TOOLS=1`.
pub fn tool_available(program: &str, test: &str, how: &str) -> bool {
    if on_path(program) {
        return true;
    }
    let required = std::env::var("DRIFT_REQUIRE_TOOLS").is_ok_and(|v| v == "1");
    assert!(!required, "{test}: {program} is not on PATH and DRIFT_REQUIRE_TOOLS=1 ({how})");
    eprintln!("skipped {test}: {program} is not on PATH ({how})");
    false
}

/// The real helm 3 ([`tool_available`]).
pub fn helm_available(test: &str) -> bool {
    tool_available("helm", test, "scripts/install-tools.sh installs a pinned helm 3")
}

/// Debian's `docker-registry` (distribution 2.8), the OCI registry of the chart tests
/// ([`tool_available`]).
pub fn registry_available(test: &str) -> bool {
    tool_available("docker-registry", test, "Debian package docker-registry; scripts/test installs it")
}

/// An OCI registry on loopback (Debian's `docker-registry`), stopped when dropped. With
/// `htpasswd`, it asks for those credentials (`Basic`).
#[derive(Debug)]
pub struct Registry {
    /// `127.0.0.1:PORT`, the host part of `oci://` references to it.
    pub host: String,
    /// The registry's storage folder (blobs and manifests), for tests that look at what was pushed.
    pub storage: std::path::PathBuf,
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl Registry {
    /// Starts `docker-registry serve` on a free loopback port, with `htpasswd` lines (bcrypt
    /// entries) as its basic-auth users when given, and waits until it answers `/v2/`. Panics
    /// when it cannot start (check [`registry_available`] first).
    pub fn start(htpasswd: Option<&str>) -> Registry {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let host = format!("127.0.0.1:{port}");
        let storage = dir.path().join("storage");
        let auth = match htpasswd {
            Some(lines) => {
                std::fs::write(dir.path().join("htpasswd"), lines).unwrap();
                format!("auth:\n  htpasswd:\n    realm: test\n    path: {}\n", dir.path().join("htpasswd").display())
            }
            None => String::new(),
        };
        let config = format!(
            "version: 0.1\nlog: {{level: error}}\nstorage:\n  filesystem: {{rootdirectory: {}}}\n  delete: {{enabled: true}}\nhttp:\n  addr: {host}\n{auth}",
            storage.display()
        );
        std::fs::write(dir.path().join("config.yml"), config).unwrap();
        let mut child = std::process::Command::new("docker-registry")
            .arg("serve")
            .arg(dir.path().join("config.yml"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("docker-registry starts");
        // Ready when it answers /v2/ (200, or 401 when it asks for credentials).
        for _ in 0..200 {
            if let Ok(mut s) = std::net::TcpStream::connect(&host) {
                use std::io::{Read as _, Write as _};
                let _ = write!(s, "GET /v2/ HTTP/1.0\r\nHost: {host}\r\n\r\n");
                let mut answer = String::new();
                let _ = s.read_to_string(&mut answer);
                if answer.starts_with("HTTP/1.") {
                    return Registry { host, storage, child, _dir: dir };
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("docker-registry did not answer on {host}");
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A folder served over HTTP on loopback, as a Helm chart repository is (`GET` only); counts
/// the requests of each path. With [`ChartServer::start_guarded`], it answers 401 to a request
/// without the given `Authorization` header.
#[derive(Debug)]
pub struct ChartServer {
    /// `http://127.0.0.1:PORT`, the repository's URL for `helm repo add` or a chart source.
    pub url: String,
    hits: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl ChartServer {
    /// Serves `dir` on `listener` until the process ends.
    pub fn start(dir: std::path::PathBuf, listener: std::net::TcpListener) -> ChartServer {
        ChartServer::start_guarded(dir, listener, None)
    }

    /// [`ChartServer::start`], asking for the `Authorization` header `authorization` (a 401
    /// with a `Basic` challenge otherwise) when given.
    pub fn start_guarded(
        dir: std::path::PathBuf,
        listener: std::net::TcpListener,
        authorization: Option<String>,
    ) -> ChartServer {
        use std::io::{BufRead as _, Write as _};
        let url = format!("http://{}", listener.local_addr().unwrap());
        let hits = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = hits.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                reader.read_line(&mut line).unwrap_or_default();
                let path = line.split_whitespace().nth(1).unwrap_or("/").trim_start_matches('/').to_owned();
                let mut header = String::new();
                let mut given = None;
                while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                    if let Some((name, value)) = header.split_once(':')
                        && name.eq_ignore_ascii_case("authorization")
                    {
                        given = Some(value.trim().to_owned());
                    }
                    header.clear();
                }
                seen.lock().unwrap().push(path.clone());
                let mut stream = stream;
                if authorization.is_some() && given != authorization {
                    let _ = write!(
                        stream,
                        "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"charts\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    );
                    continue;
                }
                match std::fs::read(dir.join(&path)) {
                    Ok(body) => {
                        let _ = write!(
                            stream,
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        );
                        let _ = stream.write_all(&body);
                    }
                    Err(_) => {
                        let _ =
                            write!(stream, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                    }
                }
            }
        });
        ChartServer { url, hits }
    }

    /// How many requests asked for a path ending in `suffix`.
    pub fn fetched(&self, suffix: &str) -> usize {
        self.hits.lock().unwrap().iter().filter(|p| p.ends_with(suffix)).count()
    }
}

/// Chart `web` at 1.0.0, 1.0.1 and 2.0.0, packaged by the real helm into `<dir>/repo/`: one
/// ConfigMap `<release>-settings` with the values' `mode` and the chart's version.
pub fn package_web_charts(dir: &std::path::Path) {
    for version in ["1.0.0", "1.0.1", "2.0.0"] {
        let chart = format!("src-{version}/web");
        put(dir, &format!("{chart}/Chart.yaml"), &format!("apiVersion: v2\nname: web\nversion: {version}\n"));
        put(dir, &format!("{chart}/values.yaml"), "mode: default\n");
        put(dir, &format!("{chart}/values-prod.yaml"), "mode: prod\n");
        put(
            dir,
            &format!("{chart}/templates/cm.yaml"),
            &format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: \"{{{{ .Release.Name }}}}-settings\"}}\ndata:\n  mode: {{{{ .Values.mode | quote }}}}\n  chart: \"{version}\"\n"
            ),
        );
        let src = dir.join(&chart);
        helm(&["package", src.to_str().unwrap(), "-d", dir.join("repo").to_str().unwrap()]);
    }
}

/// `helm push` of a packaged chart to a registry on loopback (with the credentials of
/// `<helm_home>/registry.json`, if any); the manifest digest it prints.
pub fn helm_push(archive: &std::path::Path, registry: &Registry, helm_home: &std::path::Path) -> String {
    let out = std::process::Command::new("helm")
        .args(["push", archive.to_str().unwrap(), &format!("oci://{}/charts", registry.host), "--plain-http"])
        .env("HELM_REGISTRY_CONFIG", helm_home.join("registry.json"))
        .env("HELM_CACHE_HOME", helm_home.join("cache"))
        .env("HELM_CONFIG_HOME", helm_home.join("config"))
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "helm push: {text}");
    let at = text.find("Digest: ").expect("helm push prints the digest") + "Digest: ".len();
    text[at..].split_whitespace().next().unwrap().to_owned()
}
