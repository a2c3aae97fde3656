//! Change events: every change of a badge publishes one event that matches the
//! state.

use serde_json::{Value, json};

use super::{badge_of, flag, messages, recall};
use crate::support::{App, Events, message};

#[tokio::test]
async fn every_change_of_a_badge_publishes_one_event_that_matches_the_state() {
    let app = App::start().await;
    let mut events = Events::subscribe(&app, "acme");
    let mut touch = message("acme", "c1", 1, 1_000, "u1", &["u1", "u2"]);
    touch["mentions"] = json!(["u2"]);
    app.touch(touch).await;
    let badge = badge_of(&app, "u2", "").await;
    assert_eq!(
        events.take(),
        [json!({"user": "u2", "conversation": "c1", "unread": 1, "mentions": 1,
        "badge": {"total": badge["total"], "muted": badge["muted"], "mentions": badge["mentions"]}})],
        "one event, for u2: the sender's numbers did not move"
    );
    flag(&app, "u2", "c1", "pin", json!({"pinned": true})).await;
    assert_eq!(events.take(), Vec::<Value>::new(), "a pin moves no number");
    flag(&app, "u2", "c1", "mute", json!({"muted": true})).await;
    assert_eq!(events.take()[0]["badge"], json!({"total": 0, "muted": 1, "mentions": 1}));
    app.mark_read("acme", "u2", "c1", 1).await;
    assert_eq!(
        events.take(),
        [json!({"user": "u2", "conversation": "c1", "unread": 0, "mentions": 0,
        "badge": {"total": 0, "muted": 0, "mentions": 0}})]
    );
    app.mark_read("acme", "u2", "c1", 1).await;
    assert_eq!(events.take(), Vec::<Value>::new(), "a mark-read that changes nothing publishes nothing");
    messages(&app, "c1", 2, 1, 1_000).await;
    recall(&app, "c1", 2, &["u2", "u3"]).await;
    let unread: Vec<(String, u64)> = events
        .take()
        .iter()
        .map(|e| (e["user"].as_str().unwrap().to_string(), e["unread"].as_u64().unwrap()))
        .collect();
    // u3 joins at seq 2: both messages count for it. Each user's events
    // come in order (on a cluster, not those of different users).
    let of = |user: &str| -> Vec<u64> { unread.iter().filter(|(u, _)| u == user).map(|(_, n)| *n).collect() };
    assert_eq!((of("u2"), of("u3")), (vec![1, 0], vec![2, 1]));
    assert_eq!(unread.len(), 4, "{unread:?}");
    app.delete_conversation("acme", "c1", &["u1", "u2", "u3"]).await;
    assert_eq!(
        events.take(),
        [json!({"user": "u3", "conversation": "c1", "unread": 0, "mentions": 0,
        "badge": {"total": 0, "muted": 0, "mentions": 0}})],
        "only u3 had something unread in it"
    );
}
