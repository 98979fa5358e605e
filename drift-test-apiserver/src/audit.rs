//! Who calls, and what the server writes about it: static token users (the CSV format of
//! kube-apiserver's `--token-auth-file`) and a Kubernetes audit log (JSON lines of
//! `audit.k8s.io/v1` `Event` objects, as kube-apiserver and K3s write with `--audit-log-path`).
//!
//! The audit log has one event per request at stage `ResponseComplete` (`ResponseStarted` for a
//! watch, whose response never completes while it streams), at level `Metadata` or `Request`
//! (then with the `requestObject` of writes). There is no policy file: every request is logged
//! at the one level chosen, except `/healthz`, `/livez` and `/readyz`.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};

/// An authenticated user: what the audit log and a real authenticator call `user.Info`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    /// User name.
    pub username: String,
    /// Uid (may be empty).
    pub uid: String,
    /// Groups, with `system:authenticated` (or `system:unauthenticated`) last.
    pub groups: Vec<String>,
}

impl UserInfo {
    /// The user of requests without a token when the server requires none.
    pub fn anonymous() -> UserInfo {
        UserInfo {
            username: "system:anonymous".into(),
            uid: String::new(),
            groups: vec!["system:unauthenticated".into()],
        }
    }

    fn json(&self) -> Value {
        let mut m = Map::new();
        m.insert("username".into(), json!(self.username));
        if !self.uid.is_empty() {
            m.insert("uid".into(), json!(self.uid));
        }
        m.insert("groups".into(), json!(self.groups));
        Value::Object(m)
    }
}

/// One line of a token file: a bearer token and its user.
#[derive(Clone, PartialEq, Eq)]
pub struct StaticUser {
    /// The bearer token.
    pub token: String,
    /// User name.
    pub username: String,
    /// Uid.
    pub uid: String,
    /// Groups as written (without `system:authenticated`).
    pub groups: Vec<String>,
}

impl std::fmt::Debug for StaticUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is a credential: never printed.
        f.debug_struct("StaticUser")
            .field("username", &self.username)
            .field("uid", &self.uid)
            .field("groups", &self.groups)
            .finish_non_exhaustive()
    }
}

impl StaticUser {
    /// A user with a token, a name and groups (uid = name).
    pub fn new(token: &str, username: &str, groups: &[&str]) -> StaticUser {
        StaticUser {
            token: token.into(),
            username: username.into(),
            uid: username.into(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        }
    }

    /// The user as authenticated: its groups and `system:authenticated`.
    pub fn info(&self) -> UserInfo {
        let mut groups = self.groups.clone();
        groups.push("system:authenticated".into());
        UserInfo { username: self.username.clone(), uid: self.uid.clone(), groups }
    }
}

/// A token file that cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("token file line {line}: {message}")]
pub struct TokenFileError {
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Reads a token file in kube-apiserver's `--token-auth-file` format: CSV lines
/// `token,user,uid[,"group1,group2"]`; blank lines and lines starting with `#` are skipped.
///
/// ```
/// let users = drift_test_apiserver::audit::parse_token_file("t1,alice,1001,\"dev,ops\"\nt2,bob,1002\n").unwrap();
/// assert_eq!(users[0].groups, ["dev", "ops"]);
/// assert!(users[1].groups.is_empty());
/// ```
pub fn parse_token_file(text: &str) -> Result<Vec<StaticUser>, TokenFileError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let err = |message: &str| TokenFileError { line: i + 1, message: message.to_owned() };
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let fields = csv_fields(trimmed).map_err(err)?;
        if fields.len() < 3 {
            return Err(err("needs at least token,user,uid"));
        }
        if fields[0].is_empty() || fields[1].is_empty() {
            return Err(err("empty token or user name"));
        }
        let groups = fields
            .get(3)
            .map(|g| g.split(',').map(str::trim).filter(|g| !g.is_empty()).map(str::to_owned).collect())
            .unwrap_or_default();
        if out.iter().any(|u: &StaticUser| u.token == fields[0]) {
            return Err(err("a token given twice"));
        }
        out.push(StaticUser { token: fields[0].clone(), username: fields[1].clone(), uid: fields[2].clone(), groups });
    }
    Ok(out)
}

