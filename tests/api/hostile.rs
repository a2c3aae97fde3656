//! Hostile input: hand-written attacks on every route that takes a
//! body or a query. Each one must get its documented 4xx in the JSON error
//! shape, with Content-Length, and Redis must hold exactly what it held
//! before the barrage (key by key, value by value, DUMP by DUMP).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{
    ADMIN_TOKEN, App, KeySpace, SERVICE_TOKEN, assert_key_space_unchanged, assert_refused, jwt, message,
};

const T: &str = "acme";

/// Who may call a route.
#[derive(Clone, Copy, PartialEq)]
enum Caller {
    App,
    Service,
    Admin,
}

/// A body route and one valid body for it (aimed at the seeded state).
#[derive(Clone)]
struct Route {
    name: &'static str,
    path: String,
    caller: Caller,
    body: Value,
}

impl Route {
    fn new(name: &'static str, path: &str, caller: Caller, body: Value) -> Route {
        Route { name, path: path.to_string(), caller, body }
    }

    fn token(&self) -> String {
        match self.caller {
            Caller::App => jwt(T, "u2"),
            Caller::Service => SERVICE_TOKEN.to_string(),
            Caller::Admin => ADMIN_TOKEN.to_string(),
        }
    }

    async fn post(&self, app: &App, body: Vec<u8>) -> crate::support::Answer {
        app.send_bytes("POST", &self.path, Some(self.token()), Some(body)).await
    }
}

/// Every route that takes a JSON body, with a valid body.
fn body_routes() -> Vec<Route> {
    use Caller::{Admin as O, App as A, Service as S};
    vec![
        Route::new("touch", "/v1/touch", S, message(T, "c1", 4, 4_000, "u1", &["u1", "u2"])),
        Route::new("mark-read", "/v1/mark-read", A, json!({"conversation": "c1", "seq": 2})),
        Route::new("reconcile users", "/v1/admin/reconcile", O, json!({"tenant": T, "users": ["u1", "u2"]})),
        Route::new("reconcile walk", "/v1/admin/reconcile", O, json!({"tenant": T, "cursor": "u1"})),
        Route::new(
            "delete-conversation",
            "/v1/admin/conversations/c1/delete",
            O,
            json!({"tenant": T, "members": ["u1", "u2"]}),
        ),
        Route::new("mute", "/v1/conversations/c1/mute", A, json!({"muted": true})),
        Route::new("pin", "/v1/conversations/c1/pin", A, json!({"pinned": true})),
        Route::new("mark-unread", "/v1/conversations/c1/mark-unread", A, json!({})),
        Route::new(
            "recall",
            "/v1/recall",
            S,
            json!({"tenant": T, "conversation": "c1", "seq": 2, "members": ["u1", "u2"]}),
        ),
        Route::new(
            "join",
            "/v1/join",
            S,
            json!({"tenant": T, "conversation": "c1", "seq": 3, "members": ["u1", "u2"]}),
        ),
        Route::new(
            "clear-category users",
            "/v1/admin/clear-category",
            O,
            json!({"tenant": T, "category": "chat", "users": ["u1", "u2"]}),
        ),
        Route::new(
            "clear-category user",
            "/v1/admin/clear-category",
            O,
            json!({"tenant": T, "category": "chat", "user": "u2", "dry_run": false}),
        ),
        Route::new(
            "clear-category walk",
            "/v1/admin/clear-category",
            O,
            json!({"tenant": T, "category": "chat", "cursor": "u1"}),
        ),
    ]
}

