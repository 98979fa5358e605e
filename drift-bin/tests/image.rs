//! The detector's image, as `scripts/build-image` made it, tested from its own root file system:
//! unpacked with `umoci unpack` and run with `chroot` in new mount and PID namespaces (a
//! container runtime cannot run here: crun is refused rlimits and cgroups), as the image's user,
//! entrypoint, environment and working folder say. Its `drift` scans a git repository served
//! over `file://` (a Kustomize folder, so rendered by the image's kubectl) against the test API
//! server, keeps the history in a real PostgreSQL, and accepts a hand change into the repository
//! with the image's own git. Also: the labels, `drift --version`, git, ssh, helm and kubectl
//! (the pinned binaries of scripts/install-tools.sh, by sha256), the CA certificates, the
//! completions and the man page, and the name in the docker-archive for `k3s ctr images import`.
//!
//! The image is built by `scripts/test` (after the other tests) and named by `DRIFT_IMAGE_DIR`;
//! without it these tests say that they are skipped, unless `DRIFT_REQUIRE_IMAGE=1` makes that
//! a failure. They need root (chroot, unshare).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{GitRepo, SHOP, kubectl};
use drift_test_apiserver::{Options, TestApiServer};
use drift_testkit_pg::PgServer;
use serde_json::Value;

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The folder `scripts/build-image` wrote, or `None` (and a line saying the test is skipped).
fn image_dir(test: &str) -> Option<PathBuf> {
    match std::env::var_os("DRIFT_IMAGE_DIR") {
        Some(dir) if !dir.is_empty() => Some(PathBuf::from(dir)),
        _ => {
            assert!(
                std::env::var("DRIFT_REQUIRE_IMAGE").as_deref() != Ok("1"),
                "{test}: DRIFT_REQUIRE_IMAGE=1 but DRIFT_IMAGE_DIR names no image (run scripts/build-image)"
            );
            eprintln!("{test}: skipped: DRIFT_IMAGE_DIR is not set (scripts/test builds the image and sets it)");
            None
        }
    }
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}{}", lossy(&out.stdout), lossy(&out.stderr));
    out
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The image unpacked into a temporary bundle, with the runtime settings of its configuration.
struct Image {
    _bundle: tempfile::TempDir,
    rootfs: PathBuf,
    config: Value,
}

impl Image {
    fn unpack(dir: &Path) -> Image {
        let layout = dir.join("oci");
        let bundle = tempfile::Builder::new().prefix("drift-image-test-").tempdir_in("/var/tmp").unwrap();
        let target = bundle.path().join("bundle");
        run(Command::new("umoci")
            .arg("unpack")
            .arg("--image")
            .arg(format!("{}:{VERSION}", layout.display()))
            .arg(&target));
        let config = config_of(&layout, VERSION);
        Image { rootfs: target.join("rootfs"), _bundle: bundle, config }
    }

    fn runtime(&self) -> &Value {
        &self.config["config"]
    }

    /// A path of the root file system, as seen from outside.
    fn path(&self, inside: &str) -> PathBuf {
        self.rootfs.join(inside.trim_start_matches('/'))
    }

    /// `PROGRAM ARGS` in the image as its user, in its working folder, with its environment
    /// (and `env`), in new mount and PID namespaces with the image's own /proc.
    fn exec(&self, program: &[&str], env: &[(&str, &str)]) -> Output {
        let rt = self.runtime();
        let user = rt["User"].as_str().unwrap();
        let workdir = rt["WorkingDir"].as_str().unwrap_or("/");
        let mut c = Command::new("unshare");
        c.args(["--mount", "--pid", "--fork", "--kill-child"])
            .arg(format!("--mount-proc={}", self.path("/proc").display()))
            .arg("chroot")
            .arg(format!("--userspec={user}"))
            .arg(&self.rootfs)
            .args(["/usr/bin/env", "-i", "-C", workdir]);
        for e in rt["Env"].as_array().unwrap() {
            c.arg(e.as_str().unwrap());
        }
        for (k, v) in env {
            c.arg(format!("{k}={v}"));
        }
        c.args(program).stdin(Stdio::null());
        c.output().unwrap()
    }

