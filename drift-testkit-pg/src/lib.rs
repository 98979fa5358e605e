//! # drift-testkit-pg
//!
//! Throwaway PostgreSQL servers for tests, started from the system's own binaries (`initdb`,
//! `postgres`): no mocks, no containers. A [`PgServer`] runs in a private temporary folder on a
//! free loopback port, with its Unix socket in that folder; [`PgServer::create_database`] gives
//! each test a fresh, empty database; dropping the server stops it and removes the folder.
//!
//! ```no_run
//! # async fn demo() -> Result<(), drift_testkit_pg::HarnessError> {
//! let server = drift_testkit_pg::PgServer::start()?;
//! let url = server.create_database().await?; // postgres://postgres@127.0.0.1:PORT/test_1
//! // ... connect with `url` ...
//! drop(server); // stops PostgreSQL, removes its folder
//! # Ok(()) }
//! ```
//!
//! Where the binaries are: `DRIFT_PG_BIN` (a folder) when set, else the folder of `initdb` on
//! `PATH`, else the newest `/usr/lib/postgresql/*/bin`, `/usr/local/pgsql/bin`, `/usr/local/bin`.
//! When nothing is found, [`HarnessError::NotInstalled`] says so (`scripts/install-postgres.sh`
//! installs the distribution's packages).
//!
//! Running as root: `initdb` and `postgres` refuse to run as root, so the harness runs them as
//! the `postgres` user (or `nobody` when there is none) through `setpriv`, and gives that user
//! the temporary folder.
//!
//! `initdb` takes most of the start-up time, so the first server of a machine initialises a
//! template cluster in the temporary folder (named by the PostgreSQL version and the user) and
//! every later server copies it.
//!
//! This crate is test tooling: depend on it from `[dev-dependencies]` only.
#![warn(missing_docs)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use sqlx::Connection;

/// What can go wrong starting or using a test server.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// No PostgreSQL server binaries were found.
    #[error(
        "PostgreSQL server binaries (initdb, postgres) not found on PATH, in DRIFT_PG_BIN or under /usr/lib/postgresql/*/bin; run scripts/install-postgres.sh"
    )]
    NotInstalled,
    /// A command failed.
    #[error("{command} failed: {detail}")]
    Command {
        /// What was run.
        command: String,
        /// Exit status and output.
        detail: String,
    },
    /// The server did not become ready.
    #[error("PostgreSQL did not start: {0}")]
    Start(String),
    /// File system trouble.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The SQL side failed.
    #[error("sql: {0}")]
    Sql(#[from] sqlx::Error),
}

/// Result of the harness.
pub type Result<T, E = HarnessError> = std::result::Result<T, E>;

/// How long a start or a stop may take before it is an error.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// A throwaway PostgreSQL server. Stopped (and its folder removed) on drop.
#[derive(Debug)]
pub struct PgServer {
    bin: PathBuf,
    run_as: Option<RunAs>,
    dir: tempfile::TempDir,
    port: Mutex<u16>,
    child: Mutex<Option<Child>>,
    databases: AtomicU32,
    settings: Vec<(String, String)>,
}

/// The unprivileged user the server runs as when the tests run as root.
#[derive(Debug, Clone)]
struct RunAs {
    uid: u32,
    gid: u32,
}

impl PgServer {
    /// Starts a server on a free loopback port in a new temporary folder.
    ///
    /// Blocks until the server accepts connections (typically well under a second once the
    /// template cluster exists, a few seconds the first time on a machine).
    pub fn start() -> Result<Self> {
        Self::start_with_settings(&[])
    }

    /// Starts a server with extra `-c name=value` settings, applied after the harness's own
    /// (which turn durability off: `fsync`, `synchronous_commit` and `full_page_writes` are
    /// `off`). Benchmarks pass them `on` again to measure what a real server does.
    pub fn start_with_settings(settings: &[(&str, &str)]) -> Result<Self> {
        let bin = find_bin_dir().ok_or(HarnessError::NotInstalled)?;
        let run_as = if current_uid()? == 0 { Some(unprivileged_user()?) } else { None };
        let dir = tempfile::Builder::new().prefix("drift-pg-").tempdir_in(temp_root(run_as.as_ref()))?;
        if let Some(user) = &run_as {
            std::os::unix::fs::chown(dir.path(), Some(user.uid), Some(user.gid))?;
        }
        let template = template_cluster(&bin, run_as.as_ref())?;
        let data = dir.path().join("data");
        run(Command::new("cp").arg("-a").arg(&template).arg(&data))?;
        let server = PgServer {
            bin,
            run_as,
            dir,
            port: Mutex::new(0),
            child: Mutex::new(None),
            databases: AtomicU32::new(0),
            settings: settings.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
        };
        server.boot(None)?;
        Ok(server)
    }

