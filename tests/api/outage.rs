//! With a SQL store, Redis never answers with state it invented or that an
//! outage made stale: a user Redis does not hold is taken from the truth
//! (and nothing built on invented numbers is published), and a write that
//! reached only SQL while Redis was away is what the next read shows.

use serde_json::json;

use crate::store::{KINDS, MessageStore};
use crate::support::{App, Events, Setup, message};

async fn app_on(store: &MessageStore) -> App {
    App::with(Setup { sql_url: Some(store.url.clone()), ..Setup::default() }).await
}

/// The app's way: store the message, then touch.
async fn send(app: &App, store: &MessageStore, conversation: &str, seq: u64, members: &[&str]) {
    let touch = message("acme", conversation, seq, 1_000 + seq, "u1", members);
    store.store_message("acme", conversation, seq, 1_000 + seq, "u1", &touch["preview"].to_string()).await;
    assert_eq!(app.touch(touch).await.status, 200);
}

/// Redis lost everything; the next touch must not give u2 a read cursor of
/// 0 (5001 unread) in Redis nor in any event.
#[tokio::test]
async fn a_user_redis_lost_is_never_given_invented_numbers() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = app_on(&store).await;
        store.create_conversation("acme", "c1", "chat", &["u1".to_string(), "u2".to_string()]).await;
        for seq in [4999, 5000] {
            send(&app, &store, "c1", seq, &["u1", "u2"]).await;
        }
        assert_eq!(app.mark_read("acme", "u2", "c1", 5000).await.body["unread"], 0, "{kind:?}");
        app.redis.flush_all();
        let mut events = Events::subscribe(&app, "acme");
        send(&app, &store, "c1", 5001, &["u1", "u2"]).await;
        app.recall("acme", "c1", 4999, &["u1", "u2"], None).await;
        app.join("acme", "c1", 4000, &["u2"]).await;
        for event in events.take() {
            assert!(event["badge"]["total"].as_u64().unwrap() <= 1, "{kind:?}: an invented number: {event}");
            if event["conversation"] == "c1" {
                assert!(event["unread"].as_u64().unwrap() <= 1, "{kind:?}: {event}");
            }
        }
        // Redis holds the truth: the answer comes from Redis, not degraded.
        let page = app.list("acme", "u2", "").await.body;
        assert_eq!((&page["source"], &page["degraded"]), (&json!("redis"), &json!(false)), "{kind:?}: {page}");
        let row = &page["conversations"][0];
        assert_eq!((row["unread"].as_u64(), row["read_seq"].as_u64()), (Some(1), Some(5000)), "{kind:?}");
        drop(app);
        store.drop_database().await;
    }
}

/// mark-read, mute and pin while Redis is away reach SQL (answered from
/// it, with the cursor SQL kept: never more than 10 000 past the last
/// message, as Redis answers); when the same Redis comes back with what it
/// held before, the next reads show the writes, not the state from before
/// the outage.
#[tokio::test]
async fn writes_during_an_outage_are_what_the_next_reads_show() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = app_on(&store).await;
        for id in ["c1", "c2"] {
            store.create_conversation("acme", id, "chat", &["u1".to_string(), "u2".to_string()]).await;
            for seq in 1..=5 {
                send(&app, &store, id, seq, &["u1", "u2"]).await;
            }
        }
        assert_eq!(app.badge("acme", "u2").await.body["total"], 10, "{kind:?}");
        app.redis.pause();
        let read = app.mark_read("acme", "u2", "c1", 4).await;
        assert_eq!(
            (read.status, read.body["degraded"].clone(), read.body["unread"].clone()),
            (200, json!(true), json!(1))
        );
        let ahead = app.mark_read("acme", "u2", "c2", 1_000_000).await;
        assert_eq!((ahead.status, &ahead.body["degraded"]), (200, &json!(true)), "{kind:?}: {:?}", ahead.body);
        assert_eq!((&ahead.body["read_seq"], &ahead.body["unread"]), (&json!(10_005), &json!(0)), "{kind:?}");
        let pinned = app.flag("acme", "u2", "c1", "pin", json!({"pinned": true})).await;
        assert_eq!((pinned.status, pinned.body["conversation"]["pinned"].clone()), (200, json!(true)), "{kind:?}");
        app.redis.resume();
        // Instances idle for a second are retired: the next one reconnects.
        tokio::time::sleep(std::time::Duration::from_millis(1_500)).await;
        let row = app.row("acme", "u2", "c1").await.unwrap();
        assert_eq!(
            (row["read_seq"].as_u64(), row["unread"].as_u64(), row["pinned"].as_bool()),
            (Some(4), Some(1), Some(true))
        );
        assert_eq!(app.row("acme", "u2", "c2").await.unwrap()["read_seq"], 10_005, "{kind:?}");
        assert_eq!(app.badge("acme", "u2").await.body["total"], 1, "{kind:?}");
        drop(app);
        store.drop_database().await;
    }
}

