//! The canary test of issue 37, item 3: a credential written in any of the forms a database or a
//! git URL can hold it (user information, `password`, `PASSWORD`, `Password`, `sslpassword` and
//! other secret keys, a `#fragment` after `password=`, `-c password=...` inside `options`,
//! `options[password]`, SQLite URLs with user information,
//! git URLs with a token or a password) reaches no output of any command that prints settings or
//! errors: `drift config check`, `drift scan` (its errors), `drift migrate`, `drift drifts list`
//! and `drift serve` (its start-up and shutdown logs, and for a git repository its failed scan),
//! from the file and from `database_env`, in both log formats (`human`, `json`), at the default
//! level and at `trace` (which shows every line of every other level), and with the driver's
//! own targets asked for (`sqlx=trace,sqlx_postgres::options=trace`).
//!
//! The PostgreSQL forms run against a real server (`drift-testkit-pg`), so the driver gets the
//! URL and connects where the form lets it. A failure names the form, the command, the level
//! and the format, and the byte offsets of the canary in the output: never the output itself.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use drift_testkit_pg::PgServer;

/// The credential. Letters and digits only, so that no encoding of a URL changes it.
const CANARY: &str = "Qk7canaryZ2w";

/// Where a form puts the credential.
#[derive(Clone, Copy)]
enum Kind {
    /// The store URL (`{db}` is `127.0.0.1:PORT/DATABASE` of the test server, `{dir}` the
    /// test's folder).
    Store,
    /// A repository URL (the store is a SQLite file).
    Repo,
}

/// Every form of the issue (and of issue 16), `{c}` standing for the canary.
const FORMS: [(&str, Kind, &str); 19] = [
    ("user information", Kind::Store, "postgres://postgres:{c}@{db}"),
    ("user information a parser cannot read", Kind::Store, "postgres://postgres:{c}/x?y@{db}"),
    ("password", Kind::Store, "postgres://postgres@{db}?password={c}"),
    ("PASSWORD", Kind::Store, "postgres://postgres@{db}?PASSWORD={c}"),
    ("Password", Kind::Store, "postgres://postgres@{db}?sslmode=disable&Password={c}"),
    ("sslpassword", Kind::Store, "postgres://postgres@{db}?sslpassword={c}&sslmode=disable"),
    ("SSLPassword", Kind::Store, "postgresql://postgres@{db}?SSLPassword={c}"),
    ("fragment after password=", Kind::Store, "postgres://postgres@{db}?password=abc#{c}"),
    ("options -c password", Kind::Store, "postgres://postgres@{db}?options=-c%20password%3D{c}"),
    ("options -cpassword", Kind::Store, "postgres://postgres@{db}?options=-c+search_path%3Dpublic+-cpassword%3D{c}"),
    ("options[password]", Kind::Store, "postgres://postgres@{db}?options[password]={c}"),
    ("oauth_client_secret", Kind::Store, "postgres://postgres@{db}?oauth_client_secret={c}"),
    ("sqlite user information", Kind::Store, "sqlite://user:{c}@localhost/{dir}/a.db"),
    ("sqlite user information before a path", Kind::Store, "sqlite://user:{c}@{dir}/b.db"),
    ("sqlite password", Kind::Store, "sqlite://{dir}/c.db?password={c}"),
    ("git token", Kind::Repo, "https://127.0.0.1:1/o/r.git?token={c}"),
    ("git user information", Kind::Repo, "https://u:{c}@127.0.0.1:1/o/r.git"),
    ("git fragment", Kind::Repo, "https://127.0.0.1:1/o/r.git?a=1#{c}"),
    ("git password with / and ?", Kind::Repo, "https://u:{c}/w?x@127.0.0.1:1/o/r.git"),
];

/// Log settings: `DRIFT_LOG` (`None`: unset, the default level) and the format.
const LOGS: [(Option<&str>, &str); 6] = [
    (None, "human"),
    (None, "json"),
    (Some("trace"), "human"),
    (Some("trace"), "json"),
    (Some("sqlx=trace,sqlx_postgres::options=trace,sqlx_postgres=trace"), "human"),
    (Some("sqlx=trace,sqlx_postgres::options=trace,sqlx_postgres=trace"), "json"),
];

/// Byte offsets of `needle` in `haystack`.
fn offsets(haystack: &[u8], needle: &[u8]) -> Vec<usize> {
    haystack.windows(needle.len()).enumerate().filter(|(_, w)| *w == needle).map(|(i, _)| i).collect()
}

