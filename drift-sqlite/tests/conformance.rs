//! The shared suites of drift-testkit against SQLite, one test per case: the sink suite on a
//! database file (`sink::file::*`) and in memory (`sink::in_memory::*`), and the store suite
//! (`store::*`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod sink {
    mod file {
        use std::sync::Arc;

        use drift_model::{DriftSink, DriftStore};
        use drift_sqlite::SqliteStore;
        use drift_testkit::sink::Guarded;

        drift_testkit::sink_suite!(|| async {
            let dir = tempfile::tempdir().unwrap();
            let store =
                SqliteStore::open(&format!("sqlite://{}", dir.path().join("drift.db").display())).await.unwrap();
            // The folder lives as long as the store.
            let s = Guarded::new(store, dir);
            (s.clone() as Arc<dyn DriftSink>, s as Arc<dyn DriftStore>)
        });
    }

    mod in_memory {
        use std::sync::Arc;

        use drift_model::{DriftSink, DriftStore};
        use drift_sqlite::SqliteStore;

        drift_testkit::sink_suite!(|| async {
            let s = Arc::new(SqliteStore::open("sqlite::memory:").await.unwrap());
            (s.clone() as Arc<dyn DriftSink>, s as Arc<dyn DriftStore>)
        });
    }
}

mod store {
    drift_testkit::store_suite!(super::common::harness());
}

mod act {
    drift_testkit::act_suite!(super::common::harness());
}
