//! Joining late and deleted conversations: a late member counts only what came
//! after, and a late touch of a deleted conversation changes nothing.

use serde_json::json;

use super::{badge_of, ids, messages, row};
use crate::store::{KINDS, MessageStore};
use crate::support::{Answer, App, SERVICE_TOKEN, Setup, assert_badge_consistent, message};

#[tokio::test]
async fn a_late_touch_of_a_deleted_conversation_changes_nothing() {
    let app = App::start().await;
    messages(&app, "c1", 1, 2, 1_000).await;
    messages(&app, "c2", 1, 1, 2_000).await;
    let held_back = message("acme", "c1", 3, 1_003, "u1", &["u1", "u2", "u3"]);
    assert_eq!(app.delete_conversation("acme", "c1", &["u1", "u2", "u3"]).await.body["removed"], 3);
    let before = app.redis.user_key_space("acme", "u2");
    assert_eq!(app.touch(held_back).await.body["applied"], false);
    assert_eq!(app.redis.user_key_space("acme", "u2"), before);
    assert_eq!(ids(&app.whole_list("acme", "u2", 20).await), ["c2"]);
    assert_badge_consistent(&app, "acme", "u2").await;
}

async fn join(app: &App, conversation: &str, seq: u64, members: &[&str]) -> Answer {
    let body = json!({"tenant": "acme", "conversation": conversation, "seq": seq, "members": members});
    app.send("POST", "/v1/join", Some(SERVICE_TOKEN.to_string()), Some(body.to_string())).await
}

#[tokio::test]
async fn a_member_who_joins_late_counts_only_what_came_after() {
    let app = App::start().await;
    messages(&app, "c1", 1, 5, 1_000).await;
    assert_eq!(join(&app, "c1", 5, &["u9"]).await.body, json!({"conversation": "c1", "seq": 5, "changed": 1}));
    let mut touch = message("acme", "c1", 6, 1_006, "u1", &["u1", "u2", "u9"]);
    touch["mentions"] = json!(["u9"]);
    app.touch(touch).await;
    let rows = app.whole_list("acme", "u9", 20).await;
    assert_eq!(
        (rows[0]["unread"].clone(), rows[0]["read_seq"].clone(), rows[0]["mentions"].clone()),
        (json!(1), json!(5), json!(1))
    );
    // Told after its first touch, or twice: the same.
    assert_eq!(join(&app, "c1", 4, &["u2"]).await.body["changed"], 1);
    assert_eq!(join(&app, "c1", 4, &["u2"]).await.body["changed"], 0);
    assert_eq!(row(&app.whole_list("acme", "u2", 20).await, "c1")["unread"], 2);
    assert_badge_consistent(&app, "acme", "u9").await;
}

/// Without a SQL store too, a member who joins sees the conversation at once,
/// with its last message read, as a touch of it would have listed it.
#[tokio::test]
async fn a_member_who_joins_sees_the_conversation_at_once() {
    let app = App::start().await;
    messages(&app, "c1", 1, 5, 1_000).await;
    app.mark_read("acme", "u8", "c1", 2).await; // a cursor from before any message of theirs
    assert_eq!(join(&app, "c1", 5, &["u8", "u9"]).await.body["changed"], 2);
    for user in ["u8", "u9"] {
        let listed = row(&app.whole_list("acme", user, 20).await, "c1").clone();
        assert_eq!(
            (
                &listed["last_seq"],
                &listed["read_seq"],
                &listed["unread"],
                &listed["category"],
                &listed["preview"]["text"]
            ),
            (&json!(5), &json!(5), &json!(0), &json!("chat"), &json!("message 5")),
            "{user}"
        );
        assert_eq!(
            listed["ts"],
            app.row("acme", "u2", "c1").await.unwrap()["ts"],
            "{user}: ordered by its last message"
        );
    }
    // Joined before messages it was not told of: they count once they come.
    assert_eq!(join(&app, "c2", 3, &["u9"]).await.body["changed"], 1);
    assert!(app.row("acme", "u9", "c2").await.is_none(), "no message yet: nothing to list");
    messages(&app, "c2", 1, 3, 2_000).await;
    app.touch(message("acme", "c2", 4, 2_004, "u1", &["u1", "u9"])).await;
    assert_eq!(app.row("acme", "u9", "c2").await.unwrap()["unread"], 1);
    assert_badge_consistent(&app, "acme", "u9").await;
}

#[tokio::test]
async fn a_late_join_is_in_the_truth() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = App::with(Setup { sql_url: Some(store.url.clone()), ..Setup::default() }).await;
        store.create_conversation("acme", "c1", "chat", &["u1".to_string(), "u9".to_string()]).await;
        for seq in 1..=4 {
            let touch = message("acme", "c1", seq, 1_000 + seq, "u1", &["u1", "u9"]);
            store.store_message("acme", "c1", seq, 1_000 + seq, "u1", &touch["preview"].to_string()).await;
            if seq == 4 {
                assert_eq!(join(&app, "c1", 3, &["u9"]).await.status, 200, "{kind:?}");
            }
            app.touch(touch).await;
        }
        assert_eq!(store.cursors("acme").await.get(&("u9".to_string(), "c1".to_string())), Some(&3), "{kind:?}");
        assert_eq!(app.reconcile_all("acme").await["drifted"], 0, "{kind:?}");
        assert_eq!(badge_of(&app, "u9", "").await["total"], 1, "{kind:?}");
        drop(app);
        store.drop_database().await;
    }
}