    /// The port the server listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        *lock(&self.port)
    }

    /// The folder holding the data directory, the socket and the log.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The URL of a database of this server, as the superuser `postgres` (trust auth).
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port())
    }

    /// Creates a fresh, empty database and returns its URL.
    pub async fn create_database(&self) -> Result<String> {
        let n = self.databases.fetch_add(1, Ordering::Relaxed) + 1;
        let name = format!("test_{n}");
        let mut conn = sqlx::PgConnection::connect(&self.url("postgres")).await?;
        // The name is generated here from a counter, never from input.
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut conn).await?;
        conn.close().await?;
        Ok(self.url(&name))
    }

    /// The server's log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default()
    }

    /// Stops the server (fast shutdown: open connections are closed, the data stays).
    pub fn stop(&self) -> Result<()> {
        let Some(mut child) = lock(&self.child).take() else { return Ok(()) };
        stop_child(&mut child)
    }

    /// Stops the server and starts it again on the same port with the same data.
    pub fn restart(&self) -> Result<()> {
        self.stop()?;
        let port = self.port();
        self.boot(Some(port))
    }

    /// Starts the postmaster; on a port clash (another process took the free port first) tries
    /// again on another port unless `fixed` asks for one.
    fn boot(&self, fixed: Option<u16>) -> Result<()> {
        let mut last = String::new();
        for _ in 0..5 {
            let port = match fixed {
                Some(p) => p,
                None => free_port()?,
            };
            match self.spawn_on(port) {
                Ok(child) => {
                    *lock(&self.port) = port;
                    *lock(&self.child) = Some(child);
                    return Ok(());
                }
                Err(e) => last = e.to_string(),
            }
            if fixed.is_some() {
                break;
            }
        }
        Err(HarnessError::Start(last))
    }

    fn spawn_on(&self, port: u16) -> Result<Child> {
        let data = self.dir.path().join("data");
        let log = std::fs::File::create(self.dir.path().join("postgres.log"))?;
        if let Some(user) = &self.run_as {
            std::os::unix::fs::chown(self.dir.path().join("postgres.log"), Some(user.uid), Some(user.gid))?;
        }
        let mut cmd = self.command("postgres");
        cmd.arg("-D")
            .arg(&data)
            .arg("-p")
            .arg(port.to_string())
            .arg("-k")
            .arg(self.dir.path())
            .args(["-c", "listen_addresses=127.0.0.1"])
            // A throwaway server: durability buys nothing here.
            .args(["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"])
            .args(["-c", "max_connections=200"])
            .args(self.settings.iter().flat_map(|(k, v)| ["-c".to_owned(), format!("{k}={v}")]))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let mut child = cmd.spawn()?;
        // Ready when postmaster.pid says so (its 8th line is the postmaster status).
        let pid_file = data.join("postmaster.pid");
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait()? {
                return Err(HarnessError::Start(format!("postgres exited with {status}: {}", self.log())));
            }
            let ready = std::fs::read_to_string(&pid_file)
                .ok()
                .is_some_and(|s| s.lines().nth(7).is_some_and(|l| l.trim() == "ready"));
            if ready {
                return Ok(child);
            }
            if Instant::now() > deadline {
                let _ = stop_child(&mut child);
                return Err(HarnessError::Start(format!("not ready after {READY_TIMEOUT:?}: {}", self.log())));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn command(&self, program: &str) -> Command {
        command_as(&self.bin, program, self.run_as.as_ref())
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            tracing::warn!(error = %e, "stopping the test PostgreSQL failed");
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means a test panicked while holding it; the value is still valid.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A program of the PostgreSQL bin folder, run as `run_as` when given.
fn command_as(bin: &Path, program: &str, run_as: Option<&RunAs>) -> Command {
    match run_as {
        Some(user) => {
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={}", user.uid))
                .arg(format!("--regid={}", user.gid))
                .arg("--init-groups")
                .arg("--")
                .arg(bin.join(program))
                .env("HOME", "/tmp");
            c
        }
        None => Command::new(bin.join(program)),
    }
}

/// Sends SIGINT (fast shutdown) and waits; SIGKILL when it does not stop in time.
fn stop_child(child: &mut Child) -> Result<()> {
    if child.try_wait()?.is_some() {
        return Ok(());
    }
    run(Command::new("kill").arg("-INT").arg(child.id().to_string()))?;
    let deadline = Instant::now() + READY_TIMEOUT;
    while child.try_wait()?.is_none() {
        if Instant::now() > deadline {
            child.kill()?;
            child.wait()?;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

fn run(cmd: &mut Command) -> Result<String> {
    let out = cmd.stdin(Stdio::null()).output()?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(HarnessError::Command {
            command: format!("{cmd:?}"),
            detail: format!(
                "{}: {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        })
    }
}

fn current_uid() -> Result<u32> {
    use std::os::unix::fs::MetadataExt;
    Ok(std::fs::metadata("/proc/self")?.uid())
}

fn unprivileged_user() -> Result<RunAs> {
    for name in ["postgres", "nobody"] {
        let uid = run(Command::new("id").arg("-u").arg(name));
        let gid = run(Command::new("id").arg("-g").arg(name));
        if let (Ok(uid), Ok(gid)) = (uid, gid)
            && let (Ok(uid), Ok(gid)) = (uid.trim().parse(), gid.trim().parse())
        {
            tracing::debug!(user = name, "running PostgreSQL as an unprivileged user");
            return Ok(RunAs { uid, gid });
        }
    }
    Err(HarnessError::Start("running as root and neither a postgres nor a nobody user exists".into()))
}

/// The folder holding `initdb` and `postgres`.
pub fn find_bin_dir() -> Option<PathBuf> {
    let has_both = |d: &Path| d.join("initdb").is_file() && d.join("postgres").is_file();
    if let Some(dir) = std::env::var_os("DRIFT_PG_BIN").map(PathBuf::from) {
        return has_both(&dir).then_some(dir);
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if has_both(&dir) {
                // Resolve symlinks (Debian links /usr/local/bin/initdb into /usr/lib/postgresql).
                let real =
                    std::fs::canonicalize(dir.join("initdb")).ok().and_then(|p| p.parent().map(Path::to_path_buf));
                return Some(real.filter(|r| has_both(r)).unwrap_or(dir));
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse::<u32>().ok()?, e.path().join("bin"))))
        .filter(|(_, d)| has_both(d))
        .collect();
    versions.sort();
    if let Some((_, dir)) = versions.pop() {
        return Some(dir);
    }
    ["/usr/local/pgsql/bin", "/usr/local/bin", "/usr/bin"].into_iter().map(PathBuf::from).find(|d| has_both(d))
}

/// A freshly initialised cluster kept in the temporary folder, copied by every server.
fn template_cluster(bin: &Path, run_as: Option<&RunAs>) -> Result<PathBuf> {
    let version = run(Command::new(bin.join("postgres")).arg("--version"))?;
    let tag: String = version.chars().filter(char::is_ascii_digit).take(8).collect();
    let uid = run_as.map_or(current_uid()?, |u| u.uid);
    let root = temp_root(run_as);
    let template = root.join(format!("drift-testkit-pg-template-{tag}-u{uid}"));
    if template.join("PG_VERSION").is_file() && template.join("global").is_dir() {
        return Ok(template);
    }
    // Initialise in a private folder, then rename into place: a concurrent test process either
    // wins the rename or finds the template already there; neither sees a half-made one.
    let work = tempfile::Builder::new().prefix("drift-testkit-pg-init-").tempdir_in(&root)?;
    if let Some(user) = run_as {
        std::os::unix::fs::chown(work.path(), Some(user.uid), Some(user.gid))?;
    }
    let data = work.path().join("data");
    run(command_as(bin, "initdb", run_as).arg("-D").arg(&data).args([
        "-A",
        "trust",
        "-U",
        "postgres",
        "-E",
        "UTF8",
        "--locale=C",
        "--no-sync",
        "--no-instructions",
    ]))?;
    match std::fs::rename(&data, &template) {
        Ok(()) => {}
        Err(_) if template.join("PG_VERSION").is_file() => {}
        Err(e) => return Err(e.into()),
    }
    Ok(template)
}

/// Where servers and the template live: the temporary folder, or `/tmp` when the server runs as
/// another user (a `TMPDIR` under root's home would not be reachable by it).
fn temp_root(run_as: Option<&RunAs>) -> PathBuf {
    match run_as {
        Some(_) => PathBuf::from("/tmp"),
        None => std::env::temp_dir(),
    }
}

fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn finds_binaries_here() {
        // The project's test machines have PostgreSQL installed (scripts/install-postgres.sh).
        assert!(find_bin_dir().is_some());
    }
}

/// The examples of the crate's README.md, compiled and run as doctests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
