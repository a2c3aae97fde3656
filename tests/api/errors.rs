//! Bad input gets a clear 4xx in the error shape and writes
//! nothing; Redis unreachable gets 503, saying nothing of why (the reason
//! goes to the operator's log: see logs.rs).

use serde_json::{Value, json};

use crate::support::{ADMIN_TOKEN, Answer, App, SERVICE_TOKEN, jwt, message, signed_jwt};

fn assert_error(answer: &Answer, status: u16, code: &str) {
    assert_eq!(answer.status, status, "{:?}", answer.body);
    assert_eq!(answer.body["error"]["code"], code, "{:?}", answer.body);
    assert!(answer.body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()));
    assert!(answer.content_length.is_some(), "error answers carry Content-Length");
    let id = answer.header("x-request-id");
    assert!(id.is_some() && answer.body["error"]["request_id"].as_str() == id, "{:?} {id:?}", answer.body);
}

fn with(mut body: Value, field: &str, value: Value) -> Value {
    body[field] = value;
    body
}

fn without(mut body: Value, field: &str) -> Value {
    body.as_object_mut().unwrap().remove(field);
    body
}

#[tokio::test]
async fn bad_touches_are_refused_and_write_nothing() {
    let app = App::start().await;
    let good = message("acme", "c1", 1, 1_000, "u1", &["u1", "u2"]);
    let too_many: Vec<String> = (0..501).map(|i| format!("u{i}")).collect();
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        ("not json", b"{".to_vec(), 400, "invalid_json"),
        ("not utf-8", b"{\"tenant\":\"\xff\"}".to_vec(), 400, "invalid_json"),
        ("an array", b"[]".to_vec(), 400, "invalid_request"),
        ("unknown field", with(good.clone(), "extra", json!(1)).to_string().into_bytes(), 400, "invalid_request"),
        ("missing seq", without(good.clone(), "seq").to_string().into_bytes(), 400, "invalid_request"),
        ("seq as string", with(good.clone(), "seq", json!("1")).to_string().into_bytes(), 400, "invalid_request"),
        ("seq 0", with(good.clone(), "seq", json!(0)).to_string().into_bytes(), 400, "invalid_request"),
        ("seq 2^53", with(good.clone(), "seq", json!(1u64 << 53)).to_string().into_bytes(), 400, "invalid_request"),
        (
            "seq beyond u64",
            good.to_string().replace("\"seq\":1", "\"seq\":18446744073709551616").into_bytes(),
            400,
            "invalid_request",
        ),
        ("negative ts", with(good.clone(), "ts", json!(-1)).to_string().into_bytes(), 400, "invalid_request"),
        (
            "ts beyond 2255",
            with(good.clone(), "ts", json!(9_007_199_254_741u64)).to_string().into_bytes(),
            400,
            "invalid_request",
        ),
        (
            "tenant with a newline",
            with(good.clone(), "tenant", json!("a\nb")).to_string().into_bytes(),
            400,
            "invalid_request",
        ),
        (
            "conversation with a NUL",
            with(good.clone(), "conversation", json!("a\u{0}b")).to_string().into_bytes(),
            400,
            "invalid_request",
        ),
        (
            "member with an escape character",
            with(good.clone(), "members", json!(["u\u{1b}[1m"])).to_string().into_bytes(),
            400,
            "invalid_request",
        ),
        ("empty member", with(good.clone(), "members", json!([""])).to_string().into_bytes(), 400, "invalid_request"),
        (
            "member over 128 bytes",
            with(good.clone(), "members", json!(["ü".repeat(65)])).to_string().into_bytes(),
            400,
            "invalid_request",
        ),
        (
            "long id",
            with(good.clone(), "conversation", json!("c".repeat(129))).to_string().into_bytes(),
            400,
            "invalid_request",
        ),
        ("no members", with(good.clone(), "members", json!([])).to_string().into_bytes(), 400, "invalid_request"),
        (
            "501 members",
            with(good.clone(), "members", json!(too_many)).to_string().into_bytes(),
            400,
            "invalid_request",
        ),
        (
            "bad category",
            with(good.clone(), "category", json!("Chat")).to_string().into_bytes(),
            400,
            "invalid_request",
        ),
        (
            "preview not object",
            with(good.clone(), "preview", json!("hi")).to_string().into_bytes(),
            400,
            "invalid_request",
        ),
        (
            "preview over 1 KiB",
            with(good.clone(), "preview", json!({"text": "x".repeat(1100)})).to_string().into_bytes(),
            400,
            "preview_too_large",
        ),
        ("duplicate key", good.to_string().replacen("{", "{\"seq\":2,", 1).into_bytes(), 400, "invalid_request"),
        (
            "deeply nested",
            with(good.clone(), "preview", json!({"x": "NEST"}))
                .to_string()
                .replace("\"NEST\"", &format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)))
                .into_bytes(),
            400,
            "invalid_json",
        ),
        (
            "body over 64 KiB",
            with(good.clone(), "pad", json!("x".repeat(70_000))).to_string().into_bytes(),
            413,
            "body_too_large",
        ),
    ];
    for (name, body, status, code) in cases {
        let answer = app.send_bytes("POST", "/v1/touch", Some(SERVICE_TOKEN.into()), Some(body)).await;
        assert_eq!(answer.status, status, "{name}: {:?}", answer.body);
        assert_error(&answer, status, code);
    }
    assert!(app.redis.keys().is_empty(), "rejected touches wrote {:?}", app.redis.keys());
}

