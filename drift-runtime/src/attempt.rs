//! The trace of an action (docs/remediation.md, "Actions that finish or leave a trace"): before
//! a revert or an accept acts, it writes an `attempted` audit entry naming the process that runs
//! it (its `runner`) and the time by which it has ended one way or another (its deadline: the
//! action's timeout and a margin); its outcome names that entry. An attempt whose process was
//! killed has no outcome: the next start of a process on the same host sees that the process is
//! gone and closes it as `interrupted`; any process closes it once its deadline has passed.

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use chrono::{DateTime, Utc};
use drift_core::act::AuditEntry;
use serde::{Deserialize, Serialize};

/// How long an action may run before it is given up (`remediation.timeout`): its git
/// processes are stopped and it is recorded as `failed`.
pub const ACTION_TIMEOUT: Duration = Duration::from_secs(300);

/// What an attempt's deadline adds to the action's timeout: the time to write its outcome.
pub(crate) const DEADLINE_MARGIN: Duration = Duration::from_secs(60);

/// Who runs an action: the host, the process id and this run of the process (a restarted
/// container runs its new process under the same id, often 1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Runner {
    pub host: String,
    pub pid: u32,
    pub instance: String,
}

impl Runner {
    /// This process.
    pub(crate) fn this() -> &'static Runner {
        static THIS: OnceLock<Runner> = OnceLock::new();
        THIS.get_or_init(|| {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .or_else(|| std::env::var("HOSTNAME").ok())
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| "unknown".to_owned());
            let pid = std::process::id();
            let started = Utc::now().timestamp_nanos_opt().unwrap_or_default();
            Runner { host, pid, instance: format!("{pid}-{started}") }
        })
    }

    /// Whether the process that wrote an attempt is gone: `Some(true)` when it ran on this host
    /// and its process id runs nothing here, or is this process's under another run;
    /// `Some(false)` when it is this process; `None` when this process cannot tell (another
    /// host, another live process of the same id, or no `/proc`).
    pub(crate) fn gone(&self) -> Option<bool> {
        let me = Runner::this();
        if self.host != me.host {
            return None;
        }
        if self.pid == me.pid {
            return Some(self.instance != me.instance);
        }
        let proc = Path::new("/proc");
        if !proc.join("self").exists() || proc.join(self.pid.to_string()).exists() {
            return None;
        }
        Some(true)
    }
}

/// The deadline of an action of `timeout` started at `start`: the timeout and the margin later,
/// or the end of time for a timeout too long to add (never earlier than the action may run).
pub(crate) fn deadline_after(start: DateTime<Utc>, timeout: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(timeout.saturating_add(DEADLINE_MARGIN))
        .ok()
        .and_then(|d| start.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// Why an unfinished attempt is interrupted at `now`, or `None` while it may still be running.
pub(crate) fn interrupted(entry: &AuditEntry, now: DateTime<Utc>) -> Option<String> {
    let runner: Option<Runner> = entry.detail.get("runner").and_then(|r| serde_json::from_value(r.clone()).ok());
    let deadline = entry
        .detail
        .get("deadline")
        .and_then(|d| d.as_str())
        .and_then(|d| DateTime::parse_from_rfc3339(d).ok())
        .map(|d| d.with_timezone(&Utc))
        // An attempt that does not say when it ends (not written by this detector) gets the
        // default timeout and margin.
        .unwrap_or_else(|| deadline_after(entry.at, ACTION_TIMEOUT));
    let by = runner.as_ref().map(|r| format!(" (pid {} on {})", r.pid, r.host)).unwrap_or_default();
    match runner.as_ref().and_then(Runner::gone) {
        Some(true) => Some(format!("the process that attempted it{by} stopped before the action finished")),
        Some(false) => None,
        None if deadline <= now => Some(format!(
            "the action did not finish by its deadline {} and its process{by} wrote no outcome: it was killed or lost the store",
            deadline.to_rfc3339()
        )),
        None => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use drift_core::act::AuditAction;
    use serde_json::json;

    fn attempt(runner: serde_json::Value, deadline: DateTime<Utc>) -> AuditEntry {
        AuditEntry {
            id: 7,
            at: deadline - chrono::Duration::minutes(6),
            action: AuditAction::Revert,
            actor: "alice".into(),
            drift_id: Some(1),
            scan_id: None,
            notifier: None,
            event_id: None,
            status: "attempted".into(),
            attempts: None,
            detail: json!({"runner": runner, "deadline": deadline.to_rfc3339()}),
            attempt: None,
        }
    }

    #[test]
    fn an_attempt_is_interrupted_when_its_process_is_gone_or_its_deadline_has_passed() {
        let me = Runner::this().clone();
        let now = Utc::now();
        let later = now + chrono::Duration::minutes(5);
        let earlier = now - chrono::Duration::seconds(1);
        // This very process: still running, whatever the deadline says until it passes.
        assert_eq!(interrupted(&attempt(json!(me), later), now), None);
        // A restarted container: the same host and pid, another run.
        let restarted = Runner { instance: "1-0".into(), ..me.clone() };
        let why = interrupted(&attempt(json!(restarted), later), now).unwrap();
        assert!(why.contains("stopped before the action finished"), "{why}");
        // A process id that runs nothing on this host (pid_max is at most 2^22).
        let dead = Runner { pid: 4_194_304 + 1, ..me.clone() };
        assert!(interrupted(&attempt(json!(dead), later), now).is_some());
        // Another host: only the deadline tells.
        let elsewhere = Runner { host: format!("{}-other", me.host), ..me.clone() };
        assert_eq!(interrupted(&attempt(json!(elsewhere.clone()), later), now), None);
        let why = interrupted(&attempt(json!(elsewhere), earlier), now).unwrap();
        assert!(why.contains("did not finish by its deadline"), "{why}");
        // No runner, no deadline: the default timeout from the entry's time.
        let mut bare = attempt(json!(null), later);
        bare.detail = json!({});
        bare.at = now - chrono::Duration::minutes(1);
        assert_eq!(interrupted(&bare, now), None);
        bare.at = now - chrono::Duration::minutes(10);
        assert!(interrupted(&bare, now).is_some());
    }

    #[test]
    fn a_deadline_is_never_earlier_than_the_action_may_run() {
        let now = Utc::now();
        assert_eq!(deadline_after(now, Duration::from_secs(300)), now + chrono::Duration::seconds(360));
        assert_eq!(deadline_after(now, Duration::MAX), DateTime::<Utc>::MAX_UTC, "a timeout too long to add");
        assert_eq!(deadline_after(now, Duration::from_secs(u64::MAX / 2)), DateTime::<Utc>::MAX_UTC);
    }
}
