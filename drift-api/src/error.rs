//! The error answer of every endpoint: a status and `{"error": "message"}`.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use drift_model::ErrorKind;
use serde_json::json;

/// An error answer. The message is shown to the client: it never holds a secret, a connection
/// string or a store's own error text (those go to the logs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    status: StatusCode,
    message: String,
    bearer_challenge: bool,
}

impl ApiError {
    /// An error with a status and a message.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError { status, message: message.into(), bearer_challenge: false }
    }
    /// 400: a bad parameter.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }
    /// 401 with `WWW-Authenticate: Bearer`.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        ApiError { bearer_challenge: true, ..Self::new(StatusCode::UNAUTHORIZED, message) }
    }
    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }
    /// The answer to a failed store call. Invalid input is the client's (400), not found is
    /// 404; anything else means the store cannot answer (503). The store's message is logged,
    /// not returned: it may name a host or a user.
    pub fn from_store(error: &drift_model::Error) -> Self {
        match error.kind() {
            ErrorKind::InvalidInput => Self::bad_request(error.message()),
            ErrorKind::NotFound => Self::not_found(error.message()),
            kind => {
                tracing::warn!(error = %error, "drift store call failed");
                Self::new(StatusCode::SERVICE_UNAVAILABLE, format!("the drift store is not available ({kind})"))
            }
        }
    }
    /// The status.
    pub fn status(&self) -> StatusCode {
        self.status
    }
    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.status, self.message)
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(json!({ "error": self.message }))).into_response();
        if self.bearer_challenge {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_errors_map_to_statuses_without_the_store_message() {
        let e = ApiError::from_store(&drift_model::Error::unavailable("postgres://drift:hunter2@db:5432 refused"));
        assert_eq!(e.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(!e.message().contains("hunter2"));
        assert!(e.message().contains("unavailable"));
        let e = ApiError::from_store(&drift_model::Error::unexpected("boom"));
        assert_eq!(e.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(ApiError::from_store(&drift_model::Error::not_found("no drift")).status(), StatusCode::NOT_FOUND);
        assert_eq!(ApiError::from_store(&drift_model::Error::invalid_input("bad")).status(), StatusCode::BAD_REQUEST);
    }
}
