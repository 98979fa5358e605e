//! What opening a SOPS file costs: a Secret of 1, 10 and 100 values encrypted by `sops` (as in
//! the tests), opened with `SopsKeys::open` (the age stanza, every value, the MAC), timed over
//! many rounds; the median and the fastest round per file are printed. Needs `sops`
//! (scripts/install-tools.sh). Run: `cargo bench -p drift-sops --bench open`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use age::secrecy::ExposeSecret;
use drift_model::sops::SopsOpener;
use drift_sops::SopsKeys;

fn secret(values: usize) -> String {
    let mut text = String::from(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: shop\ntype: Opaque\nstringData:\n",
    );
    for i in 0..values {
        text.push_str(&format!("  key{i}: value-{i}-0123456789abcdef0123456789abcdef\n"));
    }
    text
}

fn main() {
    let Some(sops) = drift_testkit::sops::sops("bench open") else { return };
    let identity = age::x25519::Identity::generate();
    let recipient = identity.to_public().to_string();
    let keys = SopsKeys::parse(identity.to_string().expose_secret()).unwrap();
    println!("{:<34} {:>10} {:>10} {:>7}", "file", "median", "fastest", "rounds");
    for values in [1, 10, 100] {
        for (what, extra) in
            [("all values", &[][..]), ("encrypted_regex data", &["--encrypted-regex", "^(data|stringData)$"][..])]
        {
            let file = drift_testkit::sops::encrypt(&sops, &secret(values), "yaml", &[&recipient], extra);
            let rounds = 300;
            let mut times: Vec<Duration> = (0..rounds)
                .map(|_| {
                    let start = Instant::now();
                    let plain = keys.open(&[&file]).unwrap();
                    std::hint::black_box(plain);
                    start.elapsed()
                })
                .collect();
            times.sort();
            println!(
                "{:<34} {:>8.1}µs {:>8.1}µs {rounds:>7}",
                format!("{values} value(s), {what}"),
                times[rounds / 2].as_secs_f64() * 1e6,
                times[0].as_secs_f64() * 1e6
            );
        }
    }
}
