//! Browser apps on another origin: a preflight from an allowed origin is
//! answered (without a token, as browsers send it) on every app route, one
//! from another origin is refused, and answers carry the headers a browser
//! needs to read them — for allowed origins only.

use serde_json::json;

use crate::support::{App, Setup, jwt, message};

const ALLOWED: &str = "https://app.example.com";

/// The app routes a browser calls, with the method it would use.
const APP_ROUTES: [(&str, &str); 6] = [
    ("GET", "/v1/conversations"),
    ("GET", "/v1/badge"),
    ("POST", "/v1/mark-read"),
    ("POST", "/v1/conversations/c1/mute"),
    ("POST", "/v1/conversations/c1/pin"),
    ("POST", "/v1/conversations/c1/mark-unread"),
];

async fn app_with_origins(origins: &str) -> App {
    App::with(Setup { variables: vec![("cors_origins", origins.to_string())], ..Setup::default() }).await
}

fn preflight_headers<'a>(origin: &'a str, method: &'a str) -> [(&'a str, &'a str); 3] {
    [
        ("origin", origin),
        ("access-control-request-method", method),
        ("access-control-request-headers", "authorization, content-type"),
    ]
}

#[tokio::test]
async fn a_preflight_from_an_allowed_origin_succeeds_on_every_app_route() {
    let app = app_with_origins("https://other.example.com, https://app.example.com").await;
    for (method, path) in APP_ROUTES {
        let answer = app.send_with_headers("OPTIONS", path, None, None, &preflight_headers(ALLOWED, method)).await;
        assert_eq!(answer.status, 204, "{path}: {:?}", answer.body);
        assert_eq!(answer.header("access-control-allow-origin"), Some(ALLOWED), "{path}");
        let methods = answer.header("access-control-allow-methods").unwrap_or_default();
        assert!(methods.contains(method), "{path}: {methods}");
        let headers = answer.header("access-control-allow-headers").unwrap_or_default();
        assert!(headers.contains("authorization") && headers.contains("content-type"), "{path}: {headers}");
        assert_eq!(answer.header("content-length"), Some("0"), "{path}");
        assert_eq!(answer.header("access-control-allow-credentials"), None, "{path}");
    }
}

#[tokio::test]
async fn a_preflight_from_another_origin_fails_and_its_answers_are_unreadable() {
    let app = app_with_origins(ALLOWED).await;
    let evil = "https://evil.example.com";
    for (method, path) in APP_ROUTES {
        let answer = app.send_with_headers("OPTIONS", path, None, None, &preflight_headers(evil, method)).await;
        assert_eq!((answer.status, answer.body["error"]["code"].as_str()), (403, Some("origin_not_allowed")), "{path}");
        assert_eq!(answer.header("access-control-allow-origin"), None, "{path}");
    }
    let badge = app.send_with_headers("GET", "/v1/badge", Some(jwt("acme", "u1")), None, &[("origin", evil)]).await;
    assert_eq!(badge.status, 200);
    assert_eq!(badge.header("access-control-allow-origin"), None);
}

#[tokio::test]
async fn answers_to_an_allowed_origin_are_readable_by_its_pages() {
    let app = app_with_origins(ALLOWED).await;
    app.touch(message("acme", "c1", 1, 1_000, "u2", &["u1", "u2"])).await;
    let origin = [("origin", ALLOWED)];
    let list = app.send_with_headers("GET", "/v1/conversations", Some(jwt("acme", "u1")), None, &origin).await;
    assert_eq!(list.status, 200);
    assert_eq!(list.header("access-control-allow-origin"), Some(ALLOWED));
    assert_eq!(list.header("access-control-expose-headers"), Some("x-request-id"));
    assert_eq!(list.header("vary"), Some("origin"));
    // Errors too, so that the page can read what went wrong.
    let body = json!({"conversation": "c1", "seq": "x"}).to_string().into_bytes();
    let refused = app.send_with_headers("POST", "/v1/mark-read", Some(jwt("acme", "u1")), Some(body), &origin).await;
    assert_eq!(refused.status, 400);
    assert_eq!(refused.header("access-control-allow-origin"), Some(ALLOWED));
    // A non-browser call (no Origin) gets no CORS headers, and a preflight
    // never reaches the handler: it needs no token and changes nothing.
    assert_eq!(app.badge("acme", "u1").await.header("access-control-allow-origin"), None);
    assert_eq!(app.row("acme", "u1", "c1").await.unwrap()["unread"], 1);
}

#[tokio::test]
async fn without_cors_origins_no_origin_is_allowed() {
    let app = App::start().await;
    let answer = app.send_with_headers("OPTIONS", "/v1/badge", None, None, &preflight_headers(ALLOWED, "GET")).await;
    assert_eq!(answer.status, 403);
    let any = app_with_origins("*").await;
    let answer = any.send_with_headers("OPTIONS", "/v1/badge", None, None, &preflight_headers(ALLOWED, "GET")).await;
    assert_eq!((answer.status, answer.header("access-control-allow-origin")), (204, Some(ALLOWED)));
}
