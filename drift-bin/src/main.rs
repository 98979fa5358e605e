//! `drift`: finds, explains and tracks configuration drift between Git and Kubernetes.
//!
//! Exit codes follow `kubectl diff`: 0 no drift, 1 drift found, 2 or more an error. Commands on
//! one recorded drift (`drift decide`, `drift drifts get`) exit 1 when the store has no such
//! drift or refuses the decision, 2 on a usage error.

mod cmd;
mod compose;
mod config;
mod files;
mod hash_key;
mod output;
mod progress;
mod signals;

/// jemalloc instead of the C library's allocator, with its background threads turned on in
/// `main`: they give the pages freed after a pass and the watch's first lists back to the
/// system within seconds (`drift serve` over 100,000 live objects: about 110 MiB resident once
/// settled, against 160–175 MiB with mimalloc and 600 MiB with glibc; docs/benchmarks.md).
#[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// mimalloc, when chosen (`--features mimalloc`).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(name = "drift", version, about = "GitOps configuration drift detector for Kubernetes")]
struct Cli {
    /// Log format on standard error.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Human, env = "DRIFT_LOG_FORMAT")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    Human,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Compare desired manifests with live objects read from files or folders.
    Diff(cmd::diff::DiffArgs),
    /// Scan every configured repository once, record the drifts, print them.
    Scan(cmd::scan::ScanArgs),
    /// Say what merging a branch would do to the cluster: live changes it overwrites, drifts it
    /// resolves, objects it changes (exit 1: it overwrites live changes).
    Check(cmd::check::CheckArgs),
    /// Scan every interval, react to live changes, serve the REST API.
    Serve(cmd::serve::ServeArgs),
    /// Print the desired state of a repository as the detector sees it.
    Render(cmd::render::RenderArgs),
    /// Create or upgrade the store's schema.
    Migrate(cmd::store::ConfigArg),
    /// Recorded drifts.
    #[command(subcommand)]
    Drifts(cmd::store::DriftsCommand),
    /// Recorded policy findings (`policies:` in drift.yaml).
    #[command(subcommand)]
    Findings(cmd::store::FindingsCommand),
    /// Decide about a drift: acknowledge, accept (a waiver) or reject.
    Decide(cmd::decide::DecideArgs),
    /// Act on a drift: revert the cluster to Git, or accept the cluster's value into Git.
    Fix(cmd::fix::FixArgs),
    /// Whitelist proposals: the ignore annotation for what people accepted again and again,
    /// printed as a patch, or opened as pull requests with --open.
    Propose(cmd::propose::ProposeArgs),
    /// The audit trail: scans, decisions, waivers, notification attempts.
    #[command(subcommand)]
    Audit(cmd::audit::AuditCommand),
    /// Configuration files.
    #[command(subcommand)]
    Config(cmd::store::ConfigCommand),
    /// The key of the Secret-value hash: its id, its rotation.
    #[command(subcommand)]
    SecretKey(cmd::secret_key::SecretKeyCommand),
    /// Print the version.
    Version,
    /// Print the shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(cmd::shell::CompletionsArgs),
    /// Print a manual page in roff: drift(1), or a subcommand's (`drift man | man -l -`).
    Man(cmd::shell::ManArgs),
}

