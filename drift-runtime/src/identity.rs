//! The person behind a change: the Kubernetes audit log joined with the drifts.
//!
//! A drift's field manager (`kubectl-edit`) says which client wrote the field; the API
//! server's audit log says who sent each request. [`Identifier`] keeps the recent audit events
//! of writes, read from a file it tails ([`AuditSettings::log`], the `--audit-log-path` of
//! kube-apiserver or K3s) and from the API's audit webhook endpoint (the `EventList`s the
//! webhook backend of kube-apiserver posts, through [`AuditIntake`]), and joins each open drift
//! with the event of its change ([`join`]):
//!
//! - the same object: `objectRef` resource (the kind's plural), API group, namespace and name;
//! - a write: verb `update`, `patch` or `create`, stage `ResponseComplete`, status 2xx;
//! - the same field manager, when the request names one (`?fieldManager=` of the request URI);
//! - the time of the change: the drift's `changed_at` (the managedFields time, whole seconds)
//!   within [`AuditSettings::window`] of the request's received..completed interval;
//! - the fields, when the event is at level `Request` and carries the `requestObject`: a
//!   request whose body does not touch the drifted field is not its change.
//!
//! The nearest event in time wins, the later of two equally near. The identity is stored with
//! the drift ([`ChangeIdentities::identify`]) for that `changed_at` only.

use std::collections::{HashSet, VecDeque};
use std::io::{Read as _, Seek as _};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use drift_core::drift_model::identity::{AuditIntake, ChangeIdentities, ChangeIdentity};
use drift_core::drift_model::sink::{DriftFilter, DriftStatus, PageRequest, StoredDrift};
use drift_core::{DriftStore, Error, Result};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::{Notify, watch};

/// `audit:` of the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditSettings {
    /// The audit log file to tail (JSON lines), as written by `--audit-log-path`; without one,
    /// only the webhook endpoint brings events.
    #[serde(default)]
    pub log: Option<PathBuf>,
    /// How far apart the field's managedFields time and the request may be (default 5s).
    #[serde(default = "default_window", with = "humantime_serde")]
    pub window: Duration,
    /// How many audit events of writes are kept for the join (default 50,000; the oldest go).
    #[serde(default = "default_keep")]
    pub keep: usize,
    /// How often the file is read and open drifts are joined (default 2s).
    #[serde(default = "default_tick", with = "humantime_serde")]
    pub tick: Duration,
}

fn default_window() -> Duration {
    Duration::from_secs(5)
}

fn default_keep() -> usize {
    50_000
}

fn default_tick() -> Duration {
    Duration::from_secs(2)
}

impl AuditSettings {
    /// An invalid-input error for a setting out of its range: `window` at most 1h, `keep`
    /// 1..=10,000,000, `tick` 10ms..=1h.
    pub fn validate(&self) -> Result<()> {
        if self.window > Duration::from_secs(3600) {
            return Err(Error::invalid_input("`window` must be at most 1h"));
        }
        if self.keep == 0 || self.keep > 10_000_000 {
            return Err(Error::invalid_input("`keep` must be between 1 and 10000000"));
        }
        if self.tick < Duration::from_millis(10) || self.tick > Duration::from_secs(3600) {
            return Err(Error::invalid_input("`tick` must be between 10ms and 1h"));
        }
        Ok(())
    }
}

impl Default for AuditSettings {
    fn default() -> Self {
        AuditSettings { log: None, window: default_window(), keep: default_keep(), tick: default_tick() }
    }
}

/// The user of an audit event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct AuditUser {
    /// User name.
    #[serde(default)]
    pub username: String,
    /// Groups.
    #[serde(default)]
    pub groups: Vec<String>,
}

/// The object of an audit event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditObjectRef {
    /// Plural resource.
    #[serde(default)]
    pub resource: String,
    /// Namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Name.
    #[serde(default)]
    pub name: Option<String>,
    /// API group (absent for core).
    #[serde(default)]
    pub api_group: Option<String>,
    /// Subresource.
    #[serde(default)]
    pub subresource: Option<String>,
}

/// The response status of an audit event.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct AuditStatus {
    /// HTTP code (a JSON number: `200` or `200.0`).
    #[serde(default)]
    pub code: Option<f64>,
}