    /// The entrypoint with `args`: exit code, stdout, stderr.
    fn drift(&self, args: &[&str]) -> (i32, String, String) {
        let entry: Vec<&str> =
            self.runtime()["Entrypoint"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        let program: Vec<&str> = entry.into_iter().chain(args.iter().copied()).collect();
        let out = self.exec(&program, &[("NO_COLOR", "1")]);
        (out.status.code().unwrap_or(-1), lossy(&out.stdout), lossy(&out.stderr))
    }

    /// A command of the image that must succeed: its stdout and stderr.
    fn must(&self, program: &[&str], env: &[(&str, &str)]) -> String {
        let out = self.exec(program, env);
        assert!(out.status.success(), "{program:?} in the image: {}{}", lossy(&out.stdout), lossy(&out.stderr));
        format!("{}{}", lossy(&out.stdout), lossy(&out.stderr))
    }
}

/// The image configuration of tag `tag` of an OCI layout (index, manifest, config blob).
fn config_of(layout: &Path, tag: &str) -> Value {
    let blob = |digest: &str| -> Value {
        let (algo, hex) = digest.split_once(':').unwrap();
        serde_json::from_slice(&std::fs::read(layout.join("blobs").join(algo).join(hex)).unwrap()).unwrap()
    };
    let index: Value = serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    let m = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["annotations"]["org.opencontainers.image.ref.name"] == tag)
        .unwrap_or_else(|| panic!("no tag {tag} in {index}"));
    let manifest = blob(m["digest"].as_str().unwrap());
    let mut config = blob(manifest["config"]["digest"].as_str().unwrap());
    config["manifest_annotations"] = manifest["annotations"].clone();
    config
}

/// `VAR="value"` of scripts/install-tools.sh: the pins the image's tools must match.
fn pin(var: &str) -> String {
    let script = std::fs::read_to_string(workspace().join("scripts/install-tools.sh")).unwrap();
    let line = script.lines().find(|l| l.starts_with(&format!("{var}="))).unwrap_or_else(|| panic!("no {var}"));
    line.split('"').nth(1).unwrap().to_owned()
}

fn sha256(path: &Path) -> String {
    let out = run(Command::new("sha256sum").arg(path));
    lossy(&out.stdout).split_whitespace().next().unwrap().to_owned()
}

