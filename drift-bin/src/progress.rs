//! The progress line of `drift scan`, `drift diff` and `drift render`: on standard error, only
//! when it is a terminal and the work lasts more than a moment, never in pipes, files or the
//! report itself (which goes to standard output).
//!
//! The parts of the job count into a [`drift_core::progress::Progress`] handle; a thread here
//! reads it a few times a second and draws one line with indicatif (files read, renders,
//! live objects, objects compared), then erases it when the job ends. Log lines written while
//! the line is shown go through [`LogWriter`], which lifts the line, writes, and draws it again.
//!
//! `DRIFT_PROGRESS=never` turns it off; `DRIFT_PROGRESS=always` draws it from the start
//! instead of after [`DELAY`] (still only on a terminal).

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use drift_core::progress::{Progress, ProgressSnapshot};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long a job runs before its progress line appears.
pub const DELAY: Duration = Duration::from_millis(500);
const TICK: Duration = Duration::from_millis(100);

/// The line being shown, for the log writer.
static SHOWN: Mutex<Option<ProgressBar>> = Mutex::new(None);

fn shown() -> std::sync::MutexGuard<'static, Option<ProgressBar>> {
    SHOWN.lock().unwrap_or_else(PoisonError::into_inner)
}

/// When the line is drawn, from `DRIFT_PROGRESS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Never,
    Auto,
    Always,
}

fn mode() -> Mode {
    match std::env::var("DRIFT_PROGRESS").as_deref() {
        Ok("never" | "0" | "false") => Mode::Never,
        Ok("always") => Mode::Always,
        _ => Mode::Auto,
    }
}

/// A progress line for one job; erased when finished or dropped.
#[derive(Debug)]
pub struct Line {
    done: Arc<AtomicBool>,
    drawer: Option<JoinHandle<()>>,
}

impl Line {
    /// Starts watching `progress` for the job `what` (for example "scanning").
    pub fn start(what: &'static str, progress: &Progress) -> Line {
        let done = Arc::new(AtomicBool::new(false));
        let mode = mode();
        if mode == Mode::Never || !std::io::stderr().is_terminal() {
            return Line { done, drawer: None };
        }
        let delay = if mode == Mode::Always { Duration::ZERO } else { DELAY };
        let (flag, progress) = (Arc::clone(&done), progress.clone());
        let drawer = std::thread::Builder::new()
            .name("progress".to_owned())
            .spawn(move || draw(what, &progress, &flag, delay))
            .ok();
        Line { done, drawer }
    }

    /// Erases the line (if it was shown) and stops watching.
    pub fn finish(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(drawer) = self.drawer.take() {
            let _ = drawer.join();
        }
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        self.stop();
    }
}

fn draw(what: &'static str, progress: &Progress, done: &AtomicBool, delay: Duration) {
    let started = Instant::now();
    while started.elapsed() < delay {
        if done.load(Ordering::Relaxed) {
            return;
        }
        std::thread::sleep(TICK.min(delay));
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template("{spinner} {elapsed:>3} {wide_msg}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    bar.set_style(style);
    bar.enable_steady_tick(TICK);
    *shown() = Some(bar.clone());
    // Drawn at least once, even when the job ends before the first pause.
    loop {
        bar.set_message(message(what, &progress.snapshot()));
        if done.load(Ordering::Relaxed) {
            break;
        }
        std::thread::sleep(TICK);
    }
    shown().take();
    bar.finish_and_clear();
}

/// The text of the line: what the job is doing and the counts that have moved.
fn message(what: &str, s: &ProgressSnapshot) -> String {
    let mut parts = Vec::new();
    if s.files_read > 0 {
        parts.push(format!("{} files read", count(s.files_read)));
    }
    if s.renders > 0 {
        parts.push(format!("{} rendered", count(s.renders)));
    }
    if s.live_objects > 0 {
        parts.push(format!("{} live objects", count(s.live_objects)));
    }
    if s.to_compare > 0 {
        parts.push(format!("{}/{} compared", count(s.compared), count(s.to_compare)));
    }
    if parts.is_empty() { format!("{what}…") } else { format!("{what}: {}", parts.join(" · ")) }
}

/// `12345` as `12,345`.
fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Standard error for the logs: a line written while the progress line is shown lifts it
/// first, so that neither is torn.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let bar = shown().clone();
        match bar {
            Some(bar) => bar.suspend(|| std::io::stderr().write(buf)),
            None => std::io::stderr().write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;
    fn make_writer(&'a self) -> Self::Writer {
        LogWriter
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_only_the_counts_that_moved() {
        let s = ProgressSnapshot::default();
        assert_eq!(message("scanning", &s), "scanning…");
        let s = ProgressSnapshot { files_read: 12_345, renders: 2, live_objects: 0, to_compare: 1_000, compared: 999 };
        assert_eq!(message("scanning", &s), "scanning: 12,345 files read · 2 rendered · 999/1,000 compared");
        assert_eq!(
            (count(0), count(999), count(1000), count(1_234_567)),
            ("0".into(), "999".into(), "1,000".into(), "1,234,567".into())
        );
    }
}
