//! Per-conversation settings: mute, pin (first, capped, never trimmed), mark
//! unread; and that each is in the SQL truth.

use std::sync::Arc;

use serde_json::json;

use super::{badge_of, flag, ids, messages, recall, row};
use crate::store::{KINDS, MessageStore};
use crate::support::{App, Setup, assert_badge_consistent, jwt, message};

#[tokio::test]
async fn a_muted_conversation_keeps_its_unread_but_leaves_the_badge_total() {
    let app = App::start().await;
    messages(&app, "c1", 1, 3, 1_000).await;
    messages(&app, "c2", 1, 2, 2_000).await;
    let muted = flag(&app, "u2", "c1", "mute", json!({"muted": true})).await;
    assert_eq!(muted.status, 200, "{:?}", muted.body);
    assert_eq!(
        (muted.body["conversation"]["muted"].clone(), muted.body["conversation"]["unread"].clone()),
        (json!(true), json!(3))
    );
    assert_eq!(muted.body["badge"], json!({"total": 2, "muted": 3, "mentions": 0, "categories": {"chat": 2}}));
    assert_eq!(
        flag(&app, "u2", "c1", "mute", json!({"muted": true})).await.body,
        muted.body,
        "muting again changes nothing"
    );
    let rows = app.whole_list("acme", "u2", 20).await;
    assert_eq!((row(&rows, "c1")["unread"].clone(), row(&rows, "c1")["muted"].clone()), (json!(3), json!(true)));
    messages(&app, "c1", 4, 1, 1_000).await;
    assert_eq!(
        badge_of(&app, "u2", "").await,
        json!({"total": 2, "muted": 4, "mentions": 0, "categories": {"chat": 2}, "source": "redis", "degraded": false})
    );
    assert_eq!(badge_of(&app, "u3", "").await["total"], 6, "another member's mute is not u3's");
    let unmuted = flag(&app, "u2", "c1", "mute", json!({"muted": false})).await;
    assert_eq!(unmuted.body["badge"], json!({"total": 6, "muted": 0, "mentions": 0, "categories": {"chat": 6}}));
    assert_badge_consistent(&app, "acme", "u2").await;
}

#[tokio::test]
async fn pinned_conversations_come_first_newest_first_and_are_capped() {
    let app = App::start().await;
    for (i, conversation) in ["c1", "c2", "c3", "c4", "c5", "c6", "c7"].iter().enumerate() {
        messages(&app, conversation, 1, 1, 1_000 * (i as u64 + 1)).await;
    }
    for conversation in ["c1", "c3"] {
        assert_eq!(
            flag(&app, "u2", conversation, "pin", json!({"pinned": true})).await.body["conversation"]["pinned"],
            true
        );
    }
    let expected = ["c3", "c1", "c7", "c6", "c5", "c4", "c2"];
    for page_size in [1, 2, 3, 20] {
        assert_eq!(ids(&app.whole_list("acme", "u2", page_size).await), expected, "page size {page_size}");
    }
    assert_eq!(ids(&app.whole_list("acme", "u3", 20).await)[0], "c7", "pins are per user");
    messages(&app, "c1", 2, 1, 9_000).await;
    assert_eq!(ids(&app.whole_list("acme", "u2", 2).await)[..3], ["c1", "c3", "c7"]);
    for conversation in ["c4", "c5", "c6"] {
        assert_eq!(flag(&app, "u2", conversation, "pin", json!({"pinned": true})).await.status, 200);
    }
    let sixth = flag(&app, "u2", "c7", "pin", json!({"pinned": true})).await;
    assert_eq!((sixth.status, sixth.body["error"]["code"].as_str()), (409, Some("too_many_pins")));
    assert_eq!(
        flag(&app, "u2", "c3", "pin", json!({"pinned": true})).await.status,
        200,
        "pinning a pinned one again is fine"
    );
    assert_eq!(flag(&app, "u2", "c3", "pin", json!({"pinned": false})).await.body["conversation"]["pinned"], false);
    assert_eq!(flag(&app, "u2", "c7", "pin", json!({"pinned": true})).await.status, 200);
    assert_eq!(ids(&app.whole_list("acme", "u2", 3).await), ["c1", "c7", "c6", "c5", "c4", "c3", "c2"]);
}

