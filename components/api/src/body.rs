//! Request bodies and query strings, strictly parsed.

use http_body_util::{BodyExt, Limited};
use serde::de::DeserializeOwned;
use spin_sdk::http::{Request, StatusCode};

use crate::Problem;

/// Bodies above this are refused with 413 before parsing.
pub const MAX_BODY: usize = 64 * 1024;

/// Reads the whole body (at most [`MAX_BODY`]) and parses it as `T`.
/// Unknown fields, wrong types and duplicate keys are refused by `T`'s
/// `#[serde(deny_unknown_fields)]` derive.
pub async fn json_body<T: DeserializeOwned>(request: Request) -> Result<T, Problem> {
    let too_large = || Problem::new(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large", format!("the body must be at most {MAX_BODY} bytes"));
    let declared = request.headers().get("content-length").and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY) {
        return Err(too_large());
    }
    let bytes = Limited::new(request.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| if e.is::<http_body_util::LengthLimitError>() { too_large() } else { Problem::bad_request("invalid_body", "the body could not be read") })?
        .to_bytes();
    // Syntax first (with serde_json's nesting limit), so that the codes tell
    // "not JSON" from "not the expected object".
    let text = std::str::from_utf8(&bytes).map_err(|_| Problem::bad_request("invalid_json", "the body is not UTF-8"))?;
    serde_json::from_str::<serde::de::IgnoredAny>(text).map_err(|e| Problem::bad_request("invalid_json", e.to_string()))?;
    if !text.trim_start().starts_with('{') {
        return Err(Problem::bad_request("invalid_request", "the body must be a JSON object"));
    }
    serde_json::from_str(text).map_err(|e| Problem::bad_request("invalid_request", e.to_string()))
}

/// The query string as (name, value) pairs, percent-decoded; refuses names
/// not in `allowed` and repeated names.
pub fn query(request: &Request, allowed: &[&str]) -> Result<Vec<(String, String)>, Problem> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for (name, value) in form_urlencoded::parse(request.uri().query().unwrap_or("").as_bytes()) {
        if !allowed.contains(&name.as_ref()) {
            return Err(Problem::bad_request("invalid_query", format!("unknown query parameter {name:?}; allowed: {allowed:?}")));
        }
        if pairs.iter().any(|(n, _)| *n == name) {
            return Err(Problem::bad_request("invalid_query", format!("query parameter {name:?} is given twice")));
        }
        pairs.push((name.into_owned(), value.into_owned()));
    }
    Ok(pairs)
}
