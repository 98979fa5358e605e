//! What the end-to-end tests of the `drift` binary share: a tiny HTTP client, `drift serve` as a
//! child process, `kubectl` and `git` run against throwaway homes, and bounded polling.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod chart;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The Deployment of the shop fixture: 2 replicas of nginx:1.27 with limits.
#[allow(unused_imports)] // not every test binary uses it
pub use drift_testkit::fixtures::SHOP_WEB_DEPLOYMENT as DEPLOYMENT;

/// The shop fixture, as files of a GitOps folder: a namespace, the Deployment, its Service
/// (port 80 to 8080) and a ConfigMap (`mode: fast`).
pub const SHOP: &[(&str, &str)] = &[
    ("namespace.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n"),
    ("web/deployment.yaml", DEPLOYMENT),
    (
        "web/service.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  selector: {app: web}\n  ports:\n  - port: 80\n    targetPort: 8080\n",
    ),
    (
        "web/configmap.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: shop\ndata:\n  mode: fast\n",
    ),
];

/// Argo CD's Application, as a CRD (of the cluster Argo CD runs on).
pub const APPLICATION_CRD: &str = r"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: applications.argoproj.io}
spec:
  group: argoproj.io
  scope: Namespaced
  names: {plural: applications, singular: application, kind: Application, listKind: ApplicationList}
  versions:
    - name: v1alpha1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
";

