//! With `redis_wait_replicas`, a call that writes answers only once that
//! many replicas hold what it wrote (Redis `WAIT`), so that a primary that
//! fails and whose replica takes over cannot take an answered write with it.
//! Replicas that do not acknowledge in time make the call a 503, which the
//! app sends again (every call is idempotent); with a SQL store, the answer
//! comes from the truth. Reads do not wait.

use std::collections::BTreeMap;

use serde_json::json;

use crate::store::{Kind, MessageStore};
use crate::support::{Answer, App, RedisServer, Setup, jwt, message};

/// The setup with every write waiting for one replica.
fn waiting_for_one(setup: Setup) -> Setup {
    Setup { variables: vec![("redis_wait_replicas", "1".into())], ..setup }
}

/// Everything `server` holds, key by key: its type and content (hash fields
/// in order), to compare a primary with its replica. A cluster's replica
/// answers reads after `READONLY`.
fn contents(server: &RedisServer, cluster_replica: bool) -> BTreeMap<String, String> {
    let mut connection = server.connection().unwrap();
    if cluster_replica {
        let _: () = redis::cmd("READONLY").query(&mut connection).unwrap();
    }
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut connection).unwrap();
    let mut contents = BTreeMap::new();
    for key in keys {
        let kind: String = redis::cmd("TYPE").arg(&key).query(&mut connection).unwrap();
        let mut read = |command: &str, args: &[&str]| -> redis::Value {
            redis::cmd(command).arg(&key).arg(args).query(&mut connection).unwrap()
        };
        let content = match kind.as_str() {
            "string" => format!("{:?}", read("GET", &[])),
            "hash" => {
                let fields: BTreeMap<Vec<u8>, Vec<u8>> = redis::from_redis_value(&read("HGETALL", &[])).unwrap();
                format!("{fields:?}")
            }
            "zset" => format!("{:?}", read("ZRANGE", &["0", "-1", "WITHSCORES"])),
            other => panic!("{key}: a {other}, which unread does not write"),
        };
        contents.insert(key, format!("{kind} {content}"));
    }
    contents
}

/// A 503 that says Redis is unavailable, and nothing of why.
fn assert_unavailable(answer: &Answer, what: &str) {
    assert_eq!(
        (answer.status, &answer.body["error"]["code"]),
        (503, &json!("unavailable")),
        "{what}: {:?}",
        answer.body
    );
    let text = answer.body.to_string();
    assert!(!text.contains("WAIT") && !text.contains("replica"), "{what}: internal text in {text}");
}

#[tokio::test]
async fn an_answered_write_is_on_the_replica_and_one_no_replica_holds_is_a_503() {
    let app = App::with(waiting_for_one(Setup::one_server())).await;
    let first = message("acme", "c1", 1, 1_000, "u1", &["u1", "u2"]);
    // No replica yet: no write can be answered; reads are.
    assert_unavailable(&app.touch(first.clone()).await, "a touch without a replica");
    assert_eq!(app.badge("acme", "u2").await.status, 200);

    let replica = RedisServer::start();
    replica.replicate(&app.redis);
    // The app sends the touch again; from now on each answered write is on
    // the replica when the answer comes, without waiting for it here.
    assert_eq!(app.touch(first).await.status, 200);
    assert_eq!(contents(&replica, false), contents(&app.redis, false));
    for seq in 2..=4 {
        assert_eq!(app.touch(message("acme", "c1", seq, 1_000 * seq, "u1", &["u1", "u2"])).await.status, 200);
        assert_eq!(contents(&replica, false), contents(&app.redis, false), "after message {seq}");
    }
    let read = app.mark_read("acme", "u2", "c1", 3).await;
    assert_eq!((read.status, &read.body["unread"]), (200, &json!(1)), "{:?}", read.body);
    assert_eq!(contents(&replica, false), contents(&app.redis, false), "after the mark-read");
    let pin = json!({"pinned": true}).to_string();
    let pinned = app.send("POST", "/v1/conversations/c1/pin", Some(jwt("acme", "u2")), Some(pin.clone())).await;
    assert_eq!(pinned.status, 200, "{:?}", pinned.body);
    assert_eq!(contents(&replica, false), contents(&app.redis, false), "after the pin");

    // The replica stops answering: writes are 503s, reads still answer.
    replica.pause();
    assert_unavailable(&app.mark_read("acme", "u2", "c1", 4).await, "a mark-read");
    let fifth = message("acme", "c1", 5, 5_000, "u1", &["u1", "u2"]);
    assert_unavailable(&app.touch(fifth.clone()).await, "a touch");
    assert_eq!(app.badge("acme", "u2").await.status, 200);
    assert_eq!(app.list("acme", "u2", "").await.status, 200);
    // Back: what the app sends again is answered, and held twice.
    replica.resume();
    assert_eq!(app.touch(fifth).await.status, 200);
    let read = app.mark_read("acme", "u2", "c1", 4).await;
    assert_eq!((read.status, &read.body["unread"]), (200, &json!(1)), "{:?}", read.body);
    assert_eq!(contents(&replica, false), contents(&app.redis, false), "after the writes sent again");
}

