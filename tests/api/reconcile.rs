//! Reconcile on real data: what an app's views may hold does not read as
//! drift or stop a walk, and what no member can count any more leaves the
//! SQL store.

use serde_json::json;

use crate::store::{KINDS, Kind, MessageStore};
use crate::support::{App, Setup, message};

async fn app_on(store: &MessageStore) -> App {
    App::with(Setup { sql_url: Some(store.url.clone()), ..Setup::default() }).await
}

/// A JSONB preview column writes the JSON its own way (key order, spaces):
/// the same preview, not drift.
#[tokio::test]
async fn a_jsonb_preview_is_not_drift() {
    let store = MessageStore::create(Kind::Postgres).await;
    store.exec("DROP VIEW unread_conversation_heads", &[]).await;
    store
        .exec(
            "CREATE VIEW unread_conversation_heads AS SELECT tenant, conversation, last_seq, last_ts, \
             category, preview::jsonb AS preview FROM app_conversations",
            &[],
        )
        .await;
    let app = app_on(&store).await;
    store.create_conversation("acme", "c1", "chat", &["u1".to_string(), "u2".to_string()]).await;
    let mut touch = message("acme", "c1", 1, 1_000, "u1", &["u1", "u2"]);
    touch["preview"] = json!({"type": "text", "text": "hi", "sender_name": "Ann"});
    store.store_message("acme", "c1", 1, 1_000, "u1", &touch["preview"].to_string()).await;
    app.touch(touch).await;
    let report = app.reconcile(json!({"tenant": "acme", "users": ["u1", "u2"]})).await.body;
    assert_eq!(report["drifted"], 0, "{report}");
    drop(app);
    store.drop_database().await;
}

/// One bad row in the app's views is reported and skipped; the walk goes on
/// and every other conversation is right.
#[tokio::test]
async fn a_bad_row_in_the_views_is_skipped_not_fatal() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = app_on(&store).await;
        for id in ["good", "bad"] {
            store.create_conversation("acme", id, "chat", &["u1".to_string(), "u2".to_string()]).await;
            store.store_message("acme", id, 1, 1_000, "u1", "{}").await;
        }
        store.exec("UPDATE app_conversations SET last_ts = -5 WHERE conversation = 'bad'", &[]).await;
        let total = app.reconcile_all("acme").await;
        assert_eq!(total["checked"], 2, "{kind:?}: {total}");
        let rows = app.whole_list("acme", "u2", 20).await;
        assert_eq!(rows.len(), 1, "{kind:?}: {rows:?}");
        assert_eq!((rows[0]["id"].as_str(), rows[0]["unread"].as_u64()), (Some("good"), Some(1)), "{kind:?}");
        drop(app);
        store.drop_database().await;
    }
}

/// Mentions and recalls every member has read past leave the SQL store
/// when a walk completes; those someone can still count stay.
#[tokio::test]
async fn a_completed_walk_prunes_what_no_member_can_count() {
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = app_on(&store).await;
        store.create_conversation("acme", "g", "chat", &["u1".to_string(), "u2".to_string(), "u3".to_string()]).await;
        for seq in 1..=4 {
            let mut touch = message("acme", "g", seq, 1_000 + seq, "u1", &["u1", "u2", "u3"]);
            touch["mentions"] = json!(["u2"]);
            touch["mention_all"] = json!(seq == 3);
            store.store_message("acme", "g", seq, 1_000 + seq, "u1", &touch["preview"].to_string()).await;
            app.touch(touch).await;
        }
        app.recall("acme", "g", 1, &["u1", "u2", "u3"], None).await;
        app.recall("acme", "g", 4, &["u1", "u2", "u3"], None).await;
        app.mark_read("acme", "u2", "g", 3).await;
        app.mark_read("acme", "u3", "g", 2).await;
        let count = |table: &'static str| {
            let store = &store;
            async move { store.rows(&format!("SELECT COUNT(*) FROM {table}"), &[]).await[0][0].clone() }
        };
        assert_eq!(
            (count("unread_mentions").await, count("unread_recalls").await),
            ("5".into(), "2".into()),
            "{kind:?}"
        );
        let before = app.whole_list("acme", "u3", 20).await;
        app.reconcile_all("acme").await;
        // Left: u2's mention of 4 (u2 read 3), the @all of 3 (u3 read 2), the recall of 4.
        assert_eq!(
            (count("unread_mentions").await, count("unread_recalls").await),
            ("2".into(), "1".into()),
            "{kind:?}"
        );
        assert_eq!(app.whole_list("acme", "u3", 20).await, before, "{kind:?}");
        let report = app.reconcile(json!({"tenant": "acme", "users": ["u1", "u2", "u3"]})).await.body;
        assert_eq!(report["drifted"], 0, "{kind:?}: {report}");
        drop(app);
        store.drop_database().await;
    }
}
