//! Isolation: a caller reaches its own state only. Tenant acme's u1
//! tries, through every body field, query parameter and path of every app
//! route, to read or change acme/u2's or beta/u1's state; the victims' list,
//! badge and Redis keys must not move. Service and admin routes refuse app
//! JWTs, app routes refuse the service and admin tokens, and bad JWTs are 401
//! everywhere (each shared token on the other's routes: auth.rs).

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use crate::support::{
    ADMIN_TOKEN, Answer, App, Events, JWT_SECRET, KeySpace, SERVICE_TOKEN, assert_key_space_unchanged, assert_refused,
    ids, jwt, message, signed_jwt,
};

/// The users whose state acme/u1 must never reach.
const VICTIMS: [(&str, &str); 2] = [("acme", "u2"), ("beta", "u1")];

/// What a user sees with their own JWT, and what Redis holds for them.
#[derive(Debug)]
struct Seen {
    list: Vec<Value>,
    badge: Value,
    keys: KeySpace,
}

async fn seen(app: &App, tenant: &str, user: &str) -> Seen {
    let badge = app.badge(tenant, user).await;
    assert_eq!(badge.status, 200, "{:?}", badge.body);
    Seen {
        list: app.whole_list(tenant, user, 100).await,
        badge: badge.body,
        keys: app.redis.user_key_space(tenant, user),
    }
}

fn touch(tenant: &str, conversation: &str, seq: u64, members: &[&str], category: &str) -> Value {
    let mut body = message(tenant, conversation, seq, 1_000 * seq, "u9", members);
    body["category"] = json!(category);
    body
}

/// acme/u1: c12 (3 unread, shared with u2), c1only (1). acme/u2: c12 (3),
/// c2only (2, system). beta/u1: c12 (4, same id as acme's), b1 (2, system).
async fn seeded() -> (App, Vec<Seen>) {
    let app = App::start().await;
    let mut touches = Vec::new();
    touches.extend((1..=3).map(|seq| touch("acme", "c12", seq, &["u1", "u2"], "chat")));
    touches.push(touch("acme", "c1only", 1, &["u1"], "chat"));
    touches.extend((1..=2).map(|seq| touch("acme", "c2only", seq, &["u2"], "system")));
    touches.extend((1..=4).map(|seq| touch("beta", "c12", seq, &["u1"], "chat")));
    touches.extend((1..=2).map(|seq| touch("beta", "b1", seq, &["u1"], "system")));
    for body in touches {
        let answer = app.touch(body).await;
        assert_eq!((answer.status, &answer.body["applied"]), (200, &json!(true)), "{:?}", answer.body);
    }
    let mut before = Vec::new();
    for (tenant, user) in VICTIMS {
        before.push(seen(&app, tenant, user).await);
    }
    assert_eq!(ids(&before[0].list), ["c12", "c2only"]);
    assert_eq!(
        (&before[0].badge["total"], &before[0].badge["categories"]),
        (&json!(5), &json!({"chat": 3, "system": 2}))
    );
    assert_eq!(ids(&before[1].list), ["c12", "b1"]);
    assert_eq!(
        (&before[1].badge["total"], &before[1].badge["categories"]),
        (&json!(6), &json!({"chat": 4, "system": 2}))
    );
    assert!(before.iter().all(|s| !s.keys.is_empty()));
    (app, before)
}

fn row<'a>(rows: &'a [Value], id: &str) -> &'a Value {
    rows.iter().find(|r| r["id"] == id).unwrap_or_else(|| panic!("no {id} in {rows:?}"))
}

/// The victims' list, badge and keys are what they were.
async fn assert_victims_untouched(app: &App, before: &[Seen], what: &str) {
    for ((tenant, user), before) in VICTIMS.iter().zip(before) {
        let now = seen(app, tenant, user).await;
        assert_key_space_unchanged(&before.keys, &now.keys, &format!("{what} (keys of {tenant}/{user})"));
        assert_eq!(now.list, before.list, "{what}: the list of {tenant}/{user} changed");
        assert_eq!(now.badge, before.badge, "{what}: the badge of {tenant}/{user} changed");
    }
}

