//! Recall: a recalled message or mention stops counting once, and recalling the
//! last message can replace its preview.

use serde_json::{Value, json};

use super::{badge_of, messages, recall, row};
use crate::support::{App, SERVICE_TOKEN, assert_badge_consistent, message};

#[tokio::test]
async fn a_recalled_message_stops_counting_once() {
    let app = App::start().await;
    messages(&app, "c1", 1, 5, 1_000).await;
    app.mark_read("acme", "u3", "c1", 3).await;
    let first = recall(&app, "c1", 4, &["u1", "u2", "u3"]).await;
    assert_eq!(first.body, json!({"conversation": "c1", "seq": 4, "changed": 2}));
    assert_eq!(recall(&app, "c1", 4, &["u1", "u2", "u3"]).await.body["changed"], 0, "a replay changes nothing");
    assert_eq!(recall(&app, "c1", 2, &["u2", "u3"]).await.body["changed"], 1, "u3 had read seq 2");
    let unread = |rows: Vec<Value>| row(&rows, "c1")["unread"].as_u64().unwrap();
    assert_eq!(unread(app.whole_list("acme", "u2", 20).await), 3);
    assert_eq!(unread(app.whole_list("acme", "u3", 20).await), 1);
    // A recall that overtakes its message's touch: the late touch never counts.
    assert_eq!(recall(&app, "c1", 6, &["u2"]).await.body["changed"], 0);
    messages(&app, "c1", 6, 1, 1_000).await;
    assert_eq!(unread(app.whole_list("acme", "u2", 20).await), 3);
    assert_eq!(app.mark_read("acme", "u2", "c1", 6).await.body["unread"], 0);
    assert_badge_consistent(&app, "acme", "u2").await;
    assert_badge_consistent(&app, "acme", "u3").await;
}

#[tokio::test]
async fn recalling_the_last_message_can_replace_its_preview() {
    let app = App::start().await;
    messages(&app, "c1", 1, 2, 1_000).await;
    app.mark_read("acme", "u3", "c1", 2).await;
    let preview = |rows: Vec<Value>| row(&rows, "c1")["preview"].clone();
    let shown = preview(app.whole_list("acme", "u2", 20).await);
    recall(&app, "c1", 1, &["u2", "u3"]).await;
    assert_eq!(preview(app.whole_list("acme", "u2", 20).await), shown, "not the last message: the preview stays");
    let body = json!({"tenant": "acme", "conversation": "c1", "seq": 2, "members": ["u2", "u3"],
        "preview": {"type": "recalled", "sender_name": "u1"}});
    let answer = app.send("POST", "/v1/recall", Some(SERVICE_TOKEN.to_string()), Some(body.to_string())).await;
    assert_eq!(answer.body["changed"], 1, "u3 had read it");
    for user in ["u2", "u3"] {
        assert_eq!(
            preview(app.whole_list("acme", user, 20).await),
            json!({"type": "recalled", "sender_name": "u1"}),
            "{user}"
        );
    }
    assert_eq!(row(&app.whole_list("acme", "u2", 20).await, "c1")["unread"], 0);
}

#[tokio::test]
async fn a_recalled_mention_stops_counting() {
    let app = App::start().await;
    let mut touch = message("acme", "c1", 1, 1_001, "u1", &["u1", "u2"]);
    touch["mentions"] = json!(["u2"]);
    app.touch(touch).await;
    assert_eq!(badge_of(&app, "u2", "").await["mentions"], 1);
    recall(&app, "c1", 1, &["u1", "u2"]).await;
    assert_eq!(
        badge_of(&app, "u2", "").await,
        json!({"total": 0, "muted": 0, "mentions": 0, "categories": {}, "source": "redis", "degraded": false})
    );
}