fn csv_fields(line: &str) -> Result<Vec<String>, &'static str> {
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    let mut was_quoted = false;
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', false) if cur.is_empty() && !was_quoted => {
                quoted = true;
                was_quoted = true;
            }
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                cur.push('"');
            }
            ('"', true) => quoted = false,
            ('"', false) => return Err("a quote inside an unquoted field"),
            (',', false) => {
                fields.push(std::mem::take(&mut cur));
                was_quoted = false;
            }
            (c, _) => {
                if !quoted && was_quoted {
                    return Err("text after a closing quote");
                }
                cur.push(c);
            }
        }
    }
    if quoted {
        return Err("an unclosed quote");
    }
    fields.push(cur);
    Ok(fields)
}

/// How much of a request the audit log keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuditLevel {
    /// User, verb, object, status, times.
    #[default]
    Metadata,
    /// And the request body of writes (`requestObject`).
    Request,
}

impl std::str::FromStr for AuditLevel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "Metadata" | "metadata" => Ok(AuditLevel::Metadata),
            "Request" | "request" => Ok(AuditLevel::Request),
            other => Err(format!("unknown audit level {other:?} (Metadata or Request)")),
        }
    }
}

impl AuditLevel {
    fn as_str(self) -> &'static str {
        match self {
            AuditLevel::Metadata => "Metadata",
            AuditLevel::Request => "Request",
        }
    }
}

/// The object a request is about (`objectRef`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectRef {
    /// Plural resource.
    pub resource: String,
    /// Namespace, if any.
    pub namespace: Option<String>,
    /// Name, if any.
    pub name: Option<String>,
    /// API group (empty for core).
    pub api_group: String,
    /// API version.
    pub api_version: String,
    /// Subresource, if any.
    pub subresource: Option<String>,
}

/// What the server knows of one request when it writes its event.
#[derive(Debug, Clone)]
pub struct AuditRecord {
    /// Path and query as sent.
    pub request_uri: String,
    /// Kubernetes verb (`patch`, `list`, ...), or the lower-case HTTP method of a non-resource
    /// request.
    pub verb: String,
    /// Who.
    pub user: UserInfo,
    /// The peer's address.
    pub source_ip: String,
    /// User-Agent header.
    pub user_agent: String,
    /// The object, for resource requests.
    pub object: Option<ObjectRef>,
    /// HTTP status of the answer.
    pub code: u16,
    /// When the request arrived.
    pub received: DateTime<Utc>,
    /// When the event was written.
    pub stage_time: DateTime<Utc>,
    /// Whether the answer is a watch stream (stage `ResponseStarted`).
    pub streaming: bool,
    /// The request body, for writes.
    pub body: Option<Value>,
}

fn micro(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// The `audit.k8s.io/v1` `Event` of a request at `level`.
pub fn event(level: AuditLevel, record: &AuditRecord) -> Value {
    let mut e = Map::new();
    e.insert("kind".into(), json!("Event"));
    e.insert("apiVersion".into(), json!("audit.k8s.io/v1"));
    e.insert("level".into(), json!(level.as_str()));
    e.insert("auditID".into(), json!(uuid::Uuid::new_v4().to_string()));
    e.insert("stage".into(), json!(if record.streaming { "ResponseStarted" } else { "ResponseComplete" }));
    e.insert("requestURI".into(), json!(record.request_uri));
    e.insert("verb".into(), json!(record.verb));
    e.insert("user".into(), record.user.json());
    e.insert("sourceIPs".into(), json!([record.source_ip]));
    if !record.user_agent.is_empty() {
        e.insert("userAgent".into(), json!(record.user_agent));
    }
    if let Some(o) = &record.object {
        let mut r = Map::new();
        r.insert("resource".into(), json!(o.resource));
        if let Some(ns) = &o.namespace {
            r.insert("namespace".into(), json!(ns));
        }
        if let Some(n) = &o.name {
            r.insert("name".into(), json!(n));
        }
        if !o.api_group.is_empty() {
            r.insert("apiGroup".into(), json!(o.api_group));
        }
        r.insert("apiVersion".into(), json!(o.api_version));
        if let Some(s) = &o.subresource {
            r.insert("subresource".into(), json!(s));
        }
        e.insert("objectRef".into(), Value::Object(r));
    }
    let mut status = json!({"metadata": {}, "code": record.code});
    if record.code >= 400 {
        status["status"] = json!("Failure");
    }
    e.insert("responseStatus".into(), status);
    if level == AuditLevel::Request
        && let Some(body) = &record.body
    {
        e.insert("requestObject".into(), body.clone());
    }
    e.insert("requestReceivedTimestamp".into(), json!(micro(record.received)));
    e.insert("stageTimestamp".into(), json!(micro(record.stage_time)));
    let decision = if record.code == 401 { None } else { Some("allow") };
    if let Some(d) = decision {
        e.insert("annotations".into(), json!({"authorization.k8s.io/decision": d, "authorization.k8s.io/reason": ""}));
    }
    Value::Object(e)
}

/// Appends events to an audit log file, one JSON object a line.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    level: AuditLevel,
    file: Mutex<std::fs::File>,
}

