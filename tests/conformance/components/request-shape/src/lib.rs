//! Spin's request-shape conformance component, on spin-sdk 7 (`wasi:http@0.3.0`).
//!
//! It checks what the component sees of `GET /base/path/end/rest?key=value`
//! sent with `Host: example.com`: the method, the URI (scheme, authority, path
//! and query) and the headers, including the `spin-*` headers Spin adds. The
//! expected `spin-*` values depend on the route the manifest gave the
//! component; the component finds that route in `spin-raw-component-route`
//! and knows three: the suite's route with named segments, a trailing
//! wildcard route and an exact route (the last two being the kinds unread's
//! manifest uses). The answer is `200` with an empty body when every check
//! holds, `500` with the failures otherwise.

use spin_sdk::http::{HeaderMap, HeaderName, HeaderValue, IntoResponse, Method, Request, StatusCode};
use spin_sdk::http_service;
use std::net::SocketAddr;

const PATH_AND_QUERY: &str = "/base/path/end/rest?key=value";

/// Each expected `spin-*` header with the values it may have.
type Expected = Vec<(&'static str, Vec<&'static str>)>;

#[http_service]
async fn handler(request: Request) -> impl IntoResponse {
    let mut failures = Vec::new();
    check_method(&request, &mut failures);
    check_uri(&request, &mut failures);
    check_headers(request.headers(), &mut failures);
    if failures.is_empty() {
        answer(StatusCode::OK, String::new())
    } else {
        answer(StatusCode::INTERNAL_SERVER_ERROR, failures.join("\n"))
    }
}

/// The response, with its length declared in `content-length`.
///
/// The suite's components are WASIp2 ones, for which the host knows an empty
/// body's length and sends `Content-Length: 0`, as the suite expects. A WASIp3
/// body is a stream: Spin (like the host, with the same wasmtime-wasi-http)
/// learns its length only from this header; without it the host sent the
/// empty body chunked.
fn answer(status: StatusCode, body: String) -> impl IntoResponse {
    let mut headers = HeaderMap::new();
    headers.insert(HeaderName::from_static("content-length"), HeaderValue::from(body.len()));
    (status, headers, body)
}

fn check_method(request: &Request, failures: &mut Vec<String>) {
    if request.method() != Method::GET {
        failures.push(format!("method was expected to be GET but was {}", request.method()));
    }
}

fn check_uri(request: &Request, failures: &mut Vec<String>) {
    let uri = request.uri();
    // The authority is the request's Host header.
    if uri.authority().map(|a| a.as_str()) != Some("example.com") {
        failures.push(format!("authority was expected to be example.com but was {:?}", uri.authority()));
    }
    if uri.path_and_query().map(|pq| pq.as_str()) != Some(PATH_AND_QUERY) {
        failures
            .push(format!("path and query were expected to be {PATH_AND_QUERY} but were {:?}", uri.path_and_query()));
    }
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        failures.push(format!("scheme was expected to be http or https but was {:?}", uri.scheme_str()));
    }
}

/// What Spin sends for the route the manifest gave this component.
fn expected_for(raw_route: &str) -> Option<Expected> {
    let full_url =
        vec!["http://example.com/base/path/end/rest?key=value", "https://example.com/base/path/end/rest?key=value"];
    let common = |path_info: &'static str, component_route: &'static str, matched: &'static str| -> Expected {
        vec![
            ("spin-full-url", full_url.clone()),
            ("spin-path-info", vec![path_info]),
            // The base path is always `/` (kept for backward compatibility).
            ("spin-base-path", vec!["/"]),
            ("spin-component-route", vec![component_route]),
            ("spin-matched-route", vec![matched]),
        ]
    };
    let (mut expected, raw) = match raw_route {
        "/base/:path_segment/:path_end/..." => {
            let mut expected = common("/rest", "/base/:path_segment/:path_end", "/base/:path_segment/:path_end/...");
            expected.push(("spin-path-match-path-segment", vec!["path"]));
            expected.push(("spin-path-match-path-end", vec!["end"]));
            (expected, "/base/:path_segment/:path_end/...")
        }
        "/base/..." => (common("/path/end/rest", "/base", "/base/..."), "/base/..."),
        "/base/path/end/rest" => (common("", "/base/path/end/rest", "/base/path/end/rest"), "/base/path/end/rest"),
        _ => return None,
    };
    expected.push(("spin-raw-component-route", vec![raw]));
    Some(expected)
}

fn check_headers(headers: &HeaderMap, failures: &mut Vec<String>) {
    let raw_route = single(headers, "spin-raw-component-route", failures).unwrap_or_default();
    let Some(expected) = expected_for(&raw_route) else {
        failures.push(format!("spin-raw-component-route {raw_route:?} is not a route this component knows"));
        return;
    };
    for (name, allowed) in &expected {
        if let Some(value) = single(headers, name, failures)
            && !allowed.contains(&value.as_str())
        {
            failures.push(format!("header {name} was expected to be one of {allowed:?} but was {value:?}"));
        }
    }
    // The client's own headers arrive as sent. (Not `host`: WASIp3 fields may
    // not hold it, in Spin as in the host; it is the URI's authority instead.)
    for (name, value) in [("user-agent", "my-agent"), ("accept", "*/*")] {
        if let Some(actual) = single(headers, name, failures)
            && actual != value
        {
            failures.push(format!("header {name} was expected to be {value:?} but was {actual:?}"));
        }
    }
    // spin-client-addr is optional; when present it is a socket address.
    match headers.get_all("spin-client-addr").iter().collect::<Vec<_>>().as_slice() {
        [] => {}
        [value] => {
            if value.to_str().ok().and_then(|text| text.parse::<SocketAddr>().ok()).is_none() {
                failures.push(format!("spin-client-addr {value:?} is not a socket address"));
            }
        }
        values => failures.push(format!("expected at most one spin-client-addr header but found {}", values.len())),
    }
    // No other `spin-*` (or `spin_*`) header.
    for name in headers.keys() {
        let name = name.as_str();
        let special = name.starts_with("spin-") || name.starts_with("spin_");
        if special && name != "spin-client-addr" && !expected.iter().any(|(known, _)| *known == name) {
            failures.push(format!("unexpected special header {name}"));
        }
    }
}

/// The one value of header `name` as text; a failure if it is missing, repeated or not UTF-8.
fn single(headers: &HeaderMap, name: &str, failures: &mut Vec<String>) -> Option<String> {
    let values: Vec<_> = headers.get_all(name).iter().collect();
    match values.as_slice() {
        [value] => match value.to_str() {
            Ok(text) => Some(text.to_owned()),
            Err(_) => {
                failures.push(format!("header {name} is not valid UTF-8"));
                None
            }
        },
        [] => {
            failures.push(format!("expected exactly one header {name} but found none"));
            None
        }
        _ => {
            failures.push(format!("expected exactly one header {name} but found {}", values.len()));
            None
        }
    }
}
