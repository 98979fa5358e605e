//! The scheduler: a pass at start, then one every interval plus jitter, never two at once, until
//! shutdown.
//!
//! Argo CD and Flux schedule the same way (an interval plus jitter, no cron): the jitter spreads
//! the load of many detectors started together over a tenth of the interval.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;

/// Up to 10% of the interval, from a seed (the clock's sub-second noise in [`clock_jitter`]):
/// `seed % 1000` thousandths of a tenth.
pub fn jitter(interval: Duration, seed: u32) -> Duration {
    interval.mul_f64(f64::from(seed % 1000) / 10_000.0)
}

/// [`jitter`] seeded by the clock's sub-second noise (no RNG needed for spreading).
pub fn clock_jitter(interval: Duration) -> Duration {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    jitter(interval, nanos)
}

/// Runs `pass` now and then every `interval` plus `jitter(interval)`, until `stop` turns true or
/// its sender is dropped. `pass` answers whether it ran (`false`: another pass was running, this
/// tick is skipped, never queued). A pass that is running when the stop comes is awaited: the
/// caller bounds how long it waits for this future.
pub async fn run_schedule<P, Fut>(
    interval: Duration,
    jitter: impl Fn(Duration) -> Duration,
    mut stop: watch::Receiver<bool>,
    mut pass: P,
) where
    P: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    loop {
        if *stop.borrow() {
            return;
        }
        if !pass().await {
            tracing::info!("a scan is already running; this tick is skipped");
        }
        tokio::select! {
            _ = tokio::time::sleep(interval + jitter(interval)) => {}
            // A stop was sent, or every sender is gone (an error): both mean stop.
            _ = stop.changed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::{Arc, Mutex};

    use tokio::time::Instant;

    use super::*;

    #[test]
    fn jitter_is_at_most_a_tenth_of_the_interval() {
        let i = Duration::from_secs(300);
        assert_eq!(jitter(i, 0), Duration::ZERO);
        assert_eq!(jitter(i, 999), Duration::from_secs_f64(300.0 * 0.0999));
        assert_eq!(jitter(i, 1500), jitter(i, 500), "the seed is taken modulo 1000");
        for seed in [1, 17, 500, 998, u32::MAX] {
            assert!(jitter(i, seed) < i / 10, "seed {seed}");
        }
        assert!(clock_jitter(i) < i / 10);
    }

    /// Runs the schedule with paused time; the pass records when it ran (relative to the start)
    /// and stops the schedule after `passes` passes.
    async fn passes_at(interval: Duration, extra: Duration, passes: usize, busy: &[usize]) -> Vec<Duration> {
        let start = Instant::now();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = watch::channel(false);
        let tx = Arc::new(tx);
        let (seen2, tx2) = (seen.clone(), tx.clone());
        let busy = busy.to_vec();
        run_schedule(
            interval,
            move |_| extra,
            rx,
            move || {
                let (seen, tx, busy) = (seen2.clone(), tx2.clone(), busy.clone());
                async move {
                    let mut s = seen.lock().unwrap();
                    let n = s.len();
                    s.push(start.elapsed());
                    if s.len() == passes {
                        tx.send_replace(true);
                    }
                    !busy.contains(&n)
                }
            },
        )
        .await;
        seen.lock().unwrap().clone()
    }

    #[tokio::test(start_paused = true)]
    async fn a_pass_at_start_then_one_every_interval_plus_jitter() {
        let at = passes_at(Duration::from_secs(60), Duration::from_secs(3), 4, &[]).await;
        let secs: Vec<u64> = at.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [0, 63, 126, 189]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_skipped_tick_is_not_queued() {
        // The second pass finds another running: the schedule waits a whole interval again.
        let at = passes_at(Duration::from_secs(10), Duration::ZERO, 3, &[1]).await;
        let secs: Vec<u64> = at.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [0, 10, 20]);
    }

    #[tokio::test(start_paused = true)]
    async fn stop_ends_the_wait_at_once() {
        let (tx, rx) = watch::channel(false);
        let passes = Arc::new(Mutex::new(0));
        let p = passes.clone();
        let sched = tokio::spawn(run_schedule(
            Duration::from_secs(3600),
            |_| Duration::ZERO,
            rx,
            move || {
                let p = p.clone();
                async move {
                    *p.lock().unwrap() += 1;
                    true
                }
            },
        ));
        tokio::time::sleep(Duration::from_secs(5)).await;
        let before = Instant::now();
        tx.send_replace(true);
        sched.await.unwrap();
        assert_eq!(before.elapsed(), Duration::ZERO, "no waiting for the hour to pass");
        assert_eq!(*passes.lock().unwrap(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_sender_stops_the_schedule() {
        let (tx, rx) = watch::channel(false);
        let sched = tokio::spawn(run_schedule(Duration::from_secs(60), |_| Duration::ZERO, rx, || async { true }));
        drop(tx);
        sched.await.unwrap();
    }
}