#[tokio::test]
async fn a_pinned_conversation_is_never_trimmed() {
    let app = App::with(Setup { max_conversations: 3, ..Setup::default() }).await;
    messages(&app, "old", 1, 1, 1_000).await;
    flag(&app, "u2", "old", "pin", json!({"pinned": true})).await;
    for (i, conversation) in ["c1", "c2", "c3"].iter().enumerate() {
        messages(&app, conversation, 1, 1, 2_000 + i as u64).await;
    }
    assert_eq!(ids(&app.whole_list("acme", "u2", 20).await), ["old", "c3", "c2"]);
    assert_eq!(ids(&app.whole_list("acme", "u3", 20).await), ["c3", "c2", "c1"]);
    assert_badge_consistent(&app, "acme", "u2").await;
}

#[tokio::test]
async fn mark_unread_counts_one_until_the_next_mark_read() {
    let app = App::start().await;
    messages(&app, "c1", 1, 2, 1_000).await;
    messages(&app, "c2", 1, 3, 2_000).await;
    app.mark_read("acme", "u2", "c1", 2).await;
    let marked = flag(&app, "u2", "c1", "mark-unread", json!({})).await;
    assert_eq!(marked.status, 200, "{:?}", marked.body);
    assert_eq!(
        (marked.body["conversation"]["marked_unread"].clone(), marked.body["conversation"]["unread"].clone()),
        (json!(true), json!(0))
    );
    assert_eq!(marked.body["badge"]["total"], 4);
    let empty_body = app.send("POST", "/v1/conversations/c2/mark-unread", Some(jwt("acme", "u2")), None).await;
    assert_eq!(empty_body.body["badge"]["total"], 4, "a conversation with unread messages counts them, not one more");
    flag(&app, "u2", "c1", "mute", json!({"muted": true})).await;
    assert_eq!(badge_of(&app, "u2", "").await["total"], 3, "a muted mark counts nothing");
    flag(&app, "u2", "c1", "mute", json!({"muted": false})).await;
    let read = app.mark_read("acme", "u2", "c1", 1).await;
    assert_eq!(read.body["badge"]["total"], 3, "mark-read clears the mark even below the cursor");
    assert_eq!(row(&app.whole_list("acme", "u2", 20).await, "c1")["marked_unread"], false);
    let unknown = flag(&app, "u2", "nope", "mark-unread", json!({})).await;
    assert_eq!((unknown.status, unknown.body["error"]["code"].as_str()), (404, Some("unknown_conversation")));
    assert_badge_consistent(&app, "acme", "u2").await;
}

#[tokio::test]
async fn flags_mentions_and_recalls_are_in_the_truth() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        // One server, which restarts empty below: Redis lost everything.
        let setup = Setup { sql_url: Some(store.url.clone()), ..Setup::one_server() };
        let app = App::with(setup).await;
        store.create_conversation("acme", "c1", "chat", &["u1".to_string(), "u2".to_string()]).await;
        for seq in 1..=3 {
            let mut touch = message("acme", "c1", seq, 1_000 + seq, "u1", &["u1", "u2"]);
            touch["mentions"] = json!(["u2"]);
            store.store_message("acme", "c1", seq, 1_000 + seq, "u1", &touch["preview"].to_string()).await;
            app.touch(touch).await;
        }
        recall(&app, "c1", 3, &["u1", "u2"]).await;
        let muted = flag(&app, "u2", "c1", "mute", json!({"muted": true})).await;
        assert_eq!(muted.status, 200, "{kind:?}: {:?}", muted.body);
        assert_eq!(flag(&app, "u2", "c1", "pin", json!({"pinned": true})).await.status, 200, "{kind:?}");
        let before = app.whole_list("acme", "u2", 20).await;
        assert_eq!((before[0]["unread"].clone(), before[0]["mentions"].clone()), (json!(2), json!(2)), "{kind:?}");
        let report = app.reconcile(json!({"tenant": "acme", "users": ["u2"]})).await.body;
        assert_eq!(report["drifted"], 0, "{kind:?}: {report}");
        assert_eq!(app.whole_list("acme", "u2", 20).await, before, "{kind:?}");
        app.redis.kill();
        app.redis.restart();
        assert_eq!(app.list("acme", "u2", "").await.body["source"], "sql", "{kind:?}: Redis lost everything");
        assert_eq!(app.whole_list("acme", "u2", 20).await, before, "{kind:?}: rebuilt from the truth");
        assert_eq!(
            badge_of(&app, "u2", "").await,
            json!({"total": 0, "muted": 2, "mentions": 2, "categories": {}, "source": "redis", "degraded": false})
        );
        drop(app);
        store.drop_database().await;
    }
}

