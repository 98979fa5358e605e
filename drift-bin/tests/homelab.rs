//! The homelab install as docs/deployment.md writes it (issue 32, item 2):
//!
//! - the chart (default and homelab values) and the Kustomize base run exactly the image
//!   `scripts/build-image` makes, `drift-detector:` and the crate's version;
//! - Grafana's provisioned data source reaches the bundled PostgreSQL with its own settings: the
//!   file is read, its `$__env{...}` filled in as Grafana does, and psql (libpq, whose `sslmode`
//!   Grafana's driver follows) connects with exactly that user, database, password and `sslmode`
//!   to a real PostgreSQL set up as the chart's is (the official image: no TLS, passwords by
//!   SCRAM), as the read-only role of deploy/grafana/grafana-role.sql, and reads the drifts;
//! - the walk-through "A homelab from nothing" runs: every ```sh block of it, in order, against
//!   the test API server and a registry on loopback (the ```sh k3s blocks need a K3s node and
//!   are listed, not run). That one needs the image's build tools and runs where `scripts/test`
//!   builds the image (`DRIFT_IMAGE_DIR`), like drift-bin/tests/image.rs.
//!
//! Without helm, psql or the PostgreSQL server the tests say that they are skipped, unless
//! `DRIFT_REQUIRE_TOOLS=1` (set by `scripts/test`) makes that a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::chart::{find, objects};
use drift_test_apiserver::{Options, TestApiServer};
use drift_testkit_pg::PgServer;
use serde_json::Value;

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().unwrap()
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn must(cmd: &mut Command) -> String {
    let out = cmd.stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}{}", lossy(&out.stdout), lossy(&out.stderr));
    lossy(&out.stdout)
}

/// `helm template drift deploy/helm/drift -n drift -f VALUES...`.
fn template(home: &Path, values: &[&str]) -> Vec<Value> {
    let chart = workspace().join("deploy/helm/drift");
    let mut args = vec!["template", "drift", chart.to_str().unwrap(), "--namespace", "drift"];
    let files: Vec<String> = values.iter().map(|v| chart.join(v).display().to_string()).collect();
    for f in &files {
        args.extend(["--values", f.as_str()]);
    }
    let out = common::chart::helm(home, None, &args);
    assert!(out.status.success(), "helm template {values:?}: {}", lossy(&out.stderr));
    objects(&lossy(&out.stdout))
}

/// The image name `scripts/build-image` gives the image it makes.
fn built_name() -> String {
    must(Command::new(workspace().join("scripts/build-image")).arg("--print-name")).trim().to_owned()
}

