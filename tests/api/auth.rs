//! Authentication rules: the service and admin tokens each work on their own
//! routes only; a JWT's issuer and audience when configured; the clock-skew
//! leeway on `exp` and `nbf`; a `jwt_secret` too short to use, and other
//! unfit variables, are 503 `misconfigured`. And request ids: echoed when the
//! caller gives a plain one, generated otherwise, on every answer.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::support::{
    ADMIN_TOKEN, Answer, App, JWT_SECRET, SERVICE_TOKEN, Setup, assert_key_space_unchanged, assert_refused, jwt,
    message, signed_jwt,
};

const HS256: &str = r#"{"alg":"HS256","typ":"JWT"}"#;

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// Which shared token a route takes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Token {
    Service,
    Admin,
}

/// Every route a shared token opens, with a body it accepts.
fn shared_token_routes() -> Vec<(&'static str, Token, Value)> {
    vec![
        ("/v1/touch", Token::Service, message("acme", "c1", 2, 2_000, "u1", &["u1", "u2"])),
        ("/v1/recall", Token::Service, json!({"tenant": "acme", "conversation": "c1", "seq": 1, "members": ["u2"]})),
        ("/v1/join", Token::Service, json!({"tenant": "acme", "conversation": "c1", "seq": 1, "members": ["u3"]})),
        ("/v1/leave", Token::Service, json!({"tenant": "acme", "conversation": "c1", "members": ["u3"]})),
        ("/v1/badges", Token::Service, json!({"tenant": "acme", "users": ["u2"]})),
        ("/v1/admin/reconcile", Token::Admin, json!({"tenant": "acme", "users": ["u2"]})),
        ("/v1/admin/conversations/c1/delete", Token::Admin, json!({"tenant": "acme", "members": ["u2"]})),
        ("/v1/admin/clear-category", Token::Admin, json!({"tenant": "acme", "category": "chat", "users": ["u2"]})),
    ]
}

fn token(which: Token) -> String {
    match which {
        Token::Service => SERVICE_TOKEN.to_string(),
        Token::Admin => ADMIN_TOKEN.to_string(),
    }
}

#[tokio::test]
async fn each_shared_token_is_refused_on_the_others_routes() {
    let app = App::start().await;
    assert_eq!(app.touch(message("acme", "c1", 1, 1_000, "u1", &["u1", "u2"])).await.status, 200);
    let before = app.redis.key_space();
    for (path, own, body) in shared_token_routes() {
        let other = if own == Token::Service { Token::Admin } else { Token::Service };
        for wrong in [
            token(other),
            format!("{}{}", token(own), token(own)),
            token(own)[..token(own).len() - 1].to_string(),
            format!("{} ", token(other)),
        ] {
            let answer = app.send("POST", path, Some(wrong.clone()), Some(body.to_string())).await;
            assert_refused(&answer, 401, "unauthorized", &format!("{path} with a {other:?}-like token"));
            assert!(!answer.text.contains(&wrong) && !answer.text.contains(&token(own)), "{path}: {}", answer.text);
        }
    }
    assert_key_space_unchanged(&before, &app.redis.key_space(), "calls with the other shared token");
    // Each with its own token goes through (reconcile without a SQL store: 409).
    for (path, own, body) in shared_token_routes() {
        let answer = app.send("POST", path, Some(token(own)), Some(body.to_string())).await;
        let expected = if path == "/v1/admin/reconcile" { 409 } else { 200 };
        assert_eq!(answer.status, expected, "{path} with its own token: {:?}", answer.body);
    }
}

/// A token for acme/u1 with `extra` claims, signed with the test secret.
fn token_with(extra: Value) -> String {
    let mut claims = json!({"sub": "u1", "tid": "acme", "exp": now() + 3600});
    claims.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    signed_jwt(HS256, &claims, JWT_SECRET)
}

async fn badge_with(app: &App, token: String) -> Answer {
    app.send("GET", "/v1/badge", Some(token), None).await
}