/// A message sent again (a queue that delivers at least once) leaves the
/// mark-unread its sender set after it, in Redis and in the truth; the
/// sender's next message moves their read cursor and takes the mark.
/// Cache-only and with each SQL store.
#[tokio::test]
async fn a_message_sent_again_keeps_the_mark_unread_its_sender_set_after_it() {
    for kind in [None].into_iter().chain(KINDS.map(Some)) {
        let store = match kind {
            Some(kind) => Some(MessageStore::create(kind).await),
            None => None,
        };
        let app = App::with(Setup { sql_url: store.as_ref().map(|s| s.url.clone()), ..Setup::default() }).await;
        if let Some(store) = &store {
            store.create_conversation("acme", "c1", "chat", &["u1".to_string(), "u2".to_string()]).await;
        }
        let first = sent_by_u1(&app, store.as_ref(), 1).await;
        let marked = flag(&app, "u1", "c1", "mark-unread", json!({})).await;
        assert_eq!(marked.body["badge"]["total"], 1, "{kind:?}: {:?}", marked.body);
        assert_eq!(app.touch(first).await.status, 200, "{kind:?}");
        assert_u1_marked(&app, store.as_ref(), true, &format!("{kind:?}: the message sent again")).await;
        sent_by_u1(&app, store.as_ref(), 2).await;
        assert_u1_marked(&app, store.as_ref(), false, &format!("{kind:?}: the next message")).await;
        drop(app);
        if let Some(store) = store {
            store.drop_database().await;
        }
    }
}

/// u1's c1 is `marked` unread (counting 1, since u1 sent every message) or
/// not, in Redis and, with a store, in the truth, which a reconcile finds
/// Redis agrees with.
async fn assert_u1_marked(app: &App, store: Option<&MessageStore>, marked: bool, after: &str) {
    assert_eq!(row(&app.whole_list("acme", "u1", 20).await, "c1")["marked_unread"], marked, "{after}");
    assert_eq!(badge_of(app, "u1", "").await["total"], u64::from(marked), "{after}");
    if let Some(store) = store {
        assert_eq!(store.marked_unread("acme", "u1", "c1").await, Some(marked), "{after}");
        assert_eq!(app.reconcile_all("acme").await["drifted"], 0, "{after}");
    }
}

/// Message `seq` of c1 from u1 to u1 and u2, stored first when there is a
/// store, and touched; answers the touch.
async fn sent_by_u1(app: &App, store: Option<&MessageStore>, seq: u64) -> serde_json::Value {
    let touch = message("acme", "c1", seq, 1_000 + seq, "u1", &["u1", "u2"]);
    if let Some(store) = store {
        store.store_message("acme", "c1", seq, 1_000 + seq, "u1", &touch["preview"].to_string()).await;
    }
    assert_eq!(app.touch(touch.clone()).await.status, 200, "message {seq}");
    touch
}

