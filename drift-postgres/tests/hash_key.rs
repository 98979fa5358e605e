//! The Secret hash key kept in the PostgreSQL store (table `settings`), the cases every SQL store
//! shares (`drift_sql::testkit::hash_keys`); replicas that start at once, each with a pool of
//! its own, agree on one key.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use drift_sql::testkit::SqlHarness;
use drift_sql::testkit::hash_keys as cases;

#[tokio::test]
async fn the_first_key_proposed_is_kept_and_every_later_caller_gets_it() {
    let h = common::harness();
    let a = h.0.open(None).await;
    let b = h.0.reopen(&a).await;
    cases::the_first_key_proposed_is_kept_and_every_later_caller_gets_it(&a, &b).await;
}

#[tokio::test]
async fn a_given_key_is_kept_by_its_id_only() {
    let h = common::harness();
    cases::a_given_key_is_kept_by_its_id_only(&h.0.open(None).await).await;
}

#[tokio::test]
async fn replicas_starting_at_once_agree_on_one_key() {
    let h = common::harness();
    let a = h.0.open(None).await;
    let mut handles = vec![Arc::new(a.clone())];
    for _ in 0..7 {
        handles.push(Arc::new(h.0.reopen(&a).await));
    }
    cases::callers_at_once_agree_on_one_key(handles).await;
}

#[tokio::test]
async fn a_rotation_rehashes_live_drifts_without_an_event() {
    let h = common::harness();
    cases::a_rotation_rehashes_live_drifts_without_an_event(&h.0.open(None).await).await;
}