#[tokio::test]
async fn issuer_and_audience_are_checked_when_configured() {
    let app = App::with(Setup {
        variables: vec![
            ("jwt_issuer", "https://id.example.com".to_string()),
            ("jwt_audience", "unread-api".to_string()),
        ],
        ..Setup::default()
    })
    .await;
    let issuer = "https://id.example.com";
    for (what, extra) in [
        ("iss and aud", json!({"iss": issuer, "aud": "unread-api"})),
        ("aud among others", json!({"iss": issuer, "aud": ["mail", "unread-api"]})),
    ] {
        let answer = badge_with(&app, token_with(extra)).await;
        assert_eq!(answer.status, 200, "{what}: {:?}", answer.body);
    }
    for (what, extra) in [
        ("no claims", json!({})),
        ("no iss", json!({"aud": "unread-api"})),
        ("another iss", json!({"iss": "https://evil.example.com", "aud": "unread-api"})),
        ("iss with a trailing slash", json!({"iss": "https://id.example.com/", "aud": "unread-api"})),
        ("iss as a list", json!({"iss": [issuer], "aud": "unread-api"})),
        ("no aud", json!({"iss": issuer})),
        ("another aud", json!({"iss": issuer, "aud": "mail"})),
        ("aud list without it", json!({"iss": issuer, "aud": ["mail", "chat"]})),
        ("empty aud list", json!({"iss": issuer, "aud": []})),
        ("aud as a number", json!({"iss": issuer, "aud": 1})),
        ("aud as an object", json!({"iss": issuer, "aud": {"unread-api": true}})),
    ] {
        let answer = badge_with(&app, token_with(extra)).await;
        assert_refused(&answer, 401, "unauthorized", what);
        let message = answer.body["error"]["message"].as_str().unwrap();
        assert!(!message.contains("id.example.com") && !message.contains("unread-api"), "{what}: {message}");
    }
}

#[tokio::test]
async fn without_issuer_or_audience_configured_neither_is_looked_at() {
    let app = App::start().await;
    for extra in [json!({}), json!({"iss": "anyone", "aud": "anything"}), json!({"aud": ["x"]})] {
        let answer = badge_with(&app, token_with(extra.clone())).await;
        assert_eq!(answer.status, 200, "{extra}: {:?}", answer.body);
    }
}

#[tokio::test]
async fn exp_and_nbf_allow_thirty_seconds_of_clock_skew() {
    let app = App::start().await;
    let at = |exp: u64, nbf: Option<u64>| {
        let mut claims = json!({"sub": "u1", "tid": "acme", "exp": exp});
        if let Some(nbf) = nbf {
            claims["nbf"] = json!(nbf);
        }
        signed_jwt(HS256, &claims, JWT_SECRET)
    };
    let now = now();
    assert_eq!(badge_with(&app, at(now - 10, None)).await.status, 200, "expired 10 s ago");
    assert_refused(&badge_with(&app, at(now - 40, None)).await, 401, "unauthorized", "expired 40 s ago");
    assert_eq!(badge_with(&app, at(now + 3600, Some(now + 10))).await.status, 200, "valid in 10 s");
    assert_refused(&badge_with(&app, at(now + 3600, Some(now + 40))).await, 401, "unauthorized", "valid in 40 s");
}

#[tokio::test]
async fn the_leeway_is_configurable_and_checked() {
    let strict = App::with(Setup { variables: vec![("jwt_leeway_seconds", "0".into())], ..Setup::default() }).await;
    let expired = signed_jwt(HS256, &json!({"sub": "u1", "tid": "acme", "exp": now() - 10}), JWT_SECRET);
    assert_refused(&badge_with(&strict, expired.clone()).await, 401, "unauthorized", "no leeway");
    let lenient = App::with(Setup { variables: vec![("jwt_leeway_seconds", "120".into())], ..Setup::default() }).await;
    let long_expired = signed_jwt(HS256, &json!({"sub": "u1", "tid": "acme", "exp": now() - 90}), JWT_SECRET);
    assert_eq!(badge_with(&lenient, long_expired).await.status, 200, "120 s of leeway");
    for bad in ["soon", "-1", "301", "1.5"] {
        let app = App::with(Setup { variables: vec![("jwt_leeway_seconds", bad.into())], ..Setup::default() }).await;
        let answer = badge_with(&app, jwt("acme", "u1")).await;
        assert_refused(&answer, 503, "misconfigured", &format!("jwt_leeway_seconds = {bad}"));
    }
}