/// After calls at once, u2's row of c1 (its last message `last`) and the
/// badge are the truth's. A call that could not settle the user's state (it
/// kept moving under the others) leaves it unloaded: the first read then
/// answers from SQL and rebuilds, the second from Redis.
async fn assert_c1_as_the_truth(app: &App, store: &MessageStore, last: u64, context: &str) {
    let key = ("u2".to_string(), "c1".to_string());
    let (muted, pinned, marked) = store.settings("acme").await[&key];
    let unread = last - store.cursors("acme").await[&key];
    let total = if muted { 0 } else { unread.max(u64::from(marked)) };
    for read in ["first", "second"] {
        let page = app.list("acme", "u2", "").await;
        let listed = row(page.body["conversations"].as_array().unwrap(), "c1");
        let context = format!("{context}, {read} read from {}", page.body["source"]);
        let settings = (&listed["muted"], &listed["pinned"], &listed["marked_unread"], &listed["unread"]);
        assert_eq!(settings, (&json!(muted), &json!(pinned), &json!(marked), &json!(unread)), "{context}");
        assert_eq!(page.body["badge"]["total"], json!(total), "{context}");
        if read == "second" {
            assert_eq!(page.body["source"], "redis", "{context}");
        }
    }
}

/// Devices of one user set one setting at the same moment, some on and some
/// off (mute, pin; mark-unread against mark-read), round after round, some
/// rounds with the user's state unloaded first: what the truth took last is
/// what Redis answers (the list and the badge) when all are done, and a
/// reconcile finds nothing to fix. Either call may reach Redis first
/// whatever order it reached the truth in. With each SQL store.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn devices_setting_a_flag_at_once_leave_redis_as_the_truth() {
    const ROUNDS: usize = 30;
    const DEVICES: usize = 24;
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = Arc::new(App::with(Setup { sql_url: Some(store.url.clone()), ..Setup::default() }).await);
        store.create_conversation("acme", "c1", "chat", &["u1".to_string(), "u2".to_string()]).await;
        sent_by_u1(&app, Some(&store), 1).await;
        let meta = "un:v2:{acme:u2}:meta";
        for round in 0..ROUNDS {
            if round % 4 == 3 {
                // Redis no longer holds the user as loaded: the calls miss,
                // answer from the truth, and rebuild the user from it.
                let _: i64 = app.holder(meta).command(&["HDEL", meta, "loaded"]);
            }
            // More calls at once than an instance takes (16): the rest go
            // to another instance, with its own connections, so the two
            // stores may see them in different orders.
            let mut calls = tokio::task::JoinSet::new();
            for device in 0..DEVICES {
                let (app, on) = (app.clone(), device % 2 == 0);
                calls.spawn(async move {
                    match round % 3 {
                        0 => flag(&app, "u2", "c1", "mute", json!({ "muted": on })).await,
                        1 => flag(&app, "u2", "c1", "pin", json!({ "pinned": on })).await,
                        _ if on => flag(&app, "u2", "c1", "mark-unread", json!({})).await,
                        _ => app.mark_read("acme", "u2", "c1", 1).await,
                    }
                });
            }
            for answer in calls.join_all().await {
                assert_eq!(answer.status, 200, "{kind:?} round {round}: {:?}", answer.body);
            }
            assert_c1_as_the_truth(&app, &store, 1, &format!("{kind:?} round {round}")).await;
        }
        assert_eq!(app.reconcile_all("acme").await["drifted"], 0, "{kind:?}");
        drop(app);
        store.drop_database().await;
    }
}

