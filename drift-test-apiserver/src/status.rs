//! API errors as Kubernetes `Status` objects, and JSON responses.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// An error answered as a `Status` object.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP code.
    pub code: u16,
    /// Status reason (`NotFound`, `AlreadyExists`, `Conflict`, ...).
    pub reason: &'static str,
    /// Message.
    pub message: String,
    /// Status details.
    pub details: Option<Box<Value>>,
    /// Retry-After header, in seconds.
    pub retry_after: Option<u32>,
}

impl ApiError {
    /// An error with code, reason and message.
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { code, reason, message: message.into(), details: None, retry_after: None }
    }

    /// The reason the API server gives for an HTTP code.
    pub fn reason_for(code: u16) -> &'static str {
        match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            405 => "MethodNotAllowed",
            406 => "NotAcceptable",
            409 => "Conflict",
            410 => "Expired",
            415 => "UnsupportedMediaType",
            422 => "Invalid",
            429 => "TooManyRequests",
            500 => "InternalError",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "Unknown",
        }
    }

    /// A fault-injected error of this code.
    pub fn injected(code: u16, message: Option<String>, retry_after: Option<u32>) -> ApiError {
        let mut e = ApiError::new(
            code,
            ApiError::reason_for(code),
            message.unwrap_or_else(|| format!("injected fault: HTTP {code}")),
        );
        if let Some(s) = retry_after {
            e.retry_after = Some(s);
            e.details = Some(Box::new(json!({"retryAfterSeconds": s})));
        }
        e
    }

    /// `<resource>.<group> "<name>" not found`.
    pub fn not_found(group: &str, plural: &str, name: &str) -> ApiError {
        let mut e = ApiError::new(404, "NotFound", format!("{} \"{name}\" not found", qualified(group, plural)));
        e.details = Some(Box::new(details(group, plural, name)));
        e
    }

    /// `<resource>.<group> "<name>" already exists`.
    pub fn already_exists(group: &str, plural: &str, name: &str) -> ApiError {
        let mut e =
            ApiError::new(409, "AlreadyExists", format!("{} \"{name}\" already exists", qualified(group, plural)));
        e.details = Some(Box::new(details(group, plural, name)));
        e
    }

    /// An optimistic-concurrency conflict.
    pub fn conflict(group: &str, plural: &str, name: &str) -> ApiError {
        let mut e = ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                qualified(group, plural)
            ),
        );
        e.details = Some(Box::new(details(group, plural, name)));
        e
    }

    /// 400 Bad Request.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }

    /// 410 Gone for a compacted resourceVersion.
    pub fn expired(message: impl Into<String>) -> ApiError {
        ApiError::new(410, "Expired", message)
    }

    /// The Status object.
    pub fn status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        });
        // An error the API server cannot classify has no reason (StatusReasonUnknown is "").
        if !self.reason.is_empty()
            && let Some(m) = s.as_object_mut()
        {
            m.insert("reason".into(), json!(self.reason));
        }
        if let (Some(d), Some(m)) = (&self.details, s.as_object_mut()) {
            m.insert("details".into(), (**d).clone());
        }
        if let Some(m) = s.as_object_mut() {
            m.insert("code".into(), json!(self.code));
        }
        s
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = json_response(code, &self.status());
        if let Some(s) = self.retry_after
            && let Ok(v) = HeaderValue::from_str(&s.to_string())
        {
            resp.headers_mut().insert(header::RETRY_AFTER, v);
        }
        resp
    }
}

/// `deployments.apps` or `configmaps`.
pub fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() { plural.to_owned() } else { format!("{plural}.{group}") }
}

/// Status details for an object.
pub fn details(group: &str, plural: &str, name: &str) -> Value {
    let mut d = json!({"name": name, "kind": plural});
    if !group.is_empty()
        && let Some(m) = d.as_object_mut()
    {
        m.insert("group".into(), json!(group));
    }
    d
}

/// A JSON response.
pub fn json_response(code: StatusCode, body: &Value) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut resp = (code, bytes).into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// A successful deletion's Status.
pub fn success(group: &str, plural: &str, name: &str, uid: &Value) -> Value {
    let mut d = details(group, plural, name);
    if let Some(m) = d.as_object_mut() {
        m.insert("uid".into(), uid.clone());
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": d})
}
