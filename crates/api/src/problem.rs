//! Errors as `{"error": {"code", "message", "request_id"}}` with the right status.
//!
//! A 4xx message tells the caller what to fix; it is written here or in the
//! parsers and never carries a secret or a backing service's text. A 5xx
//! answer says only its code and a fixed, generic message: what went wrong
//! (the core's error, Redis' or the SQL server's text) is the problem's
//! `detail`, which goes to stderr with the request id and never into an answer.

use spin_sdk::http::{Method, Request, StatusCode};

use crate::core::Error as CoreError;

/// A request that could not be served, and why.
#[derive(Debug)]
pub struct Problem {
    /// HTTP status to answer with.
    pub status: StatusCode,
    /// Stable, machine-readable reason.
    pub code: &'static str,
    /// What a developer needs to fix the call (for a 5xx: a generic sentence).
    pub message: String,
    /// For a 405: the method the route takes (sent as `Allow`, RFC 9110).
    pub allow: Option<Method>,
    /// For the operator's log only: what went wrong inside.
    pub detail: Option<String>,
    /// Members of the answer beside `error`, in order (the health check's
    /// state of each backing service): fixed texts only, so that no
    /// internal detail can reach an answer through them.
    pub beside: Vec<(&'static str, &'static str)>,
}

/// What every 503 `unavailable` answer says.
const UNAVAILABLE: &str = "the service is temporarily unavailable; try again later";
/// What every 503 `misconfigured` answer says.
const MISCONFIGURED: &str = "the service is not configured correctly; its operator has to fix it";
/// What any other 5xx answer says.
const INTERNAL: &str = "the service failed to answer";

impl Problem {
    /// A problem with the given status, code and message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Problem { status, code, message: message.into(), allow: None, detail: None, beside: Vec::new() }
    }

    /// 400: the request is malformed.
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Problem::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// 401: missing or bad credentials.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Problem::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    /// 503 `unavailable`: a backing service is unreachable or failed.
    /// `detail` is logged, never answered.
    pub fn unavailable(detail: impl Into<String>) -> Self {
        Problem {
            detail: Some(detail.into()),
            ..Problem::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", UNAVAILABLE)
        }
    }

    /// 503 `misconfigured`: a variable is missing, unreadable or unfit.
    /// `detail` is logged, never answered.
    pub fn misconfigured(detail: impl Into<String>) -> Self {
        Problem {
            detail: Some(detail.into()),
            ..Problem::new(StatusCode::SERVICE_UNAVAILABLE, "misconfigured", MISCONFIGURED)
        }
    }

    /// The same problem, its answer carrying `members` beside `error`.
    pub fn with_members(self, members: Vec<(&'static str, &'static str)>) -> Self {
        Problem { beside: members, ..self }
    }

    /// The message the answer carries: for a 5xx always a fixed sentence,
    /// whatever the problem was built with.
    fn public_message(&self) -> &str {
        if !self.status.is_server_error() {
            return &self.message;
        }
        match self.code {
            "unavailable" => UNAVAILABLE,
            "misconfigured" => MISCONFIGURED,
            _ => INTERNAL,
        }
    }

    /// The answer's JSON: `error` (code, public message, request id) and any
    /// members beside it.
    fn body(&self, request_id: &str) -> serde_json::Value {
        let mut body: serde_json::Map<String, serde_json::Value> =
            self.beside.iter().map(|&(name, value)| (name.to_string(), value.into())).collect();
        body.insert(
            "error".into(),
            serde_json::json!({
                "code": self.code,
                "message": self.public_message(),
                "request_id": request_id,
            }),
        );
        serde_json::Value::Object(body)
    }

    /// The JSON error response, naming the request.
    pub(crate) fn into_response(self, request_id: &str) -> spin_sdk::http::Response<crate::render::Body> {
        let mut response = crate::render::json_with_status(self.status, &self.body(request_id));
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
            CoreError::Unavailable(detail) => Problem::unavailable(detail),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_5xx_never_answers_what_it_was_built_with() {
        for problem in [
            Problem::unavailable("redis: connection refused to redis://u:hunter2@10.0.0.1"),
            Problem::misconfigured("variable jwt_secret is 5 bytes"),
            Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "sql: relation app_x does not exist"),
            Problem::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "sql: password authentication failed"),
        ] {
            let message = problem.public_message().to_string();
            assert!(!message.contains("redis") && !message.contains("sql") && !message.contains("jwt"), "{message}");
        }
        assert_eq!(
            Problem::bad_request("invalid_query", "limit must be 1-100").public_message(),
            "limit must be 1-100"
        );
    }

    #[test]
    fn members_beside_the_error_keep_it_whole() {
        let members = vec![("status", "unavailable"), ("redis", "unavailable")];
        let problem = Problem::unavailable("redis: connection refused").with_members(members);
        assert_eq!(
            problem.body("r1"),
            serde_json::json!({"status": "unavailable", "redis": "unavailable", "error": {
                "code": "unavailable", "message": UNAVAILABLE, "request_id": "r1"}})
        );
    }

    #[test]
    fn the_core_s_unavailable_text_is_detail_only() {
        let problem = Problem::from(CoreError::Unavailable("redis: no answer within 2000 ms".into()));
        assert_eq!((problem.status, problem.code), (StatusCode::SERVICE_UNAVAILABLE, "unavailable"));
        assert_eq!(problem.detail.as_deref(), Some("redis: no answer within 2000 ms"));
        assert!(!problem.message.contains("redis"));
    }
}
