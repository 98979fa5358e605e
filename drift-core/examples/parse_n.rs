//! The manifest files given read N times each with `drift_core::manifest`, for instruction
//! counts under callgrind: what parsing costs per file, apart from the rest of `drift diff`.
//! The cost of one pass is the difference of two runs divided by the difference of their N:
//!
//! ```text
//! cargo build --profile bench -p drift-core --example parse_n
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null $CARGO_TARGET_DIR/release/examples/parse_n 1 DIR/live/*
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null $CARGO_TARGET_DIR/release/examples/parse_n 3 DIR/live/*
//! ```
//!
//! Each parsed file is dropped before the next is read, as `drift diff` drops each live object
//! once compared; the drop is counted too. Files are read into memory once, before the passes.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use drift_core::manifest::{Limits, parse_manifests_with};

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().expect("usage: parse_n N FILE...").parse().expect("N is a count");
    let texts: Vec<(String, String)> =
        args.map(|p| (std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}")), p)).collect();
    let (mut objects, mut warnings) = (0, 0);
    for _ in 0..n {
        for (text, path) in &texts {
            let parsed = parse_manifests_with(std::hint::black_box(text), path, Limits::live());
            objects += parsed.resources.len();
            warnings += parsed.warnings.len();
        }
    }
    println!("{n} passes over {} files: {objects} objects, {warnings} warnings", texts.len());
}
