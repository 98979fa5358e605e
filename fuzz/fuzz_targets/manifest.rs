//! Arbitrary bytes into the YAML/JSON multi-document loader, with the default limits and with
//! tight ones. Laws: it never panics; every resource has an apiVersion, a kind and a name and
//! carries the file's path; every fatal warning names the file; a resource written back as JSON
//! and loaded again is the same object; read as live objects, the file gives the same warnings
//! and the same objects without their `status`; read as live objects to compare, the same again
//! with a JSON object's managedFields list kept as its text.
#![no_main]

use drift_core::manifest::{Limits, parse_live_manifests, parse_live_manifests_compared, parse_manifests_with};
use libfuzzer_sys::fuzz_target;

const PATH: &str = "fuzz/input.yaml";

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    let limits = if flags & 1 == 0 {
        Limits::default()
    } else {
        Limits { max_file_bytes: 4096, max_document_bytes: 1024, max_depth: 8, max_aliases: 16, max_nodes: 256 }
    };
    let parsed = parse_manifests_with(&text, PATH, limits);
    for w in &parsed.warnings {
        if w.fatal {
            assert_eq!(w.path.as_deref(), Some(PATH), "fatal warning without the file: {w:?}");
        }
    }
    let live = parse_live_manifests(&text, PATH, limits);
    assert_eq!(live.warnings, parsed.warnings);
    assert_eq!(live.resources.len(), parsed.resources.len());
    for (l, d) in live.resources.iter().zip(&parsed.resources) {
        let mut without = (*d.object).clone();
        if let Some(map) = without.as_object_mut() {
            map.remove("status");
        }
        assert_eq!(*l.object, without);
        assert_eq!((&l.key, &l.provenance), (&d.key, &d.provenance));
    }
    let compared = parse_live_manifests_compared(&text, PATH, limits);
    assert_eq!(compared.warnings, live.warnings);
    assert_eq!(compared.resources.len(), live.resources.len());
    for (c, l) in compared.resources.iter().zip(&live.resources) {
        // The managedFields list kept as text reads back into the list.
        let mut read_back = (*c.object).clone();
        if let Some(serde_json::Value::String(raw)) = read_back.pointer_mut("/metadata/managedFields") {
            let list: serde_json::Value = serde_json::from_str(raw).expect("kept as the list's text");
            assert!(list.is_array(), "{raw}");
            read_back["metadata"]["managedFields"] = list;
        }
        assert_eq!(read_back, *l.object);
        assert_eq!((&c.key, &c.provenance), (&l.key, &l.provenance));
    }
    for r in &parsed.resources {
        assert!(!r.api_version.is_empty() && !r.key.kind.is_empty() && !r.key.name.is_empty(), "{r:?}");
        assert_eq!(r.provenance.path.as_deref(), Some(PATH));
        // Round trip through the JSON form (a List's items were already taken out of it).
        if r.key.kind.ends_with("List") {
            continue;
        }
        let json = serde_json::to_string(&r.object).expect("a Value serialises");
        let again = parse_manifests_with(&json, PATH, Limits::default());
        assert_eq!(again.resources.len(), 1, "{json} gave {:?}", again.warnings);
        assert_eq!(again.resources[0].object, r.object, "{json}");
    }
});
