//! `drift diff` on files compares the live side as it is read (`compare_files_streamed`) and
//! gives the report of a whole read (`compare_files`), whatever the order the files arrive in:
//! objects without namespaces on either side (matched, ambiguous, placed by `-n`), custom kinds
//! the live side shows cluster-scoped, built-in cluster-scoped kinds given a namespace,
//! duplicates on both sides, autoscalers and their targets, waivers, a broken live file; with
//! the desired objects as trees and kept compact until compared (`KeptResource`); the live
//! objects handed over by one thread or by three at once (the pairs compared on each).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use drift_core::drift_model::tree::{ObjectTree, Tree};
use drift_core::scan::{LiveObject, LiveSink, ScanOptions, compare_files, compare_files_streamed};
use drift_core::{DesiredSnapshot, Engine, EngineConfig, ErrorKind, KeptResource, Provenance, Resource, SourceWarning};
use proptest::prelude::*;
use serde_json::json;

/// The kinds of the generated objects: (apiVersion, kind).
const KINDS: &[(&str, &str)] = &[
    ("v1", "ConfigMap"),
    ("apps/v1", "Deployment"),
    ("example.com/v1", "Widget"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("autoscaling/v2", "HorizontalPodAutoscaler"),
];
const NAMES: &[&str] = &["a", "b"];
const NAMESPACES: &[Option<&str>] = &[None, Some("x"), Some("y")];

/// One generated object: kind, name, namespace, a value that may differ between the sides, and
/// a resourceVersion on the live side.
fn object(kind: usize, name: usize, ns: usize, value: u8, live: bool) -> Resource {
    let (api_version, kind) = KINDS[kind];
    let mut meta = json!({"name": NAMES[name]});
    if let Some(ns) = NAMESPACES[ns] {
        meta["namespace"] = json!(ns);
    }
    if live {
        meta["resourceVersion"] = json!(format!("{}", 100 + value));
    } else if value == 2 {
        // Waivers in Git, one in force and one expired (the clock is `fixed_clock`).
        meta["annotations"] = json!({"drift-detector.io/waivers":
            "- {path: data.k, owner: a, reason: r, expires: 2023-12-31}\n- {path: spec.replicas, owner: a, reason: r, expires: 2023-01-01}"});
    }
    let mut o = json!({"apiVersion": api_version, "kind": kind, "metadata": meta});
    match kind {
        "ConfigMap" => o["data"] = json!({"k": format!("v{value}")}),
        "Deployment" => {
            o["spec"] = json!({"replicas": value % 3 + 1, "template": {"spec": {"containers": [{"name": "c", "image": format!("img:{value}")}]}}})
        }
        "HorizontalPodAutoscaler" => {
            o["spec"] = json!({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": NAMES[name]}, "maxReplicas": 5})
        }
        _ => o["spec"] = json!({"v": value % 2}),
    }
    Resource::from_object(o).unwrap()
}

/// `r` as read from the `i`th desired file.
fn in_file(mut r: Resource, i: usize) -> Resource {
    r.provenance.path = Some(format!("desired/{i}.yaml"));
    r.provenance.document = Some(0);
    r
}

type Spec = (usize, usize, usize, u8);

fn spec() -> impl Strategy<Value = Spec> {
    (0..KINDS.len(), 0..NAMES.len(), 0..NAMESPACES.len(), 0u8..3)
}

fn fixed_clock() -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap()
}

fn options() -> ScanOptions {
    let mut o = ScanOptions::new("diff");
    o.clock = fixed_clock;
    o
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn a_live_side_compared_as_it_is_read_gives_the_report_of_a_whole_read(
        desired in proptest::collection::vec(spec(), 0..8),
        live in proptest::collection::vec(spec(), 0..10),
        order in Just(()).prop_perturb(|_, mut rng| { let mut v: Vec<u64> = (0..10).collect(); for i in (1..v.len()).rev() { v.swap(i, (rng.next_u32() as usize) % (i + 1)); } v }),
        namespace in proptest::option::of(Just("x")),
        broken in proptest::bool::weighted(0.1),
    ) {
        let engine = Engine::new(&EngineConfig::default()).unwrap();
        let snapshot = DesiredSnapshot {
            repository: "desired".into(),
            revision: None,
            // Up to three objects a document, as the items of a `List` share theirs.
            resources: desired.iter().enumerate().map(|(i, &(k, n, ns, v))| in_file(object(k, n, ns, v, false), i / 3)).collect(),
            warnings: Vec::new(),
        };
        let live: Vec<Resource> = live.iter().map(|&(k, n, ns, v)| object(k, n, ns, v, true)).collect();
        let warnings: Vec<SourceWarning> = if broken {
            vec![SourceWarning::error(ErrorKind::InvalidInput, "broken document").at("live/9.yaml".to_owned(), Some(1), None)]
        } else {
            Vec::new()
        };

        let mut whole = compare_files(snapshot.clone(), live.clone(), warnings.clone(), namespace, &engine, &options());
        // The live objects handed over in a shuffled order, each with its place in the files.
        let read_live = |sink: &LiveSink<'_>| {
            for &i in &order {
                if let Some(r) = live.get(i as usize) {
                    sink(i, r.clone().into());
                }
            }
            warnings.clone()
        };
        // The same, handed over by three threads at once (the files parsed on several cores):
        // each thread takes every third object of the order, as a tree (as `drift diff`
        // hands over what it reads from JSON files).
        let read_threads = |sink: &LiveSink<'_>| {
            std::thread::scope(|s| {
                for t in 0..3 {
                    let (order, live) = (&order, &live);
                    s.spawn(move || {
                        for &i in order.iter().skip(t).step_by(3) {
                            if let Some(r) = live.get(i as usize) {
                                sink(i, LiveObject::Tree(ObjectTree::new(Tree::from_value(&r.object), r.provenance.clone()).unwrap()));
                            }
                        }
                    });
                }
            });
            warnings.clone()
        };
        // The desired objects as trees, and kept compact until compared.
        let kept = DesiredSnapshot {
            repository: snapshot.repository.clone(),
            revision: None,
            // (As `drift diff` makes them: the engine asked for relations while the tree is in
            // hand; the other test makes them without.)
            resources: snapshot.resources.iter().map(|r| KeptResource::asking(r, &engine)).collect(),
            warnings: Vec::new(),
        };
        // And let go of once compared, read again by where they came from when a second live
        // object of their key comes.
        let originals = snapshot.resources.clone();
        let reload = |p: &Provenance| originals.iter().filter(|r| r.provenance == *p).cloned().collect();
        let let_go = kept.clone();
        let (threads_kept, threads_let_go) = (kept.clone(), kept.clone());
        let mut threads = compare_files_streamed(snapshot.clone(), read_threads, None, namespace, &engine, &options());
        let mut streamed = compare_files_streamed(snapshot, read_live, None, namespace, &engine, &options());
        let mut compact = compare_files_streamed(kept, read_live, None, namespace, &engine, &options());
        let mut released = compare_files_streamed(let_go, read_live, Some(&reload), namespace, &engine, &options());
        let mut threads_compact = compare_files_streamed(threads_kept, read_threads, None, namespace, &engine, &options());
        let mut threads_released =
            compare_files_streamed(threads_let_go, read_threads, Some(&reload), namespace, &engine, &options());
        // Kept with a fingerprint instead of a digest, as `drift diff` keeps them: the same
        // report but for the digests.
        let fingerprinted = DesiredSnapshot {
            repository: "desired".into(),
            revision: None,
            resources: originals.iter().map(|r| KeptResource::comparing(r, &engine)).collect(),
            warnings: Vec::new(),
        };
        // (And without the live versions, which `drift diff` does not ask for.)
        let mut unversioned = options();
        unversioned.live_versions = false;
        let mut printed =
            compare_files_streamed(fingerprinted, read_threads, Some(&reload), namespace, &engine, &unversioned);
        prop_assert!(printed.live_versions.is_empty());
        prop_assert_eq!(printed.desired_digests.len(), whole.desired_digests.len());
        printed.desired_digests.clone_from(&whole.desired_digests);
        // (Versions are kept for the watch's ordering, which files do not have; a whole read
        // also notes those of objects Git does not hold.)
        whole.live_versions.clear();
        streamed.live_versions.clear();
        compact.live_versions.clear();
        released.live_versions.clear();
        threads.live_versions.clear();
        threads_compact.live_versions.clear();
        threads_released.live_versions.clear();
        prop_assert_eq!(&threads, &whole);
        prop_assert_eq!(&threads_compact, &whole);
        prop_assert_eq!(&threads_released, &whole);
        prop_assert_eq!(&printed, &whole);
        prop_assert_eq!(&streamed, &whole);
        prop_assert_eq!(&compact, &whole);
        prop_assert_eq!(released, whole);
    }
}

