//! Serving the API over TCP with bounds for slow and odd clients (docs/security.md, "Slow and
//! odd clients"), and the `Host` names it answers to.
//!
//! - **Header-read timeout** ([`ServerLimits::header_read_timeout`], default 10 s): a request's
//!   head (request line and headers) must arrive whole within it, counted from when the server
//!   starts waiting for it: when the connection is accepted, or when the previous answer on a
//!   kept-alive connection was sent. A client that sends its headers slowly, one that connects
//!   and sends nothing, and a kept-alive connection left unused are closed after it.
//! - **Idle timeout** ([`ServerLimits::idle_timeout`], default 30 s): a connection on which no
//!   byte is read or written for this long is closed, except while a handler works (a
//!   `POST /scan?wait=true` may take minutes without a byte); waiting for a request's body and
//!   writing an answer the client does not read count as idle.
//! - **Connections** ([`ServerLimits::max_connections`], default 1,024): at most this many are
//!   served at once; more wait in the kernel's accept queue until one closes.
//! - **Host names** ([`AllowedHosts`]): a request whose `Host` (or absolute request target)
//!   names a host the server does not answer to is answered 421 Misdirected Request, so that a
//!   page on another site that rebinds its DNS name to this server cannot read the API.
//!
//! [`serve`] is what `drift serve` (through `drift-runtime`) runs; [`crate::router`] applies the
//! `Host` check of its state ([`crate::ApiState::with_allowed_hosts`]).

use std::future::Future;
use std::net::{IpAddr, Ipv6Addr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::StatusCode;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Instant;

use crate::error::ApiError;

/// The bounds of the HTTP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLimits {
    /// How long a request's head may take to arrive whole, from when the server waits for it.
    pub header_read_timeout: Duration,
    /// How long a connection may go without a byte read or written while no handler works.
    pub idle_timeout: Duration,
    /// How many connections are served at once.
    pub max_connections: usize,
}

/// Default of [`ServerLimits::header_read_timeout`].
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of [`ServerLimits::idle_timeout`].
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Default of [`ServerLimits::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

impl ServerLimits {
    /// Checks the bounds: both timeouts from 10 ms to 1 hour, connections from 1 to 1,000,000.
    pub fn validate(&self) -> drift_model::Result<()> {
        let range = Duration::from_millis(10)..=Duration::from_secs(3600);
        if !range.contains(&self.header_read_timeout) {
            return Err(drift_model::Error::config("header_read_timeout must be between 10ms and 1h"));
        }
        if !range.contains(&self.idle_timeout) {
            return Err(drift_model::Error::config("idle_timeout must be between 10ms and 1h"));
        }
        if !(1..=1_000_000).contains(&self.max_connections) {
            return Err(drift_model::Error::config("max_connections must be between 1 and 1000000"));
        }
        Ok(())
    }
}

/// The `Host` names the API answers to; any other is answered 421.
///
/// Always allowed, since a page elsewhere cannot make a browser send them for its own DNS name:
/// an IP address (what `api.listen` is; `0.0.0.0` listens on every address of the host),
/// `localhost`, a name of one label (a Service of the pod's namespace, `drift-detector`), and
/// the names of Kubernetes Services (`NAME.NAMESPACE.svc`, `NAME.NAMESPACE.svc.cluster.local`,
/// and `NAME.NAMESPACE` for the pod's own namespace). Any other name must be listed: exactly
/// (`drift.example.com`) or as a pattern of its sub-domains (`*.example.com`); `*` allows any
/// name. Names are compared in lower case, without a trailing dot or a port. A request without
/// a `Host` (HTTP/1.0) is answered.
///
/// ```
/// use drift_api::server::AllowedHosts;
/// let hosts = AllowedHosts::new(&["drift.example.com".to_owned()], Some("drift")).unwrap();
/// assert!(hosts.allows("drift.example.com:443"));
/// assert!(hosts.allows("127.0.0.1:8080") && hosts.allows("[::1]:8080") && hosts.allows("localhost"));
/// assert!(hosts.allows("drift-detector.drift") && hosts.allows("drift-detector.drift.svc.cluster.local"));
/// assert!(!hosts.allows("attacker.example") && !hosts.allows("drift-detector.other"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedHosts {
    /// Listed names and `*.suffix` patterns (stored as `.suffix`), lower case.
    names: Vec<String>,
    /// The pod's namespace, for `NAME.NAMESPACE`.
    namespace: Option<String>,
    /// `*` was listed.
    any: bool,
}

