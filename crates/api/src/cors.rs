//! Cross-origin calls from browser apps. The `cors_origins` variable lists
//! the origins a browser may call from (comma-separated, `*` for any; empty
//! or undeclared: none). A preflight (`OPTIONS` with
//! `Access-Control-Request-Method`) is answered here, before and without
//! authentication, as browsers send it without credentials; every other
//! answer to an allowed origin carries the headers a browser needs to read it.
//!
//! Tokens travel in `Authorization`, never in cookies, so no answer allows
//! credentials.

use spin_sdk::http::{HeaderValue, Method, Request, Response, StatusCode};

use crate::render::Body;
use crate::{Problem, optional_variable};

/// What a browser may send besides the simple headers.
const ALLOWED_HEADERS: &str = "authorization, content-type, x-request-id";
/// What a browser may read besides the simple headers.
const EXPOSED_HEADERS: &str = "x-request-id";
/// How long (seconds) a browser may reuse a preflight's answer.
const MAX_AGE: &str = "600";

/// The origins `cors_origins` allows.
#[derive(Debug, PartialEq)]
pub(crate) enum Origins {
    Any,
    Listed(Vec<String>),
}

impl Origins {
    /// Parses the variable's value: `*` anywhere means any origin.
    pub(crate) fn parse(value: &str) -> Origins {
        let listed: Vec<String> = value
            .split(',')
            .map(str::trim)
            .filter(|o| !o.is_empty())
            .map(|o| o.trim_end_matches('/').to_string())
            .collect();
        if listed.iter().any(|o| o == "*") { Origins::Any } else { Origins::Listed(listed) }
    }

    /// Whether a request from `origin` may be read by the page that sent it.
    pub(crate) fn allows(&self, origin: &str) -> bool {
        match self {
            Origins::Any => true,
            Origins::Listed(listed) => listed.iter().any(|o| o.eq_ignore_ascii_case(origin)),
        }
    }
}

/// The request's `Origin` when `cors_origins` allows it; `None` for a
/// same-origin or non-browser call, or an origin not allowed.
pub(crate) async fn allowed_origin(request: &Request) -> Result<Option<String>, Problem> {
    let Some(origin) = request.headers().get("origin").and_then(|v| v.to_str().ok()) else { return Ok(None) };
    let configured = optional_variable("cors_origins").await?.unwrap_or_default();
    Ok(Origins::parse(&configured).allows(origin).then(|| origin.to_string()))
}

/// Whether the request is a browser's preflight.
pub(crate) fn is_preflight(request: &Request) -> bool {
    request.method() == Method::OPTIONS && request.headers().contains_key("access-control-request-method")
}

/// The answer to a preflight: 204 with what the origin may do, or 403 in
/// the error shape when the origin is not allowed.
pub(crate) fn preflight(origin: Option<String>) -> Result<Response<Body>, Problem> {
    let Some(origin) = origin else {
        return Err(Problem::new(StatusCode::FORBIDDEN, "origin_not_allowed", "this origin may not call unread"));
    };
    let mut response = Response::new(Body::default());
    *response.status_mut() = StatusCode::NO_CONTENT;
    let headers = response.headers_mut();
    headers.insert("content-length", HeaderValue::from(0));
    headers.insert("access-control-allow-methods", HeaderValue::from_static("GET, POST, OPTIONS"));
    headers.insert("access-control-allow-headers", HeaderValue::from_static(ALLOWED_HEADERS));
    headers.insert("access-control-max-age", HeaderValue::from_static(MAX_AGE));
    allow(&mut response, &origin);
    Ok(response)
}

/// Lets the page of `origin` read `response`.
pub(crate) fn allow(response: &mut Response<Body>, origin: &str) {
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(origin) {
        headers.insert("access-control-allow-origin", value);
        headers.insert("access-control-expose-headers", HeaderValue::from_static(EXPOSED_HEADERS));
    }
    // Caches must not hand one origin's answer to another.
    headers.append("vary", HeaderValue::from_static("origin"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_listed_trimmed_or_any() {
        let listed = Origins::parse(" https://app.example.com, https://web.example.com/ ,");
        assert!(listed.allows("https://app.example.com"));
        assert!(listed.allows("https://WEB.example.com"));
        assert!(!listed.allows("https://evil.example.com"));
        assert!(!listed.allows("null"));
        assert_eq!(Origins::parse(""), Origins::Listed(vec![]));
        assert!(!Origins::parse("").allows("https://app.example.com"));
        assert_eq!(Origins::parse("https://a.example, *"), Origins::Any);
    }
}
