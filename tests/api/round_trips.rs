//! Semantics 9 and 10: one Redis round trip per call, one connection per
//! request at most (cached across requests of a reused instance), and
//! `Content-Length` on every answer.

use serde_json::json;
use unread_host::{InstanceMode, RedisStats};

use crate::support::{Answer, App, Setup, message};

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

async fn every_call(app: &App, seq: u64) -> Vec<(&'static str, Answer, RedisStats)> {
    let members = big_group();
    let members: Vec<&str> = members.iter().map(String::as_str).collect();
    vec![
        ("touch", measured(app, app.touch(message("acme", "g", seq, 1_000 + seq, "m0", &members))).await),
        ("mark-read", measured(app, app.mark_read("acme", "m1", "g", seq)).await),
        ("list", measured(app, app.list("acme", "m2", "limit=20")).await),
        ("badge", measured(app, app.badge("acme", "m2")).await),
    ]
    .into_iter()
    .map(|(name, (answer, stats))| (name, answer, stats))
    .collect()
}

#[tokio::test]
async fn a_reused_instance_makes_one_round_trip_per_call_on_its_cached_connection() {
    let app = App::start().await;
    every_call(&app, 1).await; // each function's instance opens its connection once
    for seq in 2..=4 {
        for (name, answer, stats) in every_call(&app, seq).await {
            assert_eq!(answer.status, 200, "{name}: {:?}", answer.body);
            assert_eq!(stats, RedisStats { opens: 0, commands: 1 }, "{name}");
        }
    }
}

#[tokio::test]
async fn a_fresh_instance_opens_one_connection_and_makes_one_round_trip() {
    let app = App::with(Setup { instances: InstanceMode::PerRequest, ..Setup::default() }).await;
    every_call(&app, 1).await; // Redis learns each script (NOSCRIPT, then EVAL) once
    for seq in 2..=3 {
        for (name, answer, stats) in every_call(&app, seq).await {
            assert_eq!(answer.status, 200, "{name}: {:?}", answer.body);
            assert_eq!(stats, RedisStats { opens: 1, commands: 1 }, "{name}");
        }
    }
}

#[tokio::test]
async fn scripts_are_reloaded_once_after_redis_forgot_them() {
    let app = App::start().await;
    every_call(&app, 1).await;
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut app.redis.connection().unwrap()).unwrap();
    for (name, answer, stats) in every_call(&app, 2).await {
        assert_eq!(answer.status, 200, "{name}: {:?}", answer.body);
        assert_eq!(stats, RedisStats { opens: 0, commands: 2 }, "{name}: EVALSHA, then EVAL");
    }
    for (name, _, stats) in every_call(&app, 3).await {
        assert_eq!(stats.commands, 1, "{name}");
    }
    assert_eq!(app.badge("acme", "m2").await.body["total"], 3);
}

#[tokio::test]
async fn a_broken_cached_connection_is_replaced_within_the_request() {
    let app = App::start().await;
    every_call(&app, 1).await;
    app.redis.kill();
    app.redis.restart();
    for (name, answer, stats) in every_call(&app, 2).await {
        assert_eq!(answer.status, 200, "{name}: {:?}", answer.body);
        assert_eq!(stats.opens, 1, "{name}: one new connection");
    }
    for (name, _, stats) in every_call(&app, 3).await {
        assert_eq!(stats, RedisStats { opens: 0, commands: 1 }, "{name}");
    }
    // Redis came back empty: seq 2 and 3 only (the state before is gone).
    assert_eq!(app.badge("acme", "m2").await.body["total"], 3);
}

#[tokio::test]
async fn every_answer_carries_content_length() {
    let app = App::start().await;
    let mut answers: Vec<(String, Answer)> = every_call(&app, 1).await.into_iter().map(|(n, a, _)| (n.to_string(), a)).collect();
    answers.push(("404".into(), app.send("GET", "/nope", None, None).await));
    answers.push(("401".into(), app.send("GET", "/v1/badge", None, None).await));
    answers.push(("405".into(), app.send("PUT", "/v1/touch", None, None).await));
    answers.push(("409".into(), app.touch(json!({"tenant": "acme", "conversation": "g", "seq": 9, "ts": 1, "members": ["m1"], "preview": {}, "category": "system"})).await));
    for (name, answer) in answers {
        assert_eq!(answer.content_length, Some(answer.length), "{name}: {:?}", answer.body);
    }
}
