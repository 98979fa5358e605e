//! Every pair of the corpus' `pairs/` (the folder `DRIFT_CORPUS` names, see
//! [`drift_testkit::corpus`]) through the engine: in-sync pairs give no drift, the others give
//! their expected differing fields (docs/architecture.md, section 3).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path as FsPath;

use drift_core::ignore::IgnoreRule;
use drift_core::manifest::parse_manifests;
use drift_core::matching::settle_namespaces;
use drift_core::scan::{ScanOptions, place_namespaces};
use drift_core::{Engine, EngineConfig, Resource};
use serde_json::Value;

fn load(dir: &FsPath, stem: &str) -> Vec<Resource> {
    for ext in ["yaml", "json"] {
        let p = dir.join(format!("{stem}.{ext}"));
        if let Ok(text) = std::fs::read_to_string(&p) {
            let parsed = parse_manifests(&text, &p.display().to_string());
            assert!(parsed.warnings.iter().all(|w| !w.fatal), "{}: {:?}", p.display(), parsed.warnings);
            return parsed.resources;
        }
    }
    panic!("no {stem} in {}", dir.display())
}

/// `a` is `b`, or under it, or above it (a whole list or item that holds it).
fn related(a: &str, b: &str) -> bool {
    let under = |x: &str, y: &str| x == y || x.starts_with(&format!("{y}.")) || x.starts_with(&format!("{y}["));
    under(a, b) || under(b, a)
}

/// Paths found by the engine, list items by desired index (the form `expect.json` uses).
fn found(engine: &Engine, dir: &FsPath) -> Vec<String> {
    // Objects are matched as `drift diff --desired --live` (without `-n`) matches them.
    let mut desired = load(dir, "desired");
    let mut live = load(dir, "live");
    let settled = settle_namespaces(&mut desired, &mut live, None);
    assert!(settled.warnings.iter().all(|w| !w.fatal), "{}: {:?}", dir.display(), settled.warnings);
    let mut options = ScanOptions::new("corpus");
    options.cluster_scoped = settled.cluster_scoped;
    place_namespaces(&mut desired, &options);
    let mut out = Vec::new();
    for d in &desired {
        let l = live.iter().find(|l| l.key == d.key);
        for (path, drift) in engine.compare_paths(d, l) {
            assert!(!drift.path.is_empty() || l.is_none());
            out.push(path.to_index_form());
        }
    }
    out
}

fn check(name: &str, engine: &Engine, expected: &[String], dir: &FsPath) -> Result<(), String> {
    let got = found(engine, dir);
    let missing: Vec<_> = expected.iter().filter(|e| !got.iter().any(|g| related(g, e))).collect();
    let extra: Vec<_> = got.iter().filter(|g| !expected.iter().any(|e| related(g, e))).collect();
    if missing.is_empty() && extra.is_empty() {
        Ok(())
    } else {
        Err(format!("{name}: missing {missing:?}, unexpected {extra:?} (found {got:?})"))
    }
}

#[test]
fn every_corpus_pair_gives_its_expected_drifts() {
    let Some(pairs) = drift_testkit::corpus::dir("every_corpus_pair_gives_its_expected_drifts", "pairs") else {
        return;
    };
    let mut failures = Vec::new();
    let mut checked = 0;
    let mut entries: Vec<_> = std::fs::read_dir(pairs).expect("corpus pairs readable").flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let dir = entry.path();
        let name = entry.file_name().to_string_lossy().to_string();
        let Ok(text) = std::fs::read_to_string(dir.join("expect.json")) else { continue };
        let expect: Value = serde_json::from_str(&text).unwrap();
        let expected: Vec<String> = if expect["in_sync"].as_bool() == Some(true) {
            Vec::new()
        } else {
            expect["differing_fields"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect()
        };
        checked += 1;
        let engine = Engine::default();
        // No pair is excused: the engine agrees with every expectation of the corpus.
        if let Err(e) = check(&name, &engine, &expected, &dir) {
            failures.push(e);
        }
        // With the pair's JSON-pointer ignore rules, the ignored fields disappear and the rest stay.
        if let Some(rules) = expect["ignore_rules"].as_array() {
            let ignore: Vec<IgnoreRule> = rules
                .iter()
                .filter(|r| r.get("jsonPointers").is_some())
                .map(|r| IgnoreRule {
                    group: r["group"].as_str().map(str::to_owned),
                    kind: r["kind"].as_str().map(str::to_owned),
                    json_pointers: r["jsonPointers"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|p| p.as_str().unwrap().to_owned())
                        .collect(),
                    ..Default::default()
                })
                .collect();
            if ignore.is_empty() {
                continue;
            }
            let pointers: Vec<String> = ignore.iter().flat_map(|r| r.json_pointers.clone()).collect();
            let remaining: Vec<String> = expected
                .iter()
                .filter(|e| !pointers.iter().any(|p| p.trim_start_matches('/').replace('/', ".") == **e))
                .cloned()
                .collect();
            assert!(remaining.len() < expected.len(), "{name}: the ignore rule removes a field");
            let engine = Engine::new(&EngineConfig { ignore, ..Default::default() }).unwrap();
            if let Err(e) = check(&format!("{name} (with ignore rules)"), &engine, &remaining, &dir) {
                failures.push(e);
            }
        }
    }
    assert!(checked >= 18, "only {checked} pairs found");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