/// The fields of an `audit.k8s.io/v1` `Event` the join reads.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    /// `Event`.
    pub kind: String,
    /// `audit.k8s.io/v1`.
    pub api_version: String,
    /// `Metadata`, `Request` or `RequestResponse`.
    #[serde(default)]
    pub level: Option<String>,
    /// Unique id of the request.
    #[serde(rename = "auditID")]
    pub audit_id: String,
    /// Stage (`ResponseComplete`, ...).
    pub stage: String,
    /// Path and query.
    #[serde(rename = "requestURI", default)]
    pub request_uri: String,
    /// Verb.
    pub verb: String,
    /// Who.
    pub user: AuditUser,
    /// Client and proxies.
    #[serde(rename = "sourceIPs", default)]
    pub source_ips: Vec<String>,
    /// User-Agent.
    #[serde(default)]
    pub user_agent: Option<String>,
    /// The object.
    #[serde(default)]
    pub object_ref: Option<AuditObjectRef>,
    /// The answer.
    #[serde(default)]
    pub response_status: Option<AuditStatus>,
    /// The request body (level `Request` and above).
    #[serde(default)]
    pub request_object: Option<Value>,
    /// When the request arrived.
    pub request_received_timestamp: DateTime<Utc>,
    /// When this stage was reached.
    pub stage_timestamp: DateTime<Utc>,
}

impl AuditEvent {
    /// Reads one event; an error says what is missing.
    pub fn from_value(v: &Value) -> Result<AuditEvent> {
        let e: AuditEvent = serde_json::from_value(v.clone())
            .map_err(|e| Error::invalid_input(format!("not an audit.k8s.io/v1 Event: {e}")))?;
        if e.kind != "Event" || !e.api_version.starts_with("audit.k8s.io/") {
            return Err(Error::invalid_input(format!(
                "not an audit.k8s.io Event: kind {:?}, apiVersion {:?}",
                e.kind, e.api_version
            )));
        }
        if let Some(code) = e.response_status.as_ref().and_then(|s| s.code)
            && (!(0.0..=999.0).contains(&code) || code.fract() != 0.0)
        {
            return Err(Error::invalid_input(format!("responseStatus.code {code} is not an HTTP status")));
        }
        Ok(e)
    }

    /// Whether it is a completed, successful write of one object: what a change can be.
    pub fn is_write(&self) -> bool {
        matches!(self.verb.as_str(), "update" | "patch" | "create")
            && self.stage == "ResponseComplete"
            && self.response_status.as_ref().and_then(|s| s.code).is_some_and(|c| (200.0..300.0).contains(&c))
            && self.object_ref.is_some()
    }

    /// The `fieldManager` query parameter of the request, if any.
    pub fn field_manager(&self) -> Option<String> {
        let query = self.request_uri.split_once('?')?.1;
        query.split('&').find_map(|p| p.strip_prefix("fieldManager=")).map(percent_decode)
    }