#[tokio::test]
async fn a_jwt_secret_shorter_than_32_bytes_is_503_misconfigured() {
    let short = "k".repeat(31);
    let app = App::with(Setup { variables: vec![("jwt_secret", short.clone())], ..Setup::default() }).await;
    let signed_with_short = signed_jwt(HS256, &json!({"sub": "u1", "tid": "acme", "exp": now() + 3600}), &short);
    let calls = [
        ("GET", "/v1/badge", None),
        ("GET", "/v1/conversations", None),
        ("POST", "/v1/mark-read", Some(json!({"conversation": "c1", "seq": 1}))),
        ("POST", "/v1/conversations/c1/mute", Some(json!({"muted": true}))),
        ("POST", "/v1/conversations/c1/pin", Some(json!({"pinned": true}))),
        ("POST", "/v1/conversations/c1/mark-unread", Some(json!({}))),
    ];
    for (method, path, body) in calls {
        for token in [Some(signed_with_short.clone()), Some(jwt("acme", "u1")), None] {
            let answer = app.send(method, path, token, body.as_ref().map(Value::to_string)).await;
            assert_refused(&answer, 503, "misconfigured", &format!("{method} {path}"));
            assert!(!answer.text.contains(&short) && !answer.text.contains("jwt_secret"), "{}", answer.text);
        }
    }
    // The shared-token routes do not use it.
    assert_eq!(app.touch(message("acme", "c1", 1, 1_000, "u2", &["u1", "u2"])).await.status, 200);

    let exactly = "k".repeat(32);
    let app = App::with(Setup { variables: vec![("jwt_secret", exactly.clone())], ..Setup::default() }).await;
    let token = signed_jwt(HS256, &json!({"sub": "u1", "tid": "acme", "exp": now() + 3600}), &exactly);
    assert_eq!(badge_with(&app, token).await.status, 200, "a 32-byte secret");
}

#[tokio::test]
async fn an_empty_shared_token_is_503_misconfigured_not_an_open_door() {
    let app = App::with(Setup {
        variables: vec![("service_token", String::new()), ("admin_token", String::new())],
        ..Setup::default()
    })
    .await;
    for (path, _, body) in shared_token_routes() {
        for token in [None, Some(String::new()), Some(" ".to_string()), Some("x".to_string())] {
            let answer = app.send("POST", path, token, Some(body.to_string())).await;
            assert_refused(&answer, 503, "misconfigured", path);
        }
    }
    assert!(app.redis.keys().is_empty());
}