impl AuditLog {
    /// Opens (creates, appends to) the file at `path`.
    pub fn open(path: &Path, level: AuditLevel) -> std::io::Result<AuditLog> {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
        Ok(AuditLog { path: path.to_owned(), level, file: Mutex::new(file) })
    }

    /// Where it writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the event of one request (a whole line in one write).
    pub fn write(&self, record: &AuditRecord) {
        let mut line = event(self.level, record).to_string();
        line.push('\n');
        let mut f = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = f.write_all(line.as_bytes()) {
            tracing::warn!(error = %e, path = %self.path.display(), "cannot write the audit log");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_file_lines_as_kube_apiserver_reads_them() {
        let users =
            parse_token_file("# comment\n\nt1,alice,1001,\"dev,ops\"\nt2,bob,1002\nt3,carol,1003,viewers\n").unwrap();
        assert_eq!(users.len(), 3);
        assert_eq!(users[0].info().groups, ["dev", "ops", "system:authenticated"]);
        assert_eq!(users[1].info().groups, ["system:authenticated"]);
        assert_eq!(users[2].groups, ["viewers"]);
        assert_eq!(parse_token_file("t1,alice\n").unwrap_err().line, 1);
        assert!(parse_token_file("t1,alice,1\nt1,bob,2\n").is_err());
        assert!(parse_token_file("t1,alice,1,\"dev\n").is_err());
    }

    #[test]
    fn debug_hides_the_token() {
        let u = StaticUser::new("s3cr3t-token", "alice", &["dev"]);
        assert!(!format!("{u:?}").contains("s3cr3t"));
    }

    #[test]
    fn an_event_has_the_fields_of_audit_k8s_io_v1() {
        let t = DateTime::parse_from_rfc3339("2026-12-06T10:00:00.123456Z").unwrap().with_timezone(&Utc);
        let record = AuditRecord {
            request_uri: "/apis/apps/v1/namespaces/shop/deployments/web/scale?fieldManager=kubectl-scale".into(),
            verb: "patch".into(),
            user: StaticUser::new("t", "alice", &["dev"]).info(),
            source_ip: "127.0.0.1".into(),
            user_agent: "kubectl/v1.32.0".into(),
            object: Some(ObjectRef {
                resource: "deployments".into(),
                namespace: Some("shop".into()),
                name: Some("web".into()),
                api_group: "apps".into(),
                api_version: "v1".into(),
                subresource: Some("scale".into()),
            }),
            code: 200,
            received: t,
            stage_time: t,
            streaming: false,
            body: Some(json!({"spec": {"replicas": 5}})),
        };
        let e = event(AuditLevel::Request, &record);
        assert_eq!(e["apiVersion"], "audit.k8s.io/v1");
        assert_eq!(e["stage"], "ResponseComplete");
        assert_eq!(e["user"]["groups"], json!(["dev", "system:authenticated"]));
        assert_eq!(e["objectRef"]["subresource"], "scale");
        assert_eq!(e["requestReceivedTimestamp"], "2026-12-06T10:00:00.123456Z");
        assert_eq!(e["requestObject"]["spec"]["replicas"], 5);
        assert!(event(AuditLevel::Metadata, &record).get("requestObject").is_none());
    }
}
