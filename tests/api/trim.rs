//! The list is a view: each user lists the newest `max_conversations`
//! (pinned ones always), and whatever leaves the list keeps its read cursor,
//! settings and pending mentions and recalls, so it comes back with the right
//! number. The badge counts what is listed, and a trim that changes it
//! publishes the final number.

use serde_json::json;

use crate::support::{App, Events, Setup, assert_badge_consistent, ids, message};

async fn small_app(max_conversations: u32) -> App {
    App::with(Setup { max_conversations, ..Setup::default() }).await
}

/// A trimmed conversation keeps its read cursor: the user read c0 up to 5000,
/// c1 and c2 pushed it out, and its next message counts as one, not 5001.
#[tokio::test]
async fn a_trimmed_conversation_comes_back_with_its_read_cursor() {
    let app = small_app(2).await;
    for seq in [4999, 5000] {
        app.touch(message("acme", "c0", seq, 1_000 + seq, "u1", &["u1", "u2"])).await;
    }
    assert_eq!(app.mark_read("acme", "u2", "c0", 5000).await.body["unread"], 0);
    app.touch(message("acme", "c1", 1, 10_000, "u1", &["u1", "u2"])).await;
    app.touch(message("acme", "c2", 1, 10_001, "u1", &["u1", "u2"])).await;
    assert_eq!(ids(&app.whole_list("acme", "u2", 20).await), ["c2", "c1"]);
    app.touch(message("acme", "c0", 5001, 10_002, "u1", &["u1", "u2"])).await;
    let rows = app.whole_list("acme", "u2", 20).await;
    assert_eq!(ids(&rows), ["c0", "c2"]);
    assert_eq!((rows[0]["unread"].as_u64(), rows[0]["read_seq"].as_u64()), (Some(1), Some(5000)));
    assert_eq!(assert_badge_consistent(&app, "acme", "u2").await, 2);
}

/// Mute, mark-unread and pending mentions survive a trim too.
#[tokio::test]
async fn a_trimmed_conversation_keeps_its_settings_and_mentions() {
    let app = small_app(2).await;
    let mut mention = message("acme", "c0", 1, 1_000, "u1", &["u1", "u2"]);
    mention["mentions"] = json!(["u2"]);
    app.touch(mention).await;
    app.touch(message("acme", "m0", 1, 1_001, "u1", &["u1", "u2"])).await;
    app.mark_read("acme", "u2", "m0", 1).await;
    assert_eq!(app.flag("acme", "u2", "c0", "mute", json!({"muted": true})).await.status, 200);
    assert_eq!(app.flag("acme", "u2", "m0", "mark-unread", json!({})).await.status, 200);
    for (i, id) in ["x1", "x2"].iter().enumerate() {
        app.touch(message("acme", id, 1, 2_000 + i as u64, "u1", &["u1", "u2"])).await;
    }
    assert_eq!(ids(&app.whole_list("acme", "u2", 20).await), ["x2", "x1"]);
    assert_eq!(app.badge("acme", "u2").await.body["mentions"], 0, "a trimmed mention leaves the badge");
    app.touch(message("acme", "c0", 2, 3_000, "u1", &["u1", "u2"])).await;
    app.touch(message("acme", "m0", 2, 3_001, "u3", &["u1", "u2"])).await;
    let rows = app.whole_list("acme", "u2", 20).await;
    assert_eq!(ids(&rows), ["m0", "c0"]);
    let (m0, c0) = (&rows[0], &rows[1]);
    assert_eq!((c0["muted"].as_bool(), c0["unread"].as_u64(), c0["mentions"].as_u64()), (Some(true), Some(2), Some(1)));
    assert_eq!((m0["marked_unread"].as_bool(), m0["unread"].as_u64()), (Some(true), Some(1)));
    assert_eq!(
        app.badge("acme", "u2").await.body,
        json!({"total": 1, "muted": 2, "mentions": 1, "categories": {"chat": 1}, "source": "redis", "degraded": false})
    );
}

/// Cursors that came before a first message (joins, early acks) are kept for
/// many more conversations than are listed, and none is lost at random.
#[tokio::test]
async fn early_cursors_beyond_the_list_are_kept() {
    let app = small_app(2).await;
    let groups: Vec<String> = (0..15).map(|i| format!("g{i:02}")).collect();
    for group in &groups {
        assert_eq!(app.join("acme", group, 100, &["u2"]).await.status, 200);
    }
    app.mark_read("acme", "u2", "early", 7).await;
    for (i, group) in groups.iter().enumerate() {
        app.touch(message("acme", group, 101, 5_000 + i as u64, "u1", &["u1", "u2"])).await;
    }
    // Each comes back with its own cursor when it is newest again.
    for (i, group) in groups.iter().enumerate() {
        app.touch(message("acme", group, 102, 9_000 + i as u64, "u1", &["u1", "u2"])).await;
        let row = app.row("acme", "u2", group).await.unwrap();
        assert_eq!((row["unread"].as_u64(), row["read_seq"].as_u64()), (Some(2), Some(100)), "{group}");
    }
    app.touch(message("acme", "early", 8, 20_000, "u1", &["u1", "u2"])).await;
    assert_eq!(app.row("acme", "u2", "early").await.unwrap()["unread"], 1);
}

/// A touch that trims publishes the badge as it is after the trim.
#[tokio::test]
async fn a_trim_publishes_the_final_badge() {
    let app = small_app(2).await;
    for seq in 1..=5 {
        app.touch(message("acme", "c0", seq, 1_000 + seq, "u1", &["u1", "u2"])).await;
    }
    app.touch(message("acme", "c1", 1, 2_000, "u1", &["u1", "u2"])).await;
    let mut events = Events::subscribe(&app, "acme");
    app.touch(message("acme", "c2", 1, 3_000, "u1", &["u1", "u2"])).await;
    let events = events.take();
    let u2: Vec<_> = events.iter().filter(|e| e["user"] == "u2").collect();
    assert_eq!(u2.len(), 1, "{events:?}");
    assert_eq!(u2[0]["badge"]["total"], 2, "c0's 5 left with the trim: {events:?}");
    assert_eq!(assert_badge_consistent(&app, "acme", "u2").await, 2);
}

/// The list is always the newest: when a member leaves a listed
/// conversation, the newest one that was trimmed takes its place.
#[tokio::test]
async fn leaving_a_listed_conversation_lists_the_newest_trimmed_one() {
    let app = small_app(2).await;
    for (i, id) in ["a", "b", "c"].iter().enumerate() {
        app.touch(message("acme", id, 1, 1_000 + i as u64, "u1", &["u1", "u2"])).await;
    }
    assert_eq!(ids(&app.whole_list("acme", "u2", 20).await), ["c", "b"]);
    assert_eq!(app.leave("acme", "c", &["u2"]).await.body["removed"], 1);
    assert_eq!(ids(&app.whole_list("acme", "u2", 20).await), ["b", "a"]);
    assert_eq!(assert_badge_consistent(&app, "acme", "u2").await, 2);
}