#[tokio::test]
async fn bad_app_calls_are_refused_and_write_nothing() {
    let app = App::start().await;
    let token = || Some(jwt("acme", "u1"));
    let post = |body: &str| Some(body.to_string());
    for (body, code) in [
        ("{\"conversation\":\"c1\"}", "invalid_request"),
        ("{\"conversation\":\"c1\",\"seq\":0}", "invalid_request"),
        ("{\"conversation\":\"c\\u0007\",\"seq\":1}", "invalid_request"),
        ("{\"conversation\":\"c1\",\"seq\":1,\"user\":\"u2\"}", "invalid_request"),
        ("nope", "invalid_json"),
    ] {
        assert_error(&app.send("POST", "/v1/mark-read", token(), post(body)).await, 400, code);
    }
    for query in [
        "limit=0",
        "limit=101",
        "limit=x",
        "cursor=abc",
        "cursor=1",
        "cursor=99999999999999999999.c1",
        "foo=1",
        "limit=5&limit=6",
    ] {
        let answer = app.send("GET", &format!("/v1/conversations?{query}"), token(), None).await;
        assert_error(&answer, 400, if query.starts_with("cursor") { "invalid_request" } else { "invalid_query" });
    }
    assert_error(&app.send("GET", "/v1/badge?user=u2", token(), None).await, 400, "invalid_query");
    assert!(app.redis.keys().is_empty(), "rejected calls wrote {:?}", app.redis.keys());
}

