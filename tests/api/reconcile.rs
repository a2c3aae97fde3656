//! Reconcile on real data: what an app's views may hold does not read as
//! drift or stop a walk, and what no member can count any more leaves the
//! SQL store.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::store::{KINDS, Kind, MessageStore, P, s};
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

/// A change on its way while a reconcile runs is no drift: a conversation's
/// first message the app stored and has not touched yet (Redis has no
/// state of that conversation), or a recall unread recorded in the store
/// and not yet in Redis. The reconcile reads a user whose state and truth
/// differ again a moment later, and only what still differs on its last
/// read is drift. Each round lands one such change in Redis at a random
/// moment early in a reconcile that began after the store had it (without
/// the second read, rounds report drift).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reconcile_racing_first_messages_and_recalls_reports_no_drift() {
    const MEMBERS: usize = 30;
    const ROUNDS: u64 = 30;
    for kind in KINDS {
        let store = MessageStore::create(kind).await;
        let app = Arc::new(app_on(&store).await);
        let members: Vec<String> = (0..MEMBERS).map(|i| format!("u{i}")).collect();
        let names: Vec<&str> = members.iter().map(String::as_str).collect();
        store.create_conversation("acme", "g", "chat", &members).await;
        for seq in 1..=ROUNDS {
            let body = message("acme", "g", seq, 1_000 + seq, "u0", &names);
            store.store_message("acme", "g", seq, 1_000 + seq, "u0", &body["preview"].to_string()).await;
            assert_eq!(app.touch(body).await.status, 200, "{kind:?}");
        }
        let started = Instant::now();
        assert_eq!(app.reconcile_all("acme").await["drifted"], 0, "{kind:?}");
        let reconcile_takes = started.elapsed();
        let mut rng = StdRng::seed_from_u64(5);
        for round in 1..=ROUNDS {
            // Early in the reconcile, and well before its second read.
            let delay = reconcile_takes.mul_f64(rng.random_range(0.0..0.25)).min(Duration::from_millis(30));
            let partner = members[round as usize % MEMBERS].as_str();
            let first = format!("d{round}");
            if round % 2 == 0 {
                let seq = P::I(round as i64);
                store
                    .exec(
                        "INSERT INTO unread_recalls (tenant, conversation, seq) VALUES (?, ?, ?)",
                        &[s("acme"), s("g"), seq],
                    )
                    .await;
            } else {
                store.create_conversation("acme", &first, "chat", &["u0".to_string(), partner.to_string()]).await;
                store.store_message("acme", &first, 1, 2_000 + round, "u0", "{}").await;
            }
            let reconciling = app.clone();
            let reconcile = tokio::spawn(async move { reconciling.reconcile_all("acme").await });
            tokio::time::sleep(delay).await;
            let answer = match round % 2 {
                0 => app.recall("acme", "g", round, &names, None).await,
                _ => app.touch(message("acme", &first, 1, 2_000 + round, "u0", &["u0", partner])).await,
            };
            assert_eq!(answer.status, 200, "{kind:?} round {round}");
            let report = reconcile.await.unwrap();
            assert_eq!(report["drifted"], 0, "{kind:?} round {round}: {report}");
        }
        // Every member counts the group's messages less the recalled half,
        // and each partner its first message.
        for user in ["u1", "u2", "u29"] {
            let row = app.row("acme", user, "g").await.unwrap();
            assert_eq!(row["unread"].as_u64(), Some(ROUNDS - ROUNDS / 2), "{kind:?} {user}: {row}");
        }
        assert_eq!(app.row("acme", "u29", "d29").await.unwrap()["unread"].as_u64(), Some(1), "{kind:?}");
        drop(app);
        store.drop_database().await;
    }
}
