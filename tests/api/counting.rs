//! How a conversation counts, in both instance modes: unread is the last
//! seq minus the read cursor; replayed and reordered touches land in the same
//! state; the sender never counts its own message; the cursor never moves
//! back; the list is newest first and pages once; keys are per tenant and user.

use rand::SeedableRng;
use rand::seq::SliceRandom;
use serde_json::{Value, json};

use crate::support::{App, Setup, assert_badge_consistent, ids, message, modes, unread_by_conversation};

#[tokio::test]
async fn unread_is_last_seq_minus_read_seq() {
    for instances in modes() {
        let app = App::with(Setup { instances, ..Setup::default() }).await;
        for seq in 1..=3 {
            let answer = app.touch(message("acme", "c1", seq, 1_000 + seq, "u1", &["u1", "u2", "u3"])).await;
            assert_eq!((answer.status, &answer.body), (200, &json!({"applied": true})));
        }
        assert_eq!(app.mark_read("acme", "u3", "c1", 1).await.body["unread"], 2);
        let rows = app.whole_list("acme", "u2", 20).await;
        assert_eq!(rows[0]["unread"], 3);
        assert_eq!((rows[0]["last_seq"].as_u64(), rows[0]["read_seq"].as_u64()), (Some(3), Some(0)));
        assert_eq!(app.whole_list("acme", "u3", 20).await[0]["unread"], 2);
        assert_eq!(
            app.badge("acme", "u2").await.body,
            json!({"total": 3, "muted": 0, "mentions": 0, "categories": {"chat": 3}, "source": "redis", "degraded": false})
        );
    }
}

#[tokio::test]
async fn a_replayed_touch_changes_nothing() {
    let app = App::start().await;
    let touch = message("acme", "c1", 1, 1_000, "u1", &["u1", "u2"]);
    assert_eq!(app.touch(touch.clone()).await.body["applied"], true);
    let before = app.whole_list("acme", "u2", 20).await;
    assert_eq!(app.touch(touch).await.body["applied"], false);
    assert_eq!(app.whole_list("acme", "u2", 20).await, before);
    assert_eq!(app.badge("acme", "u2").await.body["total"], 1);
}

/// Any permutation of the same touches (with duplicates) ends in the same state.
#[tokio::test]
async fn touches_in_any_order_end_in_the_same_state() {
    let app = App::start().await;
    let mut touches = Vec::new();
    for seq in 1..=12u64 {
        let sender = ["u1", "u2", "u3"][seq as usize % 3];
        touches.push(message("T", "g1", seq, 5_000 + seq / 2, sender, &["u1", "u2", "u3"]));
        touches.push(message("T", &format!("d{}", seq % 4), seq, 9_000 + seq, "u1", &["u1", "u2"]));
    }
    let mut states: Vec<Value> = Vec::new();
    for round in 0..4u64 {
        let tenant = format!("perm{round}");
        let mut shuffled = touches.clone();
        shuffled.extend(touches[..5].iter().cloned()); // duplicates
        shuffled.shuffle(&mut rand::rngs::StdRng::seed_from_u64(round));
        for mut touch in shuffled {
            touch["tenant"] = json!(tenant);
            assert_eq!(app.touch(touch).await.status, 200);
        }
        let mut state = Vec::new();
        for user in ["u1", "u2", "u3"] {
            state.push(json!(app.whole_list(&tenant, user, 3).await));
            assert_badge_consistent(&app, &tenant, user).await;
        }
        states.push(json!(state));
    }
    assert!(states.windows(2).all(|w| w[0] == w[1]), "states differ: {states:#?}");
    let u2 = &states[0][1];
    assert_eq!(u2.as_array().unwrap().len(), 5, "g1 and d0..d3");
}

#[tokio::test]
async fn the_sender_never_counts_its_own_message() {
    let app = App::start().await;
    app.touch(message("acme", "c1", 1, 1_000, "u2", &["u1", "u2"])).await;
    app.touch(message("acme", "c1", 2, 1_001, "u1", &["u1", "u2"])).await;
    // The sender is missing from members: it still sees the conversation, read.
    app.touch(message("acme", "c1", 3, 1_002, "u3", &["u1", "u2"])).await;
    let u1 = app.whole_list("acme", "u1", 20).await;
    assert_eq!((u1[0]["unread"].as_u64(), u1[0]["read_seq"].as_u64()), (Some(1), Some(2)));
    let u3 = app.whole_list("acme", "u3", 20).await;
    assert_eq!((u3[0]["unread"].as_u64(), u3[0]["read_seq"].as_u64()), (Some(0), Some(3)));
    assert_eq!(app.badge("acme", "u3").await.body["total"], 0);
}