/// The generator reaches the cases the law is about: a desired object without a namespace
/// matched to the live one, an ambiguous one, a custom kind found cluster-scoped, drifts, a
/// waived drift (with the desired objects kept compact).
#[test]
fn the_cases_the_law_is_about_occur() {
    let engine = Engine::new(&EngineConfig::default()).unwrap();
    let desired = DesiredSnapshot {
        repository: "d".into(),
        revision: None,
        resources: [object(0, 0, 0, 0, false), object(1, 1, 1, 0, false), object(2, 0, 1, 0, false)]
            .iter()
            .chain(&[object(0, 1, 1, 2, false)])
            .map(KeptResource::new)
            .collect(),
        warnings: Vec::new(),
    };
    let live = [object(0, 0, 2, 1, true), object(1, 1, 1, 2, true), object(2, 0, 0, 0, true), object(0, 1, 1, 0, true)];
    let report = compare_files_streamed(
        desired,
        |sink: &LiveSink<'_>| {
            for (i, r) in live.iter().enumerate() {
                sink(i as u64, r.clone().into());
            }
            Vec::new()
        },
        None,
        None,
        &engine,
        &options(),
    );
    let messages: Vec<&str> = report.warnings.iter().map(|w| w.message.as_str()).collect();
    assert!(messages.iter().any(|m| m.contains("matched to the live object in namespace y")), "{messages:?}");
    assert!(
        report.drifts.iter().any(|d| d.resource.name == "a" && d.resource.kind == "ConfigMap"),
        "{:?}",
        report.drifts
    );
    assert!(
        report.drifts.iter().any(|d| d.resource.name == "b" && d.resource.kind == "Deployment"),
        "{:?}",
        report.drifts
    );
    assert!(
        report.drifts.iter().any(|d| d.resource.name == "b" && d.resource.kind == "ConfigMap" && d.waiver.is_some()),
        "{:?}",
        report.drifts
    );
}

