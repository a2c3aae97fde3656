//! Errors as `{"error": {"code", "message"}}` with the right status.

use spin_sdk::http::{Method, Request, StatusCode};

use crate::core::Error as CoreError;

/// A request that could not be served, and why.
#[derive(Debug)]
pub struct Problem {
    /// HTTP status to answer with.
    pub status: StatusCode,
    /// Stable, machine-readable reason.
    pub code: &'static str,
    /// What a developer needs to fix the call.
    pub message: String,
    /// For a 405: the method the route takes (sent as `Allow`, RFC 9110).
    pub allow: Option<Method>,
}

impl Problem {
    /// A problem with the given status, code and message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Problem { status, code, message: message.into(), allow: None }
    }

    /// 400: the request is malformed.
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Problem::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// 401: missing or bad credentials.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Problem::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    /// 503: a backing service (or its configuration) is unavailable.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Problem::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }

    /// The JSON error response.
    pub fn into_response(self) -> spin_sdk::http::Response<crate::render::Body> {
        let body = serde_json::json!({"error": {"code": self.code, "message": self.message}});
        let mut response = crate::render::json_with_status(self.status, &body);
        if let Some(method) = self.allow.and_then(|m| spin_sdk::http::HeaderValue::from_str(m.as_str()).ok()) {
            response.headers_mut().insert("allow", method);
        }
        response
    }
}

impl From<CoreError> for Problem {
    fn from(error: CoreError) -> Self {
        match error {
            CoreError::Conflict(message) => Problem::new(StatusCode::CONFLICT, "conflict", message),
            CoreError::Invalid(message) => Problem::bad_request("invalid_request", message),
            CoreError::Unavailable(message) => Problem::unavailable(message),
            CoreError::NoSqlStore(message) => Problem::new(StatusCode::CONFLICT, "no_sql_store", message),
            CoreError::UnknownConversation(message) => {
                Problem::new(StatusCode::NOT_FOUND, "unknown_conversation", message)
            }
            CoreError::TooManyPins(max) => Problem::new(
                StatusCode::CONFLICT,
                "too_many_pins",
                format!("at most {max} conversations can be pinned"),
            ),
        }
    }
}

/// 405 unless the request uses `method`.
pub fn require_method(request: &Request, method: Method) -> Result<(), Problem> {
    if request.method() == method {
        return Ok(());
    }
    let message = format!("{} {} is not supported; use {method}", request.method(), request.uri().path());
    Err(Problem { allow: Some(method), ..Problem::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", message) })
}
