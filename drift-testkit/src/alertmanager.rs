//! The real Alertmanager for tests: Debian's `prometheus-alertmanager` (0.25, which
//! `scripts/test` installs) started on a free loopback port with a temporary storage folder,
//! clustering off, and a configuration of the test's choosing; stopped when dropped.
//! [`alertmanager_available`] says when a test is skipped without it (a failure under
//! `DRIFT_REQUIRE_TOOLS=1`).
//!
//! ```no_run
//! use drift_testkit::alertmanager::{Alertmanager, alertmanager_available};
//! if alertmanager_available("my_test") {
//!     let am = Alertmanager::start();
//!     am.post_alerts(&serde_json::json!([{ "labels": { "alertname": "X" } }]));
//!     let alerts = am.alerts();
//!     assert_eq!(alerts[0]["labels"]["alertname"], "X");
//! }
//! ```

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// Where the binary is: `DRIFT_ALERTMANAGER` when set, else `/usr/bin/prometheus-alertmanager`
/// (Debian's package), else `prometheus-alertmanager` or `alertmanager` on `PATH`.
pub fn alertmanager_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("DRIFT_ALERTMANAGER") {
        return Some(PathBuf::from(p));
    }
    let debian = PathBuf::from("/usr/bin/prometheus-alertmanager");
    if debian.is_file() {
        return Some(debian);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|d| [d.join("prometheus-alertmanager"), d.join("alertmanager")])
        .find(|p| p.is_file())
}

/// Whether Alertmanager is installed, for the test named `test`; when it is not, prints that
/// the test is skipped, or fails under `DRIFT_REQUIRE_TOOLS=1`.
///
/// # Panics
///
/// When Alertmanager is missing and `DRIFT_REQUIRE_TOOLS=1`.
pub fn alertmanager_available(test: &str) -> bool {
    if alertmanager_binary().is_some() {
        return true;
    }
    let required = std::env::var("DRIFT_REQUIRE_TOOLS").is_ok_and(|v| v == "1");
    let how = "Debian package prometheus-alertmanager; scripts/test installs it";
    assert!(!required, "{test}: Alertmanager is not installed and DRIFT_REQUIRE_TOOLS=1 ({how})");
    eprintln!("skipped {test}: Alertmanager is not installed ({how})");
    false
}

/// The smallest configuration: every alert to a receiver `null` that sends nothing.
pub const NULL_CONFIG: &str = "route:\n  receiver: 'null'\nreceivers:\n  - name: 'null'\n";

/// A configuration that sends every alert group to a webhook receiver at `url` at once
/// (`group_wait: 0s`, `group_interval: 1s`), resolved alerts included.
pub fn webhook_config(url: &str) -> String {
    format!(
        "route:\n  receiver: hook\n  group_by: ['...']\n  group_wait: 0s\n  group_interval: 1s\n  repeat_interval: 1h\n\
         receivers:\n  - name: hook\n    webhook_configs:\n      - url: '{url}'\n        send_resolved: true\n"
    )
}

/// A running Alertmanager on loopback, stopped (and its folder removed) when dropped.
#[derive(Debug)]
pub struct Alertmanager {
    /// `127.0.0.1:PORT`.
    pub host: String,
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Alertmanager {
    /// Starts Alertmanager with [`NULL_CONFIG`] ([`Alertmanager::start_with`]).
    pub fn start() -> Alertmanager {
        Alertmanager::start_with(NULL_CONFIG)
    }

    /// Starts Alertmanager with `config` (its YAML) on a free loopback port, a temporary
    /// `--storage.path`, clustering off (`--cluster.listen-address=`), and waits until
    /// `/-/ready` answers 200 (at most 20 s). Panics when it cannot start, with its log
    /// (check [`alertmanager_available`] first).
    pub fn start_with(config: &str) -> Alertmanager {
        let binary = alertmanager_binary().expect("Alertmanager is installed (check alertmanager_available first)");
        let dir = tempfile::tempdir().unwrap();
        let config_file = dir.path().join("alertmanager.yml");
        std::fs::write(&config_file, config).unwrap();
        let storage = dir.path().join("data");
        std::fs::create_dir_all(&storage).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let host = format!("127.0.0.1:{port}");
        let log = dir.path().join("alertmanager.log");
        let mut child = Command::new(binary)
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!("--storage.path={}", storage.display()))
            .arg(format!("--web.listen-address={host}"))
            .arg("--cluster.listen-address=")
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("Alertmanager starts");
        for _ in 0..400 {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("Alertmanager exited ({status}): {}", std::fs::read_to_string(&log).unwrap_or_default());
            }
            if request(&host, "GET", "/-/ready", None).is_ok_and(|(code, _)| code == 200) {
                return Alertmanager { host, child, log, _dir: dir };
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("Alertmanager did not get ready on {host}: {}", std::fs::read_to_string(&log).unwrap_or_default());
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.host)
    }

