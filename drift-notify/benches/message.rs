//! One scan that opens 10,000 drifts, for one notifier: building the message (grouping,
//! counting, the id) and rendering it as a webhook body, a Slack message and an email.
//! `cargo bench -p drift-notify --bench message`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use drift_model::act::DriftEvent;
use drift_model::{EventKind, Severity};
use drift_notify::Message;
use drift_notify::fixtures::{drift, event};

fn batch(n: i64) -> Vec<DriftEvent> {
    (0..n)
        .map(|i| {
            let severity = Severity::ALL[(i % 4) as usize];
            event(EventKind::Opened, drift(i, &format!("ns-{}", i % 40), &format!("app-{}", i % 2500), severity))
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let events = batch(10_000);
    let mut g = c.benchmark_group("ten_thousand_events");
    g.sample_size(20);
    g.bench_function("message_new", |b| b.iter(|| Message::new("ops", events.clone(), None)));
    let message = Message::new("ops", events.clone(), None);
    g.bench_function("webhook_body_bytes", |b| {
        b.iter(|| serde_json::to_vec(&drift_notify::webhook_body(&message)).unwrap())
    });
    g.bench_function("slack_body_bytes", |b| {
        b.iter(|| serde_json::to_vec(&drift_notify::slack_body(&message)).unwrap())
    });
    g.bench_function("email_content", |b| b.iter(|| drift_notify::email_content(&message)));
    g.finish();
    let sizes = (
        serde_json::to_vec(&drift_notify::webhook_body(&message)).unwrap().len(),
        serde_json::to_vec(&drift_notify::slack_body(&message)).unwrap().len(),
        drift_notify::email_content(&message).html.len() + drift_notify::email_content(&message).text.len(),
    );
    eprintln!(
        "sizes for 10,000 events: webhook body {} B, Slack body {} B, email text+HTML {} B",
        sizes.0, sizes.1, sizes.2
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
