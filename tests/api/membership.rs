//! Members come and go: leave takes a member's state of a conversation away
//! (and from the badge), late touches of it change nothing for them, join
//! brings them back counting only what comes after; delete is the whole
//! conversation. Every order of these with the touches ends the same.

use serde_json::json;

use crate::store::{KINDS, MessageStore};
use crate::support::{App, Setup, assert_badge_consistent, ids, message};

#[tokio::test]
async fn a_member_who_leaves_and_comes_back_counts_only_what_came_after() {
    let app = App::start().await;
    for seq in 1..=3 {
        app.touch(message("acme", "g", seq, 1_000 + seq, "u1", &["u1", "u2", "u3"])).await;
    }
    let held_back = message("acme", "g", 4, 1_004, "u1", &["u1", "u2", "u3"]);
    assert_eq!(app.leave("acme", "g", &["u2"]).await.body, json!({"conversation": "g", "removed": 1}));
    assert_eq!(app.leave("acme", "g", &["u2"]).await.body["removed"], 0, "a replay changes nothing");
    assert!(app.whole_list("acme", "u2", 20).await.is_empty());
    assert_eq!(app.badge("acme", "u2").await.body["total"], 0);
    // A touch from before the leave arrives late: nothing for u2, all for u3.
    app.touch(held_back).await;
    assert!(app.whole_list("acme", "u2", 20).await.is_empty());
    assert_eq!(app.row("acme", "u3", "g").await.unwrap()["unread"], 4);
    assert_eq!(app.mark_read("acme", "u2", "g", 4).await.status, 404, "u2 has no g any more");
    // u2 comes back after message 6.
    for seq in 5..=6 {
        app.touch(message("acme", "g", seq, 1_000 + seq, "u1", &["u1", "u3"])).await;
    }
    assert_eq!(app.join("acme", "g", 6, &["u2"]).await.body["changed"], 1);
    app.touch(message("acme", "g", 7, 1_007, "u1", &["u1", "u2", "u3"])).await;
    let row = app.row("acme", "u2", "g").await.unwrap();
    assert_eq!((row["unread"].as_u64(), row["read_seq"].as_u64()), (Some(1), Some(6)));
    assert_eq!(assert_badge_consistent(&app, "acme", "u2").await, 1);
}

/// Join, leave and recall before the touches they concern: the same end as
/// in order.
#[tokio::test]
async fn joins_leaves_and_recalls_before_their_touches_end_the_same() {
    let app = App::start().await;
    let touches: Vec<_> =
        (1..=4).map(|seq| message("acme", "g", seq, 1_000 + seq, "u1", &["u1", "u2", "u3"])).collect();
    // In order, in tenant "acme": join u2 at 2, touches, recall 3, u3 leaves.
    let run = |tenant: &'static str, early: bool| {
        let app = &app;
        let touches = touches.clone();
        async move {
            let touch = |mut t: serde_json::Value| {
                t["tenant"] = json!(tenant);
                async move { app.touch(t).await }
            };
            if early {
                app.join(tenant, "g", 2, &["u2"]).await;
                app.recall(tenant, "g", 3, &["u1", "u2", "u3"], Some(json!({"type": "recalled"}))).await;
                app.leave(tenant, "g", &["u3"]).await;
                for t in touches.into_iter().rev() {
                    touch(t).await;
                }
            } else {
                for t in touches {
                    touch(t).await;
                }
                app.join(tenant, "g", 2, &["u2"]).await;
                app.recall(tenant, "g", 3, &["u1", "u2", "u3"], Some(json!({"type": "recalled"}))).await;
                app.leave(tenant, "g", &["u3"]).await;
            }
            let mut state = Vec::new();
            for user in ["u1", "u2", "u3"] {
                state.push(json!(app.whole_list(tenant, user, 20).await));
                state.push(app.badge(tenant, user).await.body);
            }
            state
        }
    };
    let in_order = run("ordered", false).await;
    let early = run("early", true).await;
    assert_eq!(early, in_order);
    let u2 = &in_order[2][0];
    assert_eq!((u2["unread"].as_u64(), u2["read_seq"].as_u64()), (Some(1), Some(2)), "4 only: 3 was recalled");
    assert_eq!(in_order[4], json!([]), "u3 left");
}

/// A recall that overtakes the touch of the newest message: the recalled
/// text never becomes the preview (that is what the recall hides).
#[tokio::test]
async fn a_recall_before_its_touch_keeps_the_recalled_text_hidden() {
    let app = App::start().await;
    app.touch(message("acme", "c1", 1, 1_000, "u1", &["u1", "u2"])).await;
    let hidden = json!({"type": "recalled"});
    assert_eq!(app.recall("acme", "c1", 2, &["u1", "u2"], Some(hidden.clone())).await.status, 200);
    let mut secret = message("acme", "c1", 2, 1_001, "u1", &["u1", "u2"]);
    secret["preview"] = json!({"text": "the recalled words", "type": "text"});
    app.touch(secret).await;
    let row = app.row("acme", "u2", "c1").await.unwrap();
    assert_eq!(row["preview"], hidden);
    assert_eq!((row["unread"].as_u64(), row["last_seq"].as_u64()), (Some(1), Some(2)));
    // The next message shows as usual.
    app.touch(message("acme", "c1", 3, 1_002, "u1", &["u1", "u2"])).await;
    let row = app.row("acme", "u2", "c1").await.unwrap();
    assert_eq!((row["unread"].as_u64(), row["preview"]["text"].as_str()), (Some(2), Some("message 3")));
}

