//! The web page served by `drift serve` (docs/ui.md): hand-written HTML, CSS and JavaScript from
//! `drift-api/ui/`, compiled into the binary, served at `/` and `/ui/{file}`. The page reads and
//! writes only through the JSON API; it holds no data itself, so it is served without a token
//! (the API calls it makes carry the token the user enters).
//!
//! Every answer carries a strict Content-Security-Policy ([`CONTENT_SECURITY_POLICY`]: scripts,
//! styles, images and API calls from this origin only, no inline script or style, no frames),
//! `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer`, and `Cache-Control:
//! no-cache` with a strong `ETag`, so a browser revalidates and gets `304 Not Modified` until the
//! binary changes.

use std::sync::LazyLock;

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use crate::error::ApiError;

/// The Content-Security-Policy of every page answer: nothing inline, nothing from elsewhere.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// One file of the page, as compiled into the binary.
#[derive(Debug, Clone, Copy)]
pub struct Asset {
    /// The file name under `/ui/` (`index.html` is served at `/`).
    pub name: &'static str,
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// Its bytes.
    pub body: &'static [u8],
}

/// Every file of the page. `index.html` is the page itself; the others are under `/ui/`.
pub const ASSETS: [Asset; 4] = [
    Asset { name: "index.html", content_type: "text/html; charset=utf-8", body: include_bytes!("../ui/index.html") },
    Asset { name: "app.css", content_type: "text/css; charset=utf-8", body: include_bytes!("../ui/app.css") },
    Asset { name: "app.js", content_type: "text/javascript; charset=utf-8", body: include_bytes!("../ui/app.js") },
    Asset { name: "icon.svg", content_type: "image/svg+xml", body: include_bytes!("../ui/icon.svg") },
];

/// The strong ETag of each asset (in [`ASSETS`] order): the first 16 bytes of its SHA-256.
static ETAGS: LazyLock<Vec<String>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|a| {
            let digest = Sha256::digest(a.body);
            let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
            format!("\"{hex}\"")
        })
        .collect()
});

/// `GET /`: the page.
pub(crate) async fn index(headers: HeaderMap) -> Response {
    serve(0, &headers)
}

/// `GET /ui/{file}`: a file of the page; 404 (JSON, as every unknown path) for any other name.
pub(crate) async fn asset(Path(file): Path<String>, headers: HeaderMap) -> Response {
    match ASSETS.iter().position(|a| a.name == file && a.name != "index.html") {
        Some(i) => serve(i, &headers),
        None => ApiError::not_found("no such file of the page").into_response(),
    }
}

fn serve(i: usize, request: &HeaderMap) -> Response {
    let (Some(asset), Some(etag)) = (ASSETS.get(i), ETAGS.get(i)) else {
        return ApiError::not_found("no such file of the page").into_response();
    };
    let fresh = request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|tag| tag.trim() == etag || tag.trim() == "*");
    let mut response =
        if fresh { StatusCode::NOT_MODIFIED.into_response() } else { (StatusCode::OK, asset.body).into_response() };
    let h = response.headers_mut();
    if !fresh {
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(asset.content_type));
    }
    if let Ok(etag) = HeaderValue::from_str(etag) {
        h.insert(header::ETAG, etag);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}