/// Real state for tenant acme, through valid calls; the key space it left.
async fn seeded() -> (App, KeySpace) {
    let app = App::start().await;
    for seq in 1..=3 {
        let answer = app.touch(message(T, "c1", seq, 1_000 + seq, "u1", &["u1", "u2"])).await;
        assert_eq!(answer.status, 200, "{:?}", answer.body);
    }
    let mut system = message(T, "s1", 1, 2_000, "u3", &["u1", "u2", "u3"]);
    system["category"] = json!("system");
    assert_eq!(app.touch(system).await.status, 200);
    assert_eq!(app.mark_read(T, "u2", "c1", 1).await.status, 200);
    let before = app.redis.key_space();
    assert!(before.keys().any(|k| k.starts_with("un:v2:{acme:u2}:")), "seeding wrote {:?}", before.keys());
    (app, before)
}

/// `body` as JSON text with the value at `pointer` replaced by raw `literal`.
fn with_raw(body: &Value, pointer: &str, literal: &str) -> Vec<u8> {
    const MARK: &str = "\u{1}HOSTILE\u{1}";
    let mut body = body.clone();
    set(&mut body, pointer, json!(MARK));
    body.to_string().replacen(&json!(MARK).to_string(), literal, 1).into_bytes()
}

/// Sets the value at a JSON pointer, creating the field (or a one-element array) if missing.
fn set(body: &mut Value, pointer: &str, value: Value) {
    if let Some(slot) = body.pointer_mut(pointer) {
        *slot = value;
        return;
    }
    let (parent, last) = pointer.rsplit_once('/').unwrap();
    match body.pointer_mut(parent) {
        Some(Value::Object(fields)) => {
            fields.insert(last.to_string(), value);
        }
        Some(Value::Array(items)) => items.push(value),
        None => {
            // `/mentions/0` on a body without mentions.
            set(body, parent, json!([]));
            set(body, pointer, value);
        }
        Some(other) => panic!("cannot set {pointer} in {other}"),
    }
}

#[tokio::test]
async fn bodies_over_64_kib_are_413_on_every_body_route() {
    let (app, before) = seeded().await;
    for route in body_routes() {
        let valid = route.body.to_string();
        // Valid JSON but for its size: whitespace after the object, or inside it.
        let padded_after = format!("{valid}{}", " ".repeat(64 * 1024 + 1 - valid.len()));
        let padded_inside = format!("{{{}{}", " ".repeat(64 * 1024), &valid[1..]);
        let one_mib = format!("{valid}{}", "\n".repeat(1 << 20));
        let mut huge_field = route.body.clone();
        huge_field["pad"] = json!("x".repeat(70_000));
        for (what, body) in [
            ("65537 bytes", padded_after),
            ("padding inside", padded_inside),
            ("1 MiB", one_mib),
            ("huge field", huge_field.to_string()),
        ] {
            let answer = route.post(&app, body.into_bytes()).await;
            assert_refused(&answer, 413, "body_too_large", &format!("{} {what}", route.name));
        }
    }
    assert_key_space_unchanged(&before, &app.redis.key_space(), "oversized bodies");
}

#[tokio::test]
async fn a_body_of_exactly_64_kib_is_read_and_one_byte_more_is_413() {
    let (app, _) = seeded().await;
    let valid = json!({"conversation": "c1", "seq": 2}).to_string();
    let exactly = format!("{valid}{}", " ".repeat(64 * 1024 - valid.len()));
    let answer = app.send("POST", "/v1/mark-read", Some(jwt(T, "u2")), Some(exactly.clone() + " ")).await;
    assert_refused(&answer, 413, "body_too_large", "65537 bytes");
    assert_eq!(app.whole_list(T, "u2", 100).await.iter().find(|r| r["id"] == "c1").unwrap()["read_seq"], 1);
    let answer = app.send("POST", "/v1/mark-read", Some(jwt(T, "u2")), Some(exactly)).await;
    assert_eq!((answer.status, &answer.body["read_seq"]), (200, &json!(2)), "65536 bytes: {:?}", answer.body);
}

