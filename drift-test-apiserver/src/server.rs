//! The HTTP server: authentication, the admin endpoints, discovery, fault injection and
//! dispatch to the resource handlers; and [`TestApiServer`], the handle tests hold.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State as AxumState};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::admission::Admission;
use crate::audit::{AuditLevel, AuditLog, AuditRecord, ObjectRef, StaticUser, UserInfo};
use crate::faults::{FaultAction, Faults, RequestInfo};
use crate::handlers::{self, Ctx};
use crate::status::{ApiError, json_response};
use crate::store::{Change, State};

/// How to start a server.
#[derive(Debug, Clone)]
pub struct Options {
    /// Address to listen on; port 0 picks a free port.
    pub listen: SocketAddr,
    /// Require `Authorization: Bearer <token>` (401 otherwise).
    pub token: Option<String>,
    /// Faults active from the start.
    pub faults: Faults,
    /// Simulated mutating admission (rules that stand in for webhooks) from the start.
    pub admission: Admission,
    /// Where to write the kubeconfig; a file in a temporary folder owned by the handle if None.
    pub kubeconfig: Option<PathBuf>,
    /// How many changes are kept for watches; older resourceVersions get 410 Gone.
    pub history_limit: usize,
    /// Interval of BOOKMARK events on watches that allow them.
    pub bookmark_interval: Duration,
    /// Serve HTTPS with the crate's fixed test certificate (for 127.0.0.1 and localhost); the
    /// kubeconfig then carries the test CA. Needed for kubectl to send a token.
    pub tls: bool,
    /// Named users by bearer token (kube-apiserver's `--token-auth-file`); with any, a request
    /// needs one of their tokens or `token`. The audit log names the user.
    pub users: Vec<StaticUser>,
    /// Write a Kubernetes audit log (JSON lines of `audit.k8s.io/v1` events) to this file.
    pub audit_log: Option<PathBuf>,
    /// The level of every event of the audit log.
    pub audit_level: AuditLevel,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            token: None,
            faults: Faults::default(),
            admission: Admission::default(),
            kubeconfig: None,
            history_limit: 100_000,
            bookmark_interval: Duration::from_secs(60),
            tls: false,
            users: Vec::new(),
            audit_log: None,
            audit_level: AuditLevel::Metadata,
        }
    }
}

/// One request as the server received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    /// HTTP method.
    pub method: String,
    /// Path.
    pub path: String,
    /// Query parameters.
    pub query: BTreeMap<String, String>,
    /// User-Agent header.
    pub user_agent: String,
    /// Content-Type header.
    pub content_type: String,
    /// Accept header.
    pub accept: String,
}

/// The requests held by `hold` faults: the n-th held request is served once `released >= n`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Holds {
    /// Requests that reached a hold.
    pub arrived: u64,
    /// Requests released.
    pub released: u64,
}

/// State shared by all requests.
#[derive(Debug)]
pub struct Shared {
    /// Objects and history.
    pub state: Mutex<State>,
    /// Changes, for watches.
    pub tx: broadcast::Sender<Arc<Change>>,
    /// Required bearer token (replaced by [`TestApiServer::rotate_token`]).
    pub token: Mutex<Option<String>>,
    /// Named users by token.
    pub users: Vec<StaticUser>,
    /// The audit log, when one is written.
    pub audit: Option<AuditLog>,
    /// Active faults.
    pub faults: Mutex<Faults>,
    /// Active mutation rules. Taken while the state is locked, never the other way round.
    pub admission: Mutex<Admission>,
    /// Bookmark interval.
    pub bookmark_interval: Duration,
    /// Requests received.
    pub requests: Mutex<Vec<RecordedRequest>>,
    /// Becomes true when the server stops.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// Bumped to close every open watch (each watch holds a receiver).
    pub drop_watches: tokio::sync::watch::Sender<u64>,
    /// Requests held by a `hold` fault: how many arrived, how many were released.
    pub holds: tokio::sync::watch::Sender<Holds>,
    /// host:port.
    pub address: String,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn not_found() -> Response {
    ApiError::new(404, "NotFound", "the server could not find the requested resource").into_response()
}

fn verb_of(method: &Method, has_name: bool, watch: bool) -> &'static str {
    match (method.as_str(), has_name) {
        ("GET", true) => "get",
        ("GET", false) if watch => "watch",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unknown",
    }
}

