//! Stopping a process under test within a bound: a test that waits on a process with no bound
//! hangs the whole run when the process does not stop (one such wait held a CI run for over an
//! hour), where a bounded wait fails that test alone, saying what did not stop.

use std::process::{Child, Command, ExitStatus, Stdio};
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

/// What [`output_within`] saw of a process: how it ended (`None`: it still ran at the limit, and
/// was killed), and all it wrote on its standard output and error.
#[derive(Debug)]
pub struct Ran {
    /// Its exit status; `None` when it was killed at the limit.
    pub status: Option<ExitStatus>,
    /// Its standard output.
    pub stdout: Vec<u8>,
    /// Its standard error.
    pub stderr: Vec<u8>,
}

/// Runs `cmd` with its standard output and error piped and read while it runs (so that neither
/// fills and stops it), waiting for it at most `limit`: past that it is killed and reaped, and
/// what it wrote until then is kept. An error when it cannot be started, waited for, or its
/// output cannot be read (a test must not judge output it did not see whole).
pub fn output_within(cmd: &mut Command, limit: Duration) -> std::io::Result<Ran> {
    use std::io::Read;
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let pipes: [Option<Box<dyn Read + Send>>; 2] = [
        child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>),
        child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>),
    ];
    let readers = pipes.map(|pipe| {
        std::thread::spawn(move || -> std::io::Result<Vec<u8>> {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                pipe.read_to_end(&mut bytes)?;
            }
            Ok(bytes)
        })
    });
    let status = match wait_at_most(&mut child, limit) {
        Some(status) => Some(status),
        None => {
            // (A kill that fails found it already ended: its own status stands then.)
            let killed = child.kill().is_ok();
            let status = child.wait()?;
            (!killed).then_some(status)
        }
    };
    let [stdout, stderr] = readers.map(|r| r.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
    Ok(Ran { status, stdout: stdout?, stderr: stderr? })
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
    fn output_within_reads_both_pipes_past_their_size_and_kills_at_the_limit() {
        // More than a pipe holds on each side (64 KiB): a waiter that did not read would hang.
        let big = "head -c 300000 /dev/zero | tr '\\0' o; head -c 200000 /dev/zero | tr '\\0' e >&2; exit 3";
        let ran = output_within(Command::new("sh").args(["-c", big]), Duration::from_secs(60)).unwrap();
        assert_eq!(ran.status.and_then(|s| s.code()), Some(3));
        assert_eq!((ran.stdout.len(), ran.stderr.len()), (300_000, 200_000));
        assert!(ran.stdout.iter().all(|&b| b == b'o') && ran.stderr.iter().all(|&b| b == b'e'));

        let started = Instant::now();
        let ran =
            output_within(Command::new("sh").args(["-c", "echo before; exec sleep 30"]), Duration::from_millis(300))
                .unwrap();
        assert!(ran.status.is_none(), "killed at the limit");
        assert_eq!(ran.stdout, b"before\n", "what it wrote before is kept");
        assert!(started.elapsed() < Duration::from_secs(20), "not waited for: {:?}", started.elapsed());

        assert!(output_within(&mut Command::new("/nonexistent/program"), Duration::from_secs(1)).is_err());
    }

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