/// One HTTP/1.1 exchange on a fresh connection: status, head and body of the answer.
fn raw_exchange(address: &str, head: &str, body: &[u8]) -> (u16, String, Vec<u8>) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    // The server may answer (and stop reading) before all is sent.
    let _ = stream.write_all(head.as_bytes()).and_then(|_| stream.write_all(body));
    let mut received = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => received.extend_from_slice(&buffer[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset && !received.is_empty() => break,
            Err(e) => {
                panic!("no answer ({e}) after {} bytes: {:?}", received.len(), String::from_utf8_lossy(&received))
            }
        }
        if let Some(end) = received.windows(4).position(|w| w == b"\r\n\r\n") {
            let length = content_length(&received[..end]);
            if length.is_some_and(|n| received.len() >= end + 4 + n) {
                break;
            }
        }
    }
    let end = received.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP answer");
    let status = String::from_utf8_lossy(&received[9..12]).parse().unwrap();
    (status, String::from_utf8_lossy(&received[..end]).into_owned(), received[end + 4..].to_vec())
}

fn content_length(head: &[u8]) -> Option<usize> {
    String::from_utf8_lossy(head)
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
}

async fn raw(app: &App, head: String, body: Vec<u8>) -> crate::support::Answer {
    let address = app.address();
    let (status, head, bytes) =
        tokio::task::spawn_blocking(move || raw_exchange(&address, &head, &body)).await.unwrap();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let body = serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(text.clone()));
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    let content_length = content_length(head.as_bytes());
    crate::support::Answer { status, content_length, length: bytes.len(), body, headers, text }
}

#[tokio::test]
async fn chunked_bodies_over_64_kib_are_413_without_a_content_length() {
    let (app, before) = seeded().await;
    for route in body_routes() {
        let head = format!(
            "POST {} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
            route.path,
            route.token()
        );
        let mut body = Vec::new();
        let valid = route.body.to_string();
        for chunk in [valid.clone(), " ".repeat(40_000), " ".repeat(40_000)] {
            body.extend_from_slice(format!("{:x}\r\n{chunk}\r\n", chunk.len()).as_bytes());
        }
        body.extend_from_slice(b"0\r\n\r\n");
        let answer = raw(&app, head, body).await;
        assert_refused(&answer, 413, "body_too_large", &format!("{} chunked", route.name));
    }
    assert_key_space_unchanged(&before, &app.redis.key_space(), "chunked oversized bodies");
}

#[tokio::test]
async fn a_declared_length_over_64_kib_is_413_before_the_body_arrives() {
    let (app, before) = seeded().await;
    for route in body_routes() {
        let head = format!(
            "POST {} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 10000000\r\nConnection: close\r\n\r\n",
            route.path,
            route.token()
        );
        // Only the start of the promised body is ever sent.
        let answer = raw(&app, head, route.body.to_string().into_bytes()).await;
        assert_refused(&answer, 413, "body_too_large", &format!("{} declared 10 MB", route.name));
    }
    assert_key_space_unchanged(&before, &app.redis.key_space(), "declared oversized bodies");
}

#[tokio::test]
async fn deeply_nested_json_is_invalid_json_on_every_body_route() {
    let (app, before) = seeded().await;
    let arrays = format!("{}{}", "[".repeat(20_000), "]".repeat(20_000));
    let objects = format!("{}1{}", "{\"a\":".repeat(10_000), "}".repeat(10_000));
    for route in body_routes() {
        for (what, body) in [("20000 arrays", &arrays), ("10000 objects", &objects)] {
            assert!(body.len() < 64 * 1024);
            let answer = route.post(&app, body.clone().into_bytes()).await;
            assert_refused(&answer, 400, "invalid_json", &format!("{} {what}", route.name));
        }
    }
    assert_key_space_unchanged(&before, &app.redis.key_space(), "deeply nested bodies");
}