fn size_of(path: &Path) -> u64 {
    let out = run(Command::new("du").args(["-sb", "--apparent-size"]).arg(path));
    lossy(&out.stdout).split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn the_image_is_labelled_runs_as_65532_and_holds_drift_git_ssh_helm_and_kubectl() {
    let Some(dir) = image_dir("the_image_is_labelled_runs_as_65532_and_holds_drift_git_ssh_helm_and_kubectl") else {
        return;
    };
    let image = Image::unpack(&dir);
    eprintln!("image unpacked: {} bytes in its root file system", size_of(&image.rootfs));

    // The runtime settings and the labels (annotations of the manifest too).
    let rt = image.runtime();
    assert_eq!(rt["User"], "65532:65532", "{rt}");
    assert_eq!(rt["Entrypoint"], serde_json::json!(["/usr/local/bin/drift"]), "{rt}");
    assert_eq!(rt["Cmd"], serde_json::json!(["serve", "--config", "/etc/drift/drift.yaml"]), "{rt}");
    for labels in [&rt["Labels"], &image.config["manifest_annotations"]] {
        assert_eq!(labels["org.opencontainers.image.version"], VERSION, "{labels}");
        // The workspace's `repository`; none when it names none (scripts/build-image says so).
        match env!("CARGO_PKG_REPOSITORY") {
            "" => assert!(labels.get("org.opencontainers.image.source").is_none(), "{labels}"),
            source => assert_eq!(labels["org.opencontainers.image.source"], source, "{labels}"),
        }
        let revision = labels["org.opencontainers.image.revision"].as_str().unwrap();
        assert!(revision.len() == 40 && revision.bytes().all(|b| b.is_ascii_hexdigit()), "{labels}");
        // A commit of this repository (the tree the image was built from).
        run(Command::new("git").arg("-C").arg(workspace()).args(["cat-file", "-e", &format!("{revision}^{{commit}}")]));
    }

    // Its own drift, as its user.
    let (code, out, err) = image.drift(&["--version"]);
    assert_eq!((code, out.as_str()), (0, format!("drift {VERSION}\n").as_str()), "{err}");
    assert_eq!(image.must(&["id", "-u"], &[]), "65532\n");
    assert_eq!(image.must(&["id", "-un"], &[]), "drift\n");

    // The tools the renderers and an accept shell out to.
    assert!(image.must(&["git", "--version"], &[]).starts_with("git version 2."));
    assert!(image.must(&["ssh", "-V"], &[]).starts_with("OpenSSH_"));
    let helm = image.must(&["helm", "version", "--short"], &[]);
    let kubectl = image.must(&["kubectl", "version", "--client"], &[]);
    assert!(helm.starts_with("v3."), "{helm}");
    assert!(kubectl.contains("Client Version: v1.") && kubectl.contains("Kustomize Version: v5."), "{kubectl}");
    assert_eq!(sha256(&image.path("/usr/local/bin/helm")), pin("HELM_SHA256"));
    assert_eq!(sha256(&image.path("/usr/local/bin/kubectl")), pin("KUBECTL_SHA256"));
    let cas = std::fs::read_to_string(image.path("/etc/ssl/certs/ca-certificates.crt")).unwrap();
    assert!(cas.matches("BEGIN CERTIFICATE").count() > 50, "the CA bundle");

    // Completions and the man page, generated by the binary, once it has the commands.
    let (_, help, _) = image.drift(&["--help"]);
    if help.contains("completions") {
        let (code, bash, err) = image.drift(&["completions", "bash"]);
        assert_eq!(code, 0, "{err}");
        let installed = std::fs::read_to_string(image.path("/usr/share/bash-completion/completions/drift")).unwrap();
        assert_eq!(installed, bash, "the installed bash completion is the binary's");
    } else {
        eprintln!("this drift has no completions command yet: none installed, none checked");
    }
    if help.lines().any(|l| l.trim_start().starts_with("man ")) {
        let page = image.must(&["man", "drift"], &[("MANPAGER", "cat"), ("MANWIDTH", "80"), ("LANG", "C.UTF-8")]);
        assert!(page.contains("drift") && page.contains("scan"), "{page}");
        // A page per subcommand too.
        let page = image.must(&["man", "drift-scan"], &[("MANPAGER", "cat"), ("MANWIDTH", "80"), ("LANG", "C.UTF-8")]);
        assert!(page.contains("drift-scan") && page.contains("config"), "{page}");
    } else {
        eprintln!("this drift has no man command yet: no page installed, none checked");
    }

    // The archive for `k3s ctr images import` carries the chart's image name.
    let name = lossy(&run(Command::new(workspace().join("scripts/build-image")).arg("--print-name")).stdout);
    assert_eq!(name.trim(), format!("drift-detector:{VERSION}"));
    let archive = dir.join(format!("drift-detector-{VERSION}.tar"));
    let manifest = run(Command::new("tar").arg("-xOf").arg(&archive).arg("manifest.json"));
    let manifest: Value = serde_json::from_slice(&manifest.stdout).unwrap();
    // Written in its normalised form, the one containerd and the kubelet read the chart's
    // `drift-detector:VERSION` as.
    assert_eq!(
        manifest[0]["RepoTags"],
        serde_json::json!([format!("docker.io/library/{}", name.trim())]),
        "{manifest}"
    );
    eprintln!("docker-archive {}: {} bytes", archive.display(), std::fs::metadata(&archive).unwrap().len());
}

/// The shop fixture as a Kustomize folder `apps/`: rendered by `kubectl kustomize` (the image
/// has no standalone kustomize).
fn kustomize_shop(repo: &GitRepo) {
    for (name, text) in SHOP {
        repo.write(&format!("apps/{name}"), text);
    }
    let resources: Vec<String> = SHOP.iter().map(|(name, _)| format!("  - {name}\n")).collect();
    repo.write(
        "apps/kustomization.yaml",
        &format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n{}",
            resources.concat()
        ),
    );
    repo.commit("shop: web, as a Kustomize folder");
}