impl AllowedHosts {
    /// The names always allowed, these `names` (`*`, `*.example.com` or `drift.example.com`)
    /// and `NAME.namespace` for the pod's namespace. A name that is not a host name is an error.
    pub fn new(names: &[String], namespace: Option<&str>) -> drift_model::Result<Self> {
        let mut out = AllowedHosts {
            names: Vec::new(),
            namespace: namespace.filter(|n| !n.is_empty()).map(str::to_ascii_lowercase),
            any: false,
        };
        for name in names {
            let lower = name.trim_end_matches('.').to_ascii_lowercase();
            if lower == "*" {
                out.any = true;
                continue;
            }
            let (pattern, bare) = match lower.strip_prefix("*.") {
                Some(rest) => (true, rest),
                None => (false, lower.as_str()),
            };
            let valid = !bare.is_empty()
                && bare.len() <= 253
                && bare.split('.').all(|l| {
                    !l.is_empty()
                        && l.len() <= 63
                        && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                });
            if !valid {
                return Err(drift_model::Error::config(format!(
                    "allowed host {name:?} is not a host name (letters, digits, `-`, `_` and dots; `*.` in front for its \
                     sub-domains; `*` for any; no port)"
                )));
            }
            out.names.push(if pattern { format!(".{bare}") } else { bare.to_owned() });
        }
        Ok(out)
    }

    /// Every name (`*`).
    pub fn any() -> Self {
        AllowedHosts { any: true, ..AllowedHosts::default() }
    }

    /// Whether a `Host` header value (a name or an address, with or without a port) is allowed.
    pub fn allows(&self, host: &str) -> bool {
        if self.any {
            return true;
        }
        let name = if let Some(rest) = host.strip_prefix('[') {
            // An IPv6 address: `[::1]` or `[::1]:8080`.
            let Some((inside, after)) = rest.split_once(']') else { return false };
            let port_ok =
                after.is_empty() || after.strip_prefix(':').is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()));
            return port_ok && inside.parse::<Ipv6Addr>().is_ok();
        } else {
            match host.rsplit_once(':') {
                Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
                Some(_) => return false,
                None => host,
            }
        };
        let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b)) {
            return false;
        }
        if name.parse::<IpAddr>().is_ok() || name == "localhost" || !name.contains('.') {
            return true;
        }
        if name.ends_with(".svc") || name.ends_with(".svc.cluster.local") {
            return true;
        }
        if let Some(ns) = &self.namespace
            && name.strip_suffix(ns.as_str()).and_then(|s| s.strip_suffix('.')).is_some_and(|s| !s.contains('.'))
        {
            return true;
        }
        self.names.iter().any(|n| if n.starts_with('.') { name.ends_with(n.as_str()) } else { *n == name })
    }

    /// The check of one request: `Err` (421) when its `Host` or the authority of its absolute
    /// request target names a host that is not allowed.
    pub(crate) fn check(&self, request: &Request) -> Result<(), ApiError> {
        let mut names = Vec::with_capacity(2);
        if let Some(value) = request.headers().get(axum::http::header::HOST) {
            names.push(value.to_str().ok());
        }
        if let Some(authority) = request.uri().authority() {
            names.push(Some(authority.as_str()));
        }
        for name in names {
            if !name.is_some_and(|n| self.allows(n)) {
                tracing::debug!(
                    host = name.map(|n| n.chars().take(100).collect::<String>()),
                    "request for a host name this server does not answer to"
                );
                return Err(ApiError::new(
                    StatusCode::MISDIRECTED_REQUEST,
                    "this server does not answer to that Host name (api.allowed_hosts lists the names it answers to)",
                ));
            }
        }
        Ok(())
    }
}

/// Serves `app` on `listener` within `limits` until `shutdown` completes; then stops accepting,
/// lets each connection finish its request in flight and returns once every connection closed.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ServerLimits,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let (stop_tx, stop_rx) = watch::channel(false);
    let (open_tx, open_rx) = watch::channel(());
    let limits = Arc::new(limits);
    tokio::pin!(shutdown);
    let mut last_warning: Option<Instant> = None;
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        match accepted {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                tokio::spawn(connection(stream, app.clone(), limits.clone(), permit, stop_rx.clone(), open_rx.clone()));
            }
            // A client that gave up before its connection was accepted.
            Err(e)
                if matches!(e.kind(), std::io::ErrorKind::ConnectionAborted | std::io::ErrorKind::ConnectionReset) => {}
            Err(e) => {
                // Out of file descriptors, most likely: wait a little, say it at most every 10 s.
                if last_warning.is_none_or(|at| at.elapsed() > Duration::from_secs(10)) {
                    tracing::warn!(error = %e, "cannot accept a connection; retrying");
                    last_warning = Some(Instant::now());
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    drop(listener);
    stop_tx.send_replace(true);
    drop(open_rx);
    open_tx.closed().await;
    Ok(())
}

/// One connection: HTTP/1.1 with hyper's header-read timeout, and the idle watch.
async fn connection(
    stream: TcpStream,
    app: Router,
    limits: Arc<ServerLimits>,
    _permit: OwnedSemaphorePermit,
    mut stop: watch::Receiver<bool>,
    _open: watch::Receiver<()>,
) {
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched { inner: stream, activity: activity.clone() });
    let service_activity = activity.clone();
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let activity = service_activity.clone();
        let mut app = app.clone();
        async move {
            let _working = Working::new(activity.clone());
            let request = request.map(|body| Body::new(WatchedBody { inner: body, activity }));
            tower::Service::call(&mut app, request).await
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    let mut stopping = false;
    let mut wake = activity.last() + limits.idle_timeout;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::trace!(error = %e, "connection ended");
                }
                return;
            }
            () = tokio::time::sleep_until(wake) => {
                let now = Instant::now();
                if activity.working() {
                    wake = now + limits.idle_timeout;
                } else if now >= activity.last() + limits.idle_timeout {
                    tracing::trace!("closing a connection idle for the idle timeout");
                    return;
                } else {
                    wake = activity.last() + limits.idle_timeout;
                }
            }
            _ = stop.changed(), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// When a connection last moved a byte, and whether a handler works for it.