/// A replayed join changes nothing the member set: their mark-unread stays.
#[tokio::test]
async fn a_replayed_join_keeps_the_members_mark_unread() {
    let app = App::start().await;
    app.touch(message("acme", "g", 5, 1_000, "u1", &["u1", "u2"])).await;
    app.join("acme", "g", 5, &["u2"]).await;
    assert_eq!(app.flag("acme", "u2", "g", "mark-unread", json!({})).await.status, 200);
    assert_eq!(app.join("acme", "g", 5, &["u2"]).await.body["changed"], 0);
    assert_eq!(app.row("acme", "u2", "g").await.unwrap()["marked_unread"], true);
    assert_eq!(app.badge("acme", "u2").await.body["total"], 1);
}

/// With SQL, leave removes the leaving members' rows only: the others'
/// cursors stay, so a reconcile never sets their unread to the whole history.
#[tokio::test]
async fn leaving_removes_only_the_leaving_members_cursors_from_sql() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = App::with(Setup { sql_url: Some(store.url.clone()), ..Setup::default() }).await;
        let members: Vec<String> = ["u1", "u2", "u3"].iter().map(|m| m.to_string()).collect();
        store.create_conversation("acme", "g", "chat", &members).await;
        for seq in 1..=5 {
            let touch = message("acme", "g", seq, 1_000 + seq, "u1", &["u1", "u2", "u3"]);
            store.store_message("acme", "g", seq, 1_000 + seq, "u1", &touch["preview"].to_string()).await;
            app.touch(touch).await;
        }
        app.mark_read("acme", "u2", "g", 4).await;
        app.mark_read("acme", "u3", "g", 5).await;
        store.exec("DELETE FROM app_members WHERE user_id = 'u3'", &[]).await;
        assert_eq!(app.leave("acme", "g", &["u3"]).await.body["removed"], 1, "{kind:?}");
        let cursors = store.cursors("acme").await;
        assert_eq!(cursors.get(&("u2".into(), "g".into())), Some(&4), "{kind:?}");
        assert!(!cursors.contains_key(&("u3".into(), "g".into())), "{kind:?}");
        let report = app.reconcile(json!({"tenant": "acme", "users": ["u1", "u2", "u3"]})).await.body;
        assert_eq!(report["drifted"], 0, "{kind:?}: {report}");
        assert_eq!(app.row("acme", "u2", "g").await.unwrap()["unread"], 1, "{kind:?}");
        assert!(ids(&app.whole_list("acme", "u3", 20).await).is_empty(), "{kind:?}");
        drop(app);
        store.drop_database().await;
    }
}

/// A leave sent again (after a 503, say) once the member rejoined changes
/// nothing: the store has them as a member again, with their cursor.
#[tokio::test]
async fn a_leave_sent_again_after_the_member_rejoined_changes_nothing() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = App::with(Setup { sql_url: Some(store.url.clone()), ..Setup::default() }).await;
        let members: Vec<String> = ["u1", "u2", "u3"].iter().map(|m| m.to_string()).collect();
        store.create_conversation("acme", "g", "chat", &members).await;
        for seq in 1..=3 {
            let touch = message("acme", "g", seq, 1_000 + seq, "u1", &["u1", "u2", "u3"]);
            store.store_message("acme", "g", seq, 1_000 + seq, "u1", &touch["preview"].to_string()).await;
            app.touch(touch).await;
        }
        store.exec("DELETE FROM app_members WHERE user_id = 'u3'", &[]).await;
        assert_eq!(app.leave("acme", "g", &["u3"]).await.body["removed"], 1, "{kind:?}");
        store.exec("INSERT INTO app_members (tenant, conversation, user_id) VALUES ('acme', 'g', 'u3')", &[]).await;
        assert_eq!(app.join("acme", "g", 3, &["u3"]).await.status, 200, "{kind:?}");
        let touch = message("acme", "g", 4, 1_004, "u1", &["u1", "u2", "u3"]);
        store.store_message("acme", "g", 4, 1_004, "u1", &touch["preview"].to_string()).await;
        app.touch(touch).await;

        assert_eq!(app.leave("acme", "g", &["u3"]).await.body["removed"], 0, "{kind:?}: the leave came again");
        let row = app.row("acme", "u3", "g").await.unwrap_or_default();
        assert_eq!((row["last_seq"].as_u64(), row["unread"].as_u64()), (Some(4), Some(1)), "{kind:?}: {row}");
        assert_eq!(store.cursors("acme").await.get(&("u3".into(), "g".into())), Some(&3), "{kind:?}");
        let report = app.reconcile(json!({"tenant": "acme", "users": ["u3"]})).await.body;
        assert_eq!(report["drifted"], 0, "{kind:?}: {report}");
        drop(app);
        store.drop_database().await;
    }
}
