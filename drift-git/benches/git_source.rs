//! Benchmarks of the Git source (results in docs/benchmarks.md, section "Git source"):
//! - a repository of 10,000 manifests: cold clone + parse, unchanged-commit rescan, a new
//!   commit that changes one file, and the folder source's rescan;
//! - Kustomize render time of the corpus overlays (`kubectl kustomize`), uncached.
//!
//! Run: `DRIFT_CORPUS=$PWD/../shared/corpus cargo bench -p drift-git --bench git_source`
//! (without `DRIFT_CORPUS`, the Kustomize group is skipped).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use drift_core::source::DesiredSource;
use drift_git::{FolderConfig, FolderSource, GitConfig, GitSource};

const FILES: usize = 10_000;

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .args(["-c", "user.name=bench", "-c", "user.email=bench@example.com", "-c", "init.defaultBranch=main"])
        .args(args)
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

fn manifest(i: usize) -> String {
    if i.is_multiple_of(2) {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings-{i}\n  namespace: team-{}\n  labels: {{app: app-{i}, tier: backend}}\ndata:\n  LOG_LEVEL: info\n  FEATURE_X: \"true\"\n  ENDPOINT: http://svc-{i}.team-{}.svc:8080\n",
            i % 50,
            i % 50
        )
    } else {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app-{i}\n  namespace: team-{}\nspec:\n  replicas: 2\n  selector:\n    matchLabels: {{app: app-{i}}}\n  template:\n    metadata:\n      labels: {{app: app-{i}}}\n    spec:\n      containers:\n        - name: app\n          image: registry.example.com/app:{i}\n          ports: [{{containerPort: 8080}}]\n          resources: {{requests: {{cpu: 100m, memory: 128Mi}}}}\n",
            i % 50
        )
    }
}

/// A bare repository with FILES manifests in 100 folders, and its working clone.
fn big_repo(root: &Path) -> (PathBuf, PathBuf) {
    let bare = root.join("origin.git");
    let work = root.join("work");
    std::fs::create_dir_all(&bare).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    git(&bare, &["init", "-q", "--bare"]);
    git(&work, &["init", "-q"]);
    for i in 0..FILES {
        let dir = work.join(format!("apps/team-{:02}", i % 100));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("m{i:05}.yaml")), manifest(i)).unwrap();
    }
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "10k manifests"]);
    git(&work, &["push", "-q", bare.to_str().unwrap(), "main"]);
    (bare, work)
}

fn bench_repository(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let (bare, work) = big_repo(tmp.path());
    let url = format!("file://{}", bare.display());
    let mut group = c.benchmark_group("git_source_10k");
    group.sample_size(10).measurement_time(Duration::from_secs(20));

    group.bench_function("cold_clone_and_parse", |b| {
        b.iter_batched(
            || tempfile::tempdir().unwrap(),
            |cache| {
                let mut cfg = GitConfig::new(url.clone(), "main");
                cfg.cache_dir = Some(cache.path().to_path_buf());
                let snap = rt.block_on(GitSource::new(cfg).unwrap().fetch()).unwrap();
                assert_eq!(snap.resources.len(), FILES);
                cache
            },
            BatchSize::PerIteration,
        )
    });

    let cache = tempfile::tempdir().unwrap();
    let mut cfg = GitConfig::new(url.clone(), "main");
    cfg.cache_dir = Some(cache.path().to_path_buf());
    let warm = GitSource::new(cfg).unwrap();
    rt.block_on(warm.fetch()).unwrap();
    group.bench_function("unchanged_commit_rescan", |b| {
        b.iter(|| {
            let snap = rt.block_on(warm.fetch()).unwrap();
            assert_eq!(snap.resources.len(), FILES);
        })
    });

    group.bench_function("unchanged_commit_rescan_shared", |b| {
        b.iter(|| {
            let snap = rt.block_on(warm.fetch_shared()).unwrap();
            assert_eq!(snap.resources.len(), FILES);
        })
    });

    // What the trait's owned return costs by itself: one deep copy of the 10k-object snapshot.
    let snapshot = rt.block_on(warm.fetch()).unwrap();
    group.bench_function("snapshot_clone", |b| b.iter(|| snapshot.clone()));

    let mut n = 0usize;
    group.bench_function("new_commit_one_file_changed", |b| {
        b.iter_batched(
            || {
                n += 1;
                let changed = format!("{}  REVISION: \"{n}\"\n", manifest(0));
                std::fs::write(work.join("apps/team-00/m00000.yaml"), changed).unwrap();
                git(&work, &["commit", "-q", "-am", "change"]);
                git(&work, &["push", "-q", bare.to_str().unwrap(), "main"]);
            },
            |()| {
                let snap = rt.block_on(warm.fetch()).unwrap();
                assert_eq!(snap.resources.len(), FILES);
            },
            BatchSize::PerIteration,
        )
    });
    let stats = warm.stats();
    eprintln!("git source stats after the benchmarks: {stats:?}");

    let folder = FolderSource::new(FolderConfig::new(&work)).unwrap();
    rt.block_on(folder.fetch()).unwrap();
    group.bench_function("folder_unchanged_rescan", |b| {
        b.iter(|| {
            let snap = rt.block_on(folder.fetch()).unwrap();
            assert_eq!(snap.resources.len(), FILES);
        })
    });
    group.finish();
}

fn bench_kustomize(c: &mut Criterion) {
    let Some(repos) = drift_testkit::corpus::dir("kustomize_corpus", "repos") else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut group = c.benchmark_group("kustomize_corpus");
    group.sample_size(10).measurement_time(Duration::from_secs(10));
    for (repo, root, objects) in [
        ("podinfo", "kustomize", 3),
        ("podinfo", "deploy/bases/backend", 3),
        ("flux2-kustomize-helm-example", "apps/production", 3),
        ("flux2-kustomize-helm-example", "infrastructure/controllers", 6),
    ] {
        group.bench_function(format!("{repo}/{root}"), |b| {
            b.iter(|| {
                // A new source each time: no render cache, one `kubectl kustomize` per iteration.
                let mut cfg = FolderConfig::new(repos.join(repo));
                cfg.path = Some(root.to_owned());
                let snap = rt.block_on(FolderSource::new(cfg).unwrap().fetch()).unwrap();
                assert_eq!(snap.resources.len(), objects);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_repository, bench_kustomize);
criterion_main!(benches);
