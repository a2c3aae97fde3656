//! With `redis_wait_replicas`, a call that writes answers only once that
//! many replicas hold what it wrote (Redis `WAIT`), so that a primary that
//! fails and whose replica takes over cannot take an answered write with it.
//! Replicas that do not acknowledge in time make the call a 503, which the
//! app sends again (every call is idempotent); with a SQL store, the answer
//! comes from the truth. Reads do not wait.

use std::collections::BTreeMap;
use std::time::Duration;

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
async fn an_answered_write_is_on_the_replica_and_one_the_replica_does_not_hold_is_a_503() {
    let app = App::with(waiting_for_one(Setup::one_server())).await;
    let touch = |seq: u64| message("acme", "c1", seq, 1_000 * seq, "u1", &["u1", "u2"]);
    // No replica online: none to wait for (a failover would have none to
    // promote), so writes are answered.
    assert_eq!(app.touch(touch(1)).await.status, 200);

    let replica = RedisServer::start();
    replica.replicate(&app.redis);
    // An instance trusts what it read of the replicas for a second. From
    // then on each answered write is on the replica when the answer comes,
    // without waiting for it here.
    std::thread::sleep(Duration::from_millis(1_100));
    for seq in 2..=4 {
        assert_eq!(app.touch(touch(seq)).await.status, 200);
        assert_eq!(contents(&replica, false), contents(&app.redis, false), "after message {seq}");
    }
    let read = app.mark_read("acme", "u2", "c1", 3).await;
    assert_eq!((read.status, &read.body["unread"]), (200, &json!(1)), "{:?}", read.body);
    assert_eq!(contents(&replica, false), contents(&app.redis, false), "after the mark-read");
    let pin = json!({"pinned": true}).to_string();
    let pinned = app.send("POST", "/v1/conversations/c1/pin", Some(jwt("acme", "u2")), Some(pin.clone())).await;
    assert_eq!(pinned.status, 200, "{:?}", pinned.body);
    assert_eq!(contents(&replica, false), contents(&app.redis, false), "after the pin");

    // The replica stops answering (its link stays up): writes are 503s,
    // reads still answer.
    replica.pause();
    assert_unavailable(&app.mark_read("acme", "u2", "c1", 4).await, "a mark-read");
    assert_unavailable(&app.touch(touch(5)).await, "a touch");
    assert_unavailable(&app.touch(touch(5)).await, "the touch sent again");
    assert_eq!(app.badge("acme", "u2").await.status, 200);
    assert_eq!(app.list("acme", "u2", "").await.status, 200);
    // Back: what the app sends again is answered, and held twice.
    replica.resume();
    assert_eq!(app.touch(touch(5)).await.status, 200);
    let read = app.mark_read("acme", "u2", "c1", 4).await;
    assert_eq!((read.status, &read.body["unread"]), (200, &json!(1)), "{:?}", read.body);
    assert_eq!(contents(&replica, false), contents(&app.redis, false), "after the writes sent again");

    // The replica fails: once an instance sees it gone (a write of each
    // instance may be a 503 first), writes are answered again.
    replica.kill();
    let mut refused = 0;
    for seq in 6..=12 {
        loop {
            let answer = app.touch(touch(seq)).await;
            if answer.status == 200 {
                break;
            }
            assert_unavailable(&answer, "a touch after the replica failed");
            refused += 1;
            assert!(refused <= 3, "writes still refused with no replica online");
        }
    }
    let mut read = app.mark_read("acme", "u2", "c1", 12).await;
    if read.status == 503 {
        // This function's instance, the first time.
        read = app.mark_read("acme", "u2", "c1", 12).await;
    }
    assert_eq!((read.status, &read.body["unread"]), (200, &json!(0)), "{:?}", read.body);
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
    // A fresh cluster's replica, on a machine running other tests' servers,
    // may miss the 100 ms the first write waits: that is a clean 503, and
    // the app sends it again.
    let mut refused = 0;
    loop {
        let answer = app.touch(touch.clone()).await;
        if answer.status == 200 {
            break;
        }
        assert_unavailable(&answer, "the first write on a fresh cluster");
        refused += 1;
        assert!(refused < 5, "the first write refused {refused} times with every replica online");
    }
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

/// What `call` answers once the cluster has settled after a failover: 503s
/// (`unavailable`) meanwhile, sent again every 50 ms for up to 30 seconds.
async fn answered_after_the_failover(what: &str, call: impl AsyncFn() -> Answer) -> Answer {
    for _ in 0..600 {
        let answer = call().await;
        if answer.status == 200 {
            return answer;
        }
        assert_unavailable(&answer, what);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what}: no answer but 503 after the failover");
}

/// A primary killed while its replica lagged behind, the replica taking
/// over: what the replica did not hold was never answered, so the app sent
/// it again, and the numbers are what every answer said.
#[tokio::test]
async fn a_primary_killed_while_its_replica_lagged_took_no_answered_write_with_it() {
    let app = App::with(waiting_for_one(Setup { cluster: true, ..Setup::default() })).await;
    let cluster = app.cluster.as_ref().unwrap();
    let node_of = |user: &str| cluster.primary_of(&format!("{{acme:{user}}}")).clone();
    // A member whose primary is not the node `redis_url` names (that one stays up).
    let seed = cluster.nodes[0].port;
    let user = (2..200).map(|n| format!("u{n}")).find(|u| node_of(u).port != seed).unwrap();
    let (primary, replica) = (node_of(&user), cluster.replica_of(&node_of(&user)).clone());
    let touch = |seq: u64| message("acme", "c1", seq, 1_000 * seq, "u1", &["u1", &user]);
    for seq in [1, 2] {
        assert_eq!(app.touch(touch(seq)).await.status, 200);
    }
    assert_eq!(app.mark_read("acme", &user, "c1", 1).await.body["unread"], 1);

    // The replica falls behind: the primary takes what follows, but no
    // answer says so.
    replica.pause();
    assert_unavailable(&app.touch(touch(3)).await, "a touch the replica did not hold");
    assert_unavailable(&app.mark_read("acme", &user, "c1", 3).await, "a mark-read the replica did not hold");
    // The primary fails; its replica takes over (cluster-node-timeout 2 s).
    primary.kill();
    replica.resume();
    for _ in 0..1_500 {
        let info: String = replica.command(&["INFO", "replication"]);
        if info.contains("role:master") {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Every answered write is there. Of the others, the replica may hold
    // some: the primary sent them before it failed (a stopped process's
    // socket still takes them in), and a 503 says only "not known to be held".
    let page = answered_after_the_failover("a list", async || app.list("acme", &user, "").await).await;
    let row = &page.body["conversations"][0];
    let (last, read) = (row["last_seq"].as_u64().unwrap(), row["read_seq"].as_u64().unwrap());
    assert!([2, 3].contains(&last) && [1, 3].contains(&read), "an answered write lost: {row}");
    assert_eq!(row["unread"].as_u64(), Some(last.saturating_sub(read)), "{row}");
    // The app sends again what was answered 503, until it is answered.
    for (what, path, body, token) in [
        ("touch", "/v1/touch", touch(3), crate::support::SERVICE_TOKEN.to_string()),
        ("mark-read", "/v1/mark-read", json!({"conversation": "c1", "seq": 3}), jwt("acme", &user)),
    ] {
        let send = async || app.send("POST", path, Some(token.clone()), Some(body.to_string())).await;
        answered_after_the_failover(what, send).await;
    }
    let row = app.row("acme", &user, "c1").await.unwrap();
    assert_eq!(
        (row["last_seq"].as_u64(), row["read_seq"].as_u64(), row["unread"].as_u64()),
        (Some(3), Some(3), Some(0)),
        "{row}"
    );
    assert_eq!(app.badge("acme", &user).await.body["total"], 0);
    let sender = app.row("acme", "u1", "c1").await.unwrap();
    assert_eq!((sender["last_seq"].as_u64(), sender["unread"].as_u64()), (Some(3), Some(0)), "{sender}");
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

/// A large conversation's message whose first try was a 503 after its
/// head took it (the head's node's replica paused, so the clock never
/// moved), sent again once the replica is back: its event goes out then,
/// once, as one Redis publishes it in the step that takes the message; a
/// plain replay after that publishes nothing.
#[tokio::test]
async fn on_a_cluster_a_large_message_sent_again_after_a_503_is_announced_once() {
    sent_again_after_a_503(false).await;
}

/// The same, with a held-back copy of the message before it coming in
/// between.
#[tokio::test]
async fn on_a_cluster_a_held_back_copy_announces_the_message_that_left_the_clock_behind_too() {
    sent_again_after_a_503(true).await;
}

/// A large conversation's message a rebuild wrote into its head before its
/// touch came (the rebuild leaves its event to the touch), whose touch then
/// was a 503 after the head's step (its replica paused; the message's @all
/// mention is a write there, whose `WAIT` fails): sent again, it is
/// announced then, once. (A round that writes nothing fails its `WAIT` too
/// while the replica has not acknowledged the node's last write, which it
/// does once a second: the @all write makes the 503 independent of that.) The touch's note of it goes only once its event
/// is out.
#[tokio::test]
async fn on_a_cluster_a_message_a_rebuild_brought_is_announced_by_its_touch_sent_again_after_a_503() {
    let store = MessageStore::create(Kind::Postgres).await;
    let variables = vec![("redis_wait_replicas", "1".into()), ("large_group_threshold", "3".into())];
    let setup = Setup { cluster: true, sql_url: Some(store.url.clone()), variables, ..Setup::default() };
    let app = App::with(setup).await;
    let cluster = app.cluster.as_ref().unwrap();
    let members = ["u1", "u2", "u3", "u4", "u5"];
    store.create_conversation("acme", "big", "chat", &members.map(String::from)).await;
    let first = message("acme", "big", 1, 1_000, "u1", &members);
    store.store_message("acme", "big", 1, 1_000, "u1", &first["preview"].to_string()).await;
    assert_eq!(app.touch(first).await.status, 200);
    let mut second = message("acme", "big", 2, 2_000, "u1", &["u1"]);
    second["mention_all"] = json!(true);
    store.store_message("acme", "big", 2, 2_000, "u1", &second["preview"].to_string()).await;
    let mut events = crate::support::Events::subscribe(&app, "acme");
    let announced = |events: &[serde_json::Value]| {
        events.iter().filter(|e| e["conversation"] == "big" && e["large"] == true && e["seq"] == 2).count()
    };
    let report = app.reconcile(json!({"tenant": "acme", "users": ["u2"]})).await;
    assert_eq!(report.status, 200, "{:?}", report.body);
    assert_eq!(announced(&events.take()), 0, "the rebuild announced it");

    let head = cluster.primary_of("{acme:big}").clone();
    let replica = cluster.replica_of(&head).clone();
    replica.pause();
    assert_unavailable(&app.touch(second.clone()).await, "the head's replica paused");
    replica.resume();
    assert_eq!(announced(&events.take()), 0, "announced by a touch that answered 503");
    let noted = || app.redis.keys().iter().any(|key| key == "un:v2:head:{acme:big}:unannounced");
    assert!(noted(), "the note went with a touch whose event is not out");
    let again = app.touch(second.clone()).await;
    assert_eq!(again.status, 200, "{:?}", again.body);
    assert_eq!(announced(&events.take()), 1, "the touch sent again");
    assert!(!noted(), "the note stayed after the event");
    assert_eq!(app.touch(second).await.status, 200);
    assert_eq!(announced(&events.take()), 0, "a replay announced it again");
    let badge = app.badge("acme", "u3").await.body;
    assert_eq!((&badge["total"], &badge["mentions"]), (&json!(2), &json!(1)), "{badge}");
    drop(app);
    store.drop_database().await;
}

async fn sent_again_after_a_503(held_back_first: bool) {
    let variables = vec![("redis_wait_replicas", "1".into()), ("large_group_threshold", "3".into())];
    let app = App::with(Setup { cluster: true, variables, ..Setup::default() }).await;
    let cluster = app.cluster.as_ref().unwrap();
    let members = ["u1", "u2", "u3", "u4", "u5"];
    assert_eq!(app.touch(message("acme", "big", 1, 1_000, "u1", &members)).await.status, 200);
    let head = cluster.primary_of("{acme:big}").clone();
    let replica = cluster.replica_of(&head).clone();
    let mut events = crate::support::Events::subscribe(&app, "acme");
    let announced = |events: &[serde_json::Value]| {
        events.iter().filter(|e| e["conversation"] == "big" && e["large"] == true && e["seq"] == 2).count()
    };

    replica.pause();
    assert_unavailable(&app.touch(message("acme", "big", 2, 2_000, "u1", &["u1"])).await, "the head's replica paused");
    replica.resume();
    assert_eq!(announced(&events.take()), 0, "announced before its clock moved");
    if held_back_first {
        // A copy of the first message, held back, comes first and moves the
        // clock: it announces the head's message too, the second one, which
        // may be what left the clock behind (its own may come twice).
        assert_eq!(app.touch(message("acme", "big", 1, 1_000, "u1", &members)).await.status, 200);
        let seen = events.take();
        assert_eq!(announced(&seen), 1, "{seen:?}");
        assert_eq!(app.touch(message("acme", "big", 2, 2_000, "u1", &["u1"])).await.status, 200);
        assert_eq!(announced(&events.take()), 0, "announced again");
        return;
    }
    let again = app.touch(message("acme", "big", 2, 2_000, "u1", &["u1"])).await;
    assert_eq!(again.status, 200, "{:?}", again.body);
    assert_eq!(announced(&events.take()), 1);
    assert_eq!(app.touch(message("acme", "big", 2, 2_000, "u1", &["u1"])).await.status, 200);
    assert_eq!(announced(&events.take()), 0, "a replay announced it again");
    assert_eq!(app.badge("acme", "u3").await.body["total"], 2);
}