/// The user of a request: the static user of its bearer token, the administrator of
/// `Options::token`, or anonymous when the server requires no token; `None` is 401.
fn authenticate(shared: &Shared, authorization: &str) -> Option<UserInfo> {
    let bearer = authorization.strip_prefix("Bearer ");
    if let Some(user) = bearer.and_then(|t| shared.users.iter().find(|u| u.token == t)) {
        return Some(user.info());
    }
    match &*lock(&shared.token) {
        Some(token) if bearer == Some(token.as_str()) => Some(UserInfo {
            username: "drift-test-admin".into(),
            uid: String::new(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
        }),
        None if shared.users.is_empty() => Some(UserInfo::anonymous()),
        _ => None,
    }
}

/// The object of a resource path, for the audit log.
fn object_ref(path: &str) -> Option<ObjectRef> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    let r = handlers::parse_resource_path(group, version, rest)?;
    Some(ObjectRef {
        resource: r.plural,
        namespace: r.namespace,
        name: r.name,
        api_group: r.group,
        api_version: r.version,
        subresource: r.subresource,
    })
}

async fn handle(AxumState(shared): AxumState<Arc<Shared>>, req: Request) -> Response {
    let received = chrono::Utc::now();
    let (parts, body) = req.into_parts();
    let body = match axum::body::to_bytes(body, 256 * 1024 * 1024).await {
        Ok(b) => b,
        Err(e) => return ApiError::bad_request(e.to_string()).into_response(),
    };
    let path = parts.uri.path();
    let header = |h: header::HeaderName| parts.headers.get(h).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let user = authenticate(&shared, &header(header::AUTHORIZATION));
    let health = matches!(path, "/healthz" | "/livez" | "/readyz");
    let Some(audit) = shared.audit.as_ref().filter(|_| !health) else {
        return handle_as(&shared, &parts, body, user).await;
    };
    let object = object_ref(path);
    let watch = parts.uri.query().is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    let verb = match &object {
        Some(o) => verb_of(&parts.method, o.name.is_some(), watch).to_owned(),
        None => parts.method.as_str().to_ascii_lowercase(),
    };
    let request_body = if matches!(verb.as_str(), "create" | "update" | "patch") && !body.is_empty() {
        serde_json::from_slice::<Value>(&body)
            .ok()
            .or_else(|| serde_saphyr::from_str::<Value>(&String::from_utf8_lossy(&body)).ok())
    } else {
        None
    };
    let source_ip =
        parts.extensions.get::<axum::extract::ConnectInfo<Peer>>().map(|c| c.0.0.ip().to_string()).unwrap_or_default();
    let record = AuditRecord {
        request_uri: parts.uri.path_and_query().map(|p| p.as_str().to_owned()).unwrap_or_default(),
        verb,
        user: user.clone().unwrap_or_else(|| UserInfo { username: String::new(), uid: String::new(), groups: vec![] }),
        source_ip,
        user_agent: header(header::USER_AGENT),
        object,
        code: 0,
        received,
        stage_time: received,
        streaming: watch,
        body: request_body,
    };
    let response = handle_as(&shared, &parts, body, user).await;
    audit.write(&AuditRecord { code: response.status().as_u16(), stage_time: chrono::Utc::now(), ..record });
    response
}