#[tokio::test]
async fn malformed_json_is_invalid_json_on_every_body_route() {
    let (app, before) = seeded().await;
    for route in body_routes() {
        let valid = route.body.to_string();
        let inner = &valid[1..valid.len() - 1];
        let sep = if inner.is_empty() { "" } else { "," };
        let cases = [
            ("truncated", valid[..valid.len() - 1].to_string()),
            ("trailing garbage", format!("{valid} x")),
            ("two objects", format!("{valid}{valid}")),
            ("trailing comma", format!("{{{inner},}}")),
            ("comment", format!("/* hi */{valid}")),
            ("single quotes", format!("{{'a':1{sep}{}}}", inner.replace('"', "'"))),
            ("NaN", format!("{{{inner}{sep}\"n\":NaN}}")),
            ("Infinity", format!("{{{inner}{sep}\"n\":-Infinity}}")),
            ("unquoted key", format!("{{n:1{sep}{inner}}}")),
            ("bad escape", format!("{{\"\\q\":1{sep}{inner}}}")),
            ("control char in string", format!("{{\"a\u{1}b\":1{sep}{inner}}}")),
        ];
        for (what, body) in cases {
            let answer = route.post(&app, body.into_bytes()).await;
            assert_refused(&answer, 400, "invalid_json", &format!("{} {what}", route.name));
        }
        if route.name != "mark-unread" {
            // mark-unread alone accepts an empty body.
            for (what, body) in [("empty", ""), ("whitespace", " \r\n\t ")] {
                let answer = route.post(&app, body.into()).await;
                assert_refused(&answer, 400, "invalid_json", &format!("{} {what}", route.name));
            }
        }
    }
    assert_key_space_unchanged(&before, &app.redis.key_space(), "malformed bodies");
}

#[tokio::test]
async fn bodies_that_are_not_objects_are_invalid_request() {
    let (app, before) = seeded().await;
    for route in body_routes() {
        for body in ["[]", "null", "1", "\"x\"", "true", &format!("[{}]", route.body)] {
            let answer = route.post(&app, body.into()).await;
            assert_refused(&answer, 400, "invalid_request", &format!("{} {body}", route.name));
        }
    }
    assert_key_space_unchanged(&before, &app.redis.key_space(), "bodies that are not objects");
}

#[tokio::test]
async fn bodies_that_are_not_utf8_are_invalid_json() {
    let (app, before) = seeded().await;
    let bad: [(&str, &[u8]); 6] = [
        ("0xff", b"\xff"),
        ("latin-1", b"\xfc"),
        ("overlong", b"\xc0\xaf"),
        ("surrogate", b"\xed\xa0\x80"),
        ("above U+10FFFF", b"\xf4\x90\x80\x80"),
        ("truncated sequence", b"\xe2\x82"),
    ];
    for route in body_routes() {
        let valid = route.body.to_string().into_bytes();
        for (what, bytes) in bad {
            // Inside a key, inside the first string value, and outside any string.
            let mut in_key = b"{\"".to_vec();
            in_key.extend_from_slice(bytes);
            in_key.extend_from_slice(b"\":1}");
            let mut outside = valid.clone();
            outside.splice(1..1, bytes.iter().copied());
            let mut cases = vec![("in a key", in_key), ("outside strings", outside)];
            if let Some(at) = valid.windows(2).position(|w| w == b":\"") {
                let mut in_value = valid.clone();
                in_value.splice(at + 2..at + 2, bytes.iter().copied());
                cases.push(("in a value", in_value));
            }
            for (place, body) in cases {
                let answer = route.post(&app, body).await;
                assert_refused(&answer, 400, "invalid_json", &format!("{} {what} {place}", route.name));
            }
        }
        let utf16: Vec<u8> = route.body.to_string().encode_utf16().flat_map(u16::to_le_bytes).collect();
        assert_refused(&route.post(&app, utf16).await, 400, "invalid_json", &format!("{} UTF-16", route.name));
    }
    assert_key_space_unchanged(&before, &app.redis.key_space(), "bodies that are not UTF-8");
}

