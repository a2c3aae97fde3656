//! Cache-only, Redis holds the only copy of every read cursor: a Redis that
//! lost its data (restarted without persistence, flushed) answers from
//! nothing, and says so in every answer with a badge and in the log, until
//! the operator clears it.

use serde_json::{Value, json};

use crate::support::{App, DATASET_KEY, Setup, jwt, message};

/// `state` of every answer that carries a badge, for `user` of acme.
async fn states(app: &App, user: &str) -> Vec<Value> {
    let read = json!({"conversation": "c1", "seq": 1}).to_string();
    vec![
        app.badge("acme", user).await.body["state"].clone(),
        app.list("acme", user, "").await.body["state"].clone(),
        app.send("POST", "/v1/mark-read", Some(jwt("acme", user)), Some(read)).await.body["state"].clone(),
        app.send(
            "POST",
            "/v1/conversations/c1/pin",
            Some(jwt("acme", user)),
            Some(json!({"pinned": true}).to_string()),
        )
        .await
        .body["state"]
            .clone(),
    ]
}

/// Closes the app's connections to Redis (the test's own goes too): each
/// instance opens a new one at its next call.
fn drop_app_connections(app: &App) {
    let mut redis = app.redis.connection().unwrap();
    let _: redis::RedisResult<()> = redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("normal").query(&mut redis);
}

#[tokio::test]
async fn a_restart_without_persistence_is_reported_as_lost() {
    // One server restarted empty (a cluster's primary fails over to its
    // replica instead, which keeps the data).
    let app = App::with(Setup::one_server()).await;
    for seq in 1..=3 {
        assert_eq!(app.touch(message("acme", "c1", seq, 1_000 * seq, "u1", &["u1", "u2"])).await.status, 200);
    }
    let before = app.badge("acme", "u2").await;
    assert_eq!((&before.body["total"], before.body.get("state")), (&json!(3), None), "{:?}", before.body);

    // Nothing persisted: the server comes back empty.
    app.redis.kill();
    app.redis.restart();
    let after = app.badge("acme", "u2").await;
    assert_eq!(after.status, 200, "{:?}", after.body);
    assert_eq!((&after.body["total"], &after.body["state"]), (&json!(0), &json!("lost")), "{:?}", after.body);
    assert_eq!(after.body["source"], "redis");
    assert_eq!(after.body["degraded"], false);
    // Every answer with a badge says so, for every user and tenant.
    assert_eq!(app.touch(message("acme", "c1", 4, 4_000, "u1", &["u1", "u2"])).await.status, 200);
    assert_eq!(states(&app, "u2").await, vec![json!("lost"); 4]);
    assert_eq!(app.badge("beta", "someone").await.body["state"], "lost");

    // The operator handles the loss and clears it: instances see that on
    // their next connection (or within a minute), and answer normally again.
    let _: () = redis::cmd("HDEL").arg(DATASET_KEY).arg("lost").query(&mut app.redis.connection().unwrap()).unwrap();
    drop_app_connections(&app);
    assert_eq!(states(&app, "u2").await, vec![Value::Null; 4]);
}

#[tokio::test]
async fn a_flush_is_reported_as_lost_and_a_new_redis_is_not() {
    // A new, empty Redis is not a loss (one server: a flushed cluster is
    // every primary at once, which the flush below is not).
    let app = App::with(Setup::one_server()).await;
    assert_eq!(app.badge("acme", "u2").await.body.get("state"), None);
    assert_eq!(app.touch(message("acme", "c1", 1, 1_000, "u1", &["u1", "u2"])).await.status, 200);
    assert_eq!(app.badge("acme", "u2").await.body["total"], 1);
    // FLUSHALL while the app holds its connection; the next connection sees it.
    app.redis.flush_all();
    drop_app_connections(&app);
    for _ in 0..3 {
        let badge = app.badge("acme", "u2").await;
        assert_eq!((&badge.body["total"], &badge.body["state"]), (&json!(0), &json!("lost")), "{:?}", badge.body);
    }
}
