//! Arbitrary bytes as a drift.yaml through the configuration loader (`Config::parse`: the YAML
//! reading, unknown keys, and every check of the values). drift-bin is a binary crate, so its
//! config.rs is compiled here as it is. Laws: it never panics; a loaded configuration gives its
//! engine, its repositories' sources and its store, and the store shown to a person hides the
//! URL's password.
#![no_main]

#[allow(dead_code)]
#[path = "../../drift-bin/src/config.rs"]
mod config;
// config.rs names the `secret_hash:` settings of this module.
#[allow(dead_code)]
#[path = "../../drift-bin/src/hash_key.rs"]
mod hash_key;

use libfuzzer_sys::fuzz_target;

/// `s` with its `%XX` escapes decoded (a URL's password as typed). The law holds for a password
/// that appears nowhere else in the URL: one the user also typed into the query (in either form)
/// is shown there as typed, which is no leak of the password field.
fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(config) = config::Config::parse(text) else { return };
    drift_core::Engine::new(&config.engine_config()).expect("a checked configuration builds its engine");
    for r in &config.repositories {
        let _ = r.source_config();
    }
    let Ok(store) = config.store_config() else { return };
    let shown = store.display();
    if let config::StoreConfig::Postgres(pg) = &store
        && let Ok(mut url) = url::Url::parse(&pg.url)
        && let Some(password) = url.password().map(str::to_owned)
        && password.len() >= 4
        && url.set_password(None).is_ok()
        && !url.as_str().contains(&password)
        && !url.as_str().contains(&percent_decoded(&password))
        && !"***".contains(&password)
    {
        assert!(!shown.contains(&password), "the password of {:?} is shown: {shown}", pg.url);
    }
});
