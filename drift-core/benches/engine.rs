//! normalise + compare per object: a Deployment, a Service, a 1 MB ConfigMap, a large custom
//! resource. `DRIFT_CORPUS=$PWD/../shared/corpus cargo bench -p drift-core --bench engine`
//! (without `DRIFT_CORPUS`, the in-sync Deployment of the corpus is skipped).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use drift_core::{Comparator, Engine};

#[path = "common/pairs.rs"]
mod pairs;

fn bench(c: &mut Criterion) {
    let engine = Engine::default();
    let cases = pairs::CASES.map(|name| (name, pairs::case(name, name)));
    let mut g = c.benchmark_group("normalise_and_compare");
    for (name, (desired, live)) in cases.iter().filter_map(|(name, pair)| Some((name, pair.as_ref()?))) {
        let found = engine.compare(desired, Some(live)).len();
        assert_eq!(found == 0, name.ends_with("in_sync"), "{name}: {found} drifts");
        g.bench_function(*name, |b| {
            b.iter(|| engine.compare(std::hint::black_box(desired), Some(std::hint::black_box(live))))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
