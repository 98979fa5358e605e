//! Request-size limits answered as JSON errors like every other: a URI (path and query) longer
//! than [`MAX_URI_BYTES`] answers 414, headers beyond [`MAX_HEADERS`] fields or
//! [`MAX_HEADER_BYTES`] bytes answer 431, both with `{"error": "..."}`.
//!
//! hyper, under axum, has limits of its own that it enforces before any handler runs, and it
//! answers them with an empty body: a request target of 65,534 bytes or more (414), more than 100
//! header fields or a request head over about 400 KiB (431). The limits here are well below
//! those, so every request a client can reasonably send gets a JSON answer; beyond hyper's limits
//! the answer is still the right status, without a body (docs/api.md says so).

use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// Longest URI (path and query string, as sent) answered normally: 8 KiB.
pub const MAX_URI_BYTES: usize = 8 * 1024;
/// Most header fields in a request.
pub const MAX_HEADERS: usize = 64;
/// Most bytes of header names and values (each field counted as `name: value\r\n`): 16 KiB.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;

/// The middleware: checks the limits before routing.
pub async fn enforce(request: Request, next: Next) -> Response {
    match check(&request) {
        Ok(()) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}

fn check(request: &Request) -> Result<(), ApiError> {
    let uri = request.uri().path_and_query().map_or(0, |pq| pq.as_str().len());
    if uri > MAX_URI_BYTES {
        return Err(ApiError::new(
            StatusCode::URI_TOO_LONG,
            format!("the URI is {uri} bytes long; at most {MAX_URI_BYTES} are accepted"),
        ));
    }
    let headers = request.headers();
    if headers.len() > MAX_HEADERS {
        return Err(ApiError::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            format!("the request has {} header fields; at most {MAX_HEADERS} are accepted", headers.len()),
        ));
    }
    let bytes: usize = headers.iter().map(|(name, value)| name.as_str().len() + value.len() + 4).sum();
    if bytes > MAX_HEADER_BYTES {
        return Err(ApiError::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            format!("the request's headers are {bytes} bytes; at most {MAX_HEADER_BYTES} are accepted"),
        ));
    }
    Ok(())
}