/// A run of the binary: its standard output and error together, and its exit code. Killed (and
/// reported as such) after 60 s.
fn run(args: &[&str], config: &Path, env: &[(&str, &str)], log: (Option<&str>, &str)) -> (Vec<u8>, Option<i32>) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_drift"));
    cmd.args(args).arg(config).args(["--log-format", log.1]).env("NO_COLOR", "1").env_remove("KUBECONFIG");
    match log.0 {
        Some(filter) => cmd.env("DRIFT_LOG", filter),
        None => cmd.env_remove("DRIFT_LOG"),
    };
    for (k, v) in env {
        cmd.env(k, v);
    }
    let ran = drift_testkit::process::output_within(&mut cmd, Duration::from_secs(60)).unwrap();
    let mut all = ran.stdout;
    all.extend(ran.stderr);
    // (Killed at the limit: -1.)
    (all, ran.status.map_or(Some(-1), |s| s.code()))
}

/// One HTTP GET; the status (0 when the connection failed) and the body.
fn get(addr: &str, path: &str) -> (u16, String) {
    let Ok(mut s) = TcpStream::connect(addr) else { return (0, String::new()) };
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let _ = write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default())
}

/// `drift serve`: runs until it listens (then `/health` is asked, and for a repository form
/// `/scans` until its failed scan is recorded, and it is stopped with SIGTERM) or until it exits
/// by itself. The whole output, whether it served, and whether it stopped within a minute of its
/// SIGTERM (else it was killed).
fn serve(
    config: &Path,
    env: &[(&str, &str)],
    log: (Option<&str>, &str),
    wait_for_scan: bool,
) -> (Vec<u8>, bool, Result<(), String>) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_drift"));
    cmd.args(["serve", "--config"]).arg(config).args(["--log-format", log.1]).env("NO_COLOR", "1");
    cmd.env_remove("KUBECONFIG");
    match log.0 {
        Some(filter) => cmd.env("DRIFT_LOG", filter),
        None => cmd.env_remove("DRIFT_LOG"),
    };
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::sync::Arc::new(Mutex::new(Vec::new()));
    let err = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stderr.read_to_end(&mut b);
        b
    });
    let sink = out.clone();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    let started = Instant::now();
    let mut served = false;
    let mut stopped = Ok(());
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        let text = String::from_utf8_lossy(&out.lock().unwrap()).into_owned();
        if let Some(addr) = text.lines().find_map(|l| l.strip_prefix("listening on ")) {
            let (status, _) = get(addr, "/health");
            assert_eq!(status, 200, "/health of drift serve");
            served = true;
            while wait_for_scan && started.elapsed() < Duration::from_secs(60) {
                let (_, body) = get(addr, "/scans");
                if body.contains("\"outcome\"") {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            // SHUTDOWN_GRACE (20 s) for a running scan, 5 s for the notifier, and room.
            stopped = drift_testkit::process::terminate(&mut child, Duration::from_secs(60)).map(|_| ());
            break;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    reader.join().unwrap();
    let mut all = std::mem::take(&mut *out.lock().unwrap());
    all.extend(err.join().unwrap());
    (all, served, stopped)
}

fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// Every path below `dir` and every file's bytes, for the canary.
fn files(dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.push((p.display().to_string(), Vec::new()));
            files(&p, out);
        } else {
            out.push((p.display().to_string(), std::fs::read(&p).unwrap_or_default()));
        }
    }
}