async fn handle_as(
    shared: &Arc<Shared>,
    parts: &axum::http::request::Parts,
    body: axum::body::Bytes,
    user: Option<UserInfo>,
) -> Response {
    let shared = shared.clone();
    let query: BTreeMap<String, String> = axum::extract::Query::<Vec<(String, String)>>::try_from_uri(&parts.uri)
        .map(|q| q.0.into_iter().collect())
        .unwrap_or_default();
    let header = |h: header::HeaderName| parts.headers.get(h).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let path = parts.uri.path().to_owned();
    tracing::debug!(method = %parts.method, path = %path, query = ?query, "request");
    lock(&shared.requests).push(RecordedRequest {
        method: parts.method.to_string(),
        path: path.clone(),
        query: query.clone(),
        user_agent: header(header::USER_AGENT),
        content_type: header(header::CONTENT_TYPE),
        accept: header(header::ACCEPT),
    });
    if matches!(path.as_str(), "/healthz" | "/livez" | "/readyz") {
        return (StatusCode::OK, "ok").into_response();
    }
    if user.is_none() {
        return ApiError::new(401, "Unauthorized", "Unauthorized").into_response();
    }
    if let Some(rest) = path.strip_prefix("/_admin/") {
        return admin(&shared, &parts.method, rest, &body);
    }
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let types = lock(&shared.state).types.clone();
    let (group, version, rest) = match segs.as_slice() {
        ["version"] => return json_response(StatusCode::OK, &crate::discovery::version()),
        ["api"] => {
            return json_response(StatusCode::OK, &crate::discovery::core_versions(&shared.address));
        }
        ["apis"] => return json_response(StatusCode::OK, &crate::discovery::group_list(&types)),
        ["openapi", rest @ ..] => {
            let crds = {
                let st = lock(&shared.state);
                let key = ("apiextensions.k8s.io".to_owned(), "customresourcedefinitions".to_owned());
                crate::openapi::crd_schemas(st.objects.get(&key).into_iter().flat_map(|m| m.values()))
            };
            return crate::openapi::handle(&types, &crds, rest, &query, &parts.headers);
        }
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", g] => {
            return match crate::discovery::group(&types, g) {
                Some(v) => json_response(StatusCode::OK, &v),
                None => not_found(),
            };
        }
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return not_found(),
    };
    if rest.is_empty() {
        return match crate::discovery::resource_list(&types, group, version) {
            Some(v) => json_response(StatusCode::OK, &v),
            None => not_found(),
        };
    }
    let Some(rreq) = handlers::parse_resource_path(group, version, rest) else {
        return not_found();
    };
    let Some(rt) = types
        .iter()
        .find(|t| t.group == group && t.plural == rreq.plural && t.versions.iter().any(|v| v == version))
        .cloned()
    else {
        return not_found();
    };
    let watch = query.get("watch").is_some_and(|w| w == "true" || w == "1");
    let info = RequestInfo {
        verb: verb_of(&parts.method, rreq.name.is_some(), watch).to_owned(),
        group: rt.group.clone(),
        resource: rt.plural.clone(),
        kind: rt.kind.clone(),
        namespace: rreq.namespace.clone().unwrap_or_default(),
        name: rreq.name.clone().unwrap_or_default(),
        subresource: rreq.subresource.clone().unwrap_or_default(),
        path: path.clone(),
        has_version: query.get("resourceVersion").is_some_and(|v| !v.is_empty() && v != "0")
            || query.get("continue").is_some_and(|c| !c.is_empty()),
        dry_run: query.get("dryRun").is_some_and(|d| d == "All"),
    };
    let actions = lock(&shared.faults).take(&info);
    let mut drop_after = None;
    let mut expired = false;
    for a in actions {
        match a {
            FaultAction::Latency { millis } => {
                tokio::time::sleep(Duration::from_millis(millis)).await;
            }
            FaultAction::Error { code, retry_after_seconds, message } => {
                return ApiError::injected(code, message, retry_after_seconds).into_response();
            }
            FaultAction::DropWatch { after_events } => drop_after = Some(after_events),
            FaultAction::Expired => expired = true,
            FaultAction::Hold => {
                let mut ticket = 0;
                shared.holds.send_modify(|h| {
                    h.arrived += 1;
                    ticket = h.arrived;
                });
                tracing::debug!(ticket, path = %path, "request held");
                let mut rx = shared.holds.subscribe();
                // The sender lives in `shared`: the wait ends with a release.
                let _ = rx.wait_for(|h| h.released >= ticket).await;
            }
        }
    }
    let ctx = Ctx {
        shared: &shared,
        req: rreq,
        rt,
        query,
        headers: parts.headers.clone(),
        drop_after,
        expired,
        warnings: Default::default(),
    };
    handlers::dispatch(ctx, &parts.method, &body).await
}