/// The versions of the live objects compared are noted by default, in the order of the report's
/// desired keys, and not at all when they are not asked for (as `drift diff` does not).
#[test]
fn the_live_versions_are_noted_unless_they_are_not_asked_for() {
    let engine = Engine::new(&EngineConfig::default()).unwrap();
    // One pair read as it comes, one whose live object is kept for the namespace rules (its
    // desired object names no namespace), one desired object without live object.
    let desired = [object(0, 0, 1, 0, false), object(1, 1, 0, 0, false), object(2, 0, 1, 0, false)];
    let live = [object(0, 0, 1, 1, true), object(1, 1, 2, 2, true)];
    let run = |options: &ScanOptions| {
        let snapshot = DesiredSnapshot {
            repository: "d".into(),
            revision: None,
            resources: desired.iter().map(KeptResource::new).collect(),
            warnings: Vec::new(),
        };
        let read_live = |sink: &LiveSink<'_>| {
            for (i, r) in live.iter().enumerate() {
                sink(i as u64, r.clone().into());
            }
            Vec::new()
        };
        compare_files_streamed(snapshot, read_live, None, None, &engine, options)
    };
    let noted = run(&options());
    let versions: Vec<(&str, &str)> =
        noted.desired.iter().map(|k| k.name.as_str()).zip(noted.live_versions.iter().map(String::as_str)).collect();
    assert_eq!(versions.len(), 3, "{versions:?}");
    assert!(versions.contains(&(NAMES[0], "101")) && versions.contains(&(NAMES[1], "102")), "{versions:?}");
    assert!(versions.contains(&(NAMES[0], "")), "{versions:?}");
    let mut unversioned = options();
    unversioned.live_versions = false;
    let mut bare = run(&unversioned);
    assert!(bare.live_versions.is_empty());
    bare.live_versions.clone_from(&noted.live_versions);
    assert_eq!(bare, noted, "nothing else changes");
    // The same of a live side read whole.
    let whole = |options: &ScanOptions| {
        let snapshot = DesiredSnapshot {
            repository: "d".into(),
            revision: None,
            resources: desired.to_vec(),
            warnings: Vec::new(),
        };
        compare_files(snapshot, live.to_vec(), Vec::new(), None, &engine, options)
    };
    assert!(!whole(&options()).live_versions.is_empty());
    assert!(whole(&unversioned).live_versions.is_empty());
}