/// Another valid value of the same kind, so that only the repetition is wrong.
fn other_value(value: &Value) -> Value {
    match value {
        Value::String(s) if s == "chat" => json!("system"),
        Value::String(_) => json!("x1"),
        Value::Number(n) => json!(n.as_u64().unwrap() + 1),
        Value::Bool(b) => json!(!b),
        Value::Array(_) => json!(["u3"]),
        Value::Object(_) => json!({"text": "other"}),
        Value::Null => json!("x1"),
    }
}

#[tokio::test]
async fn duplicate_keys_are_invalid_request_on_every_body_route() {
    let (app, before) = seeded().await;
    for route in body_routes() {
        let valid = route.body.to_string();
        for (field, value) in route.body.as_object().unwrap() {
            for repeated in [value.clone(), other_value(value)] {
                let repeated = format!("{}:{repeated}", json!(field));
                let first = format!("{{{repeated},{}", &valid[1..]);
                let last = format!("{},{repeated}}}", &valid[..valid.len() - 1]);
                for (what, body) in [("first", first), ("last", last)] {
                    let answer = route.post(&app, body.into_bytes()).await;
                    assert_refused(&answer, 400, "invalid_request", &format!("{} {field} repeated {what}", route.name));
                }
            }
            // The same name spelt with an escape is the same key.
            let escaped =
                format!("{{\"\\u{:04x}{}\":{},{}", field.as_bytes()[0], &field[1..], other_value(value), &valid[1..]);
            let answer = route.post(&app, escaped.into_bytes()).await;
            assert_refused(&answer, 400, "invalid_request", &format!("{} {field} repeated with an escape", route.name));
        }
    }
    assert_key_space_unchanged(&before, &app.redis.key_space(), "duplicate keys");
}