#[tokio::test]
async fn the_read_cursor_never_moves_back() {
    let app = App::start().await;
    for seq in 1..=10 {
        app.touch(message("acme", "c1", seq, 1_000 + seq, "u1", &["u1", "u2"])).await;
    }
    let read = app.mark_read("acme", "u2", "c1", 7).await.body;
    assert_eq!((read["read_seq"].as_u64(), read["unread"].as_u64()), (Some(7), Some(3)));
    assert_eq!(read["badge"], json!({"total": 3, "muted": 0, "mentions": 0, "categories": {"chat": 3}}));
    // A stale ack from another device changes nothing.
    let stale = app.mark_read("acme", "u2", "c1", 4).await.body;
    assert_eq!((stale["read_seq"].as_u64(), stale["unread"].as_u64()), (Some(7), Some(3)));
    // Ahead of the last touch (a delayed touch): the late touch does not count.
    let ahead = app.mark_read("acme", "u2", "c1", 12).await.body;
    assert_eq!((ahead["read_seq"].as_u64(), ahead["unread"].as_u64()), (Some(12), Some(0)));
    app.touch(message("acme", "c1", 11, 1_011, "u1", &["u1", "u2"])).await;
    app.touch(message("acme", "c1", 12, 1_012, "u1", &["u1", "u2"])).await;
    app.touch(message("acme", "c1", 13, 1_013, "u1", &["u1", "u2"])).await;
    assert_eq!(app.whole_list("acme", "u2", 20).await[0]["unread"], 1);
    // Read before the conversation's first touch reached the user.
    let early = app.mark_read("acme", "u2", "c9", 2).await.body;
    assert_eq!((early["read_seq"].as_u64(), early["unread"].as_u64()), (Some(2), Some(0)));
    app.touch(message("acme", "c9", 1, 2_001, "u1", &["u1", "u2"])).await;
    app.touch(message("acme", "c9", 3, 2_003, "u1", &["u1", "u2"])).await;
    app.touch(message("acme", "c9", 2, 2_002, "u1", &["u1", "u2"])).await;
    let c9 = unread_by_conversation(&app, "acme", "u2").await;
    assert_eq!(c9["c9"], 1);
    assert_eq!(assert_badge_consistent(&app, "acme", "u2").await, 2);
}

#[tokio::test]
async fn the_list_is_newest_first_and_late_messages_do_not_reorder_it() {
    let app = App::start().await;
    let ts = 1_764_460_800_123;
    // Same millisecond: seq decides.
    app.touch(message("acme", "a", 5, ts, "u1", &["u1", "u2"])).await;
    app.touch(message("acme", "b", 6, ts, "u1", &["u1", "u2"])).await;
    app.touch(message("acme", "c", 1, ts - 1, "u1", &["u1", "u2"])).await;
    app.touch(message("acme", "d", 9, ts + 1, "u1", &["u1", "u2"])).await;
    assert_eq!(ids(&app.whole_list("acme", "u2", 20).await), ["d", "b", "a", "c"]);
    // An older seq of d arriving late, with a newer ts, moves nothing.
    let mut late = message("acme", "d", 8, ts + 50, "u1", &["u1", "u2"]);
    late["preview"] = json!({"text": "old"});
    assert_eq!(app.touch(late).await.body["applied"], false, "seq 8 is already counted");
    let rows = app.whole_list("acme", "u2", 20).await;
    assert_eq!(ids(&rows), ["d", "b", "a", "c"]);
    assert_eq!(
        (rows[0]["ts"].as_u64(), &rows[0]["preview"]),
        (Some(ts + 1), &json!({"text": "message 9", "type": "text"}))
    );
    assert_eq!(rows[0]["unread"], 9);
    // A newer message of c moves it to the top with its preview.
    app.touch(message("acme", "c", 2, ts + 2, "u1", &["u1", "u2"])).await;
    let rows = app.whole_list("acme", "u2", 20).await;
    assert_eq!(ids(&rows), ["c", "d", "b", "a"]);
    assert_eq!(rows[0]["preview"]["text"], "message 2");
}