fn admin(shared: &Arc<Shared>, method: &Method, rest: &str, body: &[u8]) -> Response {
    match (method.as_str(), rest) {
        ("GET", "faults") => {
            let f = lock(&shared.faults).clone();
            json_response(StatusCode::OK, &serde_json::to_value(f).unwrap_or(Value::Null))
        }
        ("POST" | "PUT", "faults") => {
            let text = String::from_utf8_lossy(body);
            match Faults::from_yaml(&text) {
                Ok(f) => {
                    *lock(&shared.faults) = f.clone();
                    json_response(StatusCode::OK, &serde_json::to_value(f).unwrap_or(Value::Null))
                }
                Err(e) => ApiError::bad_request(format!("invalid faults: {e}")).into_response(),
            }
        }
        ("DELETE", "faults") => {
            *lock(&shared.faults) = Faults::default();
            json_response(StatusCode::OK, &json!({"faults": []}))
        }
        ("GET", "held") => json_response(StatusCode::OK, &json!(*shared.holds.borrow())),
        ("POST", "release") => {
            shared.holds.send_modify(|h| h.released = h.arrived);
            json_response(StatusCode::OK, &json!(*shared.holds.borrow()))
        }
        ("GET", "admission") => {
            let a = lock(&shared.admission).clone();
            json_response(StatusCode::OK, &serde_json::to_value(a).unwrap_or(Value::Null))
        }
        ("POST" | "PUT", "admission") => match Admission::from_yaml(&String::from_utf8_lossy(body)) {
            Ok(a) => {
                *lock(&shared.admission) = a.clone();
                json_response(StatusCode::OK, &serde_json::to_value(a).unwrap_or(Value::Null))
            }
            Err(e) => ApiError::bad_request(format!("invalid admission rules: {e}")).into_response(),
        },
        ("DELETE", "admission") => {
            *lock(&shared.admission) = Admission::default();
            json_response(StatusCode::OK, &json!({"mutations": []}))
        }
        ("POST", "objects") => {
            // A single object, a List (`items`), or a JSON array: created in order.
            let parsed: Result<Value, String> = serde_json::from_slice(body).or_else(|_| {
                serde_saphyr::from_str::<Value>(&String::from_utf8_lossy(body)).map_err(|e| e.to_string())
            });
            let doc = match parsed {
                Ok(v) => v,
                Err(e) => return ApiError::bad_request(format!("invalid objects: {e}")).into_response(),
            };
            let items = match doc {
                Value::Array(items) => items,
                Value::Object(ref m) if m.get("items").is_some_and(Value::is_array) => {
                    m.get("items").and_then(Value::as_array).cloned().unwrap_or_default()
                }
                other => vec![other],
            };
            let mut created = 0usize;
            for item in &items {
                if let Err(e) = create_object(shared, item) {
                    return e.into_response();
                }
                created += 1;
            }
            json_response(StatusCode::CREATED, &json!({"created": created}))
        }
        ("POST", "drop-watches") => json_response(StatusCode::OK, &json!({"dropped": drop_watches(shared)})),
        ("POST", "compact") => {
            let mut st = lock(&shared.state);
            st.compact();
            json_response(StatusCode::OK, &json!({"compactedBelow": st.compacted_below}))
        }
        _ => not_found(),
    }
}

fn drop_watches(shared: &Shared) -> usize {
    let open = shared.drop_watches.receiver_count();
    shared.drop_watches.send_modify(|n| *n += 1);
    open
}

/// Create an object through the POST handler, as the field manager `drift-test-apiserver`.
fn create_object(shared: &Arc<Shared>, object: &Value) -> Result<Value, ApiError> {
    let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let rt = lock(&shared.state)
        .types
        .iter()
        .find(|t| t.group == group && t.kind == kind && t.versions.iter().any(|v| v == version))
        .cloned()
        .ok_or_else(|| ApiError::bad_request(format!("no resource for {api_version} {kind}")))?;
    let namespace = object.get("metadata").and_then(|m| m.get("namespace")).and_then(Value::as_str).map(str::to_owned);
    let mut headers = axum::http::HeaderMap::new();
    headers.insert(header::USER_AGENT, axum::http::HeaderValue::from_static("drift-test-apiserver"));
    let ctx = Ctx {
        shared,
        req: handlers::ResourceRequest {
            group: group.to_owned(),
            version: version.to_owned(),
            plural: rt.plural.clone(),
            namespace,
            name: None,
            subresource: None,
        },
        rt,
        query: BTreeMap::new(),
        headers,
        drop_after: None,
        expired: false,
        warnings: Default::default(),
    };
    let body = serde_json::to_vec(object).map_err(|e| ApiError::bad_request(e.to_string()))?;
    handlers::create(&ctx, &body).map(|(_, v)| v)
}