/// Whether output may carry ANSI colours: only on a terminal, and never when `NO_COLOR` is set
/// to anything but the empty string (<https://no-color.org>).
fn colour(terminal: bool) -> bool {
    terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// The log filter when `DRIFT_LOG` is not set.
const DEFAULT_LOG_FILTER: &str = "warn,drift=info";

/// kube-client logs every failed request at ERROR: during an API server outage that is one line
/// per retry of each watch (hundreds a second with a few hundred watches). drift reports the
/// same outage itself, once per watch and then as a summary a minute, so these lines are left
/// out unless the filter names `kube_client` itself.
const QUIET_KUBE_CLIENT: &str = "kube_client::client::builder=off";

/// The PostgreSQL driver's lines about connection settings, left out whatever the filter says:
/// at `warn` it quotes a URL setting it does not read with its value (`sslpassword=...`) and a
/// malformed line of a `.pgpass` file as it is, password included. drift gives the driver only
/// the settings it reads and says itself which it left out (docs/security.md, "Secrets").
const QUIET_DRIVER_SETTINGS: &str = "sqlx_postgres::options=off";

/// The log filter: `DRIFT_LOG` (an invalid one falls back to the default) or the default, with
/// kube-client's per-request errors left out unless the filter names `kube_client`, and the
/// driver's lines about connection settings always left out.
fn log_filter(given: Option<&str>) -> tracing_subscriber::EnvFilter {
    let text = given.filter(|f| tracing_subscriber::EnvFilter::try_new(f).is_ok()).unwrap_or(DEFAULT_LOG_FILTER);
    let text = if text.contains("kube_client") { text.to_owned() } else { format!("{text},{QUIET_KUBE_CLIENT}") };
    // A directive of the filter for those lines is dropped, so that this one decides.
    let text: Vec<&str> = text.split(',').filter(|d| !d.trim_start().starts_with("sqlx_postgres::options")).collect();
    let text = format!("{},{QUIET_DRIVER_SETTINGS}", text.join(","));
    tracing_subscriber::EnvFilter::try_new(&text)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER))
}

