//! The shared suites of drift-testkit against a real PostgreSQL, one test per case: the sink
//! suite (`sink::*`) and the store suite (`store::*`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod sink {
    use std::sync::Arc;

    use drift_model::{DriftSink, DriftStore};
    use drift_postgres::PostgresStore;
    use drift_testkit::sink::Guarded;

    drift_testkit::sink_suite!(|| async {
        let server = super::common::server();
        let store = PostgresStore::connect(&server.create_database().await.unwrap()).await.unwrap();
        // The server lives as long as the store.
        let s = Guarded::new(store, server);
        (s.clone() as Arc<dyn DriftSink>, s as Arc<dyn DriftStore>)
    });
}

mod store {
    drift_testkit::store_suite!(super::common::harness());
}

mod act {
    drift_testkit::act_suite!(super::common::harness());
}