    fn name(&self) -> Option<&str> {
        let o = self.object_ref.as_ref()?;
        o.name.as_deref().or_else(|| {
            // A create names its object in the body.
            self.request_object.as_ref()?.get("metadata")?.get("name")?.as_str()
        })
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match u8::from_str_radix(&s[i + 1..i + 3], 16) {
                Ok(b) => {
                    out.push(b);
                    i += 3;
                    continue;
                }
                Err(_) => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The plural resource name of a kind, as the API server names it (`Deployment` ->
/// `deployments`, `NetworkPolicy` -> `networkpolicies`, `Ingress` -> `ingresses`).
pub fn plural(kind: &str) -> String {
    let k = kind.to_ascii_lowercase();
    if k == "endpoints" {
        return k;
    }
    if k.ends_with('s') || k.ends_with('x') || k.ends_with('z') || k.ends_with("ch") || k.ends_with("sh") {
        return format!("{k}es");
    }
    if let Some(stem) = k.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        return format!("{stem}ies");
    }
    format!("{k}s")
}

/// Whether a request body touches the field at a drift's dotted `path` (checked up to the
/// first keyed list item): a merge or strategic merge patch, a whole object, or a JSON patch's
/// operations.
pub fn touches(body: &Value, path: &str) -> bool {
    let mut segments: Vec<&str> = Vec::new();
    for s in path.split('.') {
        if s.is_empty() {
            continue;
        }
        match s.split_once('[') {
            Some((head, _)) => {
                if !head.is_empty() {
                    segments.push(head);
                }
                break;
            }
            None => segments.push(s),
        }
    }
    if segments.is_empty() {
        return true;
    }
    match body {
        Value::Array(ops) => {
            let prefix = format!("/{}", segments.join("/"));
            ops.iter().any(|op| {
                op.get("path").and_then(Value::as_str).is_some_and(|p| {
                    p == prefix
                        || p.starts_with(&format!("{prefix}/"))
                        || prefix.starts_with(&format!("{p}/"))
                        || p.is_empty()
                })
            })
        }
        Value::Object(_) => {
            let mut at = body;
            for s in segments {
                match at.get(s) {
                    Some(v) => at = v,
                    // A value replaced whole above the field (`"spec": null`) touches it too.
                    None => return at.is_null(),
                }
            }
            true
        }
        _ => false,
    }
}

/// The identity of the change of `drift` among `events`, or `None` when no event is that
/// change (rules in the module's documentation).
pub fn join(drift: &StoredDrift, events: &[AuditEvent], window: Duration) -> Option<ChangeIdentity> {
    let changed_at = drift.changed_at?;
    let window = chrono::Duration::from_std(window).unwrap_or(chrono::Duration::seconds(5));
    let resource = plural(&drift.resource_kind);
    let best = events
        .iter()
        .filter(|e| e.is_write())
        .filter(|e| {
            let Some(o) = &e.object_ref else { return false };
            o.resource.eq_ignore_ascii_case(&resource)
                && o.api_group.as_deref().unwrap_or("") == drift.api_group
                && o.namespace.as_deref().unwrap_or("") == drift.namespace
                && e.name() == Some(drift.resource_name.as_str())
        })
        .filter(|e| match (e.field_manager(), &drift.changed_by) {
            (Some(m), Some(by)) => &m == by,
            _ => true,
        })
        .filter(|e| e.request_object.as_ref().is_none_or(|body| touches(body, &drift.path)))
        .filter_map(|e| {
            // managedFields times are whole seconds, written while the request is served. Times
            // at the ends of the calendar (from an event posted to the webhook) match nothing.
            let start = e.request_received_timestamp.checked_sub_signed(chrono::Duration::seconds(1))?;
            let from = start.checked_sub_signed(window)?;
            let to = e.stage_timestamp.checked_add_signed(window)?;
            if changed_at < from || changed_at > to {
                return None;
            }
            let distance = if changed_at < start {
                start - changed_at
            } else if changed_at > e.stage_timestamp {
                changed_at - e.stage_timestamp
            } else {
                chrono::Duration::zero()
            };
            Some((distance, std::cmp::Reverse(e.stage_timestamp), e))
        })
        .min_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)))?
        .2;
    Some(ChangeIdentity {
        username: best.user.username.clone(),
        groups: best.user.groups.clone(),
        source_ips: best.source_ips.clone(),
        user_agent: best.user_agent.clone(),
        verb: best.verb.clone(),
        audit_id: best.audit_id.clone(),
        request_time: best.request_received_timestamp,
        changed_at,
    })
}

#[derive(Debug, Default)]
struct Buffer {
    events: VecDeque<AuditEvent>,
    /// Drifts (id, changed_at) whose join is final: every event that could be their change
    /// had arrived when they were joined.
    done: HashSet<(i64, DateTime<Utc>)>,
    received: u64,
}

/// Keeps the recent audit events of writes and joins them with the open drifts.
pub struct Identifier {
    settings: AuditSettings,
    drifts: Arc<dyn DriftStore>,
    identities: Arc<dyn ChangeIdentities>,
    buffer: Mutex<Buffer>,
    wake: Notify,
}

