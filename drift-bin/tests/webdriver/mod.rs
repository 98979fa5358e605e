//! A small W3C WebDriver client for the page tests: Debian's `chromedriver` started on a free
//! port, one headless Chromium session, and the commands the tests use (navigate, find, click,
//! type, run a script, screenshot), over plain HTTP/1.1 on loopback.
//!
//! [`Browser::start`] returns `None` after saying that the test is skipped when chromium or
//! chromedriver is missing, unless `DRIFT_REQUIRE_TOOLS=1` makes that a failure.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The key of an element reference in W3C WebDriver answers.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// `chromium` and `chromedriver` on PATH (or `DRIFT_CHROMIUM`, `DRIFT_CHROMEDRIVER`).
pub fn tools(test: &str) -> Option<(PathBuf, PathBuf)> {
    let find = |var: &str, name: &str| -> Option<PathBuf> {
        if let Some(p) = std::env::var_os(var) {
            return Some(PathBuf::from(p));
        }
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
    };
    let runs = |p: &Path| Command::new(p).arg("--version").output().is_ok_and(|o| o.status.success());
    let chromium = find("DRIFT_CHROMIUM", "chromium").filter(|p| runs(p));
    let driver = find("DRIFT_CHROMEDRIVER", "chromedriver").filter(|p| runs(p));
    match (chromium, driver) {
        (Some(c), Some(d)) => Some((c, d)),
        _ => {
            let reason = "chromium or chromedriver does not run (apt-get install chromium chromium-driver; \
                          scripts/test installs them)";
            let required = std::env::var("DRIFT_REQUIRE_TOOLS").is_ok_and(|v| v == "1");
            assert!(!required, "{test}: {reason}, and DRIFT_REQUIRE_TOOLS=1");
            println!("skipped: {test}: {reason}");
            None
        }
    }
}

/// One HTTP/1.1 request with an optional JSON body; the status and the body as JSON.
fn request(addr: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // chromedriver may keep the connection open: read the head, then the body by its length.
    let mut reader = BufReader::new(s);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).unwrap() > 0, "{method} {path}: the connection closed early");
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let lower = head.to_ascii_lowercase();
    let length =
        lower.lines().find_map(|l| l.strip_prefix("content-length:")).map(|n| n.trim().parse::<usize>().unwrap());
    let payload = match length {
        Some(n) => {
            let mut body = vec![0; n];
            reader.read_exact(&mut body).unwrap();
            body
        }
        None if lower.contains("transfer-encoding: chunked") => dechunk(&mut reader),
        None => {
            let mut body = Vec::new();
            reader.read_to_end(&mut body).unwrap();
            body
        }
    };
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let value = if payload.is_empty() { Value::Null } else { serde_json::from_slice(&payload).unwrap() };
    (status, value)
}

fn dechunk(reader: &mut impl BufRead) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size).unwrap();
        let size = usize::from_str_radix(size.trim(), 16).unwrap();
        let mut chunk = vec![0; size + 2];
        reader.read_exact(&mut chunk).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&chunk[..size]);
    }
}

/// chromedriver started on a free port, with that port. A chromedriver that ends before saying
/// its port is started again (twice at most; one did once, on a loaded machine in CI, and what it
/// said was not kept): the failure names what each said on standard error and how it ended.
fn driver_on_a_port(chromedriver: &Path) -> (Child, String) {
    let mut said = Vec::new();
    for _ in 0..3 {
        let mut driver =
            Command::new(chromedriver).arg("--port=0").stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let mut out = BufReader::new(driver.stdout.take().unwrap());
        let mut err = driver.stderr.take().unwrap();
        let port = loop {
            let mut line = String::new();
            if out.read_line(&mut line).unwrap_or(0) == 0 {
                break None;
            }
            if let Some(rest) = line.split("started successfully on port ").nth(1) {
                break Some(rest.trim().trim_end_matches('.').to_owned());
            }
        };
        match port {
            Some(port) => {
                // Keep reading (and dropping) what chromedriver prints, so that it never blocks.
                std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
                std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
                return (driver, port);
            }
            None => {
                let mut text = String::new();
                let _ = err.read_to_string(&mut text);
                let status = driver.wait().map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
                said.push(format!("{status}: {}", text.trim()));
            }
        }
    }
    panic!("chromedriver ended before saying its port, three times: {said:?}");
}

