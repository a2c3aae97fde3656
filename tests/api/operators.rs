//! What operators and clients can get wrong, made safe: a whole-tenant clear
//! must be asked for by name and a dry run writes nothing; a read cursor
//! far past the conversation is clamped; a variable that cannot be read is
//! a 503, never a silent default.

use serde_json::json;

use crate::store::{KINDS, MessageStore};
use crate::support::{App, Setup, assert_refused, message};

async fn clear(app: &App, body: serde_json::Value) -> crate::support::Answer {
    app.service("/v1/admin/clear-category", body).await
}

#[tokio::test]
async fn clearing_a_whole_tenant_must_be_asked_for_by_name() {
    let app = App::start().await;
    let mut note = message("acme", "n1", 1, 1_000, "bot", &["u1", "u2"]);
    note["category"] = json!("system");
    app.touch(note).await;
    let before = app.redis.key_space();
    for body in [
        json!({"tenant": "acme", "category": "system"}),
        json!({"tenant": "acme", "category": "system", "user": null}),
        json!({"tenant": "acme", "category": "system", "cursor": null}),
        json!({"tenant": "acme", "category": "system", "all_users": false}),
        json!({"tenant": "acme", "category": "system", "user": "u1", "all_users": true}),
    ] {
        assert_refused(&clear(&app, body.clone()).await, 400, "invalid_request", &body.to_string());
    }
    crate::support::assert_key_space_unchanged(&before, &app.redis.key_space(), "refused clears");
    let walk = clear(&app, json!({"tenant": "acme", "category": "system", "all_users": true, "cursor": null})).await;
    assert_eq!((walk.body["users"].as_u64(), walk.body["unread"].as_u64()), (Some(2), Some(2)), "{:?}", walk.body);
}

/// With SQL, a dry run reads the truth and writes nothing at all, not even
/// the repair of a user Redis lost.
#[tokio::test]
async fn a_dry_run_writes_nothing() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = App::with(Setup { sql_url: Some(store.url.clone()), ..Setup::default() }).await;
        store.create_conversation("acme", "n1", "system", &["u1".to_string(), "u2".to_string()]).await;
        let mut note = message("acme", "n1", 1, 1_000, "u1", &["u1", "u2"]);
        note["category"] = json!("system");
        store.store_message("acme", "n1", 1, 1_000, "u1", &note["preview"].to_string()).await;
        app.touch(note).await;
        app.redis.flush_all();
        let cursors = store.cursors("acme").await;
        let dry = clear(&app, json!({"tenant": "acme", "category": "system", "user": "u2", "dry_run": true})).await;
        assert_eq!((dry.status, dry.body["unread"].as_u64()), (200, Some(1)), "{kind:?}: {:?}", dry.body);
        assert!(app.redis.keys().is_empty(), "{kind:?}: a dry run wrote {:?}", app.redis.keys());
        assert_eq!(store.cursors("acme").await, cursors, "{kind:?}");
        drop(app);
        store.drop_database().await;
    }
}

/// A client sending a timestamp as a seq cannot silence a conversation.
#[tokio::test]
async fn a_read_cursor_far_past_the_last_message_is_clamped() {
    let app = App::start().await;
    for seq in 1..=5 {
        app.touch(message("acme", "c1", seq, 1_000 + seq, "u1", &["u1", "u2"])).await;
    }
    let read = app.mark_read("acme", "u2", "c1", 1_764_460_800_123).await;
    assert_eq!(read.body["read_seq"], 10_005, "{:?}", read.body);
    app.touch(message("acme", "c1", 10_006, 2_000, "u1", &["u1", "u2"])).await;
    assert_eq!(app.row("acme", "u2", "c1").await.unwrap()["unread"], 1);
}

/// A variable that is set but cannot be used is a 503 for every call that
/// needs it, and nothing is written (a silent default would trim users'
/// lists or run cache-only).
#[tokio::test]
async fn a_variable_that_cannot_be_used_is_a_503() {
    let app = App::with(Setup { variables: vec![("max_conversations", "many".to_string())], ..Setup::default() }).await;
    let touch = app.touch(message("acme", "c1", 1, 1_000, "u1", &["u1", "u2"])).await;
    assert_eq!((touch.status, touch.body["error"]["code"].as_str()), (503, Some("unavailable")), "{:?}", touch.body);
    assert_eq!(app.mark_read("acme", "u2", "c1", 1).await.status, 503);
    assert!(app.redis.keys().is_empty(), "{:?}", app.redis.keys());
}