/// A desired object let go of once compared is read again for a second live object of its key
/// (the later one counts, as in a whole read), and only then; read again changed, it keeps the
/// first comparison and says so in a fatal warning.
#[test]
fn an_object_let_go_of_is_read_again_for_a_second_live_object_of_its_key() {
    let engine = Engine::new(&EngineConfig::default()).unwrap();
    let desired = [in_file(object(0, 0, 1, 0, false), 0), in_file(object(1, 0, 1, 0, false), 1)];
    // The ConfigMap comes twice (first in sync, then drifted), the Deployment once.
    let live = [object(0, 0, 1, 0, true), object(1, 0, 1, 0, true), object(0, 0, 1, 1, true)];
    let read_live = |sink: &LiveSink<'_>| {
        for (i, r) in live.iter().enumerate() {
            sink(i as u64, r.clone().into());
        }
        Vec::new()
    };
    for fingerprinted in [false, true] {
        read_again_when_asked(&engine, &desired, &live, read_live, fingerprinted);
    }
}

/// The body of the test above, with the desired objects kept with their digest or (as `drift
/// diff` keeps them) a fingerprint.
fn read_again_when_asked(
    engine: &Engine,
    desired: &[Resource; 2],
    live: &[Resource; 3],
    read_live: impl Fn(&LiveSink<'_>) -> Vec<drift_core::SourceWarning> + Copy,
    fingerprinted: bool,
) {
    let snapshot = |d: &[Resource]| DesiredSnapshot {
        repository: "d".into(),
        revision: None,
        resources: d
            .iter()
            .map(|r| if fingerprinted { KeptResource::comparing(r, engine) } else { KeptResource::new(r) })
            .collect(),
        warnings: Vec::new(),
    };
    let asked = std::sync::Mutex::new(Vec::new());
    let reload = |p: &Provenance| {
        asked.lock().unwrap().push(p.path.clone().unwrap());
        desired.iter().filter(|r| r.provenance == *p).cloned().collect()
    };
    let report = compare_files_streamed(snapshot(desired), read_live, Some(&reload), None, engine, &options());
    assert_eq!(*asked.lock().unwrap(), ["desired/0.yaml"], "read again for the second ConfigMap only");
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    let trees =
        DesiredSnapshot { repository: "d".into(), revision: None, resources: desired.to_vec(), warnings: Vec::new() };
    let whole = compare_files(trees, live.to_vec(), Vec::new(), None, engine, &options());
    assert_eq!(report.drifts, whole.drifts);
    assert!(report.drifts.iter().any(|d| d.resource.kind == "ConfigMap"), "the later, drifted one counts");

    // The manifest changed since it was first read: the first comparison stays, and a fatal
    // warning names the file.
    let changed = |p: &Provenance| {
        let mut found: Vec<Resource> = desired.iter().filter(|r| r.provenance == *p).cloned().collect();
        for r in &mut found {
            std::sync::Arc::make_mut(&mut r.object)["data"]["k"] = json!("other");
        }
        found
    };
    let report = compare_files_streamed(snapshot(desired), read_live, Some(&changed), None, engine, &options());
    let w = report.warnings.iter().find(|w| w.fatal).expect("a fatal warning");
    assert_eq!(w.path.as_deref(), Some("desired/0.yaml"));
    assert!(w.message.contains("changed or is gone"), "{}", w.message);
    assert!(!report.drifts.iter().any(|d| d.resource.kind == "ConfigMap"), "the first (in sync) comparison is kept");

    // A second live object without a namespace, placed on the key by `-n`: read again too.
    let placed = [object(0, 0, 1, 0, true), object(0, 0, 0, 1, true)];
    let read_placed = |sink: &LiveSink<'_>| {
        for (i, r) in placed.iter().enumerate() {
            sink(i as u64, r.clone().into());
        }
        Vec::new()
    };
    asked.lock().unwrap().clear();
    let report = compare_files_streamed(snapshot(desired), read_placed, Some(&reload), Some("x"), engine, &options());
    assert_eq!(*asked.lock().unwrap(), ["desired/0.yaml"]);
    let trees =
        DesiredSnapshot { repository: "d".into(), revision: None, resources: desired.to_vec(), warnings: Vec::new() };
    let whole = compare_files(trees, placed.to_vec(), Vec::new(), Some("x"), engine, &options());
    assert_eq!(report.drifts, whole.drifts);
    assert!(report.drifts.iter().any(|d| d.resource.kind == "ConfigMap" && d.path == "data.k"));
}

