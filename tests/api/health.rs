//! `GET /v1/health`: what a load balancer or a Kubernetes probe sees, with
//! no credentials — 200 while Redis (and the SQL store, when configured)
//! answers, 503 in the error shape naming which one does not, within the
//! check's deadline even when a server hangs, and never a reason, address or
//! secret in the answer.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::store::{KINDS, Kind, MessageStore};
use crate::support::{Answer, App, REDIS_PASSWORD, Setup, Silent};

async fn health(app: &App) -> Answer {
    app.send("GET", "/v1/health", None, None).await
}

/// A 503 in the project's error shape: the states, then `error` with the
/// fixed message; nothing that says what failed inside or where.
fn assert_unavailable(answer: &Answer, redis: &str, sql: &str, what: &str) {
    assert_eq!(answer.status, 503, "{what}: {}", answer.text);
    let id = answer.header("x-request-id").expect("x-request-id");
    assert_eq!(
        answer.body,
        json!({"status": "unavailable", "redis": redis, "sql": sql, "error": {
            "code": "unavailable",
            "message": "the service is temporarily unavailable; try again later",
            "request_id": id,
        }}),
        "{what}"
    );
    assert_eq!(answer.text.lines().count(), 1, "{what}: one line");
    let text = answer.text.to_ascii_lowercase();
    for internal in
        ["redis:", "sql:", "127.0.0.1", "refused", "os error", "within", "ping.lua", "postgres", "mysql", "password"]
    {
        assert!(!text.contains(internal), "{what}: {internal:?} in {}", answer.text);
    }
    assert!(!answer.text.contains(REDIS_PASSWORD), "{what}");
}

#[tokio::test]
async fn cache_only_health_is_ok_without_credentials() {
    let app = App::start().await;
    let answer = health(&app).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert_eq!(answer.body, json!({"status": "ok", "redis": "ok", "sql": "not configured"}));
    assert_eq!(answer.content_length, Some(answer.length));
    assert!(answer.header("x-request-id").is_some());
    // Credentials are not looked at: a bad one changes nothing.
    let with_junk = app.send("GET", "/v1/health", Some("not-a-token".into()), None).await;
    assert_eq!((with_junk.status, &with_junk.body), (200, &answer.body));
    // The check touches no key.
    assert!(app.redis.keys().is_empty(), "{:?}", app.redis.keys());
}

#[tokio::test]
async fn health_takes_get_alone_and_no_query() {
    let app = App::start().await;
    let post = app.send("POST", "/v1/health", None, Some("{}".into())).await;
    assert_eq!((post.status, post.header("allow")), (405, Some("GET")), "{}", post.text);
    let query = app.send("GET", "/v1/health?verbose=1", None, None).await;
    assert_eq!((query.status, query.body["error"]["code"].as_str()), (400, Some("invalid_query")));
}

#[tokio::test]
async fn health_with_a_sql_store_checks_it_too() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = App::with(Setup { sql_url: Some(store.url.clone()), ..Setup::default() }).await;
        let answer = health(&app).await;
        assert_eq!(answer.status, 200, "{kind:?}: {}", answer.text);
        assert_eq!(answer.body, json!({"status": "ok", "redis": "ok", "sql": "ok"}), "{kind:?}");
        drop(app);
        store.drop_database().await;
    }
}

/// One server by design: a cluster node restarted empty is a new node
/// outside its cluster (the cluster's own test pauses its primaries).
#[tokio::test]
async fn redis_down_is_503_and_back_up_is_200() {
    let app = App::with(Setup::one_server()).await;
    assert_eq!(health(&app).await.status, 200);
    app.redis.kill();
    assert_unavailable(&health(&app).await, "unavailable", "not configured", "redis killed");
    app.redis.restart();
    let answer = health(&app).await;
    assert_eq!((answer.status, &answer.body["redis"]), (200, &json!("ok")), "{}", answer.text);
}

/// A server that keeps the connection and answers nothing (a hung Redis, a
/// dropped network) must not hold the probe: the answer comes within the
/// deadline, as a 503.
#[tokio::test]
async fn a_redis_that_hangs_is_503_within_the_deadline() {
    let app = App::start().await;
    assert_eq!(health(&app).await.status, 200);
    app.redis.pause();
    let started = Instant::now();
    let answer = health(&app).await;
    let took = started.elapsed();
    app.redis.resume();
    assert_unavailable(&answer, "unavailable", "not configured", "redis paused");
    assert!(took < Duration::from_millis(1_900), "the probe waited {took:?}");
}

/// On Redis Cluster the check reaches every primary: one that hangs, any
/// of them (the node `redis_url` names, or another), makes the answer a
/// 503 within the deadline, as calls on its slots fail; once it answers
/// again, so does the check.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_a_cluster_any_primary_that_hangs_is_503_within_the_deadline() {
    let app = App::with(Setup { cluster: true, ..Setup::default() }).await;
    let cluster = app.cluster.as_ref().unwrap();
    assert_eq!(health(&app).await.status, 200);
    let primaries: Vec<_> = cluster.primaries().into_iter().cloned().collect();
    assert_eq!(primaries.len(), 3);
    for primary in primaries {
        primary.pause();
        let started = Instant::now();
        let answer = health(&app).await;
        let took = started.elapsed();
        primary.resume();
        let what = format!("primary on port {} paused", primary.port);
        assert_unavailable(&answer, "unavailable", "not configured", &what);
        assert!(took < Duration::from_millis(1_900), "{what}: the probe waited {took:?}");
        cluster.wait_until_settled();
        let answer = health(&app).await;
        assert_eq!((answer.status, &answer.body["redis"]), (200, &json!("ok")), "{what}, resumed: {}", answer.text);
    }
}

/// A SQL server that refuses connections, and one that accepts them and
/// answers nothing: each is 503 `sql: unavailable` while Redis stays `ok`
/// (its check does not wait for the SQL store), within the deadline.
#[tokio::test]
async fn sql_unreachable_is_503_naming_sql_alone() {
    for kind in KINDS {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let silent = Silent::start().await;
        for (what, port) in [("refused", closed), ("silent", silent.port)] {
            let app = App::with(Setup { sql_url: Some(url_on(kind, port)), ..Setup::default() }).await;
            let started = Instant::now();
            let answer = health(&app).await;
            let took = started.elapsed();
            let what = format!("{kind:?}, {what}");
            assert_unavailable(&answer, "ok", "unavailable", &what);
            assert!(took < Duration::from_millis(1_900), "{what}: the probe waited {took:?}");
        }
    }
}

/// The same store dropped under a running function: the next check says so.
#[tokio::test]
async fn a_sql_store_that_goes_away_is_noticed() {
    let store = MessageStore::create(Kind::Postgres).await;
    let app = App::with(Setup { sql_url: Some(store.url.clone()), ..Setup::default() }).await;
    assert_eq!(health(&app).await.body["sql"], "ok");
    store.drop_database().await;
    assert_unavailable(&health(&app).await, "ok", "unavailable", "database dropped");
}

/// A connection URL of `kind` to a server on this port of the loopback.
fn url_on(kind: Kind, port: u16) -> String {
    match kind {
        Kind::Postgres => format!("postgres://postgres@127.0.0.1:{port}/unread?sslmode=disable"),
        Kind::MariaDb => format!("mysql://root@127.0.0.1:{port}/unread"),
    }
}