fn is_generated(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A request (method, path, token, body) and the status it gets.
type Probe = (&'static str, &'static str, Option<String>, Option<Vec<u8>>, u16);

#[tokio::test]
async fn a_plain_request_id_is_echoed_on_every_answer() {
    let app = App::start().await;
    let touch = message("acme", "c1", 1, 1_000, "u1", &["u1", "u2"]).to_string().into_bytes();
    let calls: Vec<Probe> = vec![
        ("POST", "/v1/touch", Some(SERVICE_TOKEN.into()), Some(touch), 200),
        ("GET", "/v1/badge", Some(jwt("acme", "u2")), None, 200),
        ("GET", "/v1/conversations", Some(jwt("acme", "u2")), None, 200),
        ("GET", "/v1/badge", None, None, 401),
        ("GET", "/v1/conversations?limit=0", Some(jwt("acme", "u2")), None, 400),
        ("GET", "/v1/touch", Some(SERVICE_TOKEN.into()), None, 405),
        ("GET", "/nowhere", None, None, 404),
        ("POST", "/v1/admin/reconcile", Some(ADMIN_TOKEN.into()), Some(b"{\"tenant\":\"acme\"}".to_vec()), 409),
    ];
    for (n, (method, path, token, body, status)) in calls.into_iter().enumerate() {
        let given = format!("Req-{n}.a_b");
        let answer = app.send_with_headers(method, path, token, body, &[("x-request-id", &given)]).await;
        assert_eq!(answer.status, status, "{method} {path}: {:?}", answer.body);
        assert_eq!(answer.header("x-request-id"), Some(given.as_str()), "{method} {path}");
        assert!(answer.content_length.is_some(), "{method} {path}: no Content-Length");
        if status >= 400 {
            assert_eq!(answer.body["error"]["request_id"], given, "{method} {path}");
        }
    }
    let longest = "a".repeat(64);
    let answer = app.send_with_headers("GET", "/v1/badge", None, None, &[("x-request-id", &longest)]).await;
    assert_eq!(answer.header("x-request-id"), Some(longest.as_str()));
}

#[tokio::test]
async fn a_missing_or_unfit_request_id_is_replaced_by_a_fresh_one() {
    let app = App::start().await;
    let mut seen = std::collections::HashSet::new();
    let unfit = ["a b", "id/1", "{acme:u1}", "<script>", "ü", "", &"a".repeat(65)];
    for given in unfit.iter().map(|g| Some(*g)).chain([None, None, None]) {
        let headers: Vec<(&str, &str)> = given.map(|g| ("x-request-id", g)).into_iter().collect();
        for (method, path, token) in [("GET", "/v1/badge", Some(jwt("acme", "u1"))), ("GET", "/v1/badge", None)] {
            let answer = app.send_with_headers(method, path, token, None, &headers).await;
            let id = answer.header("x-request-id").unwrap_or_else(|| panic!("{given:?}: no x-request-id"));
            assert!(is_generated(id), "{given:?} gave {id:?}");
            assert!(seen.insert(id.to_string()), "{id} answered twice");
            if answer.status == 401 {
                assert_eq!(answer.body["error"]["request_id"], id);
            }
        }
    }
}

#[tokio::test]
async fn a_5xx_names_its_request_and_says_nothing_of_what_failed() {
    let app = App::start().await;
    app.touch(message("acme", "c1", 1, 1_000, "u1", &["u1", "u2"])).await;
    app.redis.kill();
    let touch = message("acme", "c1", 2, 2_000, "u1", &["u1", "u2"]).to_string().into_bytes();
    for (method, path, token, body) in [
        ("POST", "/v1/touch", SERVICE_TOKEN.to_string(), Some(touch)),
        ("GET", "/v1/badge", jwt("acme", "u2"), None),
        (
            "POST",
            "/v1/admin/clear-category",
            ADMIN_TOKEN.to_string(),
            Some(b"{\"tenant\":\"acme\",\"category\":\"chat\",\"user\":\"u2\"}".to_vec()),
        ),
    ] {
        for given in [Some("five-hundred-1"), None] {
            let headers: Vec<(&str, &str)> = given.map(|g| ("x-request-id", g)).into_iter().collect();
            let answer = app.send_with_headers(method, path, Some(token.clone()), body.clone(), &headers).await;
            assert_refused(&answer, 503, "unavailable", path);
            let error = answer.body["error"].as_object().unwrap();
            let keys: Vec<&str> = error.keys().map(String::as_str).collect();
            assert_eq!(keys, ["code", "message", "request_id"], "{path}");
            let id = answer.header("x-request-id").unwrap();
            assert!(given.map_or(is_generated(id), |g| g == id), "{path}: {id}");
            let message = error["message"].as_str().unwrap();
            assert!(!message.contains('\n'), "one line: {message:?}");
            for internal in ["redis", "Redis", "127.0.0.1", "refused", "connect", "lua", "sql", "os error"] {
                assert!(!answer.text.contains(internal), "{path}: {internal:?} in {}", answer.text);
            }
        }
    }
}