#[tokio::test]
async fn on_a_cluster_a_write_waits_for_the_replica_of_the_node_it_wrote() {
    let app = App::with(waiting_for_one(Setup { cluster: true, ..Setup::default() })).await;
    let cluster = app.cluster.as_ref().unwrap();
    let node_of = |user: &str| cluster.primary_of(&format!("{{acme:{user}}}")).clone();
    let primary = node_of("u2");
    let elsewhere = (3..100).map(|n| format!("u{n}")).find(|u| node_of(u).port != primary.port).unwrap();
    let replica = cluster.replica_of(&primary).clone();
    let touch = message("acme", "c1", 1, 1_000, "u1", &["u1", "u2", &elsewhere]);
    assert_eq!(app.touch(touch).await.status, 200);
    assert_eq!(contents(&replica, true), contents(&primary, false));

    // u2's node's replica stops answering: u2's writes are 503s; a user on
    // another node writes as before, and u2 still reads.
    replica.pause();
    assert_unavailable(&app.mark_read("acme", "u2", "c1", 1).await, "a mark-read on the paused replica's node");
    let read = app.mark_read("acme", &elsewhere, "c1", 1).await;
    assert_eq!((read.status, &read.body["unread"]), (200, &json!(0)), "{:?}", read.body);
    assert_eq!(app.badge("acme", "u2").await.status, 200);
    replica.resume();
    let read = app.mark_read("acme", "u2", "c1", 1).await;
    assert_eq!((read.status, &read.body["unread"]), (200, &json!(0)), "{:?}", read.body);
    assert_eq!(contents(&replica, true), contents(&primary, false));
}

#[tokio::test]
async fn with_a_sql_store_a_write_no_replica_held_is_answered_from_the_truth() {
    let store = MessageStore::create(Kind::Postgres).await;
    let setup = Setup { sql_url: Some(store.url.clone()), ..Setup::one_server() };
    let app = App::with(waiting_for_one(setup)).await;
    let replica = RedisServer::start();
    replica.replicate(&app.redis);
    store.create_conversation("acme", "c1", "chat", &["u1".to_string(), "u2".to_string()]).await;
    for seq in 1..=3 {
        let touch = message("acme", "c1", seq, 1_000 * seq, "u1", &["u1", "u2"]);
        store.store_message("acme", "c1", seq, 1_000 * seq, "u1", &touch["preview"].to_string()).await;
        assert_eq!(app.touch(touch).await.status, 200);
    }
    replica.pause();
    // The truth took the mark-read; the answer says it is degraded.
    let read = app.mark_read("acme", "u2", "c1", 2).await;
    assert_eq!(
        (read.status, &read.body["unread"], &read.body["degraded"]),
        (200, &json!(1), &json!(true)),
        "{:?}",
        read.body
    );
    replica.resume();
    // The next reads show it, whichever of Redis and the truth answers.
    let page = app.list("acme", "u2", "").await.body;
    let row = &page["conversations"][0];
    assert_eq!((row["read_seq"].as_u64(), row["unread"].as_u64()), (Some(2), Some(1)), "{page}");
    assert_eq!(app.badge("acme", "u2").await.body["total"], 1);
    drop(app);
    store.drop_database().await;
}