fn init_logs(format: LogFormat) {
    use std::io::IsTerminal;
    let filter = log_filter(std::env::var("DRIFT_LOG").ok().as_deref());
    // A log file or a pipe gets plain text: colour codes only on a terminal.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(progress::LogWriter)
        .with_ansi(colour(std::io::stderr().is_terminal()));
    match format {
        LogFormat::Human => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// How long jemalloc keeps the pages a command freed before giving them back, for a command
/// that reads once and exits (every one but `drift serve`, whose 10 s default the soaks
/// measured): one second instead of ten. A reading thread's arena keeps the pages of the trees it
/// parsed and dropped, which other threads' arenas cannot reuse; with ten seconds they all stay
/// resident for the whole of a run (`drift diff` of 50,000 pairs: about 70 MiB more at its peak,
/// and no faster; docs/benchmarks.md). Set before any other thread starts, so that every arena
/// made afterwards has it, and on the arena the main thread already has. Failing costs memory,
/// nothing else.
#[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
fn quick_decay() {
    use tikv_jemalloc_ctl::{Access, AsName};
    const DECAY_MS: isize = 1_000;
    let arenas = b"arenas.dirty_decay_ms\0".name().write(DECAY_MS);
    let first = b"arena.0.dirty_decay_ms\0".name().write(DECAY_MS);
    if let Err(e) = arenas.and(first) {
        tracing::debug!("jemalloc decay not set: {e}");
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logs(cli.log_format);
    // jemalloc's purging threads (a few idle threads; without them, freed pages go back only
    // when the process allocates again). Failing to start them costs memory, nothing else.
    #[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
    if let Err(e) = tikv_jemalloc_ctl::background_thread::write(true) {
        tracing::debug!("jemalloc background threads not started: {e}");
    }
    #[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
    if !matches!(cli.command, Command::Serve(_)) {
        quick_decay();
    }
    // One crypto provider for every TLS client (kube, sqlx, gix, octocrab); installing fails only
    // when one is already installed, which is what we want anyway.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match &cli.command {
        Command::Diff(args) => cmd::diff::run(args),
        Command::Scan(args) => runtime.block_on(cmd::scan::run(args)),
        Command::Check(args) => runtime.block_on(cmd::check::run(args)),
        Command::Serve(args) => runtime.block_on(cmd::serve::run(args)),
        Command::Render(args) => runtime.block_on(cmd::render::run(args)),
        Command::Migrate(args) => runtime.block_on(cmd::store::migrate(args)),
        Command::Drifts(c) => runtime.block_on(cmd::store::drifts(c)),
        Command::Findings(c) => runtime.block_on(cmd::store::findings(c)),
        Command::Decide(args) => runtime.block_on(cmd::decide::run(args)),
        Command::Fix(args) => runtime.block_on(cmd::fix::run(args)),
        Command::Propose(args) => runtime.block_on(cmd::propose::run(args)),
        Command::Audit(c) => runtime.block_on(cmd::audit::run(c)),
        Command::Config(c) => cmd::store::config(c),
        Command::SecretKey(c) => runtime.block_on(cmd::secret_key::run(c)),
        Command::Completions(args) => cmd::shell::completions(args),
        Command::Man(args) => cmd::shell::man(args),
        Command::Version => {
            println!("drift {}", env!("CARGO_PKG_VERSION"));
            Ok(ExitCode::SUCCESS)
        }
    };
    // The command is done: what still runs on the runtime is abandoned. Dropping the runtime
    // instead would wait for every blocking task however long it takes, so one stuck in a
    // system call (a read of a hung network file system, a library's blocking I/O) would keep
    // a finished process, and a pod told to stop, alive.
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The decay a one-shot command sets is the one jemalloc then has, for the arenas made
    /// afterwards and for the first one (this test's thread may have any arena).
    #[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
    #[test]
    fn a_one_shot_command_gives_freed_pages_back_within_a_second() {
        use tikv_jemalloc_ctl::{Access, AsName};
        let read = |name: &[u8]| -> isize { name.name().read().unwrap_or(-2) };
        quick_decay();
        assert_eq!(read(b"arenas.dirty_decay_ms\0"), 1_000);
        assert_eq!(read(b"arena.0.dirty_decay_ms\0"), 1_000);
    }

    /// The thread caches the repository's builds compile in: the options `.cargo/config.toml`
    /// names are the ones the built binary's jemalloc has. Skipped when the crate is built
    /// outside the clone (from its package, where that file is not), or when the environment
    /// names other options for jemalloc at run time.
    #[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
    #[test]
    fn the_build_gives_each_thread_the_caches_cargo_config_names() {
        use tikv_jemalloc_ctl::{Access, AsName};
        if std::env::var_os("_RJEM_MALLOC_CONF").is_some() || std::env::var_os("MALLOC_CONF").is_some() {
            eprintln!("skipped: jemalloc's options are set from the environment");
            return;
        }
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.cargo/config.toml");
        let Ok(config) = std::fs::read_to_string(&path) else {
            eprintln!("skipped: built outside the repository ({} is not there)", path.display());
            return;
        };
        // `JEMALLOC_SYS_WITH_MALLOC_CONF = "name:value,name:value"`.
        let options = config
            .lines()
            .find_map(|l| l.trim().strip_prefix("JEMALLOC_SYS_WITH_MALLOC_CONF"))
            .and_then(|rest| rest.split('"').nth(1))
            .unwrap_or_else(|| panic!("{} names no JEMALLOC_SYS_WITH_MALLOC_CONF", path.display()));
        let named = |name: &str| -> i64 {
            let value = options.split(',').find_map(|o| o.strip_prefix(name)?.strip_prefix(':'));
            value.and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{options:?} names no number for {name}"))
        };
        let slots: u32 = b"opt.tcache_nslots_small_max\0".name().read().unwrap_or(0);
        let multiplier: isize = b"opt.lg_tcache_nslots_mul\0".name().read().unwrap_or(0);
        assert_eq!(
            (i64::from(slots), multiplier as i64),
            (named("tcache_nslots_small_max"), named("lg_tcache_nslots_mul")),
            "the binary's jemalloc does not have the options of {}",
            path.display()
        );
    }

    #[test]
    fn kube_clients_per_request_errors_are_left_out_unless_asked_for() {
        let shown = |given: Option<&str>| log_filter(given).to_string();
        assert!(shown(None).contains("kube_client::client::builder=off"), "{}", shown(None));
        assert!(shown(None).contains("drift=info"));
        let asked = shown(Some("info,kube_client=debug"));
        assert!(asked.contains("kube_client=debug") && !asked.contains("builder=off"), "{asked}");
        let other = shown(Some("debug"));
        assert!(other.contains("kube_client::client::builder=off"), "{other}");
        // A filter that does not parse falls back to the default, quiet one.
        assert_eq!(shown(Some("drift=loud[")), shown(None));
        // The driver's lines about connection settings stay out, even when asked for.
        for given in [None, Some("trace"), Some("sqlx_postgres=trace"), Some("sqlx_postgres::options=trace")] {
            assert!(shown(given).contains("sqlx_postgres::options=off"), "{}", shown(given));
            assert_eq!(shown(given).matches("sqlx_postgres::options").count(), 1, "{}", shown(given));
        }
    }
}
