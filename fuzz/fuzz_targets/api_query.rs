//! Arbitrary query strings through the API's query parsing, for every endpoint's parameter set.
//! Laws: it never panics; the accepted pairs are allowed and each name comes once; the accepted
//! pairs written back URL-encoded are read back the same.
#![no_main]

use drift_api::query::{
    AUDIT_PARAMS, FILTER_PARAMS, NOTIFICATION_PARAMS, PAGE_PARAMS, audit_filter, delivery_filter, filter, flag, page,
    pairs, positive_id, required,
};
use libfuzzer_sys::fuzz_target;

/// Percent-encodes every byte but the unreserved ones (RFC 3986).
fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fuzz_target!(|input: (u8, &str)| {
    let (which, raw) = input;
    let drifts: Vec<&str> = FILTER_PARAMS.iter().chain(PAGE_PARAMS.iter()).copied().collect();
    let sets: [&[&str]; 6] = [&drifts, &FILTER_PARAMS, &AUDIT_PARAMS, &NOTIFICATION_PARAMS, &["wait"], &[]];
    let allowed = sets[usize::from(which) % sets.len()];
    let Ok(got) = pairs(Some(raw), allowed) else { return };
    for (i, (name, _)) in got.iter().enumerate() {
        assert!(allowed.contains(&name.as_str()), "{name:?} is not allowed");
        assert!(got[..i].iter().all(|(n, _)| n != name), "{name:?} given twice was accepted");
    }
    let written: Vec<String> = got.iter().map(|(n, v)| format!("{}={}", encode(n), encode(v))).collect();
    let again = pairs(Some(&written.join("&")), allowed).expect("written-back pairs are accepted");
    assert_eq!(again, got);
    // Every reader of the pairs; errors are fine, panics are not.
    let _ = filter(&got);
    let _ = page(&got);
    let _ = audit_filter(&got);
    let _ = delivery_filter(&got);
    let _ = flag(&got, "wait");
    let _ = required(&got, "status");
    for (name, value) in &got {
        if let Ok(id) = positive_id(name, value) {
            assert!(id > 0, "{value:?} read as the id {id}");
        }
    }
});
