//! Two arbitrary JSON bodies as a desired and a live object of one kind, through the engine's
//! comparison (normalisation, diff, attribution, verdicts, reverts). Laws: it never panics; an
//! object compared with itself has no drift; comparing is deterministic and the drifts are sorted
//! by path; a Secret's drifts show no value in clear text and no revert; the diff walk that
//! normalises as it goes finds what the walk of two normalised copies finds.
#![no_main]

use std::sync::LazyLock;

use arbitrary::Arbitrary;
use drift_core::diff::{diff_filtered, diff_normalised};
use drift_core::merge_keys::MergeKeys;
use drift_core::normalize::{SecretHasher, normalize, view};
use drift_core::normalize::secret::HASH_PREFIX;
use drift_core::path::Seg;
use drift_core::{Comparator, Engine, Resource};
use drift_fuzz::{Json, merge, strings};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

const KINDS: &[(&str, &str)] = &[
    ("apps/v1", "Deployment"),
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "Service"),
    ("apps/v1", "StatefulSet"),
    ("v1", "LimitRange"),
    ("v1", "ResourceQuota"),
    ("autoscaling/v2", "HorizontalPodAutoscaler"),
    ("example.com/v1", "Widget"),
];

/// How the live object is made from the desired one.
#[derive(Debug, Arbitrary)]
enum Live {
    /// A copy with a merge patch applied (small changes: the usual drift).
    Patched(Json),
    /// An unrelated body.
    Other(Json),
}

#[derive(Debug, Arbitrary)]
struct Input {
    kind: u8,
    desired: Json,
    live: Live,
}

static ENGINE: LazyLock<Engine> = LazyLock::new(|| Engine::default().with_secret_hasher(SecretHasher::new([7; 32])));

/// An object of the kind with the body's fields (the identity fields are always the kind's).
fn object(api_version: &str, kind: &str, body: &Value) -> Resource {
    let mut map = match body {
        Value::Object(fields) => fields.clone(),
        _ => serde_json::Map::new(),
    };
    map.insert("apiVersion".into(), api_version.into());
    map.insert("kind".into(), kind.into());
    let meta = map.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    meta["name"] = "fuzz".into();
    meta["namespace"] = "ns".into();
    Resource::from_object(Value::Object(map)).expect("the object has its identity")
}

fuzz_target!(|input: Input| {
    let (api_version, kind) = KINDS[usize::from(input.kind) % KINDS.len()];
    let desired = object(api_version, kind, &input.desired.0);
    let live = match &input.live {
        Live::Patched(patch) => {
            let mut body = Value::clone(&desired.object);
            merge(&mut body, &patch.0);
            object(api_version, kind, &body)
        }
        Live::Other(body) => object(api_version, kind, &body.0),
    };
    let engine = &*ENGINE;
    let hasher = engine.secret_hasher();
    let (nd, nl) = (normalize(&desired.object, hasher), normalize(&live.object, hasher));
    let keys = MergeKeys::default();
    let copies = diff_normalised(kind, &nd, &nl, &keys, &mut |_| true);
    let walked = diff_filtered(kind, &view(&desired.object, hasher), &view(&live.object, hasher), &keys, &mut |_| true);
    assert_eq!(walked, copies, "the normalising walk differs from the walk of normalised copies");
    assert_eq!(engine.compare(&desired, Some(&desired)), vec![], "desired against itself");
    assert_eq!(engine.compare(&live, Some(&live)), vec![], "live against itself");
    let drifts = engine.compare(&desired, Some(&live));
    assert_eq!(engine.compare(&desired, Some(&live)), drifts, "not deterministic");
    assert!(drifts.windows(2).all(|w| w[0].path <= w[1].path), "not sorted by path");
    assert_eq!(engine.compare(&desired, None).len(), 1, "a missing object is one drift");
    if kind == "Secret" {
        for (path, d) in engine.compare_paths(&desired, Some(&live)) {
            assert!(d.revert.is_none(), "a Secret's revert is shown: {d:?}");
            // The top-level field, from the structured path (a field may be named `data.x`).
            let top = match path.segments().first() {
                Some(Seg::Field(name)) => name.as_str(),
                _ => "",
            };
            if top == "data" || top == "stringData" {
                let mut shown = Vec::new();
                d.git_value.iter().chain(d.cluster_value.iter()).for_each(|v| strings(v, &mut shown));
                assert!(shown.iter().all(|s| s.starts_with(HASH_PREFIX)), "a Secret value in clear: {d:?}");
            }
        }
    }
});