#[tokio::test]
async fn paging_returns_every_conversation_exactly_once() {
    let app = App::start().await;
    // 23 conversations, many sharing a score, in two categories.
    for i in 0..23u64 {
        let mut touch = message("acme", &format!("c{i:02}"), 1 + (i % 2) * 1000, 5_000 + i / 6, "u1", &["u1", "u2"]);
        touch["category"] = json!(if i % 3 == 0 { "system" } else { "chat" });
        assert_eq!(app.touch(touch).await.status, 200);
    }
    for page_size in [1, 2, 5, 7, 23, 100] {
        let rows = app.whole_list("acme", "u2", page_size).await;
        let mut ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
        let keys: Vec<(u64, &str)> =
            rows.iter().map(|r| (r["ts"].as_u64().unwrap(), r["id"].as_str().unwrap())).collect();
        assert!(keys.windows(2).all(|w| w[0].0 >= w[1].0), "not newest first: {keys:?}");
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 23, "page size {page_size}: {rows:?}");
    }
    assert_eq!(app.list("acme", "u2", "limit=5").await.body["conversations"].as_array().unwrap().len(), 5);
    assert_eq!(app.list("acme", "u2", "").await.body["conversations"].as_array().unwrap().len(), 20);
}

#[tokio::test]
async fn each_user_keeps_the_newest_max_conversations() {
    let app = App::with(Setup { max_conversations: 3, ..Setup::default() }).await;
    for i in 1..=5u64 {
        let mut touch = message("acme", &format!("c{i}"), i, 1_000 * i, "u1", &["u1", "u2"]);
        touch["category"] = json!(if i % 2 == 0 { "system" } else { "chat" });
        app.touch(touch).await;
    }
    // c1 (1 unread) and c2 (2 unread) were dropped with their state.
    let unread = unread_by_conversation(&app, "acme", "u2").await;
    assert_eq!(unread.len(), 3);
    assert_eq!((unread["c3"], unread["c4"], unread["c5"]), (3, 4, 5));
    assert_eq!(
        app.badge("acme", "u2").await.body,
        json!({"total": 12, "muted": 0, "mentions": 0, "categories": {"chat": 8, "system": 4}, "source": "redis", "degraded": false})
    );
    // An old message of a new conversation is dropped at once.
    app.touch(message("acme", "old", 1, 10, "u1", &["u1", "u2"])).await;
    assert!(!unread_by_conversation(&app, "acme", "u2").await.contains_key("old"));
    assert_eq!(assert_badge_consistent(&app, "acme", "u2").await, 12);
}

#[tokio::test]
async fn keys_are_versioned_and_tagged_by_tenant_and_user() {
    let app = App::start().await;
    let mut system = message("acme", "n1", 1, 1_000, "bot", &["u1"]);
    system["category"] = json!("system");
    app.touch(system).await;
    app.touch(message("acme", "c1", 1, 1_000, "u2", &["u1", "u2"])).await;
    app.touch(message("beta", "c1", 1, 1_000, "u2", &["u1", "u2"])).await;
    app.mark_read("acme", "u1", "early", 3).await;
    let mut heads = Vec::new();
    for key in app.redis.keys() {
        if let Some(head) = key.strip_prefix("un:v2:head:") {
            heads.push(head.to_string());
            continue;
        }
        let tag = key.strip_prefix("un:v2:{").and_then(|rest| rest.split_once("}:")).map(|(tag, _)| tag);
        let tag = tag.unwrap_or_else(|| panic!("{key} is not un:v2:{{tenant:user}}:..."));
        assert!(["acme:u1", "acme:u2", "acme:bot", "beta:u1", "beta:u2"].contains(&tag), "{key}");
    }
    // One head per conversation that has a message, tagged by tenant and conversation.
    assert_eq!(heads, ["{acme:c1}", "{acme:n1}", "{beta:c1}"]);
    let u1: Vec<String> = app.redis.keys().into_iter().filter(|k| k.starts_with("un:v2:{acme:u1}:")).collect();
    for name in ["list", "conv", "kept", "kept:age", "badge", "meta"] {
        assert!(u1.contains(&format!("un:v2:{{acme:u1}}:{name}")), "{name}: {u1:?}");
    }
    // Tenants are separate: the same user id in beta sees only beta.
    app.mark_read("beta", "u1", "c1", 1).await;
    assert_eq!(app.badge("acme", "u1").await.body["total"], 2);
    assert_eq!(app.badge("beta", "u1").await.body["total"], 0);
}

#[tokio::test]
async fn a_conversation_keeps_its_category() {
    let app = App::start().await;
    app.touch(message("acme", "c1", 1, 1_000, "u1", &["u1", "u2"])).await;
    let before = app.redis.keys();
    let mut moved = message("acme", "c1", 2, 1_001, "u1", &["u1", "u2", "u3"]);
    moved["category"] = json!("system");
    let answer = app.touch(moved).await;
    assert_eq!((answer.status, answer.body["error"]["code"].as_str()), (409, Some("conflict")));
    assert_eq!(app.redis.keys(), before, "a refused touch writes nothing");
}