#[derive(Debug)]
struct Activity {
    start: Instant,
    /// Milliseconds from `start` to the last byte read or written (or the end of a handler).
    last_ms: AtomicU64,
    /// Handlers running.
    handlers: AtomicUsize,
    /// A handler waits for the request's body (which is the client's time, not the handler's).
    waiting_for_body: AtomicBool,
}

impl Activity {
    fn new() -> Self {
        Activity {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
            handlers: AtomicUsize::new(0),
            waiting_for_body: AtomicBool::new(false),
        }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.fetch_max(ms, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed))
    }

    fn working(&self) -> bool {
        self.handlers.load(Ordering::Relaxed) > 0 && !self.waiting_for_body.load(Ordering::Relaxed)
    }
}

/// A handler at work: counted while it lives; its end counts as activity.
struct Working(Arc<Activity>);

impl Working {
    fn new(activity: Arc<Activity>) -> Self {
        activity.handlers.fetch_add(1, Ordering::Relaxed);
        activity.touch();
        Working(activity)
    }
}

impl Drop for Working {
    fn drop(&mut self) {
        self.0.handlers.fetch_sub(1, Ordering::Relaxed);
        self.0.waiting_for_body.store(false, Ordering::Relaxed);
        self.0.touch();
    }
}

/// The TCP stream, noting each byte read or written.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A request's body, noting when its handler waits for it.
struct WatchedBody {
    inner: Incoming,
    activity: Arc<Activity>,
}

impl hyper::body::Body for WatchedBody {
    type Data = hyper::body::Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        self.activity.waiting_for_body.store(polled.is_pending(), Ordering::Relaxed);
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_allowed_by_default_and_by_list() {
        let none = AllowedHosts::default();
        for ok in [
            "127.0.0.1",
            "127.0.0.1:8080",
            "10.1.2.3:80",
            "[::1]",
            "[::1]:8080",
            "[fe80::1]:1",
            "localhost",
            "LOCALHOST:8080",
            "localhost.",
            "drift-detector",
            "drift-detector:8080",
            "drift-detector.drift.svc",
            "drift-detector.drift.svc.cluster.local:8080",
            "Drift-Detector.Drift.SVC.Cluster.Local.",
        ] {
            assert!(none.allows(ok), "{ok}");
        }
        for bad in [
            "attacker.example",
            "attacker.example:8080",
            "127.0.0.1.nip.io",
            "drift.svc.attacker.example",
            "drift-detector.drift",
            "",
            ":8080",
            "[::1",
            "[::1]x",
            "[evil.example]",
            "localhost:http",
            "a b",
        ] {
            assert!(!none.allows(bad), "{bad:?}");
        }
        let listed = AllowedHosts::new(&["drift.example.com".into(), "*.corp.example".into()], Some("drift")).unwrap();
        for ok in ["drift.example.com", "DRIFT.example.com.:443", "a.corp.example", "a.b.corp.example", "x.drift"] {
            assert!(listed.allows(ok), "{ok}");
        }
        for bad in ["example.com", "corp.example", "xcorp.example", "x.y.drift", "x.other", "drift.example.com.evil"] {
            assert!(!listed.allows(bad), "{bad}");
        }
        assert!(AllowedHosts::any().allows("anything.example"));
        assert!(AllowedHosts::new(&["*".into()], None).unwrap().allows("x.example"));
        for bad in ["drift.example.com:8080", "http://x", "a..b", "a b.c", "", "*.*.x"] {
            assert!(AllowedHosts::new(&[bad.to_owned()], None).is_err(), "{bad}");
        }
    }

    #[test]
    fn limits_are_checked() {
        ServerLimits::default().validate().unwrap();
        let zero = ServerLimits { idle_timeout: Duration::ZERO, ..ServerLimits::default() };
        assert!(zero.validate().is_err());
        let none = ServerLimits { max_connections: 0, ..ServerLimits::default() };
        assert!(none.validate().is_err());
    }
}