/// A user's devices send messages and mark the conversation unread at the
/// same moment, round after round: a message that moves the sender's read
/// cursor takes their mark-unread, a mark-unread after it stays, and either
/// call may reach Redis first whatever order it reached the truth in. What
/// the truth holds when all are done is what Redis answers (the list and the
/// badge), and a reconcile finds nothing to fix. With each SQL store.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sending_and_marking_unread_at_once_leave_redis_as_the_truth() {
    const ROUNDS: usize = 30;
    const CALLS: usize = 24;
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = Arc::new(App::with(Setup { sql_url: Some(store.url.clone()), ..Setup::default() }).await);
        store.create_conversation("acme", "c1", "chat", &["u1".to_string(), "u2".to_string()]).await;
        sent_by_u1(&app, Some(&store), 1).await;
        let mut last = 1;
        for round in 0..ROUNDS {
            // Every other call is a message of u2's, stored first as the app
            // does; the touches and the marks then go at once, more than an
            // instance takes (16), so two instances with their own
            // connections may reach the stores in different orders.
            let mut touches = Vec::new();
            for _ in 0..CALLS / 2 {
                last += 1;
                let touch = message("acme", "c1", last, 1_000 + last, "u2", &["u1", "u2"]);
                store.store_message("acme", "c1", last, 1_000 + last, "u2", &touch["preview"].to_string()).await;
                touches.push(touch);
            }
            let mut calls = tokio::task::JoinSet::new();
            for touch in touches {
                let (sender, device) = (app.clone(), app.clone());
                calls.spawn(async move { sender.touch(touch).await });
                calls.spawn(async move { flag(&device, "u2", "c1", "mark-unread", json!({})).await });
            }
            for answer in calls.join_all().await {
                assert_eq!(answer.status, 200, "{kind:?} round {round}: {:?}", answer.body);
            }
            assert_c1_as_the_truth(&app, &store, last, &format!("{kind:?} round {round}")).await;
        }
        assert_eq!(app.reconcile_all("acme").await["drifted"], 0, "{kind:?}");
        drop(app);
        store.drop_database().await;
    }
}

/// A message the app stored whose touch has not come yet: the truth has the
/// conversation and Redis, holding the user, does not. A mute of it is
/// answered from the truth, and the user's Redis state is made the truth's,
/// so that the list shows the conversation muted from Redis, before the
/// touch and after it. With each SQL store.
#[tokio::test]
async fn a_setting_of_a_conversation_redis_has_not_heard_of_yet_comes_from_the_truth() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = App::with(Setup { sql_url: Some(store.url.clone()), ..Setup::default() }).await;
        let members = ["u1".to_string(), "u2".to_string()];
        store.create_conversation("acme", "c1", "chat", &members).await;
        sent_by_u1(&app, Some(&store), 1).await;
        store.create_conversation("acme", "c2", "chat", &members).await;
        let touch = message("acme", "c2", 1, 2_000, "u1", &["u1", "u2"]);
        store.store_message("acme", "c2", 1, 2_000, "u1", &touch["preview"].to_string()).await;
        assert_eq!(app.list("acme", "u2", "").await.body["source"], "redis", "{kind:?}: u2 is loaded");

        let muted = flag(&app, "u2", "c2", "mute", json!({"muted": true})).await;
        assert_eq!(muted.status, 200, "{kind:?}: {:?}", muted.body);
        assert_eq!(muted.body["source"], "sql", "{kind:?}: {:?}", muted.body);
        assert_eq!(
            (&muted.body["conversation"]["muted"], &muted.body["conversation"]["unread"]),
            (&json!(true), &json!(1)),
            "{kind:?}"
        );
        for when in ["before the touch", "after the touch"] {
            let page = app.list("acme", "u2", "").await;
            assert_eq!(page.body["source"], "redis", "{kind:?} {when}");
            let listed = row(page.body["conversations"].as_array().unwrap(), "c2");
            assert_eq!((&listed["muted"], &listed["unread"]), (&json!(true), &json!(1)), "{kind:?} {when}");
            assert_eq!(page.body["badge"]["total"], json!(1), "{kind:?} {when}: c1 alone");
            assert_eq!(page.body["badge"]["muted"], json!(1), "{kind:?} {when}");
            if when == "before the touch" {
                assert_eq!(app.touch(touch.clone()).await.status, 200, "{kind:?}");
            }
        }
        assert_eq!(app.reconcile_all("acme").await["drifted"], 0, "{kind:?}");
        drop(app);
        store.drop_database().await;
    }
}
