//! Arbitrary text into the quantity parser. Laws: it never panics; a quantity's canonical text
//! parses back to the same value and is its own canonical text; surrounding blanks do not matter.
#![no_main]

use drift_core::quantity::{Quantity, canonical};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let parsed = Quantity::parse(text);
    assert_eq!(Quantity::parse(&format!(" {text}\t")), parsed, "{text:?} with blanks around it");
    let Some(q) = parsed else {
        assert_eq!(canonical(text), None);
        return;
    };
    let c = q.to_canonical();
    assert_eq!(canonical(text).as_deref(), Some(c.as_str()));
    assert_eq!(Quantity::parse(&c), Some(q), "{text:?} has the canonical text {c:?}, which does not parse back");
    assert_eq!(canonical(&c).as_deref(), Some(c.as_str()), "{text:?}: {c:?} is not its own canonical text");
});