#[tokio::test]
async fn callers_must_authenticate() {
    let app = App::start().await;
    let exp = 4_000_000_000u64;
    let claims = json!({"sub": "u1", "tid": "acme", "exp": exp});
    let bad_tokens = [
        None,
        Some("not-a-jwt".to_string()),
        Some(signed_jwt(r#"{"alg":"HS256"}"#, &claims, "wrong-secret")),
        Some(signed_jwt(
            r#"{"alg":"HS256"}"#,
            &json!({"sub": "u1", "tid": "acme", "exp": 1}),
            crate::support::JWT_SECRET,
        )),
        Some(signed_jwt(r#"{"alg":"HS256"}"#, &json!({"sub": "u1", "tid": "acme"}), crate::support::JWT_SECRET)),
        Some(signed_jwt(r#"{"alg":"HS384"}"#, &claims, crate::support::JWT_SECRET)),
        Some(format!("{}.", signed_jwt(r#"{"alg":"none"}"#, &claims, "").rsplit_once('.').unwrap().0)),
        Some(SERVICE_TOKEN.to_string()),
    ];
    for token in bad_tokens {
        for (method, path, body) in [
            ("GET", "/v1/badge", None),
            ("GET", "/v1/conversations", None),
            ("POST", "/v1/mark-read", Some("{\"conversation\":\"c1\",\"seq\":1}")),
        ] {
            let answer = app.send(method, path, token.clone(), body.map(String::from)).await;
            assert_error(&answer, 401, "unauthorized");
        }
    }
    let touch = message("acme", "c1", 1, 1_000, "u1", &["u1"]).to_string();
    for token in [None, Some("wrong".to_string()), Some(jwt("acme", "u1")), Some(ADMIN_TOKEN.to_string())] {
        assert_error(&app.send("POST", "/v1/touch", token, Some(touch.clone())).await, 401, "unauthorized");
    }
    assert!(app.redis.keys().is_empty());
}

#[tokio::test]
async fn wrong_methods_and_unknown_routes() {
    let app = App::start().await;
    assert_error(&app.send("GET", "/v1/touch", Some(SERVICE_TOKEN.into()), None).await, 405, "method_not_allowed");
    assert_error(&app.send("GET", "/v1/mark-read", Some(jwt("acme", "u1")), None).await, 405, "method_not_allowed");
    assert_error(
        &app.send("POST", "/v1/conversations", Some(jwt("acme", "u1")), None).await,
        405,
        "method_not_allowed",
    );
    assert_error(&app.send("DELETE", "/v1/badge", Some(jwt("acme", "u1")), None).await, 405, "method_not_allowed");
    for path in ["/", "/v1", "/v1/nope", "/v1/touch/x", "/v2/badge"] {
        assert_error(&app.send("GET", path, None, None).await, 404, "not_found");
    }
}

#[tokio::test]
async fn redis_unreachable_is_a_503() {
    let app = App::start().await;
    app.touch(message("acme", "c1", 1, 1_000, "u1", &["u1", "u2"])).await;
    app.redis.kill();
    let token = Some(jwt("acme", "u2"));
    for answer in [
        app.touch(message("acme", "c1", 2, 1_001, "u1", &["u1", "u2"])).await,
        app.send("POST", "/v1/mark-read", token.clone(), Some("{\"conversation\":\"c1\",\"seq\":1}".into())).await,
        app.send("GET", "/v1/conversations", token.clone(), None).await,
        app.send("GET", "/v1/badge", token.clone(), None).await,
    ] {
        assert_error(&answer, 503, "unavailable");
        assert!(!answer.text.to_lowercase().contains("redis"), "the answer says why: {}", answer.text);
    }
}

#[tokio::test]
async fn a_redis_that_stops_answering_is_a_503_not_a_hung_request() {
    let app = App::start().await;
    app.touch(message("acme", "c1", 1, 1_000, "u1", &["u1", "u2"])).await;
    app.redis.pause();
    let token = Some(jwt("acme", "u2"));
    let answers = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        vec![
            app.touch(message("acme", "c1", 2, 1_001, "u1", &["u1", "u2"])).await,
            app.send("GET", "/v1/badge", token.clone(), None).await,
        ]
    })
    .await
    .expect("the calls answer while Redis is stopped");
    app.redis.resume();
    // On a cluster the other nodes may have failed the stopped primary over
    // to its replica meanwhile (past the node timeout): the calls in between
    // are refused while the cluster elects and spreads the new owner, and
    // the next call below is for a cluster that has settled again.
    if let Some(cluster) = &app.cluster {
        cluster.wait_until_settled();
    }
    for answer in answers {
        assert_error(&answer, 503, "unavailable");
        // Why (no answer within the deadline) is for the operator's log, not the caller.
        assert!(!answer.body["error"]["message"].as_str().unwrap().contains("no answer"), "{:?}", answer.body);
    }
    // The stopped connection was dropped; the next call opens another.
    assert_eq!(app.touch(message("acme", "c1", 3, 1_002, "u1", &["u1", "u2"])).await.status, 200);
    // Seq 2 may have waited in the stopped server's socket and been applied on resume.
    assert!(app.badge("acme", "u2").await.body["total"].as_u64().unwrap() >= 2);
}
