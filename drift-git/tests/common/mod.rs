//! Test helpers: real git repositories made with the `git` command line.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod fake_github;
pub mod smart_http;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs git in `dir` with a fixed identity and no user or system configuration.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
        .args(["-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"])
        .args(args)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A bare "server" repository and a working clone that pushes to it.
pub struct Origin {
    pub dir: tempfile::TempDir,
    pub bare: PathBuf,
    pub work: PathBuf,
}

impl Origin {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let bare = dir.path().join("origin.git");
        let work = dir.path().join("work");
        std::fs::create_dir_all(&bare).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        git(&bare, &["init", "--bare", "-q"]);
        git(&work, &["init", "-q"]);
        git(&work, &["remote", "add", "origin", bare.to_str().unwrap()]);
        Origin { dir, bare, work }
    }

    pub fn url(&self) -> String {
        format!("file://{}", self.bare.display())
    }

    pub fn write(&self, path: &str, text: &str) {
        let p = self.work.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    pub fn remove(&self, path: &str) {
        git(&self.work, &["rm", "-q", path]);
    }

    /// Commits everything and pushes the current branch; returns the commit id.
    pub fn commit(&self, message: &str) -> String {
        git(&self.work, &["add", "-A"]);
        git(&self.work, &["commit", "-q", "-m", message]);
        let branch = git(&self.work, &["rev-parse", "--abbrev-ref", "HEAD"]);
        git(&self.work, &["push", "-q", "origin", &branch]);
        git(&self.work, &["rev-parse", "HEAD"])
    }

    pub fn head(&self) -> String {
        git(&self.work, &["rev-parse", "HEAD"])
    }

    /// A cache folder for a source, inside the test's temporary folder.
    pub fn cache(&self) -> PathBuf {
        self.dir.path().join("cache")
    }
}

pub fn configmap(name: &str, namespace: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {namespace}\ndata:\n  value: \"{value}\"\n"
    )
}

pub fn deployment(name: &str, replicas: u32) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  replicas: {replicas}\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      containers:\n        - name: app\n          image: nginx:1.27\n"
    )
}

/// Writes `text` at `path` below `root`, making its folders.
pub fn put(root: &std::path::Path, path: &str, text: &str) {
    let f = root.join(path);
    std::fs::create_dir_all(f.parent().unwrap()).unwrap();
    std::fs::write(f, text).unwrap();
}

/// Keys of a snapshot as sorted strings.
pub fn keys(snapshot: &drift_core::DesiredSnapshot) -> Vec<String> {
    let mut k: Vec<String> = snapshot.resources.iter().map(|r| r.key.to_string()).collect();
    k.sort();
    k
}

/// Installs rustls' ring provider for this test process, as the `drift` binary does in `main`:
/// the library leaves that choice to the program, and gix's HTTP transport needs one.
pub fn install_crypto_provider() {
    // An Err only means that a provider is installed already (by another test of the process).
    let _ = rustls::crypto::ring::default_provider().install_default();
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

/// The `kubectl` binary renders Kustomize (see docs/sources.md, "Renderers"); tests that render
/// Kustomize need it and fail loudly without it rather than pass vacuously. `scripts/test`
/// installs a pinned kubectl when it is missing (CONTRIBUTING.md, "Tests").
pub fn require_kubectl() {
    assert!(
        on_path("kubectl") || on_path("kustomize"),
        "kubectl or kustomize must be installed for the Kustomize tests (scripts/install-tools.sh installs kubectl)"
    );
}

#[allow(unused_imports)] // not every test binary renders charts
pub use drift_testkit::charts::helm_available;

/// The commits of [`write_revisions`]: tag `v1.0.0`, branch `release`, `main`.
#[allow(dead_code)]
pub struct Revisions {
    pub tagged: String,
    pub released: String,
    pub head: String,
}

/// A repository whose `apps/web` ConfigMap says `v1` at tag `v1.0.0`, `release` on branch
/// `release` and `main` on `main`, where Argo CD Applications (repoURL `repo_url`) track each
/// (`v1.0.0`, `refs/heads/release`, `HEAD`) and one a revision the remote lacks (`v9`), each
/// into the namespace of its name.
#[allow(dead_code)]
pub fn write_revisions(origin: &Origin, repo_url: &str) -> Revisions {
    // No namespace: each Application's destination gives it one.
    let cm =
        |value: &str| format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: web}}\ndata: {{value: {value}}}\n");
    origin.write("apps/web/cm.yaml", &cm("v1"));
    let tagged = origin.commit("v1");
    git(&origin.work, &["tag", "v1.0.0"]);
    git(&origin.work, &["push", "-q", "origin", "v1.0.0"]);
    git(&origin.work, &["checkout", "-q", "-b", "release"]);
    origin.write("apps/web/cm.yaml", &cm("release"));
    let released = origin.commit("release");
    git(&origin.work, &["checkout", "-q", "main"]);
    origin.write("apps/web/cm.yaml", &cm("main"));
    let app = |name: &str, revision: &str| {
        format!(
            "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {{name: {name}, namespace: argocd}}\nspec:\n  destination: {{namespace: {name}}}\n  source: {{repoURL: '{repo_url}', path: apps/web, targetRevision: '{revision}'}}\n---\n"
        )
    };
    origin.write(
        "argocd/apps.yaml",
        &[app("pinned", "v1.0.0"), app("candidate", "refs/heads/release"), app("current", "HEAD"), app("gone", "v9")]
            .concat(),
    );
    let head = origin.commit("main");
    Revisions { tagged, released, head }
}

/// What a source reading `main` of [`write_revisions`] gives.
#[allow(dead_code)]
pub fn check_revisions(snap: &drift_core::DesiredSnapshot, commits: &Revisions) {
    assert!(!drift_git::has_errors(snap), "{:?}", snap.warnings);
    let web = |ns: &str| {
        let r = snap
            .resources
            .iter()
            .find(|r| r.key.name == "web" && r.key.namespace.as_deref() == Some(ns))
            .unwrap_or_else(|| panic!("web in {ns}: {:?}", keys(snap)));
        (r.object["data"]["value"].as_str().unwrap().to_owned(), r.provenance.revision.clone().unwrap())
    };
    assert_eq!(web("pinned"), ("v1".to_owned(), commits.tagged.clone()));
    assert_eq!(web("candidate"), ("release".to_owned(), commits.released.clone()));
    assert_eq!(web("current"), ("main".to_owned(), commits.head.clone()));
    assert!(!keys(snap).iter().any(|k| k.contains("gone/")), "{:?}", keys(snap));
    let note = snap.warnings.iter().find(|w| w.message.contains("revision `v9` cannot be read")).expect("a note");
    assert!(!note.fatal && note.path.as_deref() == Some("argocd/apps.yaml"), "{note:?}");
}
