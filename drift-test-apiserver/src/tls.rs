//! HTTPS for the test server, so that kubectl sends bearer tokens (client-go reads user
//! credentials from a kubeconfig only for TLS transports).
//!
//! The certificate is a fixed test certificate for `127.0.0.1` and `localhost`, issued by a
//! test CA whose certificate the generated kubeconfig carries as `certificate-authority-data`.
//! Both were made once with the `openssl` command line (P-256 keys, valid for 100 years); the
//! CA's private key was not kept. They protect nothing: the server only listens on loopback.

use std::net::SocketAddr;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// The test CA certificate (PEM), for clients' trust.
pub const CA_PEM: &str = include_str!("tls/ca.pem");
const CERT_PEM: &str = include_str!("tls/server.pem");
const KEY_PEM: &str = include_str!("tls/server-key.pem");

/// The server's rustls configuration with the test certificate, on the ring provider.
pub fn server_config() -> Result<Arc<rustls::ServerConfig>, std::io::Error> {
    let err = |e: String| std::io::Error::other(format!("TLS setup: {e}"));
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(CERT_PEM.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| err(e.to_string()))?;
    let key = PrivateKeyDer::from_pem_slice(KEY_PEM.as_bytes()).map_err(|e| err(e.to_string()))?;
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| err(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| err(e.to_string()))?;
    Ok(Arc::new(config))
}

/// A TCP listener that completes a TLS handshake on each connection.
pub struct TlsListener {
    inner: TcpListener,
    acceptor: TlsAcceptor,
}

impl TlsListener {
    /// Wrap a bound listener.
    pub fn new(inner: TcpListener, config: Arc<rustls::ServerConfig>) -> TlsListener {
        TlsListener { inner, acceptor: TlsAcceptor::from(config) }
    }
}

impl std::fmt::Debug for TlsListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsListener").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (tcp, addr) = match self.inner.accept().await {
                Ok(c) => c,
                Err(e) => {
                    tracing::debug!(error = %e, "accept failed");
                    continue;
                }
            };
            match self.acceptor.accept(tcp).await {
                Ok(tls) => return (tls, addr),
                // A client that does not trust the certificate, or speaks plain HTTP.
                Err(e) => tracing::debug!(error = %e, "TLS handshake failed"),
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}