    /// What Alertmanager wrote to its standard error so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `GET path`: the status code and the body parsed as JSON (`Null` when it is not JSON).
    /// Panics when the request fails.
    pub fn get(&self, path: &str) -> (u16, Value) {
        let (code, body) = request(&self.host, "GET", path, None).unwrap();
        (code, serde_json::from_str(&body).unwrap_or(Value::Null))
    }

    /// The alerts Alertmanager holds (`GET /api/v2/alerts`: active, silenced, inhibited and
    /// unprocessed ones; an alert whose `endsAt` has passed is not listed).
    pub fn alerts(&self) -> Vec<Value> {
        let (code, body) = self.get("/api/v2/alerts");
        assert_eq!(code, 200, "GET /api/v2/alerts: {body}");
        body.as_array().cloned().unwrap_or_default()
    }

    /// `POST /api/v2/alerts` with `alerts` (an array of postable alerts); panics unless 200.
    pub fn post_alerts(&self, alerts: &Value) {
        let (code, body) = request(&self.host, "POST", "/api/v2/alerts", Some(&alerts.to_string())).unwrap();
        assert_eq!(code, 200, "POST /api/v2/alerts: {body}");
    }
}

impl Drop for Alertmanager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.0 request on loopback (the connection closes after the answer, so the body is
/// what follows the headers); the status code and the body.
fn request(host: &str, method: &str, path: &str, json: Option<&str>) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(host)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let body = json.unwrap_or("");
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)?;
    let code = answer.split(' ').nth(1).and_then(|c| c.parse().ok()).ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not an HTTP answer: {answer:.100}"))
    })?;
    let body = answer.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    Ok((code, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alertmanager_starts_takes_an_alert_and_lists_it() {
        if !alertmanager_available("alertmanager_starts_takes_an_alert_and_lists_it") {
            return;
        }
        let am = Alertmanager::start();
        assert!(am.alerts().is_empty());
        am.post_alerts(&serde_json::json!([{ "labels": { "alertname": "TestkitAlert", "team": "x" } }]));
        let alerts = am.alerts();
        assert_eq!(alerts.len(), 1, "{alerts:?}");
        assert_eq!(alerts[0]["labels"]["alertname"], "TestkitAlert");
        let (code, status) = am.get("/api/v2/status");
        assert_eq!(code, 200);
        assert_eq!(status["cluster"]["status"], "disabled", "clustering is off: {status}");
        // The webhook configuration is one Alertmanager accepts.
        let hooked = Alertmanager::start_with(&webhook_config("http://127.0.0.1:9/hook"));
        let (_, status) = hooked.get("/api/v2/status");
        assert!(status["config"]["original"].as_str().unwrap().contains("send_resolved: true"), "{status}");
    }

    /// The webhook configuration delivers an alert to the receiver at once: Alertmanager's own
    /// webhook body (version 4) reaches a listener on loopback.
    #[test]
    fn the_webhook_configuration_delivers_at_once() {
        if !alertmanager_available("the_webhook_configuration_delivers_at_once") {
            return;
        }
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/alerts", listener.local_addr().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            // Headers, then Content-Length bytes of body.
            let body = loop {
                let n = s.read(&mut chunk).unwrap();
                buf.extend_from_slice(&chunk[..n]);
                let text = String::from_utf8_lossy(&buf).into_owned();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let len: usize = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap())
                        })
                        .unwrap_or(0);
                    if body.len() >= len {
                        break body.to_owned();
                    }
                }
                assert!(n > 0, "the connection closed early");
            };
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            tx.send(body).unwrap();
        });
        let am = Alertmanager::start_with(&webhook_config(&url));
        am.post_alerts(&serde_json::json!([{ "labels": { "alertname": "Hooked", "namespace": "shop" } }]));
        let body = rx.recv_timeout(Duration::from_secs(20)).expect("Alertmanager called the webhook");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["version"], "4");
        assert_eq!(body["status"], "firing");
        assert_eq!(body["alerts"][0]["labels"]["namespace"], "shop");
    }
}