impl std::fmt::Debug for Identifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identifier").field("settings", &self.settings).finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Identifier {
    /// An identifier over a store's drifts and the place their identities are kept (both SQL
    /// stores and the memory store are both).
    pub fn new(settings: AuditSettings, drifts: Arc<dyn DriftStore>, identities: Arc<dyn ChangeIdentities>) -> Self {
        Identifier { settings, drifts, identities, buffer: Mutex::new(Buffer::default()), wake: Notify::new() }
    }

    /// Its settings.
    pub fn settings(&self) -> &AuditSettings {
        &self.settings
    }

    /// Keeps the events of writes among `events`; returns how many.
    pub fn keep(&self, events: impl IntoIterator<Item = AuditEvent>) -> usize {
        let mut b = lock(&self.buffer);
        let mut kept = 0;
        for e in events {
            b.received += 1;
            if e.is_write() {
                b.events.push_back(e);
                kept += 1;
            }
        }
        while b.events.len() > self.settings.keep.max(1) {
            b.events.pop_front();
        }
        drop(b);
        if kept > 0 {
            self.wake.notify_one();
        }
        kept
    }

    /// Joins every open or waived drift whose change has no identity yet with the events kept;
    /// returns how many were identified.
    pub async fn join_once(&self) -> Result<usize> {
        let (events, newest) = {
            let b = lock(&self.buffer);
            let newest = b.events.iter().map(|e| e.stage_timestamp).max();
            (b.events.iter().cloned().collect::<Vec<_>>(), newest)
        };
        let Some(newest) = newest else { return Ok(0) };
        let window = chrono::Duration::from_std(self.settings.window).unwrap_or(chrono::Duration::seconds(5));
        let mut identified = 0;
        for status in [DriftStatus::Open, DriftStatus::Waived] {
            let filter = DriftFilter { status: Some(status), ..DriftFilter::default() };
            let mut page = PageRequest { limit: PageRequest::MAX_LIMIT, after: None };
            loop {
                let got = self.drifts.list(&filter, page).await?;
                for d in &got.items {
                    let Some(changed_at) = d.changed_at else { continue };
                    if d.changed_by_user.is_some() || lock(&self.buffer).done.contains(&(d.id, changed_at)) {
                        continue;
                    }
                    if let Some(identity) = join(d, &events, self.settings.window)
                        && self.identities.identify(d.id, &identity).await?
                    {
                        tracing::debug!(drift = d.id, user = %identity.username, "the person behind a change");
                        identified += 1;
                        lock(&self.buffer).done.insert((d.id, changed_at));
                    } else if changed_at
                        .checked_add_signed(window + chrono::Duration::seconds(1))
                        .is_none_or(|last| newest > last)
                    {
                        // Every event that could be this change has arrived: none is.
                        lock(&self.buffer).done.insert((d.id, changed_at));
                    }
                }
                match got.next {
                    Some(next) => page.after = Some(next),
                    None => break,
                }
            }
        }
        Ok(identified)
    }

    /// Tails the log file (when set) and joins after each tick that brought events, until
    /// `stop` turns true.
    pub async fn run(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let mut tail = self.settings.log.clone().map(Tail::new);
        let mut ticker = tokio::time::interval(self.settings.tick);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                _ = self.wake.notified() => {}
                r = stop.wait_for(|s| *s) => {
                    let _ = r;
                    return;
                }
            }
            if let Some(t) = tail.as_mut() {
                let (events, bad) = t.read();
                if bad > 0 {
                    tracing::warn!(lines = bad, path = %t.path.display(), "audit log lines that are not audit events");
                }
                self.keep(events);
            }
            if let Err(e) = self.join_once().await {
                tracing::warn!(error = %e, "the audit log could not be joined with the drifts");
            }
        }
    }
}

impl AuditIntake for Identifier {
    fn receive(&self, items: &[Value]) -> Result<usize> {
        let events = items
            .iter()
            .enumerate()
            .map(|(i, v)| AuditEvent::from_value(v).map_err(|e| Error::invalid_input(format!("items[{i}]: {e}"))))
            .collect::<Result<Vec<_>>>()?;
        Ok(self.keep(events))
    }
}

/// Reads what was appended to a file since the last read, from its start the first time and
/// after it was rotated (another file at the path) or truncated.
#[derive(Debug)]
struct Tail {
    path: PathBuf,
    offset: u64,
    inode: Option<u64>,
    partial: Vec<u8>,
}

impl Tail {
    fn new(path: PathBuf) -> Tail {
        Tail { path, offset: 0, inode: None, partial: Vec::new() }
    }