#[test]
fn the_chart_and_the_kustomize_base_run_the_image_scripts_build_image_makes() {
    let test = "the_chart_and_the_kustomize_base_run_the_image_scripts_build_image_makes";
    if !drift_testkit::charts::helm_available(test) {
        return;
    }
    let name = built_name();
    assert_eq!(name, format!("drift-detector:{VERSION}"), "the image is named by the crate's version");
    let chart: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(workspace().join("deploy/helm/drift/Chart.yaml")).unwrap())
            .unwrap();
    assert_eq!(chart["appVersion"], VERSION, "the chart's appVersion is the crate's version");

    let home = tempfile::tempdir().unwrap();
    for values in [&[][..], &["values-homelab.yaml"][..]] {
        let objects = template(home.path(), values);
        let container = &find(&objects, "Deployment", "drift")["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["name"], "drift");
        assert_eq!(container["image"], name.as_str(), "helm template with {values:?}");
        assert_eq!(container["imagePullPolicy"], "IfNotPresent", "an imported image is used as it is");
    }
    let kustomized = must(
        Command::new("kubectl").args(["kustomize"]).arg(workspace().join("deploy/kubernetes")).env("HOME", home.path()),
    );
    let objects = objects(&kustomized);
    let container = &find(&objects, "Deployment", "drift-detector")["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], name.as_str(), "deploy/kubernetes");
}

/// What Grafana does with `$__env{NAME}` in a provisioning file: the variable's value.
fn grafana_env(value: &Value, env: &BTreeMap<&str, String>) -> String {
    let mut text = value.as_str().unwrap_or_else(|| panic!("a string: {value}")).to_owned();
    while let Some(start) = text.find("$__env{") {
        let end = start + text[start..].find('}').unwrap();
        let var = &text[start + "$__env{".len()..end];
        let v = env.get(var).unwrap_or_else(|| panic!("Grafana's environment has no {var}"));
        text.replace_range(start..=end, v);
    }
    text
}

/// `psql` as Grafana connects with the data source `ds` (its settings after `$__env` is filled
/// in), `sslmode` replaced when given: the output of `sql`, or libpq's refusal.
fn psql_as_grafana(
    ds: &Value,
    env: &BTreeMap<&str, String>,
    sslmode: Option<&str>,
    sql: &str,
) -> Result<String, String> {
    let url = grafana_env(&ds["url"], env);
    let (host, port) = url.rsplit_once(':').unwrap_or((url.as_str(), "5432"));
    let json = &ds["jsonData"];
    let sslmode = sslmode.map_or_else(|| json["sslmode"].as_str().unwrap().to_owned(), str::to_owned);
    let out = Command::new("psql")
        .args(["--no-psqlrc", "--tuples-only", "--no-align", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("PGHOST", host)
        .env("PGPORT", port)
        .env("PGDATABASE", grafana_env(&json["database"], env))
        .env("PGUSER", ds["user"].as_str().unwrap())
        .env("PGPASSWORD", grafana_env(&ds["secureJsonData"]["password"], env))
        .env("PGSSLMODE", sslmode)
        .env("PGCONNECT_TIMEOUT", "20")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    if out.status.success() { Ok(lossy(&out.stdout)) } else { Err(lossy(&out.stderr)) }
}

fn psql_available(test: &str) -> bool {
    drift_testkit::charts::tool_available("psql", test, "Debian package postgresql-client")
}

/// A file readable by the PostgreSQL server's user (it runs as `postgres` or `nobody` when the
/// tests run as root), in a folder of /tmp.
fn server_file(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

/// A PostgreSQL with `settings` and the client rules `hba`, the detector's tables, and the role
/// of deploy/grafana/grafana-role.sql with a password; and Grafana's environment for it, as
/// docs/deployment.md says: host and port, database, password. `None` when no server is
/// installed and the tools are not required.
fn grafana_database(
    test: &str,
    hba: &str,
    settings: &[(&str, &str)],
    dir: &Path,
) -> Option<(PgServer, BTreeMap<&'static str, String>)> {
    let hba = server_file(dir, "pg_hba.conf", hba, 0o644);
    let mut all = vec![("hba_file", hba.to_str().unwrap())];
    all.extend_from_slice(settings);
    let server = match PgServer::start_with_settings(&all) {
        Ok(s) => s,
        Err(drift_testkit_pg::HarnessError::NotInstalled)
            if std::env::var("DRIFT_REQUIRE_TOOLS").as_deref() != Ok("1") =>
        {
            eprintln!("{test}: skipped: no PostgreSQL server (scripts/install-postgres.sh)");
            return None;
        }
        Err(e) => panic!("{e}"),
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let url = rt.block_on(server.create_database()).unwrap();
    let database = url.rsplit('/').next().unwrap().to_owned();
    rt.block_on(drift_postgres::PostgresStore::from_config(&drift_postgres::PostgresConfig::new(&url))).unwrap();
    let admin = |args: &[&str]| {
        must(
            Command::new("psql")
                .args(["--no-psqlrc", "-v", "ON_ERROR_STOP=1", "-d", &url])
                .args(args)
                .env("PGSSLMODE", "prefer"),
        )
    };
    admin(&["-f", workspace().join("deploy/grafana/grafana-role.sql").to_str().unwrap()]);
    let password = "homelab-grafana-pw-5c1e";
    admin(&["-c", &format!("ALTER ROLE drift_grafana PASSWORD '{password}'")]);
    let mut env = BTreeMap::new();
    env.insert("DRIFT_GRAFANA_DB_HOST", format!("127.0.0.1:{}", server.port()));
    env.insert("DRIFT_GRAFANA_DB_NAME", database);
    env.insert("DRIFT_GRAFANA_DB_PASSWORD", password.to_owned());
    Some((server, env))
}

/// The provisioned data source (deploy/grafana/provisioning/datasources/drift-postgres.yaml).
fn data_source() -> Value {
    let file = workspace().join("deploy/grafana/provisioning/datasources/drift-postgres.yaml");
    let sources: Value = serde_saphyr::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    sources["datasources"][0].clone()
}

#[test]
fn grafana_reaches_the_bundled_postgresql_with_the_provisioned_data_source_settings() {
    let test = "grafana_reaches_the_bundled_postgresql_with_the_provisioned_data_source_settings";
    if !drift_testkit::charts::helm_available(test) || !psql_available(test) {
        return;
    }
    // The bundled PostgreSQL of the homelab profile: the official image with no TLS settings
    // (its default is ssl=off) and SCRAM passwords for every TCP client (its pg_hba.conf).
    let home = tempfile::tempdir().unwrap();
    let objects = template(home.path(), &["values-homelab.yaml"]);
    let pod = &find(&objects, "StatefulSet", "drift-postgresql")["spec"]["template"]["spec"];
    assert!(!pod.to_string().to_lowercase().contains("ssl"), "the bundled PostgreSQL turns no TLS on: {pod}");
    assert!(pod["containers"][0]["image"].as_str().unwrap().contains("postgres:"), "{pod}");
    let dir = tempfile::Builder::new().prefix("drift-homelab-pg-").tempdir_in("/tmp").unwrap();
    let hba = "local all all trust\nhost all postgres 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\n";
    let Some((_server, env)) = grafana_database(test, hba, &[("ssl", "off")], dir.path()) else { return };

    let ds = data_source();
    let count = psql_as_grafana(&ds, &env, None, "select count(*) from drifts");
    assert_eq!(count.as_deref().map(str::trim), Ok("0"), "the data source's settings connect: {count:?}");
    // The connection is real: a wrong password is refused, and so is a data source that asks
    // for TLS from a server without it (the mismatch issue 32 found).
    let mut wrong = env.clone();
    wrong.insert("DRIFT_GRAFANA_DB_PASSWORD", "not-the-password".into());
    let refused = psql_as_grafana(&ds, &wrong, None, "select 1").unwrap_err();
    assert!(refused.contains("password authentication failed"), "{refused}");
    let refused = psql_as_grafana(&ds, &env, Some("require"), "select 1").unwrap_err();
    assert!(refused.contains("server does not support SSL"), "{refused}");
    // And it only reads.
    let write = psql_as_grafana(&ds, &env, None, "delete from drifts").unwrap_err();
    assert!(write.contains("permission denied") || write.contains("read-only"), "{write}");
}

/// TLS on, both sides, as docs/grafana.md says: a PostgreSQL with a certificate that takes
/// Grafana's role over TLS only, and the data source with `sslmode: require`.
#[test]
fn with_tls_on_the_server_the_data_source_connects_with_sslmode_require() {
    let test = "with_tls_on_the_server_the_data_source_connects_with_sslmode_require";
    if !psql_available(test) || !drift_testkit::charts::tool_available("openssl", test, "Debian package openssl") {
        return;
    }
    let dir = tempfile::Builder::new().prefix("drift-homelab-tls-").tempdir_in("/tmp").unwrap();
    let (key, crt) = (dir.path().join("server.key"), dir.path().join("server.crt"));
    must(
        Command::new("openssl")
            .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&crt),
    );
    // The key belongs to the server's user, readable by it alone (PostgreSQL refuses it otherwise).
    let owner = ["postgres", "nobody"]
        .iter()
        .find_map(|u| Command::new("id").arg("-u").arg(u).output().ok().filter(|o| o.status.success()))
        .map(|o| lossy(&o.stdout).trim().to_owned());
    let root = lossy(&Command::new("id").arg("-u").output().unwrap().stdout).trim() == "0";
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&crt, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    if root {
        must(Command::new("chown").arg(owner.unwrap()).arg(&key));
    }
    let hba = "local all all trust\nhost all postgres 127.0.0.1/32 trust\nhostssl all all 127.0.0.1/32 scram-sha-256\n";
    let settings = [("ssl", "on"), ("ssl_cert_file", crt.to_str().unwrap()), ("ssl_key_file", key.to_str().unwrap())];
    let Some((_server, env)) = grafana_database(test, hba, &settings, dir.path()) else { return };
    let ds = data_source();
    let count = psql_as_grafana(&ds, &env, Some("require"), "select count(*) from drifts");
    assert_eq!(count.as_deref().map(str::trim), Ok("0"), "{count:?}");
    let refused = psql_as_grafana(&ds, &env, Some("disable"), "select 1").unwrap_err();
    assert!(refused.contains("no encryption"), "without TLS Grafana's role is refused: {refused}");
}

/// The ```sh blocks of the section "A homelab from nothing" of docs/deployment.md, in order,
/// and the number of ```sh k3s blocks (not run here).
fn walkthrough() -> (Vec<String>, usize) {
    let doc = std::fs::read_to_string(workspace().join("docs/deployment.md")).unwrap();
    let start = doc.find("\n## A homelab from nothing\n").expect("docs/deployment.md has the walk-through");
    let rest = &doc[start + 1..];
    let section = &rest[..rest[3..].find("\n## ").map_or(rest.len(), |e| e + 3)];
    let (mut run, mut k3s, mut block, mut lang) = (Vec::new(), 0, None::<String>, String::new());
    for line in section.lines() {
        match (&mut block, line.strip_prefix("```")) {
            (None, Some(info)) => {
                lang = info.trim().to_owned();
                block = Some(String::new());
            }
            (Some(text), Some("")) => {
                match lang.as_str() {
                    "sh" => run.push(std::mem::take(text)),
                    "sh k3s" => k3s += 1,
                    "yaml" | "text" => {}
                    other => panic!(
                        "a block of the walk-through is ```sh (run by this test), ```sh k3s, yaml or text, not ```{other}"
                    ),
                }
                block = None;
            }
            (Some(text), _) => {
                text.push_str(line);
                text.push('\n');
            }
            (None, None) => {}
        }
    }
    assert!(block.is_none(), "an unclosed block in the walk-through");
    (run, k3s)
}

#[test]
fn the_walkthrough_a_homelab_from_nothing_runs_as_written() {
    let test = "the_walkthrough_a_homelab_from_nothing_runs_as_written";
    let (blocks, k3s) = walkthrough();
    assert!(blocks.len() >= 4 && k3s >= 2, "{} blocks run, {k3s} for K3s", blocks.len());
    if std::env::var_os("DRIFT_IMAGE_DIR").is_none_or(|d| d.is_empty()) {
        assert!(
            std::env::var("DRIFT_REQUIRE_IMAGE").as_deref() != Ok("1"),
            "{test}: DRIFT_REQUIRE_IMAGE=1 but DRIFT_IMAGE_DIR is not set"
        );
        eprintln!(
            "{test}: skipped: it builds the image, which scripts/test does after the other tests (DRIFT_IMAGE_DIR)"
        );
        return;
    }
    if !drift_testkit::charts::helm_available(test) || !drift_testkit::charts::registry_available(test) {
        return;
    }
    let server = TestApiServer::start(Options::default()).unwrap();
    let registry = drift_testkit::charts::Registry::start(None);
    let home = tempfile::tempdir().unwrap();
    // Its own image folder: the image tests read the one scripts/test built meanwhile.
    let images = tempfile::Builder::new().prefix("drift-homelab-image-").tempdir_in("/var/tmp").unwrap();
    let script = format!("set -euo pipefail\n{}", blocks.join("\n"));
    eprintln!("running {} blocks of the walk-through ({k3s} for K3s are not run here)", blocks.len());
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(workspace())
        .env("KUBECONFIG", server.kubeconfig_path())
        .env("HOME", home.path())
        .env("HELM_CONFIG_HOME", home.path().join("helm/config"))
        .env("HELM_CACHE_HOME", home.path().join("helm/cache"))
        .env("HELM_DATA_HOME", home.path().join("helm/data"))
        .env("DRIFT_IMAGE_DIR", images.path())
        .env("REGISTRY", &registry.host)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = (lossy(&out.stdout), lossy(&out.stderr));
    assert!(out.status.success(), "the walk-through failed:\n{script}\n--- stdout\n{stdout}\n--- stderr\n{stderr}");
    eprintln!("{stdout}");

    // What it left: the image in the registry, the release running that image.
    let name = built_name();
    let (repo, tag) = name.split_once(':').unwrap();
    let tags = common::http(&registry.host, "GET", &format!("/v2/{repo}/tags/list"), None);
    assert_eq!(tags.0, 200, "{tags:?}");
    assert!(tags.1.contains(&format!("\"{tag}\"")), "{tags:?}");
    let deployment = common::kubectl(
        server.kubeconfig_path(),
        home.path(),
        &["-n", "drift", "get", "deployment", "drift", "-o", "jsonpath={.spec.template.spec.containers[0].image}"],
        &[],
    );
    assert_eq!(deployment, name);
}