/// The address of the client of a connection (the audit log's `sourceIPs`).
#[derive(Debug, Clone, Copy)]
struct Peer(SocketAddr);

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, tokio::net::TcpListener>> for Peer {
    fn connect_info(stream: axum::serve::IncomingStream<'_, tokio::net::TcpListener>) -> Self {
        Peer(*stream.remote_addr())
    }
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, crate::tls::TlsListener>> for Peer {
    fn connect_info(stream: axum::serve::IncomingStream<'_, crate::tls::TlsListener>) -> Self {
        Peer(*stream.remote_addr())
    }
}

/// Serve until the stop signal, then give open connections a short grace period.
async fn serve<L>(listener: L, app: axum::Router, stop: tokio::sync::watch::Receiver<bool>)
where
    L: axum::serve::Listener<Addr = SocketAddr>,
    for<'a> Peer: axum::extract::connect_info::Connected<axum::serve::IncomingStream<'a, L>>,
{
    let mut stop1 = stop.clone();
    let mut stop2 = stop;
    let app = app.into_make_service_with_connect_info::<Peer>();
    let server = axum::serve(listener, app).with_graceful_shutdown(async move {
        let _ = stop1.wait_for(|s| *s).await;
    });
    tokio::select! {
        r = server => {
            if let Err(e) = r {
                tracing::error!(error = %e, "test API server failed");
            }
        }
        _ = async {
            let _ = stop2.wait_for(|s| *s).await;
            // Connections still open after a grace period are cut.
            tokio::time::sleep(Duration::from_secs(2)).await;
        } => {}
    }
}

/// Error starting a server.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Binding or writing the kubeconfig failed.
    #[error("test API server: {0}")]
    Io(#[from] std::io::Error),
}

/// A running test API server. Dropping it stops the server.
#[derive(Debug)]
pub struct TestApiServer {
    addr: SocketAddr,
    scheme: &'static str,
    shared: Arc<Shared>,
    kubeconfig: PathBuf,
    _dir: Option<tempfile::TempDir>,
    stop: Option<tokio::sync::watch::Sender<bool>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestApiServer {
    /// Start a server on its own thread and runtime (so that tests may block, for example on
    /// a `kubectl` child process, while it serves). Returns once it accepts connections.
    pub fn start(opts: Options) -> Result<TestApiServer, StartError> {
        let listener = std::net::TcpListener::bind(opts.listen)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let (tx, _) = broadcast::channel(16 * 1024);
        let shared = Arc::new(Shared {
            state: Mutex::new(State::new(opts.history_limit.max(1))),
            tx,
            token: Mutex::new(opts.token.clone()),
            users: opts.users.clone(),
            audit: opts.audit_log.as_deref().map(|p| AuditLog::open(p, opts.audit_level)).transpose()?,
            faults: Mutex::new(opts.faults.clone()),
            admission: Mutex::new(opts.admission.clone()),
            bookmark_interval: opts.bookmark_interval,
            requests: Mutex::new(Vec::new()),
            shutdown: stop_rx.clone(),
            drop_watches: tokio::sync::watch::Sender::new(0),
            holds: tokio::sync::watch::Sender::new(Holds::default()),
            address: addr.to_string(),
        });
        let (dir, kubeconfig) = match &opts.kubeconfig {
            Some(p) => (None, p.clone()),
            None => {
                let d = tempfile::tempdir()?;
                let p = d.path().join("kubeconfig");
                (Some(d), p)
            }
        };
        let tls = if opts.tls { Some(crate::tls::server_config()?) } else { None };
        let scheme = if opts.tls { "https" } else { "http" };
        crate::kubeconfig::write(
            &kubeconfig,
            &format!("{scheme}://{addr}"),
            opts.token.as_deref().or(opts.users.first().map(|u| u.token.as_str())),
            opts.tls.then_some(crate::tls::CA_PEM),
        )?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .thread_name("drift-test-apiserver")
            .build()?;
        let app = axum::Router::new().fallback(handle).with_state(shared.clone());
        let thread = std::thread::Builder::new().name("drift-test-apiserver".into()).spawn(move || {
            rt.block_on(async move {
                let listener = match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::error!(error = %e, "test API server cannot listen");
                        return;
                    }
                };
                match tls {
                    Some(config) => serve(crate::tls::TlsListener::new(listener, config), app, stop_rx).await,
                    None => serve(listener, app, stop_rx).await,
                }
            });
            rt.shutdown_background();
        })?;
        Ok(TestApiServer { addr, scheme, shared, kubeconfig, _dir: dir, stop: Some(stop_tx), thread: Some(thread) })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` (`https://` with `Options::tls`).
    pub fn url(&self) -> String {
        format!("{}://{}", self.scheme, self.addr)
    }

    /// The kubeconfig written for it.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The audit log file, when `Options::audit_log` asked for one.
    pub fn audit_log_path(&self) -> Option<&Path> {
        self.shared.audit.as_ref().map(AuditLog::path)
    }

    /// Replaces the administrator's bearer token ([`Options::token`]), as a rotated service
    /// account token: requests with the old one are refused (401) from now on, watches already
    /// open go on; the kubeconfig is written again with the new one.
    pub fn rotate_token(&self, token: &str) -> std::io::Result<()> {
        *lock(&self.shared.token) = Some(token.to_owned());
        crate::kubeconfig::write(
            &self.kubeconfig,
            &self.url(),
            Some(token),
            (self.scheme == "https").then_some(crate::tls::CA_PEM),
        )
    }

    /// Replace the active faults.
    pub fn set_faults(&self, faults: Faults) {
        *lock(&self.shared.faults) = faults;
    }

    /// Remove all faults.
    pub fn clear_faults(&self) {
        self.set_faults(Faults::default());
    }

    /// Waits until `n` requests in all, counted from the server's start, have reached a `hold`
    /// fault (held now or released since; [`TestApiServer::holds`] says how many so far). Blocks the calling thread: for a `#[test]` that runs the client elsewhere (a
    /// child process, another thread); [`TestApiServer::held`] is the same for async tests.
    pub fn wait_held(&self, n: u64) {
        futures::executor::block_on(self.held(n));
    }

    /// Waits until `n` requests in all have reached a `hold` fault.
    pub async fn held(&self, n: u64) {
        let mut rx = self.shared.holds.subscribe();
        // The sender lives as long as the server.
        let _ = rx.wait_for(|h| h.arrived >= n).await;
    }

    /// How many requests have reached a `hold` fault so far, and how many were released.
    pub fn holds(&self) -> Holds {
        *self.shared.holds.borrow()
    }

    /// Releases every request held now: each is served as if it had just arrived.
    pub fn release_held(&self) {
        self.shared.holds.send_modify(|h| h.released = h.arrived);
    }

    /// Replace the active mutation rules (simulated mutating admission).
    pub fn set_admission(&self, admission: Admission) {
        *lock(&self.shared.admission) = admission;
    }

    /// Remove all mutation rules.
    pub fn clear_admission(&self) {
        self.set_admission(Admission::default());
    }

    /// Forget the change history: watches and continue tokens from any earlier
    /// resourceVersion get 410 Gone.
    pub fn compact(&self) {
        lock(&self.shared.state).compact();
    }

    /// Closes every watch stream open now, as a lost connection or an API server restart would;
    /// clients resume from their last resourceVersion. Returns how many were closed.
    pub fn drop_watches(&self) -> usize {
        drop_watches(&self.shared)
    }

    /// The current (last handed out) resourceVersion.
    pub fn resource_version(&self) -> u64 {
        lock(&self.shared.state).rv
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// A stored object, as the server holds it (None if absent). `group` is `""` for core.
    pub fn object(&self, group: &str, plural: &str, namespace: &str, name: &str) -> Option<Value> {
        lock(&self.shared.state)
            .get(&(group.to_owned(), plural.to_owned()), &(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    /// Create an object as a `POST` by the field manager `drift-test-apiserver` would (defaults,
    /// managedFields, events for watches), without HTTP: for seeding large fixtures quickly.
    /// The object needs apiVersion, kind, metadata.name and, if namespaced, metadata.namespace.
    pub fn create_object(&self, object: &Value) -> Result<Value, ApiError> {
        create_object(&self.shared, object)
    }

    /// Stop the server and wait for its thread (at most the grace period).
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(true);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for TestApiServer {
    fn drop(&mut self) {
        self.stop_now();
    }
}