/// How Redis was away from a touch.
#[derive(Clone, Copy, Debug)]
enum Away {
    /// Killed: it comes back empty.
    Lost,
    /// Hung: what was sent to it runs when it answers again.
    Paused,
    /// Stopped and started again from its saved data.
    Stopped,
}

/// A touch refused while Redis was away and sent again after it came back
/// finds the sender's cursor already at its message in the truth (the
/// refused call recorded it there): a mark-unread the sender set in
/// between stays, in Redis and in the truth alike, so a reconcile finds
/// nothing to fix. Lost or paused, the mark is set while Redis is away
/// (answered from SQL); stopped, once it is back, where the sender's state
/// still has the cursor before the message and takes the truth's mark.
/// (One Redis server, which the test stops.)
#[tokio::test]
async fn a_touch_sent_again_keeps_the_mark_unread_its_sender_set_after_it_was_refused() {
    for kind in KINDS {
        for away in [Away::Lost, Away::Paused, Away::Stopped] {
            let store = MessageStore::create(kind).await;
            let app = App::with(Setup { sql_url: Some(store.url.clone()), ..Setup::one_server() }).await;
            store.create_conversation("acme", "c1", "chat", &["u1".to_string(), "u2".to_string()]).await;
            send(&app, &store, "c1", 1, &["u1", "u2"]).await;
            match away {
                Away::Lost => app.redis.kill(),
                Away::Paused => app.redis.pause(),
                Away::Stopped => app.redis.stop_keeping_data(),
            }
            let touch = message("acme", "c1", 2, 1_002, "u1", &["u1", "u2"]);
            store.store_message("acme", "c1", 2, 1_002, "u1", &touch["preview"].to_string()).await;
            assert_eq!(app.touch(touch.clone()).await.status, 503, "{kind:?} {away:?}");
            let back = || async {
                match away {
                    Away::Lost => app.redis.restart(),
                    Away::Paused => app.redis.resume(),
                    Away::Stopped => app.redis.start_keeping_data(),
                }
                // Instances idle for a second are retired: the next one reconnects.
                tokio::time::sleep(std::time::Duration::from_millis(1_500)).await;
            };
            if let Away::Stopped = away {
                back().await;
            }
            let marked = app.flag("acme", "u1", "c1", "mark-unread", json!({})).await;
            assert_eq!(
                (marked.status, marked.body["degraded"].clone(), marked.body["conversation"]["marked_unread"].clone()),
                (200, json!(!matches!(away, Away::Stopped)), json!(true)),
                "{kind:?} {away:?}: {:?}",
                marked.body
            );
            if !matches!(away, Away::Stopped) {
                back().await;
            }
            assert_eq!(app.touch(touch).await.status, 200, "{kind:?} {away:?}");
            let row = app.row("acme", "u1", "c1").await.unwrap();
            assert_eq!(
                (row["marked_unread"].as_bool(), row["read_seq"].as_u64(), row["unread"].as_u64()),
                (Some(true), Some(2), Some(0)),
                "{kind:?} {away:?}: {row}"
            );
            assert_eq!(app.badge("acme", "u1").await.body["total"], 1, "{kind:?} {away:?}");
            assert_eq!(store.marked_unread("acme", "u1", "c1").await, Some(true), "{kind:?} {away:?}");
            let report = app.reconcile_all("acme").await;
            assert_eq!(report["drifted"], 0, "{kind:?} {away:?}: {report}");
            // The sender's next message moves the cursor, and takes the mark.
            send(&app, &store, "c1", 3, &["u1", "u2"]).await;
            let row = app.row("acme", "u1", "c1").await.unwrap();
            assert_eq!(row["marked_unread"], false, "{kind:?} {away:?}");
            assert_eq!(store.marked_unread("acme", "u1", "c1").await, Some(false), "{kind:?} {away:?}");
            drop(app);
            store.drop_database().await;
        }
    }
}

