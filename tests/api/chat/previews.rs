//! The lock-screen preview: only allow-listed fields, text cut short.

use serde_json::json;

use crate::support::{App, Setup, message};

#[tokio::test]
async fn the_lockscreen_preview_keeps_allowed_fields_and_cuts_text() {
    let app = App::start().await;
    let mut touch = message("acme", "c1", 1, 1_000, "u1", &["u1", "u2"]);
    let text = "Meet me at the station at 10, bring the documents 📄 please";
    touch["preview"] = json!({"type": "text", "sender_name": "Ann", "text": text, "phone": "+1 555 0100"});
    app.touch(touch.clone()).await;
    let full = app.list("acme", "u2", "").await.body;
    assert_eq!(full["conversations"][0]["preview"], touch["preview"], "the stored preview comes back as given");
    let locked = app.list("acme", "u2", "preview=lockscreen").await.body;
    let cut: String = text.chars().take(40).collect();
    assert_eq!(
        locked["conversations"][0]["preview"],
        json!({"type": "text", "sender_name": "Ann", "text": format!("{cut}…")})
    );
    assert_eq!(app.list("acme", "u2", "preview=tiny").await.status, 400);
}

/// Every text a key holds (names, fields, values), to find where a text is stored.
fn holders(app: &App, text: &str) -> Vec<String> {
    app.redis
        .key_space()
        .into_iter()
        .filter(|(_, key)| key.value.to_string().contains(text))
        .map(|(name, _)| name)
        .collect()
}

#[tokio::test]
async fn a_preview_is_stored_once_for_every_member() {
    let app = App::start().await;
    let members = ["u1", "u2", "u3", "u4", "u5"];
    let mut touch = message("acme", "g", 1, 1_000, "u1", &members);
    touch["preview"] = json!({"type": "text", "text": "one copy only"});
    app.touch(touch.clone()).await;
    for user in members {
        assert_eq!(app.row("acme", user, "g").await.unwrap()["preview"], touch["preview"], "{user}");
    }
    assert_eq!(holders(&app, "one copy only"), ["un:v2:head:{acme:g}"], "the preview lives in the head alone");
    let ttl: i64 = redis::cmd("TTL").arg("un:v2:head:{acme:g}").query(&mut app.redis.connection().unwrap()).unwrap();
    assert!(ttl > 0 && ttl <= 90 * 24 * 3600, "a head goes when nobody lists it: {ttl}");
}

/// A member the app did not name in a newer message keeps their own last
/// message, and never sees the newer message's preview. On one Redis a list
/// reads its rows and their previews in one step, so the head keeps no
/// earlier messages and such a row shows none at once.
#[tokio::test]
async fn a_member_not_told_of_newer_messages_never_sees_their_preview() {
    let app = App::with(Setup::one_server()).await;
    let u3 = not_told_of_message_2(&app).await;
    assert_eq!(u3["preview"], json!({}), "u3's last message is not the head's: no preview rather than another's");
    let keys = app.redis.keys();
    assert!(!keys.iter().any(|key| key.ends_with(":earlier")), "one Redis keeps no earlier messages: {keys:?}");
}

/// On a cluster a list reads its rows, then their previews from the heads'
/// slots, so the head keeps the messages it held before for seconds: the
/// member sees their own last message's preview while it is held, then none.
#[tokio::test]
async fn a_member_not_told_of_newer_messages_on_a_cluster_never_sees_their_preview() {
    let app = App::with(Setup { cluster: true, ..Setup::default() }).await;
    let u3 = not_told_of_message_2(&app).await;
    assert_eq!(u3["preview"]["text"], "message 1", "u3's own last message, from the head's recent ones");
    // Recalled while still recent: the replacement shows there too.
    let hidden = json!({"type": "recalled"});
    assert_eq!(app.recall("acme", "c1", 1, &["u1", "u2", "u3"], Some(hidden.clone())).await.status, 200);
    assert_eq!(app.row("acme", "u3", "c1").await.unwrap()["preview"], hidden);
    // Once the recent messages are gone (seconds later), no preview at all.
    let earlier = "un:v2:head:{acme:c1}:earlier";
    let _: i64 = app.holder(earlier).command(&["DEL", earlier]);
    let u3 = app.row("acme", "u3", "c1").await.unwrap();
    assert_eq!(u3["preview"], json!({}), "u3's last message is not the head's: no preview rather than another's");
}

/// Message 1 to u1, u2 and u3, then message 2 to u1 and u2 only: u3's row,
/// once u2's shows message 2's preview.
async fn not_told_of_message_2(app: &App) -> serde_json::Value {
    app.touch(message("acme", "c1", 1, 1_000, "u1", &["u1", "u2", "u3"])).await;
    let mut aside = message("acme", "c1", 2, 1_001, "u1", &["u1", "u2"]);
    aside["preview"] = json!({"type": "text", "text": "not for u3"});
    app.touch(aside.clone()).await;
    assert_eq!(app.row("acme", "u2", "c1").await.unwrap()["preview"], aside["preview"]);
    let u3 = app.row("acme", "u3", "c1").await.unwrap();
    assert_eq!((u3["last_seq"].as_u64(), u3["unread"].as_u64()), (Some(1), Some(1)));
    u3
}

/// A message that comes while a page is read must not blank or mismatch a
/// row's preview: on one Redis the rows and previews are read in one step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_while_a_page_is_read_keeps_every_preview_right() {
    previews_stay_right_while_messages_come(App::with(Setup::one_server()).await).await;
}