/// acme/u1's app calls, each aimed at a conversation acme/u1 has.
fn app_calls() -> Vec<(&'static str, &'static str, &'static str, Option<Value>)> {
    vec![
        ("list", "GET", "/v1/conversations", None),
        ("list of a category", "GET", "/v1/conversations?category=chat", None),
        ("badge", "GET", "/v1/badge", None),
        ("badge of a category", "GET", "/v1/badge?category=system", None),
        ("mark-read", "POST", "/v1/mark-read", Some(json!({"conversation": "c12", "seq": 3}))),
        ("mute", "POST", "/v1/conversations/c12/mute", Some(json!({"muted": true}))),
        ("pin", "POST", "/v1/conversations/c12/pin", Some(json!({"pinned": true}))),
        ("mark-unread", "POST", "/v1/conversations/c12/mark-unread", Some(json!({}))),
    ]
}

async fn as_u1(app: &App, method: &str, path: &str, body: Option<Value>) -> Answer {
    app.send(method, path, Some(jwt("acme", "u1")), body.map(|b| b.to_string())).await
}

#[tokio::test]
async fn body_fields_naming_another_user_or_tenant_are_refused() {
    let (app, before) = seeded().await;
    let everything = app.redis.key_space();
    let intruders = [
        ("user", json!("u2")),
        ("tenant", json!("beta")),
        ("sub", json!("u2")),
        ("tid", json!("beta")),
        ("user_id", json!("u2")),
        ("principal", json!({"tenant": "beta", "user": "u1"})),
        ("who", json!({"tenant": "acme", "user": "u2"})),
        ("members", json!(["u2"])),
        ("users", json!(["u2"])),
    ];
    for (name, method, path, body) in app_calls() {
        let Some(body) = body else { continue };
        for (field, value) in &intruders {
            let mut body = body.clone();
            body[*field] = value.clone();
            let answer = as_u1(&app, method, path, Some(body)).await;
            assert_refused(&answer, 400, "invalid_request", &format!("{name} with {field}"));
        }
    }
    assert_key_space_unchanged(&everything, &app.redis.key_space(), "bodies naming other users");
    assert_victims_untouched(&app, &before, "bodies naming other users").await;
}

#[tokio::test]
async fn query_parameters_naming_another_user_or_tenant_are_refused() {
    let (app, before) = seeded().await;
    let everything = app.redis.key_space();
    let queries =
        ["user=u2", "tenant=beta", "sub=u2", "tid=beta", "user=u2&tenant=beta", "category=chat&user=u2", "as=u2"];
    for (name, method, path, _) in app_calls().into_iter().filter(|c| c.1 == "GET") {
        for query in queries {
            let path = format!("{path}{}{query}", if path.contains('?') { '&' } else { '?' });
            let answer = as_u1(&app, method, &path, None).await;
            assert_refused(&answer, 400, "invalid_query", &format!("{name} ?{query}"));
        }
    }
    assert_key_space_unchanged(&everything, &app.redis.key_space(), "queries naming other users");
    assert_victims_untouched(&app, &before, "queries naming other users").await;
}

#[tokio::test]
async fn query_parameters_on_changing_routes_never_reach_another_user() {
    let (app, before) = seeded().await;
    for (name, method, path, body) in app_calls().into_iter().filter(|c| c.1 == "POST") {
        for query in ["user=u2&tenant=acme", "tenant=beta&user=u1", "sub=u2&tid=acme"] {
            let answer = as_u1(&app, method, &format!("{path}?{query}"), body.clone()).await;
            // Refused, or applied to the caller only: never to the victims.
            assert!(matches!(answer.status, 200 | 400), "{name} ?{query}: {answer:?}");
            if answer.status == 400 {
                assert_refused(&answer, 400, "invalid_query", &format!("{name} ?{query}"));
            }
        }
    }
    assert_victims_untouched(&app, &before, "queries on changing routes").await;
}

#[tokio::test]
async fn another_users_conversation_is_unknown_to_mute_pin_and_mark_unread() {
    let (app, before) = seeded().await;
    let everything = app.redis.key_space();
    // c2only is acme/u2's alone, b1 beta/u1's alone: acme/u1 has neither.
    for conversation in ["c2only", "b1", "nobody"] {
        for (action, body) in
            [("mute", json!({"muted": true})), ("pin", json!({"pinned": true})), ("mark-unread", json!({}))]
        {
            let path = format!("/v1/conversations/{conversation}/{action}");
            let answer = as_u1(&app, "POST", &path, Some(body)).await;
            assert_refused(&answer, 404, "unknown_conversation", &path);
        }
    }
    assert_key_space_unchanged(&everything, &app.redis.key_space(), "flags on others' conversations");
    assert_victims_untouched(&app, &before, "flags on others' conversations").await;
}