    /// The events appended since the last read, and how many complete lines were not events.
    fn read(&mut self) -> (Vec<AuditEvent>, usize) {
        use std::os::unix::fs::MetadataExt as _;
        let Ok(mut file) = std::fs::File::open(&self.path) else { return (Vec::new(), 0) };
        let Ok(meta) = file.metadata() else { return (Vec::new(), 0) };
        if self.inode != Some(meta.ino()) || meta.len() < self.offset {
            self.inode = Some(meta.ino());
            self.offset = 0;
            self.partial.clear();
        }
        if meta.len() == self.offset || file.seek(std::io::SeekFrom::Start(self.offset)).is_err() {
            return (Vec::new(), 0);
        }
        let mut bytes = Vec::new();
        let Ok(n) = file.read_to_end(&mut bytes) else { return (Vec::new(), 0) };
        self.offset += n as u64;
        self.partial.extend_from_slice(&bytes);
        let Some(end) = self.partial.iter().rposition(|b| *b == b'\n') else { return (Vec::new(), 0) };
        let complete: Vec<u8> = self.partial.drain(..=end).collect();
        let mut events = Vec::new();
        let mut bad = 0;
        for line in complete.split(|b| *b == b'\n').filter(|l| !l.iter().all(u8::is_ascii_whitespace)) {
            match serde_json::from_slice::<Value>(line)
                .map_err(|e| e.to_string())
                .and_then(|v| AuditEvent::from_value(&v).map_err(|e| e.to_string()))
            {
                Ok(e) => events.push(e),
                Err(_) => bad += 1,
            }
        }
        (events, bad)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn event(user: &str, verb: &str, at: &str, manager: &str, body: Option<Value>) -> AuditEvent {
        let mut v = json!({
            "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata",
            "auditID": format!("id-{user}-{at}"), "stage": "ResponseComplete",
            "requestURI": format!("/apis/apps/v1/namespaces/shop/deployments/web?fieldManager={manager}"),
            "verb": verb, "user": {"username": user, "groups": ["dev", "system:authenticated"]},
            "sourceIPs": ["10.0.0.7"], "userAgent": "kubectl/v1.32.0",
            "objectRef": {"resource": "deployments", "namespace": "shop", "name": "web", "apiGroup": "apps", "apiVersion": "v1"},
            "responseStatus": {"metadata": {}, "code": 200},
            "requestReceivedTimestamp": at, "stageTimestamp": at,
        });
        if let Some(b) = body {
            v["level"] = json!("Request");
            v["requestObject"] = b;
        }
        AuditEvent::from_value(&v).unwrap()
    }

    fn drift(path: &str, manager: &str, at: &str) -> StoredDrift {
        let mut drift = drift_testkit::store::replicas("shop", "web", 5);
        drift.path = path.into();
        let report = drift_testkit::fixtures::report("s", t("2026-12-06T11:00:00Z"), &[], vec![]);
        let mut d = drift_core::drift_model::memory::new_row(&report, &drift, 1);
        d.changed_by = Some(manager.into());
        d.changed_at = Some(t(at));
        d
    }

    const W: Duration = Duration::from_secs(5);

    #[test]
    fn the_event_of_the_change_names_the_person() {
        let d = drift("spec.replicas", "kubectl-scale", "2026-12-06T10:00:01Z");
        let events = vec![
            event("bob", "patch", "2026-12-06T09:00:01.200000Z", "kubectl-scale", None),
            event("alice", "patch", "2026-12-06T10:00:01.200000Z", "kubectl-scale", None),
            event("carol", "get", "2026-12-06T10:00:01.300000Z", "kubectl-scale", None),
        ];
        let id = join(&d, &events, W).unwrap();
        assert_eq!(id.username, "alice");
        assert_eq!(id.groups, ["dev", "system:authenticated"]);
        assert_eq!(id.source_ips, ["10.0.0.7"]);
        assert_eq!(id.user_agent.as_deref(), Some("kubectl/v1.32.0"));
        assert_eq!(id.changed_at, t("2026-12-06T10:00:01Z"));
    }

    #[test]
    fn another_object_manager_time_or_field_is_not_the_change() {
        let d = drift("spec.replicas", "kubectl-scale", "2026-12-06T10:00:01Z");
        // Another field manager.
        assert_eq!(join(&d, &[event("a", "patch", "2026-12-06T10:00:01.1Z", "kubectl-edit", None)], W), None);
        // Outside the window.
        assert_eq!(join(&d, &[event("a", "patch", "2026-12-06T10:00:09Z", "kubectl-scale", None)], W), None);
        // A body that does not touch the field.
        let body = json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "x"}]}}}});
        assert_eq!(join(&d, &[event("a", "patch", "2026-12-06T10:00:01.1Z", "kubectl-scale", Some(body))], W), None);
        // One that does.
        let body = json!({"spec": {"replicas": 5}});
        assert!(join(&d, &[event("a", "patch", "2026-12-06T10:00:01.1Z", "kubectl-scale", Some(body))], W).is_some());
        // A failed write.
        let mut failed = event("a", "patch", "2026-12-06T10:00:01.1Z", "kubectl-scale", None);
        failed.response_status = Some(AuditStatus { code: Some(409.0) });
        assert_eq!(join(&d, &[failed], W), None);
    }

    #[test]
    fn times_at_the_ends_of_the_calendar_match_nothing_and_do_not_panic() {
        let d = drift("spec.replicas", "kubectl-scale", "2026-12-06T10:00:01Z");
        let first = event("a", "patch", "0001-01-01T00:00:00Z", "kubectl-scale", None);
        let last = event("b", "patch", "9999-12-31T23:59:59Z", "kubectl-scale", None);
        let mut min = first.clone();
        min.request_received_timestamp = DateTime::<Utc>::MIN_UTC;
        let mut max = last.clone();
        max.stage_timestamp = DateTime::<Utc>::MAX_UTC;
        assert_eq!(join(&d, &[first, last, min, max], W), None);
    }

    #[test]
    fn the_nearest_event_wins() {
        let d = drift("spec.replicas", "kubectl-scale", "2026-12-06T10:00:05Z");
        let events = vec![
            event("early", "patch", "2026-12-06T10:00:02Z", "kubectl-scale", None),
            event("near", "patch", "2026-12-06T10:00:05.400000Z", "kubectl-scale", None),
            event("late", "patch", "2026-12-06T10:00:08Z", "kubectl-scale", None),
        ];
        assert_eq!(join(&d, &events, W).unwrap().username, "near");
    }

    #[test]
    fn settings_out_of_range_are_refused() {
        assert!(AuditSettings::default().validate().is_ok());
        assert!(AuditSettings { tick: Duration::ZERO, ..AuditSettings::default() }.validate().is_err());
        assert!(AuditSettings { keep: 0, ..AuditSettings::default() }.validate().is_err());
        assert!(AuditSettings { window: Duration::from_secs(7200), ..AuditSettings::default() }.validate().is_err());
        let parsed: AuditSettings =
            serde_json::from_value(json!({"log": "/var/log/audit.log", "window": "3s"})).unwrap();
        assert_eq!((parsed.window, parsed.tick, parsed.keep), (Duration::from_secs(3), Duration::from_secs(2), 50_000));
        assert!(serde_json::from_value::<AuditSettings>(json!({"logs": "x"})).is_err(), "unknown keys are refused");
    }

    #[test]
    fn plurals_and_json_patch_paths() {
        assert_eq!(plural("Deployment"), "deployments");
        assert_eq!(plural("NetworkPolicy"), "networkpolicies");
        assert_eq!(plural("Ingress"), "ingresses");
        assert_eq!(plural("Gateway"), "gateways");
        assert_eq!(plural("Endpoints"), "endpoints");
        let ops = json!([{"op": "replace", "path": "/spec/replicas", "value": 5}]);
        assert!(touches(&ops, "spec.replicas"));
        assert!(!touches(&ops, "spec.template.spec.containers[name=web].image"));
        assert!(touches(
            &json!({"spec": {"template": {"spec": {"containers": []}}}}),
            "spec.template.spec.containers[name=web].image"
        ));
        assert_eq!(percent_decode("kubectl%2Dedit"), "kubectl-edit");
    }

    #[test]
    fn a_tailed_file_is_read_once_and_again_after_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let line = |user: &str| {
            let mut v = serde_json::to_value(json!({
                "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "auditID": user,
                "stage": "ResponseComplete", "verb": "patch", "user": {"username": user},
                "requestReceivedTimestamp": "2026-12-06T10:00:00.000001Z", "stageTimestamp": "2026-12-06T10:00:00.000002Z",
            }))
            .unwrap()
            .to_string();
            v.push('\n');
            v
        };
        std::fs::write(&path, format!("{}not json\n{}{{\"partial", line("a"), line("b"))).unwrap();
        let mut tail = Tail::new(path.clone());
        let (events, bad) = tail.read();
        assert_eq!((events.len(), bad), (2, 1));
        assert_eq!(tail.read().0.len(), 0, "nothing new");
        // Rotation: the file is moved away and a new one written.
        std::fs::rename(&path, dir.path().join("audit-1.log")).unwrap();
        std::fs::write(&path, line("c")).unwrap();
        let (events, _) = tail.read();
        assert_eq!(events.iter().map(|e| e.user.username.as_str()).collect::<Vec<_>>(), ["c"]);
    }
}