/// An autoscaler is never let go of: the comparison of its target, made at the end, reads it.
#[test]
fn an_autoscaler_is_kept_for_its_target() {
    let engine = Engine::new(&EngineConfig::default()).unwrap();
    // The HPA in namespace x is compared as it is read; its Deployment (replicas 1 in Git, 2 live)
    // is compared at the end with it.
    let desired = [in_file(object(4, 0, 1, 0, false), 0), in_file(object(1, 0, 1, 0, false), 1)];
    let live = [object(4, 0, 1, 0, true), object(1, 0, 1, 1, true)];
    let read_live = |sink: &LiveSink<'_>| {
        for (i, r) in live.iter().enumerate() {
            sink(i as u64, r.clone().into());
        }
        Vec::new()
    };
    let kept = DesiredSnapshot {
        repository: "d".into(),
        revision: None,
        resources: desired.iter().map(|r| KeptResource::asking(r, &engine)).collect(),
        warnings: Vec::new(),
    };
    let reload = |p: &Provenance| desired.iter().filter(|r| r.provenance == *p).cloned().collect();
    let report = compare_files_streamed(kept, read_live, Some(&reload), None, &engine, &options());
    let trees =
        DesiredSnapshot { repository: "d".into(), revision: None, resources: desired.to_vec(), warnings: Vec::new() };
    let whole = compare_files(trees, live.to_vec(), Vec::new(), None, &engine, &options());
    assert_eq!(report.drifts, whole.drifts);
    assert!(!report.drifts.iter().any(|d| d.path == "spec.replicas"), "{:?}", report.drifts);
    assert!(report.drifts.iter().any(|d| d.resource.kind == "Deployment"), "the image drifts: {:?}", report.drifts);
}