#[tokio::test]
async fn duplicate_keys_inside_a_preview_are_invalid_request() {
    let (app, before) = seeded().await;
    let touch = message(T, "c1", 4, 4_000, "u1", &["u1", "u2"]).to_string();
    for preview in
        [r#"{"text":"a","text":"b"}"#, r#"{"type":"text","text":"a","t\u0065xt":"b"}"#, r#"{"meta":{"k":1,"k":2}}"#]
    {
        let body = touch.replacen(r#"{"text":"message 4","type":"text"}"#, preview, 1);
        assert!(body.contains(preview));
        let answer = app.send("POST", "/v1/touch", Some(SERVICE_TOKEN.into()), Some(body)).await;
        assert_refused(&answer, 400, "invalid_request", &format!("preview {preview}"));
    }
    assert_key_space_unchanged(&before, &app.redis.key_space(), "previews with duplicate keys");
}

/// Guards the barrages: their snapshot sees even one flag set through a valid call.
#[tokio::test]
async fn the_key_space_snapshot_sees_the_smallest_write() {
    let (app, before) = seeded().await;
    let answer = app
        .send("POST", "/v1/conversations/c1/mute", Some(jwt(T, "u2")), Some(json!({"muted": true}).to_string()))
        .await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    let after = app.redis.key_space();
    let compared = std::panic::catch_unwind(|| assert_key_space_unchanged(&before, &after, "a mute"));
    assert!(compared.is_err(), "a mute left the key space as it was");
}

/// Every place in a body that holds a tenant, user or conversation id.
fn identifier_fields(route: &Route) -> Vec<&'static str> {
    match route.name {
        "touch" => vec!["/tenant", "/conversation", "/sender", "/members/0", "/members/1", "/mentions/0"],
        "mark-read" => vec!["/conversation"],
        "reconcile users" => vec!["/tenant", "/users/0", "/users/1"],
        "reconcile walk" => vec!["/tenant", "/cursor"],
        "delete-conversation" => vec!["/tenant", "/members/0", "/members/1"],
        "recall" => vec!["/tenant", "/conversation", "/members/0", "/members/1"],
        "clear-category users" => vec!["/tenant", "/users/0", "/users/1"],
        "clear-category user" => vec!["/tenant", "/user"],
        "clear-category walk" => vec!["/tenant", "/cursor"],
        _ => vec![],
    }
}

/// Values no identifier may take: identifiers are 1-128 bytes of UTF-8
/// without control characters (what Redis keys cannot carry is escaped, see
/// isolation.rs), so these are the empty, the overlong, control characters
/// and what is not a string.
fn hostile_identifiers() -> Vec<Value> {
    let mut bad: Vec<Value> = ["", "a\tb", "a\nb", "a\rb", "a\u{0}b", "\u{1b}[31m", "a\u{7f}b", "a\u{85}b", "\u{9f}"]
        .iter()
        .map(|s| json!(s))
        .collect();
    bad.push(json!("c".repeat(129)));
    bad.push(json!("名".repeat(43)));
    bad.push(json!("c".repeat(1000)));
    bad.extend([json!(1), json!(true), json!([]), json!({})]);
    bad
}

#[tokio::test]
async fn hostile_identifiers_in_bodies_are_invalid_request() {
    let (app, before) = seeded().await;
    for route in body_routes() {
        for field in identifier_fields(&route) {
            for value in hostile_identifiers() {
                let mut body = route.body.clone();
                set(&mut body, field, value.clone());
                let answer = route.post(&app, body.to_string().into_bytes()).await;
                assert_refused(&answer, 400, "invalid_request", &format!("{} {field} = {value}", route.name));
            }
            // Escapes JSON's grammar allows but that are no characters: lone surrogates.
            for literal in [r#""a\ud800b""#, r#""\udfff""#, r#""\ud800\u0041""#] {
                let answer = route.post(&app, with_raw(&route.body, field, literal)).await;
                assert_refused(&answer, 400, "invalid_request", &format!("{} {field} = {literal}", route.name));
            }
        }
    }
    assert_key_space_unchanged(&before, &app.redis.key_space(), "hostile identifiers in bodies");
}

#[tokio::test]
async fn hostile_categories_in_bodies_are_invalid_request() {
    let (app, before) = seeded().await;
    let mut bad: Vec<Value> =
        ["Chat", "CHAT", "a:b", "a{b}", "a*", "a b", "a.b", "", "ü", "chat\u{0}"].iter().map(|s| json!(s)).collect();
    bad.extend([json!("c".repeat(33)), json!(1), json!(["chat"])]);
    for route in body_routes().into_iter().filter(|r| r.body.get("category").is_some()) {
        for value in &bad {
            let mut body = route.body.clone();
            body["category"] = value.clone();
            let answer = route.post(&app, body.to_string().into_bytes()).await;
            assert_refused(&answer, 400, "invalid_request", &format!("{} category = {value}", route.name));
        }
    }
    assert_key_space_unchanged(&before, &app.redis.key_space(), "hostile categories");
}

#[tokio::test]
async fn hostile_identifiers_in_paths_are_invalid_request() {
    let (app, before) = seeded().await;
    let long = "c".repeat(129);
    // Percent-decoded, these are control characters, not UTF-8, or empty.
    let ids = ["a%00b", "%0A", "a%7Fb", "%C2%85", "%FF", "%C3", "a%ZZb", "a%4", "", &long];
    let routes = [
        (
            "delete-conversation",
            "/v1/admin/conversations/{}/delete",
            ADMIN_TOKEN.to_string(),
            json!({"tenant": T, "members": ["u1", "u2"]}),
        ),
        ("mute", "/v1/conversations/{}/mute", jwt(T, "u2"), json!({"muted": true})),
        ("pin", "/v1/conversations/{}/pin", jwt(T, "u2"), json!({"pinned": true})),
        ("mark-unread", "/v1/conversations/{}/mark-unread", jwt(T, "u2"), json!({})),
    ];
    for (name, template, token, body) in routes {
        for id in ids {
            let path = template.replace("{}", id);
            let answer = app.send("POST", &path, Some(token.clone()), Some(body.to_string())).await;
            assert_refused(&answer, 400, "invalid_request", &format!("{name} {path}"));
        }
    }
    assert_key_space_unchanged(&before, &app.redis.key_space(), "hostile identifiers in paths");
}

#[tokio::test]
async fn out_of_range_sequence_numbers_are_invalid_request() {
    let (app, before) = seeded().await;
    let bad = [
        "0",
        "-1",
        "-0",
        "1.5",
        "2.0",
        "1e0",
        "9007199254740992",
        "18446744073709551615",
        "18446744073709551616",
        "1e400",
        "-1e400",
        "123456789012345678901234567890",
        "\"2\"",
        "null",
        "true",
        "[2]",
        "{}",
    ];
    for route in body_routes().into_iter().filter(|r| r.body.get("seq").is_some()) {
        for literal in bad {
            let answer = route.post(&app, with_raw(&route.body, "/seq", literal)).await;
            assert_refused(&answer, 400, "invalid_request", &format!("{} seq {literal}", route.name));
        }
    }
    let touch = body_routes().into_iter().find(|r| r.name == "touch").unwrap();
    // ts in ms is kept as ts·1000 + seq mod 1000: beyond 2^53 / 1000 it would lose digits,
    // and near 2^64 it would wrap.
    for literal in [
        "-1",
        "1.5",
        "1e400",
        "18446744073709551616",
        "18446744073709551615",
        "18446744073709551",
        "9007199254740993",
        "\"4000\"",
        "null",
    ] {
        let answer = touch.post(&app, with_raw(&touch.body, "/ts", literal)).await;
        assert_refused(&answer, 400, "invalid_request", &format!("touch ts {literal}"));
    }
    assert_key_space_unchanged(&before, &app.redis.key_space(), "out-of-range numbers");
}

#[tokio::test]
async fn wrongly_typed_flags_and_lists_are_invalid_request() {
    let (app, before) = seeded().await;
    let cases: &[(&str, &str, &[&str])] = &[
        ("mute", "/muted", &["1", "0", "\"true\"", "null", "[]", "{}"]),
        ("pin", "/pinned", &["1", "\"false\"", "null"]),
        ("clear-category user", "/dry_run", &["1", "\"true\"", "[true]"]),
        ("touch", "/mention_all", &["1", "\"true\""]),
        ("touch", "/members", &["\"u1\"", "{}", "null"]),
        ("touch", "/preview", &["\"hi\"", "[]", "1"]),
        ("recall", "/members", &["\"u1\"", "[]"]),
        ("delete-conversation", "/members", &["\"u1\"", "[]"]),
        ("reconcile users", "/users", &["\"u1\"", "[]"]),
        ("clear-category users", "/users", &["\"u1\"", "[]"]),
    ];
    let routes = body_routes();
    for (name, field, literals) in cases {
        let route = routes.iter().find(|r| r.name == *name).unwrap();
        for literal in *literals {
            let answer = route.post(&app, with_raw(&route.body, field, literal)).await;
            assert_refused(&answer, 400, "invalid_request", &format!("{name} {field} {literal}"));
        }
    }
    assert_key_space_unchanged(&before, &app.redis.key_space(), "wrongly typed fields");
}

#[tokio::test]
async fn too_many_members_or_users_are_invalid_request() {
    let (app, before) = seeded().await;
    let ids = |n: usize| json!((0..n).map(|i| format!("u{i}")).collect::<Vec<_>>());
    let cases = [
        ("touch", "/members", ids(501)),
        ("touch", "/mentions", ids(501)),
        ("recall", "/members", ids(501)),
        ("delete-conversation", "/members", ids(501)),
        ("reconcile users", "/users", ids(1001)),
        ("clear-category users", "/users", ids(1001)),
    ];
    let routes = body_routes();
    for (name, field, value) in cases {
        let route = routes.iter().find(|r| r.name == name).unwrap();
        let mut body = route.body.clone();
        set(&mut body, field, value);
        assert!(body.to_string().len() < 64 * 1024);
        let answer = route.post(&app, body.to_string().into_bytes()).await;
        assert_refused(&answer, 400, "invalid_request", &format!("{name} {field} too long"));
    }
    // Both ways of naming users at once.
    for body in [json!({"tenant": T, "category": "chat", "user": "u1", "users": ["u2"]})] {
        let answer =
            app.send("POST", "/v1/admin/clear-category", Some(ADMIN_TOKEN.into()), Some(body.to_string())).await;
        assert_refused(&answer, 400, "invalid_request", &format!("clear-category {body}"));
    }
    assert_key_space_unchanged(&before, &app.redis.key_space(), "oversized lists");
}

#[tokio::test]
async fn unknown_fields_are_invalid_request_on_every_body_route() {
    let (app, before) = seeded().await;
    for route in body_routes() {
        for (field, value) in [
            ("user", json!("u1")),
            ("tenant_id", json!(T)),
            ("Seq", json!(2)),
            ("", json!(1)),
            ("__proto__", json!({})),
        ] {
            let mut body = route.body.clone();
            if body.get(field).is_some() {
                continue;
            }
            body[field] = value;
            let answer = route.post(&app, body.to_string().into_bytes()).await;
            assert_refused(&answer, 400, "invalid_request", &format!("{} extra field {field:?}", route.name));
        }
    }
    assert_key_space_unchanged(&before, &app.redis.key_space(), "unknown fields");
}

#[tokio::test]
async fn bad_query_parameters_of_list_and_badge_are_refused() {
    let (app, before) = seeded().await;
    let list_queries = [
        "limit=0",
        "limit=101",
        "limit=-1",
        "limit=1.5",
        "limit=1e1",
        "limit=0x10",
        "limit=%205",
        "limit=",
        "limit=abc",
        "limit=18446744073709551616",
        "limit=%FF",
        "limit=5&limit=5",
        "LIMIT=5",
        "limit[]=5",
        "user=u1",
        "tenant=acme",
        "sub=u1",
        "tid=acme",
        "%FF=1",
        "category=Chat",
        "category=a:b",
        "category=%7Bacme%7D",
        "category=",
        "category=a%20b",
        "category=%C3%BC",
        "category=%FF",
        "category=chat&category=chat",
        "preview=none",
        "preview=FULL",
        "preview=",
        "preview=full&preview=lockscreen",
    ];
    let long_category = format!("category={}", "c".repeat(33));
    for query in list_queries.iter().copied().chain([long_category.as_str()]) {
        let answer = app.send("GET", &format!("/v1/conversations?{query}"), Some(jwt(T, "u2")), None).await;
        assert_refused(&answer, 400, "invalid_query", &format!("list ?{query}"));
    }
    for query in [
        "cursor=%7B*%7D",
        "cursor=a:b",
        "cursor=.c1",
        "cursor=1000000.",
        "cursor=99999999999999999999.c1",
        "cursor=1000000.%7B",
    ] {
        let answer = app.send("GET", &format!("/v1/conversations?{query}"), Some(jwt(T, "u2")), None).await;
        assert_refused(&answer, 400, "invalid_request", &format!("list ?{query}"));
    }
    let badge_queries = [
        "limit=5",
        "user=u1",
        "tenant=acme",
        "category=Chat",
        "category=",
        "category=a:b",
        "category=%FF",
        "category=chat&category=chat",
        "category=chat&category=system",
        "Category=chat",
        "preview=full",
    ];
    for query in badge_queries.iter().copied().chain([long_category.as_str()]) {
        let answer = app.send("GET", &format!("/v1/badge?{query}"), Some(jwt(T, "u2")), None).await;
        assert_refused(&answer, 400, "invalid_query", &format!("badge ?{query}"));
    }
    assert_key_space_unchanged(&before, &app.redis.key_space(), "bad query parameters");
}