#[tokio::test]
async fn mark_read_of_another_users_conversation_reveals_and_changes_nothing_of_theirs() {
    let (app, before) = seeded().await;
    let own_badge = app.badge("acme", "u1").await.body;
    for (conversation, seq) in [("c2only", 2), ("b1", 2), ("c2only", 1)] {
        let answer = app.mark_read("acme", "u1", conversation, seq).await;
        // Not acme/u1's conversation: nothing unread of it, and the badge is acme/u1's own.
        assert_eq!(answer.status, 200, "{conversation}: {:?}", answer.body);
        assert_eq!(answer.body["unread"], 0, "{conversation}: {:?}", answer.body);
        assert_eq!(answer.body["badge"]["total"], own_badge["total"], "{conversation}: {:?}", answer.body);
        assert_eq!(answer.body["badge"]["categories"], own_badge["categories"], "{conversation}: {:?}", answer.body);
    }
    assert_eq!(ids(&app.whole_list("acme", "u1", 100).await), ["c12", "c1only"], "acme/u1 gained a conversation");
    assert_victims_untouched(&app, &before, "mark-read of others' conversations").await;
}

#[tokio::test]
async fn changes_to_a_shared_conversation_stay_with_the_caller() {
    let (app, before) = seeded().await;
    for (name, method, path, body) in app_calls().into_iter().filter(|c| c.1 == "POST") {
        let answer = as_u1(&app, method, path, body).await;
        assert_eq!(answer.status, 200, "{name}: {:?}", answer.body);
    }
    // acme/u1's own c12 changed: read up to 3, muted, pinned, marked unread.
    let mine = app.whole_list("acme", "u1", 100).await;
    let c12 = row(&mine, "c12");
    assert_eq!(
        (&c12["read_seq"], &c12["unread"], &c12["muted"], &c12["pinned"], &c12["marked_unread"]),
        (&json!(3), &json!(0), &json!(true), &json!(true), &json!(true)),
        "{c12}"
    );
    // acme/u2 shares c12 and beta/u1 has a c12 too: neither moved.
    assert_victims_untouched(&app, &before, "changes to a shared conversation").await;
    let u2 = app.whole_list("acme", "u2", 100).await;
    let theirs = row(&u2, "c12");
    assert_eq!(
        (&theirs["unread"], &theirs["muted"], &theirs["pinned"]),
        (&json!(3), &json!(false), &json!(false)),
        "{theirs}"
    );
}

#[tokio::test]
async fn list_and_badge_show_only_the_callers_own_conversations() {
    let (app, _) = seeded().await;
    let get = |path: &'static str| as_u1(&app, "GET", path, None);
    let list = get("/v1/conversations").await;
    assert_eq!(list.status, 200, "{:?}", list.body);
    assert_eq!(ids(list.body["conversations"].as_array().unwrap()), ["c12", "c1only"]);
    assert_eq!(row(list.body["conversations"].as_array().unwrap(), "c12")["unread"], 3);
    assert_eq!((&list.body["badge"]["total"], &list.body["badge"]["categories"]), (&json!(4), &json!({"chat": 4})));

    let chat = get("/v1/conversations?category=chat").await;
    assert_eq!(chat.status, 200, "{:?}", chat.body);
    assert_eq!(ids(chat.body["conversations"].as_array().unwrap()), ["c12", "c1only"]);
    let system = get("/v1/conversations?category=system").await;
    assert_eq!(
        (system.status, &system.body["conversations"]),
        (200, &json!([])),
        "acme/u1 has no system conversation: {:?}",
        system.body
    );

    let badge = get("/v1/badge").await;
    assert_eq!(
        (badge.status, &badge.body["total"], &badge.body["categories"]),
        (200, &json!(4), &json!({"chat": 4})),
        "{:?}",
        badge.body
    );
    let badge = get("/v1/badge?category=system").await;
    assert_eq!(
        (badge.status, &badge.body["total"], &badge.body["categories"]),
        (200, &json!(0), &json!({})),
        "{:?}",
        badge.body
    );
    let badge = get("/v1/badge?category=chat").await;
    assert_eq!(
        (badge.status, &badge.body["total"], &badge.body["categories"]),
        (200, &json!(4), &json!({"chat": 4})),
        "{:?}",
        badge.body
    );

    // The same user id in the other tenant sees its own numbers.
    let beta = app.whole_list("beta", "u1", 100).await;
    assert_eq!((ids(&beta), &row(&beta, "c12")["unread"]), (vec!["c12", "b1"], &json!(4)));
}