#[test]
fn no_credential_form_reaches_any_output_of_any_command_format_or_level() {
    let pg = PgServer::start().expect("PostgreSQL for the canary test (scripts/install-postgres.sh)");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let failures = Mutex::new(Vec::<String>::new());
    let runs = Mutex::new(0usize);
    let served_forms = Mutex::new(Vec::<&str>::new());
    let host_kept = Mutex::new(0usize);
    let databases: Vec<String> = FORMS
        .iter()
        .map(|_| {
            let url = rt.block_on(pg.create_database()).unwrap();
            url.strip_prefix("postgres://postgres@").unwrap().to_owned()
        })
        .collect();
    let check = |form: &str, what: &str, log: (Option<&str>, &str), output: &[u8]| {
        *runs.lock().unwrap() += 1;
        let at = offsets(output, CANARY.as_bytes());
        if !at.is_empty() {
            failures.lock().unwrap().push(format!(
                "{form}: {what} (DRIFT_LOG {:?}, --log-format {}): the canary at byte offsets {at:?} of {} bytes of output",
                log.0,
                log.1,
                output.len()
            ));
        }
    };
    // Two forms at a time: each run is a process of its own.
    let next = Mutex::new(0usize);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                loop {
                    let i = {
                        let mut n = next.lock().unwrap();
                        *n += 1;
                        *n - 1
                    };
                    let Some(&(form, kind, template)) = FORMS.get(i) else { break };
                    let dir = tempfile::tempdir().unwrap();
                    let d = dir.path();
                    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: x}\ndata: {k: v}\n";
                    write(&d.join("desired/a.yaml"), cm);
                    write(&d.join("live/a.yaml"), cm);
                    let url = template
                        .replace("{c}", CANARY)
                        .replace("{db}", &databases[i])
                        .replace("{dir}", d.display().to_string().trim_start_matches('/'));
                    let common = format!(
                        "cluster: c\ninterval: 10m\nwatch: false\napi:\n  listen: 127.0.0.1:0\nlive:\n  snapshot: {}/live\n",
                        d.display()
                    );
                    let (in_file, from_env) = match kind {
                        Kind::Store => {
                            let repo = format!("repositories:\n  - name: r\n    url: {}/desired\n", d.display());
                            (
                                format!("store: \"{url}\"\n{repo}{common}"),
                                Some(format!("database_env: DRIFT_CANARY_DB\n{repo}{common}")),
                            )
                        }
                        Kind::Repo => (
                            format!(
                                "store: sqlite://{0}/drift.db\nrepositories:\n  - name: r\n    url: \"{url}\"\n    cache_dir: {0}/cache\n{common}",
                                d.display()
                            ),
                            None,
                        ),
                    };
                    let file = d.join("in-file.yaml");
                    std::fs::write(&file, in_file).unwrap();
                    let env = [("DRIFT_CANARY_DB", url.as_str())];
                    for log in LOGS {
                        for args in [
                            &["config", "check"][..],
                            &["scan", "--config"],
                            &["migrate", "--config"],
                            &["drifts", "list", "--config"],
                        ] {
                            let (output, _) = run(args, &file, &env, log);
                            check(form, &args.join(" "), log, &output);
                            if form == "git fragment" && args[0] == "scan" {
                                // The host stays readable (issue 37: `?a=1` made it `***27.0.0.***`).
                                let text = String::from_utf8_lossy(&output);
                                if text.contains("127.0.0.1") && !text.contains("***27") {
                                    *host_kept.lock().unwrap() += 1;
                                }
                            }
                        }
                    }
                    if let Some(text) = &from_env {
                        let env_file = d.join("from-env.yaml");
                        std::fs::write(&env_file, text).unwrap();
                        for log in &LOGS[2..4] {
                            for args in [&["config", "check"][..], &["scan", "--config"], &["migrate", "--config"]] {
                                let (output, _) = run(args, &env_file, &env, *log);
                                check(form, &format!("{} (database_env)", args.join(" ")), *log, &output);
                            }
                            let (output, served, stopped) = serve(&env_file, &env, *log, false);
                            check(form, "serve (database_env)", *log, &output);
                            if let Err(e) = stopped {
                                failures.lock().unwrap().push(format!("{form}: serve (database_env): {e}"));
                            }
                            if served {
                                served_forms.lock().unwrap().push(form);
                            }
                        }
                    }
                    for log in &LOGS[..4] {
                        let (output, served, stopped) = serve(&file, &env, *log, matches!(kind, Kind::Repo));
                        check(form, "serve", *log, &output);
                        if let Err(e) = stopped {
                            failures.lock().unwrap().push(format!("{form}: serve (DRIFT_LOG {:?}): {e}", log.0));
                        }
                        if served {
                            served_forms.lock().unwrap().push(form);
                        }
                    }
                    let mut all = Vec::new();
                    files(d, &mut all);
                    for (path, bytes) in all {
                        // The configuration files hold it, as written by the test.
                        if path.ends_with("in-file.yaml") || path.ends_with("from-env.yaml") {
                            continue;
                        }
                        if path.contains(CANARY) || !offsets(&bytes, CANARY.as_bytes()).is_empty() {
                            failures
                                .lock()
                                .unwrap()
                                .push(format!("{form}: a file of the test folder holds the canary (name or content)"));
                        }
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{} failure(s):\n{}", failures.len(), failures.join("\n"));
    // The runs did what they are for: the accepted forms served, the host stayed readable.
    let served = served_forms.into_inner().unwrap();
    for form in ["user information", "password", "git token"] {
        assert!(served.contains(&form), "drift serve served with the form {form:?}: {served:?}");
    }
    assert_eq!(*host_kept.lock().unwrap(), LOGS.len(), "the scan error names the host 127.0.0.1 in every run");
    assert!(*runs.lock().unwrap() >= FORMS.len() * LOGS.len() * 4, "{} runs", runs.lock().unwrap());
}
