//! One Redis round trip per call (touch, mark-read, a list page with its
//! previews, badge, a conversation's setting, recall), one connection per
//! request at most (cached across requests of a reused instance), and
//! `Content-Length` on every answer. On one server: a cluster splits a call
//! by slot (cluster.rs covers it).

use serde_json::json;
use unread_host::{InstanceMode, RedisStats};

use crate::support::{Answer, App, SERVICE_TOKEN, Setup, jwt, message};

/// Runs `call` and returns its answer with the Redis calls it made.
async fn measured<F: std::future::Future<Output = Answer>>(app: &App, call: F) -> (Answer, RedisStats) {
    let before = app.redis_stats();
    let answer = call.await;
    let after = app.redis_stats();
    (answer, RedisStats { opens: after.opens - before.opens, commands: after.commands - before.commands })
}

fn big_group() -> Vec<String> {
    (0..500).map(|i| format!("m{i}")).collect()
}

/// The calls of `every_call` that are the first of their function and of
/// their script; the others reuse both.
const FIRST_OF_EACH: [&str; 6] = ["touch", "mark-read", "list", "badge", "mute", "recall"];

/// Redis commands every call makes on a warm connection: its script alone (a
/// list page or a conversation's setting reads its rows' previews from their
/// heads in the same script, so no message can come between the two).
const ROUND_TRIP: u64 = 1;

/// The scripts Redis must learn again after a flush: each function's own,
/// at its first call.
fn reloads(name: &str) -> u64 {
    u64::from(FIRST_OF_EACH.contains(&name))
}

/// m3's setting of the big group.
async fn flag(app: &App, action: &str, body: serde_json::Value) -> Answer {
    app.send("POST", &format!("/v1/conversations/g/{action}"), Some(jwt("acme", "m3")), Some(body.to_string())).await
}

async fn every_call(app: &App, seq: u64) -> Vec<(&'static str, Answer, RedisStats)> {
    let members = big_group();
    let members: Vec<&str> = members.iter().map(String::as_str).collect();
    let mut touch = message("acme", "g", seq, 1_000 + seq, "m0", &members);
    touch["mentions"] = json!(["m2", "m3"]);
    touch["mention_all"] = json!(seq.is_multiple_of(2));
    let recall = json!({"tenant": "acme", "conversation": "g", "seq": seq, "members": ["m4"]}).to_string();
    vec![
        ("touch", measured(app, app.touch(touch)).await),
        ("mark-read", measured(app, app.mark_read("acme", "m1", "g", seq)).await),
        ("list", measured(app, app.list("acme", "m2", "limit=20")).await),
        (
            "list of a category, lock-screen form",
            measured(app, app.list("acme", "m2", "category=chat&preview=lockscreen")).await,
        ),
        ("badge", measured(app, app.badge("acme", "m2")).await),
        (
            "badge of a category",
            measured(app, app.send("GET", "/v1/badge?category=chat", Some(jwt("acme", "m2")), None)).await,
        ),
        ("mute", measured(app, flag(app, "mute", json!({"muted": seq.is_multiple_of(2)}))).await),
        ("pin", measured(app, flag(app, "pin", json!({"pinned": true}))).await),
        ("mark-unread", measured(app, flag(app, "mark-unread", json!({}))).await),
        ("recall", measured(app, app.send("POST", "/v1/recall", Some(SERVICE_TOKEN.into()), Some(recall))).await),
    ]
    .into_iter()
    .map(|(name, (answer, stats))| (name, answer, stats))
    .collect()
}

#[tokio::test]
async fn a_reused_instance_makes_one_round_trip_per_call_on_its_cached_connection() {
    let app = App::with(Setup::one_server()).await;
    every_call(&app, 1).await; // each function's instance opens its connection once
    for seq in 2..=4 {
        for (name, answer, stats) in every_call(&app, seq).await {
            assert_eq!(answer.status, 200, "{name}: {:?}", answer.body);
            assert_eq!(stats, RedisStats { opens: 0, commands: ROUND_TRIP }, "{name}");
        }
    }
}

#[tokio::test]
async fn a_fresh_instance_opens_one_connection_and_makes_one_round_trip() {
    let app = App::with(Setup { instances: InstanceMode::PerRequest, ..Setup::one_server() }).await;
    every_call(&app, 1).await; // Redis learns each script (NOSCRIPT, then EVAL) once
    for seq in 2..=3 {
        for (name, answer, stats) in every_call(&app, seq).await {
            assert_eq!(answer.status, 200, "{name}: {:?}", answer.body);
            // The call's script, and (cache-only) the data set's check that
            // every new connection makes (lost.rs): Spin reuses an instance
            // and its connection for up to 128 requests.
            assert_eq!(stats, RedisStats { opens: 1, commands: ROUND_TRIP + 1 }, "{name}");
        }
    }
}