#[test]
fn the_image_scans_a_repository_over_file_and_accepts_a_change_into_it_with_its_own_git() {
    let Some(dir) = image_dir("the_image_scans_a_repository_over_file_and_accepts_a_change_into_it_with_its_own_git")
    else {
        return;
    };
    let image = Image::unpack(&dir);
    let server = TestApiServer::start(Options::default()).unwrap();
    let pg = PgServer::start().unwrap();
    let db = tokio::runtime::Runtime::new().unwrap().block_on(pg.create_database()).unwrap();
    let host_home = tempfile::tempdir().unwrap();

    // Everything the image's drift reads lives in /work of its root file system.
    let work = image.path("/work");
    let repo = GitRepo::init(work.join("repo"));
    kustomize_shop(&repo);
    kubectl(
        server.kubeconfig_path(),
        host_home.path(),
        &["apply", "-k", work.join("repo/apps").to_str().unwrap()],
        &[],
    );
    common::edit_configmap(server.kubeconfig_path(), host_home.path(), "fast", "slow");
    std::fs::copy(server.kubeconfig_path(), work.join("kubeconfig")).unwrap();
    std::fs::write(
        work.join("drift.yaml"),
        format!(
            "cluster: image\ninterval: 1h\nwatch: false\nstore: {db}\n\
             live:\n  kubeconfig: /work/kubeconfig\n\
             repositories:\n  - name: shop\n    url: file:///work/repo\n    ref: main\n    path: apps\n    cache_dir: /work/cache\n"
        ),
    )
    .unwrap();
    run(Command::new("chown").args(["-R", "65532:65532"]).arg(&work));

    let (code, out, err) = image.drift(&["scan", "--config", "/work/drift.yaml"]);
    assert_eq!(code, 1, "drift found: {out}{err}");
    assert!(out.contains("ConfigMap shop/settings") && out.contains("data.mode"), "{out}{err}");
    assert!(!err.contains("WARN") && !out.contains("warning"), "a clean scan (the overlay rendered): {out}{err}");

    let (code, list, err) =
        image.drift(&["drifts", "list", "--status", "open", "-o", "json", "--config", "/work/drift.yaml"]);
    assert_eq!(code, 0, "{err}");
    let list: Value = serde_json::from_str(&list).unwrap();
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{list}");
    assert_eq!((items[0]["resource_kind"].as_str(), items[0]["path"].as_str()), (Some("ConfigMap"), Some("data.mode")));
    let id = items[0]["id"].to_string();

    // The accept clones, commits and pushes with the image's git, as user 65532.
    let (code, out, err) = image.drift(&["fix", &id, "--accept", "--config", "/work/drift.yaml"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("branch drift/accept/configmap-settings-"), "{out}");
    let branch = out.split_whitespace().nth(1).unwrap().to_owned();
    let host_git = |args: &[&str]| -> String {
        let out = run(Command::new("git").args(["-c", "safe.directory=*", "-C"]).arg(&repo.dir).args(args));
        lossy(&out.stdout)
    };
    let file = host_git(&["show", &format!("{branch}:apps/web/configmap.yaml")]);
    assert!(file.contains("mode: slow") && !file.contains("mode: fast"), "{file}");
    assert_eq!(host_git(&["diff", "--name-only", &format!("main...{branch}")]), "apps/web/configmap.yaml\n");
    assert_eq!(
        host_git(&["rev-parse", "main"]),
        host_git(&["rev-parse", &format!("{branch}~1")]),
        "one commit on main"
    );
}
