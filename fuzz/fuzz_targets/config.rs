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
        && !"***".contains(&password)
    {
        assert!(!shown.contains(&password), "the password of {:?} is shown: {shown}", pg.url);
    }
});
