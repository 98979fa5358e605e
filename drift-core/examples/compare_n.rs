//! One case of the engine bench compared N times, for instruction counts under callgrind
//! (repeatable on a shared machine, where criterion's times are not). The cost of one
//! comparison is the difference of two runs divided by the difference of their N:
//!
//! ```text
//! cargo build --profile bench -p drift-core --example compare_n
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null $CARGO_TARGET_DIR/release/examples/compare_n deployment_5_drifts 1
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null $CARGO_TARGET_DIR/release/examples/compare_n deployment_5_drifts 101
//! ```
//!
//! Cases: the pairs of `benches/engine.rs`, built the same way: `deployment_5_drifts` and
//! `service` (the demo's web objects), `configmap_1mb`, `custom_resource_500_rules`, and
//! `deployment_in_sync` (the corpus pair; needs `DRIFT_CORPUS`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use drift_core::{Comparator, Engine};

#[path = "../benches/common/pairs.rs"]
mod pairs;

fn main() {
    let mut args = std::env::args().skip(1);
    let case = args.next().expect("usage: compare_n CASE N");
    let n: usize = args.next().expect("usage: compare_n CASE N").parse().expect("N is a count");
    let (desired, live) = pairs::case("compare_n", &case)
        .unwrap_or_else(|| panic!("unknown case {case} (or DRIFT_CORPUS unset): {:?}", pairs::CASES));
    let engine = Engine::default();
    let mut drifts = 0;
    for _ in 0..n {
        let found = engine.compare(std::hint::black_box(&desired), Some(std::hint::black_box(&live)));
        drifts += std::hint::black_box(found).len();
    }
    println!("{case}: {n} comparisons, {drifts} drifts");
}