/// One HTTP/1.1 request; the status and the body.
pub fn http(addr: &str, method: &str, path: &str, token: Option<&str>) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    write!(s, "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Length: 0\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out.split(' ').nth(1).unwrap().parse().unwrap();
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

/// `POST path` with a JSON body and a bearer token: the status and the body as text.
pub fn post_json(addr: &str, path: &str, token: &str, body: &Value) -> (u16, String) {
    let body = body.to_string();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out.split(' ').nth(1).unwrap().parse().unwrap();
    (status, out.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default())
}

/// `POST /scan?wait=true` with `token`, again while another pass runs (409): the pass's answer.
pub fn scan_now(addr: &str, token: &str) -> Value {
    let (status, body) = loop {
        let (status, body) = http(addr, "POST", "/scan?wait=true", Some(token));
        if status != 409 {
            break (status, body);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// `GET path`, which must answer 200 with JSON.
pub fn get_json(addr: &str, path: &str) -> Value {
    let (status, body) = http(addr, "GET", path, None);
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
}

/// Polls `f` every 50 ms until it returns `Some`, for at most `limit` (then panics with `what`).
pub fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out after {limit:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The `drift` binary the tests and benchmarks run: the one built with them, or, for
/// benchmarks that compare two builds in one run, the one `DRIFT_BENCH_BIN` names.
pub fn drift_bin() -> PathBuf {
    match std::env::var_os("DRIFT_BENCH_BIN") {
        Some(path) if !path.is_empty() => path.into(),
        _ => env!("CARGO_BIN_EXE_drift").into(),
    }
}

/// A command that runs [`drift_bin`], behind the profiler `DRIFT_BENCH_WRAPPER` names when it
/// is set (benchmarks: for example `heaptrack -o FILE`).
pub fn drift_command() -> Command {
    match std::env::var("DRIFT_BENCH_WRAPPER") {
        Ok(wrapper) if !wrapper.trim().is_empty() => {
            let mut words = wrapper.split_whitespace();
            let mut cmd = Command::new(words.next().unwrap_or_default());
            cmd.args(words).arg(drift_bin());
            cmd
        }
        _ => Command::new(drift_bin()),
    }
}

/// `drift serve` running as a child process; its stderr is collected (and never fills a pipe).
pub struct Serve {
    child: Child,
    /// The API's address.
    pub addr: String,
    log: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Serve {
    /// Starts `drift serve --config FILE` with extra environment variables and waits for the
    /// address line.
    pub fn start(config: &Path, env: &[(&str, &str)]) -> Serve {
        let mut cmd = drift_command();
        cmd.args(["serve", "--config"]).arg(config).env("NO_COLOR", "1").env_remove("KUBECONFIG");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let mut stderr = child.stderr.take().unwrap();
        let sink = log.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        // The first line that names the address (a profiler in front may print its own before).
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while stdout.read_line(&mut line).unwrap() > 0 && !line.starts_with("listening on ") {
            line.clear();
        }
        let Some(addr) = line.trim().strip_prefix("listening on ") else {
            let _ = child.wait();
            let _ = reader.join();
            panic!("drift serve did not start: {}", log.lock().unwrap());
        };
        Serve { addr: addr.to_owned(), child, log, reader: Some(reader) }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything it logged so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Sends `signal` (`TERM`, `INT`, ...) and returns at once.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").arg(format!("-{signal}")).arg(&pid).status().unwrap().success());
    }

    /// Its exit status if it exits within `limit`.
    pub fn exited_within(&mut self, limit: Duration) -> Option<ExitStatus> {
        drift_testkit::process::wait_at_most(&mut self.child, limit)
    }

    /// SIGKILL: dies at once, wherever it is. Returns the log so far.
    pub fn kill(&mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        self.log()
    }

    /// SIGTERM, then waits: it must exit cleanly. Returns the whole log.
    pub fn stop(mut self) -> String {
        let status = drift_testkit::process::terminate(&mut self.child, Duration::from_secs(60));
        if let Some(r) = self.reader.take() {
            r.join().unwrap();
        }
        let log = self.log();
        assert!(status.as_ref().is_ok_and(ExitStatus::success), "clean exit on SIGTERM: {status:?}\n{log}");
        log
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if self.reader.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The test API server and a throwaway home for kubectl and the files a test writes.
pub struct ClusterHome {
    pub server: drift_test_apiserver::TestApiServer,
    pub home: tempfile::TempDir,
}

impl ClusterHome {
    pub fn start(options: drift_test_apiserver::Options) -> ClusterHome {
        ClusterHome {
            server: drift_test_apiserver::TestApiServer::start(options).unwrap(),
            home: tempfile::tempdir().unwrap(),
        }
    }

    /// A path in the home.
    pub fn path(&self, name: &str) -> PathBuf {
        self.home.path().join(name)
    }

    /// Writes a file in the home (folders made as needed).
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    /// kubectl against the server; must succeed.
    pub fn kubectl(&self, args: &[&str]) -> String {
        self.kubectl_env(args, &[])
    }

    /// kubectl with extra variables; must succeed.
    pub fn kubectl_env(&self, args: &[&str], env: &[(&str, &Path)]) -> String {
        kubectl(self.server.kubeconfig_path(), self.home.path(), args, env)
    }
}

/// Runs `kubectl --kubeconfig KUBECONFIG ARGS` with HOME in `home` and extra variables; must
/// succeed. Returns stdout.
pub fn kubectl(kubeconfig: &Path, home: &Path, args: &[&str], env: &[(&str, &Path)]) -> String {
    let mut c = Command::new("kubectl");
    c.arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// `kubectl edit` of ConfigMap `shop/settings` with a sed script as the editor (manager
/// `kubectl-edit`), changing `mode: FROM` to `mode: TO`.
pub fn edit_configmap(kubeconfig: &Path, home: &Path, from: &str, to: &str) {
    let editor = home.join(format!("edit-{to}.sh"));
    script(&editor, &format!("#!/bin/sh\nsed -i 's/mode: {from}/mode: {to}/' \"$1\"\n"));
    kubectl(kubeconfig, home, &["edit", "configmap", "settings", "-n", "shop"], &[("KUBE_EDITOR", &editor)]);
}

/// A real git repository in a folder, committed to by the tests.
pub struct GitRepo {
    pub dir: PathBuf,
}

impl GitRepo {
    /// `git init -b main` in `dir`.
    /// A repository at `dir` whose first commit holds [`SHOP`] under `apps/`.
    pub fn shop(dir: PathBuf) -> GitRepo {
        let repo = GitRepo::init(dir);
        for (name, text) in SHOP {
            repo.write(&format!("apps/{name}"), text);
        }
        repo.commit("shop: web");
        repo
    }

    pub fn init(dir: PathBuf) -> GitRepo {
        std::fs::create_dir_all(&dir).unwrap();
        let repo = GitRepo { dir };
        repo.git(&["init", "-q", "-b", "main"]);
        repo
    }

    /// Runs git in the repository with a fixed identity and no user or system configuration.
    pub fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(&self.dir)
            .args([
                "-c",
                "user.name=Drift Test",
                "-c",
                "user.email=drift@example.invalid",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// Writes a file (creating folders).
    pub fn write(&self, name: &str, text: &str) {
        let p = self.dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// `git add -A && git commit -m MESSAGE`; the new commit id.
    pub fn commit(&self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
        self.git(&["rev-parse", "HEAD"]).trim().to_owned()
    }
}

/// Writes an executable shell script (a `KUBE_EDITOR`).
pub fn script(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

/// What a [`Receiver`] answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// 200 OK.
    Ok,
    /// This status, with a JSON error body.
    Status(u16),
    /// Reads the request and never answers (until the connection is closed by the sender).
    Hang,
}

/// A request a [`Receiver`] took.
#[derive(Debug, Clone)]
pub struct Received {
    /// When its last byte arrived.
    pub at: Instant,
    /// Its path.
    pub path: String,
    /// Its headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// Its body.
    pub body: Vec<u8>,
    /// What it was answered.
    pub answer: Answer,
}

impl Received {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// A local HTTP/1.1 receiver of webhooks on a thread: records every request with its arrival
/// time and answers as told ([`Receiver::answer`]).
pub struct Receiver {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    answer: Arc<Mutex<Answer>>,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    /// Listens on a free port of the loopback.
    pub fn start() -> Receiver {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let answer = Arc::new(Mutex::new(Answer::Ok));
        let received = Arc::new(Mutex::new(Vec::new()));
        let (a, r) = (answer.clone(), received.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (a, r) = (a.clone(), r.clone());
                std::thread::spawn(move || serve_one(stream, &a, &r));
            }
        });
        Receiver { url, answer, received }
    }

    /// What the next requests get.
    pub fn answer(&self, answer: Answer) {
        *self.answer.lock().unwrap() = answer;
    }

    /// Every request so far.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

fn serve_one(mut stream: TcpStream, answer: &Mutex<Answer>, received: &Mutex<Vec<Received>>) {
    stream.set_read_timeout(Some(Duration::from_secs(60))).ok();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split(' ').nth(1).unwrap_or_default().to_owned();
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((n, v)) = h.split_once(':') {
                headers.push((n.trim().to_ascii_lowercase(), v.trim().to_owned()));
            }
        }
        let len: usize =
            headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
        let mut body = vec![0; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let a = *answer.lock().unwrap();
        received.lock().unwrap().push(Received { at: Instant::now(), path, headers, body, answer: a });
        let reply = match a {
            Answer::Ok => "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_owned(),
            Answer::Status(s) => {
                let body = format!("{{\"error\": \"status {s}\"}}");
                format!(
                    "HTTP/1.1 {s} Test\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                )
            }
            Answer::Hang => {
                // Wait until the sender goes away.
                let mut sink = Vec::new();
                let _ = reader.read_to_end(&mut sink);
                return;
            }
        };
        if stream.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}
