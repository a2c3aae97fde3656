//! Mentions: a mention (or @all) counts until the user reads past it, muted or
//! not.

use serde_json::{Value, json};

use super::{badge_of, flag, row};
use crate::support::{App, message};

#[tokio::test]
async fn mentions_count_until_read_past_them_even_when_muted() {
    let app = App::start().await;
    let members = ["u1", "u2", "u3"];
    let mut touches = [
        message("acme", "c1", 1, 1_001, "u1", &members),
        message("acme", "c1", 2, 1_002, "u1", &members),
        message("acme", "c1", 3, 1_003, "u1", &members),
        message("acme", "c1", 4, 1_004, "u1", &members),
    ];
    touches[1]["mentions"] = json!(["u2"]);
    touches[2]["mention_all"] = json!(true);
    touches[3]["mentions"] = json!(["u3", "u1"]);
    // Out of order: the older mentions arrive after the newest message.
    for i in [3, 0, 2, 1] {
        assert_eq!(app.touch(touches[i].clone()).await.status, 200);
    }
    let mentions = |rows: Vec<Value>| row(&rows, "c1")["mentions"].as_u64().unwrap();
    assert_eq!(mentions(app.whole_list("acme", "u2", 20).await), 2);
    assert_eq!(mentions(app.whole_list("acme", "u3", 20).await), 2);
    assert_eq!(mentions(app.whole_list("acme", "u1", 20).await), 0, "the sender is never mentioned by itself");
    assert_eq!(app.touch(touches[1].clone()).await.body["applied"], false, "a replayed mention counts once");
    let read = app.mark_read("acme", "u2", "c1", 2).await.body;
    assert_eq!((read["unread"].clone(), read["mentions"].clone()), (json!(2), json!(1)));
    flag(&app, "u2", "c1", "mute", json!({"muted": true})).await;
    assert_eq!(
        badge_of(&app, "u2", "").await,
        json!({"total": 0, "muted": 2, "mentions": 1, "categories": {}, "source": "redis", "degraded": false})
    );
    assert_eq!(app.mark_read("acme", "u2", "c1", 4).await.body["badge"]["mentions"], 0);
}
