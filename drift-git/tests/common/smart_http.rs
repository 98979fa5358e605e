//! A smart HTTP git server for tests: `git http-backend` behind a small CGI server on loopback,
//! optionally demanding Basic authentication with a token (fetch and push).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, Request, Response, StatusCode};
use base64::Engine;
use tokio::io::AsyncWriteExt;

use super::install_crypto_provider;

struct Cgi {
    root: PathBuf,
    /// Expected `Authorization` header value, when the server demands one.
    auth: Option<String>,
}

async fn cgi(cgi: Arc<Cgi>, req: Request<Body>) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let given = parts.headers.get("authorization").and_then(|v| v.to_str().ok());
    let authorized = cgi.auth.as_deref().is_none_or(|expected| given == Some(expected));
    if !authorized {
        return Response::builder()
            .status(StatusCode::UNAUTHORIZED)
            .header("WWW-Authenticate", "Basic realm=\"git\"")
            .body(Body::from("authentication required"))
            .unwrap();
    }
    let body: Bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let mut child = tokio::process::Command::new("git")
        .arg("http-backend")
        .env("GIT_PROJECT_ROOT", &cgi.root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("PATH_INFO", parts.uri.path())
        .env("QUERY_STRING", parts.uri.query().unwrap_or(""))
        .env("REQUEST_METHOD", parts.method.as_str())
        .env("CONTENT_TYPE", header("content-type"))
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("HTTP_CONTENT_ENCODING", header("content-encoding"))
        .env("GIT_PROTOCOL", header("git-protocol"))
        .env("REMOTE_USER", "x-access-token")
        .env("REMOTE_ADDR", "127.0.0.1")
        // As DEPENDENCIES.md says: the backend may run as another user than the repository owner.
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "safe.directory")
        .env("GIT_CONFIG_VALUE_0", "*")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&body).await.unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    let raw = out.stdout;
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").map(|i| (i, 4));
    let split = split.or_else(|| raw.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2))).unwrap();
    let head = String::from_utf8_lossy(&raw[..split.0]).into_owned();
    let mut builder = Response::builder().status(StatusCode::OK);
    for line in head.lines() {
        let Some((name, value)) = line.split_once(':') else { continue };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            let code: u16 = value.split_whitespace().next().unwrap().parse().unwrap();
            builder = builder.status(code);
        } else {
            builder = builder.header(name, HeaderValue::from_str(value).unwrap());
        }
    }
    builder.body(Body::from(raw[split.0 + split.1..].to_vec())).unwrap()
}

/// Serves `root` on a free loopback port; returns the base URL.
pub async fn serve(root: PathBuf, token: Option<&str>) -> String {
    install_crypto_provider();
    let auth = token
        .map(|t| format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{t}"))));
    let state = Arc::new(Cgi { root, auth });
    let app = axum::Router::new().fallback(move |req: Request<Body>| cgi(Arc::clone(&state), req));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}
