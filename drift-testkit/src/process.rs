//! Stopping a process under test within a bound: a test that waits on a process with no bound
//! hangs the whole run when the process does not stop (one such wait held a CI run for over an
//! hour), where a bounded wait fails that test alone, saying what did not stop.

use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// Waits for `child` to exit for at most `limit` (checked every 10 ms). `None` when it still
/// runs; it is then left running.
pub fn wait_at_most(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if started.elapsed() < limit => std::thread::sleep(Duration::from_millis(10)),
            // Still running, or not waitable (already reaped): nothing more to wait for.
            Ok(None) | Err(_) => return None,
        }
    }
}

/// Sends SIGTERM to `child` and waits for it to exit for at most `grace`: its exit status, or,
/// when it is still running then, an error saying so, after it was killed (SIGKILL) and reaped,
/// so that the caller's pipes reach their end and nothing is left behind.
pub fn terminate(child: &mut Child, grace: Duration) -> Result<ExitStatus, String> {
    let pid = child.id().to_string();
    let sent = Command::new("kill").args(["-TERM", &pid]).status().map_err(|e| format!("kill -TERM {pid}: {e}"))?;
    if !sent.success() {
        // Already gone (and not yet reaped): its status says how it ended.
        return child.wait().map_err(|e| format!("waiting for {pid}: {e}"));
    }
    if let Some(status) = wait_at_most(child, grace) {
        return Ok(status);
    }
    let _ = child.kill();
    let _ = child.wait();
    Err(format!("process {pid} did not exit within {grace:?} of SIGTERM; it was killed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_that_stops_on_sigterm_gives_its_status_and_one_that_ignores_it_is_killed() {
        let mut polite = Command::new("sleep").arg("30").spawn().unwrap();
        let status = terminate(&mut polite, Duration::from_secs(10)).unwrap();
        assert!(!status.success(), "sleep ended by SIGTERM: {status:?}");

        // SIGTERM ignored from the line on (sent before the trap, it would end the shell).
        let mut deaf = Command::new("sh")
            .args(["-c", "trap '' TERM; echo ignoring; exec sleep 30"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(deaf.stdout.take().unwrap()), &mut line).unwrap();
        assert_eq!(line, "ignoring\n");
        let started = Instant::now();
        let err = terminate(&mut deaf, Duration::from_millis(300)).unwrap_err();
        assert!(err.contains("did not exit within 300ms of SIGTERM"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(20), "killed, not waited for");
        assert!(deaf.try_wait().unwrap().is_some(), "reaped");
    }

    #[test]
    fn waiting_at_most_a_bound_leaves_a_running_process_running() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        assert!(wait_at_most(&mut child, Duration::from_millis(50)).is_none());
        child.kill().unwrap();
        assert!(wait_at_most(&mut child, Duration::from_secs(10)).is_some());
    }
}