#[tokio::test]
async fn scripts_are_reloaded_once_after_redis_forgot_them() {
    let app = App::with(Setup::one_server()).await;
    every_call(&app, 1).await;
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut app.redis.connection().unwrap()).unwrap();
    for (name, answer, stats) in every_call(&app, 2).await {
        assert_eq!(answer.status, 200, "{name}: {:?}", answer.body);
        let commands = ROUND_TRIP + reloads(name);
        assert_eq!(stats, RedisStats { opens: 0, commands }, "{name}: EVALSHA, then EVAL, once per script");
    }
    for (name, _, stats) in every_call(&app, 3).await {
        assert_eq!(stats.commands, ROUND_TRIP, "{name}");
    }
    // Every message was recalled.
    assert_m2_has_the_group(&app, 0).await;
}

/// m2 holds the group up to message 3 with `unread` unread. The big group
/// is large, so each recall (naming m4 only) is the conversation's, for
/// every member.
async fn assert_m2_has_the_group(app: &App, unread: u64) {
    let row = app.row("acme", "m2", "g").await.unwrap();
    assert_eq!((row["last_seq"].as_u64(), row["unread"].as_u64()), (Some(3), Some(unread)), "{row}");
    assert_eq!(app.badge("acme", "m2").await.body["total"], unread);
}

#[tokio::test]
async fn a_broken_cached_connection_is_replaced_within_the_request() {
    let app = App::with(Setup::one_server()).await;
    every_call(&app, 1).await;
    app.redis.kill();
    app.redis.restart();
    for (name, answer, stats) in every_call(&app, 2).await {
        assert_eq!(answer.status, 200, "{name}: {:?}", answer.body);
        let opens = if FIRST_OF_EACH.contains(&name) { 1 } else { 0 };
        assert_eq!(stats.opens, opens, "{name}: one new connection per instance");
    }
    for (name, _, stats) in every_call(&app, 3).await {
        assert_eq!(stats, RedisStats { opens: 0, commands: ROUND_TRIP }, "{name}");
    }
    // Redis came back empty: the recalls of 2 and 3 only (the state before
    // is gone, so message 1 counts again).
    assert_m2_has_the_group(&app, 1).await;
}

#[tokio::test]
async fn every_answer_carries_content_length() {
    let app = App::with(Setup::one_server()).await;
    let mut answers: Vec<(String, Answer)> =
        every_call(&app, 1).await.into_iter().map(|(n, a, _)| (n.to_string(), a)).collect();
    answers.push(("404".into(), app.send("GET", "/nope", None, None).await));
    answers.push(("401".into(), app.send("GET", "/v1/badge", None, None).await));
    answers.push(("405".into(), app.send("PUT", "/v1/touch", None, None).await));
    answers.push(("409".into(), app.touch(json!({"tenant": "acme", "conversation": "g", "seq": 9, "ts": 1, "members": ["m1"], "preview": {}, "category": "system"})).await));
    for (name, answer) in answers {
        assert_eq!(answer.content_length, Some(answer.length), "{name}: {:?}", answer.body);
    }
}

/// Mentions pile up while a group goes unread; what a touch does per member
/// must not grow with them (each pending mention is a sorted-set member the
/// script never walks): the same commands with 2 or 2 000 pending.
#[tokio::test]
async fn a_touch_costs_the_same_with_thousands_of_mentions_pending() {
    let app = App::with(Setup::one_server()).await;
    let members: Vec<String> = (0..50).map(|i| format!("m{i}")).collect();
    let members: Vec<&str> = members.iter().map(String::as_str).collect();
    let touch = |seq: u64| {
        let mut touch = message("acme", "g", seq, 1_000 + seq, "m0", &members);
        touch["mention_all"] = json!(true);
        touch
    };
    let mut cost = Vec::new();
    let mut seq = 0;
    for pending in [2, 2_000] {
        while seq < pending {
            seq += 1;
            assert_eq!(app.touch(touch(seq)).await.status, 200);
        }
        let before = app.redis.commands_run();
        seq += 1;
        assert_eq!(app.touch(touch(seq)).await.status, 200);
        cost.push(app.redis.commands_run() - before);
    }
    assert_eq!(cost[0], cost[1], "commands of one touch with 2 and with 2 000 mentions pending");
    assert_eq!(app.row("acme", "m7", "g").await.unwrap()["mentions"], seq);
}