#[tokio::test]
async fn paths_cannot_reach_another_user_or_tenant() {
    let (app, before) = seeded().await;
    let everything = app.redis.key_space();
    for path in [
        "/v1/users/u2/badge",
        "/v1/badge/u2",
        "/v1/badge/acme/u2",
        "/v1/conversations/u2/c2only/mute",
        "/v1/conversations/c2only/mute/u2",
        "/v1/conversations/c2only/unmute",
        "/v1/tenants/beta/conversations",
        "/v1/beta/conversations/b1/mute",
        "/v1/conversations/b1/mute/beta",
        "/v1/mark-read/u2",
    ] {
        for method in ["GET", "POST"] {
            let answer = as_u1(&app, method, path, (method == "POST").then(|| json!({"muted": true}))).await;
            assert_refused(&answer, 404, "not_found", &format!("{method} {path}"));
        }
    }
    // Ids that spell another's key names are only ids: conversations u1 does not have.
    for (path, body) in [
        ("/v1/conversations/beta:b1/mute", json!({"muted": true})),
        ("/v1/conversations/%7Bbeta:u1%7D/pin", json!({"pinned": true})),
        ("/v1/conversations/acme:u2:c2only/mark-unread", json!({})),
        ("/v1/conversations/%7Bacme:u2%7D:list/mute", json!({"muted": true})),
    ] {
        let answer = as_u1(&app, "POST", path, Some(body)).await;
        assert_refused(&answer, 404, "unknown_conversation", path);
    }
    assert_key_space_unchanged(&everything, &app.redis.key_space(), "paths to others' state");
    assert_victims_untouched(&app, &before, "paths to others' state").await;
}

/// Each service route with a body it would accept.
fn service_calls() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        ("touch", "/v1/touch", touch("beta", "c12", 5, &["u1"], "chat")),
        ("reconcile", "/v1/admin/reconcile", json!({"tenant": "beta", "users": ["u1"]})),
        ("delete-conversation", "/v1/admin/conversations/c12/delete", json!({"tenant": "beta", "members": ["u1"]})),
        ("recall", "/v1/recall", json!({"tenant": "beta", "conversation": "c12", "seq": 4, "members": ["u1"]})),
        ("join", "/v1/join", json!({"tenant": "beta", "conversation": "c12", "seq": 4, "members": ["u1"]})),
        ("badges", "/v1/badges", json!({"tenant": "beta", "users": ["u1"]})),
        ("clear-category", "/v1/admin/clear-category", json!({"tenant": "beta", "category": "chat", "users": ["u1"]})),
        ("clear-category walk", "/v1/admin/clear-category", json!({"tenant": "acme", "category": "system"})),
    ]
}

#[tokio::test]
async fn service_routes_refuse_app_jwts() {
    let (app, before) = seeded().await;
    let everything = app.redis.key_space();
    let tokens = [
        jwt("acme", "u1"),
        jwt("beta", "u1"),
        jwt("acme", "service"),
        jwt("acme", SERVICE_TOKEN),
        jwt("acme", ADMIN_TOKEN),
    ];
    for (name, path, body) in service_calls() {
        for token in &tokens {
            let answer = app.send("POST", path, Some(token.clone()), Some(body.to_string())).await;
            assert_refused(&answer, 401, "unauthorized", &format!("{name} with a JWT"));
        }
    }
    assert_key_space_unchanged(&everything, &app.redis.key_space(), "service routes called with JWTs");
    assert_victims_untouched(&app, &before, "service routes called with JWTs").await;
}