/// chromedriver with one headless Chromium session; both end on drop.
pub struct Browser {
    driver: Child,
    addr: String,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver and a session of a `width`×`height` headless Chromium (a phone's
    /// screen, with touch and a mobile viewport, when `phone`); `None` when the tools are missing
    /// (see [`tools`]).
    pub fn start(test: &str, width: u32, height: u32, phone: bool) -> Option<Browser> {
        let (chromium, chromedriver) = tools(test)?;
        let (mut driver, port) = driver_on_a_port(&chromedriver);
        let addr = format!("127.0.0.1:{port}");
        let profile = tempfile::tempdir().unwrap();
        let mut caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:loggingPrefs": {"browser": "ALL"},
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--no-first-run", "--disable-extensions", format!("--window-size={width},{height}"),
                         format!("--user-data-dir={}", profile.path().display())],
            },
        }}});
        if phone {
            caps["capabilities"]["alwaysMatch"]["goog:chromeOptions"]["mobileEmulation"] =
                json!({"deviceMetrics": {"width": width, "height": height, "pixelRatio": 2.0, "touch": true}});
        }
        let (status, answer) = request(&addr, "POST", "/session", Some(&caps));
        if status != 200 {
            let _ = driver.kill();
            let _ = driver.wait();
            panic!("chromedriver did not start a session: {answer}");
        }
        let session = answer["value"]["sessionId"].as_str().unwrap().to_owned();
        Some(Browser { driver, addr, session, _profile: profile })
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (status, answer) = request(&self.addr, method, &format!("/session/{}{path}", self.session), body.as_ref());
        assert_eq!(status, 200, "{method} {path}: {answer}");
        answer["value"].clone()
    }

    /// Opens a URL.
    pub fn goto(&self, url: &str) {
        self.call("POST", "/url", Some(json!({"url": url})));
    }

    /// The address in the browser now.
    pub fn url(&self) -> String {
        self.call("GET", "/url", None).as_str().unwrap().to_owned()
    }

    /// Runs `script` (a function body; `arguments` holds `args`) and answers its return value.
    pub fn run(&self, script: &str, args: Value) -> Value {
        self.call("POST", "/execute/sync", Some(json!({"script": script, "args": args})))
    }

    /// The element matching a CSS selector, if there is one now.
    pub fn find(&self, css: &str) -> Option<String> {
        let (status, answer) = request(
            &self.addr,
            "POST",
            &format!("/session/{}/element", self.session),
            Some(&json!({"using": "css selector", "value": css})),
        );
        (status == 200)
            .then(|| answer["value"][ELEMENT].as_str().unwrap_or_else(|| panic!("{css}: {answer}")).to_owned())
    }

    /// Waits (at most `limit`) for an element matching a CSS selector.
    pub fn wait_for(&self, css: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(e) = self.find(css) {
                return e;
            }
            assert!(Instant::now() < deadline, "no element {css} after {limit:?}; the page: {}", self.text("body"));
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Polls `f` every 50 ms until it answers `Some`, for at most `limit`.
    pub fn until<T>(&self, limit: Duration, what: &str, mut f: impl FnMut(&Browser) -> Option<T>) -> T {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(v) = f(self) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "timed out after {limit:?} waiting for {what}; the page: {}",
                self.text("body")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The text of the first element matching a CSS selector, `""` when none does.
    pub fn text(&self, css: &str) -> String {
        self.run("const e = document.querySelector(arguments[0]); return e ? e.innerText : '';", json!([css]))
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Whether an element matching a CSS selector is shown (present and laid out).
    pub fn visible(&self, css: &str) -> bool {
        self.run(
            "const e = document.querySelector(arguments[0]); return !!e && e.getClientRects().length > 0;",
            json!([css]),
        )
        .as_bool()
        .unwrap()
    }

    /// Clicks an element.
    pub fn click(&self, css: &str) {
        let e = self.wait_for(css, Duration::from_secs(10));
        self.call("POST", &format!("/element/{e}/click"), Some(json!({})));
    }

    /// Types text into an element (after what it holds).
    pub fn type_into(&self, css: &str, text: &str) {
        let e = self.wait_for(css, Duration::from_secs(10));
        self.call("POST", &format!("/element/{e}/value"), Some(json!({"text": text})));
    }

    /// Chooses the option with this value in a `<select>`, as a user does (a click on it).
    pub fn choose(&self, select: &str, value: &str) {
        self.click(&format!("{select} option[value=\"{value}\"]"));
    }

    /// A PNG of the window, written to `path`.
    pub fn screenshot(&self, path: &Path) {
        let b64 = self.call("GET", "/screenshot", None);
        let png = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b64.as_str().unwrap()).unwrap();
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        std::fs::write(path, png).unwrap();
    }

    /// What the page wrote to the console (errors, CSP violations), as chromedriver kept it.
    pub fn console(&self) -> Vec<Value> {
        self.call("POST", "/se/log", Some(json!({"type": "browser"}))).as_array().cloned().unwrap_or_default()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = request(&self.addr, "DELETE", &format!("/session/{}", self.session), None);
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