/// On a cluster a page reads its rows, then their previews: a message that
/// comes in between is covered by the head's earlier messages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_between_a_pages_two_reads_on_a_cluster_keeps_every_preview_right() {
    previews_stay_right_while_messages_come(App::with(Setup { cluster: true, ..Setup::default() }).await).await;
}

async fn previews_stay_right_while_messages_come(app: App) {
    let app = std::sync::Arc::new(app);
    app.touch(message("acme", "c1", 1, 1_000, "u1", &["u1", "u2"])).await;
    let writer = {
        let app = app.clone();
        tokio::spawn(async move {
            for seq in 2..=400 {
                assert_eq!(app.touch(message("acme", "c1", seq, 1_000 + seq, "u1", &["u1", "u2"])).await.status, 200);
            }
        })
    };
    let mut pages = 0;
    while !writer.is_finished() {
        let page = app.list("acme", "u2", "").await.body;
        let row = &page["conversations"][0];
        assert_eq!(row["preview"]["text"], format!("message {}", row["last_seq"]), "{row}");
        pages += 1;
    }
    writer.await.unwrap();
    assert!(pages > 10, "the pages were read while messages came: {pages}");
}

#[tokio::test]
async fn a_deleted_conversation_leaves_no_preview_behind() {
    let app = App::start().await;
    let mut touch = message("acme", "c1", 1, 1_000, "u1", &["u1", "u2"]);
    touch["preview"] = json!({"type": "text", "text": "delete me"});
    app.touch(touch).await;
    assert_eq!(holders(&app, "delete me").len(), 1);
    assert_eq!(app.delete_conversation("acme", "c1", &["u1", "u2"]).await.status, 200);
    assert!(holders(&app, "delete me").is_empty());
    assert!(!app.redis.keys().iter().any(|key| key.starts_with("un:v2:head:")), "{:?}", app.redis.keys());
}

#[tokio::test]
async fn previews_recalls_leave_for_untouched_messages_are_bounded() {
    let app = App::start().await;
    app.touch(message("acme", "c1", 1, 1_000, "u1", &["u1", "u2"])).await;
    for seq in 2..=40 {
        let hidden = json!({"type": "recalled", "seq": seq});
        assert_eq!(app.recall("acme", "c1", seq, &["u1", "u2"], Some(hidden)).await.status, 200);
    }
    let recalls = "un:v2:head:{acme:c1}:recalls";
    let mut redis = app.holder(recalls).connection().unwrap();
    let pending: Vec<u64> = redis::cmd("HKEYS").arg(recalls).query(&mut redis).unwrap();
    assert_eq!(pending.iter().copied().collect::<std::collections::BTreeSet<_>>(), (25..=40).collect());
    // The newest are the ones kept: the touch of 40 shows its replacement.
    app.touch(message("acme", "c1", 40, 1_040, "u1", &["u1", "u2"])).await;
    let row = app.row("acme", "u2", "c1").await.unwrap();
    assert_eq!(row["preview"], json!({"type": "recalled", "seq": 40}));
    // Those below the last message go; the last message's own stays, so that
    // a rebuild from a truth read before the recall does not undo it.
    let left: Vec<u64> = redis::cmd("HKEYS").arg(recalls).query(&mut redis).unwrap();
    assert_eq!(left, [40], "replacements below the last message go");
    app.touch(message("acme", "c1", 41, 1_041, "u1", &["u1", "u2"])).await;
    let left: i64 = redis::cmd("EXISTS").arg(recalls).query(&mut redis).unwrap();
    assert_eq!(left, 0, "the next message takes the last one's replacement away");
}

/// A state written before previews moved into heads ends with its preview:
/// the row keeps showing it until a newer message comes.
#[tokio::test]
async fn rows_written_before_heads_keep_their_preview() {
    let app = App::start().await;
    app.touch(message("acme", "c1", 1, 1_000, "u1", &["u1", "u2"])).await;
    let mut redis = app.holder("un:v2:{acme:u2}:conv").connection().unwrap();
    let _: () = redis::cmd("HSET")
        .arg("un:v2:{acme:u2}:conv")
        .arg("c1")
        .arg(r#"1:0:0:0::chat::{"text":"earlier layout"}"#)
        .query(&mut redis)
        .unwrap();
    let _: i64 = app.holder("un:v2:head:{acme:c1}").command(&["DEL", "un:v2:head:{acme:c1}"]);
    let row = app.row("acme", "u2", "c1").await.unwrap();
    assert_eq!((row["unread"].as_u64(), &row["preview"]), (Some(1), &json!({"text": "earlier layout"})));
    app.mark_read("acme", "u2", "c1", 1).await;
    let row = app.row("acme", "u2", "c1").await.unwrap();
    assert_eq!((row["unread"].as_u64(), &row["preview"]), (Some(0), &json!({"text": "earlier layout"})));
    // A recall of that message hides its text there too.
    let hidden = json!({"type": "recalled"});
    assert_eq!(app.recall("acme", "c1", 1, &["u1", "u2"], Some(hidden.clone())).await.status, 200);
    assert_eq!(app.row("acme", "u2", "c1").await.unwrap()["preview"], hidden);
    app.touch(message("acme", "c1", 2, 1_001, "u1", &["u1", "u2"])).await;
    let row = app.row("acme", "u2", "c1").await.unwrap();
    assert_eq!((row["unread"].as_u64(), row["preview"]["text"].as_str()), (Some(1), Some("message 2")));
    let value: String = redis::cmd("HGET").arg("un:v2:{acme:u2}:conv").arg("c1").query(&mut redis).unwrap();
    assert!(!value.contains('{'), "a newer message ends the old preview: {value}");
}