/// With SQL, a user writes only to conversations they are a member of: a
/// mark-read, mute, pin or mark-unread of any other is 404 and writes
/// nothing, and the pin limit holds even when Redis cannot be asked.
#[tokio::test]
async fn writes_go_only_to_member_conversations_and_pins_stay_capped() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = App::with(Setup {
            sql_url: Some(store.url.clone()),
            variables: vec![("max_pins", "2".to_string())],
            ..Setup::default()
        })
        .await;
        for id in ["a", "b", "c"] {
            store.create_conversation("acme", id, "chat", &["u1".to_string(), "u2".to_string()]).await;
            send(&app, &store, id, 1, &["u1", "u2"]).await;
        }
        store.create_conversation("acme", "theirs", "chat", &["u1".to_string()]).await;
        send(&app, &store, "theirs", 1, &["u1"]).await;
        let before = store.rows("SELECT COUNT(*) FROM unread_read_cursors", &[]).await;
        assert_eq!(app.mark_read("acme", "u2", "theirs", 1).await.status, 404, "{kind:?}");
        assert_eq!(app.mark_read("acme", "u2", "nowhere", 1).await.status, 404, "{kind:?}");
        for (action, body) in
            [("mute", json!({"muted": true})), ("pin", json!({"pinned": true})), ("mark-unread", json!({}))]
        {
            assert_eq!(app.flag("acme", "u2", "theirs", action, body).await.status, 404, "{kind:?}: {action}");
        }
        assert_eq!(store.rows("SELECT COUNT(*) FROM unread_read_cursors", &[]).await, before, "{kind:?}");
        app.redis.kill();
        for id in ["a", "b"] {
            assert_eq!(app.flag("acme", "u2", id, "pin", json!({"pinned": true})).await.status, 200, "{kind:?}");
        }
        let third = app.flag("acme", "u2", "c", "pin", json!({"pinned": true})).await;
        assert_eq!((third.status, third.body["error"]["code"].as_str()), (409, Some("too_many_pins")), "{kind:?}");
        let settings = store.settings("acme").await;
        let pinned = settings.get(&("u2".to_string(), "c".to_string())).map(|s| s.1);
        assert_ne!(pinned, Some(true), "{kind:?}: the refused pin wrote nothing");
        drop(app);
        store.drop_database().await;
    }
}

/// More users than one batch of stale marks wrote while Redis was away
/// (here, as SQL alone holds them: cursors written there, marks beside
/// them); the next connection applies every mark, so none of them is
/// answered from what Redis held before.
#[tokio::test]
async fn every_stale_mark_is_applied_however_many_there_are() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = app_on(&store).await;
        let readers: Vec<String> = (0..250).map(|i| format!("r{i:03}")).collect();
        let mut members: Vec<&str> = readers.iter().map(String::as_str).collect();
        members.push("u1");
        let owned: Vec<String> = members.iter().map(|m| m.to_string()).collect();
        store.create_conversation("acme", "c1", "chat", &owned).await;
        for seq in 1..=3 {
            send(&app, &store, "c1", seq, &members).await;
        }
        let before = app.badges("acme", &members[..250]).await.body;
        assert!(before["badges"].as_array().unwrap().iter().all(|b| b["total"] == 3), "{kind:?}: {before}");
        for (i, reader) in readers.iter().enumerate() {
            store
                .exec(
                    "INSERT INTO unread_read_cursors (tenant, user_id, conversation, read_seq, muted, pinned, \
                     marked_unread, updated_at) VALUES ('acme', ?, 'c1', 3, 0, 0, 0, 1)",
                    &[crate::store::s(reader)],
                )
                .await;
            store
                .exec(
                    "INSERT INTO unread_stale_users (tenant, user_id, since) VALUES ('acme', ?, ?)",
                    &[crate::store::s(reader), crate::store::P::I(1_000 + i as i64)],
                )
                .await;
        }
        // Instances idle for a second are retired: the next one connects anew.
        tokio::time::sleep(std::time::Duration::from_millis(1_500)).await;
        let after = app.badges("acme", &members[..250]).await.body;
        let badges = after["badges"].as_array().unwrap();
        let behind: Vec<&serde_json::Value> = badges.iter().filter(|b| b["total"] != 0).map(|b| &b["user"]).collect();
        assert_eq!(badges.len(), 250, "{kind:?}");
        assert!(behind.is_empty(), "{kind:?}: answered from before their writes: {behind:?}");
        let left = store.rows("SELECT COUNT(*) FROM unread_stale_users", &[]).await;
        assert_eq!(left, vec![vec!["0".to_string()]], "{kind:?}");
        drop(app);
        store.drop_database().await;
    }
}
