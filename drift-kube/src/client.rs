//! The HTTP client under the kube client: kube's own layers (base URI, authentication, extra
//! headers) over a hyper client whose connection buffers are bounded.
//!
//! kube builds its hyper client with hyper's defaults, and those cost a watching detector most
//! of its memory: an HTTP/1 connection's read buffer grows to about 400 KiB while it reads a
//! list page and keeps that size for the life of the connection, and a watch holds one
//! connection per (kind, namespace) it watches (300 in the 100,000-object benchmark, 47 MiB of
//! read buffers in a heap profile; docs/benchmarks.md). Here the read buffer is bounded to
//! [`READ_BUFFER_MAX`]: a page is read in more, smaller reads, which costs nothing measurable
//! next to parsing it. Idle pooled connections are closed after [`POOL_IDLE`] instead of 90 s.
//!
//! Everything else is kube's: TLS through its rustls connector (the kubeconfig's CA, client
//! certificate and server name), its connect/read/write timeouts, its authentication layer (tokens,
//! exec plugins, refresh) and headers (impersonation). Not carried over: kube's retry layer (the
//! source retries itself, see `K8sSource::connect`), its tracing spans per request, and the
//! expiry of a client certificate from an exec plugin (`Client::valid_until`, which the
//! detector does not read). With a proxy in the configuration, kube's default stack is used
//! as it is, proxy support included.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use http::HeaderValue;

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::client::{ClientBuilder, ConfigExt};
use tower::{BoxError, ServiceBuilder};

/// The most an HTTP/1 connection's read buffer may grow to (hyper's default is 8 KiB + 400 KiB).
pub const READ_BUFFER_MAX: usize = 32 * 1024;

/// How long an idle connection stays in the pool (hyper's default is 90 s).
pub const POOL_IDLE: Duration = Duration::from_secs(30);

/// A bearer token the client sends, replaceable while the client runs: the token of a
/// credentials Secret that is rotated (`K8sSource::rotate`). Never printed (`Debug` shows no
/// value; the header is marked sensitive).
#[derive(Clone)]
pub struct BearerToken(Arc<RwLock<HeaderValue>>);

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(..)")
    }
}

impl BearerToken {
    /// The header of `token`; `None` when it cannot be a header value (a control character).
    fn header(token: &str) -> Option<HeaderValue> {
        let mut value = HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
        value.set_sensitive(true);
        Some(value)
    }

    /// A token to send.
    pub fn new(token: &str) -> Option<BearerToken> {
        Some(BearerToken(Arc::new(RwLock::new(Self::header(token)?))))
    }

    /// Sends `token` from the next request on; `false` (the old one kept) when it cannot be a
    /// header value.
    pub fn replace(&self, token: &str) -> bool {
        let Some(value) = Self::header(token) else { return false };
        *self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner) = value;
        true
    }

    /// Whether both send the same token.
    pub(crate) fn same(&self, other: &BearerToken) -> bool {
        self.current() == other.current()
    }

    fn current(&self) -> HeaderValue {
        self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

/// A kube client for `config`, its connections' buffers bounded (see the module documentation).
/// With `token`, each request carries that token (`config` then has none of its own).
pub fn build(config: kube::Config, token: Option<BearerToken>) -> Result<kube::Client, kube::Error> {
    if config.proxy_url.is_some() {
        return kube::Client::try_from(config);
    }
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let https = config.rustls_https_connector_with_connector(http)?;
    let mut connector = hyper_timeout::TimeoutConnector::new(https);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let hyper_client = hyper_util::client::legacy::Builder::new(TokioExecutor::new())
        .http1_max_buf_size(READ_BUFFER_MAX)
        .pool_idle_timeout(POOL_IDLE)
        .build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .option_layer(token.map(|t| {
            tower::util::MapRequestLayer::new(move |mut request: http::Request<kube::client::Body>| {
                request.headers_mut().insert(http::header::AUTHORIZATION, t.current());
                request
            })
        }))
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(hyper_client);
    Ok(ClientBuilder::new(service, config.default_namespace).build())
}