#[tokio::test]
async fn app_routes_refuse_the_service_token() {
    let (app, before) = seeded().await;
    let everything = app.redis.key_space();
    for (name, method, path, body) in app_calls() {
        for token in [
            SERVICE_TOKEN.to_string(),
            format!("{SERVICE_TOKEN}.{SERVICE_TOKEN}.{SERVICE_TOKEN}"),
            ADMIN_TOKEN.to_string(),
            format!("{ADMIN_TOKEN}.{ADMIN_TOKEN}.{ADMIN_TOKEN}"),
        ] {
            let answer = app.send(method, path, Some(token), body.as_ref().map(Value::to_string)).await;
            assert_refused(&answer, 401, "unauthorized", &format!("{name} with a shared token"));
        }
    }
    assert_key_space_unchanged(&everything, &app.redis.key_space(), "app routes called with the service token");
    assert_victims_untouched(&app, &before, "app routes called with the service token").await;
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// `header.claims.` with no signature at all.
fn unsigned(header: &str, claims: &Value) -> String {
    format!("{}.{}.", URL_SAFE_NO_PAD.encode(header), URL_SAFE_NO_PAD.encode(claims.to_string()))
}

/// Tokens that must not authenticate anyone, each named.
fn bad_tokens() -> Vec<(&'static str, String)> {
    const HS256: &str = r#"{"alg":"HS256","typ":"JWT"}"#;
    let exp = now() + 3600;
    let claims = json!({"sub": "u2", "tid": "acme", "exp": exp});
    let sign = |claims: Value| signed_jwt(HS256, &claims, JWT_SECRET);
    let good = jwt("acme", "u1");
    let (good_head, _) = good.split_once('.').unwrap();
    let good_signature = good.rsplit_once('.').unwrap().1;
    let u2_payload = URL_SAFE_NO_PAD.encode(claims.to_string());
    vec![
        // Past the 30 s of clock skew that exp is allowed.
        ("expired", sign(json!({"sub": "u2", "tid": "acme", "exp": now() - 45}))),
        ("expired long ago", sign(json!({"sub": "u2", "tid": "acme", "exp": 1}))),
        ("not valid yet", sign(json!({"sub": "u2", "tid": "acme", "exp": exp, "nbf": now() + 600}))),
        ("not valid for another 45 s", sign(json!({"sub": "u2", "tid": "acme", "exp": exp, "nbf": now() + 45}))),
        ("alg none, empty signature", unsigned(r#"{"alg":"none","typ":"JWT"}"#, &claims)),
        ("alg None, empty signature", unsigned(r#"{"alg":"None"}"#, &claims)),
        ("alg none, no signature part", unsigned(r#"{"alg":"none"}"#, &claims).trim_end_matches('.').to_string()),
        ("alg none, a real signature", signed_jwt(r#"{"alg":"none"}"#, &claims, JWT_SECRET)),
        ("alg HS256, empty signature", unsigned(HS256, &claims)),
        ("alg HS512", signed_jwt(r#"{"alg":"HS512"}"#, &claims, JWT_SECRET)),
        ("alg RS256", signed_jwt(r#"{"alg":"RS256"}"#, &claims, JWT_SECRET)),
        ("no alg", signed_jwt(r#"{"typ":"JWT"}"#, &claims, JWT_SECRET)),
        ("another secret", signed_jwt(HS256, &claims, "another-secret")),
        ("empty secret", signed_jwt(HS256, &claims, "")),
        ("the service token as secret", signed_jwt(HS256, &claims, SERVICE_TOKEN)),
        ("u1's signature on u2's claims", format!("{good_head}.{u2_payload}.{good_signature}")),
        ("no tid", sign(json!({"sub": "u2", "exp": exp}))),
        ("no sub", sign(json!({"tid": "acme", "exp": exp}))),
        ("neither tid nor sub", sign(json!({"exp": exp}))),
        ("no exp", sign(json!({"sub": "u2", "tid": "acme"}))),
        ("exp as text", sign(json!({"sub": "u2", "tid": "acme", "exp": exp.to_string()}))),
        ("empty sub", sign(json!({"sub": "", "tid": "acme", "exp": exp}))),
        ("numeric sub", sign(json!({"sub": 2, "tid": "acme", "exp": exp}))),
        ("tid as a list", sign(json!({"sub": "u2", "tid": ["acme", "beta"], "exp": exp}))),
        ("four parts", format!("{good}.{good_signature}")),
        ("two parts", good.rsplit_once('.').unwrap().0.to_string()),
        ("padded base64", format!("{good}=")),
        ("not a JWT", "u2".to_string()),
    ]
}

/// Principals whose ids spell another's key names or patterns: real ids
/// (any printable text is one), each with state of its own only.
#[tokio::test]
async fn lookalike_principals_reach_only_their_own_state() {
    let (app, before) = seeded().await;
    for (tenant, user) in [
        ("beta}", "u1"),
        ("acme:u2", "u1"),
        ("acme", "{beta:u1}"),
        ("acme", "**"),
        ("acme", "u*"),
        ("acme", "u?"),
        ("acme", "u[12]"),
        ("*u", "**"),
        ("acme:", "u2"),
        ("acme", ":u2"),
    ] {
        let what = format!("{tenant:?}/{user:?}");
        for (name, method, path, body) in app_calls() {
            let answer = app.send(method, path, Some(jwt(tenant, user)), body.as_ref().map(Value::to_string)).await;
            match (name, answer.status) {
                ("list" | "list of a category", 200) => {
                    assert_eq!(answer.body["conversations"], json!([]), "{what} {name}");
                    assert_eq!(answer.body["badge"]["total"], 0, "{what} {name}");
                }
                ("badge" | "badge of a category", 200) => assert_eq!(answer.body["total"], 0, "{what} {name}"),
                (_, 404) => assert_eq!(answer.body["error"]["code"], "unknown_conversation", "{what} {name}"),
                // A read that comes before the conversation's first message is kept.
                ("mark-read", 200) => assert_eq!(answer.body["badge"]["total"], 0, "{what} {name}"),
                _ => panic!("{what} {name}: {} {:?}", answer.status, answer.body),
            }
        }
    }
    assert_victims_untouched(&app, &before, "lookalike principals").await;
}

#[tokio::test]
async fn bad_jwts_are_401_on_every_app_route() {
    let (app, before) = seeded().await;
    let everything = app.redis.key_space();
    for (token_name, token) in bad_tokens() {
        for (name, method, path, body) in app_calls() {
            let answer = app.send(method, path, Some(token.clone()), body.as_ref().map(Value::to_string)).await;
            assert_refused(&answer, 401, "unauthorized", &format!("{name} with {token_name}"));
        }
    }
    assert_key_space_unchanged(&everything, &app.redis.key_space(), "bad JWTs");
    assert_victims_untouched(&app, &before, "bad JWTs").await;
}

#[tokio::test]
async fn missing_or_malformed_authorization_is_401_on_every_app_route() {
    let (app, before) = seeded().await;
    let everything = app.redis.key_space();
    let good = jwt("acme", "u1");
    for (name, method, path, body) in app_calls() {
        let body = body.as_ref().map(Value::to_string);
        assert_refused(
            &app.send(method, path, None, body.clone()).await,
            401,
            "unauthorized",
            &format!("{name} without a token"),
        );
        assert_refused(
            &app.send(method, path, Some(String::new()), body.clone()).await,
            401,
            "unauthorized",
            &format!("{name} empty bearer"),
        );
        for header in [format!("Basic {good}"), good.clone(), format!("Token {good}")] {
            let answer = raw_authorization(&app, method, path, &header, body.clone()).await;
            assert_refused(&answer, 401, "unauthorized", &format!("{name} with Authorization: {}", &header[..5]));
        }
    }
    assert_key_space_unchanged(&everything, &app.redis.key_space(), "bad Authorization headers");
    assert_victims_untouched(&app, &before, "bad Authorization headers").await;
}

/// A request whose `Authorization` header is `value` as is.
async fn raw_authorization(app: &App, method: &str, path: &str, value: &str, body: Option<String>) -> Answer {
    let client = reqwest::Client::new();
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut request = client.request(method, format!("http://{}{path}", app.address())).header("authorization", value);
    if let Some(body) = body {
        request = request.header("content-type", "application/json").body(body);
    }
    Answer::read(request.send().await.unwrap()).await
}

#[tokio::test]
async fn service_calls_for_one_tenant_never_touch_another() {
    let (app, before) = seeded().await;
    let beta_before = &before[1..];
    let only_beta = |app: &App| {
        let now = app.redis.user_key_space("beta", "u1");
        assert_key_space_unchanged(&beta_before[0].keys, &now, "acme's service calls (keys of beta/u1)");
    };
    // The message store's routes take the service token, the operator's the admin token.
    let service = |path: &'static str, body: Value| {
        let token = if path.starts_with("/v1/admin/") { ADMIN_TOKEN } else { SERVICE_TOKEN };
        app.send("POST", path, Some(token.into()), Some(body.to_string()))
    };
    let answer =
        service("/v1/recall", json!({"tenant": "acme", "conversation": "c12", "seq": 3, "members": ["u1", "u2"]}))
            .await;
    assert_eq!((answer.status, &answer.body["changed"]), (200, &json!(2)), "{:?}", answer.body);
    only_beta(&app);
    let answer =
        service("/v1/admin/clear-category", json!({"tenant": "acme", "category": "chat", "users": ["u1"]})).await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    only_beta(&app);
    let answer =
        service("/v1/join", json!({"tenant": "acme", "conversation": "c12", "seq": 5, "members": ["u1"]})).await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    only_beta(&app);
    let answer =
        service("/v1/admin/clear-category", json!({"tenant": "acme", "category": "system", "all_users": true})).await;
    assert_eq!((answer.status, &answer.body["next_cursor"]), (200, &Value::Null), "{:?}", answer.body);
    only_beta(&app);
    let answer =
        service("/v1/admin/conversations/c12/delete", json!({"tenant": "acme", "members": ["u1", "u2"]})).await;
    assert_eq!((answer.status, &answer.body["removed"]), (200, &json!(2)), "{:?}", answer.body);
    only_beta(&app);
    let beta = seen(&app, "beta", "u1").await;
    assert_eq!((&beta.list, &beta.badge), (&beta_before[0].list, &beta_before[0].badge), "beta/u1 moved");
}

#[tokio::test]
async fn a_cursor_from_another_users_list_pages_only_the_callers_own_list() {
    let (app, before) = seeded().await;
    let mut cursors = Vec::new();
    for (tenant, user) in VICTIMS {
        let page = app.list(tenant, user, "limit=1").await;
        cursors.push(page.body["next_cursor"].as_str().expect("a second page").to_string());
    }
    for cursor in cursors {
        let page = app.list("acme", "u1", &format!("limit=100&cursor={cursor}")).await;
        assert_eq!(page.status, 200, "{cursor}: {:?}", page.body);
        let rows = page.body["conversations"].as_array().unwrap();
        assert!(ids(rows).iter().all(|id| ["c12", "c1only"].contains(id)), "{cursor}: {rows:?}");
        assert_eq!(page.body["badge"]["total"], 4, "{cursor}: {:?}", page.body);
    }
    assert_victims_untouched(&app, &before, "others' cursors").await;
}

#[tokio::test]
async fn another_users_pins_do_not_count_toward_the_callers_limit() {
    let app = App::start().await;
    for seq in 1..=6 {
        let conversation = format!("p{seq}");
        for (tenant, members) in [("acme", &["u1", "u2"][..]), ("beta", &["u1"][..])] {
            assert_eq!(app.touch(touch(tenant, &conversation, seq, members, "chat")).await.status, 200);
        }
    }
    let pin = |tenant: &'static str, user: &'static str, conversation: String| {
        let app = &app;
        async move {
            let body = json!({"pinned": true}).to_string();
            app.send("POST", &format!("/v1/conversations/{conversation}/pin"), Some(jwt(tenant, user)), Some(body))
                .await
        }
    };
    // acme/u2 and beta/u1 use up their own five pins.
    for (tenant, user) in VICTIMS {
        for seq in 1..=5 {
            let answer = pin(tenant, user, format!("p{seq}")).await;
            assert_eq!(answer.status, 200, "{tenant}/{user} p{seq}: {:?}", answer.body);
        }
    }
    let mut before = Vec::new();
    for (tenant, user) in VICTIMS {
        before.push(seen(&app, tenant, user).await);
    }
    // acme/u1 still has five of its own, and no sixth.
    for seq in 2..=6 {
        let answer = pin("acme", "u1", format!("p{seq}")).await;
        assert_eq!(
            (answer.status, &answer.body["conversation"]["pinned"]),
            (200, &json!(true)),
            "p{seq}: {:?}",
            answer.body
        );
    }
    assert_refused(&pin("acme", "u1", "p1".into()).await, 409, "too_many_pins", "acme/u1's sixth pin");
    assert_victims_untouched(&app, &before, "acme/u1's pins").await;
    let theirs = app.whole_list("acme", "u2", 100).await;
    assert_eq!(row(&theirs, "p6")["pinned"], false, "acme/u2's p6");
}

/// Identifiers as real systems issue them: emails, `auth0|…`, separators,
/// hash-tag braces, glob characters, unicode. Each names its own state, in
/// keys, paths, list cursors, walks and event channels.
#[tokio::test]
async fn real_world_identifiers_are_kept_apart() {
    let app = App::start().await;
    let mut star_events = Events::subscribe(&app, "t*");
    // (tenant, user, conversation, unread): pairs that would share key names
    // if separators were not escaped.
    let cases = [
        ("a:b", "c", "x", 2),
        ("a", "b:c", "x", 1),
        ("acme", "alice@example.com", "#general", 3),
        ("acme", "auth0|64f1c2", "a/b c", 4),
        ("acme", "名前", "ü", 5),
        ("acme", "{acme:u1}", "50%", 6),
        ("acme", "u1", "50%", 7),
        ("t*", "**", "[x]?", 8),
        ("tx", "**", "[x]?", 9),
    ];
    for (tenant, user, conversation, unread) in cases {
        for seq in 1..=unread {
            let body = message(tenant, conversation, seq, 1_000 * seq, "sender@example.com", &[user]);
            assert_eq!(app.touch(body).await.status, 200, "{tenant:?}/{user:?}");
        }
    }
    for (tenant, user, conversation, unread) in cases {
        let what = format!("{tenant:?}/{user:?}");
        let list = app.list(tenant, user, "").await;
        assert_eq!(list.status, 200, "{what}: {:?}", list.body);
        assert_eq!(ids(list.body["conversations"].as_array().unwrap()), [conversation], "{what}");
        assert_eq!(list.body["conversations"][0]["unread"], unread, "{what}");
        assert_eq!(app.badge(tenant, user).await.body["total"], unread, "{what}");
    }
    let events = star_events.take();
    assert_eq!(events.len(), 8, "tenant t* has 8 messages to ** and nothing of tx: {events:?}");
    assert!(events.iter().all(|e| e["user"] == "**" && e["conversation"] == "[x]?"), "{events:?}");
    // `*` alone names every member in the SQL store's mentions: no one is called that.
    let star = message("acme", "c", 1, 1_000, "sender@example.com", &["*"]);
    assert_refused(&app.touch(star).await, 400, "invalid_request", "a member named *");
    assert_refused(&app.badge("acme", "*").await, 401, "unauthorized", "a user named *");

    // A conversation id in a path is percent-encoded.
    let mute = app
        .send(
            "POST",
            "/v1/conversations/%23general/mute",
            Some(jwt("acme", "alice@example.com")),
            Some(json!({"muted": true}).to_string()),
        )
        .await;
    assert_eq!((mute.status, &mute.body["conversation"]["muted"]), (200, &json!(true)), "{:?}", mute.body);
    assert_eq!(app.badge("acme", "alice@example.com").await.body["muted"], 3);

    // List cursors carry any conversation id, URL-safe.
    let odd = ["#a b", "ü/ö", "x%y", "plain", "{acme:u1}", "a&b=c"];
    for (n, conversation) in odd.iter().enumerate() {
        let body = message("acme", conversation, 1, 10_000 + n as u64, "sender@example.com", &["pager@example.com"]);
        assert_eq!(app.touch(body).await.status, 200);
    }
    let seen = app.whole_list("acme", "pager@example.com", 1).await;
    let newest_first: Vec<&str> = odd.iter().rev().copied().collect();
    assert_eq!(ids(&seen), newest_first);

    // A walk of tenant "a"'s users (by their keys) finds its one user, none of tenant "a:b".
    let body = json!({"tenant": "a", "category": "chat", "all_users": true, "dry_run": true}).to_string();
    let walk = app.send("POST", "/v1/admin/clear-category", Some(ADMIN_TOKEN.into()), Some(body)).await;
    assert_eq!(
        (walk.status, &walk.body["users"], &walk.body["unread"]),
        (200, &json!(1), &json!(1)),
        "{:?}",
        walk.body
    );
}
